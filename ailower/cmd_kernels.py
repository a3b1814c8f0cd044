"""``ailower kernels``: the suite, with sizes and autotune spaces."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from ailower._common import console
from ailower._output import print_json, table

__all__ = ["kernels", "register"]


def kernels(
    json_out: Annotated[bool, typer.Option("--json", help="print the kernels as JSON")] = False,
    family: Annotated[str, typer.Option("--family", help="suite (default), common, papers, "
                                        "fast (Hopper/Blackwell-feature kernels) or all")
                      ] = "suite",
) -> None:
    """List the suite kernels (or another family's) with their sizes and autotune spaces."""
    from kernels import all_specs

    specs = all_specs(family)
    if json_out:
        print_json([{"name": s.name, "description": s.description, "spec_id": s.identity(),
                     "sizes": s.sizes, "configs": [c.key() for c in s.configs()],
                     "grid": [str(g) for g in s.grid]} for s in specs])
        return
    t = table("ailower kernel suite",
              ("name", "description", "verify size", "bench size", "configs", "grid"),
              keys=("name",))
    for s in specs:
        t.add_row(escape(s.name), escape(s.description),
                  ", ".join(f"{k}={v}" for k, v in s.sizes["verify"].items()),
                  ", ".join(f"{k}={v}" for k, v in s.sizes["bench"].items()),
                  str(len(s.configs())), escape(", ".join(str(g) for g in s.grid)))
    console.print(t)


def register(app: typer.Typer) -> None:
    """Add ``ailower kernels`` to ``app``."""
    app.command("kernels")(kernels)
