"""More constructs of public kernels: argmax (tl.argmax), a custom associative scan (running max
with tl.associative_scan), a histogram with atomic adds on int32 counters, a bf16 GEMM with a
persistent tile loop (tl.range), and a causal attention forward."""

from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, Distribution, KernelSpec, Param, SourceRef, Tolerance


@triton.jit
def argmax_kernel(x_ptr, idx_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + offs, mask=offs < N, other=-float("inf"))
    tl.store(idx_ptr + row, tl.argmax(x, axis=0).to(tl.int32))


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def running_max_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + row * N + offs, mask=m, other=-float("inf"))
    tl.store(y_ptr + row * N + offs, tl.associative_scan(x, 0, _max_combine), mask=m)


@triton.jit
def histogram_kernel(x_ptr, hist_ptr, N, NBINS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m, other=0)
    tl.atomic_add(hist_ptr + (x % NBINS), 1, mask=m)


@triton.jit
def persistent_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, NUM_SMS: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    start = tl.program_id(0)
    n_m = tl.cdiv(M, BLOCK_M)
    n_n = tl.cdiv(N, BLOCK_N)
    for tile in tl.range(start, n_m * n_n, NUM_SMS):
        pid_m = tile // n_n
        pid_n = tile % n_n
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=rm[:, None] < M,
                        other=0.0)
            b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=rn[None, :] < N,
                        other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def causal_attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, S, D: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * S * D
    rm = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + base + rm[:, None] * D + rd[None, :], mask=rm[:, None] < S, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    for n0 in range(0, (start_m + 1) * BLOCK_M, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + rn[None, :] * D + rd[:, None], mask=rn[None, :] < S, other=0.0)
        s = tl.dot(q, k) * (sm_scale * 1.44269504)
        s = tl.where((rn[None, :] <= rm[:, None]) & (rn[None, :] < S), s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * D + rd[None, :], mask=rn[:, None] < S, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    tl.store(o_ptr + base + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(tl.float16),
             mask=rm[:, None] < S)


def ref_argmax(inputs, dims):
    """first index of the row maximum of x (M, N)."""
    return {"idx_ptr": inputs["x_ptr"].argmax(axis=1).astype(np.float64)}


def ref_running_max(inputs, dims):
    """running maximum along the rows of x (M, N)."""
    return {"y_ptr": np.maximum.accumulate(inputs["x_ptr"], axis=1)}


def ref_histogram(inputs, dims):
    """counts of x mod NBINS (x >= 0)."""
    x = inputs["x_ptr"].astype(np.int64)
    return {"hist_ptr": np.bincount(x % dims["NBINS"], minlength=dims["NBINS"]).astype(
        np.float64)}


def ref_gemm(inputs, dims):
    """float64 C = A @ B."""
    return {"c_ptr": inputs["a_ptr"] @ inputs["b_ptr"]}


def ref_causal(inputs, dims):
    """causal softmax(Q K^T / sqrt(D)) V over (BH, S, D)."""
    q, k, v = inputs["q_ptr"], inputs["k_ptr"], inputs["v_ptr"]
    s = q @ k.transpose(0, 2, 1) / math.sqrt(dims["D"])
    S = s.shape[-1]
    s = np.where(np.tril(np.ones((S, S), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return {"o_ptr": (p / p.sum(axis=-1, keepdims=True)) @ v}


_EXACT = Tolerance(rtol=0, atol=0, max_norm_err=1e-12)

ARGMAX = KernelSpec(
    name="realk_argmax", description="row argmax",
    source=SourceRef(module=__name__, function="argmax_kernel"),
    params=(Param(name="x_ptr", kind="pointer", dtype="fp32", shape=("M", "N"), role="in"),
            Param(name="idx_ptr", kind="pointer", dtype="i32", shape=("M",), role="out"),
            Param(name="N", kind="scalar", dtype="i32", value="N"),
            Param(name="BLOCK", kind="constexpr", value="next_power_of_2(N)")),
    sizes={"verify": {"M": 16, "N": 700}, "bench": {"M": 4096, "N": 700}},
    grid=("M",), autotune=AutotuneSpace(meta={}, num_warps=(4,), num_stages=(1,)),
    tolerances={"i32": _EXACT}, reference=f"{__name__}:ref_argmax")

RUNNING_MAX = KernelSpec(
    name="realk_running_max", description="running max with tl.associative_scan",
    source=SourceRef(module=__name__, function="running_max_kernel"),
    params=(Param(name="x_ptr", kind="pointer", dtype="fp32", shape=("M", "N"), role="in"),
            Param(name="y_ptr", kind="pointer", dtype="fp32", shape=("M", "N"), role="out"),
            Param(name="N", kind="scalar", dtype="i32", value="N"),
            Param(name="BLOCK", kind="constexpr", value="next_power_of_2(N)")),
    sizes={"verify": {"M": 8, "N": 1000}, "bench": {"M": 4096, "N": 1000}},
    grid=("M",), autotune=AutotuneSpace(meta={}, num_warps=(4,), num_stages=(1,)),
    tolerances={"fp32": _EXACT}, reference=f"{__name__}:ref_running_max")

HISTOGRAM = KernelSpec(
    name="realk_histogram", description="histogram with int32 atomic adds (zero-filled output)",
    source=SourceRef(module=__name__, function="histogram_kernel"),
    params=(Param(name="x_ptr", kind="pointer", dtype="i32", shape=("N",), role="in",
                  distribution=Distribution(kind="randint", low=0, high=1000)),
            Param(name="hist_ptr", kind="pointer", dtype="i32", shape=("NBINS",), role="out",
                  init="zeros"),
            Param(name="N", kind="scalar", dtype="i32", value="N"),
            Param(name="NBINS", kind="constexpr", value="NBINS"),
            Param(name="BLOCK", kind="constexpr")),
    sizes={"verify": {"N": 5000, "NBINS": 64}, "bench": {"N": 1 << 22, "NBINS": 64}},
    grid=("cdiv(N, BLOCK)",),
    autotune=AutotuneSpace(meta={"BLOCK": (1024,)}, num_warps=(4,), num_stages=(1,)),
    tolerances={"i32": _EXACT}, reference=f"{__name__}:ref_histogram")

PERSISTENT_GEMM = KernelSpec(
    name="realk_persistent_gemm", description="bf16 GEMM, persistent tile loop over 4 programs",
    source=SourceRef(module=__name__, function="persistent_gemm_kernel"),
    params=(Param(name="a_ptr", kind="pointer", dtype="bf16", shape=("M", "K"), role="in"),
            Param(name="b_ptr", kind="pointer", dtype="bf16", shape=("K", "N"), role="in"),
            Param(name="c_ptr", kind="pointer", dtype="bf16", shape=("M", "N"), role="out"),
            Param(name="M", kind="scalar", dtype="i32", value="M"),
            Param(name="N", kind="scalar", dtype="i32", value="N"),
            Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
            Param(name="NUM_SMS", kind="constexpr", value="4"),
            Param(name="BLOCK_M", kind="constexpr"), Param(name="BLOCK_N", kind="constexpr"),
            Param(name="BLOCK_K", kind="constexpr")),
    sizes={"verify": {"M": 256, "N": 256, "K": 128}, "bench": {"M": 2048, "N": 2048, "K": 2048}},
    grid=("4",),
    autotune=AutotuneSpace(meta={"BLOCK_M": (128,), "BLOCK_N": (128,), "BLOCK_K": (64,)},
                           num_warps=(4,), num_stages=(3,)),
    tolerances={"bf16": Tolerance(rtol=2e-2, atol=5e-2, max_norm_err=2e-2)},
    reference=f"{__name__}:ref_gemm")

CAUSAL_ATTN = KernelSpec(
    name="realk_causal_attn", description="causal attention forward, fp16, head dim 64",
    source=SourceRef(module=__name__, function="causal_attn_kernel"),
    params=(Param(name="q_ptr", kind="pointer", dtype="fp16", shape=("BH", "S", "D"), role="in"),
            Param(name="k_ptr", kind="pointer", dtype="fp16", shape=("BH", "S", "D"), role="in"),
            Param(name="v_ptr", kind="pointer", dtype="fp16", shape=("BH", "S", "D"), role="in"),
            Param(name="o_ptr", kind="pointer", dtype="fp16", shape=("BH", "S", "D"), role="out"),
            Param(name="sm_scale", kind="scalar", dtype="fp32", value="1 / sqrt(D)"),
            Param(name="S", kind="scalar", dtype="i32", value="S"),
            Param(name="D", kind="constexpr", value="D"),
            Param(name="BLOCK_M", kind="constexpr"), Param(name="BLOCK_N", kind="constexpr")),
    sizes={"verify": {"BH": 2, "S": 256, "D": 64}, "bench": {"BH": 32, "S": 4096, "D": 64}},
    grid=("cdiv(S, BLOCK_M)", "BH"),
    autotune=AutotuneSpace(meta={"BLOCK_M": (64,), "BLOCK_N": (64,)}, num_warps=(4,),
                           num_stages=(2,)),
    tolerances={"fp16": Tolerance(rtol=1e-2, atol=1e-2, max_norm_err=1e-2)},
    reference=f"{__name__}:ref_causal")
