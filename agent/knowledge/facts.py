"""Per-architecture hardware facts for the prompt, each with its source.

A :class:`Fact` is one short statement a kernel writer needs (limits, shapes, operand rules,
peaks) and where it comes from: a section of the PTX ISA, a table of the CUDA C++ Programming
Guide, the CUDA Driver API reference, or an NVIDIA datasheet. Section *titles* are cited (they are
stable across PTX ISA versions; section numbers are not). A value the public documents do not
state is left out rather than guessed: query it at run time (the GPU worker reports SM count and
L2 size in its device summary).

Devices per target: ``sm_89`` -> L40S, ``sm_90a`` -> H100 SXM5 and H200 SXM (same GH100 compute),
``sm_100a`` -> B200 (HGX B200).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Fact", "FACTS", "PEAKS", "facts_for"]

_GUIDE_TABLE = ("CUDA C++ Programming Guide, table 'Technical Specifications per Compute "
                "Capability'")
_PTX = "PTX ISA"


@dataclass(frozen=True)
class Fact:
    """One sourced statement.

    Attributes:
        topic: short key (``smem``, ``wgmma``, ``tmem`` ...), used to order and select.
        text: the statement (one or two lines).
        source: where it is stated (document and section or table).
    """

    topic: str
    text: str
    source: str


_COMMON = [
    Fact("threads", "at most 1024 threads per CTA; a warp is 32 threads; 255 registers per "
         "thread at most; 64K 32-bit registers per SM and per CTA", _GUIDE_TABLE),
    Fact("smem-banks", "shared memory has 32 banks of 4 bytes; threads of a warp hitting "
         "different addresses in one bank serialise (broadcast when the address is the same)",
         "CUDA C++ Programming Guide, section 'Shared Memory' (compute capability 5.x and later)"),
    Fact("vector-ld", "ld/st take .v2 and .v4 vectors (16 bytes per thread at most for .b32 "
         "elements); the address must be aligned to the vector's size",
         f"{_PTX}, section 'Data Movement and Conversion Instructions: ld' and 'Vectors'"),
    Fact("shfl", "shfl.sync.{up,down,bfly,idx}.b32 exchanges 32-bit registers within a warp "
         "under a member mask; a butterfly reduction over 32 lanes takes 5 steps",
         f"{_PTX}, section 'Data Movement and Conversion Instructions: shfl.sync'"),
]

FACTS: dict[str, list[Fact]] = {
    "sm_89": [
        Fact("device", "L40S: 142 SMs, 48 GB GDDR6 at 864 GB/s, 96 MB L2",
             "NVIDIA L40S datasheet"),
        Fact("smem", "shared memory: 100 KB per SM, 99 KB per CTA (opt-in above 48 KB); 1536 "
             "threads, 48 warps and 24 CTAs resident per SM", _GUIDE_TABLE + " (8.9)"),
        *_COMMON,
        Fact("mma", "tensor cores through mma.sync.aligned (warp-level): m16n8k16 for "
             ".f16/.bf16, m16n8k8 for .tf32, m16n8k32 for .e4m3/.e5m2 (sm_89), f32 accumulators "
             "in registers; ldmatrix loads the fragments from shared memory",
             f"{_PTX}, section 'Warp Level Matrix Multiply-Accumulate Instructions: mma'"),
        Fact("cp.async", "cp.async.cg.shared.global copies 16 bytes global->shared without "
             "registers; cp.async.commit_group / cp.async.wait_group N pipeline the stages",
             f"{_PTX}, section 'Data Movement and Conversion Instructions: cp.async'"),
    ],
    "sm_90a": [
        Fact("device", "H100 SXM5: 132 SMs, 80 GB HBM3 at 3.35 TB/s, 50 MB L2; H200 SXM: the "
             "same compute with 141 GB HBM3e at 4.8 TB/s",
             "NVIDIA H100 Tensor Core GPU datasheet; NVIDIA H200 Tensor Core GPU datasheet"),
        Fact("smem", "shared memory: 228 KB per SM, 227 KB per CTA (opt-in above 48 KB); 2048 "
             "threads, 64 warps and 32 CTAs resident per SM", _GUIDE_TABLE + " (9.0)"),
        *_COMMON,
        Fact("cluster", "thread-block clusters of up to 8 CTAs (16 with the non-portable size "
             "attribute on H100); CTAs of a cluster read and write each other's shared memory "
             "(shared::cluster, mapa)",
             "CUDA C++ Programming Guide, section 'Thread Block Clusters'"),
        Fact("wgmma", "wgmma.mma_async.sync.aligned runs on a warpgroup (4 consecutive warps, "
             "128 threads): shape m64nNk16 for .f16/.bf16 (N = 8..256, step 8), m64nNk8 for "
             ".tf32, m64nNk32 for .e4m3/.e5m2 and .s8/.u8; A from registers or a shared-memory "
             "descriptor, B from a shared-memory descriptor, D (f32: N/2 registers per thread "
             "for m64nN) in registers",
             f"{_PTX}, section 'Asynchronous Warpgroup Level Matrix Multiply-Accumulate "
             "Instructions: wgmma.mma_async'"),
        Fact("wgmma-sync", "wgmma.fence before the first wgmma touching registers, then "
             "wgmma.commit_group and wgmma.wait_group N before reading D or reusing A/B "
             "buffers",
             f"{_PTX}, section 'wgmma.fence', 'wgmma.commit_group', 'wgmma.wait_group'"),
        Fact("wgmma-desc", "the 64-bit matrix descriptor: start address, leading- and "
             "stride-dimension byte offsets (each >> 4), and the swizzle mode (none, 32B, 64B, "
             "128B) matching how the tile was written to shared memory",
             f"{_PTX}, section 'Matrix Descriptor Format' (wgmma)"),
        Fact("tma", "cp.async.bulk.tensor.Nd (N = 1..5) copies a box global->shared and "
             "signals an mbarrier with complete_tx::bytes; box dimensions <= 256 elements, the "
             "inner box dimension x element size a multiple of 16 bytes and, with swizzle, at "
             "most the swizzle span (32/64/128 B); global address 16-byte aligned, strides "
             "multiples of 16 bytes; shared destination 128-byte aligned",
             "CUDA Driver API, cuTensorMapEncodeTiled; " + _PTX + ", section "
             "'cp.async.bulk.tensor'"),
        Fact("mbarrier", "mbarrier objects are 8-byte, 8-byte-aligned shared-memory words: "
             "init with the arrival count, arrive.expect_tx adds the bytes a TMA will deliver, "
             "try_wait.parity spins on the phase bit",
             f"{_PTX}, section 'Parallel Synchronization and Communication Instructions: "
             "mbarrier'"),
        Fact("setmaxnreg", "setmaxnreg.{inc,dec}.sync.aligned.u32 N (24..256, a multiple of 8) "
             "moves registers between warpgroups: producers drop to few, consumers take more",
             f"{_PTX}, section 'Miscellaneous Instructions: setmaxnreg'"),
    ],
    "sm_100a": [
        Fact("device", "B200: 180 GB HBM3e at about 8 TB/s per GPU (DGX B200: 1,440 GB and "
             "64 TB/s for 8 GPUs); SM count and L2 size: read them from the device",
             "NVIDIA DGX B200 datasheet"),
        Fact("smem", "shared memory: 228 KB per SM, 227 KB per CTA (opt-in above 48 KB); 2048 "
             "threads, 64 warps and 32 CTAs resident per SM", _GUIDE_TABLE + " (10.0)"),
        *_COMMON,
        Fact("cluster", "thread-block clusters of up to 8 CTAs (portable size); CTA pairs "
             "(cta_group::2) share one tcgen05.mma",
             "CUDA C++ Programming Guide, section 'Thread Block Clusters'; " + _PTX
             + ", section 'TensorCore 5th Generation Family Instructions'"),
        Fact("tmem", "tensor memory: 128 lanes x 512 columns of 32-bit cells per CTA; "
             "tcgen05.alloc takes a power-of-two column count from 32 to 512, every allocation "
             "must be freed by tcgen05.dealloc before exit (then relinquish_alloc_permit); warp "
             "w of a warpgroup reaches lanes 32*(w%4) .. 32*(w%4)+31 with tcgen05.ld/st",
             f"{_PTX}, section 'Tensor Memory' and 'tcgen05.alloc'"),
        Fact("tcgen05", "tcgen05.mma.cta_group::1: M = 64 or 128; N a multiple of 8 (M=64) or "
             "16 (M=128) up to 256; K = 16 for .kind::f16, 8 for .kind::tf32, 32 for "
             ".kind::f8f6f4; D in tensor memory, A in tensor memory or a shared-memory "
             "descriptor, B a shared-memory descriptor; issued by one thread",
             f"{_PTX}, section 'TensorCore 5th Generation Family Instructions: tcgen05.mma'"),
        Fact("tcgen05-sync", "tcgen05.commit.cta_group::1.mbarrier::arrive::one makes an "
             "mbarrier track the completion of the issued tcgen05.mma; wait on it before "
             "tcgen05.ld of D; tcgen05.wait::ld before using the loaded registers",
             f"{_PTX}, section 'tcgen05.commit' and 'tcgen05.wait'"),
        Fact("tma", "cp.async.bulk.tensor.Nd as on sm_90a: boxes <= 256 elements per "
             "dimension, inner box bytes a multiple of 16 and within the swizzle span, 16-byte "
             "aligned global address and strides, completion through an mbarrier",
             "CUDA Driver API, cuTensorMapEncodeTiled; " + _PTX + ", section "
             "'cp.async.bulk.tensor'"),
        Fact("mbarrier", "mbarrier: 8-byte shared-memory words; arrive.expect_tx + "
             "try_wait.parity as on sm_90a",
             f"{_PTX}, section 'Parallel Synchronization and Communication Instructions: "
             "mbarrier'"),
    ],
}
"""Target -> facts, in prompt order."""

PEAKS: dict[str, dict[str, float]] = {
    # dense (no sparsity) TFLOP/s and bandwidth TB/s from the datasheets named in FACTS
    "sm_89": {"fp16": 362.05, "bf16": 362.05, "fp8": 733.0, "fp32": 91.6, "tb_s": 0.864},
    "sm_90a": {"fp16": 989.4, "bf16": 989.4, "fp8": 1978.9, "tf32": 494.7, "fp32": 66.9,
               "tb_s": 3.35},
    "sm_100a": {"fp16": 2250.0, "bf16": 2250.0, "fp8": 4500.0, "tf32": 1100.0, "tb_s": 8.0},
}
"""Target -> dtype -> dense peak TFLOP/s, and ``tb_s`` the DRAM bandwidth (TB/s): the machine
balance that decides memory- vs compute-bound (H100 SXM's bandwidth for sm_90a, the lower of
H100/H200). Sources: the datasheets named in :data:`FACTS` (sm_100a: half the HGX/DGX B200
datasheets' with-sparsity tensor rates, which is how NVIDIA states the dense ones)."""

_PEAK_SOURCE = {
    "sm_89": "NVIDIA L40S datasheet (dense rates)",
    "sm_90a": "NVIDIA H100 Tensor Core GPU datasheet, SXM (dense rates)",
    "sm_100a": "NVIDIA DGX B200 datasheet, per GPU (dense = half the sparse rates)",
}


def facts_for(arch: str) -> list[Fact]:
    """The facts of ``arch`` plus one line of peaks.

    Raises:
        ValueError: an arch without facts (the message lists the known ones).
    """
    if arch not in FACTS:
        raise ValueError(f"no hardware facts for {arch!r}; known: {', '.join(FACTS)}")
    p = PEAKS[arch]
    rates = ", ".join(f"{k} {v:g}" for k, v in p.items() if k != "tb_s")
    return [*FACTS[arch],
            Fact("peaks", f"dense peak TFLOP/s: {rates}; DRAM {p['tb_s']:g} TB/s",
                 _PEAK_SOURCE[arch])]
