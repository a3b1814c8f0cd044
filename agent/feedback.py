"""Feedback a model can act on: the text of a GPU evaluation, with roofline headroom and profiles.

:func:`eval_feedback` renders one :class:`~harness.results.EvalResult` (tool ``evaluate`` and
the turn's outcome): correctness per seed, the timings and speedup, then for the candidate and the
baseline **both** roofline fractions (compute = achieved FLOP/s over the device's peak for the
spec's FLOP dtype; memory = achieved bytes/s, from the spec's byte formula, over the measured
device-to-device copy bandwidth), which bound is closer, and, where Nsight Compute ran
(:mod:`harness.profile`), a metrics table with candidate and baseline side by side. Where ncu or
its counters were unavailable the text says so and gives the rest.

Every function is pure: the same result gives the same text.
"""

from __future__ import annotations

from typing import Any

from harness.profile import NCU_METRICS, NcuReport
from harness.results import EvalResult, KernelRun

__all__ = ["roofline_fractions", "roofline_lines", "ncu_table", "eval_feedback"]


def roofline_fractions(run: KernelRun, device: Any) -> tuple[float | None, float | None]:
    """``(compute_fraction, memory_fraction)`` of one timed run.

    Args:
        run: a timed :class:`KernelRun` (``achieved_tflops``, ``achieved_gbps`` from the
            spec's FLOP and byte formulas at the bench size).
        device: the :class:`~harness.results.DeviceSummary` (``peak_tflops``: datasheet peak
            for the FLOP dtype, ``harness.timing.PEAK_TFLOPS``; ``copy_gbps``: measured).

    Returns:
        Each fraction in [0, inf) or None where its numerator or ceiling is unknown (no FLOPs
        declared, no peak for this device, not timed).
    """
    comp = mem = None
    peak = getattr(device, "peak_tflops", None) if device is not None else None
    copy = getattr(device, "copy_gbps", 0.0) if device is not None else 0.0
    if run.achieved_tflops is not None and peak:
        comp = run.achieved_tflops / peak
    if run.achieved_gbps is not None and copy:
        mem = run.achieved_gbps / copy
    return comp, mem


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def roofline_lines(run: KernelRun, device: Any, who: str) -> str:
    """One line: ``<who>: compute 12.3% of peak, memory 81.0% of copy bandwidth; closer bound:
    memory``."""
    comp, mem = roofline_fractions(run, device)
    if comp is None and mem is None:
        return f"  roofline {who}: not timed"
    bound = "memory" if (comp or 0.0) <= (mem or 0.0) else "compute"
    return (f"  roofline {who}: compute {_pct(comp)} of peak FLOP/s, memory {_pct(mem)} of the "
            f"measured copy bandwidth; closer bound: {bound}")


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) >= 1000 or v == int(v):
        return f"{v:,.0f}"
    return f"{v:.2f}"


def ncu_table(cand: NcuReport, base: NcuReport) -> str:
    """The Nsight Compute metrics of candidate and baseline side by side (a fixed set,
    :data:`harness.profile.NCU_METRICS`, then the top three warp-stall reasons of each).

    Returns:
        A small text table, or one line ``ncu unavailable for <who>: <reason>`` per report that
        has no metrics (with the other's table when it has them).
    """
    out: list[str] = []
    missing = [(who, r) for who, r in (("candidate", cand), ("baseline", base)) if not r.available]
    if len(missing) == 2 and cand.reason == base.reason:
        out.append(f"  {_unavailable(cand.reason)}")
    else:
        out += [f"  {_unavailable(r.reason, who)}" for who, r in missing]
    if len(missing) == 2:
        return "\n".join(out)
    rows = [("metric", "candidate", "baseline")]
    for m, label in NCU_METRICS.items():
        a = cand.metrics.get(m) if cand.available else None
        b = base.metrics.get(m) if base.available else None
        if a is None and b is None:
            continue
        rows.append((label, _fmt(a), _fmt(b)))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    out.append("  Nsight Compute (one bench-size launch, --clock-control none):")
    for a, b, c in rows:
        out.append(f"    {a:<{w0}}  {b:>{w1}}  {c:>{w1}}".rstrip())
    for who, r in (("candidate", cand), ("baseline", base)):
        if r.available:
            top = r.stalls(3)
            out.append(f"    top warp stalls ({who}, per issued instruction): "
                       + (", ".join(f"{n} {v:.2f}" for n, v in top) or "none"))
    return "\n".join(out)


def _unavailable(reason: str, who: str = "") -> str:
    text = reason.removeprefix("ncu unavailable: ")
    return f"ncu unavailable{' for the ' + who if who else ''}: {text}"


def eval_feedback(res: EvalResult, profiles: tuple[NcuReport, NcuReport] | None = None,
                  profile_note: str = "") -> str:
    """The text of one GPU evaluation for the model.

    Args:
        res: the ``evaluate`` job's result (reference and candidate runs).
        profiles: ``(candidate, baseline)`` ncu reports, or None when profiling did not run.
        profile_note: why profiling did not run (shown when ``profiles`` is None and the
            candidate was timed).

    Returns:
        Correctness per seed, timings and speedup, both roofline fractions of candidate and
        baseline with the closer bound, and the ncu table (or why there is none).
    """
    if res.status in ("hang", "crash"):
        return f"GPU evaluation: {res.status.upper()}: {res.message}"
    if res.status == "error":
        return f"GPU evaluation could not run (harness error): {res.message[:500]}"
    c = res.candidate
    if c is None:
        return "GPU evaluation: no candidate result"
    lines = [f"GPU evaluation on {res.device.name if res.device else 'GPU'}: candidate {c.status}"
             + (f": {c.message}" if c.message else "")]
    for chk in c.checks:
        for name, cmp in chk.vs_reference.items():
            lines.append(f"  seed {'(secret)' if chk.secret else chk.seed} {name} vs Triton: "
                         f"max|err| {cmp.max_abs_err:.3g}, normalized {cmp.norm_err:.3g}"
                         + ("" if cmp.ok else f" FAIL ({cmp.reason})"))
    for a in c.arbitration:
        lines.append(f"  bench size {a.output}: differs from Triton's output; vs float64: candidate "
                     f"{a.candidate.n_bad} elements outside tolerance, normalized "
                     f"{a.candidate.norm_err:.3g}; Triton {a.reference.n_bad}, normalized "
                     f"{a.reference.norm_err:.3g}: "
                     + ("accepted by float64 arbitration" if a.ok else f"not accepted ({a.reason})"))
    ref = next((k for k in res.kernels if k.role == "reference"), None)
    if c.timing and ref and ref.timing:
        lines.append(f"  time: candidate {c.timing.median_ms:.4f} ms (IQR {c.timing.iqr_ms:.4f}), "
                     f"reference {ref.timing.median_ms:.4f} ms"
                     + (f"; speedup {res.speedup:.3f}x" if res.speedup else "")
                     + (f" (95% CI {res.speedup_ci[0]:.3f}-{res.speedup_ci[1]:.3f})"
                        if res.speedup_ci else ""))
        lines.append(roofline_lines(c, res.device, "candidate"))
        lines.append(roofline_lines(ref, res.device, "baseline"))
        if profiles is not None:
            lines.append(ncu_table(*profiles))
        elif profile_note:
            lines.append(f"  {profile_note}")
    if c.registers is not None:
        lines.append(f"  registers {c.registers}, static smem {c.static_smem} B, local "
                     f"{c.local_bytes} B")
    return "\n".join(lines)
