"""The job runner: one process per job attempt, started by a job slot (:mod:`server.workers`).

``python -m server.runner JOB_ID OWNER`` loads the job; for a submitted spec it compiles the source
in one box and runs :func:`agent.loop.lower` on the box's output in a second box
(:mod:`server.sandbox`; model calls are made here and relayed), for a suite kernel it runs the
loop here (the loop spawns the GPU worker subprocess itself when a GPU matching the arch is
present); it appends every progress event to the
job's event log, writes the artifacts (best PTX, cubin, ``report.json``, ``transcript.jsonl``)
under the job folder and records them, then finishes the job. Provider credentials reach this
process through its environment only (set by the slot from the server settings); every event,
artifact and error text is redacted against them before it is stored.

Exit status: 0 the job was finished (succeeded or failed) by this runner, 3 this runner no longer
owned the job.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from agent.providers.base import Proposal, ProposalContext, Provider, ToolExecutor, redact

__all__ = ["CostCappedProvider", "run_job", "summarize"]


class CostCappedProvider(Provider):
    """Wraps a paid provider: after each proposal, prices its token usage and, once the spend
    reaches ``max_cost_usd``, answers ``exhausted`` so the loop stops.

    Args:
        inner: the provider.
        max_cost_usd: the cap (USD).
        price_in, price_out: USD per million input / output tokens (server settings).
    """

    def __init__(self, inner: Provider, max_cost_usd: float, price_in: float, price_out: float):
        self.inner, self.cap = inner, max_cost_usd
        self.price_in, self.price_out = price_in, price_out
        self.spent = 0.0
        self.name = inner.name

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """Delegate unless the cap is reached; add this proposal's cost to ``spent``."""
        if self.spent >= self.cap:
            return Proposal(error=f"cost cap reached: ${self.spent:.4f} of ${self.cap:.4f}",
                            error_kind="exhausted")
        prop = self.inner.propose(ctx, feedback, tools)
        u = prop.usage or {}
        self.spent += (u.get("input_tokens", 0) * self.price_in
                       + u.get("output_tokens", 0) * self.price_out) / 1e6
        prop.events.append({"type": "cost", "usd_total": round(self.spent, 6)})
        return prop


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """The job summary shown by ``GET /v1/lowerings/{id}``, from a ``report.json`` document."""
    ver = report.get("verifier") or {}
    ev = report.get("evaluation") or {}
    cand = report.get("candidate")
    best = None
    if cand is not None:
        findings = ver.get("findings", [])
        best = {"iteration": cand.get("iteration"), "origin": cand.get("origin"),
                "digest": cand.get("digest"),
                "verdict": next((r["verdict"] for r in report["iterations"]
                                 if r["iteration"] == cand.get("iteration")), None),
                "assembly_ok": (report.get("assembly") or {}).get("ok"),
                "registers": (report.get("assembly") or {}).get("registers"),
                "verifier_ok": not any(f.get("severity") == "error" for f in findings),
                "verifier_findings": len(findings),
                "evaluation_status": ev.get("status"),
                "speedup": report.get("speedup")}
    return {"best": best, "stop_reason": report.get("stop_reason"), "gpu": report.get("gpu"),
            "gpu_note": report.get("gpu_note"), "iterations": len(report.get("iterations", []))}


def _iteration_event(data: dict[str, Any]) -> dict[str, Any]:
    """The SSE payload of an iteration: proposal, assembly, verifier and evaluation results."""
    asm = data.get("assembly") or {}
    ver = data.get("verifier") or {}
    return {
        "iteration": data.get("iteration"), "origin": data.get("origin"),
        "verdict": data.get("verdict"), "candidate_digest": data.get("candidate_digest"),
        "provider_error": data.get("provider_error"),
        "assembly": {"ok": asm.get("ok"), "registers": asm.get("registers"),
                     "spill_stores": asm.get("spill_stores"),
                     "diagnostics": asm.get("diagnostics", [])[:20]} if asm else None,
        "verifier": {"ok": ver.get("ok"), "findings": ver.get("findings", [])[:50]} if ver else None,
        "evaluation_status": data.get("evaluation_status"), "speedup": data.get("speedup"),
        "seconds": data.get("seconds"), "feedback": data.get("feedback"),
    }


