"""PTX types as numpy dtypes, immediates, rounding helpers.

Sources: PTX ISA 9.1 §5.2 (fundamental types), §4.5.1 (constants: ``0f``/``0d`` hex floats),
§9.7.3 (floating-point rounding modifiers ``.rn/.rz/.rm/.rp``, ``.ftz``, ``.sat``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = ["NP", "UINT", "float_type", "imm_bits", "round_f64_to", "ftz32", "sat01"]

#: PTX type -> numpy dtype of its value (packed types are their bit containers).
NP: dict[str, np.dtype] = {
    "b8": np.dtype(np.uint8), "u8": np.dtype(np.uint8), "s8": np.dtype(np.int8),
    "b16": np.dtype(np.uint16), "u16": np.dtype(np.uint16), "s16": np.dtype(np.int16),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
    "b32": np.dtype(np.uint32), "u32": np.dtype(np.uint32), "s32": np.dtype(np.int32),
    "f32": np.dtype(np.float32), "tf32": np.dtype(np.float32),
    "f16x2": np.dtype(np.uint32), "bf16x2": np.dtype(np.uint32),
    "b64": np.dtype(np.uint64), "u64": np.dtype(np.uint64), "s64": np.dtype(np.int64),
    "f64": np.dtype(np.float64), "f32x2": np.dtype(np.uint64),
    "e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "e4m3x2": np.dtype(np.uint16), "e5m2x2": np.dtype(np.uint16),
    "pred": np.dtype(np.bool_),
}

#: width in bytes -> unsigned container dtype
UINT: dict[int, np.dtype] = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16),
                             4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}

_FLOATS = {"f16", "bf16", "f32", "f64", "tf32", "e4m3", "e5m2"}


def float_type(t: str) -> bool:
    """True for scalar floating-point PTX types."""
    return t in _FLOATS


def imm_bits(text: str, value: int | float | None, t: str) -> np.ndarray:
    """A 0-d array of PTX type ``t`` for an immediate written as ``text``.

    ``0fXXXXXXXX`` / ``0dXXXXXXXXXXXXXXXX`` are raw IEEE bits (PTX ISA 9.1 §4.5.1); integers are
    taken modulo 2**width for bit/unsigned types; a decimal written for a float type is converted.
    """
    dt = NP.get(t, np.dtype(np.uint32))
    tl = text.lower().lstrip("+")
    neg = tl.startswith("-")
    body = tl[1:] if neg else tl
    if body.startswith(("0f", "0d")) and len(body) in (10, 18):
        bits = int(body[2:], 16)
        src = np.array(bits, dtype=np.uint32 if body[1] == "f" else np.uint64)
        f = src.view(np.float32 if body[1] == "f" else np.float64)
        if neg:
            f = -f
        if dt.kind == "f" or t in ("bf16", "e4m3", "e5m2"):
            return np.array(f.astype(np.float64), dtype=np.float64).astype(dt)
        # bit type: keep the raw bits at the operand width
        raw = (-f if False else f).view(src.dtype)
        return np.array(int(raw) & ((1 << (8 * dt.itemsize)) - 1), dtype=np.uint64).astype(
            UINT[dt.itemsize]).view(dt)
    if isinstance(value, float) or dt.kind == "f" or t in ("bf16", "e4m3", "e5m2"):
        return np.array(float(value if value is not None else 0), dtype=np.float64).astype(dt)
    if dt == np.bool_:
        return np.array(bool(value))
    v = int(value if value is not None else 0)
    w = 8 * dt.itemsize
    return np.array(v & ((1 << w) - 1), dtype=np.uint64).astype(UINT[dt.itemsize]).view(dt)


def round_f64_to(x: np.ndarray, dt: np.dtype, mode: str = "rn") -> np.ndarray:
    """Round float64 ``x`` to float dtype ``dt`` with PTX rounding ``mode`` (rn, rz, rm, rp).

    numpy's cast is round-to-nearest-even; the directed modes step one ulp with ``nextafter``
    when the nearest value lies on the wrong side.
    """
    x = np.asarray(x, dtype=np.float64)
    r = x.astype(dt)
    if mode in ("rn", "rni", None, ""):
        return r
    back = r.astype(np.float64)
    if dt in (np.float32, np.float16, np.float64):
        if mode in ("rz", "rzi"):
            fix = np.abs(back) > np.abs(x)
            tgt = np.zeros_like(r)
        elif mode in ("rm", "rmi"):
            fix = back > x
            tgt = np.full_like(r, -np.inf)
        else:
            fix = back < x
            tgt = np.full_like(r, np.inf)
        fix &= np.isfinite(x)
        return np.where(fix, np.nextafter(r, tgt), r)
    return r


def ftz32(x: np.ndarray) -> np.ndarray:
    """Flush float32 subnormals to sign-preserving zero (``.ftz``)."""
    tiny = np.abs(x) < np.float32(1.1754944e-38)
    return np.where(tiny & (x != 0), np.copysign(np.float32(0), x), x).astype(x.dtype)


def sat01(x: np.ndarray) -> np.ndarray:
    """``.sat`` for floats: clamp to [0, 1], NaN -> 0 (PTX ISA 9.1 §9.7.3)."""
    y = np.clip(x, 0, 1)
    return np.where(np.isnan(y), np.zeros_like(y), y)
