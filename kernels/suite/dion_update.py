"""``dion_update``: Dion's fused post-orthogonalization weight update over a batch of matrices
(Ahn et al., "Dion: Distributed Orthonormalized Updates", 2025, Algorithm 1's final step).

For each matrix b: X_b (M, N) fp32 in place, U_b (M, R) fp32 and a column map (N,) int32:
  x[:, n] <- a * x[:, n] - b * u[:, map(n)]  where map(n) >= 0 (the selected columns),
  x[:, n] <- a * x[:, n]                     elsewhere (map(n) < 0),
with a = 1 - lr * weight_decay and b = lr * scale (scalars).
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, Distribution, KernelSpec, Param, SourceRef, Tolerance
from kernels.suite._common import cfg

A = 0.99
B = 0.02
RANK = 64


@triton.jit
def dion_update_kernel(x_ptr, u_ptr, map_ptr, M, N, R, a, b,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    mat = tl.program_id(axis=2).to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = rm < M
    nmask = rn < N
    col = tl.load(map_ptr + mat * N + rn, mask=nmask, other=-1)
    sel = col >= 0
    x_ptrs = x_ptr + mat * M * N + rm.to(tl.int64)[:, None] * N + rn[None, :]
    mask = mmask[:, None] & nmask[None, :]
    x = tl.load(x_ptrs, mask=mask)
    u = tl.load(u_ptr + mat * M * R + rm.to(tl.int64)[:, None] * R + col[None, :],
                mask=mask & sel[None, :], other=0.0)
    tl.store(x_ptrs, a * x - b * u, mask=mask)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference; x (NB, M, N), u (NB, M, R), map (NB, N) (negative: not selected)."""
    x, u = inputs["x_ptr"], inputs["u_ptr"]
    cmap = inputs["map_ptr"].astype(np.int64)
    sel = cmap >= 0
    gathered = np.take_along_axis(u, np.where(sel, cmap, 0)[:, None, :], axis=2)
    return {"x_ptr": A * x - B * np.where(sel[:, None, :], gathered, 0.0)}


SPEC = KernelSpec(
    name="dion_update",
    description="Dion's fused update x <- a x - b u[:, map(n)] on selected columns, batched, fp32",
    source=SourceRef(module=__name__, function="dion_update_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp32", shape=("NB", "M", "N"), role="inout"),
        Param(name="u_ptr", kind="pointer", dtype="fp32", shape=("NB", "M", "R"), role="in"),
        # half the columns selected (map in [0, R)), half not (map in [-R, 0))
        Param(name="map_ptr", kind="pointer", dtype="i32", shape=("NB", "N"), role="in",
              distribution=Distribution(kind="randint", low=-RANK, high=RANK)),
        Param(name="M", kind="scalar", dtype="i32", value="M"),
        Param(name="N", kind="scalar", dtype="i32", value="N", divisibility=16),
        Param(name="R", kind="scalar", dtype="i32", value="R", divisibility=16),
        Param(name="a", kind="scalar", dtype="fp32", value=A),
        Param(name="b", kind="scalar", dtype="fp32", value=B),
        Param(name="BLOCK_M", kind="constexpr"),
        Param(name="BLOCK_N", kind="constexpr"),
    ),
    # bench: 16 matrices of 2048 x 2048 fp32, 268 MB read and written, rank 64
    sizes={"verify": {"NB": 3, "M": 67, "N": 144, "R": RANK},
           "bench": {"NB": 16, "M": 2048, "N": 2048, "R": RANK}},
    grid=("cdiv(M, BLOCK_M)", "cdiv(N, BLOCK_N)", "NB"),
    autotune=AutotuneSpace(configs=(
        cfg({"BLOCK_M": 32, "BLOCK_N": 128}, 4, 1),
        cfg({"BLOCK_M": 64, "BLOCK_N": 128}, 8, 1),
        cfg({"BLOCK_M": 16, "BLOCK_N": 256}, 4, 1),
        cfg({"BLOCK_M": 64, "BLOCK_N": 64}, 4, 1),
        cfg({"BLOCK_M": 32, "BLOCK_N": 256}, 8, 1),
    )),
    tolerances={"fp32": Tolerance(rtol=1e-5, atol=1e-6, max_norm_err=1e-5)},
    flops="3 * NB * M * N",
    bytes="8 * NB * M * N + 4 * NB * M * R + 4 * NB * N",
    reference=f"{__name__}:reference",
)
