"""``ailower prompt KERNEL --arch A``: print the exact prompt a model provider would send.

The system prompt, then a line ``----- user -----``, then the first user turn (task, spec,
launch contract, the knowledge-base section with the target's sourced facts and the matching
transformations, Triton's TTGIR and PTX), byte for byte as :mod:`agent.prompts` renders them for
the loop without a GPU (``--gpu`` renders the GPU variant: ``evaluate`` offered). ``--part``
prints one of the two; ``--knowledge`` only the knowledge-base section. The output is
deterministic, so two runs (or two versions of ailower) can be diffed.

``register(app)`` adds the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "prompt_command", "render_prompt"]

_ARCHS = ("sm_89", "sm_90a", "sm_100a")


def render_prompt(spec: object, arch: str, *, variants: int = 1, gpu: bool = False,
                  knowledge_tokens: int = 2500, cache_dir: Path | None = None,
                  max_ptx_version: int = 90, part: str = "all") -> str:
    """The prompt text for ``spec`` on ``arch``, as the loop builds it.

    Args:
        spec: the :class:`~kernels.spec.KernelSpec`.
        arch: ``sm_89`` | ``sm_90a`` | ``sm_100a``.
        variants: ``K`` (above 1 the system prompt explains plan + variants).
        gpu: render as for a run with a GPU (the first compiled config stands in for the
            autotuned baseline, which only a GPU run knows).
        knowledge_tokens: budget of the knowledge-base section (0: none).
        cache_dir: reference-compile cache.
        max_ptx_version: PTX ISA cap of the reference compile.
        part: ``all`` | ``system`` | ``user`` | ``knowledge``.

    Raises:
        harness.ReferenceCompileError: Triton compiled no config.
        ValueError: unknown ``part``.
    """
    from agent.loop import LoopOptions, make_context
    from agent.prompts import initial_prompt, system_prompt
    from harness import compile_space
    from harness.errors import ReferenceCompileError

    if part not in ("all", "system", "user", "knowledge"):
        raise ValueError(f"part: all | system | user | knowledge, got {part!r}")
    refs, failures = compile_space(spec, arch, cache_dir=cache_dir,  # type: ignore[arg-type]
                                   max_ptx_version=max_ptx_version)
    if not refs:
        raise ReferenceCompileError(f"Triton compiled none of the configs of "
                                    f"{getattr(spec, 'name', spec)} for {arch}: "
                                    f"{failures[0] if failures else ''}")
    opts = LoopOptions(variants=variants, knowledge_tokens=knowledge_tokens, cache_dir=cache_dir)
    ctx = make_context(spec, arch, refs[0], gpu, opts)  # type: ignore[arg-type]
    if part == "knowledge":
        return ctx.knowledge
    if part == "system":
        return system_prompt(ctx)
    if part == "user":
        return initial_prompt(ctx)
    return system_prompt(ctx) + "\n----- user -----\n" + initial_prompt(ctx)


def prompt_command(
    kernel: Annotated[str, typer.Argument(help="suite kernel name or KernelSpec YAML/JSON file")],
    arch: Annotated[str, typer.Option(help="sm_89 | sm_90a | sm_100a")] = "sm_90a",
    variants: Annotated[int, typer.Option(min=1, max=8, help="K: variants per turn")] = 1,
    gpu: Annotated[bool, typer.Option("--gpu", help="as for a run with a GPU")] = False,
    knowledge_tokens: Annotated[int, typer.Option(min=0, max=20000,
                                                  help="token budget of the knowledge section")] = 2500,
    part: Annotated[str, typer.Option(help="all | system | user | knowledge")] = "all",
) -> None:
    """Print the exact prompt a model would get for KERNEL on --arch (deterministic: diff it)."""
    from kernels import get, load_spec, names

    from common.settings import get_settings

    if arch not in _ARCHS:
        raise typer.BadParameter(f"choose one of {', '.join(_ARCHS)}", param_hint="--arch")
    if part not in ("all", "system", "user", "knowledge"):
        raise typer.BadParameter("all | system | user | knowledge", param_hint="--part")
    if kernel.endswith((".yaml", ".yml", ".json")):
        spec = load_spec(kernel)
    elif kernel in names():
        spec = get(kernel)
    else:
        raise typer.BadParameter(f"no suite kernel {kernel!r} ('ailower kernels' lists them)",
                                 param_hint="KERNEL")
    settings = get_settings()
    text = render_prompt(spec, arch, variants=variants, gpu=gpu,
                         knowledge_tokens=knowledge_tokens, cache_dir=settings.cache_dir,
                         max_ptx_version=settings.max_ptx_version, part=part)
    typer.echo(text)


def register(app: typer.Typer) -> None:
    """Add ``ailower prompt`` to ``app``."""
    app.command("prompt")(prompt_command)
