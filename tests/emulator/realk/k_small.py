"""Kernels whose tiles are smaller than the CTA, so Triton's layouts replicate elements over
lanes and warps (several lanes hold and store the same value): a small-tile GEMM with a
transposed operand in the style of linear-attention backward passes, and a row-wise softmax of
short rows."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, KernelSpec, Param, SourceRef, Tolerance


@triton.jit
def small_dot_bwd_kernel(q_ptr, do_ptr, dk_ptr, T, BT: tl.constexpr, BD: tl.constexpr):
    i = tl.program_id(0)
    rt = tl.arange(0, BT)
    rd = tl.arange(0, BD)
    base = i * T * BD
    q = tl.load(q_ptr + base + rt[:, None] * BD + rd[None, :], mask=rt[:, None] < T, other=0.0)
    do = tl.load(do_ptr + base + rt[:, None] * BD + rd[None, :], mask=rt[:, None] < T, other=0.0)
    # dk = (q^T do)^T per block: small dots through shared memory with duplicated layouts
    a = tl.dot(tl.trans(q), do)
    dk = tl.dot(q, a.to(tl.float16))
    tl.store(dk_ptr + base + rt[:, None] * BD + rd[None, :], dk.to(tl.float16),
             mask=rt[:, None] < T)


@triton.jit
def short_softmax_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * N + offs, e / tl.sum(e, axis=0), mask=offs < N)


def ref_small_dot(inputs, dims):
    """float64 dk = q (q^T do) per block of T rows; q, do (NB, T, D)."""
    q, do = inputs["q_ptr"], inputs["do_ptr"]
    a = q.transpose(0, 2, 1) @ do
    a = a.astype(np.float16).astype(np.float64)
    return {"dk_ptr": q @ a}


def ref_softmax(inputs, dims):
    """float64 softmax over the rows of x (M, N)."""
    x = inputs["x_ptr"]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y_ptr": e / e.sum(axis=1, keepdims=True)}


SMALL_DOT = KernelSpec(
    name="realk_small_dot_bwd",
    description="16x16 tile dots with a transposed operand, 4 warps (replicated layouts)",
    source=SourceRef(module=__name__, function="small_dot_bwd_kernel"),
    params=(
        Param(name="q_ptr", kind="pointer", dtype="fp16", shape=("NB", "T", "D"), role="in"),
        Param(name="do_ptr", kind="pointer", dtype="fp16", shape=("NB", "T", "D"), role="in"),
        Param(name="dk_ptr", kind="pointer", dtype="fp16", shape=("NB", "T", "D"), role="out"),
        Param(name="T", kind="scalar", dtype="i32", value="T"),
        Param(name="BT", kind="constexpr", value="T"),
        Param(name="BD", kind="constexpr", value="D"),
    ),
    sizes={"verify": {"NB": 8, "T": 16, "D": 16}, "bench": {"NB": 8, "T": 16, "D": 16}},
    grid=("NB",),
    autotune=AutotuneSpace(meta={}, num_warps=(4,), num_stages=(1,)),
    tolerances={"fp16": Tolerance(rtol=2e-2, atol=5e-2, max_norm_err=2e-2)},
    reference=f"{__name__}:ref_small_dot",
)

SHORT_SOFTMAX = KernelSpec(
    name="realk_short_softmax",
    description="softmax of 24-element rows with 4 warps (replicated layouts)",
    source=SourceRef(module=__name__, function="short_softmax_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp32", shape=("M", "N"), role="in"),
        Param(name="y_ptr", kind="pointer", dtype="fp32", shape=("M", "N"), role="out"),
        Param(name="N", kind="scalar", dtype="i32", value="N"),
        Param(name="BLOCK", kind="constexpr", value="next_power_of_2(N)"),
    ),
    sizes={"verify": {"M": 16, "N": 24}, "bench": {"M": 16, "N": 24}},
    grid=("M",),
    autotune=AutotuneSpace(meta={}, num_warps=(4,), num_stages=(1,)),
    tolerances={"fp32": Tolerance(rtol=1e-5, atol=1e-6, max_norm_err=1e-5)},
    reference=f"{__name__}:ref_softmax",
)
