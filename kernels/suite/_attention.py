"""float64 attention references shared by the attention kernels of the suite."""

from __future__ import annotations

import numpy as np

__all__ = ["attention64"]


def attention64(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool,
                bias: np.ndarray | None = None) -> np.ndarray:
    """softmax(scale * q k^T + bias [+ causal mask]) v over the last two axes, float64.

    Args:
        q, k, v: (..., S, D) arrays.
        scale: score multiplier (1/sqrt(D)).
        causal: key j is visible to query i only when j <= i.
        bias: optional (..., S, S) additive score bias.

    Returns:
        (..., S, D) float64.
    """
    s = np.einsum("...id,...jd->...ij", q, k, optimize=True) * scale
    if bias is not None:
        s = s + bias
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("...ij,...jd->...id", p, v, optimize=True)
