"""``silu``: out = x * sigmoid(x), elementwise; fp16 and fp32 variants, fp32 math."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.suite._common import elementwise_spec, silu64


@triton.jit
def silu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = x / (1.0 + tl.exp(-x))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: ``x * sigmoid(x)`` over ``x_ptr`` (N,)."""
    return {"out_ptr": silu64(inputs["x_ptr"])}


SPEC_FP16, SPEC_FP32 = (
    elementwise_spec(name=f"silu.{dt}", module=__name__, function="silu_kernel", dt=dt,
                     inputs=("x_ptr",), description=f"SiLU, {dt} in/out, fp32 math",
                     flops_per_elem=5)
    for dt in ("fp16", "fp32"))
