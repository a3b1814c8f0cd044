"""Reductions in the styles of public repositories: a split-K style atomic row sum into a
zero-filled output (``init: zeros``), and a cumulative sum (``tl.cumsum``) per row."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, KernelSpec, Param, SourceRef, Tolerance


@triton.jit
def atomic_row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row.to(tl.int64) * n_cols + offs, mask=offs < n_cols, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(x, axis=0))


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=m, other=0.0)
    tl.store(y_ptr + row * n_cols + offs, tl.cumsum(x, axis=0), mask=m)


def ref_sum(inputs, dims):
    """float64 row sums of x (B, N)."""
    return {"out_ptr": inputs["x_ptr"].sum(axis=1)}


def ref_cumsum(inputs, dims):
    """float64 cumulative sums along the rows of x (B, N)."""
    return {"y_ptr": np.cumsum(inputs["x_ptr"], axis=1)}


ATOMIC_SUM = KernelSpec(
    name="realk_atomic_sum",
    description="row sums accumulated with atomics into a zero-filled output",
    source=SourceRef(module=__name__, function="atomic_row_sum_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp32", shape=("B", "N"), role="in"),
        Param(name="out_ptr", kind="pointer", dtype="fp32", shape=("B",), role="out",
              init="zeros"),
        Param(name="n_cols", kind="scalar", dtype="i32", value="N"),
        Param(name="BLOCK", kind="constexpr"),
    ),
    sizes={"verify": {"B": 8, "N": 4096}, "bench": {"B": 64, "N": 65536}},
    grid=("B", "cdiv(N, BLOCK)"),
    autotune=AutotuneSpace(meta={"BLOCK": (1024,)}, num_warps=(4,), num_stages=(1,)),
    tolerances={"fp32": Tolerance(rtol=1e-5, atol=1e-3, max_norm_err=1e-5)},
    reference=f"{__name__}:ref_sum",
)

CUMSUM = KernelSpec(
    name="realk_cumsum",
    description="per-row inclusive scan with tl.cumsum",
    source=SourceRef(module=__name__, function="cumsum_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp32", shape=("B", "N"), role="in"),
        Param(name="y_ptr", kind="pointer", dtype="fp32", shape=("B", "N"), role="out"),
        Param(name="n_cols", kind="scalar", dtype="i32", value="N"),
        Param(name="BLOCK", kind="constexpr", value="next_power_of_2(N)"),
    ),
    sizes={"verify": {"B": 4, "N": 1000}, "bench": {"B": 4, "N": 1000}},
    grid=("B",),
    autotune=AutotuneSpace(meta={}, num_warps=(4,), num_stages=(1,)),
    tolerances={"fp32": Tolerance(rtol=1e-5, atol=1e-3, max_norm_err=1e-5)},
    reference=f"{__name__}:ref_cumsum",
)
