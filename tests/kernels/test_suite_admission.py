"""Admission of every suite task: trivial answers must fail, the rounded float64 truth must pass.

With the float64 reference on seed 0 as ground truth and each output's spec tolerance:
an all-zeros output, an output equal to an input (same shape and an input exists), a constant
equal to the reference's mean, and the reference of a different seed must all FAIL
``harness.compare``; the float64 reference rounded to the output dtype must PASS.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernels
from harness import compare, make_inputs, reference_outputs
from kernels.registry import COMMON, PAPERS, base_name

NAMES = kernels.names()


def test_registry_has_the_22_kernels_of_the_study():
    bases = {base_name(n) for n in NAMES}
    assert len(COMMON) == 12 and len(PAPERS) == 10
    assert set(COMMON) | set(PAPERS) <= bases
    for n in NAMES:
        assert kernels.get(n).name == n
    for fam in ("gemm", "conv2d", "gemm_silu"):
        assert {f"{fam}.fp16", f"{fam}.fp8"} <= set(NAMES)
        assert kernels.get(f"{fam}.fp8").params[0].dtype == "fp8e4nv"
    for fam in ("sigmoid", "relu", "silu", "swiglu"):
        assert {f"{fam}.fp16", f"{fam}.fp32"} <= set(NAMES)
    assert {"flash_attention.causal", "flash_attention.noncausal"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_spec_round_trips_and_is_size_independent(name):
    spec = kernels.get(name)
    again = kernels.KernelSpec.model_validate_json(spec.model_dump_json())
    assert again == spec and again.identity() == spec.identity()
    assert spec.load_reference() is not None
    for cfg in spec.configs():
        assert spec.constexprs(cfg, "verify") == spec.constexprs(cfg, "bench")
    # the bench size fills an H200: >= 4 x its 60 MB L2 in bytes, or >= ~1 ms of tensor-core work
    assert spec.byte_count("bench") >= 240e6 or spec.flop_count("bench") >= 250e9, name


@pytest.mark.parametrize("name", NAMES)
def test_trivial_outputs_fail_and_rounded_truth_passes(name):
    spec = kernels.get(name)
    ins = make_inputs(spec, "verify", 0)
    ref = reference_outputs(spec, "verify", ins)
    other = reference_outputs(spec, "verify", make_inputs(spec, "verify", 1))
    for p in spec.outputs():
        tol = spec.tolerance(p.dtype)
        r = ref[p.name]
        assert np.isfinite(r).all(), f"{name}.{p.name}: non-finite reference"
        rounded = r.astype(kernels.dtype(p.dtype).np)
        res = compare(rounded, r, tol)
        assert res.ok, f"{name}.{p.name}: rounded float64 reference fails: {res.reason}"
        assert not compare(np.zeros_like(r), r, tol).ok, f"{name}.{p.name}: zeros pass"
        assert not compare(np.full_like(r, r.mean()), r, tol).ok, f"{name}.{p.name}: mean passes"
        assert not compare(other[p.name], r, tol).ok, f"{name}.{p.name}: other seed passes"
        for q in spec.tensors():
            if q.name in ins and ins[q.name].shape == r.shape:
                same = compare(ins[q.name].astype(np.float64), r, tol)
                assert not same.ok, f"{name}.{p.name}: a copy of input {q.name} passes"
        # no near-zero task: most of the output sits clearly above the absolute tolerance
        assert np.mean(np.abs(r) > 10 * tol.atol) > 0.4, f"{name}.{p.name}: near-zero outputs"
