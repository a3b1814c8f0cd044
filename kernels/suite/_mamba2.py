"""Shared pieces of the two Mamba-2 SSD kernels: chunk length, distributions, float64 helpers."""

from __future__ import annotations

import numpy as np

from kernels.spec import Distribution

__all__ = ["A_LOG", "CHUNK", "DT", "SIZES", "chunk_cumsum64"]

CHUNK = 256
"""Chunk length Q (Mamba-2's default ``chunk_size``)."""
DT = Distribution(kind="uniform", low=0.01, high=0.1)
"""Per-token step sizes dt (after softplus), as in trained Mamba-2 models (dt_min/dt_max)."""
A_LOG = Distribution(kind="uniform", low=-1.0, high=-0.1)
"""Per-head decay rates A < 0."""
SIZES = {"verify": {"B": 1, "L": 512, "H": 3, "P": 64, "NS": 128},
         "bench": {"B": 4, "L": 8192, "H": 32, "P": 64, "NS": 128}}
"""verify: two chunks, three heads; bench: 4 x 8192 tokens, 32 heads of 64, state size 128
(x and the chunk states are 134 MB each)."""


def chunk_cumsum64(dt: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Inclusive within-chunk cumulative sum of dt * A: (B, H, L) -> (B, H, NC, CHUNK) float64."""
    b, h, length = dt.shape
    return np.cumsum((dt * a[None, :, None]).reshape(b, h, length // CHUNK, CHUNK), axis=-1)
