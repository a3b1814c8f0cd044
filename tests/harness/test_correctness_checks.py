"""compare(): tolerances, NaN handling, normalized error; inputs; timing statistics; roofline."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import kernels
from harness import compare, make_inputs, reference_outputs
from harness.inputs import cached_inputs
from harness.timing import roofline_fraction, stats
from kernels import Tolerance

TOL = Tolerance(rtol=1e-3, atol=1e-6, max_norm_err=1e-3)


def test_identical_passes():
    a = np.linspace(-1, 1, 1000, dtype=np.float32)
    r = compare(a, a, TOL)
    assert r.ok and r.norm_err == 0 and r.n_bad == 0


def test_nan_in_output_fails_and_nan_in_reference_is_no_wildcard():
    a = np.ones(10, np.float32)
    b = a.copy()
    b[3] = np.nan
    assert not compare(b, a, TOL).ok and compare(b, a, TOL).n_nonfinite == 1
    r = compare(a, b, TOL)
    assert not r.ok and "reference has 1 NaN/Inf" in r.reason
    r2 = compare(b, b, TOL)  # NaN == NaN bitwise: still a failure
    assert not r2.ok


def test_elementwise_and_normalized_bounds():
    ref = np.full(1000, 2.0)
    out = ref.copy()
    out[10] += 0.01  # elementwise: 0.01 > 1e-6 + 1e-3 * 2
    r = compare(out, ref, TOL)
    assert not r.ok and r.n_bad == 1 and r.first_bad == 10
    assert r.first_bad_values == (2.01, 2.0)
    small = ref * (1 + 5e-4)  # within rtol everywhere, normalized error 5e-4 < 1e-3
    assert compare(small, ref, TOL).ok
    loose = Tolerance(rtol=1.0, atol=1.0, max_norm_err=1e-4)
    r = compare(small, ref, loose)
    assert not r.ok and "normalized error" in r.reason


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape mismatch"):
        compare(np.zeros(3), np.zeros(4), TOL)


def test_trivial_outputs_fail_against_suite_references():
    """An all-zeros output, a copy of an input and the mean all fail the suite tolerances."""
    for name in kernels.names():
        spec = kernels.get(name)
        ins = make_inputs(spec, "verify", 0)
        ref = reference_outputs(spec, "verify", ins)
        for p in spec.outputs():
            tol = spec.tolerance(p.dtype)
            r = ref[p.name]
            assert compare(r.astype(np.dtype(kernels.dtype(p.dtype).np)), r, tol).ok, name
            assert not compare(np.zeros_like(r), r, tol).ok, name
            assert not compare(np.full_like(r, r.mean()), r, tol).ok, name
            other = reference_outputs(spec, "verify", make_inputs(spec, "verify", 1))[p.name]
            assert not compare(other, r, tol).ok, name


@settings(max_examples=100, deadline=None)
@given(arrays(np.float32, st.integers(1, 50),
              elements=st.floats(-1e6, 1e6, allow_nan=False, width=32)))
def test_compare_is_reflexive_on_finite_data(a):
    assert compare(a, a, TOL).ok


def test_inputs_are_fresh_per_seed_and_reproducible(tmp_path):
    spec = kernels.get("softmax")
    a0, a0b, a1 = (make_inputs(spec, "verify", s)["in_ptr"] for s in (0, 0, 1))
    assert a0.dtype == np.float16 and a0.shape == (67, 4000)
    assert np.array_equal(a0, a0b) and not np.array_equal(a0, a1)
    assert 1.5 < float(a0.astype(np.float64).std()) < 2.5  # normal(0, 2)
    c = cached_inputs(spec, "verify", 5, tmp_path)["in_ptr"]
    d = cached_inputs(spec, "verify", 5, tmp_path)["in_ptr"]
    assert isinstance(d, np.memmap) and d.dtype == np.float16
    assert np.array_equal(c, d) and np.array_equal(c, make_inputs(spec, "verify", 5)["in_ptr"])


def test_stats_and_roofline():
    s = stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median_ms == 3.0 and s.q1_ms == 2.0 and s.q3_ms == 4.0 and s.iqr_ms == 2.0
    with pytest.raises(ValueError):
        stats([])
    # 1 GB at 1000 GB/s takes 1 ms: measured 2 ms is half the roofline
    frac, bound = roofline_fraction(2.0, 0.0, 1e9, 1000.0, None)
    assert bound == "memory" and frac == pytest.approx(0.5)
    frac, bound = roofline_fraction(2.0, 1e12, 1e6, 1000.0, 1000.0)  # 1 TFLOP at 1 PFLOP/s
    assert bound == "compute" and frac == pytest.approx(0.5)
