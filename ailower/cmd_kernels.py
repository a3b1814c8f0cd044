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
    space: Annotated[str | None, typer.Option(
        "--space", help="autotune space: wide (at least the usual Triton grid per kind) or "
                        "narrow (the spaces before the widening); default AILOWER_AUTOTUNE_SPACE")
                     ] = None,
) -> None:
    """List the suite kernels (or another family's) with their sizes and autotune spaces."""
    from kernels import SpecError, all_specs, default_space, get, names

    try:
        space = space or default_space()
        specs = all_specs(family, space)
        other = {n: len(get(n, "narrow" if space == "wide" else "wide").configs())
                 for n in names(family)}
    except SpecError as exc:
        raise typer.BadParameter(str(exc)) from None
    from kernels.suite._spaces import wide_space

    kinds = {n: w.kind for n in names(family)
             if (w := wide_space(n, get(n, "narrow").autotune)) is not None}
    if json_out:
        print_json([{"name": s.name, "description": s.description, "spec_id": s.identity(),
                     "sizes": s.sizes, "configs": [c.key() for c in s.configs()],
                     "grid_kind": kinds.get(s.name),
                     "grid": [str(g) for g in s.grid]} for s in specs])
        return
    t = table(f"ailower kernel suite ({space} autotune spaces)",
              ("name", "description", "verify size", "bench size", "configs", "narrow" if space == "wide" else "wide",
               "grid kind", "grid"),
              keys=("name",))
    for s in specs:
        t.add_row(escape(s.name), escape(s.description),
                  ", ".join(f"{k}={v}" for k, v in s.sizes["verify"].items()),
                  ", ".join(f"{k}={v}" for k, v in s.sizes["bench"].items()),
                  str(len(s.configs())), str(other.get(s.name, "")), kinds.get(s.name, "-"),
                  escape(", ".join(str(g) for g in s.grid)))
    console.print(t)


def register(app: typer.Typer) -> None:
    """Add ``ailower kernels`` to ``app``."""
    app.command("kernels")(kernels)
