"""The expert gemm_silu.fp8 formulation (sm_90a): device-side TMA descriptors, persistent tiles, warp
specialization (``tl.range(..., warp_specialize=True)`` on the tile loop: a TMA producer
warpgroup, two fp8 wgmma consumer warpgroups), an mbarrier ring, and the bias + SiLU epilogue
fused in the consumers before a TMA store. Same name and parameters as the suite's
``gemm_silu_kernel`` (kernels/suite/gemm_silu.py), so it keeps the entry ABI; compiled by gen.py.
"""

import triton
import triton.language as tl


@triton.jit
def gemm_silu_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                       block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    pid = tl.program_id(axis=0)
    n_prog = tl.num_programs(axis=0)
    n_m = tl.cdiv(M, BLOCK_M)
    n_n = tl.cdiv(N, BLOCK_N)
    n_k = tl.cdiv(K, BLOCK_K)
    per_group = GROUP_M * n_n
    for tile in tl.range(pid, n_m * n_n, n_prog, warp_specialize=True):
        group = tile // per_group
        m0 = group * GROUP_M
        rows_in_group = min(n_m - m0, GROUP_M)
        pid_m = m0 + (tile % per_group) % rows_in_group
        pid_n = (tile % per_group) // rows_in_group
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(n_k):
            a = a_desc.load([pid_m * BLOCK_M, kk * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, kk * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)
        z = acc + bias[None, :]
        y = z / (1.0 + tl.exp(-z))
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], y.to(tl.float16))
