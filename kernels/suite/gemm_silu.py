"""``gemm_silu``: C = silu(A @ B^T + bias), A (M, K), B (N, K) row-major, bias (N,) fp32,
fp32 accumulation and epilogue, fp16 C. Variants ``gemm_silu.fp16`` and ``gemm_silu.fp8``
(e4m3 operands, sm_89+). The fused GEMM + activation of an MLP's first projection.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import Distribution, KernelSpec, Param, SourceRef
from kernels.suite._common import silu64
from kernels.suite.gemm import TOLERANCES, _space


@triton.jit
def gemm_silu_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
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
    a_ptrs = a_ptr + (rm % M).to(tl.int64)[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + (rn % N).to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)
    z = acc + bias[None, :]
    y = z / (1.0 + tl.exp(-z))
    c_ptrs = c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(c_ptrs, y.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: ``silu(A @ B.T + bias)`` with A (M, K), B (N, K), bias (N,)."""
    z = inputs["a_ptr"] @ inputs["b_ptr"].T + inputs["bias_ptr"][None, :]
    return {"c_ptr": silu64(z)}


def vendor(name: str, inputs: dict, dims: dict[str, int]):
    """Vendor path (:mod:`harness.vendor`): cuBLAS GEMM with the bias (``F.linear`` for fp16,
    ``torch._scaled_mm`` with unit scales and an fp16 bias for fp8), then ``F.silu`` (a second
    kernel); ``inputs`` are torch tensors. Returns ``(description, run)``."""
    import torch
    import torch.nn.functional as F

    a, b = inputs["a_ptr"], inputs["b_ptr"]
    bias = inputs["bias_ptr"].to(torch.float16)
    if a.dtype == torch.float16:
        return "F.linear (cuBLAS) + F.silu", lambda: {"c_ptr": F.silu(F.linear(a, b, bias))}
    one = torch.ones((), dtype=torch.float32, device=a.device)
    return "torch._scaled_mm (cuBLASLt fp8, bias) + F.silu", lambda: {"c_ptr": F.silu(
        torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, bias=bias,
                         out_dtype=torch.float16))}


def make_spec(dt: str) -> KernelSpec:
    """The ``gemm_silu.<dt>`` spec; ``dt`` is ``fp16`` or ``fp8`` (e4m3 operands)."""
    tdt = "fp16" if dt == "fp16" else "fp8e4nv"
    return KernelSpec(
        name=f"gemm_silu.{dt}",
        description=f"C = silu(A @ B^T + bias), {'fp16' if dt == 'fp16' else 'fp8 e4m3'} in, "
                    "fp32 accumulate, fp16 out",
        source=SourceRef(module=__name__, function="gemm_silu_kernel"),
        params=(
            Param(name="a_ptr", kind="pointer", dtype=tdt, shape=("M", "K"), role="in"),
            Param(name="b_ptr", kind="pointer", dtype=tdt, shape=("N", "K"), role="in"),
            Param(name="bias_ptr", kind="pointer", dtype="fp32", shape=("N",), role="in",
                  distribution=Distribution(kind="normal", std=4.0)),
            Param(name="c_ptr", kind="pointer", dtype="fp16", shape=("M", "N"), role="out"),
            Param(name="M", kind="scalar", dtype="i32", value="M"),
            Param(name="N", kind="scalar", dtype="i32", value="N", divisibility=16),
            Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
            Param(name="BLOCK_M", kind="constexpr"),
            Param(name="BLOCK_N", kind="constexpr"),
            Param(name="BLOCK_K", kind="constexpr"),
            Param(name="GROUP_M", kind="constexpr"),
        ),
        sizes={"verify": {"M": 333, "N": 272, "K": 208},
               "bench": {"M": 8192, "N": 8192, "K": 8192}},
        grid=("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)",),
        autotune=_space(dt),
        tolerances={"fp16": TOLERANCES[dt]},
        flops="2 * M * N * K + 5 * M * N",
        bytes=f"{2 if dt == 'fp16' else 1} * (M * K + N * K) + 2 * M * N + 4 * N",
        flop_dtype=tdt,
        reference=f"{__name__}:reference",
    )


SPEC_FP16 = make_spec("fp16")
SPEC_FP8 = make_spec("fp8")
