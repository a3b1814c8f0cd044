"""Float64 arbitration of a bench-size disagreement on a real GPU (``pytest -m gpu``).

The expert conv2d.fp8 candidate (kernels/expert/conv2d.fp8/sm_90a) reduces its 9 x 256 products
per output in another order than Triton's kernel; Hopper's fp8 wgmma accumulates with reduced
precision, so at the bench size (256 input channels) the two disagree beyond the fp8 tolerance on
tens of thousands of outputs (57,659 of 67.1M on 2026-12-02) while both are about as close to
float64. The worker must decide that by float64 (``Worker.arbitrate``): the candidate is accepted,
its arbitration recorded per output and bench set, and every timed launch after it checked
bytewise against the arbitrated output. The precision-downgrade attacks of
:mod:`tests.gpu.redteam` (``*_bench_only``) are the other side: rejected by the same arbitration.
Skipped without a driver or on a device that is not sm_90a.
"""

from __future__ import annotations

import pytest

import kernels
from harness import GPUEvaluator, assemble, compile_reference, device_arch, evaluate_candidate
from harness.candidate import Candidate
from kernels.expert import find

pytestmark = pytest.mark.gpu


def test_expert_conv2d_fp8_is_accepted_by_float64_arbitration(ref_cache):
    arch = device_arch()
    entry = find("conv2d.fp8", arch)
    if entry is None:
        pytest.skip(f"no expert conv2d.fp8 for {arch}")
    spec = kernels.get("conv2d.fp8")
    cfg = spec.configs()[0]
    ref = compile_reference(spec, arch, cfg, cache_dir=ref_cache)
    lc = entry.launch
    cand = Candidate(ptx=entry.ptx, threads=lc.threads, meta={**cfg.meta, **lc.meta},
                     dynamic_smem=lc.dynamic_smem, cluster_dims=lc.cluster_dims,
                     global_scratch_size=lc.global_scratch_size,
                     global_scratch_align=lc.global_scratch_align, origin="expert:conv2d.fp8")
    asm = assemble(cand.ptx, arch)
    assert asm.ok, asm.render()
    with GPUEvaluator(hang_timeout_s=10.0, job_timeout_s=600) as ev:
        res = evaluate_candidate(spec, ref, cand, asm.cubin, ev)
    c = res.candidate
    assert c is not None
    for a in c.arbitration:
        print(f"\narbitration {a.output}: candidate n_bad {a.candidate.n_bad} norm "
              f"{a.candidate.norm_err:.3g}; Triton n_bad {a.reference.n_bad} norm "
              f"{a.reference.norm_err:.3g}; ok {a.ok} {a.reason}")
    print(f"conv2d.fp8 expert: {res.status}/{c.status} {c.message[:300]} speedup {res.speedup} "
          f"CI {res.speedup_ci} arbitration {res.seconds.get('arbitration')} s")
    assert res.status == "ok" and c.status == "ok", c.message
    # the disagreement happened and was decided by float64: two bench sets x one output
    assert len(c.arbitration) == 2 and all(a.ok for a in c.arbitration)
    assert c.timed_launches_checked == res.timing_pairs + 2
    assert c.final_check is not None and c.final_check.ok
    assert res.speedup is not None and res.speedup_ci is not None
