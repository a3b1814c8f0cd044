"""Pipeline-context timing (issue 22 item 5): the request flag, the result model, how the loop, the
cell summary and the leaderboard carry it, and the capped autotune of the widened spaces. CPU only
(the GPU run is tests/gpu/test_pipeline_context_gpu.py)."""

from __future__ import annotations

import pytest

import kernels
from campaign.leaderboard import Entry, outcome
from harness import PipelineTiming, compile_reference
from harness.candidate import Candidate
from harness.evaluate import GPUEvaluator, candidate_request
from harness.suite_baseline import BaselineRow, SuiteBaselineReport, capped_configs, render_table
from harness.timing import stats


def _pipe(step_lo: float) -> PipelineTiming:
    t = stats([1.0, 1.1, 1.2])
    return PipelineTiming(producer="p", consumer="c", pairs=3, reference_kernel=t,
                          candidate_kernel=t, reference_step=t, candidate_step=t, speedup=1.03,
                          speedup_ci=(1.02, 1.04), step_speedup=1.0, step_speedup_ci=(step_lo, 1.01),
                          isolated_speedup=1.03, survives=step_lo > 1.0)


def test_pipeline_timing_model_round_trips():
    p = _pipe(0.99)
    assert not p.survives
    assert PipelineTiming.model_validate_json(p.model_dump_json()) == p


def test_candidate_request_carries_the_pipeline_flag(ref_cache):
    spec = kernels.get("vector_add")
    art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=ref_cache)
    cand = Candidate(ptx=art.ptx, threads=art.abi.threads)
    ev = GPUEvaluator()
    req = candidate_request(spec, art, cand, art.cubin, ev, pipeline=True)
    assert req.pipeline is True and req.job == "evaluate"
    assert candidate_request(spec, art, cand, art.cubin, ev).pipeline is False
    # no timing, no pipeline timing
    assert candidate_request(spec, art, cand, art.cubin, ev, time_it=False, pipeline=True
                             ).pipeline is False


def _entry(**kw) -> Entry:
    base = dict(kernel="softmax", base="softmax", family="common", arch="sm_90a",
                provider="search", who="search", campaign="c", cell_id=1, status="done",
                valid=True, baseline_ms=1.0, baseline_q1_ms=0.99, baseline_q3_ms=1.01,
                candidate_ms=0.95, candidate_q1_ms=0.94, candidate_q3_ms=0.96, speedup=1.05,
                outcome="failed")
    base.update(kw)
    return Entry(**base)


def test_a_win_counts_only_where_it_survives_in_context():
    assert outcome(_entry()) == "win"                          # not timed in context
    assert outcome(_entry(pipeline_survives=True)) == "win"
    assert outcome(_entry(pipeline_survives=False)) == "tie"   # isolated win only
    # a loss stays a loss whatever the context says
    assert outcome(_entry(candidate_q1_ms=1.05, candidate_q3_ms=1.07, candidate_ms=1.06,
                          pipeline_survives=False)) == "loss"


def test_leaderboard_entry_reads_space_and_pipeline_from_the_summary():
    from campaign.leaderboard import _entry as make_entry
    from campaign.store import CellRow

    summary = {"baseline": {"config": "w4", "timing": {"median_ms": 1.0, "q1_ms": 0.99,
                                                        "q3_ms": 1.01},
                            "space": "wide", "space_configs": 5},
               "candidate": {"origin": "search:x", "timing": {"median_ms": 0.95, "q1_ms": 0.94,
                                                              "q3_ms": 0.96}},
               "speedup": 1.05, "valid": True,
               "pipeline": _pipe(0.99).model_dump(mode="json")}
    fields = dict(id=1, campaign_id=1, kernel="softmax", arch="sm_90a", provider="search",
                  model="", spec_ref="suite:softmax", spec_id="x", status="done",
                  summary=summary)
    e = make_entry(CellRow(**fields), "c")
    assert e.baseline_space == "wide" and e.baseline_space_configs == 5
    assert e.pipeline_survives is False and e.pipeline_step_ci == (0.99, 1.01)
    assert e.outcome == "tie" and e.isolated_outcome == "win"


