"""The ncu path on a real GPU (``pytest -m gpu``; the GPU issue runs it): one bench-size launch
through the worker, then under ncu with ailower's command. Skipped without a driver; the ncu
part is skipped where no ncu is installed."""

from __future__ import annotations

import pytest

import kernels
from harness import GPUEvaluator, compile_reference, device_arch
from harness.evaluate import kernel_under_test
from harness.profile import NCU_METRICS, find_ncu, profile_launch

pytestmark = pytest.mark.gpu


def test_launch_once_at_the_bench_size_then_ncu(ref_cache):
    arch = device_arch()
    spec = kernels.get("softmax")
    art = compile_reference(spec, arch, spec.configs()[0], cache_dir=ref_cache)
    abi = art.abi
    with GPUEvaluator() as ev:
        kut = kernel_under_test(spec, abi, art.cubin, label="profiled", role="candidate",
                                config=art.config, threads=abi.threads,
                                dynamic_smem=abi.dynamic_smem, cluster=(abi.num_ctas, 1, 1))
        res = ev.run(ev.request(spec, "launch_once", [kut], seeds=[0], time=False,
                                secret_seed=False, launch_size="bench"))
        assert res.status == "ok" and res.kernels[0].status == "ok", res.message
        if find_ncu() is None:
            pytest.skip("no ncu on this host")
        rep = profile_launch(spec, art, None, None, ev)
    if not rep.available:
        assert "ERR_NVGPUCTRPERM" in rep.reason or rep.reason.startswith("ncu unavailable"), rep
        pytest.skip(f"ncu ran without counters: {rep.reason}")
    assert rep.kernel == abi.entry
    assert set(NCU_METRICS) <= set(rep.metrics)
    assert rep.metrics["launch__registers_per_thread"] > 0
