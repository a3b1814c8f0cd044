"""``ailower runs`` (recorded runs, newest first) and ``ailower runs show ID``.

``register(app)`` adds the ``runs`` group: without a sub-command it lists runs (``--kernel``,
``--limit``, ``--json``); ``runs show ID`` prints one run (``--json``), its best PTX (``--ptx``,
byte for byte as recorded) or its ``report.json`` (``--report``). ``ID`` may be ``latest``.
Exit status 2 for an unknown id or a run without PTX.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

__all__ = ["register", "runs_app"]

runs_app = typer.Typer(help="Recorded runs: list them, or show one (summary, PTX, report).")


@runs_app.callback(invoke_without_command=True)
def runs_list(
    ctx: typer.Context,
    kernel: Annotated[str | None, typer.Option(help="only this kernel")] = None,
    limit: Annotated[int, typer.Option(min=1)] = 20,
    json_out: Annotated[bool, typer.Option("--json", help="print the runs as JSON")] = False,
) -> None:
    """List recorded lowering runs, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    from agent.store import RunStore, run_summary
    from ailower._output import print_json, table
    from ailower._common import console, get_settings

    store = RunStore(get_settings().database_url)
    rows = store.runs(kernel=kernel, limit=limit)
    if json_out:
        print_json([run_summary(r) for r in rows])
        return
    t = table(f"runs in {store._safe_url()}",
              ("id", "when", "kernel", "arch", "provider", "gpu", "baseline", "best", "speedup"),
              keys=("id", "kernel", "best"))
    for r in rows:
        t.add_row(str(r.id), r.created_at.strftime("%Y-%m-%d %H:%M"), escape(r.kernel), r.arch,
                  escape(r.provider), escape(r.device or ("no" if not r.gpu else "yes")),
                  escape(r.baseline_config) if r.baseline_ms else "- (not autotuned)",
                  escape(r.best_origin or "-"),
                  f"{r.best_speedup:.3f}x" if r.best_speedup else "-")
    console.print(t)
    if not rows and kernel:
        from ailower._output import did_you_mean

        known = sorted({r.kernel for r in store.runs(limit=1000)})
        console.print(f"no runs of {kernel!r}" + did_you_mean(kernel, known), markup=False)


def load_run(run_id: str):  # noqa: ANN201 (RunRow; agent.store is imported lazily)
    """The recorded run ``run_id`` (a number or ``latest``) with its iterations.

    Raises:
        ailower.cli.CliFailure: not a number, or no such run (the message names the newest id).
    """
    from agent.store import RunStore
    from ailower._common import CliFailure, get_settings

    store = RunStore(get_settings().database_url)
    latest = store.latest_id()
    if run_id == "latest":
        if latest is None:
            raise CliFailure(f"no runs are recorded in {store._safe_url()}")
        num = latest
    else:
        try:
            num = int(run_id.lstrip("#"))
        except ValueError:
            raise CliFailure(f"run id {run_id!r} is not a number (or 'latest')") from None
    row = store.get(num)
    if row is None:
        raise CliFailure(f"no run #{num} in {store._safe_url()}"
                         + (f"; the newest is #{latest}" if latest is not None else
                            "; no runs are recorded"))
    return row


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(metavar="ID", help="run id (see 'ailower runs'), or 'latest'")],
    ptx: Annotated[bool, typer.Option("--ptx", help="print the best candidate's PTX")] = False,
    report: Annotated[bool, typer.Option("--report", help="print the run's report.json")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Show one recorded run: a summary with its iterations, or its PTX / report."""
    from agent.store import run_summary
    from ailower._output import print_json, table
    from ailower._common import CliFailure, console

    if sum((ptx, report, json_out)) > 1:
        raise CliFailure("choose one of --ptx, --report, --json")
    row = load_run(run_id)
    if ptx:
        if row.best_ptx is None:
            raise CliFailure(f"run #{row.id} has no PTX: it found no valid candidate "
                             f"({row.stop_reason})")
        typer.echo(row.best_ptx, nl=not row.best_ptx.endswith("\n"))
        return
    if report:
        # the stored report was written before the id existed; report.json on disk carries it
        typer.echo(json.dumps({**row.report, "run_id": row.id}, indent=2, default=str))
        return
    doc = run_summary(row, iterations=True)
    if json_out:
        print_json(doc)
        return
    for k in ("id", "created_at", "kernel", "spec_id", "arch", "provider", "model",
              "triton_version", "device", "gpu", "baseline_config", "baseline_ms", "best_origin",
              "best_verdict", "best_speedup", "stop_reason", "out_dir"):
        if doc[k] is not None:
            console.print(f"{k:<16} {doc[k]}", markup=False)
    t = table(None, ("#", "origin", "verdict", "digest", "speedup"), keys=("#", "origin", "digest"))
    for it in doc["iterations"]:
        t.add_row(str(it["iteration"]), escape(it["origin"] or "-"), it["verdict"],
                  it["candidate_digest"] or "-",
                  f"{it['speedup']:.3f}x" if it["speedup"] else "-")
    console.print(t)
    console.print(f"PTX: ailower runs show {row.id} --ptx; report: ailower runs show {row.id} "
                  "--report" if row.best_ptx else
                  f"report: ailower runs show {row.id} --report", markup=False)


def register(app: typer.Typer) -> None:
    """Add the ``runs`` group (list, ``show``) to ``app``."""
    app.add_typer(runs_app, name="runs")