def test_capped_configs_keep_the_narrow_space_and_spread_the_rest():
    wide = kernels.get("gemm.fp16", "wide")
    narrow = {c.key() for c in kernels.get("gemm.fp16", "narrow").configs()}
    assert capped_configs(wide, narrow, None) == wide.configs()
    got = capped_configs(wide, narrow, 20)
    assert len(got) == 20 and len({c.key() for c in got}) == 20
    assert [c.key() for c in got[:6]] == [c.key() for c in kernels.get("gemm.fp16", "narrow")
                                          .configs()]
    # the rest is spread over the whole space, not its first configs
    rest = [c.key() for c in wide.configs() if c.key() not in narrow]
    idx = [rest.index(c.key()) for c in got[6:]]
    assert idx[0] == 0 and idx[-1] > len(rest) * 0.85
    assert len(capped_configs(wide, narrow, 3)) == 3
    with pytest.raises(ValueError, match="max_configs"):
        capped_configs(wide, narrow, 0)


def test_baseline_table_says_space_and_cap():
    rep = SuiteBaselineReport(arch="sm_90a", space="narrow", max_configs=40)
    rep.rows = [BaselineRow(kernel="bitdelta", space="narrow", space_configs=7, configs=7,
                            best_config="x", median_ms=21.4, correct=True)]
    text = render_table(rep)
    assert "narrow autotune spaces, at most 40 configs per kernel" in text and "7/7" in text


def test_loop_records_the_space_and_no_pipeline_without_a_gpu(ref_cache):
    from agent.loop import LoopOptions, build_report, lower
    from agent.providers.triton import TritonProvider

    spec = kernels.get("softmax", "narrow")
    res = lower(spec, "sm_90a", TritonProvider(cache_dir=ref_cache),
                LoopOptions(iterations=1, cache_dir=ref_cache, pipeline=True))
    assert not res.gpu and res.pipeline is None  # the pipeline context is timed on a GPU only
    rep = build_report(res)
    assert rep["pipeline"] is None
    assert rep["reference"]["autotune_space"] == {"space": "narrow", "configs": 3, "space_configs": 3}


class _FakeBuf:
    def __init__(self, *_a, nbytes: int = 256, **_k):
        self.nbytes = _a[1] if len(_a) > 1 else nbytes
        self.ptr = 0x1000
        self.copies: list[str] = []

    def copy_from(self, other) -> None:
        self.copies.append("copy")

    def free(self) -> None:
        pass


class _FakeCtx:
    """Events whose elapsed time is scripted: the kernel window (e1 -> e2) of the candidate takes
    ``cand_ms``, every other window ``ref_ms``; producer and consumer 0.5 ms each."""

    def __init__(self, cand_ms: float, ref_ms: float = 1.0):
        self.cand_ms, self.ref_ms, self.label = cand_ms, ref_ms, None
        self.order: list[str] = []
        self.cu = type("cu", (), {"cuMemsetD8Async": staticmethod(lambda *a: 0)})()
        self.stream = None

    def reset_persisting_l2(self) -> None:
        pass

    def event(self):
        return {"t": 0.0}

    def record(self, ev) -> None:
        ev["t"] = self.clock  # the fake launches and copies advance the clock

    def elapsed_ms(self, a, b) -> float:
        return b["t"] - a["t"]


