"""``bitdelta``: a linear layer with a 1-bit weight delta (BitDelta, Liu et al., NeurIPS 2024).

y = x @ W_base^T + alpha * (x @ sign(Delta)^T), with x (M, K) fp16, W_base (N, K) fp16,
sign(Delta) packed 32 per int32 word along K (bit k%32 of word [n, k//32]; 1 -> +1, 0 -> -1) and a
per-output-row scale alpha (N,) fp32. Since alpha scales output rows, the kernel decodes the bits
in registers and folds them into the base tile, W_eff = W_base + alpha[n] * sign, so each K step
is one fp16 ``tl.dot`` (fp32 accumulate). fp16 y.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, Distribution, KernelSpec, Param, SourceRef, Tolerance
from kernels.suite._common import cfg


@triton.jit
def bitdelta_kernel(x_ptr, w_ptr, packed_ptr, alpha_ptr, y_ptr, M, N, K,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    n_m = tl.cdiv(M, BLOCK_M)
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
    x_ptrs = x_ptr + (rm % M).to(tl.int64)[:, None] * K + rk[None, :]
    w_ptrs = w_ptr + rn_c[None, :] * K + rk[:, None]
    p_ptrs = packed_ptr + rn_c[None, :] * (K // 32) + (rk // 32)[:, None]
    shift = (rk % 32)[:, None]
    alpha = tl.load(alpha_ptr + rn_c)[None, :]
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
    y_ptrs = y_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(y_ptrs, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def unpack_signs(packed: np.ndarray, k: int) -> np.ndarray:
    """±1 float64 matrix (..., K) from int32 words (..., K/32): bit k%32 of word k//32, 1 -> +1.

    ``packed`` may arrive as float64 (the harness upcasts inputs); values are int32 words.
    """
    words = np.asarray(packed).astype(np.int64) & 0xFFFFFFFF
    bits = (words[..., :, None] >> np.arange(32, dtype=np.int64)) & 1
    return bits.reshape(*packed.shape[:-1], k).astype(np.float64) * 2.0 - 1.0


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: ``x @ W^T + alpha * (x @ sign^T)``; x (M, K), W (N, K),
    packed (N, K/32) int32, alpha (N,)."""
    x, w = inputs["x_ptr"], inputs["w_ptr"]
    s = unpack_signs(inputs["packed_ptr"], dims["K"])
    return {"y_ptr": x @ w.T + inputs["alpha_ptr"][None, :] * (x @ s.T)}


def vendor(name: str, inputs: dict, dims: dict[str, int]):
    """Vendor *bound* (:mod:`harness.vendor`): one cuBLAS fp16 GEMM ``x @ W'^T`` with the delta
    pre-applied, ``W' = W + alpha * sign`` (fp16, built once, untimed): what a user who can
    afford a dense W' per fine-tune runs. ``inputs`` are torch tensors. Returns
    ``(description, run)``."""
    import torch

    x, w = inputs["x_ptr"], inputs["w_ptr"]
    k = dims["K"]
    words = inputs["packed_ptr"]
    shifts = torch.arange(32, dtype=torch.int32, device=words.device)
    bits = (words.unsqueeze(-1) >> shifts) & 1           # (N, K/32, 32), bit j of word i: k = 32 i + j
    sign = (bits.reshape(words.shape[0], k).to(torch.float32) * 2 - 1)
    wp = (w.float() + inputs["alpha_ptr"][:, None] * sign).to(torch.float16)
    return ("torch.matmul (cuBLAS) with W + alpha*sign pre-applied (bound)",
            lambda: {"y_ptr": torch.matmul(x, wp.t())})


BITS = Distribution(kind="randint", low=-2 ** 31, high=2 ** 31)
"""Uniform random int32 words: every sign bit is a fair coin."""
ALPHA = Distribution(kind="uniform", low=0.05, high=0.15)
"""Per-row delta scales, ~10% of the base weights' std (BitDelta's alpha = mean |Delta|)."""
SPACE = AutotuneSpace(configs=(
    cfg({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, 8, 3),
    cfg({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, 8, 3),
    cfg({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, 4, 4),
    cfg({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, 4, 4),
    cfg({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, 4, 4),
    cfg({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 8, 4),
    cfg({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 4, 3),
))
"""Tiles as for gemm.fp16; BLOCK_K a multiple of 32 (one packed word per 32 k). The last config
is for Ada: the others pipeline x, W and the packed words through 106-262 KiB of shared memory
per CTA on sm_89, over the 99 KiB an sm_89 CTA may use; it needs 64 KiB there."""
# outputs have std ~ sqrt(K) (~15 at verify, ~90 at bench); rounding W_eff to fp16 moves them by
# ~2^-12 * sqrt(K) (<= ~0.07 at bench), an exact two-dot kernel does not: atol covers both
TOLERANCE = Tolerance(rtol=2e-3, atol=1e-1, max_norm_err=1e-3)

SPEC = KernelSpec(
    name="bitdelta",
    description="y = x W^T + alpha * (x sign(Delta)^T), 1-bit delta packed 32/int32, fp16",
    source=SourceRef(module=__name__, function="bitdelta_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp16", shape=("M", "K"), role="in"),
        Param(name="w_ptr", kind="pointer", dtype="fp16", shape=("N", "K"), role="in"),
        Param(name="packed_ptr", kind="pointer", dtype="i32", shape=("N", "K // 32"), role="in",
              distribution=BITS),
        Param(name="alpha_ptr", kind="pointer", dtype="fp32", shape=("N",), role="in",
              distribution=ALPHA),
        Param(name="y_ptr", kind="pointer", dtype="fp16", shape=("M", "N"), role="out"),
        Param(name="M", kind="scalar", dtype="i32", value="M"),
        Param(name="N", kind="scalar", dtype="i32", value="N", divisibility=16),
        Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
        Param(name="BLOCK_M", kind="constexpr"),
        Param(name="BLOCK_N", kind="constexpr"),
        Param(name="BLOCK_K", kind="constexpr"),
        Param(name="GROUP_M", kind="constexpr"),
    ),
    # K must be a multiple of 32 (packing); verify K = 224 is of no BLOCK_K >= 64 (tests masks);
    # bench: 4096 tokens through an 8192 x 8192 layer, 550 GFLOP
    sizes={"verify": {"M": 67, "N": 272, "K": 224}, "bench": {"M": 4096, "N": 8192, "K": 8192}},
    grid=("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)",),
    autotune=SPACE,
    tolerances={"fp16": TOLERANCE},
    flops="2 * M * N * K",
    bytes="2 * M * K + 2 * N * K + N * K // 8 + 4 * N + 2 * M * N",
    flop_dtype="fp16",
    reference=f"{__name__}:reference",
)
