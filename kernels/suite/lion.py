"""``lion``: one Lion optimizer step over fp32 parameters, in place (Chen et al., "Symbolic
Discovery of Optimization Algorithms", NeurIPS 2023, Algorithm 2):

  u = sign(beta1 * m + (1 - beta1) * g);  p <- p - lr * (u + wd * p);  m <- beta2 * m + (1 - beta2) * g

p and m are ``inout``; g is read only. beta1 = 0.875 and the integer-valued moment and gradient
inputs make beta1*m + (1-beta1)*g exact in fp32 and float64 alike, so the sign, a discontinuity,
is the same in the kernel and the reference on every element (with beta1 = 0.9 a product rounds
differently and the sign of near-zero updates flips between them).
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

from kernels.spec import AutotuneSpace, Distribution, KernelSpec, Param, SourceRef, Tolerance

LR = 0.01
BETA1 = 0.875
BETA2 = 0.99
WD = 0.1


@triton.jit
def lion_kernel(p_ptr, m_ptr, g_ptr, n_elements, lr, beta1, beta2, wd, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    p = tl.load(p_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    c = beta1 * m + (1.0 - beta1) * g
    u = tl.where(c > 0, 1.0, tl.where(c < 0, -1.0, 0.0))
    tl.store(p_ptr + offs, p - lr * (u + wd * p), mask=mask)
    tl.store(m_ptr + offs, beta2 * m + (1.0 - beta2) * g, mask=mask)


def reference(inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict[str, np.ndarray]:
    """float64 reference of one Lion step; p, m, g (N,)."""
    p, m, g = inputs["p_ptr"], inputs["m_ptr"], inputs["g_ptr"]
    u = np.sign(BETA1 * m + (1 - BETA1) * g)
    return {"p_ptr": p - LR * (u + WD * p), "m_ptr": BETA2 * m + (1 - BETA2) * g}


INTS = Distribution(kind="randint", low=-64, high=65)

SPEC = KernelSpec(
    name="lion",
    description="one Lion optimizer step, fp32 params and momentum updated in place",
    source=SourceRef(module=__name__, function="lion_kernel"),
    params=(
        Param(name="p_ptr", kind="pointer", dtype="fp32", shape=("N",), role="inout"),
        Param(name="m_ptr", kind="pointer", dtype="fp32", shape=("N",), role="inout",
              distribution=INTS),
        Param(name="g_ptr", kind="pointer", dtype="fp32", shape=("N",), role="in",
              distribution=INTS),
        Param(name="n_elements", kind="scalar", dtype="i32", value="N", divisibility=16),
        Param(name="lr", kind="scalar", dtype="fp32", value=LR),
        Param(name="beta1", kind="scalar", dtype="fp32", value=BETA1),
        Param(name="beta2", kind="scalar", dtype="fp32", value=BETA2),
        Param(name="wd", kind="scalar", dtype="fp32", value=WD),
        Param(name="BLOCK_SIZE", kind="constexpr"),
    ),
    # bench: 2^25 parameters (a 33M-parameter shard): 3 reads + 2 writes of 134 MB
    sizes={"verify": {"N": 65_552}, "bench": {"N": 1 << 25}},
    grid=("cdiv(N, BLOCK_SIZE)",),
    autotune=AutotuneSpace(meta={"BLOCK_SIZE": (1024, 2048, 4096)}, num_warps=(4, 8),
                           num_stages=(1,)),
    tolerances={"fp32": Tolerance(rtol=1e-5, atol=1e-6, max_norm_err=1e-5)},
    flops="10 * N",
    bytes="20 * N",
    reference=f"{__name__}:reference",
)
