"""Attention forward with TMA (``fast`` family): Q, K, V, O are (B*H*S, D) row-major fp16 viewed
through device-side tensor descriptors (``tl.make_tensor_descriptor``), one program per
(BLOCK_M queries, batch*head), FlashAttention-2 online softmax (Dao 2023, Algorithm 1) in fp32.

* ``fast.attention_tma`` -- the key loop as a plain software-pipelined ``tl.range``.
* ``fast.attention_ws`` -- the key loop with ``tl.range(..., warp_specialize=True)`` (Triton's
  tutorial-06 scheme: load, MMA and softmax partitions; on sm_100a the S and O accumulators live
  in TMEM).

S is a multiple of BLOCK_N (every key tile is full), so no key mask is needed.
"""

from __future__ import annotations

import math

import numpy as np
import triton
import triton.language as tl

from kernels.fast._common import FP16_TOL
from kernels.spec import AutotuneSpace, Config, KernelSpec, Param, SourceRef
from kernels.suite._attention import attention64


@triton.jit
def attention_tma_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, Z, S, D: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WS: tl.constexpr):
    start_m = tl.program_id(axis=0)
    bh = tl.program_id(axis=1)
    rows = Z * S
    q_desc = tl.make_tensor_descriptor(q_ptr, shape=[rows, D], strides=[D, 1],
                                       block_shape=[BLOCK_M, D])
    k_desc = tl.make_tensor_descriptor(k_ptr, shape=[rows, D], strides=[D, 1],
                                       block_shape=[BLOCK_N, D])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[rows, D], strides=[D, 1],
                                       block_shape=[BLOCK_N, D])
    o_desc = tl.make_tensor_descriptor(o_ptr, shape=[rows, D], strides=[D, 1],
                                       block_shape=[BLOCK_M, D])
    q_row = bh * S + start_m * BLOCK_M
    q = q_desc.load([q_row, 0])
    qk_scale = sm_scale * 1.4426950408889634  # log2 units: exp2 on the MUFU
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    for n0 in tl.range(0, S, BLOCK_N, warp_specialize=WS):
        k = k_desc.load([bh * S + n0, 0])
        s = tl.dot(q, k.T) * qk_scale
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = v_desc.load([bh * S + n0, 0])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    o_desc.store([q_row, 0], (acc / l_i[:, None]).to(tl.float16))


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: softmax(Q K^T / sqrt(D)) V per batch*head, non-causal."""
    z, s, d = dims["Z"], dims["S"], dims["D"]
    q, k, v = (inputs[n].reshape(z, s, d) for n in ("q_ptr", "k_ptr", "v_ptr"))
    return {"o_ptr": attention64(q, k, v, 1.0 / math.sqrt(d), causal=False).reshape(z * s, d)}


def _spec(name: str, ws: bool, description: str) -> KernelSpec:
    t = ("Z * S", "D")
    return KernelSpec(
        name=name, description=description,
        source=SourceRef(module=__name__, function="attention_tma_kernel"),
        params=(
            Param(name="q_ptr", kind="pointer", dtype="fp16", shape=t, role="in"),
            Param(name="k_ptr", kind="pointer", dtype="fp16", shape=t, role="in"),
            Param(name="v_ptr", kind="pointer", dtype="fp16", shape=t, role="in"),
            Param(name="o_ptr", kind="pointer", dtype="fp16", shape=t, role="out"),
            Param(name="sm_scale", kind="scalar", dtype="fp32", value="1 / sqrt(D)"),
            Param(name="Z", kind="scalar", dtype="i32", value="Z"),
            Param(name="S", kind="scalar", dtype="i32", value="S", divisibility=16),
            Param(name="D", kind="constexpr", value="D"),
            Param(name="BLOCK_M", kind="constexpr"),
            Param(name="BLOCK_N", kind="constexpr"),
            Param(name="WS", kind="constexpr", value=ws),
        ),
        # verify: 2 batch*heads, 256 keys (2 query tiles, 2..4 key tiles); bench: 32 x 8192.
        sizes={"verify": {"Z": 2, "S": 256, "D": 64}, "bench": {"Z": 32, "S": 8192, "D": 64}},
        grid=("S / BLOCK_M", "Z"),
        autotune=AutotuneSpace(configs=(
            Config(meta={"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=4, num_stages=2),)),
        tolerances={"fp16": FP16_TOL},
        flops="4 * Z * S * S * D", bytes="2 * 4 * Z * S * D", flop_dtype="fp16",
        reference=f"{__name__}:reference",
    )


SPEC_TMA = _spec("fast.attention_tma", False,
                 "attention forward, fp16, device-side TMA descriptors, pipelined key loop")
SPEC_WS = _spec("fast.attention_ws", True,
                "attention forward, fp16, device-side TMA descriptors, warp-specialized key loop")
