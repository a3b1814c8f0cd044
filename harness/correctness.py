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


def compare(out: np.ndarray, ref: np.ndarray, tol: Tolerance) -> CompareResult:
    """Compare ``out`` with ``ref`` (any numeric dtypes, same shape) under ``tol``.

    Raises:
        ValueError: the shapes differ.
    """
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch: output {out.shape} vs reference {ref.shape}")
    o = np.asarray(out, dtype=np.float64).ravel()
    r = np.asarray(ref, dtype=np.float64).ravel()
    fin_o, fin_r = np.isfinite(o), np.isfinite(r)
    n_nonfinite = int(o.size - np.count_nonzero(fin_o))
    n_ref_nonfinite = int(r.size - np.count_nonzero(fin_r))
    both = fin_o & fin_r
    diff = np.where(both, np.abs(o - r), np.inf)
    bad = diff > (tol.atol + tol.rtol * np.abs(np.where(fin_r, r, 0.0)))
    n_bad = int(np.count_nonzero(bad))
    finite_diff = diff[both]
    max_abs = float(finite_diff.max()) if finite_diff.size else 0.0
    dn = float(np.linalg.norm(np.where(both, o - r, 0.0)))
    rn = float(np.linalg.norm(np.where(fin_r, r, 0.0)))
    norm_err = dn / rn if rn > 0 else dn
    first = int(np.argmax(bad)) if n_bad else None
    reason = ""
    if n_ref_nonfinite:
        reason = f"reference has {n_ref_nonfinite} NaN/Inf values"
    elif n_nonfinite:
        reason = f"{n_nonfinite} NaN/Inf values in the output"
    elif n_bad:
        reason = (f"{n_bad} of {o.size} elements outside atol={tol.atol:g} + rtol={tol.rtol:g}*|ref|"
                  f" (max |err| {max_abs:.3g})")
    elif norm_err > tol.max_norm_err:
        reason = f"normalized error {norm_err:.3g} > {tol.max_norm_err:g}"
    return CompareResult(
        ok=not reason, n=int(o.size), n_nonfinite=n_nonfinite, n_ref_nonfinite=n_ref_nonfinite,
        n_bad=n_bad, max_abs_err=max_abs, norm_err=norm_err, first_bad=first,
        first_bad_values=(float(o[first]), float(r[first])) if first is not None else None,
        reason=reason)
