"""Why the H200 rejected the expert bitdelta entry (kernels/expert/bitdelta/sm_90a) at the bench
size (2026-12-02), reproduced without a GPU.

The expert decode forms ``W + fp16(alpha) * sign`` in fp16 (two roundings); Triton's kernel forms
``fp16(W + alpha * sign)`` in fp32 (one rounding). Both products are then accumulated in fp32 and
stored as fp16. This script computes both at the bench size (M=4096, N=8192, K=8192, the GPU
worker's first bench input set, seed 1000) on the CPU and counts the elements whose difference
exceeds the spec's fp16 tolerance (atol 0.1 + rtol 0.002 |ref|) and twice it. Measured
2026-12-02: 235 of 33,554,432 at the tolerance (the GPU reported 232 for launch 1), 0 at twice
it. Minutes of CPU. Since 2026-12-02 the expert decode rounds once as Triton's does
(``decode_pair`` in kernels/expert/bitdelta/sm_90a/bitdelta.cu); this script keeps the old
two-rounding formula as the record of why it was changed.

    python bench/bitdelta_rounding.py
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
import kernels  # noqa: E402
from harness.inputs import make_inputs  # noqa: E402
from kernels.suite.bitdelta import unpack_signs  # noqa: E402


def main() -> None:
    spec = kernels.get("bitdelta")
    inp = make_inputs(spec, "bench", 1000)
    tol = spec.tolerance("fp16")
    total = single = pair = 0
    for r0 in range(0, inp["x_ptr"].shape[0], 1024):
        x = inp["x_ptr"][r0:r0 + 1024].astype(np.float32)
        for c0 in range(0, inp["w_ptr"].shape[0], 2048):
            w = inp["w_ptr"][c0:c0 + 2048]
            a = inp["alpha_ptr"][c0:c0 + 2048]
            s = unpack_signs(inp["packed_ptr"][c0:c0 + 2048], w.shape[1])
            w_triton = (w.astype(np.float32) + a[:, None] * s.astype(np.float32)).astype(np.float16)
            w_expert = (w + a.astype(np.float16)[:, None] * s.astype(np.float16)).astype(np.float16)
            y_t = (x @ w_triton.astype(np.float32).T).astype(np.float16).astype(np.float64)
            y_e = (x @ w_expert.astype(np.float32).T).astype(np.float16).astype(np.float64)
            d = np.abs(y_t - y_e)
            bound = tol.atol + tol.rtol * np.abs(y_t)
            total += d.size
            single += int((d > bound).sum())
            pair += int((d > 2 * bound).sum())
    print(f"elements {total}: outside the tolerance {single}, outside twice it {pair}")


if __name__ == "__main__":
    main()
