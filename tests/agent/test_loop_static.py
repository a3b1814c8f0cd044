"""The agent loop on the static path (no GPU): gates, feedback, best candidate, transcript."""

from __future__ import annotations

import json

import pytest

import kernels
from agent.loop import LoopOptions, Transcript, build_report, lower
from agent.providers.triton import TritonProvider
from tests import mutants
from tests.agent.scripted import ScriptedProvider


def test_triton_provider_walks_the_autotune_space(ref_cache, tmp_path):
    spec = kernels.get("softmax")
    tx = tmp_path / "t.jsonl"
    res = lower(spec, "sm_90a", TritonProvider(cache_dir=ref_cache),
                LoopOptions(iterations=10, cache_dir=ref_cache), transcript=Transcript(tx))
    assert not res.gpu
    assert [r.origin for r in res.iterations] == [f"triton:{c.key()}" for c in spec.configs()]
    assert all(r.verdict == "static-only" for r in res.iterations)
    assert res.stop_reason == "exhausted" and res.best_iteration == 0
    assert res.best_candidate.ptx.startswith("//") and res.best_cubin[:4] == b"\x7fELF"
    lines = [json.loads(line) for line in tx.read_text().splitlines()]
    events = [e["event"] for e in lines]
    assert events[0] == "reference_compiled" and events[-1] == "done"
    # issue 21 defect 7: the done event names the same 1-based iteration as the records
    assert lines[-1]["best_iteration"] == res.best.iteration == 1
    # issue 21 defect 4: an offline provider's transcript is refused up front, saying why
    from agent.providers.replay import ReplayError, read_transcript

    with pytest.raises(ReplayError, match=r"'triton' provider.*only transcripts of model "
                                          r"providers \(anthropic, openai\) replay"):
        read_transcript(tx)
    assert events.count("iteration") == len(spec.configs())
    rep = build_report(res)
    assert rep["verifier"]["ok"] and rep["assembly"]["ok"] and rep["evaluation"] is None
    assert rep["reference"]["baseline"]["abi"]["entry"] == "softmax_kernel"


def test_broken_candidates_are_diagnosed_and_the_loop_goes_on(ref_cache):
    spec = kernels.get("vector_add")
    prov = ScriptedProvider([
        ("ptxas-error", lambda c: mutants.ptxas_error(c.reference_ptx)),
        ("rate-limited", "rate_limited"),
        ("wrong-entry", lambda c: mutants.wrong_entry(c.reference_ptx)),
        ("wrong-params", lambda c: mutants.wrong_params(c.reference_ptx)),
        ("good", lambda c: c.reference_ptx),
    ])
    res = lower(spec, "sm_90a", prov, LoopOptions(iterations=6, cache_dir=ref_cache))
    verdicts = [r.verdict for r in res.iterations]
    assert verdicts == ["rejected-assembly", "rejected-provider", "rejected-verifier",
                        "rejected-verifier", "static-only"]
    assert res.best_iteration == 4 and res.stop_reason == "exhausted"
    fb = prov.feedback  # what each proposal was told about the previous one
    assert fb[0] is None
    assert "FAILED" in fb[1] and "bogus.op" in fb[1]
    assert "rate_limited" in fb[2]
    assert "error[E1]" in fb[3] and "vector_add_kernel" in fb[3]
    assert "error[E2]" in fb[4] and "param_3" in fb[4]
    e2 = res.iterations[3].verifier["findings"][0]
    assert e2["rule"] == "E2" and e2["line"] > 0


def test_fatal_provider_error_stops_the_loop(ref_cache):
    prov = ScriptedProvider([("auth", "auth"), ("never", lambda c: c.reference_ptx)])
    res = lower(kernels.get("vector_add"), "sm_90a", prov, LoopOptions(iterations=5, cache_dir=ref_cache))
    assert len(res.iterations) == 1 and res.stop_reason.startswith("fatal provider error")
    assert res.best_candidate is None


def test_sm100a_matmul_static_path_has_tcgen05(ref_cache):
    res = lower(kernels.get("matmul"), "sm_100a", TritonProvider(cache_dir=ref_cache),
                LoopOptions(iterations=1, cache_dir=ref_cache))
    best = res.best
    assert best.verdict == "static-only" and best.assembly["ok"] and best.verifier["ok"]
    assert "tcgen05.mma" in res.best_candidate.ptx and res.best_cubin[:4] == b"\x7fELF"


def test_options_validate():
    with pytest.raises(ValueError):
        LoopOptions(iterations=0)
