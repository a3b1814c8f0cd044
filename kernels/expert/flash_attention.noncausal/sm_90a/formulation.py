"""The expert flash_attention.noncausal formulation (sm_90a): device-side TMA descriptors over
the (B*H*S, D) row-major view of Q, K and V, a warp-specialized key loop
(``tl.range(..., warp_specialize=True)``: a TMA producer warpgroup and two consumer warpgroups of
64 query rows each) and wgmma for both products. A key tile that runs past S reads the next
head's rows (masked to -inf) or, past the tensor, zeros; O is stored with a masked pointer store.
Same name and parameters as the suite's ``flash_attention_kernel``
(kernels/suite/flash_attention.py), so it keeps the entry ABI; compiled by gen.py (NOTES.md).
"""

import triton
import triton.language as tl


@triton.jit
def flash_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, S, D: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(axis=0)
    bh = tl.program_id(axis=1)
    n_bh = tl.num_programs(axis=1)
    rows = n_bh * S
    q_desc = tl.make_tensor_descriptor(q_ptr, shape=[rows, D], strides=[D, 1],
                                       block_shape=[BLOCK_M, D])
    k_desc = tl.make_tensor_descriptor(k_ptr, shape=[rows, D], strides=[D, 1],
                                       block_shape=[BLOCK_N, D])
    v_desc = tl.make_tensor_descriptor(v_ptr, shape=[rows, D], strides=[D, 1],
                                       block_shape=[BLOCK_N, D])
    m0 = start_m * BLOCK_M
    q = q_desc.load([bh * S + m0, 0])
    qk_scale = sm_scale * 1.4426950408889634  # log2 units: exp2 on the MUFU
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    for n0 in tl.range(0, S, BLOCK_N, warp_specialize=True):
        k = k_desc.load([bh * S + n0, 0])
        s = tl.dot(q, k.T)
        kmask = (n0 + tl.arange(0, BLOCK_N)) < S
        s = tl.where(kmask[None, :], s * qk_scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = v_desc.load([bh * S + n0, 0])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    o = (acc / l_i[:, None]).to(tl.float16)
    rm = m0 + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    tl.store(o_ptr + bh.to(tl.int64) * S * D + rm[:, None] * D + rd[None, :], o,
             mask=rm[:, None] < S)
