"""``ailower suite run``: a campaign over kernels x archs x providers/models (see :mod:`campaign`).

Registered on the app by :func:`register`. Exit status: 0 every cell done, 1 some cell failed or
is still held by another live batch, 2 bad input.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Annotated

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ailower._common import console  # piped: no hard wrap, no cell cut

__all__ = ["register", "start_line", "suite_app"]

suite_app = typer.Typer(no_args_is_help=True, help="Campaigns over the kernel suite.")


def _fail(msg: str) -> None:
    from ailower._common import CliFailure

    raise CliFailure(msg)


def _parse_prices(prices: list[str]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for p in prices:
        model, _, rest = p.rpartition("=")
        try:
            a, b = (float(x) for x in rest.split(","))
        except ValueError:
            _fail(f"--price {p!r}: use MODEL=IN,OUT (USD per million input/output tokens)")
        if not model or a < 0 or b < 0:
            _fail(f"--price {p!r}: use MODEL=IN,OUT with non-negative prices")
        out[model] = (a, b)
    return out


def start_line(start: dict, n_kernels: int) -> str:
    """The campaign's first line (rich markup): cells, kernels x archs x providers, iterations.

    ``start`` is the ``start`` event (``campaign``, ``cells``, ``added``, ``already_done``,
    ``archs``, ``providers``, ``iterations``, ``backend``); lists are joined with commas, never
    printed as Python lists."""
    from rich.markup import escape

    return (f"[bold]ailower suite run[/]: campaign [cyan]{escape(start['campaign'])}[/], "
            f"{start['cells']} cells ({start['added']} new, {start['already_done']} already "
            f"done), {n_kernels} kernels x {escape(', '.join(start['archs']))} x "
            f"{escape(', '.join(map(str, start['providers'])))}, {start['iterations']} "
            f"iterations, backend {start['backend']}")


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _view(st) -> Group:
    head = Text.assemble(
        (f"campaign {st.campaign}: ", "bold"), f"{st.done + st.failed}/{st.total} cells done",
        (f" ({st.failed} failed)" if st.failed else ""), f", {st.running} running, ",
        f"elapsed {_fmt_s(st.elapsed_s)}, ETA {_fmt_s(st.eta_s)}, best speedup ",
        (f"{st.best[0]:.3f}x ({st.best[1]} {st.best[2]} {st.best[3]})" if st.best else "-",
         "green"))
    t = Table(box=None, show_header=bool(st.running_cells), pad_edge=False)
    for col in ("running", "arch", "provider", "mode", "for"):
        t.add_column(col)
    for k, a, p, m, s in st.running_cells[:16]:
        t.add_row(k, a, p, m, _fmt_s(s))
    return Group(head, t)


@suite_app.command("run")
def suite_run(
    kernels: Annotated[list[str], typer.Argument(
        help="kernel names, globs ('flash_*'), families (common, papers, fast, all) or spec files")],
    arch: Annotated[list[str], typer.Option(
        "--arch", help="sm_89 | sm_90a | sm_100a (repeat or comma-separate); default: the "
                       "GPU's arch, else sm_90a")] = [],  # noqa: B006 (typer reads the default)
    provider: Annotated[list[str], typer.Option(
        "--provider", help="NAME or NAME:MODEL (repeatable), e.g. triton, openai:gpt-5")] = [],  # noqa: B006
    iterations: Annotated[int | None, typer.Option(min=1, help="iteration budget per cell")] = None,
    campaign: Annotated[str | None, typer.Option(
        help="campaign name; rerunning the same name continues it (default: derived from the "
             "kernels, archs, providers and iterations)")] = None,
    backend: Annotated[str, typer.Option(help="local | ray")] = "local",
    ray_address: Annotated[str | None, typer.Option(
        help="Ray cluster address for --backend ray (e.g. 10.0.0.1:6379, or 'auto')")] = None,
    cpu_workers: Annotated[int, typer.Option(min=1, help="static-cell worker processes")] = 2,
    precompile_workers: Annotated[int | None, typer.Option(
        min=0, help="processes compiling queued GPU cells' Triton configs ahead of the GPU "
                    "worker (default: spare cores)")] = None,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="static path for every cell")] = False,
    retry_failed: Annotated[bool, typer.Option(
        "--retry-failed", help="run the campaign's failed cells again")] = False,
    price: Annotated[list[str], typer.Option(
        "--price", help="MODEL=IN,OUT: USD per million input/output tokens (cost column)")] = [],  # noqa: B006
    base_url: Annotated[str | None, typer.Option(help="API base URL (OpenAI-compatible)")] = None,
    lease_s: Annotated[float, typer.Option(min=5, help="claim lease, seconds")] = 60.0,
    json_out: Annotated[bool, typer.Option("--json", help="JSON lines instead of the live view")] = False,
) -> None:
    """Run a campaign: every (kernel, arch, provider, model) cell, recorded and resumable."""
    from ailower.settings import get_settings
    from campaign.execute import CampaignOptions, known_providers
    from campaign.plan import PlanError, cells_for, parse_archs, parse_providers, select_kernels
    from campaign.store import CampaignStore

    settings = get_settings()
    if backend not in ("local", "ray"):
        _fail(f"--backend {backend!r}: choose local or ray")
    if backend == "ray" and not ray_address:
        _fail("--backend ray needs --ray-address (an existing cluster; 'auto' finds a local one)")
    try:
        targets = select_kernels(kernels)
        if arch:
            archs = parse_archs(arch)
        else:
            from harness import device_arch

            dev = None if no_gpu else device_arch()
            archs = [dev if dev in ("sm_89", "sm_90a", "sm_100a") else "sm_90a"]
        # only the model providers take a model (AILOWER_MODEL must not split search cells)
        default = settings.provider + (f":{settings.model}" if settings.model and
                                       settings.provider in ("anthropic", "openai") else "")
        provs = parse_providers(provider or [default], known_providers())
    except PlanError as exc:
        _fail(str(exc))
    iters = iterations or settings.iterations
    cells = cells_for(targets, archs, provs)
    if campaign is None:
        h = hashlib.sha256(json.dumps([sorted(t.name for t in targets), archs, provs, iters])
                           .encode()).hexdigest()[:8]
        campaign = f"campaign-{h}"
    opts = CampaignOptions(db_url=settings.database_url, data_dir=settings.data_dir,
                           cache_dir=settings.cache_dir, ptxas=settings.ptxas,
                           max_ptx_version=settings.max_ptx_version,
                           hang_timeout_s=settings.hang_timeout_s,
                           job_timeout_s=settings.job_timeout_s, base_url=base_url,
                           price_per_mtok=_parse_prices(price), lease_s=lease_s,
                           autotune_max_configs=settings.autotune_max_configs)
    store = CampaignStore(opts.db_url, lease_s=lease_s, max_attempts=opts.max_attempts)
    plan = {"kernels": kernels, "archs": archs, "providers": [f"{p}:{m}" if m else p
                                                              for p, m in provs]}
    camp, added = store.ensure_campaign(campaign, iters, cells, plan)
    if retry_failed:
        store.retry_failed(camp.id)
    counts = store.counts(camp.id)
    t0 = time.time()

    def emit(obj: dict) -> None:
        print(json.dumps(obj, default=str), flush=True)

    notes: list[str] = []

    def note(msg: str) -> None:
        if json_out:
            emit({"event": "note", "message": msg})
        else:
            notes.append(msg)
            console.print(f"[yellow]{msg}[/]")

    start = {"event": "start", "campaign": camp.name, "cells": sum(counts.values()),
             "added": added, "already_done": counts["done"], "archs": archs,
             "providers": plan["providers"], "iterations": iters, "backend": backend,
             "database": store.runs._safe_url()}
    if json_out:
        emit(start)
    else:
        console.print(start_line(start, len(targets)))
    live = None if json_out else Live(console=console, refresh_per_second=4, transient=False)
    last: list[tuple] = []

    def on_progress(st) -> None:
        if json_out:
            for c in st.new_cells:
                emit(c)
            key = (st.done, st.failed, st.running, tuple(r[:3] for r in st.running_cells))
            if not last or last[0] != key:
                last[:] = [key]
                emit(st.as_json())
        else:
            assert live is not None
            for c in st.new_cells:
                tag = ("[red]failed[/]" if c["status"] == "failed" else
                       (f"{c['speedup']:.3f}x" if c.get("speedup") else
                        f"[blue]{c['mode']}[/] {'valid' if c.get('valid') else 'no valid candidate'}"
                        f", verifier errors {c.get('verifier_errors')}"))
                live.console.print(f"  {c['kernel']} {c['arch']} {c['provider']}: {tag}"
                                   f" ({_fmt_s(c['seconds'])})"
                                   + (f": {c['error'][:200]}" if c.get("error") else ""))
            live.update(_view(st))

    if live is not None:
        live.start()
    try:
        if backend == "local":
            from campaign.runner import run_local

            import os

            pre = precompile_workers if precompile_workers is not None else max(
                0, (os.cpu_count() or 1) - cpu_workers - 1)
            run_local(store, camp, opts, archs, cpu_workers=cpu_workers, no_gpu=no_gpu,
                      on_progress=on_progress, on_note=note, precompile_workers=pre)
        else:
            from campaign.ray_backend import run_ray

            try:
                run_ray(store, camp, opts, archs, address=ray_address,
                        on_progress=on_progress, on_note=note, no_gpu=no_gpu)
            except RuntimeError as exc:
                _fail(str(exc))
    finally:
        if live is not None:
            live.stop()
            console.print()
    counts = store.counts(camp.id)
    wall = time.time() - t0
    end = {"event": "end", "campaign": camp.name, **counts, "wall_s": round(wall, 1)}
    if json_out:
        emit(end)
    else:
        console.print(f"campaign {camp.name}: {counts['done']} done, {counts['failed']} failed, "
                      f"{counts['running']} held by other live workers, {counts['pending']} "
                      f"pending; wall {wall:.1f} s. `ailower leaderboard --campaign {camp.name}`")
    if counts["failed"] or counts["running"] or counts["pending"]:
        raise typer.Exit(1)


@suite_app.command("list")
def suite_list(json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List campaigns with their cell counts."""
    from ailower.settings import get_settings
    from campaign.store import CampaignStore

    store = CampaignStore(get_settings().database_url)
    rows = [(c, store.counts(c.id)) for c in store.campaigns()]
    if json_out:
        print(json.dumps([{"name": c.name, "created_at": c.created_at.isoformat(),
                           "iterations": c.iterations, "plan": c.plan, **n} for c, n in rows]))
        return
    t = Table(title="campaigns")
    for col in ("name", "created", "iterations", "done", "failed", "running", "pending"):
        t.add_column(col)
    for c, n in rows:
        t.add_row(c.name, c.created_at.strftime("%Y-%m-%d %H:%M"), str(c.iterations),
                  str(n["done"]), str(n["failed"]), str(n["running"]), str(n["pending"]))
    console.print(t)


def register(app: typer.Typer) -> None:
    """Add ``ailower suite run|list`` to ``app``."""
    app.add_typer(suite_app, name="suite")
