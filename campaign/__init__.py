"""Campaigns over the kernel suite and the leaderboard against autotuned Triton.

Public API (resolved lazily, so ``ailower`` commands that do not use it stay fast):

* :class:`CampaignStore` (:mod:`campaign.store`): campaigns and cells in the run database, atomic
  claims with leases and dead-owner detection.
* :func:`select_kernels`, :func:`parse_archs`, :func:`parse_providers`, :func:`cells_for`
  (:mod:`campaign.plan`): what a campaign covers.
* :class:`CampaignOptions`, :func:`run_cell` (:mod:`campaign.execute`): run one cell.
* :func:`run_local` (:mod:`campaign.runner`), :func:`run_ray` (:mod:`campaign.ray_backend`): the
  batch backends.
* :func:`build_leaderboard`, :class:`Leaderboard` (:mod:`campaign.leaderboard`) and
  :func:`render_html` (:mod:`campaign.html`).

Data flow: kernels -> harness/verifier -> agent -> campaign -> server/CLI.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CampaignStore": "campaign.store", "CellKey": "campaign.store", "owner_id": "campaign.store",
    "owner_alive": "campaign.store",
    "select_kernels": "campaign.plan", "parse_archs": "campaign.plan",
    "parse_providers": "campaign.plan", "cells_for": "campaign.plan", "PlanError": "campaign.plan",
    "CampaignOptions": "campaign.execute", "run_cell": "campaign.execute",
    "run_local": "campaign.runner", "ProgressState": "campaign.runner",
    "run_ray": "campaign.ray_backend",
    "build_leaderboard": "campaign.leaderboard", "Leaderboard": "campaign.leaderboard",
    "LeaderboardError": "campaign.leaderboard",
    "render_html": "campaign.html",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'campaign' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
