"""``mamba2_chunk_state``: the per-chunk SSM states of Mamba-2's SSD algorithm (Dao & Gu,
"Transformers are SSMs", ICML 2024, §6, the "chunk state" step).

For chunk c of length Q, head h: state[b, c, h, p, n] = sum_{t in c} decay_t * dt_t * x[b, t, h, p] *
B[b, t, n], decay_t = exp(cs_end - cs_t), cs the inclusive within-chunk cumsum of dt * A_h.
x (B, L, H, P) fp16, B (B, L, NS) fp16 (one group), dt (B, H, L) fp32, A (H,) fp32;
states (B, L/Q, H, P, NS) fp32. The kernel builds cs itself from dt and A; the decayed x tile is
rounded to fp16 for ``tl.dot`` (fp32 accumulate).
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, KernelSpec, Param, SourceRef, Tolerance
from kernels.suite._common import cfg
from kernels.suite._mamba2 import A_LOG, CHUNK, DT, SIZES, chunk_cumsum64


@triton.jit
def mamba2_chunk_state_kernel(x_ptr, b_ptr, dt_ptr, a_ptr, states_ptr, L, H, P,
                              NS: tl.constexpr, CHUNK: tl.constexpr, BLOCK_P: tl.constexpr,
                              BLOCK_NS: tl.constexpr, BLOCK_T: tl.constexpr):
    pid = tl.program_id(axis=0)
    c = tl.program_id(axis=1)
    bh = tl.program_id(axis=2)
    bi = bh // H
    h = bh % H
    n_ns = NS // BLOCK_NS
    rp = (pid // n_ns) * BLOCK_P + tl.arange(0, BLOCK_P)
    rn = (pid % n_ns) * BLOCK_NS + tl.arange(0, BLOCK_NS)
    rt = tl.arange(0, BLOCK_T)
    pmask = rp < P
    a = tl.load(a_ptr + h)
    t0 = c * CHUNK
    dt_base = dt_ptr + bh.to(tl.int64) * L + t0
    s_end = tl.sum(tl.load(dt_base + tl.arange(0, CHUNK)), axis=0)
    prefix = s_end * 0.0
    tok = bi.to(tl.int64) * L + t0  # first token of the chunk
    x_ptrs = x_ptr + (tok + rt[None, :]) * H * P + h * P + rp[:, None]
    b_ptrs = b_ptr + (tok + rt[:, None]) * NS + rn[None, :]
    acc = tl.zeros((BLOCK_P, BLOCK_NS), dtype=tl.float32)
    for k0 in range(0, CHUNK, BLOCK_T):
        dt = tl.load(dt_base + k0 + rt)
        s = prefix + tl.cumsum(dt, axis=0)
        prefix += tl.sum(dt, axis=0)
        w = tl.exp(a * (s_end - s)) * dt
        x = tl.load(x_ptrs, mask=pmask[:, None], other=0.0)
        xw = (x.to(tl.float32) * w[None, :]).to(tl.float16)
        bt = tl.load(b_ptrs)
        acc = tl.dot(xw, bt, acc)
        x_ptrs += BLOCK_T * H * P
        b_ptrs += BLOCK_T * NS
    n_chunks = L // CHUNK
    out = states_ptr + (((bi * n_chunks + c) * H + h).to(tl.int64) * P + rp[:, None]) * NS + rn[None, :]
    tl.store(out, acc, mask=pmask[:, None])


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference of the chunk states (module docstring)."""
    x, bm, dt, a = inputs["x_ptr"], inputs["b_ptr"], inputs["dt_ptr"], inputs["a_ptr"]
    b, length, h, p = x.shape
    nc = length // CHUNK
    cs = chunk_cumsum64(dt, a)  # (B, H, NC, Q)
    w = np.exp(cs[..., -1:] - cs) * dt.reshape(b, h, nc, CHUNK)  # (B, H, NC, Q)
    xc = x.reshape(b, nc, CHUNK, h, p)
    bc = bm.reshape(b, nc, CHUNK, -1)
    states = np.einsum("bhcq,bcqhp,bcqn->bchpn", w, xc, bc, optimize=True)
    return {"states_ptr": states}


SPEC = KernelSpec(
    name="mamba2_chunk_state",
    description="Mamba-2 SSD per-chunk states sum_t B_t^T (decay_t dt_t x_t), fp16 in, fp32 out",
    source=SourceRef(module=__name__, function="mamba2_chunk_state_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp16", shape=("B", "L", "H", "P"), role="in"),
        Param(name="b_ptr", kind="pointer", dtype="fp16", shape=("B", "L", "NS"), role="in"),
        Param(name="dt_ptr", kind="pointer", dtype="fp32", shape=("B", "H", "L"), role="in",
              distribution=DT),
        Param(name="a_ptr", kind="pointer", dtype="fp32", shape=("H",), role="in",
              distribution=A_LOG),
        Param(name="states_ptr", kind="pointer", dtype="fp32",
              shape=("B", f"L // {CHUNK}", "H", "P", "NS"), role="out"),
        Param(name="L", kind="scalar", dtype="i32", value="L", divisibility=16),
        Param(name="H", kind="scalar", dtype="i32", value="H"),
        Param(name="P", kind="scalar", dtype="i32", value="P", divisibility=16),
        Param(name="NS", kind="constexpr", value="NS"),
        Param(name="CHUNK", kind="constexpr", value=CHUNK),
        Param(name="BLOCK_P", kind="constexpr"),
        Param(name="BLOCK_NS", kind="constexpr"),
        Param(name="BLOCK_T", kind="constexpr"),
    ),
    sizes=SIZES,
    grid=("cdiv(P, BLOCK_P) * (NS // BLOCK_NS)", f"L // {CHUNK}", "B * H"),
    autotune=AutotuneSpace(configs=(
        cfg({"BLOCK_P": 64, "BLOCK_NS": 128, "BLOCK_T": 64}, 4, 3),
        cfg({"BLOCK_P": 64, "BLOCK_NS": 64, "BLOCK_T": 64}, 4, 3),
        cfg({"BLOCK_P": 64, "BLOCK_NS": 128, "BLOCK_T": 32}, 4, 4),
        cfg({"BLOCK_P": 32, "BLOCK_NS": 128, "BLOCK_T": 64}, 4, 3),
        cfg({"BLOCK_P": 64, "BLOCK_NS": 128, "BLOCK_T": 128}, 8, 2),
    )),
    # states ~ 0.3 in size; the decayed x is rounded to fp16 (2^-11 relative per term)
    tolerances={"fp32": Tolerance(rtol=2e-3, atol=1e-3, max_norm_err=1e-3)},
    flops="2 * B * L * H * P * NS + 4 * B * H * L",
    bytes="2 * B * L * H * P + 2 * B * L * NS + 4 * B * H * L + 4 * H"
          f" + 4 * B * (L // {CHUNK}) * H * P * NS",
    flop_dtype="fp16",
    reference=f"{__name__}:reference",
)
