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
* ``fast.ptx_softmax_ws_sm90`` -- row softmax fp16, the ABI of the suite's ``softmax`` kernel;
  the grid is ``cdiv(M, ROWS)`` programs: the Triton baseline takes ``ROWS`` = 1 (one row per
  program), the hand-written kernel 16 rows per CTA (its launch meta).
"""

from __future__ import annotations

from kernels.fast.gemm_tma import _ptr_gemm
from kernels.spec import AutotuneSpace, Config, KernelSpec
from kernels.suite import softmax as _softmax

__all__ = ["SPEC_GEMM_CLUSTER_SM90", "SPEC_GEMM_TC_SM100", "SPEC_GEMM_WS_SM90",
           "SPEC_SOFTMAX_WS_SM90"]

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
           num_ctas=2))

SPEC_GEMM_TC_SM100 = _ptr_gemm(
    "fast.ptx_gemm_tc_sm100", "gemm_cluster_kernel",
    "hand-written PTX (sm_100a): C = A @ B^T fp16 with tcgen05: TMEM accumulator, A copied "
    "into TMEM by tcgen05.cp, tcgen05.commit to mbarriers, tcgen05.ld epilogue",
    Config(meta={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=3))

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
