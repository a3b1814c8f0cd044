"""The ``search`` provider in the agent loop: proposal order, origins naming the transformation,
the static (no GPU) path, and its registration in the CLI."""

from __future__ import annotations

import pytest

import harness
from agent.loop import LoopOptions, build_report, lower
from agent.providers.base import ProposalContext
from agent.providers.search import SearchProvider
from harness import compile_reference
from kernels import get
from tests.search.test_engine import FakeEvaluator


def _ctx(spec, art, gpu: bool) -> ProposalContext:
    return ProposalContext(spec=spec, arch="sm_90a", config=art.config,
                           constexprs=spec.constexprs(art.config), abi=art.abi,
                           triton_source=spec.source.source_text(), ttgir=art.ttgir,
                           reference_ptx=art.ptx, configs=tuple(spec.configs()), gpu_available=gpu)


def test_static_loop_run_proposes_baseline_first_and_names_transformations(tmp_path):
    spec = get("relu.fp16")
    prov = SearchProvider(cache_dir=tmp_path, budget_s=5, max_configs=2, workers=1)
    res = lower(spec, "sm_90a", prov, LoopOptions(iterations=4, cache_dir=tmp_path))
    origins = [r.origin for r in res.iterations]
    assert origins[0] == "search:baseline"
    assert all(o.startswith("search:") for o in origins)
    assert all(r.verdict == "static-only" for r in res.iterations)
    rep = build_report(res)
    assert rep["candidate"]["origin"] == "search:baseline"
    assert rep["provider"] == "search"


def test_gpu_order_is_winner_then_baseline_then_runners_up(tmp_path, monkeypatch):
    spec = get("relu.fp16")
    art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path)
    times = {"base": 1.0, "c0": 0.9, "c1": 0.8}
    fake = FakeEvaluator(lambda label: times.get(label, 1.3))
    monkeypatch.setattr(harness, "GPUEvaluator", lambda **kw: fake)
    prov = SearchProvider(cache_dir=tmp_path, budget_s=5, max_configs=2, workers=1)
    ctx = _ctx(spec, art, gpu=True)
    first = prov.propose(ctx, None, lambda n, a: "")
    assert first.candidate is not None and first.candidate.origin.startswith("search:triton[")
    assert any(e["type"] == "search" and e["gpu"] for e in first.events)
    prop = next(e for e in first.events if e["type"] == "propose")
    assert prop["search_speedup"] == pytest.approx(1 / 0.8)
    second = prov.propose(ctx, "feedback", lambda n, a: "")
    assert second.candidate.origin == "search:baseline"
    third = prov.propose(ctx, "feedback", lambda n, a: "")
    assert third.candidate is not None  # the runner-up
    while True:
        p = prov.propose(ctx, "feedback", lambda n, a: "")
        if p.candidate is None:
            assert p.error_kind == "exhausted"
            break


def test_a_baseline_that_cannot_be_measured_is_a_clear_error(tmp_path, monkeypatch):
    """The baseline arm itself fails on the GPU (seen on the H200: a persistent kernel on 4 CTAs
    read as a hang): the provider says so with the measurement's message, not a bare
    StopIteration."""
    spec = get("relu.fp16")
    art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path)
    fake = FakeEvaluator(lambda label: None if label == "base" else 0.9)
    monkeypatch.setattr(harness, "GPUEvaluator", lambda **kw: fake)
    prov = SearchProvider(cache_dir=tmp_path, budget_s=5, max_configs=2, workers=1)
    with pytest.raises(RuntimeError, match=r"baseline .* was not measured.*too far"):
        prov.propose(_ctx(spec, art, gpu=True), None, lambda n, a: "")


def test_no_gpu_says_selection_needs_a_gpu(tmp_path):
    spec = get("relu.fp16")
    art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path)
    prov = SearchProvider(cache_dir=tmp_path, budget_s=5, max_configs=1, workers=1)
    p = prov.propose(_ctx(spec, art, gpu=False), None, lambda n, a: "")
    assert p.candidate.origin == "search:baseline"
    assert "selection needs a GPU" in (p.error or "")


def test_budget_from_environment(monkeypatch):
    monkeypatch.setenv("AILOWER_SEARCH_BUDGET_S", "12.5")
    assert SearchProvider().budget_s == 12.5
    monkeypatch.setenv("AILOWER_SEARCH_BUDGET_S", "soon")
    with pytest.raises(ValueError, match="AILOWER_SEARCH_BUDGET_S"):
        SearchProvider()
    monkeypatch.setenv("AILOWER_SEARCH_BUDGET_S", "-1")
    with pytest.raises(ValueError, match="budget"):
        SearchProvider()


def test_cli_knows_the_search_provider(monkeypatch):
    from ailower import _common as cli
    from common.settings import get_settings

    assert "search" in cli.PROVIDERS
    prov = cli._make_provider("search", None, None, get_settings())
    assert isinstance(prov, SearchProvider)
    monkeypatch.setenv("AILOWER_SEARCH_BUDGET_S", "x")
    with pytest.raises(cli.CliFailure, match="--provider search"):
        cli._make_provider("search", None, None, get_settings())


def test_memory_bound_kernels_get_the_memory_budget(monkeypatch):
    monkeypatch.setenv("AILOWER_SEARCH_BUDGET_S", "40")
    monkeypatch.setenv("AILOWER_SEARCH_MEMORY_BUDGET_S", "6")
    prov = SearchProvider()
    assert prov.budget_for(get("gemm.fp16")) == 40.0
    assert prov.budget_for(get("relu.fp16")) == 6.0
    # the memory budget never exceeds the main one
    assert SearchProvider(budget_s=3).budget_for(get("relu.fp16")) == 3.0
    monkeypatch.setenv("AILOWER_SEARCH_MEMORY_BUDGET_S", "0")
    with pytest.raises(ValueError, match="budgets must be > 0"):
        SearchProvider()
