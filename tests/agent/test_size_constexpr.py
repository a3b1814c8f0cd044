"""A spec whose constexpr reads a problem dim (a *size constexpr*: ``N_COLS: tl.constexpr`` with
``value: N``) may take different values at ``verify`` and ``bench`` (issue 23): each size is its
own Triton compile, the emulator checks Triton's kernel as its verify variant, PTX written for
the bench values is checked at the bench size, and the GPU worker checks cubins at bench."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kernels

from agent.loop import _emulate
from harness.evaluate import GPUEvaluator
from harness.reference import compile_reference
from kernels import load_spec

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def rowsum_kernel(x_ptr, y_ptr, N_COLS: tl.constexpr):
    """y[row] = sum of row ``row`` of x (rows of N_COLS elements, a compile-time length)."""
    row = tl.program_id(0)
    offs = tl.arange(0, N_COLS)
    x = tl.load(x_ptr + row * N_COLS + offs)
    tl.store(y_ptr + row, tl.sum(x, axis=0))


def ref(inputs, dims):
    return {"y_ptr": inputs["x_ptr"].sum(axis=1)}
'''

SPEC = '''
name: rowsum
source: {path: k.py, function: rowsum_kernel}
params:
  - {name: x_ptr, kind: pointer, dtype: fp32, shape: [M, N], role: in}
  - {name: y_ptr, kind: pointer, dtype: fp32, shape: [M], role: out}
  - {name: N_COLS, kind: constexpr, value: N}
sizes: {verify: {M: 4, N: 64}, bench: {M: 64, N: 1024}}
grid: [M]
autotune: {num_warps: [4]}
reference: k.py::ref
'''


def _spec(tmp_path: Path, verify_n: int = 64):
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "s.yaml").write_text(SPEC.replace("N: 64", f"N: {verify_n}"))
    return load_spec(tmp_path / "s.yaml")


def test_size_constexpr_is_accepted_and_hashed(tmp_path):
    spec = _spec(tmp_path)
    cfg = spec.configs()[0]
    assert spec.size_constexprs() == ["N_COLS"]
    assert spec.constexprs(cfg, "verify") == {"N_COLS": 64}
    assert spec.constexprs(cfg, "bench") == {"N_COLS": 1024}
    assert spec.compile_size("verify") == "verify"
    (tmp_path / "o").mkdir()
    other = _spec(tmp_path / "o", 128)
    assert other.identity() != spec.identity()  # the verify value is part of the identity


def test_each_size_compiles_its_own_variant_and_emulation_uses_it(tmp_path):
    spec = _spec(tmp_path)
    cfg = spec.configs()[0]
    bench = compile_reference(spec, "sm_90a", cfg, cache_dir=tmp_path / "c")
    verify = compile_reference(spec, "sm_90a", cfg, cache_dir=tmp_path / "c", size="verify")
    assert (bench.size, verify.size) == ("bench", "verify") and bench.ptx != verify.ptx
    again = compile_reference(spec, "sm_90a", cfg, cache_dir=tmp_path / "c", size="verify")
    assert again.cache_hit and again.ptx == verify.ptx  # its own cache entry
    # the bench PTX (64 rows of 1024) run at the verify size (4 rows of 64) reads past x:
    # Triton's own kernel is emulated as its verify variant instead
    own = _emulate(spec, "sm_90a", bench, bench.ptx, {"threads": bench.abi.threads},
                   cache_dir=tmp_path / "c")
    assert own.ok and own.size == "verify" and own.dims == {"M": 4, "N": 64}, own.message
    # other PTX is written against the bench values: checked at the bench size, saying why
    cand = bench.ptx + "\n// a candidate\n"
    res = _emulate(spec, "sm_90a", bench, cand, {"threads": bench.abi.threads},
                   cache_dir=tmp_path / "c")
    assert res.ok and res.size == "bench" and res.dims == {"M": 64, "N": 1024}, res.message
    assert "size constexpr(s) N_COLS" in res.message


def test_gpu_worker_checks_a_size_constexpr_spec_at_bench(tmp_path):
    spec = _spec(tmp_path)
    ev = GPUEvaluator(persistent=False)
    assert ev.request(spec, "evaluate", []).check_size == "bench"
    assert ev.request(kernels.get("vector_add"), "evaluate", []).check_size == "verify"


@pytest.mark.slow
def test_ailower_lower_emulates_at_verify_with_the_verify_value(tmp_path):
    spec = _spec(tmp_path)
    assert spec.size_constexprs() == ["N_COLS"]
    out = tmp_path / "out"
    env_dir = tmp_path / "data"
    r = subprocess.run([sys.executable, "-m", "ailower", "lower", str(tmp_path / "s.yaml"),
                        "--arch", "sm_90a", "--no-gpu", "--provider", "triton", "--iterations",
                        "1", "--out", str(out)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "AILOWER_DATA_DIR": str(env_dir)},
                       cwd=Path(__file__).parents[2])
    assert r.returncode == 0, r.stdout + r.stderr
    it = next(json.loads(ln) for ln in (out / "transcript.jsonl").read_text().splitlines()
              if json.loads(ln).get("event") == "iteration")
    emu = it["emulation"]
    assert emu["status"] == "ok" and emu["size"] == "verify", emu
    assert emu["dims"] == {"M": 4, "N": 64}
