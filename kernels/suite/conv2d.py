"""``conv2d``: 3x3 convolution, stride 1, padding 1, NHWC activations, as an implicit GEMM.

x (NB, H, W, C), w (CO, 3, 3, C) (filters K-major), out (NB, H, W, CO):
out[n, h, w, co] = sum_{r, s, c} x[n, h + r - 1, w + s - 1, c] * w[co, r, s, c] (zero outside).
GEMM view: M = NB*H*W output pixels, N = CO, K = 9*C; the A tile is gathered per (r, s) with the
halo masked. fp32 accumulation, fp16 out. Variants ``conv2d.fp16`` and ``conv2d.fp8`` (e4m3
x and w, sm_89+).
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, KernelSpec, Param, SourceRef, Tolerance
from kernels.suite._common import cfg


@triton.jit
def conv2d_kernel(x_ptr, w_ptr, out_ptr, NB, H, W, C, CO,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    M = NB * H * W
    n_m = tl.cdiv(M, BLOCK_M)
    n_n = tl.cdiv(CO, BLOCK_N)
    per_group = GROUP_M * n_n
    group = pid // per_group
    m0 = group * GROUP_M
    rows_in_group = min(n_m - m0, GROUP_M)
    pid_m = m0 + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < M
    ow = rm % W
    oh = (rm // W) % H
    nb = rm // (W * H)
    w_rows = w_ptr + (rn % CO).to(tl.int64)[None, :] * (9 * C) + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for rs in range(9):
        ih = oh + (rs // 3 - 1)
        iw = ow + (rs % 3 - 1)
        pix_ok = m_ok & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        pix = ((nb * H + ih) * W + iw).to(tl.int64) * C
        for c0 in range(0, C, BLOCK_K):
            kmask = rk < C - c0
            a = tl.load(x_ptr + pix[:, None] + c0 + rk[None, :],
                        mask=pix_ok[:, None] & kmask[None, :], other=0.0)
            b = tl.load(w_rows + rs * C + c0, mask=kmask[:, None], other=0.0)
            acc = tl.dot(a, b, acc)
    out_ptrs = out_ptr + rm.to(tl.int64)[:, None] * CO + rn[None, :]
    tl.store(out_ptrs, acc.to(tl.float16), mask=m_ok[:, None] & (rn[None, :] < CO))


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: 3x3, stride 1, pad 1 convolution of x (NB, H, W, C) with
    w (CO, 3, 3, C), NHWC out (NB, H, W, CO)."""
    x, w = inputs["x_ptr"], inputs["w_ptr"]
    nb, h, wd, _ = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((nb, h, wd, w.shape[0]))
    for r in range(3):
        for s in range(3):
            out += np.einsum("nhwc,oc->nhwo", xp[:, r:r + h, s:s + wd, :], w[:, r, s, :],
                             optimize=True)
    return {"out_ptr": out}


def _space(dt: str) -> AutotuneSpace:
    bk = 64 if dt == "fp16" else 128
    g = {"GROUP_M": 8}
    return AutotuneSpace(configs=(
        cfg({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": bk, **g}, 8, 3),
        cfg({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": bk, **g}, 4, 4),
        cfg({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": bk, **g}, 8, 3),
        cfg({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": bk, **g}, 8, 3),
        cfg({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": bk, **g}, 4, 4),
        cfg({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": bk // 2, **g}, 4, 4),
    ))


def vendor(name: str, inputs: dict, dims: dict[str, int]):
    """Vendor path (:mod:`harness.vendor`): cuDNN through ``F.conv2d`` (padding 1) on
    channels-last views of the NHWC tensors (no copies: x (NB, H, W, C) viewed as NCHW
    channels-last, w (CO, 3, 3, C) as OIHW channels-last; the channels-last output viewed back as
    NHWC). Returns ``(description, run)``; None for fp8 (torch has no fp8 convolution)."""
    import torch
    import torch.nn.functional as F

    x, w = inputs["x_ptr"], inputs["w_ptr"]
    if x.dtype != torch.float16:
        return None                 # no fp8 convolution through torch
    xc, wc = x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2)
    return "F.conv2d (cuDNN, channels-last)", lambda: {
        "out_ptr": F.conv2d(xc, wc, padding=1).permute(0, 2, 3, 1)}


def make_spec(dt: str) -> KernelSpec:
    """The ``conv2d.<dt>`` spec; ``dt`` is ``fp16`` or ``fp8`` (e4m3 x and w)."""
    tdt = "fp16" if dt == "fp16" else "fp8e4nv"
    isz = 2 if dt == "fp16" else 1
    # outputs have std sqrt(9 C) ~ 21 at the verify size; fp16 output rounding dominates for fp16,
    # Hopper's reduced-precision fp8 accumulation for fp8 (see gemm.py)
    tol = (Tolerance(rtol=2e-3, atol=1e-2, max_norm_err=1e-3) if dt == "fp16"
           else Tolerance(rtol=1e-2, atol=5e-2, max_norm_err=5e-3))
    return KernelSpec(
        name=f"conv2d.{dt}",
        description=f"3x3 conv, stride 1, pad 1, NHWC, implicit GEMM, "
                    f"{'fp16' if dt == 'fp16' else 'fp8 e4m3'} in, fp32 accumulate, fp16 out",
        source=SourceRef(module=__name__, function="conv2d_kernel"),
        params=(
            Param(name="x_ptr", kind="pointer", dtype=tdt, shape=("NB", "H", "W", "C"), role="in"),
            Param(name="w_ptr", kind="pointer", dtype=tdt, shape=("CO", 3, 3, "C"), role="in"),
            Param(name="out_ptr", kind="pointer", dtype="fp16", shape=("NB", "H", "W", "CO"),
                  role="out"),
            Param(name="NB", kind="scalar", dtype="i32", value="NB"),
            Param(name="H", kind="scalar", dtype="i32", value="H"),
            Param(name="W", kind="scalar", dtype="i32", value="W"),
            Param(name="C", kind="scalar", dtype="i32", value="C", divisibility=16),
            Param(name="CO", kind="scalar", dtype="i32", value="CO", divisibility=16),
            Param(name="BLOCK_M", kind="constexpr"),
            Param(name="BLOCK_N", kind="constexpr"),
            Param(name="BLOCK_K", kind="constexpr"),
            Param(name="GROUP_M", kind="constexpr"),
        ),
        # verify: odd spatial sizes, C and CO multiples of 16 but of no tile (tests every mask);
        # bench: a ResNet-like 64x64x256 -> 256 layer at batch 64: 309 GFLOP, x and out 134 MB
        # each in fp16
        sizes={"verify": {"NB": 2, "H": 9, "W": 11, "C": 48, "CO": 80},
               "bench": {"NB": 64, "H": 64, "W": 64, "C": 256, "CO": 256}},
        grid=("cdiv(NB * H * W, BLOCK_M) * cdiv(CO, BLOCK_N)",),
        autotune=_space(dt),
        tolerances={"fp16": tol},
        flops="2 * NB * H * W * CO * 9 * C",
        bytes=f"{isz} * (NB * H * W * C + CO * 9 * C) + 2 * NB * H * W * CO",
        flop_dtype=tdt,
        reference=f"{__name__}:reference",
    )


SPEC_FP16 = make_spec("fp16")
SPEC_FP8 = make_spec("fp8")
