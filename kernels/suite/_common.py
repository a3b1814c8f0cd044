"""Helpers shared by the suite modules: config shorthands and the elementwise spec builder.

Not a suite kernel itself (the registry lists only kernel modules); every kernel module keeps its
``@triton.jit`` source self-contained so the agent sees the whole kernel in one file.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernels.spec import (
    AutotuneSpace,
    Config,
    Distribution,
    KernelSpec,
    Param,
    SourceRef,
    Tolerance,
)

__all__ = ["ELEMENTWISE_SIZES", "FP16_TOL", "FP32_TOL", "cfg", "elementwise_spec"]

FP16_TOL = Tolerance(rtol=2e-3, atol=1e-5, max_norm_err=1e-3)
"""fp16 outputs computed in fp32: one fp16 rounding is 2^-11 = 4.9e-4 relative (IEEE 754 binary16)."""
FP32_TOL = Tolerance(rtol=1e-5, atol=1e-6, max_norm_err=1e-5)
"""fp32 outputs: a few ulp of fp32 (2^-24 = 6e-8) plus MUFU ex2.approx's 2^-22 relative error
(PTX ISA 9.0 §9.7.4.9 ``ex2``)."""

ELEMENTWISE_SIZES: dict[str, dict[str, dict[str, int]]] = {
    # verify: 2^16 + 16 (a multiple of 16, of no block: tests the mask).
    # bench: 512 MB moved per launch for one input (>= 4 x the H200's 60 MB L2 ... 8x).
    "fp16": {"verify": {"N": 65_552}, "bench": {"N": 1 << 27}},
    "fp32": {"verify": {"N": 65_552}, "bench": {"N": 1 << 26}},
}
"""Problem sizes of the one-input elementwise kernels per dtype (two-input ones halve ``N``)."""


def cfg(meta: dict[str, int], warps: int, stages: int) -> Config:
    """A :class:`Config` with ``meta`` and the given ``num_warps`` / ``num_stages``."""
    return Config(meta=meta, num_warps=warps, num_stages=stages)


def elementwise_spec(*, name: str, module: str, function: str, dt: str, inputs: tuple[str, ...],
                     description: str, flops_per_elem: int,
                     distribution: Distribution | None = None) -> KernelSpec:
    """A KernelSpec for ``f(inputs...) -> out_ptr`` over flat vectors of ``N`` elements.

    Args:
        name: suite name including the variant (``sigmoid.fp16``).
        module, function: where the ``@triton.jit`` kernel is; its signature must be
            ``(*inputs, out_ptr, n_elements, BLOCK_SIZE)``.
        dt: ``fp16`` or ``fp32`` (every tensor has this dtype).
        inputs: input pointer names, in order.
        description: one line.
        flops_per_elem: FLOPs per element (for the record; these kernels are memory-bound).
        distribution: the inputs' distribution (normal(0, 2) by default: spans both tails of
            sigmoid/SiLU and both signs for ReLU).

    Raises:
        KeyError: ``dt`` is not fp16/fp32.
    """
    distribution = distribution or Distribution(kind="normal", std=2.0)
    sizes = ELEMENTWISE_SIZES[dt]
    if len(inputs) > 1:  # keep the bytes moved per launch about the same
        sizes = {k: {"N": v["N"] if k == "verify" else v["N"] // 2} for k, v in sizes.items()}
    itemsize = 2 if dt == "fp16" else 4
    params = tuple(Param(name=n, kind="pointer", dtype=dt, shape=("N",), role="in",
                         distribution=distribution) for n in inputs) + (
        Param(name="out_ptr", kind="pointer", dtype=dt, shape=("N",), role="out"),
        Param(name="n_elements", kind="scalar", dtype="i32", value="N", divisibility=16),
        Param(name="BLOCK_SIZE", kind="constexpr"),
    )
    return KernelSpec(
        name=name, description=description,
        source=SourceRef(module=module, function=function), params=params, sizes=sizes,
        grid=("cdiv(N, BLOCK_SIZE)",),
        autotune=AutotuneSpace(meta={"BLOCK_SIZE": (1024, 2048, 4096, 8192)}, num_warps=(4, 8),
                               num_stages=(1,)),
        tolerances={"fp16": FP16_TOL, "fp32": FP32_TOL},
        flops=f"{flops_per_elem} * N", bytes=f"{itemsize * (len(inputs) + 1)} * N",
        reference=f"{module}:reference")


def silu64(x: np.ndarray) -> np.ndarray:
    """float64 SiLU, ``x * sigmoid(x)``, stable for large |x|."""
    return x / (1.0 + np.exp(-x))


RefFn = Callable[[dict[str, np.ndarray], dict[str, int]], dict[str, np.ndarray]]
