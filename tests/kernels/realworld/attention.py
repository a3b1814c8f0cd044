"""Attention and positional kernels in the style of flash-attention's Triton implementation (a
class of static jit methods, the bias kind a string constexpr "none"/"vector"/"matrix",
@triton.heuristics for even sequence lengths) and of rotary-embedding kernels. Read with ast only."""

import torch
import triton
import triton.language as tl


class FlashAttnTriton:
    @staticmethod
    @triton.heuristics({
        "EVEN_M": lambda args: args["seqlen_q"] % args["BLOCK_M"] == 0,
        "EVEN_N": lambda args: args["seqlen_k"] % args["BLOCK_N"] == 0,
    })
    @triton.jit
    def _fwd_kernel(Q, K, V, Bias, Out, softmax_scale, stride_qh, stride_kh, stride_vh,
                    stride_bh, stride_oh, seqlen_q, seqlen_k, BIAS_TYPE: tl.constexpr,
                    IS_CAUSAL: tl.constexpr, BLOCK_HEADDIM: tl.constexpr, EVEN_M: tl.constexpr,
                    EVEN_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        start_m = tl.program_id(0)
        off_h = tl.program_id(1)
        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_HEADDIM)
        q_ptrs = Q + off_h * stride_qh + (offs_m[:, None] * BLOCK_HEADDIM + offs_d[None, :])
        k_ptrs = K + off_h * stride_kh + (offs_n[:, None] * BLOCK_HEADDIM + offs_d[None, :])
        v_ptrs = V + off_h * stride_vh + (offs_n[:, None] * BLOCK_HEADDIM + offs_d[None, :])
        if BIAS_TYPE == "vector":
            b_ptrs = Bias + off_h * stride_bh + offs_n
        elif BIAS_TYPE == "matrix":
            b_ptrs = Bias + off_h * stride_bh + (offs_m[:, None] * seqlen_k + offs_n[None, :])
        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc_o = tl.zeros([BLOCK_M, BLOCK_HEADDIM], dtype=tl.float32)
        if EVEN_M:
            q = tl.load(q_ptrs)
        else:
            q = tl.load(q_ptrs, mask=offs_m[:, None] < seqlen_q, other=0.0)
        end_n = seqlen_k if not IS_CAUSAL else tl.minimum((start_m + 1) * BLOCK_M, seqlen_k)
        for start_n in range(0, end_n, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            if EVEN_N:
                k = tl.load(k_ptrs + start_n * BLOCK_HEADDIM)
            else:
                k = tl.load(k_ptrs + start_n * BLOCK_HEADDIM,
                            mask=(start_n + offs_n)[:, None] < seqlen_k, other=0.0)
            qk = tl.dot(q, tl.trans(k))
            if not EVEN_N:
                qk += tl.where((start_n + offs_n)[None, :] < seqlen_k, 0, float("-inf"))
            if IS_CAUSAL:
                qk += tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], 0, float("-inf"))
            if BIAS_TYPE != "none":
                if BIAS_TYPE == "vector":
                    bias = tl.load(b_ptrs + start_n, mask=(start_n + offs_n) < seqlen_k,
                                   other=0.0).to(tl.float32)
                    bias = bias[None, :]
                else:
                    bias = tl.load(b_ptrs + start_n,
                                   mask=(offs_m[:, None] < seqlen_q)
                                   & ((start_n + offs_n)[None, :] < seqlen_k),
                                   other=0.0).to(tl.float32)
                qk = qk * softmax_scale + bias
                m_ij = tl.maximum(tl.max(qk, 1), m_i)
                p = tl.exp(qk - m_ij[:, None])
            else:
                m_ij = tl.maximum(tl.max(qk, 1) * softmax_scale, m_i)
                p = tl.exp(qk * softmax_scale - m_ij[:, None])
            l_ij = tl.sum(p, 1)
            acc_scale = tl.exp(m_i - m_ij)
            acc_o = acc_o * acc_scale[:, None]
            if EVEN_N:
                v = tl.load(v_ptrs + start_n * BLOCK_HEADDIM)
            else:
                v = tl.load(v_ptrs + start_n * BLOCK_HEADDIM,
                            mask=(start_n + offs_n)[:, None] < seqlen_k, other=0.0)
            acc_o += tl.dot(p.to(v.dtype), v)
            m_i = m_ij
            l_i = l_i * acc_scale + l_ij
        acc_o = acc_o / l_i[:, None]
        out_ptrs = Out + off_h * stride_oh + (offs_m[:, None] * BLOCK_HEADDIM + offs_d[None, :])
        tl.store(out_ptrs, acc_o.to(Out.dtype.element_ty), mask=offs_m[:, None] < seqlen_q)


@triton.jit
def rope_kernel(q_ptr, cos_ptr, sin_ptr, out_ptr, seq_len, n_heads, HEAD_DIM: tl.constexpr,
                BLOCK_H: tl.constexpr):
    """Rotary embedding (neox layout): each program rotates BLOCK_H heads of one token."""
    tok = tl.program_id(0)
    hb = tl.program_id(1)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    half = tl.arange(0, HEAD_DIM // 2)
    pos = tok % seq_len
    cos = tl.load(cos_ptr + pos * (HEAD_DIM // 2) + half)
    sin = tl.load(sin_ptr + pos * (HEAD_DIM // 2) + half)
    base = q_ptr + tok * n_heads * HEAD_DIM + heads[:, None] * HEAD_DIM
    hm = heads[:, None] < n_heads
    x1 = tl.load(base + half[None, :], mask=hm, other=0.0).to(tl.float32)
    x2 = tl.load(base + HEAD_DIM // 2 + half[None, :], mask=hm, other=0.0).to(tl.float32)
    o = out_ptr + tok * n_heads * HEAD_DIM + heads[:, None] * HEAD_DIM
    tl.store(o + half[None, :], (x1 * cos[None, :] - x2 * sin[None, :]).to(tl.float16), mask=hm)
    tl.store(o + HEAD_DIM // 2 + half[None, :], (x2 * cos[None, :] + x1 * sin[None, :]
                                                 ).to(tl.float16), mask=hm)
