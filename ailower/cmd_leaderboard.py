"""``ailower leaderboard``: kernels x archs, autotuned Triton vs the best verified candidate.

Registered on the app by :func:`register`. Reads finished campaign cells (:mod:`campaign`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ailower._common import console
from ailower._output import table

__all__ = ["register", "leaderboard_command", "render_text"]


def _f(x: float | None, fmt: str = "{:.4f}") -> str:
    return "-" if x is None else fmt.format(x)


def _vendor_text(e) -> str:
    """The vendor column of an entry: ``1.5730 (0.79x)`` (vendor ms, vendor/candidate) or the
    ``n/a`` reason."""
    if e.vendor_ms is None:
        return e.vendor_note[:40]
    return f"{e.vendor_ms:.4f}" + (f" ({e.vendor_ratio:.2f}x)" if e.vendor_ratio else "")


def _space_text(e) -> str:
    """The baseline's autotune space: ``wide (140)``; ``-`` when the cell did not record it."""
    if not e.baseline_space:
        return "-"
    return e.baseline_space + (f" ({e.baseline_space_configs})" if e.baseline_space_configs else "")


def _pipeline_text(e) -> str:
    """The pipeline-context step speedup and whether the win survives; ``-`` when not timed."""
    if e.pipeline_step_speedup is None:
        return "-"
    ci = e.pipeline_step_ci
    band = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    verdict = "survives" if e.pipeline_survives else (
        f"not faster: {e.isolated_outcome} in isolation only" if e.isolated_outcome == "win"
        else "not faster")
    return f"{e.pipeline_step_speedup:.3f}x{band} {verdict}"


def render_text(lb, con: Console) -> None:
    """Print ``lb`` (a :class:`campaign.Leaderboard`): the kernel x arch matrix, the detail per
    arch and the summary rows. No cell is ever cut: piped, ``con`` is wide enough for every
    table (:func:`ailower._output.make_console`); on a narrow terminal, key columns (kernel,
    provider/model, arch) stay whole and the others wrap."""
    from campaign.html import _matrix_cell
    from campaign.leaderboard import speedup_text

    con.print(lb.baseline_rule)
    m = table("best verified candidate per kernel x arch (speedup over autotuned Triton)",
              ("kernel", "family", *lb.archs), keys=("kernel",))
    for k in lb.rows:
        fam = next(e.family for e in lb.entries if e.kernel == k)
        cells = []
        for a in lb.archs:
            i = lb.best.get(k, {}).get(a)
            cells.append("-" if i is None else _matrix_cell(lb.entries[i])[0])
        m.add_row(k, fam, *cells)
    con.print(m)
    for a in lb.archs:
        t = table(f"{a}: every cell",
                  ("kernel", "provider/model", "Triton config", "Triton ms", "cand ms", "speedup",
                   "outcome", "roofline T/c", "vendor ms (x)", "verdict", "verifier e/w", "seeds",
                   "iter", "cost", "space", "pipeline step (x)"),
                  keys=("kernel", "provider/model"))
        for e in (e for e in lb.entries if e.arch == a):
            static = e.outcome == "static"
            t.add_row(e.kernel, e.who, e.baseline_config or "-",
                      "static" if static else _f(e.baseline_ms),
                      "static" if static else _f(e.candidate_ms), speedup_text(e),
                      e.outcome,
                      f"{_f(e.baseline_roofline, '{:.2f}')}/{_f(e.candidate_roofline, '{:.2f}')}",
                      _vendor_text(e),
                      e.verdict or ("none" if (e.provider_note or "").startswith("none:")
                                    else (e.error or "-")[:60]),
                      f"{e.verifier_errors}/{e.verifier_warnings}", str(e.seeds_checked),
                      _f(e.iteration, "{}"), _f(e.cost_usd, "${:.4f}"), _space_text(e),
                      _pipeline_text(e))
        con.print(t)
    s = table(f"summary ({lb.tie_rule})",
              ("arch", "provider/model", "cells", "timed", "geomean", "win", "tie", "loss",
               "static", "no valid", "failed", "verifier errors", "cost"), keys=("arch", "provider/model"))
    for r in lb.summary:
        s.add_row(r.arch, r.who, str(r.cells), str(r.timed), _f(r.geomean_speedup, "{:.3f}x"),
                  str(r.win), str(r.tie), str(r.loss), str(r.static), str(r.invalid),
                  str(r.failed), str(r.verifier_errors), _f(r.cost_usd, "${:.4f}"))
    con.print(s)


def leaderboard_command(
    campaign: Annotated[str | None, typer.Option(
        help="one campaign (default: the latest finished cell of every kernel/arch/provider)")] = None,
    arch: Annotated[list[str], typer.Option("--arch", help="only these archs (repeatable)")] = [],  # noqa: B006
    json_out: Annotated[bool, typer.Option("--json", help="print the leaderboard as JSON")] = False,
    html: Annotated[Path | None, typer.Option(
        "--html", help="also write the self-contained HTML page (tables + plots) to FILE")] = None,
    vendor: Annotated[Path | None, typer.Option(
        "--vendor", help="vendor-path times: an `ailower baseline --json` file")] = None,
) -> None:
    """Show the leaderboard: per kernel x arch, autotuned Triton vs the best verified candidate."""
    from ailower._common import CliFailure
    from ailower.settings import get_settings
    from campaign.leaderboard import LeaderboardError, build_leaderboard
    from campaign.plan import PlanError, parse_archs
    from campaign.store import CampaignStore

    try:
        archs = parse_archs(arch) if arch else None
        store = CampaignStore(get_settings().database_url)
        lb = build_leaderboard(store, campaign=campaign, archs=archs)
        if vendor is not None:
            from campaign.vendor_column import apply_vendor, load_vendor

            apply_vendor(lb, load_vendor(vendor))
    except (LeaderboardError, PlanError, ValueError) as exc:
        raise CliFailure(str(exc)) from None
    if html is not None:
        from campaign.html import render_html

        try:
            html.write_text(render_html(lb), encoding="utf-8")
        except OSError as exc:
            raise CliFailure(f"--html {html}: cannot write: {exc.strerror}") from None
    if json_out:
        print(json.dumps(lb.model_dump(mode="json"), indent=1))
        return
    if not lb.entries:
        console.print("no finished campaign cells yet: run `ailower suite run ...` first")
        return
    render_text(lb, console)
    if html is not None:
        console.print(f"HTML written to {html}")


def register(app: typer.Typer) -> None:
    """Add ``ailower leaderboard`` to ``app``."""
    app.command("leaderboard")(leaderboard_command)
