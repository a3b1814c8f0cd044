"""Successive halving over candidates with a wall-time budget.

Each round measures every surviving arm once (one GPU job), drops the arms that failed (incorrect,
crashed, did not load), keeps the fastest ``ceil(n / eta)`` (at least ``min_keep``) and measures
them again with ``rep_growth`` times more timed repetitions. The baseline arm is never dropped: it
is measured in every round, so every ratio is taken against it inside the same job (interleaved
timing, same inputs), and the final ranking always contains it. Rounds stop when ``min_keep`` arms
remain, after ``max_rounds``, or when the next round would start after the wall-time budget.

Reference: Jamieson & Talwalkar, "Non-stochastic Best Arm Identification and Hyperparameter
Optimization" (AISTATS 2016), the successive-halving schedule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["Measurement", "RoundRecord", "HalvingResult", "successive_halving"]


@dataclass(frozen=True)
class Measurement:
    """One arm's outcome in one round.

    Attributes:
        ok: correct and timed.
        ratio: arm median time / baseline median time in the same job (lower is faster); None
            when not ``ok``.
        median_ms: the arm's median time, ms (None when not timed).
        message: why it failed, when it did.
    """

    ok: bool
    ratio: float | None = None
    median_ms: float | None = None
    message: str = ""


@dataclass
class RoundRecord:
    """One round: its repetition level, the arms measured and what came back."""

    round: int
    reps: int
    measured: dict[str, Measurement]
    kept: list[str]
    seconds: float


@dataclass
class HalvingResult:
    """The outcome: arms ranked fastest first (the baseline included), and every round."""

    ranking: list[tuple[str, float]]
    failed: dict[str, str] = field(default_factory=dict)
    rounds: list[RoundRecord] = field(default_factory=list)
    stop_reason: str = ""


Measure = Callable[[Sequence[str], int, int], dict[str, Measurement]]
"""``(arms, round, reps) -> {arm: Measurement}``; the baseline is always among ``arms``."""


def successive_halving(arms: Sequence[str], baseline: str, measure: Measure, *,
                       budget_s: float, eta: float = 3.0, min_keep: int = 2, max_rounds: int = 4,
                       reps0: int = 10, rep_growth: int = 2,
                       clock: Callable[[], float] = time.monotonic) -> HalvingResult:
    """Run successive halving.

    Args:
        arms: candidate ids (the baseline may or may not be among them; it is added).
        baseline: the baseline's id; never eliminated.
        measure: runs one round (see :data:`Measure`).
        budget_s: wall-time budget in seconds; a round that would start after it is not started
            (the first round always runs).
        eta: elimination factor (keep ``ceil(n / eta)``).
        min_keep: stop when this many non-baseline arms remain.
        max_rounds: at most this many rounds.
        reps0: timed repetitions in round 0; multiplied by ``rep_growth`` each round.
        clock: monotonic clock in seconds (injectable for tests).

    Returns:
        :class:`HalvingResult`; ``ranking`` holds ``(arm, ratio)`` from the last round in which
        each arm was measured, survivors of later rounds first.

    Raises:
        ValueError: ``eta <= 1``, ``min_keep < 1`` or ``budget_s <= 0``.
    """
    if eta <= 1 or min_keep < 1 or budget_s <= 0:
        raise ValueError(f"successive_halving: need eta > 1, min_keep >= 1, budget_s > 0 "
                         f"(got {eta}, {min_keep}, {budget_s})")
    t0 = clock()
    alive = [a for a in dict.fromkeys(arms) if a != baseline]
    res = HalvingResult(ranking=[])
    last: dict[str, tuple[int, float]] = {}
    reps = reps0
    for rnd in range(max_rounds):
        if rnd > 0 and clock() - t0 >= budget_s:
            res.stop_reason = "budget"
            break
        t = clock()
        measured = measure([baseline, *alive], rnd, reps)
        base_m = measured.get(baseline)
        if base_m is None or not base_m.ok:
            # without a baseline measurement no ratio means anything: stop with what we have
            res.failed[baseline] = base_m.message if base_m else "not measured"
            res.rounds.append(RoundRecord(rnd, reps, measured, [], clock() - t))
            res.stop_reason = "baseline failed"
            break
        last[baseline] = (rnd, 1.0)
        ok = []
        for a in alive:
            m = measured.get(a)
            if m is None or not m.ok or m.ratio is None:
                res.failed[a] = m.message if m else "not measured"
                continue
            ok.append((m.ratio, a))
            last[a] = (rnd, m.ratio)
        ok.sort()
        keep_n = max(min_keep, math.ceil(len(ok) / eta))
        alive = [a for _, a in ok[:keep_n]]
        res.rounds.append(RoundRecord(rnd, reps, measured, list(alive), clock() - t))
        if len(ok) <= min_keep:
            res.stop_reason = "converged"
            break
        reps *= rep_growth
    else:
        res.stop_reason = "max rounds"
    res.ranking = sorted(((a, r) for a, (rd, r) in last.items()), key=lambda x: (-last[x[0]][0], x[1]))
    return res
