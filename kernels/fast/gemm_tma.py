"""TMA GEMMs of the ``fast`` family: C = A @ B^T (A is M x K, B is N x K, both K-major) with
fp32 accumulation, written with Triton's Hopper/Blackwell features.

* ``fast.gemm_tma_persistent`` -- host ``TensorDescriptor`` arguments, a persistent tile loop
  (``tl.range(start, tiles, NUM_SMS, flatten=True)``): TMA loads into an mbarrier ring, wgmma on
  sm_90a / tcgen05 on sm_100a, TMA store of C.
* ``fast.gemm_ws`` -- the same with ``warp_specialize=True``: a producer partition issuing TMA and
  consumer partitions issuing the MMAs, synchronised through "empty"/"ready" mbarriers and named
  barriers.
* ``fast.gemm_device_desc`` -- device-side descriptors (``tl.make_tensor_descriptor``: the kernel
  writes a 128-byte CUtensorMap into global scratch with ``tensormap.replace`` and fences it with
  ``tensormap.cp_fenceproxy`` before the TMA loads).
* ``fast.gemm_fp8`` -- fp8 e4m3 operands through host descriptors (fp8 wgmma on sm_90a,
  ``tcgen05.mma .kind::f8f6f4`` on sm_100a).
* ``fast.gemm_cluster`` -- ``num_ctas=2``: a 2-CTA cluster per program (``barrier.cluster``).
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.fast._common import FP8_TOL, FP16_TOL, desc, gemm_sizes
from kernels.spec import AutotuneSpace, Config, Distribution, KernelSpec, Param, SourceRef


@triton.jit
def gemm_tma_persistent_kernel(a_desc, b_desc, c_desc, M, N, K,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, NUM_SMS: tl.constexpr):
    pid = tl.program_id(axis=0)
    n_m = tl.cdiv(M, BLOCK_M)
    n_n = tl.cdiv(N, BLOCK_N)
    n_k = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, n_m * n_n, NUM_SMS, flatten=True):
        pid_m = tile // n_n
        pid_n = tile % n_n
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(n_k):
            a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, kk * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@triton.jit
def gemm_ws_kernel(a_desc, b_desc, c_desc, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   NUM_SMS: tl.constexpr):
    pid = tl.program_id(axis=0)
    n_m = tl.cdiv(M, BLOCK_M)
    n_n = tl.cdiv(N, BLOCK_N)
    n_k = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, n_m * n_n, NUM_SMS, flatten=True, warp_specialize=True):
        pid_m = tile // n_n
        pid_n = tile % n_n
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(n_k):
            a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, kk * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@triton.jit
def gemm_device_desc_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            NUM_SMS: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                       block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    pid = tl.program_id(axis=0)
    n_m = tl.cdiv(M, BLOCK_M)
    n_n = tl.cdiv(N, BLOCK_N)
    n_k = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(pid, n_m * n_n, NUM_SMS, flatten=True):
        pid_m = tile // n_n
        pid_n = tile % n_n
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(n_k):
            a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, kk * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))


@triton.jit
def gemm_cluster_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(axis=0)
    n_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // n_n
    pid_n = pid % n_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rm % M).to(tl.int64)[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + (rn % N).to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: ``C = A @ B.T`` with A (M, K), B (N, K); the output is the third tensor
    (``c_desc`` or ``c_ptr``)."""
    a = inputs.get("a_desc", inputs.get("a_ptr"))
    b = inputs.get("b_desc", inputs.get("b_ptr"))
    out = "c_desc" if "a_desc" in inputs else "c_ptr"
    return {out: a @ b.T}


_NORMAL = Distribution(kind="normal")
_META = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "NUM_SMS": 4}


