"""Run one claimed cell: the agent loop for (kernel, arch, provider, model), then record it.

Used by the local worker processes (:mod:`campaign.worker`) and by Ray tasks
(:mod:`campaign.ray_backend`) alike. While the cell runs, a heartbeat thread renews the claim's
lease; the run row and the cell's ``done`` state are written in one transaction
(:meth:`CampaignStore.finish`).
"""

from __future__ import annotations

import inspect
import json
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from campaign.plan import load_target
from campaign.store import CampaignStore, CellRow
from campaign.summary import cell_summary

__all__ = ["CampaignOptions", "make_provider", "run_cell", "PROVIDERS", "UsageMeter"]

PROVIDERS: tuple[str, ...] = ("triton", "anthropic", "openai")
"""Providers a campaign may name; a module ``agent.providers.<name>`` defining a
:class:`~agent.providers.base.Provider` with that ``name`` is found too (see :func:`make_provider`)."""


class CampaignOptions(BaseModel):
    """Everything a worker needs besides the cell (JSON on the worker's command line).

    Attributes:
        db_url: SQLAlchemy URL of the run database.
        data_dir: where cell folders go (``<data_dir>/campaigns/<campaign>/<cell id>/``).
        cache_dir: reference-compile cache.
        ptxas: ``AILOWER_PTXAS`` (None: Triton's bundled ptxas).
        max_ptx_version: PTX ISA cap for the reference compile.
        hang_timeout_s, job_timeout_s: GPU worker limits, seconds.
        base_url: API base URL for OpenAI-compatible servers.
        price_per_mtok: model -> (input, output) USD per million tokens (cost column).
        lease_s: claim lease, seconds; ``max_attempts``: claims before ``worker-lost``.
        autotune_max_configs: ``AILOWER_AUTOTUNE_MAX_CONFIGS``; a GPU cell autotunes at most
            this many configs (:attr:`agent.loop.LoopOptions.max_configs`); None: all.
    """

    db_url: str
    data_dir: Path
    cache_dir: Path
    ptxas: str | None = None
    max_ptx_version: int = 90
    hang_timeout_s: float = 10.0
    job_timeout_s: float = 900.0
    base_url: str | None = None
    price_per_mtok: dict[str, tuple[float, float]] = Field(default_factory=dict)
    lease_s: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)
    autotune_max_configs: int | None = Field(default=None, ge=1)


def make_provider(name: str, model: str, opts: CampaignOptions) -> Any:
    """Build provider ``name`` (with ``model`` for model providers).

    ``triton``, ``anthropic`` and ``openai`` are built directly; any other name is looked up as
    ``agent.providers.<name>``: the module's :class:`Provider` subclass whose ``name`` matches is
    constructed with the keyword arguments its ``__init__`` accepts among ``cache_dir``,
    ``max_ptx_version``, ``model`` and ``base_url``.

    Raises:
        ValueError: no provider of that name exists.
    """
    if name == "triton":
        from agent.providers.triton import TritonProvider

        return TritonProvider(cache_dir=opts.cache_dir, max_ptx_version=opts.max_ptx_version)
    if name == "anthropic":
        from agent.providers.anthropic import AnthropicProvider

        return AnthropicProvider(model=model, base_url=opts.base_url)
    if name == "openai":
        from agent.providers.openai import OpenAIProvider

        return OpenAIProvider(model=model, base_url=opts.base_url)
    import importlib

    from agent.providers.base import Provider

    if not name.isidentifier():
        raise ValueError(f"unknown provider {name!r}")
    try:
        mod = importlib.import_module(f"agent.providers.{name}")
    except ModuleNotFoundError:
        raise ValueError(f"unknown provider {name!r}: no module agent.providers.{name}") from None
    classes = [c for c in vars(mod).values() if isinstance(c, type) and issubclass(c, Provider)
               and c is not Provider and getattr(c, "name", None) == name]
    if not classes:
        raise ValueError(f"agent.providers.{name} defines no Provider named {name!r}")
    cls = classes[0]
    offered = {"cache_dir": opts.cache_dir, "max_ptx_version": opts.max_ptx_version,
               "model": model or None, "base_url": opts.base_url}
    params = inspect.signature(cls.__init__).parameters
    return cls(**{k: v for k, v in offered.items() if k in params})


def known_providers() -> tuple[str, ...]:
    """:data:`PROVIDERS` plus every ``agent/providers/<name>.py`` module (not ``base``/``_*``)."""
    import agent.providers as pkg

    extra = sorted(p.stem for p in Path(pkg.__file__).parent.glob("*.py")
                   if not p.stem.startswith("_") and p.stem not in ("base", *PROVIDERS))
    return (*PROVIDERS, *extra)


class UsageMeter:
    """Wraps a provider and sums the token usage of its proposals (for the cost column)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.name = inner.name
        self.usage: dict[str, int] = {}

    def reset(self) -> None:
        """Delegate :meth:`Provider.reset`."""
        self.inner.reset()

    def propose(self, ctx: Any, feedback: str | None, tools: Any) -> Any:
        """Delegate and add the proposal's ``usage`` to :attr:`usage`."""
        prop = self.inner.propose(ctx, feedback, tools)
        for k, v in (prop.usage or {}).items():
            self.usage[k] = self.usage.get(k, 0) + int(v)
        return prop


