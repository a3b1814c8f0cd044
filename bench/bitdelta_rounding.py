"""Why the H200 rejected the expert bitdelta entry (kernels/expert/bitdelta/sm_90a) at the bench
size (2026-12-02), reproduced without a GPU.

The expert decode forms ``W + fp16(alpha) * sign`` in fp16 (two roundings); Triton's kernel forms
``fp16(W + alpha * sign)`` in fp32 (one rounding). Both products are then accumulated in fp32 and
stored as fp16. This script computes both at the bench size (M=4096, N=8192, K=8192, the GPU
worker's first bench input set, seed 1000) on the CPU and counts the elements whose difference
exceeds the spec's fp16 tolerance (atol 0.1 + rtol 0.002 |ref|) and twice it, then what the
GPU worker's float64 arbitration (``harness.correctness.arbitrate``) decides for the two-rounding
output and for a bf16-rounded one. Measured 2026-12-02: 235 of 33,554,432 at the tolerance (the
GPU reported 232 for launch 1), 0 at twice it. Minutes of CPU. Since 2026-12-02 the expert decode rounds once as Triton's does
(``decode_pair`` in kernels/expert/bitdelta/sm_90a/bitdelta.cu); this script keeps the old
two-rounding formula as the record of why it was changed.

    python bench/bitdelta_rounding.py
"""

import sys
from pathlib import Path

import ml_dtypes
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
import kernels  # noqa: E402
from harness.correctness import arbitrate  # noqa: E402
from harness.inputs import make_inputs  # noqa: E402
from kernels.suite.bitdelta import unpack_signs  # noqa: E402


def main() -> None:
    spec = kernels.get("bitdelta")
    inp = make_inputs(spec, "bench", 1000)
    tol = spec.tolerance("fp16")
    m, n = inp["x_ptr"].shape[0], inp["w_ptr"].shape[0]
    y_t = np.empty((m, n), np.float16)
    y_e = np.empty((m, n), np.float16)
    ref64 = np.empty((m, n), np.float64)
    for r0 in range(0, m, 1024):
        x = inp["x_ptr"][r0:r0 + 1024].astype(np.float32)
        for c0 in range(0, n, 2048):
            w = inp["w_ptr"][c0:c0 + 2048]
            a = inp["alpha_ptr"][c0:c0 + 2048]
            s = unpack_signs(inp["packed_ptr"][c0:c0 + 2048], w.shape[1])
            w_triton = (w.astype(np.float32) + a[:, None] * s.astype(np.float32)).astype(np.float16)
            w_expert = (w + a.astype(np.float16)[:, None] * s.astype(np.float16)).astype(np.float16)
            y_t[r0:r0 + 1024, c0:c0 + 2048] = (x @ w_triton.astype(np.float32).T).astype(np.float16)
            y_e[r0:r0 + 1024, c0:c0 + 2048] = (x @ w_expert.astype(np.float32).T).astype(np.float16)
            w64 = w.astype(np.float64) + a[:, None].astype(np.float64) * s
            ref64[r0:r0 + 1024, c0:c0 + 2048] = x.astype(np.float64) @ w64.T
    d = np.abs(y_t.astype(np.float64) - y_e.astype(np.float64))
    bound = tol.atol + tol.rtol * np.abs(y_t.astype(np.float64))
    print(f"elements {d.size}: outside the tolerance {int((d > bound).sum())}, "
          f"outside twice it {int((d > 2 * bound).sum())}")
    # the GPU worker's float64 arbitration of that disagreement (harness.correctness.arbitrate)
    for name, cand in (("two roundings (the old expert decode)", y_e),
                       ("bf16-rounded output", y_t.astype(ml_dtypes.bfloat16).astype(np.float16))):
        a = arbitrate("y_ptr", cand, y_t, ref64, tol)
        print(f"arbitration of {name}: candidate vs float64 {a.candidate.n_bad} outside, "
              f"normalized {a.candidate.norm_err:.3g}; Triton's formula {a.reference.n_bad}, "
              f"{a.reference.norm_err:.3g}: {'accepted' if a.ok else 'not accepted: ' + a.reason}")


if __name__ == "__main__":
    main()
