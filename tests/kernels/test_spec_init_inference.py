"""``ailower spec init`` infers pointers, roles, dtypes and scalar kinds from the kernel's body,
imports ``@triton.autotune`` / ``@triton.heuristics``, and always writes valid YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernels import Config, KernelSpec, load_spec
from kernels.starter import starter_spec

TUTORIAL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


@triton.jit
def _layer_norm_fwd_fused(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    var = tl.sum(_mean * _mean, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        tl.store(Y + cols, (x - mean) * rstd * w + b, mask=mask)


CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in [256, 512] for w in (4, 8)
           if b * w <= 2048]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def scale_inplace(x_ptr, n, alpha, start, BLOCK: tl.constexpr, EVEN: tl.constexpr,
                  HAS_CLAMP: tl.constexpr, HEAD_DIM: tl.constexpr, MODE: tl.constexpr = "fast"):
    """A "quoted" docstring: with # and ] and : inside."""
    offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, (x * alpha).to(tl.float16), mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK_M": 64}, num_warps=4, num_stages=2, maxnreg=256),
                          triton.Config({"BLOCK_M": 128}, num_warps=8, num_stages=3)],
                 key=["n"])
@triton.jit
def sum_atomic(x_ptr, total_ptr, n, BLOCK_M: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.atomic_add(total_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))


@triton.jit
def no_block(inp, out, n):
    i = tl.program_id(0)
    tl.store(out + i, tl.load(inp + i) * 2)
'''


def _starter(tmp_path: Path, fn: str) -> tuple[str, dict]:
    (tmp_path / "k.py").write_text(TUTORIAL)
    text = starter_spec(tmp_path / "k.py", fn, tmp_path)
    return text, yaml.safe_load(text)


def _params(data: dict) -> dict[str, dict]:
    return {p["name"]: p for p in data["params"]}


def test_canonical_add_kernel_roles_from_loads_and_stores(tmp_path):
    text, data = _starter(tmp_path, "add_kernel")
    p = _params(data)
    assert (p["x_ptr"]["role"], p["y_ptr"]["role"], p["output_ptr"]["role"]) == ("in", "in", "out")
    assert p["n_elements"] == {"name": "n_elements", "kind": "scalar", "dtype": "i32", "value": "N"}
    assert data["autotune"]["meta"] == {"BLOCK_SIZE": [64, 128, 256]}
    spec = load_spec(_write(tmp_path, text))
    assert len(spec.configs()) == 12


def test_tutorial_layernorm_pointers_and_float_eps(tmp_path):
    _, data = _starter(tmp_path, "_layer_norm_fwd_fused")
    p = _params(data)
    assert [n for n, q in p.items() if q["kind"] == "pointer"] == ["X", "Y", "W", "B", "Mean",
                                                                     "Rstd"]
    assert {n: p[n]["role"] for n in ("X", "Y", "W", "B", "Mean", "Rstd")} == {
        "X": "in", "Y": "out", "W": "in", "B": "in", "Mean": "out", "Rstd": "out"}
    assert p["eps"]["dtype"] == "fp32" and p["eps"]["value"] == pytest.approx(1e-5)
    assert p["N"]["dtype"] == "i32" and p["stride"]["dtype"] == "i32"  # N / compare: an int


def test_autotune_heuristics_inout_and_non_block_constexprs(tmp_path):
    text, data = _starter(tmp_path, "scale_inplace")
    p = _params(data)
    assert p["x_ptr"]["role"] == "inout" and p["x_ptr"]["dtype"] == "fp16"  # stored .to(fp16)
    assert p["alpha"]["dtype"] == "fp32" and p["start"]["dtype"] == "i32"
    assert p["EVEN"]["value"] == "(N) % BLOCK == 0"  # from @triton.heuristics
    assert p["HAS_CLAMP"]["value"] is False and p["HEAD_DIM"]["value"] == "HEAD_DIM"
    assert p["MODE"]["value"] == "'fast'"  # a string constexpr default
    assert data["autotune"]["configs"] == [  # the module-level comprehension, filtered
        {"meta": {"BLOCK": 256}, "num_warps": 4}, {"meta": {"BLOCK": 256}, "num_warps": 8},
        {"meta": {"BLOCK": 512}, "num_warps": 4}]
    assert "meta" not in data["autotune"]  # only block-like constexprs, and BLOCK is tuned
    assert data["description"].startswith('A "quoted" docstring: with # and ] and :')
    assert data["sizes"]["verify"]["N"] % 512 == 0  # the heuristic holds alike at both sizes
    spec = KernelSpec.model_validate({**data, "source": {"path": str(tmp_path / "k.py"),
                                                         "function": "scale_inplace"}})
    cfg = spec.configs()[0]
    assert spec.constexprs(cfg)["MODE"] == "fast" and spec.constexprs(cfg)["EVEN"] == 1


def test_atomics_maxnreg_256_and_a_kernel_without_a_block(tmp_path):
    text, data = _starter(tmp_path, "sum_atomic")
    p = _params(data)
    assert p["total_ptr"]["role"] == "out" and p["total_ptr"]["init"] == "zeros"
    assert data["autotune"]["configs"][0] == {"meta": {"BLOCK_M": 64}, "num_warps": 4,
                                              "num_stages": 2, "maxnreg": 256}
    assert load_spec(_write(tmp_path, text)).configs()[0].maxnreg == 256
    text, data = _starter(tmp_path, "no_block")
    assert data["grid"] == [1]  # the TODO comment no longer swallows the ']'
    assert _params(data)["inp"]["role"] == "in" and _params(data)["out"]["role"] == "out"
    load_spec(_write(tmp_path, text))
    with pytest.raises(ValueError, match="less than or equal to 256"):
        Config(maxnreg=257)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path
