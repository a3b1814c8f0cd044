"""One judged run, shared by ``ailower lower`` and ``ailower eval``: pick the evaluator, run the
agent loop, write the outputs safely, record the run, print the result.

``lower`` and ``eval`` differ only in the provider (a model, Triton's own PTX, or one PTX file);
the judgement (reference compile, autotuned baseline, ptxas, verifier, evaluation, report) is the
loop's (:func:`agent.loop.lower`), so the report of ``eval`` is the report of ``lower``.

Evaluators. A GPU whose arch matches the target gives :class:`harness.GPUEvaluator`. Without one,
an installed plug-in may supply another evaluator (e.g. an emulator): a Python entry point in the
group ``ailower.evaluators`` naming a factory ``factory(target: str, settings) -> evaluator |
None``. The evaluator must offer :class:`harness.GPUEvaluator`'s ``request(spec, job, kernels,
**kw)`` and ``run(request) -> harness.EvalResult``. With neither, the run is static (compile,
assemble, verify) and the report says why GPU evaluation was skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import nullcontext
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from rich.markup import escape

from ailower._outdir import OutputError, StagedOutput

__all__ = ["EVALUATOR_GROUP", "OutputError", "select_evaluator", "execute_run"]

EVALUATOR_GROUP = "ailower.evaluators"
"""Entry-point group for evaluator plug-ins (see the module docstring)."""


def select_evaluator(target: str, device: str | None, *, no_gpu: bool, settings: Any
                     ) -> tuple[Any | None, str]:
    """The evaluator for ``target`` and, when there is none, the sentence saying why.

    Args:
        target: the arch being lowered for (``sm_90a``, ...).
        device: the GPU's arch, or None without a usable GPU.
        no_gpu: ``--no-gpu`` was given.
        settings: :class:`ailower.settings.Settings`.

    Returns:
        ``(evaluator, note)``: a GPU evaluator with an empty note; or a plug-in evaluator with a
        note naming it; or ``(None, "GPU evaluation skipped: <reason>")``.
    """
    from harness import GPUEvaluator, gpu_available

    if no_gpu:
        reason = "--no-gpu"
    else:
        ok, why = gpu_available()
        if ok and device == target:
            return GPUEvaluator(hang_timeout_s=settings.hang_timeout_s,
                                job_timeout_s=settings.job_timeout_s,
                                input_cache=settings.cache_dir), ""
        reason = why if not ok else f"the GPU is {device}, the target is {target}"
    for ep in entry_points(group=EVALUATOR_GROUP):
        evaluator = ep.load()(target, settings)
        if evaluator is not None:
            return evaluator, f"evaluated by the {ep.name!r} evaluator plug-in ({reason})"
    return None, f"GPU evaluation skipped: {reason}"


def _progress(console: Any) -> tuple[Any, Any]:
    """A rich status line (only on a terminal) and the loop listener that updates it and prints
    one line per finished step."""
    status = console.status("compiling the autotune space with Triton ...") \
        if console.is_terminal else nullcontext()

    def on_event(kind: str, data: dict[str, Any]) -> None:
        upd = getattr(status, "update", None)
        if kind == "reference_compiled":
            console.print(f"  Triton compiled {data['configs']} configs in {data['seconds']:.1f} s")
            if upd:
                upd("autotuning the reference / judging the first candidate ...")
        elif kind == "baseline":
            console.print(f"  autotuned baseline: \\[{escape(data['config'])}] "
                          f"{data['median_ms']:.4f} ms")
        elif kind == "iteration":
            console.print(
                f"  iteration {data['iteration']}: {escape(data['origin'] or '-')} -> "
                f"{data['verdict']}"
                + (f" ({data['speedup']:.3f}x)" if data.get("speedup") else "")
                + (f": {escape(str(data['provider_error']))}" if data.get("provider_error") else ""))
            if upd:
                upd(f"iteration {data['iteration'] + 1}: waiting for the provider, assembling, "
                    "verifying ...")

    return status, on_event


def execute_run(ks: Any, target: str, prov: Any, opts: Any, *, evaluator: Any,
                gpu_note: str, out_dir: Path | None, model: str | None, store: Any, console: Any,
                print_result: Any) -> tuple[Any, dict[str, Any], int, Path | None]:
    """Run the loop and write its files to ``out_dir`` without ever losing an earlier result.

    Files go to a staging folder; a run with a valid candidate replaces ``out_dir`` (the earlier
    result moves to ``out_dir.prev``); any other outcome leaves ``out_dir`` alone and keeps its
    report and transcript in ``out_dir.failed`` (see :mod:`ailower._outdir`).

    Args:
        ks: the kernel spec; target: the arch; prov: the provider;
        opts: :class:`agent.loop.LoopOptions`; evaluator, gpu_note: from :func:`select_evaluator`;
        out_dir: the ``--out`` folder; None keeps no files (the run and its report are still
        recorded); model: recorded with the run; store: :class:`RunStore`;
        console: rich console for progress; print_result: ``(LoweringResult) -> None``.

    Returns:
        ``(result, report, run_id, folder)``: ``folder`` is where the files are now
        (``out_dir`` or ``out_dir.failed``; None when ``out_dir`` was None).

    Raises:
        OutputError: ``out_dir`` cannot be used (before any work is done).
        Whatever the loop raises (after the partial transcript was kept in ``out_dir.failed``).
    """
    keep_files = out_dir is not None
    if out_dir is None:  # nothing on disk: the report lives in the database (runs show ID)
        scratch = Path(tempfile.mkdtemp(prefix="ailower-run-"))
        out_dir = scratch / "out"
    try:
        return _execute(ks, target, prov, opts, evaluator=evaluator, gpu_note=gpu_note,
                        out_dir=out_dir, model=model, store=store, console=console,
                        print_result=print_result, keep_files=keep_files)
    finally:
        if not keep_files:
            shutil.rmtree(scratch, ignore_errors=True)


def _execute(ks: Any, target: str, prov: Any, opts: Any, *, evaluator: Any, gpu_note: str,
             out_dir: Path, model: str | None, store: Any, console: Any, print_result: Any,
             keep_files: bool) -> tuple[Any, dict[str, Any], int, Path | None]:
    from agent.loop import Transcript, build_report, lower as run_lower

    out = StagedOutput(out_dir)
    status, on_event = _progress(console)
    try:
        with status:
            result = run_lower(ks, target, prov, opts, evaluator=evaluator,
                               transcript=Transcript(out.path("transcript.jsonl")), on_event=on_event)
    except BaseException:
        kept = out.abandon()
        if kept is not None:
            console.print(f"  the partial transcript is kept in {kept}", markup=False)
        raise
    result.gpu_note = gpu_note
    report = build_report(result)
    ok = result.best_candidate is not None
    names = {"report": "report.json", "transcript": "transcript.jsonl"}
    if ok:
        names["ptx"] = f"{ks.name}.ptx"
        out.path(names["ptx"]).write_text(result.best_candidate.ptx)
        if result.best_cubin:
            names["cubin"] = f"{ks.name}.cubin"
            out.path(names["cubin"]).write_bytes(result.best_cubin)
    folder = out.final if ok else out.failed
    report["files"] = {k: str(folder / v) for k, v in names.items()} if keep_files else {}
    # the report reaches the disk before the database: a database failure loses nothing
    out.path("report.json").write_text(json.dumps(report, indent=2, default=str))
    if ok:
        prev = out.commit()
        if prev is not None and keep_files:
            console.print(f"  the previous result in {out_dir} is kept in {prev}", markup=False)
    else:
        out.abandon()
        if keep_files:
            console.print(f"  no valid candidate: {out_dir} is unchanged; this run's report and "
                          f"transcript are in {folder}", markup=False)
    run_id = store.record(result, report, model=model, out_dir=folder if keep_files else None)
    report["run_id"] = run_id
    tmp = folder / ".report.json.tmp"
    tmp.write_text(json.dumps(report, indent=2, default=str))
    os.replace(tmp, folder / "report.json")
    print_result(result)
    for k, v in report["files"].items():
        console.print(f"  {k:<10} {v}", markup=False)
    console.print(f"  run #{run_id} recorded in {store._safe_url()}", markup=False)
    return result, report, run_id, folder if keep_files else None
