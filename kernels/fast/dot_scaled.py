"""Block-scaled GEMMs (``fast`` family): C = (A * 2^(sa-127)) @ (B * 2^(sb-127))^T with
per-32-element E8M0 scales along K (OCP Microscaling Formats v1.0, section 5), through
``tl.dot_scaled`` and host TMA descriptors. On sm_100a this is ``tcgen05.mma .kind::mxf8f6f4``
/ ``.kind::mxf4`` with ``.block_scale`` and scales in TMEM (``tcgen05.cp``); sm_90a has no
block-scaled MMA, so Triton lowers it to scaled fp16/bf16 wgmma there.

* ``fast.gemm_mxfp8`` -- A and B fp8 e4m3.
* ``fast.gemm_mxfp4`` -- A and B fp4 e2m1, two values per byte (low nibble first, the OCP
  packing Triton uses), K/2 bytes per row.

Scales are stored (rows, K / 32) as uint8 biased exponents, drawn in [124, 130) (factors
1/8 ... 4): the fp16 output must stay finite at the bench size too. With [124, 131) the mxfp4
bench output (K = 8192, std ~9450) had one element past fp16's 65504 (measured on the H200: one
Inf, largest finite 65120), which the harness's per-launch output check rightly refuses; with
[124, 130) the std is ~2750, below 1/20 of the fp16 range.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.fast._common import desc
from kernels.spec import (AutotuneSpace, Config, Distribution, KernelSpec, Param, SourceRef,
                          Tolerance)


@triton.jit
def gemm_mx_kernel(a_desc, b_desc, c_desc, a_scale, b_scale, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   FP4: tl.constexpr, PACK: tl.constexpr):
    pid = tl.program_id(axis=0)
    n_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // n_n
    pid_n = pid % n_n
    SK: tl.constexpr = BLOCK_K // 32
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rs = tl.arange(0, SK)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k0 // PACK])
        b = b_desc.load([pid_n * BLOCK_N, k0 // PACK])
        sa = tl.load(a_scale + (rm % M)[:, None] * (K // 32) + k0 // 32 + rs[None, :])
        sb = tl.load(b_scale + (rn % N)[:, None] * (K // 32) + k0 // 32 + rs[None, :])
        if FP4:
            acc = tl.dot_scaled(a, sa, "e2m1", b.T, sb, "e2m1", acc)
        else:
            acc = tl.dot_scaled(a, sa, "e4m3", b.T, sb, "e4m3", acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))


_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                  -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
"""FP4 E2M1 code -> value (OCP MX v1.0, table 5)."""


def _unpack_e2m1(x: np.ndarray) -> np.ndarray:
    """(R, K/2) bytes (as float64 codes) -> (R, K) float64 values, low nibble first."""
    b = x.astype(np.int64)
    out = np.empty((b.shape[0], 2 * b.shape[1]))
    out[:, 0::2] = _E2M1[b & 0xF]
    out[:, 1::2] = _E2M1[b >> 4]
    return out


def _scaled(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Multiply (R, K) by 2^(s - 127) broadcast over groups of 32 along K (s: (R, K/32))."""
    return x * np.repeat(np.exp2(s - 127.0), 32, axis=1)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: dequantise both operands with their E8M0 scales, then A @ B^T. fp4
    operands arrive as their byte codes (uint8 upcast to float64) and are decoded here."""
    a, b = inputs["a_desc"], inputs["b_desc"]
    if a.shape[1] * 2 == dims["K"]:
        a, b = _unpack_e2m1(a), _unpack_e2m1(b)
    return {"c_desc": _scaled(a, inputs["a_scale"]) @ _scaled(b, inputs["b_scale"]).T}


_SCALES = Distribution(kind="randint", low=124, high=130)


def _spec(fmt: str) -> KernelSpec:
    fp4 = fmt == "e2m1"
    dt = "u8" if fp4 else "fp8e4nv"
    kcols = "K / 2" if fp4 else "K"
    kblock = "BLOCK_K / 2" if fp4 else "BLOCK_K"
    values = Distribution(kind="randint", low=0, high=256) if fp4 else Distribution(kind="normal")
    return KernelSpec(
        name=f"fast.gemm_{'mxfp4' if fp4 else 'mxfp8'}",
        description=f"C = A @ B^T, {'mxfp4 (e2m1)' if fp4 else 'mxfp8 (e4m3)'} operands with "
                    "per-32 E8M0 scales (tl.dot_scaled), host TMA descriptors, fp16 out",
        source=SourceRef(module=__name__, function="gemm_mx_kernel"),
        params=(
            desc("a_desc", dt, ("M", kcols), ("BLOCK_M", kblock), "in", values),
            desc("b_desc", dt, ("N", kcols), ("BLOCK_N", kblock), "in", values),
            desc("c_desc", "fp16", ("M", "N"), ("BLOCK_M", "BLOCK_N"), "out"),
            Param(name="a_scale", kind="pointer", dtype="u8", shape=("M", "K / 32"), role="in",
                  distribution=_SCALES),
            Param(name="b_scale", kind="pointer", dtype="u8", shape=("N", "K / 32"), role="in",
                  distribution=_SCALES),
            Param(name="M", kind="scalar", dtype="i32", value="M", divisibility=16),
            Param(name="N", kind="scalar", dtype="i32", value="N", divisibility=16),
            Param(name="K", kind="scalar", dtype="i32", value="K", divisibility=16),
            Param(name="BLOCK_M", kind="constexpr"),
            Param(name="BLOCK_N", kind="constexpr"),
            Param(name="BLOCK_K", kind="constexpr"),
            Param(name="FP4", kind="constexpr", value=fp4),
            Param(name="PACK", kind="constexpr", value=2 if fp4 else 1),
        ),
        # verify: M, N multiples of the tile (the scale loads are unmasked), K = 2 k-steps.
        sizes={"verify": {"M": 256, "N": 256, "K": 256},
               "bench": {"M": 8192, "N": 8192, "K": 8192}},
        grid=("cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)",),
        autotune=AutotuneSpace(configs=(Config(
            meta={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 128},
            num_warps=4, num_stages=3),)),
        # fp8/fp4 inputs are exact in the MMA; products of scaled values are accumulated in
        # fp32; the fp16 output rounding (2^-11) of values ~ sqrt(K) * 16 dominates.
        tolerances={"fp16": Tolerance(rtol=5e-3, atol=5e-2, max_norm_err=2e-3)},
        flops="2 * M * N * K", bytes=f"({'0.5' if fp4 else '1'}) * (M + N) * K + 2 * M * N",
        flop_dtype="fp8e4nv", reference=f"{__name__}:reference",
    )


SPEC_MXFP8 = _spec("e4m3")
SPEC_MXFP4 = _spec("e2m1")
