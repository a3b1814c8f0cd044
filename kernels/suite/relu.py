"""``relu``: out = max(x, 0), elementwise; fp16 and fp32 variants."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.suite._common import elementwise_spec


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0).to(out_ptr.dtype.element_ty), mask=mask)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: ``max(x, 0)`` over ``x_ptr`` (N,)."""
    return {"out_ptr": np.maximum(inputs["x_ptr"], 0.0)}


SPEC_FP16, SPEC_FP32 = (
    elementwise_spec(name=f"relu.{dt}", module=__name__, function="relu_kernel", dt=dt,
                     inputs=("x_ptr",), description=f"ReLU, {dt} in/out", flops_per_elem=1)
    for dt in ("fp16", "fp32"))
