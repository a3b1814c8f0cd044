"""``ailower eval CAND.ptx --kernel K``: the full judgement of one hand-written PTX candidate.

The candidate goes through exactly what a candidate of ``ailower lower`` goes through (the agent
loop with a provider that proposes this one file, once): Triton compiles the kernel's autotune
space, the GPU autotunes the reference (when there is one), then ptxas, the verifier (with the
reference ABI), and the GPU evaluation (correctness on >= 3 seeds, interleaved timing, speedup).
The report is ``lower``'s report. Without a GPU (or with ``--no-gpu``) the judgement is static
(assembly and verification) and the output says so; an evaluator plug-in (see
:mod:`ailower._run`) is used when one is installed.

Exit status: 0 the candidate is valid (accepted, or passed every static check when GPU
evaluation was skipped), 1 it was rejected (ptxas, verifier or evaluation), 2 bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "eval_command", "parse_meta"]

def parse_meta(items: list[str] | None) -> dict[str, int]:
    """``["BLOCK_M=128,BLOCK_N=64", "X=2"]`` -> ``{"BLOCK_M": 128, "BLOCK_N": 64, "X": 2}``.

    Raises:
        ailower.cli.CliFailure: an item is not ``NAME=INTEGER``.
    """
    from ailower._common import CliFailure

    out: dict[str, int] = {}
    for item in items or []:
        for part in filter(None, (x.strip() for x in item.split(","))):
            name, eq, value = part.partition("=")
            if not eq or not name.strip().isidentifier():
                raise CliFailure(f"--meta {part!r}: expected NAME=INTEGER")
            try:
                v = int(value, 0)
            except ValueError:
                raise CliFailure(f"--meta {part!r}: {value!r} is not an integer") from None
            if not -2**31 <= v < 2**31:  # Triton types an int constexpr beyond i64 as an error
                raise CliFailure(f"--meta {part!r}: {v} is out of range (a meta-parameter is a "
                                 "32-bit integer)")
            out[name.strip()] = v
    return out


def parse_scratch(value: str | None) -> tuple[int, int] | None:
    """``--scratch BYTES[:ALIGN]`` -> ``(bytes, align)`` (align 1 when not given), None for None.

    Raises:
        CliFailure: not two non-negative integers, or an alignment that is not a power of two.
    """
    if value is None:
        return None
    from ailower._common import CliFailure

    size_s, _, align_s = value.partition(":")
    try:
        size, align = int(size_s), int(align_s or 1)
    except ValueError:
        raise CliFailure(f"--scratch {value!r}: give BYTES or BYTES:ALIGN (integers)") from None
    if size < 0 or align < 1 or align & (align - 1):
        raise CliFailure(f"--scratch {value!r}: BYTES must be >= 0 and ALIGN a power of two")
    return size, align


def eval_command(
    file: Annotated[Path, typer.Argument(metavar="CAND.ptx", help="the PTX candidate")],
    kernel: Annotated[str, typer.Option(help="suite kernel, spec file, or path.py::function "
                                             "(with --spec) the PTX implements")],
    spec: Annotated[Path | None, typer.Option("--spec", help="KernelSpec YAML/JSON file")] = None,
    arch: Annotated[str, typer.Option(help="auto | sm_89 | sm_90a | sm_100a")] = "auto",
    threads: Annotated[int | None, typer.Option(
        min=1, max=1024, help="threads per CTA (default: the PTX's .reqntid, else the reference's)")] = None,
    meta: Annotated[list[str] | None, typer.Option(
        help="meta-parameters for the grid, NAME=VALUE[,NAME=VALUE] (default: the reference config's)")] = None,
    smem: Annotated[int | None, typer.Option(
        min=0, help="dynamic shared memory per CTA in bytes (default: the reference's)")] = None,
    scratch: Annotated[str | None, typer.Option(
        help="Triton global scratch per CTA, BYTES[:ALIGN] (default: the reference's; an expert "
             "entry's launch.yaml gives it)")] = None,
    out: Annotated[Path | None, typer.Option(
        help="write report.json, transcript.jsonl (and the PTX, cubin when valid) here")] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="static judgement only")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print report.json on stdout")] = False,
) -> None:
    """Judge one PTX file as 'ailower lower' judges a candidate: assemble, verify, evaluate on
    the GPU (or say why not) against the autotuned Triton reference; exit 1 if it is rejected."""
    from agent.loop import LoopOptions
    from agent.store import RunStore
    from ailower._output import print_json
    from ailower._fileprovider import FileProvider
    from ailower._run import execute_run, select_evaluator
    from ailower._common import (
        _load_spec,
        _print_result,
        _resolve_arch,
        console,
        get_settings,
        read_ptx_file,
    )
    from rich.markup import escape

    settings = get_settings()
    text = read_ptx_file(file)
    if not text.strip():
        from ailower._common import CliFailure

        raise CliFailure(f"{file}: the file is empty")
    meta_values = parse_meta(meta)
    ks = _load_spec(kernel, spec)
    ks.load_reference()
    known = {n for c in ks.configs() for n in c.meta}
    unknown = sorted(set(meta_values) - known)
    if unknown:
        from ailower._output import did_you_mean
        from ailower._common import CliFailure

        raise CliFailure(f"--meta {unknown[0]!r}: {ks.name} has no such meta-parameter"
                         + (did_you_mean(unknown[0], known) or
                            (f"; it has {', '.join(sorted(known))}" if known else
                             "; it has none")))
    target, dev = _resolve_arch(arch)
    store = RunStore(settings.database_url)
    evaluator, gpu_note = select_evaluator(target, dev, no_gpu=no_gpu, settings=settings)
    prov = FileProvider(text, f"file:{file.name}", threads=threads, meta=meta_values,
                        dynamic_smem=smem, global_scratch=parse_scratch(scratch))
    opts = LoopOptions(iterations=1, gpu=evaluator is not None, ptxas=settings.ptxas,
                       cache_dir=settings.cache_dir, max_ptx_version=settings.max_ptx_version,
                       ptx_filename=str(file))  # diagnostics name the user's file
    log = console
    if json_out:  # progress to stderr, the report alone on stdout
        from ailower._common import err as log
    log.print(f"[bold]ailower eval[/] {escape(str(file))} as {escape(ks.name)} on {target}")
    if gpu_note:
        log.print(f"[yellow]{escape(gpu_note)}[/]"
                  + (": static judgement (assemble, verify) and emulated correctness on the CPU"
                     if evaluator is None else ""))
    result, report, _run_id, _folder = execute_run(
        ks, target, prov, opts, evaluator=evaluator, gpu_note=gpu_note, out_dir=out,
        model=None, store=store, console=log,
        print_result=(lambda r: _print_result(r, console=log)))
    rec = result.iterations[0] if result.iterations else None
    if json_out:
        print_json(report)
    elif rec is not None:
        console.print("[bold]judgement[/] (what the loop feeds back to a model):")
        console.print(rec.feedback, markup=False, highlight=False)
    if rec is None or rec.verdict not in ("accepted", "static-only"):
        if not json_out:
            console.print(f"[red]rejected[/]: {rec.verdict if rec else 'no candidate'}")
        raise typer.Exit(1)
    if not json_out:
        console.print("[green]valid[/]: " + ("correct, "
                      f"{rec.speedup:.3f}x vs autotuned Triton" if rec.verdict == "accepted"
                      else "passed ptxas and the verifier; GPU evaluation skipped"))


def register(app: typer.Typer) -> None:
    """Add ``eval`` to ``app``."""
    app.command("eval")(eval_command)
