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

import functools
import importlib

from kernels.spec import KernelSpec, SpecError

__all__ = ["COMMON", "FAMILIES", "FAST", "PAPERS", "SPACES", "SUITE", "all_specs", "base_name",
           "default_space", "get", "names", "space_of"]

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


SPACES: tuple[str, ...] = ("wide", "narrow")
"""Autotune spaces a suite entry comes with: ``wide``, at least the usual Triton grid for its kind
(issue 22 item 6, ``kernels/suite/_spaces.py``), and ``narrow``, the hand-picked space of its
module's spec (kept, identity unchanged, to measure old and widened baselines side by side)."""


def default_space() -> str:
    """The space :func:`get` uses when none is given: ``AILOWER_AUTOTUNE_SPACE`` (``wide`` by
    default; the test suite sets ``narrow`` to keep its compile time flat). The environment is
    read on every call; a ``.env`` file (the settings' other source) once per working directory,
    as reading the settings costs ~15 ms and :func:`get` is called in loops.

    Raises:
        SpecError: the setting is not one of :data:`SPACES`.
    """
    import os

    space = os.environ.get("AILOWER_AUTOTUNE_SPACE")
    if space is None:
        space = _settings_space(os.getcwd())
    if space not in SPACES:
        raise SpecError("AILOWER_AUTOTUNE_SPACE",
                        f"{space!r} is not an autotune space; have: {', '.join(SPACES)}")
    return space


@functools.lru_cache(maxsize=8)
def _settings_space(cwd: str) -> str:
    from common.settings import get_settings

    del cwd  # the cache key: .env is read from the working directory
    return get_settings().autotune_space


def get(name: str, space: str | None = None) -> KernelSpec:
    """The spec of suite kernel ``name`` (``gemm.fp8``; a base name with one variant works too).

    Args:
        name: a suite or fast-family name.
        space: ``wide`` or ``narrow`` (:data:`SPACES`); None: :func:`default_space`. An entry
            that was never widened (the fast family) has one space, returned for both.

    Raises:
        SpecError: no suite kernel has that name (the message lists them), or an unknown space.
    """
    target = SUITE.get(name) or FAST.get(name)
    if target is None:
        raise SpecError("KERNEL", f"no suite kernel {name!r}; have: {', '.join([*SUITE, *FAST])}")
    space = space or default_space()
    if space not in SPACES:
        raise SpecError("space", f"{space!r} is not an autotune space; have: {', '.join(SPACES)}")
    return _wide(name) if space == "wide" else _module_spec(target)


def _module_spec(target: str) -> KernelSpec:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr or "SPEC")


@functools.lru_cache(maxsize=None)
def _wide(name: str) -> KernelSpec:
    """The module's spec with the widened space of ``kernels/suite/_spaces.py`` (validated, so
    every widened config evaluates at every size as the spec's own do)."""
    from kernels.suite._spaces import wide_space

    spec = _module_spec(SUITE.get(name) or FAST[name])
    wide = wide_space(name, spec.autotune)
    if wide is None:
        return spec
    return KernelSpec.model_validate({**{k: getattr(spec, k) for k in type(spec).model_fields},
                                      "autotune": wide.space})


def space_of(spec: KernelSpec) -> str | None:
    """``wide`` or ``narrow`` when ``spec`` is a suite entry's spec with that space (compared by
    identity), else None (a user's spec, or a suite spec with another space)."""
    target = SUITE.get(spec.name) or FAST.get(spec.name)
    if target is None:
        return None
    ident = spec.identity()
    for space in SPACES:
        if get(spec.name, space).identity() == ident:
            return space
    return None


def all_specs(family: str = "suite", space: str | None = None) -> list[KernelSpec]:
    """Every spec of ``family`` (variants included; see :func:`names`), in registry order, with
    autotune space ``space`` (None: :func:`default_space`)."""
    return [get(n, space) for n in names(family)]
