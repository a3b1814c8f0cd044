"""Timing statistics and the roofline.

Times are milliseconds. The roofline time of a launch is ``max(bytes / copy_bandwidth,
flops / peak_flops)``; the roofline fraction is that over the measured median (1.0 = at the
roofline). The memory ceiling is the *measured* ``cuMemcpyDtoD`` bandwidth, which a streaming
kernel can beat by a few percent (seen on an H200: vector_add at 1.02), so only a fraction well
above 1 points at a bug or a cheat.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

__all__ = ["TimingStats", "stats", "roofline_fraction", "PEAK_TFLOPS", "paired_speedup",
           "ROOFLINE_BOUND"]

#: A candidate whose roofline fraction exceeds this is rejected as "faster than the hardware
#: allows". The memory ceiling is the measured ``cuMemcpyDtoD`` bandwidth, which streaming kernels
#: beat by up to ~2-3% (vector_add measured at 1.02 on an H200); the compute ceiling is the
#: datasheet peak, above any measured rate. 1.10 leaves room for both (issue 9).
ROOFLINE_BOUND = 1.10


class TimingStats(BaseModel):
    """Summary of repeated timings (ms)."""

    model_config = ConfigDict(frozen=True)

    n: int
    median_ms: float
    q1_ms: float
    q3_ms: float
    iqr_ms: float
    min_ms: float
    mean_ms: float


def stats(samples_ms: list[float] | np.ndarray) -> TimingStats:
    """Median, quartiles, IQR, min and mean of ``samples_ms``; raises ``ValueError`` when empty."""
    a = np.asarray(samples_ms, dtype=np.float64)
    if a.size == 0:
        raise ValueError("no timing samples")
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return TimingStats(n=int(a.size), median_ms=float(med), q1_ms=float(q1), q3_ms=float(q3),
                       iqr_ms=float(q3 - q1), min_ms=float(a.min()), mean_ms=float(a.mean()))


PEAK_TFLOPS: dict[str, dict[str, float]] = {
    # Dense tensor-core rates from NVIDIA's datasheets (H100/H200 SXM: fp16/bf16 989.4, fp8 1978.9,
    # tf32 494.7, fp32 non-tensor 66.9). Leads, not measurements; a measured rate replaces them.
    "NVIDIA H200": {"fp16": 989.4, "bf16": 989.4, "fp8e4nv": 1978.9, "fp8e5": 1978.9,
                    "fp32": 66.9},
    "NVIDIA H100 80GB HBM3": {"fp16": 989.4, "bf16": 989.4, "fp8e4nv": 1978.9, "fp8e5": 1978.9,
                              "fp32": 66.9},
}
"""Device name -> dtype -> dense peak TFLOP/s (NVIDIA datasheets)."""


def roofline_fraction(median_ms: float, flops: float, bytes_moved: float, copy_gbps: float,
                      peak_tflops: float | None) -> tuple[float, str]:
    """Roofline fraction of a launch and its bound.

    Args:
        median_ms: measured time, ms.
        flops: FLOPs of one launch.
        bytes_moved: minimum DRAM bytes of one launch.
        copy_gbps: measured device-to-device copy bandwidth (read + write), GB/s.
        peak_tflops: tensor/FP peak for the FLOP dtype, TFLOP/s (None: memory bound only).

    Returns:
        ``(fraction, "memory" | "compute")``.
    """
    t_mem = bytes_moved / (copy_gbps * 1e9) * 1e3 if copy_gbps > 0 else 0.0
    t_cmp = flops / (peak_tflops * 1e12) * 1e3 if peak_tflops and flops else 0.0
    bound = "compute" if t_cmp > t_mem else "memory"
    return (max(t_mem, t_cmp) / median_ms if median_ms > 0 else 0.0), bound


def paired_speedup(ref_ms: list[float] | np.ndarray, cand_ms: list[float] | np.ndarray
                   ) -> tuple[float, float, float]:
    """Speedup from interleaved pairs and its distribution-free 95% confidence interval.

    Each pair ``i`` gives ``ratio_i = ref_ms[i] / cand_ms[i]`` (timed back to back on the same
    inputs, so drift of clocks or memory state cancels). The estimate is the median ratio; the
    interval is the order-statistic interval of the median: ranks ``n/2 -+ 0.98 sqrt(n)``
    (normal approximation of the binomial, 1.96 / 2 = 0.98), which needs no assumption about the
    distribution and shrugs off outliers.

    Returns:
        ``(median, lo, hi)``; ``lo``/``hi`` are the median itself when fewer than 6 pairs.

    Raises:
        ValueError: different lengths, no pairs, or a non-positive time.
    """
    a, b = np.asarray(ref_ms, dtype=np.float64), np.asarray(cand_ms, dtype=np.float64)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"need equal, non-empty sample lists (got {a.size} and {b.size})")
    if np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("timing samples must be positive")
    r = np.sort(a / b)
    n = r.size
    med = float(np.median(r))
    if n < 6:
        return med, med, med
    half = 0.98 * np.sqrt(n)
    lo = int(np.floor(n / 2 - half))
    hi = int(np.ceil(n / 2 + half))
    return med, float(r[max(lo, 0)]), float(r[min(hi, n - 1)])
