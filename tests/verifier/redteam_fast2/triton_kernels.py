"""Correct Triton kernels (own code) compiled for sm_90a by gen_triton.py."""
import triton
import triton.language as tl


@triton.jit
def ws_gemm_bias_relu(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # device-side TMA descriptors + warp-specialized K loop + bias/relu epilogue
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_d = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_d = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=True):
        a = a_d.load([pid_m * BM, k])
        b = b_d.load([k, pid_n * BN])
        acc = tl.dot(a, b, acc)
    offs_n = pid_n * BN + tl.arange(0, BN)
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc = tl.maximum(acc + bias[None, :], 0.0)
    c_d = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    c_d.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


@triton.jit
def tma_rowsum(x_desc, y_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):
    # host-side descriptor, pipelined TMA loads over the columns, fp32 row sums
    pid = tl.program_id(0)
    acc = tl.zeros((BR,), dtype=tl.float32)
    for c in tl.range(0, n_cols, BC, num_stages=3):
        x = x_desc.load([pid * BR, c])
        acc += tl.sum(x.to(tl.float32), axis=1)
    rows = pid * BR + tl.arange(0, BR)
    tl.store(y_ptr + rows, acc, mask=rows < n_rows)
