"""``mamba2_chunk_scan``: the chunk-scan output of Mamba-2's SSD algorithm (Dao & Gu,
"Transformers are SSMs", ICML 2024, §6, the "chunk scan" step).

For token t in chunk c, head h, with cs the inclusive within-chunk cumsum of dt * A_h:
  y[b, t, h, p] = exp(cs_t) * sum_n C[b, t, n] * prev[b, c, h, p, n]
               + sum_{s in c, s <= t} (C_t . B_s) * exp(cs_t - cs_s) * dt_s * x[b, s, h, p]
i.e. y = C state_prev decay + (C B^T ⊙ L) x within the chunk. x (B, L, H, P) fp16, B and C
(B, L, NS) fp16 (one group), dt (B, H, L) fp32, A (H,) fp32, prev (B, L/Q, H, P, NS) fp32 (the
states entering each chunk); y (B, L, H, P) fp16. The kernel computes C B^T per tile, builds cs
from dt and A, and rounds the weighted scores and the states to fp16 for ``tl.dot``.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, KernelSpec, Param, SourceRef, Tolerance
from kernels.suite._common import cfg
from kernels.suite._mamba2 import A_LOG, CHUNK, DT, SIZES, chunk_cumsum64


@triton.jit
def mamba2_chunk_scan_kernel(x_ptr, b_ptr, c_ptr, dt_ptr, a_ptr, prev_ptr, y_ptr, L, H, P,
                             NS: tl.constexpr, CHUNK: tl.constexpr, BLOCK_M: tl.constexpr,
                             BLOCK_P: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(axis=0)
    c = tl.program_id(axis=1)
    bh = tl.program_id(axis=2)
    bi = bh // H
    h = bh % H
    n_p = tl.cdiv(P, BLOCK_P)
    m0 = (pid // n_p) * BLOCK_M
    rm = m0 + tl.arange(0, BLOCK_M)
    rp = (pid % n_p) * BLOCK_P + tl.arange(0, BLOCK_P)
    rk = tl.arange(0, BLOCK_K)
    rs = tl.arange(0, NS)
    pmask = rp < P
    a = tl.load(a_ptr + h)
    t0 = c * CHUNK
    tok = bi.to(tl.int64) * L + t0
    dt_base = dt_ptr + bh.to(tl.int64) * L + t0
    # cumulative dt up to and including each of this tile's rows
    q = tl.arange(0, CHUNK)
    before = tl.sum(tl.where(q < m0, tl.load(dt_base + q), 0.0), axis=0)
    cs_m = a * (before + tl.cumsum(tl.load(dt_base + rm), axis=0))
    # inter-chunk term: exp(cs_t) * C_t . prev[p, :]
    cm = tl.load(c_ptr + (tok + rm[:, None]) * NS + rs[None, :])
    n_chunks = L // CHUNK
    prev = tl.load(prev_ptr + (((bi * n_chunks + c) * H + h).to(tl.int64) * P + rp[None, :]) * NS
                   + rs[:, None], mask=pmask[None, :], other=0.0)
    acc = tl.dot(cm, prev.to(tl.float16)) * tl.exp(cs_m)[:, None]
    # intra-chunk term, keys s <= t
    prefix = before * 0.0
    for k0 in range(0, m0 + BLOCK_M, BLOCK_K):
        sk = k0 + rk
        dt = tl.load(dt_base + sk)
        cs_k = a * (prefix + tl.cumsum(dt, axis=0))
        prefix += tl.sum(dt, axis=0)
        bt = tl.load(b_ptr + (tok + sk[None, :]) * NS + rs[:, None])
        cb = tl.dot(cm, bt)
        causal = sk[None, :] <= rm[:, None]
        decay = tl.exp(tl.where(causal, cs_m[:, None] - cs_k[None, :], -float("inf")))
        w = (cb * decay * dt[None, :]).to(tl.float16)
        xs = tl.load(x_ptr + (tok + sk[:, None]) * H * P + h * P + rp[None, :],
                     mask=pmask[None, :], other=0.0)
        acc = tl.dot(w, xs, acc)
    y_ptrs = y_ptr + (tok + rm[:, None]) * H * P + h * P + rp[None, :]
    tl.store(y_ptrs, acc.to(tl.float16), mask=pmask[None, :])


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference of the chunk-scan output (module docstring)."""
    x, bm, cm = inputs["x_ptr"], inputs["b_ptr"], inputs["c_ptr"]
    dt, a, prev = inputs["dt_ptr"], inputs["a_ptr"], inputs["prev_ptr"]
    b, length, h, p = x.shape
    nc = length // CHUNK
    cs = chunk_cumsum64(dt, a)  # (B, H, NC, Q)
    xc = x.reshape(b, nc, CHUNK, h, p)
    bc = bm.reshape(b, nc, CHUNK, -1)
    cc = cm.reshape(b, nc, CHUNK, -1)
    inter = np.einsum("bcqn,bchpn->bcqhp", cc, prev, optimize=True)
    inter *= np.exp(cs).transpose(0, 2, 3, 1)[..., None]  # (B, NC, Q, H, 1)
    cb = np.einsum("bcqn,bcsn->bcqs", cc, bc, optimize=True)  # (B, NC, Q, Q)
    diff = cs[..., :, None] - cs[..., None, :]  # (B, H, NC, Q, Q)
    lmask = np.tril(np.ones((CHUNK, CHUNK), dtype=bool))
    decay = np.where(lmask, np.exp(np.where(lmask, diff, 0.0)), 0.0)
    dtc = dt.reshape(b, h, nc, CHUNK)
    w = cb[:, None] * decay.transpose(0, 1, 2, 3, 4) * dtc[..., None, :]  # (B, H, NC, Q, Q)
    intra = np.einsum("bhcqs,bcshp->bcqhp", w, xc, optimize=True)
    return {"y_ptr": (inter + intra).reshape(b, length, h, p)}