def run_job(job_id: str, owner: str) -> int:
    """Run one attempt of job ``job_id`` as lease owner ``owner``; see the module docstring.

    A source job's work is done in boxes (:mod:`server.sandbox`) under a fresh folder
    ``<job>/box/attempt-N`` (whatever an earlier attempt left is removed first), and the whole
    ``<job>/box`` folder is removed when the attempt ends: only the job's own artifacts
    (``best.ptx``, ``best.cubin``, ``report.json``, ``transcript.jsonl``) stay.
    """
    from agent.loop import build_report
    from harness import GPUEvaluator, device_arch, gpu_available
    from kernels import KernelSpec, get
    from server import jobs as J
    from server.db import Job, make_engine, make_sessionmaker
    from server.sandbox import forbid_text_source_import
    from server.settings import get_server_settings

    settings, ss = get_server_settings()
    secrets = [*ss.secrets(), *(os.environ[k] for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
                                if os.environ.get(k))]
    engine = make_engine(settings.database_url)
    Session = make_sessionmaker(engine)
    with Session() as s:
        job = s.get(Job, job_id)
        if job is None or job.status != "running" or job.lease_owner != owner:
            return 3
        req, attempt = dict(job.request), job.attempts
    folder = J.job_dir(settings.data_dir, job_id)
    folder.mkdir(parents=True, exist_ok=True)

    def emit(kind: str, data: dict[str, Any]) -> None:
        with Session() as s:
            J.add_event(s, job_id, kind, redact(json.loads(json.dumps(data, default=str)), secrets),
                        attempt)

    def progress(**kw: Any) -> None:
        with Session() as s:
            j = s.get(Job, job_id)
            if j is not None and j.lease_owner == owner:
                j.progress = {**(j.progress or {}), **kw, "attempt": attempt}
                s.commit()

    def fail(kind: str, message: str) -> int:
        message = redact(message, secrets)
        emit("failed", {"type": kind, "message": message})
        with Session() as s:
            J.finish(s, job_id, owner, "failed", error={"type": kind, "message": message})
        return 0

    budget = req.get("budget") or {}
    arch = req["arch"]
    emit("started", {"attempt": attempt, "arch": arch, "provider": req["provider"]})
    gpu_ok, why = gpu_available()
    dev = device_arch() if gpu_ok else None
    gpu, gpu_note = False, ""
    if not gpu_ok:
        gpu_note = f"GPU evaluation skipped: {why}"
    elif dev != arch:
        gpu_note = f"GPU evaluation skipped: the GPU is {dev}, the target is {arch}"
    else:
        gpu = True
    provider = _provider(req, budget, ss, settings)
    iterations = int(budget.get("iterations", settings.iterations))
    transcript_path = folder / "transcript.jsonl"
    transcript_path.unlink(missing_ok=True)

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "iteration":
            emit("iteration", _iteration_event(data))
            progress(stage="iterating", iteration=data.get("iteration"),
                     last_verdict=data.get("verdict"))
        else:
            emit(kind, data)
            if kind == "baseline":
                progress(stage="iterating", baseline_ms=data.get("median_ms"))
            elif kind == "reference_compiled":
                progress(stage="baseline" if gpu else "iterating")

    t0 = time.monotonic()
    if req.get("kernel"):
        from agent.loop import LoopOptions, Transcript, lower

        spec = get(req["kernel"])
        evaluator = GPUEvaluator(hang_timeout_s=settings.hang_timeout_s,
                                 job_timeout_s=settings.job_timeout_s,
                                 input_cache=settings.cache_dir) if gpu else None
        opts = LoopOptions(iterations=iterations, gpu=gpu, ptxas=settings.ptxas,
                           cache_dir=settings.cache_dir, max_ptx_version=settings.max_ptx_version)
        progress(stage="reference-compile", iteration=0, iterations=iterations, gpu=gpu)
        try:
            result = lower(spec, arch, provider or _triton(settings, settings.cache_dir), opts,
                           evaluator=evaluator, transcript=Transcript(transcript_path),
                           on_event=on_event)
        except Exception as exc:  # the loop's documented failures and ailower bugs: job fails
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            return fail(type(exc).__name__, detail[:4000])
    else:
        forbid_text_source_import()  # this process never imports the submitted text
        spec = KernelSpec.model_validate(req["spec"])
        box_root = folder / "box"
        shutil.rmtree(box_root, ignore_errors=True)  # an earlier attempt's boxes: discarded
        try:
            result = _boxed_source_job(spec, req, box_root / f"attempt-{attempt}", settings, ss,
                                       gpu, iterations, provider, progress, emit, on_event,
                                       transcript_path, budget)
        except _JobFailed as exc:
            return fail(exc.kind, str(exc))
        finally:
            shutil.rmtree(box_root, ignore_errors=True)  # box output is gone after the job
    result.gpu_note = gpu_note
    report = redact(build_report(result), secrets)
    report["job_id"] = job_id
    report["seconds"] = round(time.monotonic() - t0, 3)
    with Session() as s:
        if result.best_candidate is not None:
            ptx = folder / "best.ptx"  # fixed names: nothing the client chose reaches the disk
            ptx.write_text(result.best_candidate.ptx)
            J.add_artifact(s, job_id, "ptx", ptx, "text/plain; charset=utf-8")
            if result.best_cubin:
                cub = folder / "best.cubin"
                cub.write_bytes(result.best_cubin)
                J.add_artifact(s, job_id, "cubin", cub, "application/octet-stream")
        rep = folder / "report.json"
        rep.write_text(json.dumps(report, indent=2, default=str))
        J.add_artifact(s, job_id, "report", rep, "application/json")
        if secrets and transcript_path.exists():
            transcript_path.write_text(redact(transcript_path.read_text(), secrets))
        if transcript_path.exists():
            J.add_artifact(s, job_id, "transcript", transcript_path, "application/x-ndjson")
    try:
        from agent.store import RunStore

        RunStore(settings.database_url).record(result, report, model=req.get("model"),
                                               out_dir=folder)
    except Exception as exc:  # the run table is a convenience; the job's own record is complete
        emit("warning", {"message": f"could not record the run in the runs table: {exc}"})
    summary = summarize(report)
    with Session() as s:
        if result.best_candidate is None:
            emit("failed", {"type": "no-valid-candidate", "message": "no valid candidate",
                             "stop_reason": result.stop_reason})
            ok = J.finish(s, job_id, owner, "failed", summary=summary,
                          error={"type": "no-valid-candidate",
                                 "message": f"no valid candidate ({result.stop_reason})"})
        else:
            emit("succeeded", summary)
            ok = J.finish(s, job_id, owner, "succeeded", summary=summary)
    return 0 if ok else 3


