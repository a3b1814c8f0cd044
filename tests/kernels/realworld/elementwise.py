"""Elementwise kernels in the style of the Triton tutorials and Liger/Unsloth-type repositories:
module-level torch import, autotune config lists, string constexprs, dtype variants by
inheritance. Read by ailower with ast only; never imported by the tests."""

import torch
import triton
import triton.language as tl

BLOCK_CONFIGS = [triton.Config({"BLOCK_SIZE": bs}, num_warps=nw) for bs in (1024, 2048)
                 for nw in (4, 8) if bs // nw >= 256]


@triton.autotune(configs=BLOCK_CONFIGS, key=["n_elements"])
@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


@triton.jit
def _gelu_tanh(x):
    k0 = 0.7978845608028654  # sqrt(2 / pi)
    inner = k0 * (x + 0.044715 * x * x * x)
    t = 2.0 * tl.sigmoid(2.0 * inner) - 1.0
    return 0.5 * x * (1.0 + t)


@triton.jit
def _silu(x):
    return x * tl.sigmoid(x)


@triton.jit
def activation_kernel(x_ptr, y_ptr, n, ACTIVATION: tl.constexpr, BLOCK: tl.constexpr):
    """y = act(x) with the activation chosen by a string constexpr."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    if ACTIVATION == "gelu":
        y = _gelu_tanh(x)
    elif ACTIVATION == "silu":
        y = _silu(x)
    elif ACTIVATION == "relu":
        y = tl.maximum(x, 0.0)
    else:
        y = x
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)


class ReLUKernel:
    """fp16 ReLU; the bf16 and fp8 classes reuse its kernel (their dtype is the tensors')."""

    @staticmethod
    @triton.jit
    def relu(x):
        return tl.where(x > 0, x, 0.0)

    @staticmethod
    @triton.jit
    def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0.0)
        y = ReLUKernel.relu(x.to(tl.float32))
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)


class ReLUBFloat16Kernel(ReLUKernel):
    pass


class ReLUFloat8Kernel(ReLUKernel):
    @staticmethod
    def launch(x):  # host-side helper, never part of a kernel
        return torch.empty_like(x)


@triton.jit
def swiglu_fwd_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    """Liger-style SwiGLU: c = silu(a) * b, one program per row."""
    row = tl.program_id(0).to(tl.int64)
    a_ptr += row * stride
    b_ptr += row * stride
    c_ptr += row * stride
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0)
    c = _silu(a).cast(b.dtype) * b
    tl.store(c_ptr + cols, c, mask=mask)


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
    """Seeded dropout (tutorial 04): the mask comes from tl.rand(seed, offsets)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    r = tl.rand(seed, offs)
    keep = r > p
    tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=m)


@triton.jit
def quantize_rowwise_kernel(x_ptr, q_ptr, scale_ptr, n_cols, BLOCK: tl.constexpr):
    """bitsandbytes-style row-wise absmax int8 quantisation."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
    absmax = tl.max(tl.abs(x), axis=0)
    scale = tl.maximum(absmax, 1e-8) / 127.0
    q = tl.floor(x / scale + 0.5)
    tl.store(q_ptr + row * n_cols + cols, q.to(tl.int8), mask=m)
    tl.store(scale_ptr + row, scale)
