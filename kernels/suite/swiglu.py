"""``swiglu``: out = silu(a) * b, elementwise (the gated FFN activation); fp16 and fp32 variants."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.suite._common import elementwise_spec, silu64


@triton.jit
def swiglu_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    y = a / (1.0 + tl.exp(-a)) * b
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: ``silu(a) * b`` over ``a_ptr``, ``b_ptr`` (N,)."""
    return {"out_ptr": silu64(inputs["a_ptr"]) * inputs["b_ptr"]}


SPEC_FP16, SPEC_FP32 = (
    elementwise_spec(name=f"swiglu.{dt}", module=__name__, function="swiglu_kernel", dt=dt,
                     inputs=("a_ptr", "b_ptr"), description=f"SwiGLU silu(a)*b, {dt} in/out",
                     flops_per_elem=6)
    for dt in ("fp16", "fp32"))
