"""The expert gemm.fp8 formulation (sm_90a): device-side TMA descriptors, persistent tiles, warp
specialization (``tl.range(..., warp_specialize=True)`` on the tile loop: a producer warpgroup
issuing TMA loads into an mbarrier ring, two consumer warpgroups each issuing fp8 wgmma for 64 of
the tile's 128 rows and storing their half of C through TMA). Same name and parameters as the
suite's ``gemm_kernel`` (kernels/suite/gemm.py), so it keeps the entry ABI; compiled by gen.py
(num_warps=4: Triton 3.9 partitions this loop on sm_90a only with 4 warps per partition,
NOTES.md).
"""

import triton
import triton.language as tl


@triton.jit
def gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
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
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))
