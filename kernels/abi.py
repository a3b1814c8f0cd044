"""The kernel ABI: the exact PTX entry signature and launch contract a candidate must keep.

The ABI is the "I" of the lowering contract (kernel K, constexprs c, launch/ABI I, target h). It is
produced by the reference compile (``harness``) from Triton's PTX and metadata, and read by the
verifier (entry check) and the GPU launcher (argument packing).

Triton's NVIDIA backend passes the non-constexpr arguments in order and then always appends two
pointers, ``global_scratch`` and ``profile_scratch`` (NULL when their size is 0); see
``triton/backends/nvidia/driver.py`` (``make_launcher``) and ``../shared/reference/triton_toolchain.md``
section 7.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ABIParam", "KernelABI", "ParamSource", "TensorMapLayout"]

ParamSource = Literal["pointer", "scalar", "tensordesc", "global_scratch", "profile_scratch"]


class ABIParam(BaseModel):
    """One ``.param`` of the PTX entry.

    Attributes:
        name: the PTX parameter name (``add_kernel_param_3``).
        ptx_type: PTX type without the dot (``u64``, ``u32``, ``f32``, ``b16``, ``b8``).
        size: bytes occupied (array parameters: element size x count, e.g. 128 for a CUtensorMap).
        align: ``.align`` in bytes, or None when not declared.
        is_pointer: declared with ``.ptr`` (or a ``u64`` the spec says is a pointer).
        source: what the launcher passes: a spec pointer/scalar, a tensor descriptor piece, or one of
            the two scratch pointers Triton appends.
        spec_param: the KernelSpec parameter this comes from, or None for scratch pointers.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    ptx_type: str
    size: int = Field(gt=0)
    align: int | None = None
    is_pointer: bool = False
    source: ParamSource
    spec_param: str | None = None

    def signature(self) -> str:
        """Canonical text of the declared type, e.g. ``.u64 .ptr`` or ``.align 64 .b8[128]``."""
        parts = []
        if self.align is not None and self.source == "tensordesc":
            parts.append(f".align {self.align}")
        base = f".{self.ptx_type}"
        elem = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
                "b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}
        per = elem.get(self.ptx_type, self.size)
        if self.size != per:
            base += f"[{self.size // per}]"
        parts.append(base)
        if self.is_pointer:
            parts.append(".ptr")
        return " ".join(parts)


class TensorMapLayout(BaseModel):
    """How the launcher encodes one host tensor descriptor's CUtensorMap: Triton's
    ``metadata.tensordesc_meta[i]`` for the i-th tensordesc parameter (the compiled kernel's TMA
    instructions assume exactly this box and swizzle; the Python block shape may differ, e.g. a
    [128, 128] fp16 store descriptor gets a [128, 64] box under the 128-byte swizzle).

    Attributes:
        spec_param: the KernelSpec tensordesc parameter.
        swizzle: ``CUtensorMapSwizzle`` value (0 none, 1 32B, 2 64B, 3 128B; CUDA driver API
            ``cuTensorMapEncodeTiled``).
        elem_size: bytes per element.
        elem_type: the *host* ``CUtensorMapDataType`` value (Triton's device enum already mapped
            with :data:`harness._triton_compat.TMA_DTYPE_DEVICE_TO_HOST`).
        box: the TMA box in elements, outermost dimension first (Triton's ``block_size``).
        fp4_padded: Triton's fp4-padded layout (two fp4 values per byte padded to one each).
    """

    model_config = ConfigDict(frozen=True)

    spec_param: str
    swizzle: int = Field(ge=0, le=6)
    elem_size: int = Field(gt=0)
    elem_type: int = Field(ge=0, le=15)
    box: tuple[int, ...]
    fp4_padded: bool = False


class KernelABI(BaseModel):
    """The entry signature and launch contract of one compiled kernel configuration.

    Attributes:
        entry: the ``.entry`` name.
        params: the ``.param`` list, in order, including the appended scratch pointers.
        threads: threads per CTA (``.reqntid`` = 32 x num_warps for Triton kernels).
        num_ctas: CTAs per cluster (1 without clusters); the grid's x extent is multiplied by it.
        dynamic_smem: dynamic shared memory in bytes (Triton's ``metadata.shared``).
        global_scratch_size: bytes of global scratch per CTA (0: pass NULL).
        global_scratch_align: required alignment of the global scratch buffer, bytes.
        profile_scratch_size: bytes of profile scratch per CTA (0: pass NULL).
        tmem_size: tensor-memory columns the kernel allocates (sm_100a; 0 elsewhere).
        arch: the target, e.g. ``sm_90a``.
        tensor_maps: one :class:`TensorMapLayout` per tensordesc parameter lowered to TMA, in
            parameter order (empty without tensor descriptors).
    """

    model_config = ConfigDict(frozen=True)

    entry: str
    params: tuple[ABIParam, ...]
    threads: int = Field(gt=0, le=1024)
    num_ctas: int = Field(default=1, ge=1)
    dynamic_smem: int = Field(default=0, ge=0)
    global_scratch_size: int = Field(default=0, ge=0)
    global_scratch_align: int = Field(default=1, ge=1)
    profile_scratch_size: int = Field(default=0, ge=0)
    tmem_size: int = Field(default=0, ge=0)
    arch: str
    tensor_maps: tuple[TensorMapLayout, ...] = ()

    def signature_text(self) -> str:
        """The entry signature as one readable line (for prompts and diagnostics)."""
        ps = ", ".join(f"{p.signature()} {p.name}" for p in self.params)
        return f".visible .entry {self.entry}({ps})"


SMEM_PER_BLOCK_OPTIN: dict[str, int] = {
    "sm_80": 163 * 1024,
    "sm_89": 99 * 1024,
    "sm_90a": 227 * 1024,
    "sm_100a": 227 * 1024,
}
"""Most shared memory one CTA may use (static + dynamic, with the opt-in), bytes, per target.

Source: CUDA C++ Programming Guide, "Technical Specifications per Compute Capability", row
"Maximum amount of shared memory per thread block": 163 KB for 8.0, 99 KB for 8.9, 227 KB for 9.0
and 10.0 (1 KB of each SM's 164/100/228 KB is reserved for the system). Observed on the H200:
``CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`` = 232,448 B = 227 KiB
(``../shared/reference/triton_toolchain.md`` header)."""
