"""The leaderboard: per kernel x arch, autotuned Triton against the best verified candidate.

Built from finished campaign cells (their ``summary``, see :mod:`campaign.summary`). Layout as in
the study: rows are the 12 common and 10 paper kernels (each suite variant its own row, in
registry order), then any other kernel (the skeleton kernels, user spec files); columns are archs.

Win / tie / loss (per timed cell, from the best candidate's evaluation job, where the candidate and
the autotuned reference are timed interleaved): the measured noise band of a kernel is its
interquartile range [q1, q3] of the timed launches. The candidate **wins** when its q3 is below the
reference's q1, **loses** when its q1 is above the reference's q3, and **ties** when the two bands
overlap. Cells whose best candidate was not timed have no outcome of this kind: ``static`` (no GPU
for the arch), ``invalid`` (no candidate passed), ``failed`` (the cell itself failed).

The baseline is the autotuned Triton kernel over the entry's **widened** autotune space (at least
the usual Triton grid for its kind, ``kernels/suite/_spaces.py``; ``Entry.baseline_space`` says
which space a cell was tuned over, ``narrow`` for cells measured before the widening or with
``AILOWER_AUTOTUNE_SPACE=narrow``). Where the best candidate was also timed in a pipeline context
(``ailower lower --pipeline``: a producer writes its inputs, a consumer reads its outputs,
:class:`harness.PipelineTiming`), a win counts only when it survives there: an isolated win whose
pipeline step is not faster at 95% confidence is a ``tie`` with ``isolated_outcome`` ``win``.

The geometric-mean speedup of a provider/model on an arch is taken over its timed cells.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, Field

from campaign.store import CampaignStore, CellRow, as_utc

__all__ = ["Entry", "SummaryRow", "Leaderboard", "build_leaderboard", "outcome", "row_order",
           "LeaderboardError", "speedup_text"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

Outcome = Literal["win", "tie", "loss", "static", "invalid", "failed"]


class LeaderboardError(ValueError):
    """A campaign or arch filter that matches nothing (message names it)."""


class Entry(BaseModel):
    """One cell on the leaderboard (times in ms, roofline fractions 1.0 = at the roofline).

    ``baseline_ms`` / ``candidate_ms`` and their quartiles come from the best candidate's
    evaluation job (reference = the autotuned Triton config, timed interleaved with the
    candidate); ``autotune_ms`` is that config's time in the autotune job.
    """

    kernel: str
    base: str
    family: Literal["common", "papers", "other"]
    arch: str
    provider: str
    model: str = ""
    who: str
    campaign: str
    cell_id: int
    run_id: int | None = None
    status: str
    mode: str | None = None
    static_reason: str | None = None
    error: str | None = None
    device: str | None = None
    baseline_config: str = ""
    autotune_ms: float | None = None
    baseline_ms: float | None = None
    baseline_q1_ms: float | None = None
    baseline_q3_ms: float | None = None
    baseline_roofline: float | None = None
    roofline_bound: str | None = None
    candidate_ms: float | None = None
    candidate_q1_ms: float | None = None
    candidate_q3_ms: float | None = None
    candidate_roofline: float | None = None
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    """95% interval of the paired speedup in the candidate's evaluation job (None: not timed, or a
    cell recorded before it was kept)."""
    origin: str | None = None
    iteration: int | None = None
    verdict: str | None = None
    valid: bool = False
    seeds_checked: int = 0
    verifier_errors: int = 0
    verifier_warnings: int = 0
    verifier_errors_all: int = 0
    cost_usd: float | None = None
    tokens: dict[str, int] = Field(default_factory=dict)
    outcome: Outcome
    finished_at: str | None = None
    provider_note: str | None = None
    """Without a candidate: why, in the provider's words (``none: no expert candidate ...``)."""
    vendor_ms: float | None = None
    """The vendor path's median time (:mod:`campaign.vendor_column`); None: see ``vendor_note``."""
    vendor_path: str = ""
    vendor_note: str = "n/a: not measured"
    vendor_ratio: float | None = None
    """``vendor_ms / candidate_ms`` (above 1: the candidate is faster than the vendor path)."""
    baseline_space: str | None = None
    """The autotune space the baseline was tuned over (``wide``, ``narrow``, ``custom``; None:
    not recorded, a cell from before the space was recorded)."""
    baseline_space_configs: int | None = None
    pipeline_speedup: float | None = None
    """The candidate's kernel speedup in the pipeline context (None: not measured)."""
    pipeline_step_speedup: float | None = None
    pipeline_step_ci: tuple[float, float] | None = None
    pipeline_survives: bool | None = None
    """Whether the whole pipeline step was faster with the candidate (None: not measured)."""
    isolated_outcome: Outcome | None = None
    """The outcome from the isolated timing alone, when the pipeline context changed it."""