class _JobFailed(Exception):
    """A source job's box failed; ``kind`` is the job error's type."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _triton(settings: Any, cache_dir: Path) -> Provider:
    from agent.providers.triton import TritonProvider

    return TritonProvider(cache_dir=cache_dir, max_ptx_version=settings.max_ptx_version)


def _provider(req: dict[str, Any], budget: dict[str, Any], ss: Any, settings: Any
              ) -> Provider | None:
    """The job's model provider (cost-capped where the job asks), or None for ``triton``."""
    provider: Provider
    if req["provider"] == "triton":
        return None
    if req["provider"] == "search":  # suite kernels only (server.submit refuses a spec)
        from agent.providers.search import SearchProvider

        return SearchProvider(cache_dir=settings.cache_dir,
                              max_ptx_version=settings.max_ptx_version, ptxas=settings.ptxas)
    if req["provider"] == "expert":  # suite kernels only (server.submit refuses a spec)
        from agent.providers.expert import ExpertProvider

        return ExpertProvider(cache_dir=settings.cache_dir)
    if req["provider"] == "anthropic":
        from agent.providers.anthropic import AnthropicProvider

        provider = AnthropicProvider(model=req["model"])
    else:
        from agent.providers.openai import OpenAIProvider

        provider = OpenAIProvider(model=req["model"], base_url=ss.openai_base_url)
    if budget.get("max_cost_usd"):
        p_in, p_out = ss.price_per_mtok[req["model"]]
        provider = CostCappedProvider(provider, budget["max_cost_usd"], p_in, p_out)
    return provider


