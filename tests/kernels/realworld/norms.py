"""Row-wise kernels in the style of the Triton tutorials (softmax, layer norm) and of Liger-Kernel
(RMSNorm as a class of static jit methods with a string casting mode, fused add + RMSNorm,
cross entropy). Read by ailower with ast only."""

import math

import torch
import triton
import triton.language as tl

_CASTING_MODES = ("llama", "gemma", "none")


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)


@triton.jit
def _layer_norm_fwd_fused(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


class LigerRMSNorm:
    """RMSNorm as Liger-Kernel writes it: static jit methods on a class, the casting mode a
    compile-time string."""

    @staticmethod
    @triton.jit
    def _rms_norm_forward_kernel(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, RSTD_ptr,
                                 n_cols, eps, offset, CASTING_MODE: tl.constexpr,
                                 BLOCK_SIZE: tl.constexpr):
        row_idx = tl.program_id(0).to(tl.int64)
        col_offsets = tl.arange(0, BLOCK_SIZE)
        mask = col_offsets < n_cols
        X_row = tl.load(X_ptr + row_idx * X_row_stride + col_offsets, mask=mask, other=0)
        X_row_dtype = X_row.dtype
        W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0)
        if CASTING_MODE == "llama":
            X_row = X_row.to(tl.float32)
        if CASTING_MODE == "gemma":
            W_row = W_row.to(tl.float32)
            X_row = X_row.to(tl.float32)
        mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
        rstd = LigerRMSNorm._rsqrt(mean_square + eps)
        tl.store(RSTD_ptr + row_idx, rstd)
        X_row = X_row * rstd
        if CASTING_MODE == "llama":
            X_row = X_row.to(X_row_dtype)
        Y_row = X_row * (offset + W_row)
        if CASTING_MODE == "gemma":
            Y_row = Y_row.to(X_row_dtype)
        tl.store(Y_ptr + row_idx * Y_row_stride + col_offsets, Y_row, mask=mask)

    @staticmethod
    @triton.jit
    def _rsqrt(x):
        return 1.0 / tl.sqrt(x)


@triton.jit
def fused_add_rmsnorm_kernel(x_ptr, residual_ptr, w_ptr, out_ptr, n_cols, eps,
                             BLOCK: tl.constexpr):
    """vLLM-style fused residual add + RMSNorm: residual += x (in place), out = rmsnorm(residual)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
    r = tl.load(residual_ptr + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
    r = r + x
    tl.store(residual_ptr + row * n_cols + cols, r.to(tl.float16), mask=m)
    var = tl.sum(r * r, axis=0) / n_cols
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    y = r * tl.rsqrt(var + eps) * w
    tl.store(out_ptr + row * n_cols + cols, y.to(tl.float16), mask=m)


@triton.jit
def cross_entropy_fwd_kernel(logits_ptr, labels_ptr, loss_ptr, lse_ptr, n_cols, stride,
                             BLOCK_SIZE: tl.constexpr):
    """Per-row cross entropy with an online log-sum-exp over column blocks (Liger/Unsloth style)."""
    row = tl.program_id(0).to(tl.int64)
    logits_ptr += row * stride
    label = tl.load(labels_ptr + row)
    m = float("-inf")
    d = 0.0
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(logits_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    lse = m + tl.log(d)
    x_label = tl.load(logits_ptr + label).to(tl.float32)
    tl.store(loss_ptr + row, lse - x_label)
    tl.store(lse_ptr + row, lse)
