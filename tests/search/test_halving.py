"""Successive halving: elimination schedule, the baseline never dropped, failures out, budget."""

from __future__ import annotations

import pytest

from search.halving import Measurement, successive_halving


def make_measure(true: dict[str, float | None], log: list):
    def measure(arms, rnd, reps):
        log.append((list(arms), rnd, reps))
        return {a: (Measurement(True, ratio=true[a] / (true["base"] or 1.0), median_ms=true[a])
                    if true[a] is not None else Measurement(False, message="incorrect"))
                for a in arms}
    return measure


def test_schedule_keeps_a_third_and_doubles_reps():
    true = {"base": 1.0, **{f"a{i}": 1.0 + 0.01 * i for i in range(9)}, "w": None}
    log: list = []
    res = successive_halving(list(true), "base", make_measure(true, log), budget_s=100, eta=3,
                             min_keep=1, reps0=5)
    assert [len(a) for a, _, _ in log] == [11, 4, 2]  # 10 arms + base, then 3 + base, 1 + base
    assert [r for _, _, r in log] == [5, 10, 20]
    assert all(a[0] == "base" for a, _, _ in log)
    assert res.failed == {"w": "incorrect"}
    assert res.ranking[0][0] == "base" and res.ranking[1][0] == "a0"
    assert res.stop_reason == "converged"


def test_faster_arm_ranks_first():
    true = {"base": 1.0, "slow": 1.2, "fast": 0.7, "mid": 0.9}
    res = successive_halving(list(true), "base", make_measure(true, []), budget_s=100, min_keep=1)
    assert [a for a, _ in res.ranking][:2] == ["fast", "base"]
    assert dict(res.ranking)["fast"] == pytest.approx(0.7)


def test_budget_stops_after_the_first_round():
    t = [0.0]

    def clock():
        t[0] += 10.0
        return t[0]
    true = {"base": 1.0, **{f"a{i}": 1.1 for i in range(20)}}
    log: list = []
    res = successive_halving(list(true), "base", make_measure(true, log), budget_s=5, clock=clock)
    assert len(log) == 1 and res.stop_reason == "budget"


def test_baseline_failure_stops_without_ranking_others():
    true = {"base": None, "a": 0.5}
    res = successive_halving(list(true), "base", make_measure(true, []), budget_s=10)
    assert res.stop_reason == "baseline failed" and res.ranking == []


def test_bad_arguments():
    with pytest.raises(ValueError, match="eta > 1"):
        successive_halving(["a"], "base", lambda *a: {}, budget_s=1, eta=1)
    with pytest.raises(ValueError):
        successive_halving(["a"], "base", lambda *a: {}, budget_s=0)
