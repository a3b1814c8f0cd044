"""Writes kernel.ptx and launch.yaml of the expert gemm.fp8 (sm_90a) from formulation.py.

Run from the repository root: ``python kernels/expert/gemm.fp8/sm_90a/gen.py``. See NOTES.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository root
from scripts.expert_gen import generate  # noqa: E402  (harness-side: not in the kernels room)

if __name__ == "__main__":
    meta = generate(
        Path(__file__).resolve().parent, "gemm.fp8", "sm_90a", "gemm_kernel",
        constexprs={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8},
        num_warps=4, num_stages=3,  # 4 warps per partition: 384 threads in all
        # grid = cdiv(M, 512) * cdiv(N, 1024): 128 persistent programs at 8192^3 (2048 tiles of
        # 128 x 256: 16 each, no partial wave); these values feed the grid only
        # Triton 3.9's warp-specialized code has no proxy fence after its mbarrier inits (a real
        # hazard: the TMA signals them through the async proxy): gen.py adds one (NOTES.md)
        fence_inits=True,
        grid_meta={"BLOCK_M": 512, "BLOCK_N": 1024, "BLOCK_K": 128, "GROUP_M": 8},
        summary="persistent, warp-specialized (a TMA producer warpgroup at 40 registers, two fp8 wgmma "
                "consumer warpgroups at 232, each m64n256 with its own epilogue), a 3-stage mbarrier ring, fp8 wgmma, 128x256x128 tiles, TMA-store epilogue "
                "(Triton formulation)")
    print({k: meta.get(k) for k in ("shared", "num_warps", "global_scratch_size", "expert_fences")})
