"""``rope``: rotary position embedding on q and k, GPT-NeoX layout (rotate the two halves).

For each token t and head h, with x1 = x[..., :D/2], x2 = x[..., D/2:] and per-token tables
cos[t, i], sin[t, i] (i < D/2):  out1 = x1*cos - x2*sin,  out2 = x2*cos + x1*sin
(Su et al., RoFormer, 2021, eq. 34; NeoX's ``rotate_half`` layout). q has HQ heads and k HK (GQA).
The tables are inputs (fp32), as in serving stacks that precompute them per position; their
values are drawn at random here, which changes nothing in the arithmetic the kernel must do.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, Distribution, KernelSpec, Param, SourceRef, Tolerance


@triton.jit
def _rope_heads(x_ptr, o_ptr, cos, sin, t, n_heads, D: tl.constexpr, HALF: tl.constexpr,
                BLOCK_H: tl.constexpr):
    heads = tl.arange(0, BLOCK_H)
    cols = tl.arange(0, HALF)
    mask = (heads < n_heads)[:, None]
    base = t.to(tl.int64) * n_heads * D + heads[:, None] * D + cols[None, :]
    x1 = tl.load(x_ptr + base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + HALF, mask=mask, other=0.0).to(tl.float32)
    tl.store(o_ptr + base, (x1 * cos - x2 * sin).to(tl.float16), mask=mask)
    tl.store(o_ptr + base + HALF, (x2 * cos + x1 * sin).to(tl.float16), mask=mask)


@triton.jit
def rope_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr, n_tokens, n_q_heads,
                n_k_heads, D: tl.constexpr, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr):
    t = tl.program_id(axis=0)
    HALF: tl.constexpr = D // 2
    cols = tl.arange(0, HALF)
    cos = tl.load(cos_ptr + t.to(tl.int64) * HALF + cols)[None, :]
    sin = tl.load(sin_ptr + t.to(tl.int64) * HALF + cols)[None, :]
    _rope_heads(q_ptr, q_out_ptr, cos, sin, t, n_q_heads, D, HALF, BLOCK_HQ)
    _rope_heads(k_ptr, k_out_ptr, cos, sin, t, n_k_heads, D, HALF, BLOCK_HK)


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: NeoX rotary embedding of q (T, HQ, D) and k (T, HK, D) with the
    tables cos, sin (T, D/2)."""
    cos, sin = inputs["cos_ptr"], inputs["sin_ptr"]
    return {"q_out_ptr": _rotate(inputs["q_ptr"], cos, sin),
            "k_out_ptr": _rotate(inputs["k_ptr"], cos, sin)}


SPEC = KernelSpec(
    name="rope",
    description="rotary embedding on q/k (GPT-NeoX halves), fp16 q/k, fp32 cos/sin tables",
    source=SourceRef(module=__name__, function="rope_kernel"),
    params=(
        Param(name="q_ptr", kind="pointer", dtype="fp16", shape=("T", "HQ", "D"), role="in"),
        Param(name="k_ptr", kind="pointer", dtype="fp16", shape=("T", "HK", "D"), role="in"),
        Param(name="cos_ptr", kind="pointer", dtype="fp32", shape=("T", "D // 2"), role="in",
              distribution=Distribution(kind="uniform", low=-1.0, high=1.0)),
        Param(name="sin_ptr", kind="pointer", dtype="fp32", shape=("T", "D // 2"), role="in",
              distribution=Distribution(kind="uniform", low=-1.0, high=1.0)),
        Param(name="q_out_ptr", kind="pointer", dtype="fp16", shape=("T", "HQ", "D"), role="out"),
        Param(name="k_out_ptr", kind="pointer", dtype="fp16", shape=("T", "HK", "D"), role="out"),
        Param(name="n_tokens", kind="scalar", dtype="i32", value="T"),
        Param(name="n_q_heads", kind="scalar", dtype="i32", value="HQ"),
        Param(name="n_k_heads", kind="scalar", dtype="i32", value="HK"),
        Param(name="D", kind="constexpr", value="D"),
        Param(name="BLOCK_HQ", kind="constexpr", value="next_power_of_2(HQ)"),
        Param(name="BLOCK_HK", kind="constexpr", value="next_power_of_2(HK)"),
    ),
    # Llama-3-8B-like heads (32 q, 8 kv, head dim 128); bench: 16384 tokens, 2 x 168 MB moved.
    sizes={"verify": {"T": 77, "HQ": 32, "HK": 8, "D": 128},
           "bench": {"T": 16384, "HQ": 32, "HK": 8, "D": 128}},
    grid=("T",),
    autotune=AutotuneSpace(num_warps=(2, 4, 8), num_stages=(1,)),
    tolerances={"fp16": Tolerance(rtol=2e-3, atol=1e-4, max_norm_err=1e-3)},
    flops="3 * T * (HQ + HK) * D",
    bytes="4 * T * (HQ + HK) * D + 4 * T * D",
    reference=f"{__name__}:reference",
)
