"""Comparing a kernel's output with a reference: per-dtype tolerance plus a normalized-error bound.

An output passes when it has no NaN/Inf, every element satisfies
``|out - ref| <= atol + rtol * |ref|`` and ``||out - ref||_2 / ||ref||_2 <= max_norm_err``
(``kernels.spec.Tolerance``). NaN in the *reference* is never a wildcard: it fails too.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from kernels.spec import Tolerance

__all__ = ["CompareResult", "compare"]


class CompareResult(BaseModel):
    """The outcome of one comparison.

    Attributes:
        ok: passed every criterion.
        n: elements compared.
        n_nonfinite: NaN/Inf elements in the output.
        n_ref_nonfinite: NaN/Inf elements in the reference.
        n_bad: elements outside ``atol + rtol * |ref|``.
        max_abs_err: largest |out - ref| over finite elements.
        norm_err: ||out - ref|| / ||ref|| (||out - ref|| when ||ref|| is 0).
        first_bad: flat index of the first failing element, or None.
        first_bad_values: (out, ref) at ``first_bad``.
        reason: why it failed, in a few words ("" when ok).
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    n: int
    n_nonfinite: int
    n_ref_nonfinite: int
    n_bad: int
    max_abs_err: float
    norm_err: float
    first_bad: int | None = None
    first_bad_values: tuple[float, float] | None = None
    reason: str = ""


_CHUNK = 1 << 22


def compare(out: np.ndarray, ref: np.ndarray, tol: Tolerance) -> CompareResult:
    """Compare ``out`` with ``ref`` (any numeric dtypes, same shape) under ``tol``.

    Works in chunks of 4M elements (float64 math), so a 64M-element output needs no 1 GB
    temporaries; a bitwise-identical pair of same-dtype arrays takes a fast path.

    Raises:
        ValueError: the shapes differ.
    """
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch: output {out.shape} vs reference {ref.shape}")
    o_all, r_all = np.ascontiguousarray(out).ravel(), np.ascontiguousarray(ref).ravel()
    n = int(o_all.size)
    identical = o_all.dtype == r_all.dtype and np.array_equal(
        o_all.view(np.uint8), r_all.view(np.uint8))
    n_nonfinite = n_ref_nonfinite = n_bad = 0
    max_abs = 0.0
    dn2 = rn2 = 0.0
    first: int | None = None
    first_vals: tuple[float, float] | None = None
    for lo in range(0, max(n, 1), _CHUNK):
        o = o_all[lo:lo + _CHUNK].astype(np.float64)
        fin_o = np.isfinite(o)
        n_nonfinite += int(o.size - np.count_nonzero(fin_o))
        if identical:
            fin_r, r = fin_o, o
        else:
            r = r_all[lo:lo + _CHUNK].astype(np.float64)
            fin_r = np.isfinite(r)
        n_ref_nonfinite += int(r.size - np.count_nonzero(fin_r))
        r0 = np.where(fin_r, r, 0.0)
        rn2 += float(np.dot(r0, r0))
        if identical:
            continue
        both = fin_o & fin_r
        d = np.where(both, o - r, 0.0)
        dn2 += float(np.dot(d, d))
        ad = np.abs(d)
        if ad.size:
            max_abs = max(max_abs, float(ad.max()))
        bad = (ad > tol.atol + tol.rtol * np.abs(r0)) | ~both
        nb = int(np.count_nonzero(bad))
        if nb and first is None:
            i = int(np.argmax(bad))
            first, first_vals = lo + i, (float(o[i]), float(r[i]))
        n_bad += nb
    dn, rn = dn2 ** 0.5, rn2 ** 0.5
    norm_err = dn / rn if rn > 0 else dn
    reason = ""
    if n_ref_nonfinite:
        reason = f"reference has {n_ref_nonfinite} NaN/Inf values"
    elif n_nonfinite:
        reason = f"{n_nonfinite} NaN/Inf values in the output"
    elif n_bad:
        reason = (f"{n_bad} of {n} elements outside atol={tol.atol:g} + rtol={tol.rtol:g}*|ref|"
                  f" (max |err| {max_abs:.3g})")
    elif norm_err > tol.max_norm_err:
        reason = f"normalized error {norm_err:.3g} > {tol.max_norm_err:g}"
    return CompareResult(
        ok=not reason, n=n, n_nonfinite=n_nonfinite, n_ref_nonfinite=n_ref_nonfinite,
        n_bad=n_bad, max_abs_err=max_abs, norm_err=norm_err, first_bad=first,
        first_bad_values=first_vals, reason=reason)