class Heartbeat:
    """Renews ``owner``'s lease on a cell every ``lease_s / 3`` seconds until stopped.

    ``lost`` is set when a renewal finds the cell no longer ours (the finish is then refused).
    """

    def __init__(self, store: CampaignStore, cell_id: int, owner: str):
        self.store, self.cell_id, self.owner = store, cell_id, owner
        self.lost = False
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True, name=f"heartbeat-{cell_id}")

    def _run(self) -> None:
        while not self._stop.wait(self.store.lease_s / 3):
            if not self.store.renew(self.cell_id, self.owner):
                self.lost = True
                return

    def __enter__(self) -> "Heartbeat":
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join(timeout=5)


def cell_dir(opts: CampaignOptions, campaign: str, cell: CellRow) -> Path:
    """``<data_dir>/campaigns/<campaign>/<cell id>-<kernel>-<arch>-<provider>[-model]``."""
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_"
                   for ch in f"{cell.id}-{cell.kernel}-{cell.arch}-{cell.provider}"
                   + (f"-{cell.model}" if cell.model else ""))
    camp = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in campaign)
    return opts.data_dir / "campaigns" / camp / safe


def run_cell(store: CampaignStore, cell: CellRow, owner: str, opts: CampaignOptions, *,
             campaign: str, iterations: int, gpu: bool,
             on_event: Any = None) -> dict[str, Any]:
    """Lower one claimed cell and record it (``done``) or its failure (``failed``).

    Args:
        store: the campaign store.
        cell: the claimed cell (status ``running``, owned by ``owner``).
        owner: :func:`campaign.store.owner_id` of this process.
        opts: worker options.
        campaign: campaign name (for the cell folder and the report).
        iterations: iteration budget.
        gpu: evaluate on this process's GPU (the cell's arch matches it).
        on_event: optional ``(kind, data)`` listener passed to the loop.

    Returns:
        ``{"cell": id, "status": "done" | "failed" | "lost", "run_id", "seconds", "error"}``.
        ``lost``: another worker took the cell over (our lease lapsed); nothing was written.

    Failures of the cell's own work (Triton cannot compile the reference, no correct autotune
    config, ptxas missing, a provider or ailower bug) are recorded on the cell, not raised.
    """
    from agent.loop import LoopOptions, Transcript, build_report, lower
    from harness import GPUEvaluator

    t0 = time.monotonic()
    folder = cell_dir(opts, campaign, cell)
    static_reason = cell.static_reason
    with Heartbeat(store, cell.id, owner) as hb:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            spec = load_target(cell.spec_ref)
            if spec.identity() != cell.spec_id:
                raise ValueError(f"kernel {cell.kernel!r} ({cell.spec_ref}) changed since the "
                                 f"campaign was planned (spec id {cell.spec_id} -> "
                                 f"{spec.identity()})")
            prov = UsageMeter(make_provider(cell.provider, cell.model, opts))
            evaluator = (GPUEvaluator(hang_timeout_s=opts.hang_timeout_s,
                                      job_timeout_s=opts.job_timeout_s,
                                      input_cache=opts.cache_dir) if gpu else None)
            lo = LoopOptions(iterations=iterations, gpu=gpu, ptxas=opts.ptxas,
                             cache_dir=opts.cache_dir, max_ptx_version=opts.max_ptx_version,
                             max_configs=opts.autotune_max_configs)
            partial = folder / "transcript.jsonl.partial"
            partial.unlink(missing_ok=True)
            result = lower(spec, cell.arch, prov, lo, evaluator=evaluator,
                           transcript=Transcript(partial), on_event=on_event)
            result.gpu_note = "" if gpu else f"GPU evaluation skipped: {static_reason}"
            report = build_report(result)
            partial.replace(folder / "transcript.jsonl")
            report["campaign"] = {"name": campaign, "cell_id": cell.id, "attempt": cell.attempts,
                                  "owner": owner, "mode": "gpu" if gpu else "static",
                                  "usage": dict(prov.usage)}
            if result.best_candidate is not None:
                (folder / f"{spec.name}.ptx").write_text(result.best_candidate.ptx)
            price = opts.price_per_mtok.get(cell.model) if cell.model else None
            summary = cell_summary(result, report, mode="gpu" if gpu else "static",
                                   static_reason=None if gpu else static_reason,
                                   usage=prov.usage, price_per_mtok=price)
            (folder / "report.json").write_text(json.dumps(report, indent=2, default=str))
        except Exception as exc:  # the cell's failure, recorded on the cell with its traceback
            secs = time.monotonic() - t0
            err = {"type": type(exc).__name__, "message": str(exc)[:4000],
                   "traceback": traceback.format_exc()[-4000:]}
            ok = store.fail(cell.id, owner, err, secs)
            return {"cell": cell.id, "status": "failed" if ok else "lost", "run_id": None,
                    "seconds": secs, "error": err}
        secs = time.monotonic() - t0
        if hb.lost:
            return {"cell": cell.id, "status": "lost", "run_id": None, "seconds": secs,
                    "error": None}
        run_id = store.finish(cell.id, owner, result=result, report=report, summary=summary,
                              model=cell.model or None, out_dir=folder, seconds=secs)
    return {"cell": cell.id, "status": "done" if run_id is not None else "lost", "run_id": run_id,
            "seconds": secs, "error": None}
