"""``bitdelta_batched``: BitDelta for multi-tenant serving (Liu et al., NeurIPS 2024, §4).

One shared base weight W_base (N, K) fp16 and, per request b, its own packed 1-bit delta
(N, K/32) int32 and scale alpha_b (N,) fp32: y_b = x_b @ W_base^T + alpha_b * (x_b @ sign(Delta_b)^T)
for x (B, MB, K) fp16, y (B, MB, N) fp16. Grid axis 1 is the request; per tile the decoded signs
are folded into the base tile (see ``bitdelta``).
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import KernelSpec, Param, SourceRef
from kernels.suite.bitdelta import ALPHA, BITS, SPACE, TOLERANCE, unpack_signs


@triton.jit
def bitdelta_batched_kernel(x_ptr, w_ptr, packed_ptr, alpha_ptr, y_ptr, MB, N, K,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    req = tl.program_id(axis=1).to(tl.int64)
    n_m = tl.cdiv(MB, BLOCK_M)
    n_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * n_n
    group = pid // per_group
    m0 = group * GROUP_M
    rows_in_group = min(n_m - m0, GROUP_M)
    pid_m = m0 + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    rn_c = (rn % N).to(tl.int64)
    x_ptrs = x_ptr + req * MB * K + (rm % MB).to(tl.int64)[:, None] * K + rk[None, :]
    w_ptrs = w_ptr + rn_c[None, :] * K + rk[:, None]
    p_ptrs = packed_ptr + req * N * (K // 32) + rn_c[None, :] * (K // 32) + (rk // 32)[:, None]
    shift = (rk % 32)[:, None]
    alpha = tl.load(alpha_ptr + req * N + rn_c)[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kmask = rk < K - k0
        x = tl.load(x_ptrs, mask=kmask[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=kmask[:, None], other=0.0)
        bits = tl.load(p_ptrs, mask=kmask[:, None], other=0)
        sign = ((bits >> shift) & 1).to(tl.float32) * 2.0 - 1.0
        w_eff = (w.to(tl.float32) + alpha * sign).to(tl.float16)
        acc = tl.dot(x, w_eff, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
        p_ptrs += BLOCK_K // 32
    y_ptrs = y_ptr + req * MB * N + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(y_ptrs, acc.to(tl.float16), mask=(rm[:, None] < MB) & (rn[None, :] < N))


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: per request b, ``x_b @ W^T + alpha_b * (x_b @ sign_b^T)``;
    x (B, MB, K), W (N, K), packed (B, N, K/32), alpha (B, N)."""
    x, w = inputs["x_ptr"], inputs["w_ptr"]
    s = unpack_signs(inputs["packed_ptr"], dims["K"])  # (B, N, K)
    delta = np.einsum("bmk,bnk->bmn", x, s, optimize=True)
    return {"y_ptr": x @ w.T + inputs["alpha_ptr"][:, None, :] * delta}


SPEC = KernelSpec(
    name="bitdelta_batched",
    description="per-request 1-bit deltas over one shared fp16 base weight (multi-tenant)",
    source=SourceRef(module=__name__, function="bitdelta_batched_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp16", shape=("B", "MB", "K"), role="in"),
        Param(name="w_ptr", kind="pointer", dtype="fp16", shape=("N", "K"), role="in"),
        Param(name="packed_ptr", kind="pointer", dtype="i32", shape=("B", "N", "K // 32"),
              role="in", distribution=BITS),
        Param(name="alpha_ptr", kind="pointer", dtype="fp32", shape=("B", "N"), role="in",
              distribution=ALPHA),
        Param(name="y_ptr", kind="pointer", dtype="fp16", shape=("B", "MB", "N"), role="out"),
        Param(name="MB", kind="scalar", dtype="i32", value="MB"),
        Param(name="N", kind="scalar", dtype="i32", value="N", divisibility=16),
        Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
        Param(name="BLOCK_M", kind="constexpr"),
        Param(name="BLOCK_N", kind="constexpr"),
        Param(name="BLOCK_K", kind="constexpr"),
        Param(name="GROUP_M", kind="constexpr"),
    ),
    # bench: 8 tenants x 512 tokens through one 8192 x 8192 layer, 550 GFLOP, 64 MB of deltas
    sizes={"verify": {"B": 3, "MB": 37, "N": 272, "K": 224},
           "bench": {"B": 8, "MB": 512, "N": 8192, "K": 8192}},
    grid=("cdiv(MB, BLOCK_M) * cdiv(N, BLOCK_N)", "B"),
    autotune=SPACE,
    tolerances={"fp16": TOLERANCE},
    flops="2 * B * MB * N * K",
    bytes="2 * B * MB * K + 2 * N * K + B * N * K // 8 + 4 * B * N + 2 * B * MB * N",
    flop_dtype="fp16",
    reference=f"{__name__}:reference",
)
