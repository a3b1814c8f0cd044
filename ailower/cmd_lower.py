"""``ailower lower``: propose, assemble, verify and evaluate candidates; keep the best."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ailower._common import (_fail, _load_spec, _make_provider, _print_result, _resolve_arch,
                             console, err, get_settings)

__all__ = ["lower", "register"]


def lower(
    kernel: Annotated[str, typer.Argument(help="suite name, spec file, or path.py::function (with --spec)")],
    spec: Annotated[Path | None, typer.Option("--spec", help="KernelSpec YAML/JSON file")] = None,
    arch: Annotated[str, typer.Option(help="auto | sm_89 | sm_90a | sm_100a")] = "auto",
    provider: Annotated[str | None, typer.Option(help="triton | anthropic | openai | search | expert | replay")] = None,
    model: Annotated[str | None, typer.Option(help="model name for anthropic/openai")] = None,
    base_url: Annotated[str | None, typer.Option(help="API base URL (OpenAI-compatible servers)")] = None,
    iterations: Annotated[int | None, typer.Option(min=1, help="iteration budget")] = None,
    out: Annotated[Path | None, typer.Option(help="output folder (default ./ailower-out/KERNEL-ARCH)")] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="skip GPU evaluation even if a GPU is present")] = False,
    space: Annotated[str | None, typer.Option(
        "--space", help="suite kernels: autotune space of the baseline, wide (default, "
                        "AILOWER_AUTOTUNE_SPACE) or narrow (the spaces before issue 22)")] = None,
    pipeline: Annotated[bool, typer.Option(
        "--pipeline", help="also time the best candidate in a pipeline context (a producer "
                           "writes its inputs, a consumer reads its outputs), next to the "
                           "isolated timing; GPU runs only")] = False,
) -> None:
    """Lower KERNEL to PTX: propose, assemble, verify, evaluate; write the best PTX, cubin, report."""
    from agent.loop import LoopOptions
    from agent.store import RunStore
    from ailower._run import execute_run, select_evaluator

    settings = get_settings()
    ks = _load_spec(kernel, spec, space)
    ks.load_reference()  # a broken reference fails now, not after the work (SpecError)
    from kernels.lint import out_read_before_write

    for finding in out_read_before_write(ks):
        err.print(f"[yellow]warning:[/] {escape(finding.message())}")
    target, dev = _resolve_arch(arch)
    prov_name = provider or settings.provider
    prov = _make_provider(prov_name, model or settings.model, base_url, settings)
    store = RunStore(settings.database_url)  # a bad database URL fails before any work
    evaluator, gpu_note = select_evaluator(target, dev, no_gpu=no_gpu, settings=settings)
    out_dir = out or Path("ailower-out") / f"{ks.name}-{target}"
    opts = LoopOptions(iterations=iterations or settings.iterations, gpu=evaluator is not None,
                       ptxas=settings.ptxas, cache_dir=settings.cache_dir,
                       max_ptx_version=settings.max_ptx_version, pipeline=pipeline,
                       max_configs=settings.autotune_max_configs)
    console.print(f"[bold]ailower lower[/] {escape(ks.name)} -> {target} with provider "
                  f"[cyan]{escape(prov_name)}[/] (up to {opts.iterations} iterations)")
    if gpu_note and evaluator is None:
        console.print(f"[yellow]{escape(gpu_note)}[/]: static path (compile, assemble, verify) and "
                      "emulated correctness on the CPU")
    elif gpu_note:
        console.print(escape(gpu_note))
    result, _report, _run_id, _folder = execute_run(
        ks, target, prov, opts, evaluator=evaluator, gpu_note=gpu_note, out_dir=out_dir,
        model=model or settings.model, store=store, console=console, print_result=_print_result)
    if result.iterations and all(r.verdict == "rejected-provider" for r in result.iterations):
        _fail(f"the provider {prov_name!r} produced no candidate: "
              f"{result.iterations[-1].provider_error}")
    if result.best_candidate is None:
        from agent.loop import reference_suspect

        console.print("[red]no valid candidate[/]")
        hint = reference_suspect(result)
        if hint:
            console.print(f"[yellow]{escape(hint)}[/]")
        raise typer.Exit(1)




def register(app: typer.Typer) -> None:
    """Add ``ailower lower`` to ``app``."""
    app.command("lower")(lower)
