"""The hand-written PTX entries of the ``fast`` family on a real GPU (``pytest -m gpu``): each
sm_90a entry's PTX is assembled and run through the harness against its Triton baseline of the
same ABI and the spec's float64 reference (>= 3 seeds plus a secret one), then timed.

Prints one line per entry: ``fast-ptx NAME: STATUS speedup X (CI lo-hi) ref MS cand MS``, and
for the race gate ``fast-ptx-sanitizer NAME: ran/ok message`` (compute-sanitizer racecheck and
synccheck at the verify size; the test skips when compute-sanitizer is not installed).
Skipped without a driver; an sm_100a entry is skipped on a device of another arch.
"""

from __future__ import annotations

import pytest

import kernels
from harness import GPUEvaluator, assemble, compile_reference, device_arch, evaluate_candidate
from harness.evaluate import race_gate
from harness.candidate import Candidate
from kernels.fast.hand_ptx import HAND_PTX

pytestmark = pytest.mark.gpu


def _candidate(h) -> Candidate:
    return Candidate(ptx=h.text(), threads=h.threads, meta=dict(h.meta),
                     dynamic_smem=h.dynamic_smem, cluster_dims=h.cluster_dims,
                     global_scratch_size=h.global_scratch_size,
                     global_scratch_align=h.global_scratch_align, origin=f"hand:{h.file}")


@pytest.fixture(scope="module")
def evaluator():
    with GPUEvaluator(hang_timeout_s=10.0, job_timeout_s=600) as ev:
        yield ev


def _prepared(name, ref_cache):
    """(spec, Triton reference, candidate, cubin) of hand-written entry ``name`` on this device;
    skips an entry written for another arch."""
    h = HAND_PTX[name]
    arch = device_arch()
    if arch != h.arch:
        pytest.skip(f"{name} is written for {h.arch}; the device is {arch}")
    spec = kernels.get(name)
    ref = compile_reference(spec, arch, spec.configs()[0], cache_dir=ref_cache)
    cand = _candidate(h)
    asm = assemble(cand.ptx, arch)
    assert asm.ok and asm.cubin, asm.render()
    return spec, ref, cand, asm.cubin


@pytest.mark.parametrize("name", sorted(HAND_PTX))
def test_hand_written_ptx_matches_float64_reference(name, ref_cache, evaluator):
    spec, ref, cand, cubin = _prepared(name, ref_cache)
    res = evaluate_candidate(spec, ref, cand, cubin, evaluator)
    run = next(k for k in res.kernels if k.role == "candidate")
    refrun = next(k for k in res.kernels if k.role == "reference")
    ms = (lambda k: f"{k.timing.median_ms:.4f}" if k.timing else "-")
    ci = f"({res.speedup_ci[0]:.3f}-{res.speedup_ci[1]:.3f})" if res.speedup_ci else ""
    print(f"\nfast-ptx {name}: {res.status}/{run.status} speedup {res.speedup} {ci} "
          f"ref {ms(refrun)} ms cand {ms(run)} ms regs {run.registers} {run.message[:300]}")
    assert res.status == "ok" and run.status == "ok", run.message
    assert len(run.checks) >= 3 and all(c.ok and c.vs_float64 for c in run.checks)


@pytest.mark.parametrize("name", sorted(HAND_PTX))
def test_hand_written_ptx_passes_racecheck_and_synccheck(name, ref_cache, evaluator):
    spec, ref, cand, cubin = _prepared(name, ref_cache)
    gate = race_gate(spec, ref, cand, cubin, evaluator)
    print(f"\nfast-ptx-sanitizer {name}: ran={gate.ran} ok={gate.ok} {gate.seconds:.1f} s "
          f"{gate.message[:400]}")
    if not gate.ran:
        pytest.skip(gate.message)
    assert gate.ok, gate.message
