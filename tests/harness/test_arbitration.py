"""The float64 arbitration rule (``harness.correctness.arbitrate``) on NumPy outputs: correct
kernels that round or reduce differently from the reference kernel are accepted, precision
downgrades and skipped work are not, whatever the count of disagreements with the reference
kernel. The worker's use of it (determinism, bytewise re-timing) is tested on the GPU
(tests/gpu/test_bench_arbitration_gpu.py, the ``*_bench_only`` red-team attacks)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from harness.correctness import ARBITRATION_FACTOR, arbitrate, compare
from kernels.spec import DEFAULT_TOLERANCES

FP16, FP8, FP32 = (DEFAULT_TOLERANCES[k] for k in ("fp16", "fp8e4nv", "fp32"))


@pytest.fixture(scope="module")
def gemm():
    """x (256, 2048) @ W_eff^T with W_eff = W + alpha * sign, rounded to fp16 once (Triton's
    bitdelta) and twice (the old expert decode); float64 reference."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((256, 2048)).astype(np.float16)
    w = (rng.standard_normal((512, 2048)) * 0.5).astype(np.float16)
    alpha = (rng.random(512) * 0.05).astype(np.float32)
    sign = rng.choice([-1.0, 1.0], size=(512, 2048)).astype(np.float32)
    once = (w.astype(np.float32) + alpha[:, None] * sign).astype(np.float16)
    twice = (w + alpha.astype(np.float16)[:, None] * sign.astype(np.float16)).astype(np.float16)
    xf = x.astype(np.float32)
    ref64 = x.astype(np.float64) @ (w.astype(np.float64) + alpha[:, None].astype(np.float64) * sign).T
    y_once = (xf @ once.astype(np.float32).T).astype(np.float16)
    y_twice = (xf @ twice.astype(np.float32).T).astype(np.float16)
    return ref64, y_once, y_twice


def test_a_differently_rounded_correct_kernel_is_accepted(gemm):
    """Under the default fp16 tolerance (atol 1e-5) the two roundings disagree on thousands of
    outputs, and both have about as many outside it against float64 (outputs near 0, where the
    fp16 rounding of W dominates): accepted."""
    ref64, y_once, y_twice = gemm
    disagree = compare(y_twice, y_once, FP16)
    assert disagree.n_bad > 1000, "the fixture must disagree with the reference kernel"
    a = arbitrate("y", y_twice, y_once, ref64, FP16)
    assert a.ok, a.reason
    assert 0.5 < a.candidate.n_bad / a.reference.n_bad < 2.0
    assert a.candidate.norm_err <= 1.5 * a.reference.norm_err
    assert a.unit_roundoff == 2.0 ** -11


def test_bf16_rounded_output_is_rejected(gemm):
    ref64, y_once, _ = gemm
    y_bf16 = y_once.astype(ml_dtypes.bfloat16).astype(np.float16)
    a = arbitrate("y", y_bf16, y_once, ref64, FP16)
    assert not a.ok
    assert "outside the tolerance against float64" in a.reason


def test_bf16_rounding_within_the_elementwise_tolerance_is_caught_by_the_norm():
    """Values where bf16 rounding stays inside atol: only the normalized error tells it apart."""
    rng = np.random.default_rng(3)
    ref64 = rng.standard_normal(200_000) * 1e-3
    tol = FP16.model_copy(update={"atol": 1e-3, "max_norm_err": 1e-2})
    tri = ref64.astype(np.float16)
    cand = ref64.astype(ml_dtypes.bfloat16).astype(np.float16)
    a = arbitrate("y", cand, tri, ref64, tol)
    assert a.candidate.n_bad == 0 and not a.ok
    assert "normalized error" in a.reason
    assert a.candidate.norm_err > ARBITRATION_FACTOR * a.reference.norm_err + a.unit_roundoff


def test_skipped_work_is_rejected(gemm):
    """The last 1% of K dropped: a small error, and one the rule does not forgive."""
    ref64, y_once, _ = gemm
    rng = np.random.default_rng(1)
    lost = (rng.standard_normal(ref64.shape) * 0.3)
    a = arbitrate("y", (ref64 - lost).astype(np.float16), y_once, ref64, FP16)
    assert not a.ok


def test_a_more_accurate_candidate_than_an_inaccurate_reference_is_accepted():
    """The reference kernel accumulates in low precision (as Hopper's fp8 wgmma does) and has
    elements outside the tolerance against float64; a candidate with fewer is accepted."""
    rng = np.random.default_rng(5)
    ref64 = rng.standard_normal(100_000) * 10
    tri = (ref64 * (1 + rng.standard_normal(ref64.size) * 0.08)).astype(ml_dtypes.float8_e4m3fn)
    cand = ref64.astype(ml_dtypes.float8_e4m3fn)
    assert compare(tri, ref64, FP8).n_bad > 0
    a = arbitrate("y", cand, tri, ref64, FP8)
    assert a.ok, a.reason
    assert a.unit_roundoff == 2.0 ** -4


def test_more_than_twice_the_reference_kernels_bad_elements_is_rejected():
    rng = np.random.default_rng(9)
    ref64 = rng.standard_normal(10_000).astype(np.float32).astype(np.float64)
    tri = ref64.astype(np.float32)
    tri[:10] += 1.0                                    # 10 elements out of tolerance
    cand = tri.copy()
    cand[10:20] += 1.0                                 # 20 = 2 x 10: within the factor
    loose = FP32.model_copy(update={"max_norm_err": 1.0})
    a = arbitrate("y", cand, tri, ref64, loose)
    assert a.candidate.n_bad == 20 and a.ok, a.reason
    cand[20] += 1.0                                    # 21 > 2 x 10
    a = arbitrate("y", cand, tri, ref64, loose)
    assert not a.ok and "21 elements" in a.reason


def test_nan_counts_as_outside_the_tolerance():
    ref64 = np.linspace(-1, 1, 1000)
    tri = ref64.astype(np.float16)
    cand = tri.copy()
    cand[17] = np.nan
    a = arbitrate("y", cand, tri, ref64, FP16)
    assert not a.ok and a.candidate.n_nonfinite == 1


def test_nan_in_place_of_the_reference_kernels_bad_elements_is_rejected():
    """Red team (2026-12-02): where the reference kernel has elements outside the tolerance
    against float64 (conv2d.fp8: about 65k), a candidate must not write as many NaNs instead of
    computing them: NaN counts in ``n_bad`` but not in the normalized error."""
    rng = np.random.default_rng(11)
    ref64 = rng.standard_normal(50_000)
    tri = ref64.astype(np.float16)
    tri[:1000] = (ref64[:1000] * 1.02 + 0.1).astype(np.float16)
    m = compare(tri, ref64, FP16).n_bad
    cand = tri.copy()
    cand[1000:1000 + m // 2] = np.nan          # fewer bad elements than allowed, all NaN
    a = arbitrate("y", cand, tri, ref64, FP16)
    assert a.candidate.n_bad <= ARBITRATION_FACTOR * a.reference.n_bad
    assert not a.ok and "NaN/Inf values in the output" in a.reason


def test_integer_outputs_are_never_arbitrated():
    a = arbitrate("idx", np.arange(8, dtype=np.int32), np.arange(8, dtype=np.int32),
                  np.arange(8.0), FP32)
    assert not a.ok and "compared exactly" in a.reason


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape mismatch"):
        arbitrate("y", np.zeros(3, np.float16), np.zeros(4, np.float16), np.zeros(3), FP16)
