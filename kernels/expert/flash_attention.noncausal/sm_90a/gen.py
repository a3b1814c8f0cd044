"""Writes kernel.ptx and launch.yaml of the expert flash_attention.noncausal (sm_90a) from
formulation.py.

Run from the repository root: ``python kernels/expert/flash_attention.noncausal/sm_90a/gen.py``.
See NOTES.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository root
from scripts.expert_gen import generate  # noqa: E402  (harness-side: not in the kernels room)

if __name__ == "__main__":
    meta = generate(
        Path(__file__).resolve().parent, "flash_attention.noncausal", "sm_90a",
        "flash_attention_kernel",
        constexprs={"BLOCK_M": 128, "BLOCK_N": 128},
        # 4 warps per partition: a TMA producer warpgroup and two consumer warpgroups of 64 query
        # rows each (Triton splits BLOCK_M between them): 384 threads in all
        num_warps=4, num_stages=2,
        # Triton 3.9's warp-specialized code has no proxy fence after its mbarrier inits (the TMA
        # signals them through the async proxy): add one after each (NOTES.md)
        fence_inits=True,
        # FlashAttention-3's ping-pong: the two consumers take turns on the tensor core (a token
        # passed with named barriers 4 and 5 around each wgmma group), so one's softmax runs while
        # the other's wgmma do; Triton would leave them free to run in phase (NOTES.md). Set
        # False to regenerate the unforced variant for a GPU comparison.
        pingpong=True,
        grid_meta={"BLOCK_M": 128, "BLOCK_N": 128},  # grid (cdiv(S, 128), B * H)
        summary=("warp-specialized (a TMA producer warpgroup at 40 registers, two consumer "
                 "warpgroups at 232, 64 query rows each, in ping-pong: they take turns on the "
                 "tensor core, so one's softmax overlaps the other's wgmma), device-side TMA "
                 "descriptors, a 2-stage K/V mbarrier ring, wgmma for QK^T and PV (P from "
                 "registers), 128x128 tiles (Triton formulation + gen.py's ping-pong barriers)"))
    print({k: meta.get(k) for k in ("shared", "num_warps", "global_scratch_size", "expert_fences",
                                  "expert_pingpong")})
