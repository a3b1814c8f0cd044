"""Element types: Triton's names, NumPy/ml_dtypes storage, and PTX parameter types.

Triton type strings are those of ``ASTSource`` signatures (``fp16``, ``bf16``, ``fp8e4nv``, ``i32``,
...; see ``triton/language/core.py``). NumPy storage for the 16- and 8-bit float types comes from
ml_dtypes. The PTX parameter type of a scalar kernel argument follows Triton's NVIDIA backend
(``triton/backends/nvidia/driver.py``: i1 and i32 are packed as 32-bit integers, fp16 as ``.b16``).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = ["DType", "DTYPES", "dtype", "UnknownDTypeError"]


class UnknownDTypeError(ValueError):
    """A dtype name is not one of :data:`DTYPES`."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}")

    def __reduce__(self):
        return (UnknownDTypeError, (self.name,))


@dataclass(frozen=True)
class DType:
    """One element type.

    Attributes:
        name: Triton's name (``fp16``).
        np: NumPy dtype used for host storage.
        itemsize: bytes per element.
        is_float: floating-point type (NaN/Inf checks and float tolerances apply).
        ptx_param: PTX ``.param`` type of a scalar argument of this type (``u32`` for i32).
    """

    name: str
    np: np.dtype
    itemsize: int
    is_float: bool
    ptx_param: str


def _d(name: str, npdt, ptx: str) -> DType:
    npdt = np.dtype(npdt)
    return DType(name, npdt, npdt.itemsize, npdt.kind == "f" or name.startswith(("fp", "bf")), ptx)


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        _d("fp64", np.float64, "f64"),
        _d("fp32", np.float32, "f32"),
        _d("fp16", np.float16, "b16"),
        _d("bf16", ml_dtypes.bfloat16, "b16"),
        _d("fp8e4nv", ml_dtypes.float8_e4m3fn, "b8"),
        _d("fp8e5", ml_dtypes.float8_e5m2, "b8"),
        _d("i1", np.bool_, "u32"),
        _d("i8", np.int8, "u32"),
        _d("i16", np.int16, "u32"),
        _d("i32", np.int32, "u32"),
        _d("i64", np.int64, "u64"),
        _d("u8", np.uint8, "u32"),
        _d("u16", np.uint16, "u32"),
        _d("u32", np.uint32, "u32"),
        _d("u64", np.uint64, "u64"),
    )
}
"""Every supported element type, by Triton name."""


def dtype(name: str) -> DType:
    """Look up a dtype by Triton name; raises :class:`UnknownDTypeError`."""
    try:
        return DTYPES[name]
    except KeyError:
        raise UnknownDTypeError(name) from None
