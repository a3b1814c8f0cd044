"""``sage_attention``: attention forward with int8 Q and K quantized per block and fp16 P.V
(SageAttention, Zhang et al., ICLR 2025, §3-4).

Inputs are what SageAttention's quantizer hands the kernel: Q and K int8 (B, H, S, D) with one
fp32 scale per block of 128 queries / 64 keys (B, H, cdiv(S, 128)) and (B, H, cdiv(S, 64)); K was
mean-smoothed over tokens before quantization (softmax is invariant to that shift, so the float64
reference is plain attention on the dequantized values). S_ij = (q_i . k_j)_int32 * sq * sk * scale
with an int8 ``tl.dot``; P is rounded to fp16 for P.V with V fp16 (B, H, S, D). Non-causal.
"""

from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl

from kernels.spec import Distribution, KernelSpec, Param, SourceRef
from kernels.suite._attention import attention64
from kernels.suite.flash_attention import ATTN_SIZES, ATTN_SPACE, ATTN_TOL

Q_BLOCK = 128
K_BLOCK = 64


@triton.jit
def sage_attention_kernel(q_ptr, k_ptr, qs_ptr, ks_ptr, v_ptr, o_ptr, sm_scale, S,
                          D: tl.constexpr, Q_BLK: tl.constexpr, K_BLK: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(axis=0)
    bh = tl.program_id(axis=1).to(tl.int64)
    base = bh * S * D
    n_qb = tl.cdiv(S, Q_BLK)
    n_kb = tl.cdiv(S, K_BLK)
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    qmask = rm < S
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=qmask[:, None], other=0)
    qs = tl.load(qs_ptr + bh * n_qb + rm // Q_BLK, mask=qmask, other=0.0)
    q_scale = qs * (sm_scale * 1.4426950408889634)
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    for n0 in range(0, S, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        kmask = rn < S
        k = tl.load(k_ptr + base + rn[None, :] * D + rd[:, None], mask=kmask[None, :], other=0)
        ks = tl.load(ks_ptr + bh * n_kb + rn // K_BLK, mask=kmask, other=0.0)
        s = tl.dot(q, k).to(tl.float32) * q_scale[:, None] * ks[None, :]
        s = tl.where(kmask[None, :], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=kmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], o.to(tl.float16), mask=qmask[:, None])


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: softmax(q k^T / sqrt(D)) v on the dequantized q, k."""
    s = dims["S"]
    qs = np.repeat(inputs["qs_ptr"], Q_BLOCK, axis=-1)[..., :s, None]
    ks = np.repeat(inputs["ks_ptr"], K_BLOCK, axis=-1)[..., :s, None]
    return {"o_ptr": attention64(inputs["q_ptr"] * qs, inputs["k_ptr"] * ks, inputs["v_ptr"],
                                 1.0 / math.sqrt(dims["D"]), False)}


INT8 = Distribution(kind="randint", low=-127, high=128)
# dequantized q, k then have std ~ 73 * 0.02 = 1.5: scores / sqrt(D) of std ~ 2, a peaked softmax
SCALE = Distribution(kind="uniform", low=0.01, high=0.03)

SPEC = KernelSpec(
    name="sage_attention",
    description="attention, int8 Q/K with per-block scales (K smoothed), fp16 P.V, non-causal",
    source=SourceRef(module=__name__, function="sage_attention_kernel"),
    params=(
        Param(name="q_ptr", kind="pointer", dtype="i8", shape=("B", "H", "S", "D"), role="in",
              distribution=INT8),
        Param(name="k_ptr", kind="pointer", dtype="i8", shape=("B", "H", "S", "D"), role="in",
              distribution=INT8),
        Param(name="qs_ptr", kind="pointer", dtype="fp32", shape=("B", "H", f"cdiv(S, {Q_BLOCK})"),
              role="in", distribution=SCALE),
        Param(name="ks_ptr", kind="pointer", dtype="fp32", shape=("B", "H", f"cdiv(S, {K_BLOCK})"),
              role="in", distribution=SCALE),
        Param(name="v_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"), role="in"),
        Param(name="o_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"), role="out"),
        Param(name="sm_scale", kind="scalar", dtype="fp32", value="1 / sqrt(D)"),
        Param(name="S", kind="scalar", dtype="i32", value="S"),
        Param(name="D", kind="constexpr", value="D"),
        Param(name="Q_BLK", kind="constexpr", value=Q_BLOCK),
        Param(name="K_BLK", kind="constexpr", value=K_BLOCK),
        Param(name="BLOCK_M", kind="constexpr"),
        Param(name="BLOCK_N", kind="constexpr"),
    ),
    sizes=ATTN_SIZES,
    grid=("cdiv(S, BLOCK_M)", "B * H"),
    autotune=ATTN_SPACE,
    tolerances={"fp16": ATTN_TOL},
    flops="4 * B * H * S * S * D",
    bytes="4 * B * H * S * D + 4 * B * H * (cdiv(S, 128) + cdiv(S, 64))",
    flop_dtype="fp16",
    reference=f"{__name__}:reference",
)
