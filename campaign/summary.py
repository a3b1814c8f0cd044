"""The leaderboard's view of one finished cell, extracted once from the lowering's result.

Kept in ``campaign_cells.summary`` (JSON) so the leaderboard reads one row per cell; the full
``report.json`` stays in the linked ``runs`` row. Every number here comes from the run: times are
the interleaved A/B evaluation job of the best candidate (reference = the autotuned Triton config,
timed in the same job), in milliseconds; roofline fractions are the harness's (measured copy
bandwidth / measured or datasheet peak, see :mod:`harness.timing`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["cell_summary", "verifier_counts", "timing_of"]


def verifier_counts(ver: dict[str, Any] | None) -> tuple[int, int]:
    """``(errors, warnings)`` of one verifier report dict (``verifier.Report.to_dict()``)."""
    if not ver:
        return 0, 0
    counts = ver.get("counts")
    if isinstance(counts, dict):
        return int(counts.get("error", 0)), int(counts.get("warning", 0))
    fs = ver.get("findings") or []
    return (sum(1 for f in fs if f.get("severity") == "error"),
            sum(1 for f in fs if f.get("severity") == "warning"))


def timing_of(run: dict[str, Any] | None) -> dict[str, Any] | None:
    """Timing of one ``KernelRun`` dict: median, quartiles, IQR (ms), n, roofline fraction and
    bound; None when the kernel was not timed."""
    if not run or not run.get("timing"):
        return None
    t = run["timing"]
    return {"median_ms": t.get("median_ms"), "q1_ms": t.get("q1_ms"), "q3_ms": t.get("q3_ms"),
            "iqr_ms": t.get("iqr_ms"), "n": t.get("n"),
            "roofline_fraction": run.get("roofline_fraction"),
            "roofline_bound": run.get("roofline_bound")}


def cell_summary(result: Any, report: dict[str, Any], *, mode: str, static_reason: str | None,
                 usage: dict[str, int] | None = None,
                 price_per_mtok: tuple[float, float] | None = None) -> dict[str, Any]:
    """Summarise a lowering (:class:`agent.loop.LoweringResult` and its ``build_report``).

    Args:
        result: the loop's result (every iteration's verifier report is read from it).
        report: ``build_report(result)``.
        mode: ``gpu`` | ``static``.
        static_reason: why no GPU (static cells).
        usage: tokens the provider reported (``input_tokens``, ``output_tokens``).
        price_per_mtok: (input, output) USD per million tokens for the model, when known.

    Returns:
        a JSON-able dict: ``mode``, ``baseline`` (config, autotune median, timing in the
        evaluation job, the autotune ``space`` and its ``space_configs``), ``candidate`` (origin,
        iteration, verdict, timing), ``speedup`` and ``speedup_ci`` (its 95% interval, or None),
        ``pipeline`` (the pipeline-context timing of
        the best candidate, or None),
        ``valid``, ``seeds_checked``, ``verifier`` (errors/warnings of the best candidate and over
        every iteration), ``verdicts`` (count per verdict), ``provider_note`` (without a candidate:
        the provider's first error, e.g. ``none: no expert candidate ...``), ``tokens``,
        ``cost_usd``.
    """
    ref = report.get("reference") or {}
    base_cfg = (ref.get("baseline") or {}).get("config", "")
    autotune_ms = None
    for row in ref.get("autotune") or []:
        if str(row.get("config", "")).endswith(f"[{base_cfg}]"):
            autotune_ms = row.get("median_ms")
    best = result.best
    ev = report.get("evaluation") or {}
    kernels = ev.get("kernels") or []
    cand_run = next((k for k in kernels if k.get("role") == "candidate"), None)
    ref_run = next((k for k in kernels if k.get("role") == "reference"), None)
    seeds_ok = 0
    if cand_run:
        seeds_ok = sum(1 for c in cand_run.get("checks") or [] if c.get("ok"))
    all_err = all_warn = 0
    verdicts: dict[str, int] = {}
    for it in result.iterations:
        e, w = verifier_counts(it.verifier)
        all_err, all_warn = all_err + e, all_warn + w
        verdicts[it.verdict] = verdicts.get(it.verdict, 0) + 1
    best_err, best_warn = verifier_counts(best.verifier if best else None)
    tokens = {k: int(v) for k, v in (usage or {}).items()}
    cost = None
    if price_per_mtok is not None and tokens:
        cost = round((tokens.get("input_tokens", 0) * price_per_mtok[0]
                      + tokens.get("output_tokens", 0) * price_per_mtok[1]) / 1e6, 6)
    device = (ref.get("device") or {}).get("name") or ((ev.get("device") or {}).get("name"))
    return {
        "mode": mode,
        "static_reason": static_reason,
        "gpu_note": result.gpu_note,
        "device": device,
        "triton_version": ref.get("triton_version"),
        "baseline": {"config": base_cfg, "autotuned": bool((ref.get("baseline") or {})
                                                           .get("autotuned")),
                     "autotune_median_ms": autotune_ms, "timing": timing_of(ref_run),
                     "space": (ref.get("autotune_space") or {}).get("space"),
                     "space_configs": (ref.get("autotune_space") or {}).get("configs")},
        "candidate": None if best is None else {
            "origin": best.origin, "iteration": best.iteration, "verdict": best.verdict,
            "digest": best.candidate_digest, "timing": timing_of(cand_run)},
        "speedup": best.speedup if best else None,
        # the 95% interval of the paired speedup in the best candidate's evaluation job
        "speedup_ci": (list(ev["speedup_ci"]) if best is not None and ev.get("speedup_ci")
                       else None),
        "pipeline": report.get("pipeline"),
        "valid": best is not None,
        "seeds_checked": seeds_ok,
        "verifier": {"errors": best_err, "warnings": best_warn,
                     "errors_all_iterations": all_err, "warnings_all_iterations": all_warn},
        "iterations": len(result.iterations),
        "verdicts": verdicts,
        "stop_reason": result.stop_reason,
        # why a run without a candidate has none, in the provider's words (the expert
        # provider's "none: no expert candidate for K on ARCH"); None when there is a candidate
        "provider_note": None if best is not None else next(
            (it.provider_error for it in result.iterations if it.provider_error), None),
        "tokens": tokens,
        "cost_usd": cost,
    }
