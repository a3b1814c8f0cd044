"""Writes kernel.ptx and launch.yaml of the expert gemm_silu.fp8 (sm_90a) from formulation.py.

Run from the repository root: ``python kernels/expert/gemm_silu.fp8/sm_90a/gen.py``. See NOTES.md.
"""

from pathlib import Path

from kernels.expert._triton_gen import generate

if __name__ == "__main__":
    meta = generate(
        Path(__file__).resolve().parent, "gemm_silu.fp8", "sm_90a", "gemm_silu_kernel",
        constexprs={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 128, "GROUP_M": 8},
        num_warps=8, num_stages=3,
        # grid = cdiv(M, 512) * cdiv(N, 1024): 128 persistent programs at 8192^3 (2048 tiles of
        # 128 x 256: 16 each, no partial wave); these values feed the grid only
        grid_meta={"BLOCK_M": 512, "BLOCK_N": 1024, "BLOCK_K": 128, "GROUP_M": 8},
        summary="persistent warp-specialized TMA + mbarrier ring + fp8 wgmma, 128x256x128 tiles, "
                "3 stages, bias + SiLU fused before the TMA store (Triton formulation)")
    print({k: meta.get(k) for k in ("shared", "num_warps", "global_scratch_size")})
