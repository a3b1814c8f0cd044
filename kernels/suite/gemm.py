"""``gemm``: C = A @ B^T with A (M, K) and B (N, K) row-major (the ``nn.Linear`` layout), fp32
accumulation, fp16 C. Variants: ``gemm.fp16`` (fp16 A, B) and ``gemm.fp8`` (fp8 e4m3 A, B; sm_89+).

B is stored K-major, which is what wgmma needs for 8-bit operands (PTX ISA 9.0 §9.7.15.5.1:
".kind::f8 ... both matrices K-major"); tiles are walked in grouped order for L2 reuse.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, Distribution, KernelSpec, Param, SourceRef, Tolerance
from kernels.suite._common import cfg


@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
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
    # rows past M / N are clamped into range (their results are never stored)
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
    """float64 reference: ``C = A @ B.T`` with A (M, K), B (N, K)."""
    return {"c_ptr": inputs["a_ptr"] @ inputs["b_ptr"].T}


def _space(dt: str) -> AutotuneSpace:
    g = {"GROUP_M": 8}
    if dt == "fp16":
        return AutotuneSpace(configs=(
            cfg({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, **g}, 8, 3),
            cfg({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, **g}, 8, 4),
            cfg({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, **g}, 4, 4),
            cfg({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, **g}, 8, 3),
            cfg({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 64, **g}, 4, 4),
            cfg({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, **g}, 4, 4),
        ))
    return AutotuneSpace(configs=(
        cfg({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, **g}, 8, 3),
        cfg({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, **g}, 8, 4),
        cfg({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128, **g}, 4, 4),
        cfg({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 128, **g}, 8, 3),
        cfg({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 128, **g}, 4, 4),
        cfg({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 128, **g}, 4, 4),
    ))


# fp16: operand products are exact in fp32; the only real error is the final fp16 rounding
# (2^-11 of |C| ~ sqrt(K) ~ 14 at the verify size), so atol is set against that scale.
# fp8: Hopper's fp8 wgmma keeps ~14 mantissa bits in its internal accumulation (DeepSeek-V3
# report, §3.3.2), so the relative bound is looser.
TOLERANCES = {"fp16": Tolerance(rtol=2e-3, atol=1e-2, max_norm_err=1e-3),
              "fp8": Tolerance(rtol=1e-2, atol=5e-2, max_norm_err=5e-3)}


def vendor(name: str, inputs: dict, dims: dict[str, int]):
    """Vendor path (:mod:`harness.vendor`): cuBLAS through ``torch.matmul`` (fp16) or
    ``torch._scaled_mm`` with unit scales (fp8 e4m3; B^T is column-major, as it needs);
    ``inputs`` are torch tensors. Returns ``(description, run)``."""
    import torch

    a, b = inputs["a_ptr"], inputs["b_ptr"]
    if a.dtype == torch.float16:
        return "torch.matmul (cuBLAS)", lambda: {"c_ptr": torch.matmul(a, b.t())}
    one = torch.ones((), dtype=torch.float32, device=a.device)
    return "torch._scaled_mm (cuBLASLt fp8)", lambda: {"c_ptr": torch._scaled_mm(
        a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.float16)}


def make_spec(dt: str) -> KernelSpec:
    """The ``gemm.<dt>`` spec; ``dt`` is ``fp16`` or ``fp8`` (e4m3 operands)."""
    tdt = "fp16" if dt == "fp16" else "fp8e4nv"
    return KernelSpec(
        name=f"gemm.{dt}",
        description=f"C = A @ B^T (B is N x K), {'fp16' if dt == 'fp16' else 'fp8 e4m3'} in, "
                    "fp32 accumulate, fp16 out",
        source=SourceRef(module=__name__, function="gemm_kernel"),
        params=(
            Param(name="a_ptr", kind="pointer", dtype=tdt, shape=("M", "K"), role="in",
                  distribution=Distribution(kind="normal")),
            Param(name="b_ptr", kind="pointer", dtype=tdt, shape=("N", "K"), role="in",
                  distribution=Distribution(kind="normal")),
            Param(name="c_ptr", kind="pointer", dtype="fp16", shape=("M", "N"), role="out"),
            Param(name="M", kind="scalar", dtype="i32", value="M"),
            Param(name="N", kind="scalar", dtype="i32", value="N", divisibility=16),
            Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
            Param(name="BLOCK_M", kind="constexpr"),
            Param(name="BLOCK_N", kind="constexpr"),
            Param(name="BLOCK_K", kind="constexpr"),
            Param(name="GROUP_M", kind="constexpr"),
        ),
        # verify: M odd, N and K multiples of 16 but of no tile; bench: 8192^3, 1.1 TFLOP.
        sizes={"verify": {"M": 333, "N": 272, "K": 208},
               "bench": {"M": 8192, "N": 8192, "K": 8192}},
        grid=("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)",),
        autotune=_space(dt),
        tolerances={"fp16": TOLERANCES[dt]},
        flops="2 * M * N * K",
        bytes=f"{2 if dt == 'fp16' else 1} * (M * K + N * K) + 2 * M * N",
        flop_dtype=tdt,
        reference=f"{__name__}:reference",
    )


SPEC_FP16 = make_spec("fp16")
SPEC_FP8 = make_spec("fp8")
