"""Writes kernel.ptx and launch.yaml of the expert flash_attention.noncausal (sm_100a) from
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
        Path(__file__).resolve().parent, "flash_attention.noncausal", "sm_100a",
        "flash_attention_kernel",
        constexprs={"BLOCK_M": 128, "BLOCK_N": 128},
        # 4 warps per partition: Triton 3.9 partitions the key loop for sm_100a into a 4-warp
        # softmax (default) partition, a 4-warp correction partition, and load, MMA and helper
        # warps: 384 threads in all (NOTES.md)
        num_warps=4, num_stages=2,
        # PTX 8.8: what Triton 3.6 stamps for sm_100a (its ptxas 12.9 takes it); tcgen05 needs 8.6
        max_ptx_version=88,
        # Triton 3.9's warp-specialized code has no proxy fence after its mbarrier inits (the TMA
        # and tcgen05.commit signal them through the async proxy): add one after each (NOTES.md)
        fence_inits=True,
        # nor any tcgen05.fence::before/after_thread_sync around the thread syncs that hand tensor
        # memory between its partitions (PTX ISA 9.0 section 9.7.16.6.4): add them (NOTES.md)
        fence_tcgen05=True,
        grid_meta={"BLOCK_M": 128, "BLOCK_N": 128},  # grid (cdiv(S, 128), B * H)
        summary=("warp-specialized for tcgen05 (TMA load warp, single-thread tcgen05.mma issue "
                 "with tcgen05.commit to mbarriers, S and O accumulators in tensor memory, a "
                 "4-warp softmax partition reading one S row per thread with tcgen05.ld and "
                 "writing P back to tensor memory with tcgen05.st, a 4-warp correction partition "
                 "rescaling O in tensor memory), 128x128 tiles (Triton formulation)"))
    print({k: meta.get(k) for k in ("shared", "num_warps", "global_scratch_size", "expert_fences",
                                  "expert_tcgen05_fences")})