def _gpu_devices() -> list[str]:
    """The NVIDIA device nodes a boxed GPU evaluation needs (``/dev/nvidia*``)."""
    return sorted(str(p) for p in Path("/dev").glob("nvidia*") if not p.is_dir())


def _boxed_source_job(spec: Any, req: dict[str, Any], work: Path, settings: Any, ss: Any,
                      gpu: bool, iterations: int, provider: Provider | None, progress: Any,
                      emit: Any, on_event: Any, transcript_path: Path, budget: dict[str, Any]):
    """A source job: the compile in one box, the loop on its output in a second; returns the
    validated :class:`agent.loop.LoweringResult`.

    Raises:
        _JobFailed: a box failed or was killed (the job fails with that reason).
    """
    from agent.loop import LoweringResult
    from harness.ptxas import resolve_ptxas
    from server.sandbox import SandboxError, compile_untrusted, lower_in_box

    slot = int(os.environ.get("AILOWER_SLOT", "0"))  # set by the job slot: its own uid
    limits = ss.sandbox_limits(slot)
    progress(stage="sandbox-compile")
    try:
        sb = compile_untrusted(spec.model_dump(mode="json"), req["arch"], work=work / "compile",
                               max_ptx_version=settings.max_ptx_version, limits=limits,
                               exclude=[settings.data_dir])
    except SandboxError as exc:
        raise _JobFailed("sandbox-compile", str(exc)) from None
    emit("sandbox_compiled", {"compiled": sb.compiled, "failures": sb.failures,
                              "seconds": round(sb.seconds, 3)})
    if not sb.complete:
        # the runner must find every config in the cache: it never imports the source
        raise _JobFailed("reference-compile", "every config of a submitted spec must compile "
                         f"(prune the space with constraints); Triton failed on: {sb.failures}")
    progress(stage="reference-compile", iteration=0, iterations=iterations, gpu=gpu)
    wall = float(budget.get("wall_time_s", 900.0))
    box_limits = dataclasses.replace(limits, wall_s=wall + 30, cpu_s=int(wall) + 30,
                                     memory_mb=ss.sandbox_memory_mb,
                                     # CUDA reserves address space far past any RSS: on a GPU
                                     # the memory cgroup is the limit
                                     **({"as_limit": False} if gpu else {}))
    try:
        ptxas = resolve_ptxas(req["arch"], settings.ptxas)[0]
    except Exception as exc:  # PtxasNotFound / UsageError: the job fails with the reason
        raise _JobFailed(type(exc).__name__, str(exc)) from None
    try:
        data, cubin, _run = lower_in_box(
            {"spec": spec.model_dump(mode="json"), "arch": req["arch"], "iterations": iterations,
             "gpu": gpu, "max_ptx_version": settings.max_ptx_version, "provider": req["provider"],
             "hang_timeout_s": settings.hang_timeout_s, "job_timeout_s": settings.job_timeout_s},
            cache=work / "compile" / "cache", work=work / "loop", limits=box_limits,
            provider=provider, on_event=on_event, exclude=[settings.data_dir], ptxas=ptxas,
            devices=_gpu_devices() if gpu else None)
    except SandboxError as exc:
        raise _JobFailed("job-box", str(exc)) from None
    try:
        result = LoweringResult.model_validate(data)
    except ValueError as exc:
        raise _JobFailed("job-box", f"the job's box answered a malformed result: {exc}") from None
    result.best_cubin = cubin or None
    tx = work / "loop" / "transcript.jsonl"
    if tx.is_file():
        shutil.copyfile(tx, transcript_path)
    return result


def main() -> None:
    """``python -m server.runner JOB_ID OWNER``."""
    if len(sys.argv) != 3:
        sys.stderr.write("usage: python -m server.runner JOB_ID OWNER\n")
        sys.exit(2)
    sys.exit(run_job(sys.argv[1], sys.argv[2]))


if __name__ == "__main__":
    main()
