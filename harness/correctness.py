"""Comparing a kernel's output with a reference: per-dtype tolerance plus a normalized-error bound.

An output passes when it has no NaN/Inf, every element satisfies
``|out - ref| <= atol + rtol * |ref|`` and ``||out - ref||_2 / ||ref||_2 <= max_norm_err``
(``kernels.spec.Tolerance``). NaN in the *reference* is never a wildcard: it fails too.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from kernels.spec import Tolerance

__all__ = ["ARBITRATION_FACTOR", "Arbitration", "CompareResult", "arbitrate", "compare"]


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


#: How much less accurate than the reference kernel a candidate may be, against float64, when the
#: two disagree at the bench size (count of elements outside the tolerance, and normalized error
#: up to one unit roundoff of the output dtype more). Chosen from measurements: two correct fp16
#: decodes that round once and twice differ by 236 of 33.5M elements at the bench size but are
#: equally close to float64 (bench/bitdelta_rounding.py); a bf16 rounding of an fp16 output is 8x
#: less accurate than Triton's.
ARBITRATION_FACTOR = 2.0


class Arbitration(BaseModel):
    """Float64 arbitration of one output on which a candidate and the reference kernel disagree at
    the bench size (where the harness compares the candidate with the reference kernel's output,
    never with float64 on every launch).

    Attributes:
        output: the output parameter's name.
        candidate: the candidate's output compared with the float64 reference.
        reference: the reference kernel's output compared with the float64 reference.
        unit_roundoff: half the machine epsilon of the output dtype (fp16: 2^-11).
        ok: the candidate is at least as close to float64 as the rule asks (see :func:`arbitrate`).
        reason: why not, in a few words ("" when ok).
    """

    model_config = ConfigDict(frozen=True)

    output: str
    candidate: CompareResult
    reference: CompareResult
    unit_roundoff: float
    ok: bool
    reason: str = ""


def arbitrate(name: str, out: np.ndarray, ref_kernel: np.ndarray, ref64: np.ndarray,
              tol: Tolerance) -> Arbitration:
    """Decide a bench-size disagreement between a candidate and the reference kernel by float64.

    Args:
        name: the output's name (for the record).
        out: the candidate's output, its own dtype (fp16, bf16, fp32, fp8 ...), any shape.
        ref_kernel: the reference kernel's output on the same inputs, same dtype and shape.
        ref64: the spec's float64 reference on the same inputs, same shape.
        tol: the output dtype's tolerance (``kernels.spec.Tolerance``).

    Returns:
        ``ok`` when the candidate has no more NaN/Inf values than the reference kernel and,
        compared with float64 under ``tol``, has no more than
        ``ARBITRATION_FACTOR`` times the reference kernel's count of elements outside the
        tolerance (so none when the reference kernel has none; non-finite values count), a
        normalized error at most ``ARBITRATION_FACTOR`` times the reference kernel's plus one unit
        roundoff of the dtype, and a normalized error within ``tol.max_norm_err``. Integer and
        other non-floating outputs are never arbitrated (they are compared exactly): ``ok`` False.

    Raises:
        ValueError: the shapes differ.
    """
    c = compare(out, ref64, tol)
    r = compare(ref_kernel, ref64, tol)
    try:
        u = float(np.finfo(out.dtype).eps) / 2      # fp16, bf16, fp32, fp8 (ml_dtypes) ...
        floating = True
    except ValueError:                               # integers, bool: not inexact
        u, floating = 0.0, False
    k = ARBITRATION_FACTOR
    reason = ""
    if not floating:
        reason = f"{out.dtype} output: compared exactly, not arbitrated"
    elif c.n_nonfinite > r.n_nonfinite:
        reason = (f"{c.n_nonfinite} NaN/Inf values in the output, the reference kernel "
                  f"{r.n_nonfinite}")
    elif c.n_bad > k * r.n_bad:
        reason = (f"{c.n_bad} elements outside the tolerance against float64, the reference "
                  f"kernel {r.n_bad}")
    elif not c.norm_err <= k * r.norm_err + u:
        reason = (f"normalized error against float64 {c.norm_err:.3g}, the reference kernel "
                  f"{r.norm_err:.3g} (allowed {k:g}x + {u:.3g})")
    elif not c.norm_err <= tol.max_norm_err:
        reason = f"normalized error against float64 {c.norm_err:.3g} > {tol.max_norm_err:g}"
    return Arbitration(output=name, candidate=c, reference=r, unit_roundoff=u, ok=not reason,
                       reason=reason)
