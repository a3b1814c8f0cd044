"""Host tensor descriptors on the GPU (issues 18 and 22 item 3; ``pytest -m gpu -s``, skipped
without a driver): every fast entry with ``tensordesc`` parameters runs its Triton baseline
through the worker (CUtensorMaps encoded over the guarded buffers) and must match its float64
reference on every seed; Triton's own PTX, assembled by the harness and launched as a candidate
with the same descriptors, must pass correctness, the timed per-launch checks and the fresh-load
check. One line per entry is printed (``-s`` shows it).
"""

from __future__ import annotations

import time

import pytest

from harness import GPUEvaluator, assemble, autotune, compile_reference, device_arch, evaluate_candidate
from harness.candidate import Candidate
from kernels.registry import get, names

pytestmark = pytest.mark.gpu

ENTRIES = [n for n in names("fast") if any(p.kind == "tensordesc" for p in get(n).params)]


def test_the_fast_family_has_descriptor_entries():
    assert {"fast.gemm_tma_persistent", "fast.gemm_ws", "fast.gemm_fp8", "fast.gemm_mxfp8",
            "fast.gemm_mxfp4"} <= set(ENTRIES)


@pytest.mark.parametrize("name", ENTRIES)
def test_descriptor_entry_baseline_and_own_ptx_are_correct(name, ref_cache):
    spec = get(name)
    arch = device_arch()
    cfg = spec.configs()[0]
    t0 = time.perf_counter()
    art = compile_reference(spec, arch, cfg, cache_dir=ref_cache)
    assert art.abi.tensor_maps, "the ABI carries one tensor-map layout per descriptor"
    with GPUEvaluator(hang_timeout_s=20.0, timing_budget_s=0.3) as ev:
        base = autotune(spec, [art], ev, seeds=(0, 1))
        run = base.result.kernels[0]
        assert run.status == "ok", run.message
        assert run.checks and all(c.ok and c.vs_float64 for c in run.checks), run.checks
        norm = max(c.norm_err for chk in run.checks for c in chk.vs_float64.values())
        asm = assemble(art.ptx, arch)
        assert asm.ok, asm.summary(art.ptx)
        abi = art.abi
        cand = Candidate(ptx=art.ptx, threads=abi.threads, meta=dict(cfg.meta),
                         dynamic_smem=abi.dynamic_smem, cluster_dims=(abi.num_ctas, 1, 1),
                         global_scratch_size=abi.global_scratch_size,
                         global_scratch_align=abi.global_scratch_align, origin="triton-own-ptx")
        res = evaluate_candidate(spec, art, cand, asm.cubin, ev)
    c = res.candidate
    print(f"tensordesc {name:26} {arch} baseline=ok norm_err={norm:.2e} "
          f"base_ms={run.timing.median_ms if run.timing else float('nan'):.3f} "
          f"own_ptx={c.status if c else res.status} speedup={res.speedup} "
          f"checked={c.timed_launches_checked if c else 0} "
          f"final={c.final_check.ok if c and c.final_check else None} "
          f"{time.perf_counter() - t0:.1f}s {(c.message if c else res.message)[:120]}", flush=True)
    assert res.status == "ok" and c is not None and c.status == "ok", (res.message, c)
    assert c.timed_launches_checked > 0 and c.final_check is not None and c.final_check.ok
