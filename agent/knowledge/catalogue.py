"""A catalogue of transformations that made hand-lowered kernels faster, with small PTX idioms.

Each :class:`Entry` says when it applies (kernel classes, the closer roofline bound, targets),
what to do and a PTX sketch (a few lines, register names illustrative). The entries come from the
study's agent (TAIC: operand decode into wgmma registers, window reuse, row-per-thread softmax,
TMA + warp-specialised pipelines, persistent tiles, epilogue fusion) and from the idioms of
hand-lowered candidates (vector widening, cache hints, fast exponentials); the instructions are
those of the PTX ISA sections named in ``source``.

Kernel classes (:func:`agent.knowledge.classify`): ``elementwise``, ``reduction`` (row-wise:
softmax, norms), ``gemm`` (a ``tt.dot`` and no second dot feeding on a softmax), ``attention``
(two dots around an exponential and a row max).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Entry", "CATALOGUE"]

ALL_ARCHS = ("sm_89", "sm_90a", "sm_100a")


@dataclass(frozen=True)
class Entry:
    """One transformation.

    Attributes:
        id: stable key (kebab case).
        title: one line.
        classes: kernel classes it applies to.
        bounds: closer roofline bounds it helps (``memory``, ``compute``).
        archs: targets whose PTX has the instructions.
        text: what to do and why (one to three sentences).
        ptx: a PTX idiom (a few lines).
        source: where the instructions and the idea are documented.
    """

    id: str
    title: str
    classes: tuple[str, ...]
    bounds: tuple[str, ...]
    archs: tuple[str, ...]
    text: str
    ptx: str
    source: str


CATALOGUE: tuple[Entry, ...] = (
    Entry(
        "vector-widening", "Widen global accesses to 16 bytes per thread",
        ("elementwise", "reduction"), ("memory",), ALL_ARCHS,
        "Give each thread 4 consecutive fp32 (8 fp16) elements and move them with one .v4 "
        "load/store; fewer instructions per byte keep more bytes in flight. Keep the tail "
        "predicated and the address 16-byte aligned.",
        "ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4];\n"
        "st.global.v4.f32 [%rd8], {%f5, %f6, %f7, %f8};",
        "PTX ISA, 'Data Movement and Conversion Instructions: ld' (vectors); the study"),
    Entry(
        "cache-hints", "Stream with cache-eviction hints",
        ("elementwise", "reduction"), ("memory",), ALL_ARCHS,
        "Data read once should not evict reused data: load it with L1::no_allocate and an "
        "evict_first L2 policy; keep weights or a reused row with evict_last.",
        "createpolicy.fractional.L2::evict_first.b64 %rd9, 1.0;\n"
        "ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%f1, %f2, %f3, %f4}, [%rd4], %rd9;",
        "PTX ISA, 'ld' (eviction priority, L2::cache_hint) and 'createpolicy'"),
    Entry(
        "row-per-thread", "One row per thread (or warp) for row-wise reductions",
        ("reduction",), ("memory", "compute"), ALL_ARCHS,
        "When a row fits in registers, let one thread (short rows) or one warp own it: the max "
        "and the sum stay in registers and warp shuffles replace shared memory and bar.sync; "
        "read the row once, write it once.",
        "shfl.sync.bfly.b32 %r5, %r4, 16, 31, -1;\n"
        "max.f32 %f2, %f1, %f3;   // 5 butterfly steps: 16, 8, 4, 2, 1",
        "PTX ISA, 'shfl.sync'; the study (row-per-thread softmax)"),
    Entry(
        "fast-exp", "Exponentials as ex2.approx on pre-scaled inputs",
        ("reduction", "attention"), ("compute", "memory"), ALL_ARCHS,
        "exp(x) = 2^(x * log2 e): fold log2 e into the scale that is already applied (softmax "
        "temperature, 1/sqrt(d)) and use one ex2.approx.ftz.f32 per element.",
        "mul.f32 %f2, %f1, 0f3FB8AA3B;   // log2(e)\nex2.approx.ftz.f32 %f3, %f2;",
        "PTX ISA, 'Floating Point Instructions: ex2'"),
    Entry(
        "online-softmax", "Online softmax in registers between the two products",
        ("attention",), ("compute", "memory"), ALL_ARCHS,
        "Keep the running row max m and sum l in registers; per key block rescale the output "
        "accumulator by 2^(m_old - m_new) only when the max changed, and divide by l once at "
        "the end.",
        "max.f32 %f10, %f10, %f11;          // m_new\nsub.f32 %f12, %f13, %f10;\n"
        "ex2.approx.ftz.f32 %f14, %f12;     // rescale factor\nmul.f32 %f20, %f20, %f14;",
        "the study; FlashAttention-2 (Dao, 2023)"),
    Entry(
        "wgmma-register-a", "Decode or convert operands straight into wgmma A registers",
        ("gemm", "attention"), ("compute", "memory"), ("sm_90a",),
        "When A needs work before the product (dequantise, unpack bits, scale, or the P of "
        "attention), produce it in registers in the wgmma A-fragment layout and issue wgmma "
        "with A from registers: no round trip through shared memory.",
        "wgmma.fence.sync.aligned;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%f1, ..., %f64}, "
        "{%r1, %r2, %r3, %r4}, %rd_bdesc, 1, 1, 1, 1;\n"
        "wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;",
        "PTX ISA, 'wgmma.mma_async' (register A operand); the study (operand decode into "
        "wgmma registers)"),
    Entry(
        "tma-warp-specialized", "TMA loads in a producer warp, an mbarrier ring, consumers on "
        "the tensor cores",
        ("gemm", "attention"), ("compute", "memory"), ("sm_90a", "sm_100a"),
        "Split the CTA: one producer warp issues cp.async.bulk.tensor into an S-stage ring of "
        "shared buffers, each with a full and an empty mbarrier; consumer warpgroups wait on "
        "full, run the MMAs and arrive on empty. setmaxnreg moves registers to the consumers.",
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r_full], 32768;\n"
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[%r_smem], [%rd_tmap, {%r_x, %r_y}], [%r_full];\n"
        "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r_full], %r_phase;",
        "PTX ISA, 'cp.async.bulk.tensor', 'mbarrier', 'setmaxnreg'; the study"),
    Entry(
        "tcgen05-pipeline", "tcgen05.mma into tensor memory, one issuing thread, "
        "commit-to-mbarrier",
        ("gemm", "attention"), ("compute", "memory"), ("sm_100a",),
        "Allocate the accumulator in tensor memory once, let one thread issue tcgen05.mma per "
        "K step and tcgen05.commit to an mbarrier that frees the shared stage; the epilogue "
        "warps tcgen05.ld the accumulator. Free the columns before exit.",
        "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r_slot], 128;\n"
        "tcgen05.mma.cta_group::1.kind::f16 [%r_tmem], %rd_adesc, %rd_bdesc, %r_idesc, %p_acc;\n"
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r_empty];\n"
        "tcgen05.ld.sync.aligned.32x32b.x32.b32 {%r1, ..., %r32}, [%r_tmem];\n"
        "tcgen05.wait::ld.sync.aligned;",
        "PTX ISA, 'TensorCore 5th Generation Family Instructions'"),
    Entry(
        "persistent-tiles", "Persistent CTAs over a tile queue",
        ("gemm", "attention"), ("compute",), ALL_ARCHS,
        "Launch one CTA per SM (or per resident slot) and loop over output tiles: the prologue, "
        "barrier set-up and tensor-memory allocation are paid once, and the next tile's loads "
        "overlap the current epilogue. The grid must still cover every tile.",
        "mov.u32 %r_tile, %ctaid.x;\n$L_next:\n  setp.ge.u32 %p9, %r_tile, %r_ntiles;\n"
        "  @%p9 bra $L_done;\n  // ... tile ...\n  add.u32 %r_tile, %r_tile, %nctaid.x;\n"
        "  bra $L_next;",
        "the study (persistent tiles); CUTLASS persistent kernels"),
    Entry(
        "epilogue-fusion", "Fuse the epilogue while the accumulator is in registers",
        ("gemm", "attention"), ("memory", "compute"), ALL_ARCHS,
        "Apply bias, activation (SiLU, ReLU), scaling and the dtype conversion to the "
        "accumulator registers, pack two halves per 32-bit register and store 16 bytes per "
        "thread; never write the fp32 product to global memory and read it back.",
        "cvt.rn.f16x2.f32 %r20, %f2, %f1;\nst.global.v4.b32 [%rd30], {%r20, %r21, %r22, %r23};",
        "PTX ISA, 'cvt' (packed f16x2); the study (epilogue fusion)"),
    Entry(
        "window-reuse", "Reuse the input window across neighbouring outputs",
        ("gemm",), ("memory", "compute"), ALL_ARCHS,
        "In convolutions (implicit GEMM) neighbouring outputs read overlapping input windows: "
        "load the window once into shared memory or registers and slide over it instead of "
        "re-reading global memory per output position.",
        "ld.shared.v4.f32 {%f1, %f2, %f3, %f4}, [%r_win + 16];  // slide: offset, not reload",
        "the study (window reuse)"),
    Entry(
        "cp-async-pipeline", "Multi-stage cp.async pipeline into shared memory",
        ("gemm", "attention"), ("memory", "compute"), ("sm_89",),
        "Without TMA, copy the next K tiles with cp.async (16 bytes per thread) while the "
        "tensor cores work on the current one; wait_group keeps S-1 stages in flight.",
        "cp.async.cg.shared.global [%r_s], [%rd_g], 16;\ncp.async.commit_group;\n"
        "cp.async.wait_group 1;\nbar.sync 0;",
        "PTX ISA, 'cp.async', 'cp.async.commit_group', 'cp.async.wait_group'"),
    Entry(
        "more-work-per-thread", "More elements per thread, fewer CTAs",
        ("elementwise",), ("memory",), ALL_ARCHS,
        "Index arithmetic and the launch tail cost relatively more on short kernels: give each "
        "thread several vectors (unrolled, independent loads first) so the grid is a few waves "
        "of full CTAs.",
        "ld.global.v4.f32 {%f1, ...}, [%rd4];\nld.global.v4.f32 {%f5, ...}, [%rd4 + 2048];  "
        "// both loads issue before the first use",
        "the study; CUDA C++ Best Practices Guide, 'Memory Optimizations'"),
)
"""Every entry, in prompt order among equally relevant ones."""