def _desc_gemm(name: str, function: str, description: str, dt: str = "fp16",
               block_k: int = 64) -> KernelSpec:
    tdt = "fp16" if dt == "fp16" else "fp8e4nv"
    meta = {**_META, "BLOCK_K": block_k}
    return KernelSpec(
        name=name, description=description,
        source=SourceRef(module=__name__, function=function),
        params=(
            desc("a_desc", tdt, ("M", "K"), ("BLOCK_M", "BLOCK_K"), "in", _NORMAL),
            desc("b_desc", tdt, ("N", "K"), ("BLOCK_N", "BLOCK_K"), "in", _NORMAL),
            desc("c_desc", "fp16", ("M", "N"), ("BLOCK_M", "BLOCK_N"), "out"),
            Param(name="M", kind="scalar", dtype="i32", value="M"),
            Param(name="N", kind="scalar", dtype="i32", value="N", divisibility=16),
            Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
            Param(name="BLOCK_M", kind="constexpr"),
            Param(name="BLOCK_N", kind="constexpr"),
            Param(name="BLOCK_K", kind="constexpr"),
            Param(name="NUM_SMS", kind="constexpr"),
        ),
        sizes=gemm_sizes(), grid=("NUM_SMS",),
        autotune=AutotuneSpace(configs=(Config(meta=meta, num_warps=4, num_stages=3),)),
        tolerances={"fp16": FP16_TOL if dt == "fp16" else FP8_TOL},
        flops="2 * M * N * K", bytes=f"{2 if dt == 'fp16' else 1} * (M + N) * K + 2 * M * N",
        flop_dtype=tdt, reference=f"{__name__}:reference",
    )


SPEC_PERSISTENT = _desc_gemm(
    "fast.gemm_tma_persistent", "gemm_tma_persistent_kernel",
    "C = A @ B^T, fp16, host TMA descriptors, persistent tile loop")
SPEC_WS = _desc_gemm(
    "fast.gemm_ws", "gemm_ws_kernel",
    "C = A @ B^T, fp16, host TMA descriptors, persistent warp-specialized tile loop")
SPEC_FP8 = _desc_gemm(
    "fast.gemm_fp8", "gemm_tma_persistent_kernel",
    "C = A @ B^T, fp8 e4m3 in, fp16 out, host TMA descriptors, persistent", dt="fp8", block_k=128)


def _ptr_gemm(name: str, function: str, description: str, cfg: Config,
              verify_k: int = 192) -> KernelSpec:
    """A pointer-ABI fp16 GEMM spec ``C = A @ B^T`` over :func:`gemm_sizes` (``verify_k``: its
    verify-size K)."""
    return KernelSpec(
        name=name, description=description,
        source=SourceRef(module=__name__, function=function),
        params=(
            Param(name="a_ptr", kind="pointer", dtype="fp16", shape=("M", "K"), role="in",
                  distribution=_NORMAL),
            Param(name="b_ptr", kind="pointer", dtype="fp16", shape=("N", "K"), role="in",
                  distribution=_NORMAL),
            Param(name="c_ptr", kind="pointer", dtype="fp16", shape=("M", "N"), role="out"),
            Param(name="M", kind="scalar", dtype="i32", value="M"),
            Param(name="N", kind="scalar", dtype="i32", value="N", divisibility=16),
            Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
            *(Param(name=n, kind="constexpr") for n in cfg.meta),
        ),
        sizes=gemm_sizes(verify_k),
        grid=("NUM_SMS",) if "NUM_SMS" in cfg.meta else ("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)",),
        autotune=AutotuneSpace(configs=(cfg,)),
        tolerances={"fp16": FP16_TOL},
        flops="2 * M * N * K", bytes="2 * (M + N) * K + 2 * M * N",
        flop_dtype="fp16", reference=f"{__name__}:reference",
    )


SPEC_DEVICE_DESC = _ptr_gemm(
    "fast.gemm_device_desc", "gemm_device_desc_kernel",
    "C = A @ B^T, fp16, device-side tl.make_tensor_descriptor, persistent",
    Config(meta=_META, num_warps=4, num_stages=3))
SPEC_CLUSTER = _ptr_gemm(
    "fast.gemm_cluster", "gemm_cluster_kernel",
    "C = A @ B^T, fp16, num_ctas=2 (a 2-CTA cluster per program)",
    Config(meta={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, num_warps=4, num_stages=3,
           num_ctas=2))
