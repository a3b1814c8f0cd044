"""Kernels as a research codebase writes them (test data: never imported, never executed).

The module imports torch and a package that does not exist, builds tensors at import time and
raises at the end: ailower must find the kernels with ast alone.
"""
import torch
import triton
import triton.language as tl
from research_lib.utils import launch_helper  # noqa: F401  (does not exist)

SCALE: tl.constexpr = tl.constexpr(2.0)
WORKSPACE = torch.empty(1 << 20)


@triton.jit
def _scaled(x):
    return x * SCALE


def _twice(x):  # an undecorated helper: wrapped with @triton.jit when the kernel calls it
    return x + x


class FusedOps:
    @staticmethod
    @triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
    @triton.jit
    def scale_kernel(x_ptr, y_ptr, bias_ptr, n, BLOCK: tl.constexpr, DOUBLE: tl.constexpr,
                     STAGES: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        y = FusedOps._inner(x)
        if DOUBLE:
            y = _twice(y)
        if bias_ptr is not None:
            y = y + tl.load(bias_ptr + offs, mask=m)
        y = y + STAGES
        tl.store(y_ptr + offs, y, mask=m)

    @staticmethod
    @triton.jit
    def _inner(x):
        return _scaled(x)

    def forward(self, x):
        return torch.empty_like(x)


def plain_copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """An undecorated kernel: ailower wraps it with @triton.jit."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.jit
def uses_import(x_ptr, n, BLOCK: tl.constexpr):
    launch_helper(x_ptr)


raise RuntimeError("this module must never be executed by ailower")
