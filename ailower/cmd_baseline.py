"""``ailower baseline --suite``: the autotuned Triton baseline of every suite kernel on this GPU.

The work is :mod:`harness.suite_baseline` (the harness room owns it; ``search`` uses its
:func:`~harness.suite_baseline.prepare`); this module only adds the command (:func:`register`).
"""

from pathlib import Path
from typing import Annotated, Any

from harness.suite_baseline import (  # noqa: F401  (re-exported: the command's library)
    LOW_ROOFLINE_REASONS,
    BaselineRow,
    SuiteBaselineReport,
    _roofline,
    measure_matmul_ceiling,
    prepare,
    render_table,
    suite_baseline,
)

__all__ = ["register"]


def register(app: Any) -> None:
    """Add ``ailower baseline`` to the typer ``app``.

    ``ailower baseline --suite [--kernels NAME ...] [--arch auto|sm_89|sm_90a|sm_100a]
    [--json FILE] [--workers N] [--space wide|narrow] [--max-configs N] [--no-vendor]``:
    autotune the suite on this GPU and print one row per kernel
    and variant (:func:`suite_baseline`). Exit status 0 when every row is correct, 1 when one is
    not, 2 when it could not run (no GPU, bad arguments).
    """
    import typer

    @app.command("baseline")
    def baseline(
        suite: Annotated[bool, typer.Option("--suite", help="run the whole suite (or --kernels)")] = False,
        kernels: Annotated[list[str] | None, typer.Option("--kernels", help="suite names; repeatable")] = None,
        arch: Annotated[str, typer.Option(help="auto | sm_89 | sm_90a | sm_100a")] = "auto",
        json_out: Annotated[Path | None, typer.Option("--json", help="write the report as JSON")] = None,
        workers: Annotated[int | None, typer.Option(help="compile/input processes (default: all cores)")] = None,
        space: Annotated[str | None, typer.Option(
            "--space", help="autotune space: wide (at least the usual Triton grid per kind) or "
                            "narrow (the spaces before issue 22); default AILOWER_AUTOTUNE_SPACE")] = None,
        max_configs: Annotated[int | None, typer.Option(
            "--max-configs", min=1, help="autotune at most N configs per kernel (the narrow "
                                         "space's first, then every k-th; capped rows say so)")] = None,
        vendor: Annotated[bool, typer.Option("--vendor/--no-vendor",
                                             help="time the vendor paths (torch)")] = True,
    ) -> None:
        """Autotuned Triton baselines of the suite on this GPU: time, throughput, roofline."""
        from harness import HarnessError
        from kernels import SpecError

        if not suite and not kernels:
            typer.echo("error: give --suite or --kernels NAME", err=True)
            raise typer.Exit(2)
        from kernels import SPACES

        if space is not None and space not in SPACES:
            typer.echo(f"error: --space {space!r}: have {', '.join(SPACES)}", err=True)
            raise typer.Exit(2)
        from common.settings import get_settings

        try:
            rep = suite_baseline(kernels or None, arch=arch, workers=workers,
                                 cache_dir=get_settings().cache_dir, space=space,
                                 max_configs=max_configs, vendor=vendor,
                                 log=lambda s: typer.echo(s, err=True))
        except (HarnessError, SpecError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(render_table(rep))
        if json_out is not None:
            json_out.write_text(rep.model_dump_json(indent=2))
        raise typer.Exit(0 if all(r.correct for r in rep.rows) else 1)
