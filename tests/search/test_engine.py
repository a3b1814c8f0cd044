"""SearchEngine with a scripted GPU evaluator: the search rounds, the baseline always kept, wrong
and crashing arms dropped, the winner's transformation reported.

The evaluator is a stand-in for the GPU worker (no GPU here): it answers each round's job with
times given by a function of the arm, so the selection logic is tested exactly; the real worker
is exercised by ``scripts/device_search.sh`` on the H200.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import EvalResult, compile_reference
from harness.results import KernelRun
from harness.timing import stats
from kernels import get
from search.engine import SearchEngine


class FakeEvaluator:
    """Answers ``autotune`` jobs: ``time_of(label) -> ms`` (None = wrong result, 'crash')."""

    def __init__(self, time_of: Callable[[str], float | str | None]):
        self.time_of = time_of
        self.jobs: list[list[str]] = []

    def request(self, spec, job, kernels, **kw):
        assert job == "autotune"
        assert kernels[0].label == "base" and kernels[0].role == "reference"
        assert all(k.role == "candidate" for k in kernels[1:])
        return kernels

    def run(self, kernels) -> EvalResult:
        self.jobs.append([k.label for k in kernels])
        runs = []
        for k in kernels:
            t = self.time_of(k.label)
            if t == "crash":
                runs.append(KernelRun(label=k.label, role=k.role, status="crash"))
                return EvalResult(status="crash", message=f"{k.label} crashed", kernels=runs)
            if t is None:
                runs.append(KernelRun(label=k.label, role=k.role, status="incorrect",
                                      message="y vs float64 reference: too far"))
            else:
                runs.append(KernelRun(label=k.label, role=k.role, status="ok",
                                      timing=stats([t, t, t])))
        return EvalResult(status="ok", kernels=runs)


@pytest.fixture(scope="module")
def relu_base(tmp_path_factory):
    spec = get("relu.fp16")
    cache = tmp_path_factory.mktemp("cache")
    return spec, compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=cache), cache


def _engine(relu_base, ev) -> SearchEngine:
    spec, base, cache = relu_base
    return SearchEngine(spec, "sm_90a", base, evaluator=ev, cache_dir=Path(cache))


def test_picks_the_fastest_correct_arm_and_names_its_transformation(relu_base):
    def t(label: str):
        if label == "base":
            return 1.0
        if label == "c1":
            return 0.8            # a faster Triton config
        if label == "c0":
            return None           # fast but wrong: must never win
        if label.endswith("+st.cs"):
            return 0.7            # a PTX pass on the best config
        return 1.1
    ev = FakeEvaluator(t)
    eng = _engine(relu_base, ev)
    out = eng.run(budget_s=60, max_configs=4, eta=2)
    best, ratio = out.ranking[0]
    assert best.transform.endswith("+st.cs")
    assert best.transform.startswith("triton[")
    assert ratio == pytest.approx(0.7)
    assert "c0" not in [a.id for a, _ in out.ranking]
    assert any(a.id == "base" for a, _ in out.ranking)  # the baseline is always a candidate
    assert all("base" in job for job in ev.jobs)


def test_crashing_arm_is_removed_and_round_rerun(relu_base):
    ev = FakeEvaluator(lambda label: "crash" if label == "c2" else (1.0 if label == "base" else 1.2))
    eng = _engine(relu_base, ev)
    out = eng.run(budget_s=60, max_configs=4, passes=False)
    ids = [a.id for a, _ in out.ranking]
    assert "c2" not in ids
    assert ids[0] == "base"  # nothing beat the baseline: it stays the answer
    assert out.stages["configs"].failed["c2"].startswith("crash")


def test_baseline_wins_when_nothing_is_faster(relu_base):
    ev = FakeEvaluator(lambda label: 1.0 if label == "base" else 1.05)
    out = _engine(relu_base, ev).run(budget_s=60, max_configs=3)
    assert out.ranking[0][0].id == "base"


def test_without_gpu_proposes_and_says_selection_needs_a_gpu(relu_base):
    spec, base, cache = relu_base
    out = SearchEngine(spec, "sm_90a", base, evaluator=None, cache_dir=Path(cache)).run(
        budget_s=10, max_configs=2)
    assert not out.gpu
    assert "selection needs a GPU" in out.note
    assert out.ranking[0][0].id == "base"
    assert all(r is None for _, r in out.ranking)
    assert len(out.ranking) > 3


@pytest.mark.parametrize("budget", [5.0, 60.0])
def test_local_search_around_a_winning_config(relu_base, budget):
    # c1 beats the baseline; a neighbour of c1 found in the refinement round (r0) beats c1
    times = {"base": 1.0, "c1": 0.8, "r0": 0.6}
    ev = FakeEvaluator(lambda label: times.get(label, 1.2))
    eng = _engine(relu_base, ev)
    out = eng.run(budget_s=budget, max_configs=3, refine_configs=2)
    assert "refine" in out.stages
    refined = [a for a in out.arms if re.fullmatch(r"r\d+", a)]
    assert refined and all(not eng.arms[a].passes for a in refined)
    c1_cfg = eng.arms["c1"].config.key()
    assert all(eng.arms[a].config.key() != c1_cfg for a in refined)  # new configs only
    best = out.ranking[0][0]
    assert best.id == "r0" and best.transform.startswith("triton[")


def test_no_refinement_when_the_baseline_wins(relu_base):
    ev = FakeEvaluator(lambda label: 1.0 if label == "base" else 1.3)
    out = _engine(relu_base, ev).run(budget_s=5, max_configs=3)
    assert "refine" not in out.stages


def test_clear_win_is_refined_once_even_past_the_budget(relu_base):
    t = [0.0]
    times = {"base": 1.0, "c1": 0.5, "r0": 0.4}
    ev = FakeEvaluator(lambda label: times.get(label, 1.2))
    eng = _engine(relu_base, ev)
    import search.engine as se

    real = se.time.monotonic
    try:
        se.time.monotonic = lambda: (t.__setitem__(0, t[0] + 100.0), t[0])[1]  # every call: +100 s
        out = eng.run(budget_s=5, max_configs=3, refine_configs=2)
    finally:
        se.time.monotonic = real
    assert "refine" in out.stages and len(out.stages["refine"].rounds) == 1
    assert out.ranking[0][0].id == "r0"


def test_local_search_climbs_while_each_step_improves(relu_base):
    # every refinement step finds a faster neighbour: the search keeps climbing (up to
    # MAX_REFINE_STEPS steps) and keeps the last one
    from search.engine import MAX_REFINE_STEPS

    times = {"base": 1.0, "c1": 0.8, "r0": 0.6, "r2": 0.5, "r4": 0.45}
    ev = FakeEvaluator(lambda label: times.get(label, 1.2))
    eng = _engine(relu_base, ev)
    out = eng.run(budget_s=60, max_configs=3, refine_configs=2, passes=False)
    steps = [k for k in out.stages if k.startswith("refine")]
    assert steps == ["refine", "refine2", "refine3"][:MAX_REFINE_STEPS]
    assert out.ranking[0][0].id == "r4"


def test_local_search_stops_when_a_step_does_not_improve(relu_base):
    times = {"base": 1.0, "c1": 0.8}
    ev = FakeEvaluator(lambda label: times.get(label, 1.2))
    out = _engine(relu_base, ev).run(budget_s=60, max_configs=3, refine_configs=2, passes=False)
    assert [k for k in out.stages if k.startswith("refine")] == ["refine"]
    assert out.ranking[0][0].id == "c1"


def test_config_over_the_shared_memory_limit_is_kept_with_fewer_stages(tmp_path):
    # gemm.fp16 128x256x128 with 3 stages needs 3 x (128x128 + 128x256) x 2 B = 288 KiB > the
    # 227 KiB opt-in limit; with 2 stages (192 KiB) it fits and becomes an arm
    spec = get("gemm.fp16")
    base = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path)
    eng = SearchEngine(spec, "sm_90a", base, evaluator=None, cache_dir=tmp_path)
    c = spec.configs()[0]
    big = c.model_copy(update={"meta": {**c.meta, "BLOCK_K": 128}, "num_stages": 3})
    arms = eng._build_configs([(big, "BLOCK_K=128")], prefix="c")
    assert len(arms) == 1
    assert arms[0].config.num_stages == 2 and arms[0].config.meta["BLOCK_K"] == 128
    assert "s2" in arms[0].transform
    assert eng.baseline.abi.dynamic_smem <= 232448 < 3 * (128 * 128 + 128 * 256) * 2


def test_refinement_builds_its_quota_past_neighbours_that_do_not_compile(relu_base, monkeypatch):
    # the first two neighbours of the winner fail to compile: the local search still builds
    # `refine_configs` arms from the next ones, with unique ids
    from harness.errors import ReferenceCompileError
    import search.engine as se

    real = se.compile_reference
    calls = []

    def flaky(spec, arch, cfg, **kw):
        calls.append(cfg.key())
        if len(calls) > 4 and len(calls) <= 6:
            raise ReferenceCompileError("scripted failure")
        return real(spec, arch, cfg, **kw)

    times = {"base": 1.0, "c1": 0.8}
    eng = _engine(relu_base, FakeEvaluator(lambda label: times.get(label, 1.2)))
    eng.workers = 1
    monkeypatch.setattr(se, "compile_reference", flaky)
    eng.run(budget_s=60, max_configs=3, refine_configs=2, passes=False)
    refined = [a for a in eng.arms if a.startswith("r")]
    assert len(refined) >= 2 and len(set(refined)) == len(refined)
    assert sum(1 for k, v in eng.rejected.items() if "scripted" in v) == 2


def test_a_winner_that_loses_to_the_baseline_when_remeasured_is_dropped(relu_base):
    # c1 looked fast in the first halving but is slower than the baseline in the refinement
    # job (noise the first time): the search must come back to the baseline
    ev = FakeEvaluator(lambda label: None)
    def t(label):
        refining = any(x.startswith("r") for x in ev.jobs[-1])
        if label == "base":
            return 1.0
        if label == "c1":
            return 1.3 if refining else 0.8
        return 1.2
    ev.time_of = t
    out = _engine(relu_base, ev).run(budget_s=60, max_configs=3, refine_configs=2, passes=False)
    assert "refine" in out.stages
    assert out.ranking[0][0].id == "base"
