"""The ``fast`` kernel family (issue 18): registry, specs, float64 references and the CLI listing.
Compiling and verifying them is tests/verifier/test_verifier_fast.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kernels import registry
from kernels.fast import dot_scaled
from kernels.spec import SpecError

FAST = registry.names("fast")


def test_fast_family_is_listed_apart_from_the_suite():
    assert len(FAST) >= 8 and all(n.startswith("fast.") for n in FAST)
    assert not set(FAST) & set(registry.names())
    assert registry.names("all") == registry.names() + FAST
    with pytest.raises(SpecError, match="no kernel family 'fastest'"):
        registry.names("fastest")


@pytest.mark.parametrize("name", FAST)
def test_fast_spec_matches_its_kernel_and_has_a_reference(name):
    spec = registry.get(name)
    assert spec.name == name
    spec.check_function(spec.source.load())
    cfg = spec.configs()[0]
    sig = spec.signature(cfg, "verify")
    for p in spec.params:
        if p.kind == "tensordesc":
            assert sig[p.name].startswith(f"tensordesc<{p.dtype}[")
    rng = np.random.default_rng(1)
    ins = {p.name: p.distribution.sample(rng, spec.shape(p, "verify"), np.float64)
           for p in spec.tensors() if p.role == "in"}
    ref = spec.load_reference()(ins, spec.dims("verify"))
    for p in spec.outputs():
        assert ref[p.name].shape == spec.shape(p, "verify")
        assert np.isfinite(ref[p.name]).all()


def test_tensordesc_signature_needs_a_config():
    spec = registry.get("fast.gemm_ws")
    with pytest.raises(SpecError, match="tensordesc signature needs the block values"):
        spec.signature()
    assert spec.signature(spec.configs()[0])["a_desc"] == "tensordesc<fp16[128, 64]>"


def test_mx_reference_decodes_scales_and_fp4_codes():
    # E8M0 127 is 2^0: with unit scales mxfp8 is a plain matmul; 128 doubles one operand
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 64)), rng.standard_normal((3, 64))
    ones_a, ones_b = np.full((4, 2), 127.0), np.full((3, 2), 127.0)
    dims = {"M": 4, "N": 3, "K": 64}
    got = dot_scaled.reference({"a_desc": a, "b_desc": b, "a_scale": ones_a,
                                "b_scale": ones_b}, dims)["c_desc"]
    np.testing.assert_allclose(got, a @ b.T, rtol=1e-12)
    twice = ones_a.copy()
    twice[:, 1] = 128.0
    got2 = dot_scaled.reference({"a_desc": a, "b_desc": b, "a_scale": twice,
                                 "b_scale": ones_b}, dims)["c_desc"]
    np.testing.assert_allclose(got2, (a * np.repeat([[1.0, 2.0]], 32, axis=1)) @ b.T, rtol=1e-12)
    # fp4: byte 0x2F = low nibble 0xF (-6.0) first, then high nibble 0x2 (1.0)
    codes = np.full((1, 32), 0x2F, dtype=np.float64)
    vals = dot_scaled._unpack_e2m1(codes)
    assert vals.shape == (1, 64) and vals[0, 0] == -6.0 and vals[0, 1] == 1.0


def test_cli_lists_the_fast_family(tmp_path: Path):
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": root}
    r = subprocess.run([sys.executable, "-m", "ailower", "kernels", "--family", "fast", "--json"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    import json
    assert [k["name"] for k in json.loads(r.stdout)] == FAST
    bad = subprocess.run([sys.executable, "-m", "ailower", "kernels", "--family", "nope"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and "no kernel family 'nope'" in bad.stderr
