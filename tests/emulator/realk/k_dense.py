"""Dense kernels in the styles of public repositories: a tiled fp16 GEMM (tutorial style, grouped
program order), a FlashAttention-2 forward (fp16 in, fp32 online softmax), a rotary embedding
that mixes fp16 data with fp32 tables, and a LayerNorm forward."""

from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, KernelSpec, Param, SourceRef, Tolerance


@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    gsize = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % gsize
    pid_n = (pid % group) // gsize
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, S, D: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * S * D
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for n0 in range(0, S, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + rn[None, :] * D + rd[:, None], mask=rn[None, :] < S, other=0.0)
        s = tl.dot(q, k) * qk_scale
        s = tl.where(rn[None, :] < S, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], acc.to(tl.float16),
             mask=rm[:, None] < S)


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, o_ptr, H, D: tl.constexpr, BLOCK_H: tl.constexpr):
    t = tl.program_id(0)
    HALF: tl.constexpr = D // 2
    h = tl.arange(0, BLOCK_H)[:, None]
    c = tl.arange(0, HALF)[None, :]
    m = h < H
    base = t * H * D + h * D + c
    x1 = tl.load(x_ptr + base, mask=m, other=0.0)
    x2 = tl.load(x_ptr + base + HALF, mask=m, other=0.0)
    cs = tl.load(cos_ptr + t * HALF + c).to(tl.float16)
    sn = tl.load(sin_ptr + t * HALF + c).to(tl.float16)
    # fp16 products accumulated in fp32 (the newest Triton fuses these into mixed-precision
    # fma.rn.f32.f16 / sub.f32.f16 on sm_100a)
    o1 = x1.to(tl.float32) * cs.to(tl.float32) - x2.to(tl.float32) * sn.to(tl.float32)
    o2 = x2.to(tl.float32) * cs.to(tl.float32) + x1.to(tl.float32) * sn.to(tl.float32)
    tl.store(o_ptr + base, o1.to(tl.float16), mask=m)
    tl.store(o_ptr + base + HALF, o2.to(tl.float16), mask=m)


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(m, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + offs, (xc * rstd * w + b).to(tl.float16), mask=m)


def ref_gemm(inputs, dims):
    """float64 C = A @ B, A (M, K), B (K, N)."""
    return {"c_ptr": inputs["a_ptr"] @ inputs["b_ptr"]}


def ref_attn(inputs, dims):
    """float64 softmax(Q K^T / sqrt(D)) V over (BH, S, D)."""
    q, k, v = inputs["q_ptr"], inputs["k_ptr"], inputs["v_ptr"]
    s = q @ k.transpose(0, 2, 1) / math.sqrt(dims["D"])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return {"o_ptr": (p / p.sum(axis=-1, keepdims=True)) @ v}


def ref_rope(inputs, dims):
    """float64 NeoX rotary embedding of x (T, H, D) with cos/sin (T, D/2) rounded to fp16."""
    x = inputs["x_ptr"]
    c = inputs["cos_ptr"].astype(np.float16).astype(np.float64)[:, None, :]
    s = inputs["sin_ptr"].astype(np.float16).astype(np.float64)[:, None, :]
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return {"o_ptr": np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)}


def ref_layernorm(inputs, dims):
    """float64 LayerNorm over the rows of x (M, N), eps 1e-5."""
    x = inputs["x_ptr"]
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return {"y_ptr": (x - mu) / np.sqrt(var + 1e-5) * inputs["w_ptr"] + inputs["b_ptr"]}


GEMM = KernelSpec(
    name="realk_gemm",
    description="fp16 GEMM, fp32 accumulation, grouped program order",
    source=SourceRef(module=__name__, function="gemm_kernel"),
    params=(
        Param(name="a_ptr", kind="pointer", dtype="fp16", shape=("M", "K"), role="in"),
        Param(name="b_ptr", kind="pointer", dtype="fp16", shape=("K", "N"), role="in"),
        Param(name="c_ptr", kind="pointer", dtype="fp16", shape=("M", "N"), role="out"),
        Param(name="M", kind="scalar", dtype="i32", value="M"),
        Param(name="N", kind="scalar", dtype="i32", value="N"),
        Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
        Param(name="BLOCK_M", kind="constexpr"),
        Param(name="BLOCK_N", kind="constexpr"),
        Param(name="BLOCK_K", kind="constexpr"),
        Param(name="GROUP_M", kind="constexpr"),
    ),
    sizes={"verify": {"M": 512, "N": 512, "K": 512}, "bench": {"M": 4096, "N": 4096, "K": 4096}},
    grid=("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)",),
    autotune=AutotuneSpace(meta={"BLOCK_M": (128,), "BLOCK_N": (128,), "BLOCK_K": (64,),
                                 "GROUP_M": (8,)}, num_warps=(8,), num_stages=(3,)),
    tolerances={"fp16": Tolerance(rtol=1e-2, atol=5e-2, max_norm_err=1e-2)},
    reference=f"{__name__}:ref_gemm",
)

