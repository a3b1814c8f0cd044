"""``vector_add``: out = x + y over fp32 vectors (memory-bound; 12 bytes per element)."""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, KernelSpec, Param, SourceRef


@triton.jit
def vector_add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference: ``out = x + y``; inputs (N,) float64."""
    return {"out_ptr": inputs["x_ptr"] + inputs["y_ptr"]}


SPEC = KernelSpec(
    name="vector_add",
    description="elementwise fp32 add, out = x + y",
    source=SourceRef(module=__name__, function="vector_add_kernel"),
    params=(
        Param(name="x_ptr", kind="pointer", dtype="fp32", shape=("N",), role="in"),
        Param(name="y_ptr", kind="pointer", dtype="fp32", shape=("N",), role="in"),
        Param(name="out_ptr", kind="pointer", dtype="fp32", shape=("N",), role="out"),
        Param(name="n_elements", kind="scalar", dtype="i32", value="N", divisibility=16),
        Param(name="BLOCK_SIZE", kind="constexpr"),
    ),
    # verify: 2^20 + 16 (not a multiple of any block: tests the mask); bench: 2^26 fp32 elements,
    # 768 MiB moved per launch (> 4x the H200's 60 MB L2).
    sizes={"verify": {"N": 1_048_592}, "bench": {"N": 67_108_864}},
    grid=("cdiv(N, BLOCK_SIZE)",),
    autotune=AutotuneSpace(meta={"BLOCK_SIZE": (1024, 2048, 4096)}, num_warps=(4, 8),
                           num_stages=(1,)),
    flops="N",
    bytes="12 * N",
    reference=f"{__name__}:reference",
)
