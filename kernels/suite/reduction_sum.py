"""``reduction_sum``: the full sum of each of B long fp32 vectors, out[b] = sum_i x[b, i].

Each row is one large vector reduced to a scalar (no atomics: deterministic, and the output needs
no zero-initialisation). With B = 1024 rows of 131072 the launch streams 537 MB.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, Distribution, KernelSpec, Param, SourceRef, Tolerance


@triton.jit
def reduction_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(axis=0)
    base = x_ptr + row.to(tl.int64) * n_cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        acc += tl.load(base + c0 + offs, mask=offs < n_cols - c0, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: ``x.sum(axis=1)`` with x (B, N)."""
    return {"out_ptr": inputs["x_ptr"].sum(axis=1)}


SPEC = KernelSpec(
    name="reduction_sum",
    description="full sum of each long fp32 vector (B vectors of N), fp32 accumulation",
    source=SourceRef(module=__name__, function="reduction_sum_kernel"),
    params=(
        # mean 1: each sum is N +- sqrt(N), far from 0, and sums of different rows or seeds
        # differ by ~1/sqrt(N) relative (>> the fp32 tolerance)
        Param(name="x_ptr", kind="pointer", dtype="fp32", shape=("B", "N"), role="in",
              distribution=Distribution(kind="normal", mean=1.0, std=1.0)),
        Param(name="out_ptr", kind="pointer", dtype="fp32", shape=("B",), role="out"),
        Param(name="n_rows", kind="scalar", dtype="i32", value="B"),
        Param(name="n_cols", kind="scalar", dtype="i32", value="N", divisibility=16),
        Param(name="BLOCK", kind="constexpr"),
    ),
    sizes={"verify": {"B": 9, "N": 65_552}, "bench": {"B": 1024, "N": 131_072}},
    grid=("B",),
    autotune=AutotuneSpace(meta={"BLOCK": (1024, 2048, 4096)}, num_warps=(4, 8, 16),
                           num_stages=(1,)),
    # fp32 sums of 1e5 terms: each lane adds N/BLOCK terms, then a tree; error ~1e-6 relative
    tolerances={"fp32": Tolerance(rtol=1e-5, atol=1e-3, max_norm_err=1e-5)},
    flops="B * N",
    bytes="4 * B * N + 4 * B",
    reference=f"{__name__}:reference",
)
