"""``forgetting_attention``: causal attention with a data-dependent forget gate (Forgetting
Transformer, Lin et al., ICLR 2025, eq. 5).

score_ij = q_i . k_j / sqrt(D) + sum_{l=j+1..i} log f_l for j <= i, o_i = softmax_j(score_i) V.
With c_i = sum_{l<=i} log f_l the bias is c_i - c_j; c_i is constant along a softmax row, so the
kernel adds -c_j only (exactly the same softmax), building c_j as a running prefix sum of the gate
while it walks the key tiles in order. log f (B, H, S) fp32, Q/K/V/O (B, H, S, D) fp16.
"""

from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl

from kernels.spec import Distribution, KernelSpec, Param, SourceRef
from kernels.suite._attention import attention64
from kernels.suite.flash_attention import ATTN_SIZES, ATTN_SPACE, ATTN_TOL

LOG2E = 1.4426950408889634


@triton.jit
def _fox_tiles(acc, l_i, m_i, prefix, q, k_base, v_base, g_base, rm, S, qk_scale, lo, hi,
               D: tl.constexpr, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    rd = tl.arange(0, D)
    for n0 in range(lo, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        kmask = rn < S
        lg = tl.load(g_base + rn, mask=kmask, other=0.0)
        c = prefix + tl.cumsum(lg, axis=0)  # c_j = sum_{l <= j} log f_l
        prefix += tl.sum(lg, axis=0)
        k = tl.load(k_base + rn[None, :] * D + rd[:, None], mask=kmask[None, :], other=0.0)
        s = tl.dot(q, k) * qk_scale - (c * 1.4426950408889634)[None, :]
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
    return acc, l_i, m_i, prefix


@triton.jit
def forgetting_attention_kernel(q_ptr, k_ptr, v_ptr, logf_ptr, o_ptr, sm_scale, S,
                                D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(axis=0)
    bh = tl.program_id(axis=1).to(tl.int64)
    base = bh * S * D
    g_base = logf_ptr + bh * S
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    qk_scale = sm_scale * 1.4426950408889634
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    prefix = tl.sum(tl.zeros((BLOCK_N,), dtype=tl.float32), axis=0)
    acc, l_i, m_i, prefix = _fox_tiles(acc, l_i, m_i, prefix, q, k_ptr + base, v_ptr + base,
                                       g_base, rm, S, qk_scale, 0, start_m * BLOCK_M,
                                       D, BLOCK_N, False)
    acc, l_i, m_i, prefix = _fox_tiles(acc, l_i, m_i, prefix, q, k_ptr + base, v_ptr + base,
                                       g_base, rm, S, qk_scale, start_m * BLOCK_M,
                                       tl.minimum((start_m + 1) * BLOCK_M, S), D, BLOCK_N, True)
    o = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], o.to(tl.float16), mask=rm[:, None] < S)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: causal softmax(q k^T / sqrt(D) + (c_i - c_j)) v, c = cumsum(log f)."""
    c = np.cumsum(inputs["logf_ptr"], axis=-1)  # (B, H, S)
    bias = c[..., :, None] - c[..., None, :]
    return {"o_ptr": attention64(inputs["q_ptr"], inputs["k_ptr"], inputs["v_ptr"],
                                 1.0 / math.sqrt(dims["D"]), True, bias)}


SPEC = KernelSpec(
    name="forgetting_attention",
    description="causal attention + forget-gate bias sum_{j<l<=i} log f_l, fp16, online softmax",
    source=SourceRef(module=__name__, function="forgetting_attention_kernel"),
    params=(
        Param(name="q_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"), role="in"),
        Param(name="k_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"), role="in"),
        Param(name="v_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"), role="in"),
        # log f in [-0.05, 0): gates in (0.95, 1], so a key 100 tokens back is damped by ~e^-2.5
        Param(name="logf_ptr", kind="pointer", dtype="fp32", shape=("B", "H", "S"), role="in",
              distribution=Distribution(kind="uniform", low=-0.05, high=0.0)),
        Param(name="o_ptr", kind="pointer", dtype="fp16", shape=("B", "H", "S", "D"), role="out"),
        Param(name="sm_scale", kind="scalar", dtype="fp32", value="1 / sqrt(D)"),
        Param(name="S", kind="scalar", dtype="i32", value="S"),
        Param(name="D", kind="constexpr", value="D"),
        Param(name="BLOCK_M", kind="constexpr"),
        Param(name="BLOCK_N", kind="constexpr"),
    ),
    sizes=ATTN_SIZES,
    grid=("cdiv(S, BLOCK_M)", "B * H"),
    autotune=ATTN_SPACE,
    tolerances={"fp16": ATTN_TOL},
    flops="2 * B * H * S * S * D",
    bytes="8 * B * H * S * D + 4 * B * H * S",
    flop_dtype="fp16",
    reference=f"{__name__}:reference",
)
