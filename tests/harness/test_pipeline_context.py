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
    assert rep["reference"]["autotune_space"] == {"space": "narrow", "configs": 3}