SPEC = KernelSpec(
    name="mamba2_chunk_scan",
    description="Mamba-2 SSD chunk scan y = C prev decay + (C B^T ⊙ L) x, fp16 in/out",
    source=SourceRef(module=__name__, function="mamba2_chunk_scan_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp16", shape=("B", "L", "H", "P"), role="in"),
        Param(name="b_ptr", kind="pointer", dtype="fp16", shape=("B", "L", "NS"), role="in"),
        Param(name="c_ptr", kind="pointer", dtype="fp16", shape=("B", "L", "NS"), role="in"),
        Param(name="dt_ptr", kind="pointer", dtype="fp32", shape=("B", "H", "L"), role="in",
              distribution=DT),
        Param(name="a_ptr", kind="pointer", dtype="fp32", shape=("H",), role="in",
              distribution=A_LOG),
        Param(name="prev_ptr", kind="pointer", dtype="fp32",
              shape=("B", f"L // {CHUNK}", "H", "P", "NS"), role="in"),
        Param(name="y_ptr", kind="pointer", dtype="fp16", shape=("B", "L", "H", "P"), role="out"),
        Param(name="L", kind="scalar", dtype="i32", value="L", divisibility=16),
        Param(name="H", kind="scalar", dtype="i32", value="H"),
        Param(name="P", kind="scalar", dtype="i32", value="P", divisibility=16),
        Param(name="NS", kind="constexpr", value="NS"),
        Param(name="CHUNK", kind="constexpr", value=CHUNK),
        Param(name="BLOCK_M", kind="constexpr"),
        Param(name="BLOCK_P", kind="constexpr"),
        Param(name="BLOCK_K", kind="constexpr"),
    ),
    sizes=SIZES,
    grid=(f"({CHUNK} // BLOCK_M) * cdiv(P, BLOCK_P)", f"L // {CHUNK}", "B * H"),
    autotune=AutotuneSpace(configs=(
        cfg({"BLOCK_M": 64, "BLOCK_P": 64, "BLOCK_K": 64}, 4, 2),
        cfg({"BLOCK_M": 128, "BLOCK_P": 64, "BLOCK_K": 64}, 8, 2),
        cfg({"BLOCK_M": 64, "BLOCK_P": 64, "BLOCK_K": 32}, 4, 3),
        cfg({"BLOCK_M": 128, "BLOCK_P": 64, "BLOCK_K": 32}, 4, 2),
        cfg({"BLOCK_M": 32, "BLOCK_P": 64, "BLOCK_K": 64}, 4, 2),
    )),
    # |y| ~ 5; scores and states are rounded to fp16 before the dots (2^-11 relative each)
    tolerances={"fp16": Tolerance(rtol=5e-3, atol=1e-2, max_norm_err=2e-3)},
    flops=f"B * H * L * (2 * NS * P + {CHUNK} * (NS + P))",
    bytes="4 * B * L * H * P + 4 * B * L * NS + 4 * B * H * L + 4 * H"
          f" + 4 * B * (L // {CHUNK}) * H * P * NS",
    flop_dtype="fp16",
    reference=f"{__name__}:reference",
)
