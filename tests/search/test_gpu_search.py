"""The search on a real GPU (``pytest -m gpu``; skipped without a driver): every ranked arm was
measured correct against the float64 reference, the baseline is among them, and a deliberately
wrong candidate never ranks. The numbers for the issue come from ``scripts/device_search.sh``."""

from __future__ import annotations

import pytest

from agent.loop import LoopOptions, lower
from agent.providers.search import SearchProvider
from harness import GPUEvaluator, autotune, compile_space, device_arch
from kernels import get
from search.engine import SearchEngine

pytestmark = pytest.mark.gpu


def test_engine_on_gpu_ranks_only_correct_arms(tmp_path):
    arch = device_arch()
    spec = get("relu.fp16")
    ev = GPUEvaluator(timing_budget_s=0.2, input_cache=tmp_path)
    refs, _ = compile_space(spec, arch, cache_dir=tmp_path)
    base = autotune(spec, refs, ev).artifacts
    eng = SearchEngine(spec, arch, base, evaluator=ev, cache_dir=tmp_path, workers=2)
    arms = eng.config_arms(2)
    # a wrong candidate: the baseline with every store removed (outputs stay at the sentinel)
    broken = "\n".join(l for l in base.ptx.split("\n") if "st.global" not in l)
    bad = eng.check("broken", base, broken, "broken")
    assert bad is not None
    m = eng.measure(["base", "broken", *[a.id for a in arms if a.id != "base"]], 0, 10)
    assert m["base"].ok and not m["broken"].ok
    out = eng.run(budget_s=10, max_configs=2)
    assert out.gpu and any(a.id == "base" for a, _ in out.ranking)
    assert all(r is not None and r > 0 for _, r in out.ranking)


def test_lower_with_search_provider_is_never_slower_beyond_noise(tmp_path):
    arch = device_arch()
    spec = get("relu.fp16")
    prov = SearchProvider(cache_dir=tmp_path, budget_s=8, max_configs=2, workers=2)
    res = lower(spec, arch, prov, LoopOptions(iterations=2, cache_dir=tmp_path),
                evaluator=GPUEvaluator(input_cache=tmp_path))
    assert res.best is not None and res.best.verdict == "accepted"
    assert res.best.speedup >= 0.97
    assert res.best.origin.startswith("search:")