def _fake_worker(monkeypatch, cand_ms: float, bad_slot: int | None = None):
    import numpy as np

    import harness.gpu.worker as w

    spec = kernels.get("softmax", "narrow")
    monkeypatch.setattr(w, "GuardedBuffer", _FakeBuf)
    monkeypatch.setattr(w, "DeviceBuffer", _FakeBuf)
    monkeypatch.setattr(w, "check", lambda *a, **k: 0)
    wk = object.__new__(w.Worker)
    ctx = _FakeCtx(cand_ms)
    ctx.clock = 0.0
    wk.ctx, wk.spec = ctx, spec
    ref = type("K", (), {"label": "reference", "role": "reference"})()
    cand = type("K", (), {"label": "candidate", "role": "candidate"})()
    req = type("R", (), {"kernels": [ref, cand], "max_reps": 64, "min_reps": 16,
                         "ci_target": 0.0025, "timing_budget_s": 0.0, "l2_demote": True})()
    wk.req = req
    wk.runs = {"reference": type("Run", (), {"status": "ok", "message": ""})(),
               "candidate": type("Run", (), {"status": "ok", "message": ""})()}
    wk.kernels = {"candidate": object()}
    wk.helpers = type("H", (), {"l2_normal": lambda self, p, n: None})()
    names = [p.name for p in spec.tensors()]
    bs = [type("BS", (), {"bufs": {n: _FakeBuf(nbytes=256) for n in names}, "pristine": {},
                          "ref_dev": {}})() for _ in range(2)]
    st = type("St", (), {"bench": bs, "ref_kernel": object()})()
    launches: list[str] = []

    def launch(kut, size, bufs, scratch, kernel=None):
        launches.append(kut.label)
        ctx.clock += cand_ms if kut.label == "candidate" else ctx.ref_ms

    def producer_or_consumer(self_buf, other):
        ctx.clock += 0.5

    monkeypatch.setattr(_FakeBuf, "copy_from", producer_or_consumer)
    n_slots = [0]
    wk._stage = lambda *a: None
    wk._prep_timed = lambda *a: None
    wk._scratch = lambda *a: None
    wk._launch = launch
    wk._check_launch = lambda bs_, slot, candidate=False: n_slots.__setitem__(0, max(n_slots[0], slot + 1))
    wk._sync = lambda *a: None
    wk.slots = lambda n: _FakeBuf(nbytes=n)

    def read_slots(n):
        out = np.zeros((n, 3), dtype=np.uint64)
        if bad_slot is not None:
            out[bad_slot, 0] = 1
        return out

    wk._read_slots = read_slots
    return wk, st, launches


def test_pipeline_timing_logic_with_a_fake_device(monkeypatch):
    wk, st, launches = _fake_worker(monkeypatch, cand_ms=0.8)
    p = wk.timing_pipeline(st, isolated=1.25)
    # ABBA over pairs: reference first in pairs 0-1, candidate first in pairs 2-3
    assert launches[:8] == ["reference", "candidate"] * 2 + ["candidate", "reference"] * 2
    assert p.pairs == len(launches) // 2 - 2 and p.pairs >= 16  # two warm-up pairs dropped
    assert p.reference_kernel.median_ms == pytest.approx(1.0)
    assert p.candidate_kernel.median_ms == pytest.approx(0.8)
    # softmax has one input and one output: 0.5 ms producer + 0.5 ms consumer around the kernel
    assert p.reference_step.median_ms == pytest.approx(2.0)
    assert p.candidate_step.median_ms == pytest.approx(1.8)
    assert p.speedup == pytest.approx(1.25) and p.step_speedup == pytest.approx(2.0 / 1.8)
    assert p.survives and p.isolated_speedup == 1.25
    assert wk.runs["candidate"].status == "ok"


def test_pipeline_timing_no_gain_does_not_survive_and_a_bad_launch_is_caught(monkeypatch):
    wk, st, _ = _fake_worker(monkeypatch, cand_ms=1.0)
    p = wk.timing_pipeline(st, isolated=1.0)
    assert p.step_speedup == pytest.approx(1.0) and not p.survives
    wk, st, _ = _fake_worker(monkeypatch, cand_ms=0.8, bad_slot=5)
    wk.timing_pipeline(st, isolated=1.2)
    assert wk.runs["candidate"].status == "incorrect"
    assert "pipeline-context launch 6" in wk.runs["candidate"].message