class SummaryRow(BaseModel):
    """Per (arch, provider/model): geometric-mean speedup over timed cells and outcome counts."""

    arch: str
    who: str
    cells: int
    timed: int
    geomean_speedup: float | None
    win: int
    tie: int
    loss: int
    static: int
    invalid: int
    failed: int
    verifier_errors: int
    cost_usd: float | None


class Leaderboard(BaseModel):
    """The whole leaderboard (what ``--json`` and ``/v1/leaderboard`` return)."""

    generated_at: str
    campaigns: list[str]
    archs: list[str]
    rows: list[str]
    """Kernel names in display order (common, papers, other)."""
    entries: list[Entry]
    best: dict[str, dict[str, int]]
    """kernel -> arch -> index into ``entries`` of the best entry for that cell of the matrix."""
    summary: list[SummaryRow]
    tie_rule: str = ("tie = the candidate's and the autotuned reference's interquartile ranges "
                     "of the timed launches overlap (same interleaved evaluation job); a win "
                     "timed in a pipeline context counts only if the whole step is faster there")
    baseline_rule: str = ("speedup = autotuned Triton over the widened autotune space (at least "
                          "the usual Triton grid per kind; Entry.baseline_space) / candidate, "
                          "timed interleaved with L2 flushed")


def row_order(kernels: list[str]) -> list[tuple[str, str]]:
    """``(kernel, family)`` in study order: common kernels, paper kernels (suite registry order),
    then the rest alphabetically."""
    from kernels.registry import COMMON, PAPERS, base_name, names

    suite = names()
    rank = {n: i for i, n in enumerate(suite)}

    def key(k: str) -> tuple[int, int, int, str]:
        b = base_name(k) if k in rank else k
        if b in COMMON:
            return (0, COMMON.index(b), rank.get(k, 0), k)
        if b in PAPERS:
            return (1, PAPERS.index(b), rank.get(k, 0), k)
        return (2, 0, 0, k)

    fam = {0: "common", 1: "papers", 2: "other"}
    return [(k, fam[key(k)[0]]) for k in sorted(set(kernels), key=key)]


def speedup_text(e: Entry) -> str:
    """``1.132x`` and, when the evaluation job kept it, its 95% interval ``[1.128-1.136]``;
    ``-`` without a speedup (the CLI table and the HTML cells both show this)."""
    if e.speedup is None:
        return "-"
    ci = f" [{e.speedup_ci[0]:.3f}-{e.speedup_ci[1]:.3f}]" if e.speedup_ci else ""
    return f"{e.speedup:.3f}x{ci}"


def outcome(e: Entry) -> Outcome:
    """The entry's outcome (see the module docstring for the noise band)."""
    if e.status == "failed":
        return "failed"
    if not e.valid:
        return "invalid"
    if e.candidate_ms is None or e.baseline_ms is None:
        return "static"
    cq1 = e.candidate_q1_ms if e.candidate_q1_ms is not None else e.candidate_ms
    cq3 = e.candidate_q3_ms if e.candidate_q3_ms is not None else e.candidate_ms
    rq1 = e.baseline_q1_ms if e.baseline_q1_ms is not None else e.baseline_ms
    rq3 = e.baseline_q3_ms if e.baseline_q3_ms is not None else e.baseline_ms
    if cq3 < rq1:
        return "tie" if e.pipeline_survives is False else "win"
    if cq1 > rq3:
        return "loss"
    return "tie"


def _entry(c: CellRow, campaign: str) -> Entry:
    from kernels.registry import base_name

    s = c.summary or {}
    base = s.get("baseline") or {}
    bt = base.get("timing") or {}
    cand = s.get("candidate") or {}
    ct = cand.get("timing") or {}
    ver = s.get("verifier") or {}
    fam = dict(row_order([c.kernel]))[c.kernel]
    e = Entry(kernel=c.kernel, base=base_name(c.kernel), family=fam, arch=c.arch,
              provider=c.provider, model=c.model,
              who=c.provider + (f":{c.model}" if c.model else ""), campaign=campaign,
              cell_id=c.id, run_id=c.run_id, status=c.status, mode=c.mode,
              static_reason=c.static_reason, error=(c.error or {}).get("message"),
              device=s.get("device"), baseline_config=base.get("config", ""),
              autotune_ms=base.get("autotune_median_ms"), baseline_ms=bt.get("median_ms"),
              baseline_q1_ms=bt.get("q1_ms"), baseline_q3_ms=bt.get("q3_ms"),
              baseline_roofline=bt.get("roofline_fraction"), roofline_bound=bt.get("roofline_bound"),
              candidate_ms=ct.get("median_ms"), candidate_q1_ms=ct.get("q1_ms"),
              candidate_q3_ms=ct.get("q3_ms"), candidate_roofline=ct.get("roofline_fraction"),
              speedup=s.get("speedup"), origin=cand.get("origin"), iteration=cand.get("iteration"),
              verdict=cand.get("verdict"), valid=bool(s.get("valid")),
              seeds_checked=int(s.get("seeds_checked") or 0),
              verifier_errors=int(ver.get("errors") or 0),
              verifier_warnings=int(ver.get("warnings") or 0),
              verifier_errors_all=int(ver.get("errors_all_iterations") or 0),
              cost_usd=s.get("cost_usd"), tokens=s.get("tokens") or {}, outcome="failed",
              provider_note=s.get("provider_note"),
              finished_at=c.finished_at.isoformat() if c.finished_at else None,
              baseline_space=base.get("space"), baseline_space_configs=base.get("space_configs"))
    ci = s.get("speedup_ci")
    e.speedup_ci = (float(ci[0]), float(ci[1])) if ci else None
    pipe = s.get("pipeline") or {}
    if "step_speedup" in pipe:
        e.pipeline_speedup, e.pipeline_step_speedup = pipe.get("speedup"), pipe["step_speedup"]
        ci = pipe.get("step_speedup_ci")
        e.pipeline_step_ci = (float(ci[0]), float(ci[1])) if ci else None
        e.pipeline_survives = bool(pipe.get("survives"))
    e.outcome = outcome(e)
    if e.pipeline_survives is False:
        e.isolated_outcome = outcome(e.model_copy(update={"pipeline_survives": None}))
    return e


