"""The suite registry: the only list of suite kernels (name -> the module attribute holding its spec).

Names are ``kernel`` or ``kernel.variant`` (``gemm.fp8``, ``flash_attention.causal``): each variant
is its own :class:`KernelSpec` (dtype or masking changes the compiled kernel). Values are
``module`` (its ``SPEC``) or ``module:ATTRIBUTE``.

The 22 kernels of the study (``../shared/reference/anchors.md`` §1): 12 common ones (sigmoid, relu,
silu, swiglu, rmsnorm, rope, gemv, softmax, reduction_sum, conv2d, gemm, gemm_silu) and 10 from ML
papers (bitdelta, bitdelta_batched, flash_sinkhorn, sage_attention, flash_attention,
forgetting_attention, lion, dion_update, mamba2_chunk_state, mamba2_chunk_scan); plus the two
walking-skeleton kernels vector_add and matmul.
"""

from __future__ import annotations

import importlib

from kernels.spec import KernelSpec, SpecError

__all__ = ["COMMON", "FAMILIES", "FAST", "PAPERS", "SUITE", "all_specs", "base_name", "get", "names"]

_S = "kernels.suite."

SUITE: dict[str, str] = {
    "vector_add": _S + "vector_add",
    "softmax": _S + "softmax",
    "matmul": _S + "matmul",
    # common kernels
    "sigmoid.fp16": _S + "sigmoid:SPEC_FP16",
    "sigmoid.fp32": _S + "sigmoid:SPEC_FP32",
    "relu.fp16": _S + "relu:SPEC_FP16",
    "relu.fp32": _S + "relu:SPEC_FP32",
    "silu.fp16": _S + "silu:SPEC_FP16",
    "silu.fp32": _S + "silu:SPEC_FP32",
    "swiglu.fp16": _S + "swiglu:SPEC_FP16",
    "swiglu.fp32": _S + "swiglu:SPEC_FP32",
    "rmsnorm": _S + "rmsnorm",
    "rope": _S + "rope",
    "gemv": _S + "gemv",
    "reduction_sum": _S + "reduction_sum",
    "conv2d.fp16": _S + "conv2d:SPEC_FP16",
    "conv2d.fp8": _S + "conv2d:SPEC_FP8",
    "gemm.fp16": _S + "gemm:SPEC_FP16",
    "gemm.fp8": _S + "gemm:SPEC_FP8",
    "gemm_silu.fp16": _S + "gemm_silu:SPEC_FP16",
    "gemm_silu.fp8": _S + "gemm_silu:SPEC_FP8",
    # paper kernels
    "bitdelta": _S + "bitdelta",
    "bitdelta_batched": _S + "bitdelta_batched",
    "flash_sinkhorn": _S + "flash_sinkhorn",
    "sage_attention": _S + "sage_attention",
    "flash_attention.causal": _S + "flash_attention:SPEC_CAUSAL",
    "flash_attention.noncausal": _S + "flash_attention:SPEC_NONCAUSAL",
    "forgetting_attention": _S + "forgetting_attention",
    "lion": _S + "lion",
    "dion_update": _S + "dion_update",
    "mamba2_chunk_state": _S + "mamba2_chunk_state",
    "mamba2_chunk_scan": _S + "mamba2_chunk_scan",
}
"""Suite name -> ``module`` (defining ``SPEC``) or ``module:ATTRIBUTE``."""

_F = "kernels.fast."

FAST: dict[str, str] = {
    "fast.gemm_tma_persistent": _F + "gemm_tma:SPEC_PERSISTENT",
    "fast.gemm_ws": _F + "gemm_tma:SPEC_WS",
    "fast.gemm_device_desc": _F + "gemm_tma:SPEC_DEVICE_DESC",
    "fast.gemm_fp8": _F + "gemm_tma:SPEC_FP8",
    "fast.gemm_cluster": _F + "gemm_tma:SPEC_CLUSTER",
    "fast.gemm_mxfp8": _F + "dot_scaled:SPEC_MXFP8",
    "fast.gemm_mxfp4": _F + "dot_scaled:SPEC_MXFP4",
    "fast.attention_tma": _F + "attention_tma:SPEC_TMA",
    "fast.attention_ws": _F + "attention_tma:SPEC_WS",
    # hand-written PTX (kernels/fast/ptx/, kernels.fast.hand_ptx)
    "fast.ptx_gemm_ws_sm90": _F + "ptx_specs:SPEC_GEMM_WS_SM90",
    "fast.ptx_gemm_cluster_sm90": _F + "ptx_specs:SPEC_GEMM_CLUSTER_SM90",
    "fast.ptx_gemm_splitk_sm90": _F + "ptx_specs:SPEC_GEMM_SPLITK_SM90",
    "fast.ptx_gemm_tc_sm100": _F + "ptx_specs:SPEC_GEMM_TC_SM100",
    "fast.ptx_softmax_ws_sm90": _F + "ptx_specs:SPEC_SOFTMAX_WS_SM90",
}
"""The ``fast`` family (``kernels/fast/``): Hopper/Blackwell-feature kernels, the verifier's
false-alarm and mutation corpus (issue 18). Kept apart from :data:`SUITE` (``names()`` and
``all_specs()`` list the suite only unless asked for a family)."""

FAMILIES: tuple[str, ...] = ("suite", "common", "papers", "fast", "all")
"""Names ``names(family)`` accepts: the suite, its common / paper kernels, the fast family, all."""

COMMON: tuple[str, ...] = ("sigmoid", "relu", "silu", "swiglu", "rmsnorm", "rope", "gemv",
                           "softmax", "reduction_sum", "conv2d", "gemm", "gemm_silu")
"""The 12 common kernels of the study (base names)."""
PAPERS: tuple[str, ...] = ("bitdelta", "bitdelta_batched", "flash_sinkhorn", "sage_attention",
                           "flash_attention", "forgetting_attention", "lion", "dion_update",
                           "mamba2_chunk_state", "mamba2_chunk_scan")
"""The 10 ML-paper kernels of the study (base names)."""


def names(family: str = "suite") -> list[str]:
    """Kernel names (variants included) of ``family`` (one of :data:`FAMILIES`), in registry order.

    Raises:
        SpecError: an unknown family (the message lists them).
    """
    if family == "suite":
        return list(SUITE)
    if family in ("common", "papers"):
        bases = COMMON if family == "common" else PAPERS
        return [n for n in SUITE if base_name(n) in bases]
    if family == "fast":
        return list(FAST)
    if family == "all":
        return [*SUITE, *FAST]
    raise SpecError("family", f"no kernel family {family!r}; have: {', '.join(FAMILIES)}")


def base_name(name: str) -> str:
    """The kernel a suite name belongs to: ``gemm.fp8`` -> ``gemm``."""
    return name.split(".", 1)[0]


def get(name: str) -> KernelSpec:
    """The spec of suite kernel ``name`` (``gemm.fp8``; a base name with one variant works too).

    Raises:
        SpecError: no suite kernel has that name (the message lists them).
    """
    target = SUITE.get(name) or FAST.get(name)
    if target is None:
        raise SpecError("KERNEL", f"no suite kernel {name!r}; have: {', '.join([*SUITE, *FAST])}")
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr or "SPEC")


def all_specs(family: str = "suite") -> list[KernelSpec]:
    """Every spec of ``family`` (variants included; see :func:`names`), in registry order."""
    return [get(n) for n in names(family)]