ATTN = KernelSpec(
    name="realk_attn_fwd",
    description="FlashAttention-2 forward, fp16, non-causal, head dim 64",
    source=SourceRef(module=__name__, function="attn_fwd_kernel"),
    params=(
        Param(name="q_ptr", kind="pointer", dtype="fp16", shape=("BH", "S", "D"), role="in"),
        Param(name="k_ptr", kind="pointer", dtype="fp16", shape=("BH", "S", "D"), role="in"),
        Param(name="v_ptr", kind="pointer", dtype="fp16", shape=("BH", "S", "D"), role="in"),
        Param(name="o_ptr", kind="pointer", dtype="fp16", shape=("BH", "S", "D"), role="out"),
        Param(name="sm_scale", kind="scalar", dtype="fp32", value="1 / sqrt(D)"),
        Param(name="S", kind="scalar", dtype="i32", value="S"),
        Param(name="D", kind="constexpr", value="D"),
        Param(name="BLOCK_M", kind="constexpr"),
        Param(name="BLOCK_N", kind="constexpr"),
    ),
    sizes={"verify": {"BH": 4, "S": 512, "D": 64}, "bench": {"BH": 32, "S": 4096, "D": 64}},
    grid=("cdiv(S, BLOCK_M)", "BH"),
    autotune=AutotuneSpace(meta={"BLOCK_M": (128,), "BLOCK_N": (64,)}, num_warps=(4,),
                           num_stages=(2,)),
    tolerances={"fp16": Tolerance(rtol=1e-2, atol=1e-2, max_norm_err=1e-2)},
    reference=f"{__name__}:ref_attn",
)

ROPE = KernelSpec(
    name="realk_rope",
    description="rotary embedding with fp16 products accumulated in fp32",
    source=SourceRef(module=__name__, function="rope_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp16", shape=("T", "H", "D"), role="in"),
        Param(name="cos_ptr", kind="pointer", dtype="fp32", shape=("T", "D // 2"), role="in"),
        Param(name="sin_ptr", kind="pointer", dtype="fp32", shape=("T", "D // 2"), role="in"),
        Param(name="o_ptr", kind="pointer", dtype="fp16", shape=("T", "H", "D"), role="out"),
        Param(name="H", kind="scalar", dtype="i32", value="H"),
        Param(name="D", kind="constexpr", value="D"),
        Param(name="BLOCK_H", kind="constexpr", value="next_power_of_2(H)"),
    ),
    sizes={"verify": {"T": 64, "H": 16, "D": 128}, "bench": {"T": 64, "H": 16, "D": 128}},
    grid=("T",),
    autotune=AutotuneSpace(meta={}, num_warps=(4,), num_stages=(1,)),
    tolerances={"fp16": Tolerance(rtol=1e-2, atol=1e-2, max_norm_err=1e-2)},
    reference=f"{__name__}:ref_rope",
)

LAYERNORM = KernelSpec(
    name="realk_layernorm",
    description="LayerNorm forward, fp16 in/out, fp32 statistics",
    source=SourceRef(module=__name__, function="layernorm_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp16", shape=("M", "N"), role="in"),
        Param(name="w_ptr", kind="pointer", dtype="fp16", shape=("N",), role="in"),
        Param(name="b_ptr", kind="pointer", dtype="fp16", shape=("N",), role="in"),
        Param(name="y_ptr", kind="pointer", dtype="fp16", shape=("M", "N"), role="out"),
        Param(name="N", kind="scalar", dtype="i32", value="N"),
        Param(name="eps", kind="scalar", dtype="fp32", value="1e-5"),
        Param(name="BLOCK", kind="constexpr", value="next_power_of_2(N)"),
    ),
    sizes={"verify": {"M": 64, "N": 1000}, "bench": {"M": 4096, "N": 1000}},
    grid=("M",),
    autotune=AutotuneSpace(meta={}, num_warps=(4,), num_stages=(1,)),
    tolerances={"fp16": Tolerance(rtol=1e-2, atol=1e-2, max_norm_err=1e-2)},
    reference=f"{__name__}:ref_layernorm",
)