def _rank(e: Entry) -> tuple[int, float]:
    order = {"win": 3, "tie": 3, "loss": 3, "static": 2, "invalid": 1, "failed": 0}
    return order[e.outcome], (e.speedup or 0.0)


def build_leaderboard(store: CampaignStore, *, campaign: str | None = None,
                      archs: list[str] | None = None) -> Leaderboard:
    """Read the finished cells and build the leaderboard.

    Args:
        store: the campaign store.
        campaign: only this campaign; None: every campaign, keeping for each (kernel, arch,
            provider, model) the most recently finished cell.
        archs: only these archs (None: all present).

    Raises:
        LeaderboardError: no campaign of that name.
    """
    camps = {c.id: c.name for c in store.campaigns()}
    if campaign is not None:
        row = store.campaign(campaign)
        if row is None:
            raise LeaderboardError(f"--campaign {campaign!r}: no such campaign; have: "
                                   f"{', '.join(sorted(camps.values())) or '(none)'}")
        cells = [c for c in store.cells(row.id) if c.status in ("done", "failed")]
    else:
        latest: dict[tuple[str, str, str, str], CellRow] = {}
        for c in store.cells():
            if c.status not in ("done", "failed"):
                continue
            k = (c.kernel, c.arch, c.provider, c.model)
            old = latest.get(k)
            if old is None or (as_utc(c.finished_at) or _EPOCH) >= (as_utc(old.finished_at) or _EPOCH):
                latest[k] = c
        cells = list(latest.values())
    if archs:
        cells = [c for c in cells if c.arch in archs]
    entries = [_entry(c, camps.get(c.campaign_id, "?")) for c in cells]
    order = row_order([e.kernel for e in entries])
    pos = {k: i for i, (k, _) in enumerate(order)}
    from campaign.plan import ARCHS

    arch_list = sorted({e.arch for e in entries},
                       key=lambda a: (ARCHS.index(a) if a in ARCHS else 99, a))
    entries.sort(key=lambda e: (pos[e.kernel], arch_list.index(e.arch), e.who))
    best: dict[str, dict[str, int]] = {}
    for i, e in enumerate(entries):
        cur = best.setdefault(e.kernel, {}).get(e.arch)
        if cur is None or _rank(e) > _rank(entries[cur]):
            best[e.kernel][e.arch] = i
    summary: list[SummaryRow] = []
    for a in arch_list:
        for who in sorted({e.who for e in entries if e.arch == a}):
            es = [e for e in entries if e.arch == a and e.who == who]
            sp = [e.speedup for e in es if e.outcome in ("win", "tie", "loss") and e.speedup]
            costs = [e.cost_usd for e in es if e.cost_usd is not None]
            summary.append(SummaryRow(
                arch=a, who=who, cells=len(es), timed=len(sp),
                geomean_speedup=math.exp(sum(math.log(x) for x in sp) / len(sp)) if sp else None,
                win=sum(e.outcome == "win" for e in es), tie=sum(e.outcome == "tie" for e in es),
                loss=sum(e.outcome == "loss" for e in es),
                static=sum(e.outcome == "static" for e in es),
                invalid=sum(e.outcome == "invalid" for e in es),
                failed=sum(e.outcome == "failed" for e in es),
                verifier_errors=sum(e.verifier_errors_all for e in es),
                cost_usd=round(sum(costs), 6) if costs else None))
    used = sorted({e.campaign for e in entries})
    return Leaderboard(generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                       campaigns=used, archs=arch_list, rows=[k for k, _ in order],
                       entries=entries, best=best, summary=summary)
