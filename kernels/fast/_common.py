"""Helpers shared by the ``fast`` family: tolerances, sizes, the tensordesc parameter builder and
the compile call every fast entry uses (tests, fixtures and the bench go through it).

Not a kernel module itself (the registry lists only kernel modules).
"""

from __future__ import annotations

import warnings
from typing import Any

from kernels.spec import Config, Distribution, KernelSpec, Param, Tolerance

__all__ = ["FP8_TOL", "FP16_TOL", "ARCH_CC", "compile_fast", "desc", "gemm_sizes"]

FP16_TOL = Tolerance(rtol=2e-3, atol=1e-2, max_norm_err=1e-3)
"""fp16 GEMM/attention outputs: exact fp16 products accumulated in fp32; the error is the final
fp16 rounding (2^-11 relative, IEEE 754 binary16) of values ~ sqrt(K)."""
FP8_TOL = Tolerance(rtol=1e-2, atol=5e-2, max_norm_err=5e-3)
"""fp8 operands: Hopper's fp8 wgmma keeps ~14 mantissa bits in its internal accumulation
(DeepSeek-V3 report, section 3.3.2), so the bound is looser than fp16's."""

ARCH_CC = {"sm_90a": 90, "sm_100a": 100}
"""The architectures the fast family targets -> Triton ``GPUTarget`` compute capability."""


def gemm_sizes(verify_k: int = 192) -> dict[str, dict[str, int]]:
    """GEMM sizes: verify M odd-tiled (320 = 2.5 tiles of 128: TMA clips the last tile), N and K
    multiples of 16 (the TMA stride alignment, PTX ISA §5.5.1 tensor-map strides are multiples of
    16 bytes); bench 8192^3. ``verify_k``: a kernel whose stage ring does not carry over from one
    tile to the next needs more k-blocks per tile than stages at the verify size, or a stage is
    never refilled there and a stage released too early (before the wgmma reading it retires)
    cannot show: the hand-written 4-stage ring kernels take 384 (6 blocks of 64) or, split in
    two, 640 (5 per half)."""
    return {"verify": {"M": 320, "N": 256, "K": verify_k},
            "bench": {"M": 8192, "N": 8192, "K": 8192}}


def desc(name: str, dtype: str, shape: tuple[str, ...], block: tuple[str, ...], role: str,
         distribution: Distribution | None = None) -> Param:
    """A host ``TensorDescriptor`` parameter over a contiguous row-major tensor of ``shape``
    (expressions over dims) loaded/stored in ``block`` tiles (expressions over meta)."""
    kw: dict[str, Any] = {"distribution": distribution} if distribution is not None else {}
    return Param(name=name, kind="tensordesc", dtype=dtype, shape=shape, role=role,
                 block_shape=block, **kw)


def compile_fast(spec: KernelSpec, arch: str, cfg: Config | None = None) -> tuple[str, int]:
    """Compile ``spec`` with the installed Triton for ``arch`` (``sm_90a`` / ``sm_100a``).

    Returns:
        (PTX text, threads per CTA as launched, worker partitions included).

    Raises:
        KeyError: ``arch`` is not in :data:`ARCH_CC`.
        triton.compiler.errors.CompilationError: Triton cannot compile it for ``arch``.
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    cfg = cfg or spec.configs()[0]
    src = ASTSource(fn=spec.source.load(), signature=spec.signature(cfg, "verify"),
                    constexprs=spec.constexprs(cfg, "verify"), attrs=spec.attrs())
    opts: dict[str, Any] = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages,
                            "num_ctas": cfg.num_ctas}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k = triton.compile(src, target=GPUTarget("cuda", ARCH_CC[arch], 32), options=opts)
    # warp-specialized kernels launch more warps than num_warps (the worker partitions):
    # Triton's metadata has the launched count (and the PTX says it in .reqntid)
    warps = int(getattr(k.metadata, "num_warps", cfg.num_warps) or cfg.num_warps)
    return k.asm["ptx"], 32 * warps
