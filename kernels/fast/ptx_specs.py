"""Specs of the hand-written PTX entries of the ``fast`` family (their PTX and launch:
:mod:`kernels.fast.hand_ptx`). Each spec's Triton kernel has exactly the ABI of the PTX entry
and is its baseline.

* ``fast.ptx_gemm_ws_sm90`` -- C = A @ B^T fp16, the ABI of ``fast.gemm_device_desc``'s kernel
  (persistent, ``NUM_SMS`` = 132 programs: the H200's SM count, so that the Triton baseline is a
  fair persistent kernel).
* ``fast.ptx_gemm_cluster_sm90`` -- the same GEMM on 2-CTA clusters, the ABI of
  ``fast.gemm_cluster``'s Triton kernel (``num_ctas`` = 2); the hand-written kernel's grid meta
  ``BLOCK_M`` = 256 (a cluster covers 256 rows), Triton's 128 (its 2 CTAs split one tile).
* ``fast.ptx_gemm_tc_sm100`` -- sm_100a tcgen05 GEMM; its baseline is ``gemm_cluster_kernel``
  with ``num_ctas`` = 1 (a plain ``tl.dot`` GEMM, one 128 x 128 tile per program).
* ``fast.ptx_gemm_splitk_sm90`` -- split-K (2 halves) GEMM into a zero-filled fp32 C; its
  baseline is :func:`gemm_splitk_kernel` (``tl.atomic_add`` of each half's partial tile).
* ``fast.ptx_softmax_ws_sm90`` -- row softmax fp16, the ABI of the suite's ``softmax`` kernel;
  the grid is ``cdiv(M, ROWS)`` programs: the Triton baseline takes ``ROWS`` = 1 (one row per
  program), the hand-written kernel 16 rows per CTA (its launch meta).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels.fast._common import gemm_sizes
from kernels.fast.gemm_tma import _ptr_gemm
from kernels.fast.gemm_tma import reference as _gemm_reference
from kernels.spec import (AutotuneSpace, Config, Distribution, KernelSpec, Param, SourceRef,
                          Tolerance)
from kernels.suite import softmax as _softmax

__all__ = ["SPEC_GEMM_CLUSTER_SM90", "SPEC_GEMM_SPLITK_SM90", "SPEC_GEMM_TC_SM100",
           "SPEC_GEMM_WS_SM90", "SPEC_SOFTMAX_WS_SM90", "gemm_splitk_kernel", "splitk_reference"]

_PERSISTENT = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_SMS": 132}

SPEC_GEMM_WS_SM90 = _ptr_gemm(
    "fast.ptx_gemm_ws_sm90", "gemm_device_desc_kernel",
    "hand-written PTX (sm_90a): C = A @ B^T fp16, TMA + 4-stage mbarrier ring, producer warp + "
    "2 wgmma consumer warpgroups, persistent",
    Config(meta=_PERSISTENT, num_warps=4, num_stages=3))

SPEC_GEMM_CLUSTER_SM90 = _ptr_gemm(
    "fast.ptx_gemm_cluster_sm90", "gemm_cluster_kernel",
    "hand-written PTX (sm_90a): C = A @ B^T fp16 on 2-CTA clusters, B tile TMA-multicast, "
    "stage release by remote mbarrier arrives through mapa",
    Config(meta={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=3,
           num_ctas=2), verify_k=384)  # 6 k-blocks per tile: the 4-stage ring wraps

SPEC_GEMM_TC_SM100 = _ptr_gemm(
    "fast.ptx_gemm_tc_sm100", "gemm_cluster_kernel",
    "hand-written PTX (sm_100a): C = A @ B^T fp16 with tcgen05: TMEM accumulator, A copied "
    "into TMEM by tcgen05.cp, tcgen05.commit to mbarriers, tcgen05.ld epilogue",
    Config(meta={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=3))


@triton.jit
def gemm_splitk_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       SPLIT_K: tl.constexpr):
    pid = tl.program_id(axis=0)
    half = pid % SPLIT_K
    tile = pid // SPLIT_K
    n_n = tl.cdiv(N, BLOCK_N)
    pid_m = tile // n_n
    pid_n = tile % n_n
    n_k = tl.cdiv(K, BLOCK_K)
    per = tl.cdiv(n_k, SPLIT_K)
    k_lo = half * per
    k_hi = tl.minimum(n_k, k_lo + per)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(k_lo, k_hi):
        kk = kt * BLOCK_K + rk
        a = tl.load(a_ptr + rm.to(tl.int64)[:, None] * K + kk[None, :],
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rn.to(tl.int64)[None, :] * K + kk[:, None],
                    mask=(rn[None, :] < N) & (kk[:, None] < K), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.atomic_add(c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], acc,
                  mask=(rm[:, None] < M) & (rn[None, :] < N))


def splitk_reference(inputs, dims):
    """float64 reference: ``C = A @ B.T`` (the zero-filled C plus both halves)."""
    return _gemm_reference(inputs, dims)


_NORMAL = Distribution(kind="normal")

SPEC_GEMM_SPLITK_SM90 = KernelSpec(
    name="fast.ptx_gemm_splitk_sm90",
    description="hand-written PTX (sm_90a): split-K GEMM, fp16 in, fp32 C += partial tiles "
                "through TMA reductions (cp.reduce.async.bulk.tensor .add)",
    source=SourceRef(module=__name__, function="gemm_splitk_kernel"),
    params=(
        Param(name="a_ptr", kind="pointer", dtype="fp16", shape=("M", "K"), role="in",
              distribution=_NORMAL),
        Param(name="b_ptr", kind="pointer", dtype="fp16", shape=("N", "K"), role="in",
              distribution=_NORMAL),
        # the caller zero-fills C: both halves add into it
        Param(name="c_ptr", kind="pointer", dtype="fp32", shape=("M", "N"), role="out",
              init="zeros"),
        Param(name="M", kind="scalar", dtype="i32", value="M"),
        Param(name="N", kind="scalar", dtype="i32", value="N", divisibility=16),
        Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
        Param(name="BLOCK_M", kind="constexpr"),
        Param(name="BLOCK_N", kind="constexpr"),
        Param(name="BLOCK_K", kind="constexpr"),
        Param(name="SPLIT_K", kind="constexpr"),
    ),
    sizes=gemm_sizes(640),  # 5 k-blocks per half: the 4-stage ring wraps
    grid=("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) * SPLIT_K",),
    autotune=AutotuneSpace(configs=(Config(
        meta={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 2}, num_warps=8,
        num_stages=3),)),
    # fp16 products are exact in fp32; two fp32 partial sums of K / 2 terms each
    tolerances={"fp32": Tolerance(rtol=1e-3, atol=1e-3, max_norm_err=1e-4)},
    flops="2 * M * N * K", bytes="2 * (M + N) * K + 4 * M * N",
    flop_dtype="fp16", reference=f"{__name__}:splitk_reference",
)

SPEC_SOFTMAX_WS_SM90 = KernelSpec(
    name="fast.ptx_softmax_ws_sm90",
    description="hand-written PTX (sm_90a): row softmax fp16, producer warp with cp.async.bulk "
                "row loads, 2 consumer warpgroups, named-barrier slot hand-back",
    source=_softmax.SPEC.source, params=_softmax.SPEC.params, sizes=_softmax.SPEC.sizes,
    grid=("cdiv(M, ROWS)",),
    autotune=AutotuneSpace(configs=(Config(meta={"ROWS": 1}, num_warps=8, num_stages=1),)),
    tolerances=_softmax.SPEC.tolerances, flops=_softmax.SPEC.flops, bytes=_softmax.SPEC.bytes,
    reference=_softmax.SPEC.reference,
)
