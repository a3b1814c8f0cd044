"""``rmsnorm``: y = x / sqrt(mean(x^2) + eps) * w over rows; fp16 in/out, fp32 math.

One program per row; the whole row (N = 4096, a typical hidden size) sits in registers.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, Distribution, KernelSpec, Param, SourceRef, Tolerance

EPS = 1e-6


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(axis=0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    base = row.to(tl.int64) * n_cols
    x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(ms + eps)
    tl.store(out_ptr + base + cols, (x * rstd * w).to(tl.float16), mask=mask)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: ``x / sqrt(mean(x^2, axis=1) + eps) * w``; x (M, N), w (N,)."""
    x = inputs["x_ptr"]
    rstd = 1.0 / np.sqrt((x * x).mean(axis=1, keepdims=True) + EPS)
    return {"out_ptr": x * rstd * inputs["w_ptr"][None, :]}


SPEC = KernelSpec(
    name="rmsnorm",
    description="RMSNorm with weight over rows, fp16 in/out, fp32 math",
    source=SourceRef(module=__name__, function="rmsnorm_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp16", shape=("M", "N"), role="in",
              distribution=Distribution(kind="normal", std=2.0)),
        Param(name="w_ptr", kind="pointer", dtype="fp16", shape=("N",), role="in",
              distribution=Distribution(kind="uniform", low=0.5, high=1.5)),
        Param(name="out_ptr", kind="pointer", dtype="fp16", shape=("M", "N"), role="out"),
        Param(name="n_rows", kind="scalar", dtype="i32", value="M"),
        Param(name="n_cols", kind="scalar", dtype="i32", value="N", divisibility=16),
        Param(name="eps", kind="scalar", dtype="fp32", value=EPS),
        Param(name="BLOCK_N", kind="constexpr", value="next_power_of_2(N)"),
    ),
    # N = 4000 (a multiple of 16, not of the 4096 block: tests the column mask); bench moves
    # 2 x 32768 x 4000 x 2 B = 524 MB per launch.
    sizes={"verify": {"M": 67, "N": 4000}, "bench": {"M": 32768, "N": 4000}},
    grid=("M",),
    autotune=AutotuneSpace(num_warps=(4, 8, 16), num_stages=(1,)),
    # outputs are x/rms*w with rms ~ 2: |y| ~ 0.5-1; fp16 rounding is 2^-11 relative
    tolerances={"fp16": Tolerance(rtol=2e-3, atol=1e-5, max_norm_err=1e-3)},
    flops="4 * M * N",
    bytes="4 * M * N + 2 * N",
    reference=f"{__name__}:reference",
)
