"""Spec fields for partly written and zero-initialised outputs, on a real GPU (``pytest -m gpu``).

A masked kernel writes only ``y[0:N)`` of a padded output; an accumulating kernel adds into a
zero-filled ``acc`` with atomics. Triton's own PTX must pass the harness for both (the sentinel
left in ``y[N:NPAD)`` is not compared; ``acc`` starts at zero); a candidate that skips the
accumulation must still fail. Skipped without a driver.
"""

from __future__ import annotations

import re

import pytest

from harness import GPUEvaluator, assemble, autotune, compile_space, device_arch, evaluate_candidate
from harness.candidate import Candidate
from kernels import load_spec

pytestmark = pytest.mark.gpu

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def partial_kernel(x_ptr, y_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(y_ptr + offs, x * 2.0, mask=m)
    tl.atomic_add(acc_ptr, tl.sum(x, axis=0))
'''

SPEC = '''
name: partial
source: {path: k.py, function: partial_kernel}
params:
  - {name: x_ptr, kind: pointer, dtype: fp32, shape: [N], role: in, distribution: {kind: arange}}
  - {name: y_ptr, kind: pointer, dtype: fp32, shape: [NPAD], role: out, written: [[0, N]]}
  - {name: acc_ptr, kind: pointer, dtype: fp32, shape: [1], role: out, init: zeros}
  - {name: n, kind: scalar, dtype: i32, value: N}
  - {name: BLOCK, kind: constexpr}
sizes:
  verify: {N: 1000, NPAD: 4096}
  bench: {N: 1000000, NPAD: 1048576}
grid: ["cdiv(N, BLOCK)"]
autotune: {meta: {BLOCK: [1024]}}
tolerances: {fp32: {rtol: 1.0e-4, atol: 1.0e-3, max_norm_err: 1.0e-4}}
bytes: "8 * N"
'''


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    d = tmp_path_factory.mktemp("partial")
    (d / "k.py").write_text(KERNEL)
    (d / "spec.yaml").write_text(SPEC)
    spec = load_spec(d / "spec.yaml")
    refs, bad = compile_space(spec, device_arch(), cache_dir=d / "cache")
    assert not bad
    return spec, autotune(spec, refs, GPUEvaluator()).artifacts


def _eval(spec, art, ptx):
    asm = assemble(ptx, art.arch)
    assert asm.ok, asm.summary(ptx)
    cand = Candidate(ptx=ptx, threads=art.abi.threads, meta=art.config.meta,
                     dynamic_smem=art.abi.dynamic_smem)
    return evaluate_candidate(spec, art, cand, asm.cubin, GPUEvaluator(hang_timeout_s=3.0),
                              time_it=False)


def test_triton_ptx_passes_with_partial_and_zero_init_outputs(baseline):
    spec, art = baseline
    res = _eval(spec, art, art.ptx)
    assert res.status == "ok" and res.candidate.status == "ok", res.candidate.message


def test_skipping_the_accumulation_still_fails(baseline):
    spec, art = baseline
    ptx = re.sub(r"^\s*(@%p\d+\s+)?(atom|red)\.global[^\n]*\n", "", art.ptx, flags=re.M)
    assert ptx != art.ptx
    res = _eval(spec, art, ptx)
    assert res.candidate.status == "incorrect" and "acc_ptr" in res.candidate.message
