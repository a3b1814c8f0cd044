"""``flash_attention``: attention forward, fp16 Q/K/V/O, fp32 online softmax (FlashAttention-2,
Dao 2023, Algorithm 1). Variants ``flash_attention.causal`` and ``flash_attention.noncausal``.

Q, K, V, O are (B, H, S, D) contiguous, D = 128. One program per (BLOCK_M queries, batch*head);
keys are walked in BLOCK_N tiles keeping a running max and row sum; in the causal variant the
tiles strictly below the diagonal run without a mask and only the diagonal tiles are masked.
"""

from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, KernelSpec, Param, SourceRef, Tolerance
from kernels.suite._attention import attention64
from kernels.suite._common import cfg


@triton.jit
def _fa_tiles(acc, l_i, m_i, q, k_base, v_base, rm, S, qk_scale, lo, hi,
              D: tl.constexpr, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    rd = tl.arange(0, D)
    for n0 in range(lo, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        kmask = rn < S
        k = tl.load(k_base + rn[None, :] * D + rd[:, None], mask=kmask[None, :], other=0.0)
        s = tl.dot(q, k) * qk_scale
        if DIAGONAL:
            s = tl.where(kmask[None, :] & (rn[None, :] <= rm[:, None]), s, -float("inf"))
        else:
            s = tl.where(kmask[None, :], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + rn[:, None] * D + rd[None, :], mask=kmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def flash_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, S, D: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(axis=0)
    base = tl.program_id(axis=1).to(tl.int64) * S * D
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    qk_scale = sm_scale * 1.4426950408889634  # scores in log2 units: exp2 on the MUFU
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    if CAUSAL:
        # BLOCK_M is a multiple of BLOCK_N: tiles below start_m * BLOCK_M are fully visible
        acc, l_i, m_i = _fa_tiles(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, rm, S, qk_scale,
                                  0, start_m * BLOCK_M, D, BLOCK_N, False)
        acc, l_i, m_i = _fa_tiles(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, rm, S, qk_scale,
                                  start_m * BLOCK_M, tl.minimum((start_m + 1) * BLOCK_M, S),
                                  D, BLOCK_N, True)
    else:
        acc, l_i, m_i = _fa_tiles(acc, l_i, m_i, q, k_ptr + base, v_ptr + base, rm, S, qk_scale,
                                  0, S, D, BLOCK_N, False)
    o = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], o.to(tl.float16), mask=rm[:, None] < S)


def _reference(causal: bool):
    def ref(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
        return {"o_ptr": attention64(inputs["q_ptr"], inputs["k_ptr"], inputs["v_ptr"],
                                     1.0 / math.sqrt(dims["D"]), causal)}
    return ref


def reference_causal(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: causal ``softmax(q k^T / sqrt(D)) v``; q, k, v (B, H, S, D)."""
    return _reference(True)(inputs, dims)


def reference_noncausal(inputs: dict[str, np.ndarray], dims: dict[str, int]
                        ) -> dict[str, np.ndarray]:
    """float64 reference: ``softmax(q k^T / sqrt(D)) v``; q, k, v (B, H, S, D)."""
    return _reference(False)(inputs, dims)


def vendor(name: str, inputs: dict, dims: dict[str, int]):
    """Vendor path (:mod:`harness.vendor`): ``F.scaled_dot_product_attention`` (torch picks its
    flash / cuDNN / efficient backend), scale 1/sqrt(D), causal per the variant; ``inputs`` are
    torch tensors (B, H, S, D). Returns ``(description, run)``."""
    import torch.nn.functional as F

    q, k, v = inputs["q_ptr"], inputs["k_ptr"], inputs["v_ptr"]
    causal = name.endswith(".causal")
    return (f"F.scaled_dot_product_attention (causal={causal})",
            lambda: {"o_ptr": F.scaled_dot_product_attention(q, k, v, is_causal=causal)})


ATTN_SPACE = AutotuneSpace(configs=(
    cfg({"BLOCK_M": 128, "BLOCK_N": 64}, 8, 3),
    cfg({"BLOCK_M": 128, "BLOCK_N": 128}, 8, 3),
    cfg({"BLOCK_M": 128, "BLOCK_N": 64}, 4, 3),
    cfg({"BLOCK_M": 64, "BLOCK_N": 64}, 4, 3),
    cfg({"BLOCK_M": 128, "BLOCK_N": 32}, 4, 2),
))
"""Attention tiles (BLOCK_M a multiple of BLOCK_N, as the causal split needs)."""
# outputs are softmax-weighted means of V (|o| ~ 0.1-1); P is rounded to fp16 before P.V
ATTN_TOL = Tolerance(rtol=5e-3, atol=2e-3, max_norm_err=2e-3)
ATTN_SIZES = {"verify": {"B": 1, "H": 2, "S": 200, "D": 128},
              "bench": {"B": 2, "H": 32, "S": 4096, "D": 128}}
"""verify: S = 200 is a multiple of no tile (tests the key and query masks); bench: batch 2 x 32
heads x 4096 tokens, head dim 128: 550 GFLOP non-causal, 275 GFLOP causal."""


def make_spec(causal: bool) -> KernelSpec:
    """``flash_attention.causal`` or ``flash_attention.noncausal``."""
    kind = "causal" if causal else "noncausal"
    return KernelSpec(
        name=f"flash_attention.{kind}",
        description=f"attention forward, {kind.replace('non', 'non-')}, fp16, online softmax",
        source=SourceRef(module=__name__, function="flash_attention_kernel"),
        params=(
            Param(name="q_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"), role="in"),
            Param(name="k_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"), role="in"),
            Param(name="v_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"), role="in"),
            Param(name="o_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"),
                  role="out"),
            Param(name="sm_scale", kind="scalar", dtype="fp32", value="1 / sqrt(D)"),
            Param(name="S", kind="scalar", dtype="i32", value="S"),
            Param(name="D", kind="constexpr", value="D"),
            Param(name="BLOCK_M", kind="constexpr"),
            Param(name="BLOCK_N", kind="constexpr"),
            Param(name="CAUSAL", kind="constexpr", value=int(causal)),
        ),
        sizes=ATTN_SIZES,
        grid=("cdiv(S, BLOCK_M)", "B * H"),
        autotune=ATTN_SPACE,
        tolerances={"fp16": ATTN_TOL},
        flops=f"{2 if causal else 4} * B * H * S * S * D",
        bytes="8 * B * H * S * D",
        flop_dtype="fp16",
        reference=f"{__name__}:reference_{kind}",
    )


SPEC_CAUSAL = make_spec(True)
SPEC_NONCAUSAL = make_spec(False)
