"""``ailower export RUN --triton-override DIR``: a recorded run's best PTX, in the layout Triton's
kernel override reads (:mod:`export`), so an unmodified Triton program picks it up::

    TRITON_KERNEL_OVERRIDE=1 TRITON_OVERRIDE_DIR=DIR TRITON_CACHE_DIR=DIR/cache python prog.py

Exit status: 0 written, 2 the run cannot be exported (no PTX, a launch contract Triton's launcher
cannot reproduce, a spec that no longer matches the run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "export_command"]


def export_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="run id (see 'ailower runs'), or 'latest'")],
    triton_override: Annotated[Path, typer.Option(
        "--triton-override", metavar="DIR", help="write Triton kernel-override files into DIR")],
    spec: Annotated[Path | None, typer.Option(
        "--spec", help="the run's KernelSpec file (for kernels outside the suite)")] = None,
    kernel: Annotated[str | None, typer.Option(
        help="the run's kernel as given to 'lower' (path.py::function with --spec)")] = None,
    size: Annotated[str, typer.Option(help="spec size for derived constexprs: bench | verify")] = "bench",
    json_out: Annotated[bool, typer.Option("--json", help="print the manifest as JSON")] = False,
) -> None:
    """Export a run's best PTX for Triton's kernel override (TRITON_KERNEL_OVERRIDE=1,
    TRITON_OVERRIDE_DIR=DIR): an unmodified Triton program then runs the lowered kernel."""
    from ailower._output import print_json
    from ailower._common import CliFailure, _load_spec, console, get_settings
    from ailower.cmd_runs import load_run
    from export import ExportError, triton_override as write_override

    if size not in ("bench", "verify"):
        raise CliFailure(f"--size {size!r}: choose bench or verify")
    row = load_run(run_id)
    if row.best_ptx is None:
        raise CliFailure(f"run #{row.id} has no PTX to export: it found no valid candidate "
                         f"({row.stop_reason})")
    if kernel is None and spec is None:
        from kernels import names

        if row.kernel not in names():
            raise CliFailure(f"run #{row.id} is of {row.kernel!r}, which is not a suite kernel: "
                             "give the spec it was lowered from (--kernel SPEC.yaml, or --kernel "
                             "FILE.py::fn --spec SPEC.yaml)")
    ks = _load_spec(kernel or row.kernel, spec)
    if ks.identity() != row.spec_id:
        raise CliFailure(f"run #{row.id} was made with spec {row.spec_id} of {row.kernel!r}, but "
                         f"{kernel or row.kernel!r} is now spec {ks.identity()}: the kernel or its "
                         "spec changed since; pass the run's --kernel/--spec")
    cand = (row.report or {}).get("candidate") or {}
    if not cand.get("threads"):
        raise CliFailure(f"run #{row.id}: its report has no candidate launch settings "
                         "(threads); it cannot be exported")
    settings = get_settings()
    try:
        res = write_override(
            ks, row.best_ptx, triton_override, arch=row.arch, meta=dict(cand.get("meta") or {}),
            threads=int(cand["threads"]),
            dynamic_smem=int(cand.get("dynamic_smem") or 0),
            global_scratch_size=int(cand.get("global_scratch_size") or 0), size=size,
            run_id=row.id, candidate_digest=cand.get("digest"), cache_dir=settings.cache_dir,
            max_ptx_version=settings.max_ptx_version)
    except ExportError as exc:
        raise CliFailure(f"run #{row.id}: cannot export to {triton_override}: {exc}") from None
    if json_out:
        print_json(res.model_dump(mode="json"))
        return
    console.print(f"exported run #{row.id} ({res.kernel}, entry {res.entry}, {res.arch}) to "
                  f"{res.directory}: {len(res.entries)} specialisation(s)", markup=False)
    for e in res.entries:
        div = ", ".join(f"{k} % 16 {'== 0' if v else '!= 0'}" for k, v in e.divisible_by_16.items())
        console.print(f"  {e.file}" + (f"  ({div})" if div else ""), markup=False)
    console.print("run your Triton program with:", markup=False)
    console.print("  " + " ".join(f"{k}={v}" for k, v in res.env.items()) + " python YOUR_PROGRAM.py",
                  markup=False)
    for n in res.notes:
        console.print(f"note: {n}", markup=False)
    if row.best_verdict != "accepted":
        console.print(f"warning: run #{row.id}'s candidate was never checked on a GPU (verdict "
                      f"{row.best_verdict}): compare its results with Triton's before relying on "
                      "it", markup=False)


def register(app: typer.Typer) -> None:
    """Add ``export`` to ``app``."""
    app.command("export")(export_command)
