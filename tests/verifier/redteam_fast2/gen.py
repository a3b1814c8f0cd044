"""Writes the hand-written PTX kernels of this directory (correct ones + buggy twins)."""
import pathlib
HERE = pathlib.Path(__file__).parent
HDR = ".version 8.4\n.target {arch}\n.address_size 64\n\n"

# ---- 1: bulk-copy ring, 2 stages, 4 tiles, mbarrier expect_tx + try_wait.parity loop ----
def ring(expect=1024, parity="ok"):
    # parity "ok": phase flips when the stage index wraps (every 2nd iteration)
    # parity "flip": loop-carried phase register xor'ed every iteration (wrong with 2 stages)
    upd = ("  and.b32 %r9, %r5, 1;\n  setp.eq.u32 %p3, %r9, 1;\n  @%p3 xor.b32 %r6, %r6, 1;\n"
           if parity == "ok" else "  xor.b32 %r6, %r6, 1;\n")
    return HDR.format(arch="sm_90a") + f""".visible .entry ring(.param .u64 in, .param .u64 out)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b32 %r<32>;
  .reg .b64 %rd<32>;
  .reg .f32 %f<8>;
  .shared .align 128 .b8 buf[2048];
  .shared .align 8 .b64 bar[2];

  mov.u32 %r0, %tid.x;
  ld.param.u64 %rd0, [in];
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd0, %rd0;
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, buf;
  mov.u32 %r2, bar;
  setp.eq.u32 %p0, %r0, 0;
  @!%p0 bra INIT_DONE;
  mbarrier.init.shared::cta.b64 [%r2], 1;
  add.u32 %r3, %r2, 8;
  mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.mbarrier_init.release.cluster;
INIT_DONE:
  bar.sync 0;
  mov.f32 %f0, 0f00000000;
  mov.u32 %r5, 0;          // tile
  mov.u32 %r6, 0;          // phase (loop-carried)
LOOP:
  and.b32 %r7, %r5, 1;     // stage
  shl.b32 %r8, %r7, 3;
  add.u32 %r10, %r2, %r8;  // &bar[stage]
  shl.b32 %r11, %r7, 10;
  add.u32 %r12, %r1, %r11; // &buf[stage]
  @!%p0 bra ISSUED;
  fence.proxy.async.shared::cta;
  mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r10], {expect};
  mul.wide.u32 %rd6, %r5, 1024;
  add.u64 %rd7, %rd0, %rd6;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r12], [%rd7], 1024, [%r10];
ISSUED:
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r10], %r6;
  @!%p1 bra WAIT;
  shl.b32 %r13, %r0, 3;
  add.u32 %r14, %r12, %r13;
  ld.shared.v2.f32 {{%f1, %f2}}, [%r14];
  add.f32 %f0, %f0, %f1;
  add.f32 %f0, %f0, %f2;
  bar.sync 0;              // every thread is done with this stage before it is refilled
{upd}  add.u32 %r5, %r5, 1;
  setp.lt.u32 %p2, %r5, 4;
  @%p2 bra LOOP;
  mov.u32 %r15, %ctaid.x;
  mad.lo.u32 %r16, %r15, 128, %r0;
  mul.wide.u32 %rd8, %r16, 4;
  add.u64 %rd9, %rd1, %rd8;
  st.global.f32 [%rd9], %f0;
  ret;
}}
"""

# ---- 2: wgmma m64n8k16 f16->f32, operands staged in smem by st.shared, 2 stages ----
def wgmma(stages=2, wait=1):
    # stage bytes: A 64x16 f16 = 2048, B 8x16 f16 = 256 -> 2304 per stage (use 2560)
    return HDR.format(arch="sm_90a") + f""".visible .entry wg(.param .u64 a, .param .u64 out)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<40>;
  .reg .f32 %f<8>;
  .shared .align 1024 .b8 st[5120];

  mov.u32 %r0, %tid.x;
  ld.param.u64 %rd0, [a];
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd0, %rd0;
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, st;
  mov.f32 %f0, 0f00000000;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f00000000;
  mov.f32 %f3, 0f00000000;
  mov.u32 %r5, 0;
LOOP:
  rem.u32 %r7, %r5, {stages};
  mul.lo.u32 %r8, %r7, 2560;
  add.u32 %r9, %r1, %r8;           // stage base
  bar.sync 0;                      // all warps past the previous wait_group
  // each thread copies 20 bytes... simplified: 16 B of A and 2 B-lanes of B
  mul.wide.u32 %rd2, %r5, 2560;
  add.u64 %rd3, %rd0, %rd2;
  shl.b32 %r10, %r0, 4;
  cvt.u64.u32 %rd4, %r10;
  add.u64 %rd5, %rd3, %rd4;
  ld.global.v4.b32 {{%r20, %r21, %r22, %r23}}, [%rd5];
  add.u32 %r11, %r9, %r10;
  st.shared.v4.b32 [%r11], {{%r20, %r21, %r22, %r23}};
  setp.lt.u32 %p1, %r0, 16;
  @!%p1 bra NOB;
  ld.global.v4.b32 {{%r24, %r25, %r26, %r27}}, [%rd5+2048];
  st.shared.v4.b32 [%r11+2048], {{%r24, %r25, %r26, %r27}};
NOB:
  fence.proxy.async.shared::cta;   // generic writes -> async-proxy (wgmma) reads
  bar.sync 0;
  // descriptors: start>>4 | LBO(128)>>4 <<16 | SBO(256)>>4 <<32
  shr.u32 %r12, %r9, 4;
  and.b32 %r12, %r12, 16383;
  cvt.u64.u32 %rd10, %r12;
  or.b64 %rd10, %rd10, 68720001024;   // (128>>4)<<16 | (256>>4)<<32
  add.u32 %r13, %r9, 2048;
  shr.u32 %r13, %r13, 4;
  and.b32 %r13, %r13, 16383;
  cvt.u64.u32 %rd11, %r13;
  or.b64 %rd11, %rd11, 68720001024;
  wgmma.fence.sync.aligned;
  wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {{%f0, %f1, %f2, %f3}}, %rd10, %rd11, 1, 1, 1, 0, 0;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned {wait};
  add.u32 %r5, %r5, 1;
  setp.lt.u32 %p2, %r5, 4;
  @%p2 bra LOOP;
  wgmma.wait_group.sync.aligned 0;
  mov.u32 %r15, %ctaid.x;
  mad.lo.u32 %r16, %r15, 128, %r0;
  mul.wide.u32 %rd8, %r16, 16;
  add.u64 %rd9, %rd1, %rd8;
  st.global.v4.f32 [%rd9], {{%f0, %f1, %f2, %f3}};
  ret;
}}
"""

# ---- 3: epilogue: st.shared tile -> fence.proxy.async -> bar.sync -> cp.async.bulk store ----
def store(fence=True, barsync=True):
    f = "  fence.proxy.async.shared::cta;\n" if fence else ""
    b = "  bar.sync 0;\n" if barsync else ""
    return HDR.format(arch="sm_90a") + f""".visible .entry epi(.param .u64 out)
.reqntid 128
{{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<16>;
  .reg .f32 %f<4>;
  .shared .align 128 .b8 tile[512];

  mov.u32 %r0, %tid.x;
  ld.param.u64 %rd0, [out];
  cvta.to.global.u64 %rd0, %rd0;
  cvt.rn.f32.u32 %f0, %r0;
  mov.u32 %r1, tile;
  shl.b32 %r2, %r0, 2;
  add.u32 %r3, %r1, %r2;
  st.shared.f32 [%r3], %f0;
{f}{b}  setp.eq.u32 %p0, %r0, 0;
  @!%p0 bra DONE;
  mov.u32 %r4, %ctaid.x;
  mul.wide.u32 %rd1, %r4, 512;
  add.u64 %rd2, %rd0, %rd1;
  cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1], 512;
  cp.async.bulk.commit_group;
  cp.async.bulk.wait_group.read 0;
DONE:
  ret;
}}
"""

FILES = {
    "ok_bulk_ring.ptx": ring(),
    "bug_parity_flip.ptx": ring(parity="flip"),
    "bug_expect_tx_short.ptx": ring(expect=512),
    "ok_wgmma_pipe.ptx": wgmma(),
    "bug_stage_reuse_wait2.ptx": wgmma(stages=2, wait=2),
    "ok_bulk_store.ptx": store(),
    "bug_store_no_proxy_fence.ptx": store(fence=False),
    "bug_store_no_barsync.ptx": store(barsync=False),
}
# ---- 4: sm_100a tcgen05: smem operands -> tcgen05.mma (M128 N16 K16) -> commit to mbarrier
#         -> wait -> tcgen05.ld.  bug: the tcgen05.ld before the mbarrier wait ----
def tc(wait=True):
    w = ("WAIT:\n  mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;\n  @!%p1 bra WAIT;\n"
         if wait else "")
    return HDR.replace("8.4", "8.7").format(arch="sm_100a") + f""".visible .entry tc(.param .u64 a, .param .u64 out)
.reqntid 128
{{
  .reg .pred %p<8>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<40>;
  .reg .f32 %f<8>;
  .shared .align 1024 .b8 ops[4608];
  .shared .align 8 .b64 bar;
  .shared .align 4 .b32 taddr_s;

  mov.u32 %r0, %tid.x;
  ld.param.u64 %rd0, [a];
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd0, %rd0;
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, ops;
  mov.u32 %r2, bar;
  mov.u32 %r3, taddr_s;
  shr.u32 %r4, %r0, 5;                 // warp
  setp.eq.u32 %p0, %r0, 0;
  setp.eq.u32 %p2, %r4, 0;
  @!%p2 bra ALLOC_DONE;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r3], 32;
  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
ALLOC_DONE:
  @!%p0 bra INIT_DONE;
  mbarrier.init.shared::cta.b64 [%r2], 1;
  fence.mbarrier_init.release.cluster;
INIT_DONE:
  // A 128x16 f16 (4096 B) + B 16x16 f16 (512 B)
  shl.b32 %r10, %r0, 4;
  cvt.u64.u32 %rd4, %r10;
  add.u64 %rd5, %rd0, %rd4;
  ld.global.v4.b32 {{%r20, %r21, %r22, %r23}}, [%rd5];
  add.u32 %r11, %r1, %r10;
  st.shared.v4.b32 [%r11], {{%r20, %r21, %r22, %r23}};
  ld.global.v4.b32 {{%r24, %r25, %r26, %r27}}, [%rd5+2048];
  st.shared.v4.b32 [%r11+2048], {{%r24, %r25, %r26, %r27}};
  setp.lt.u32 %p3, %r0, 32;
  @!%p3 bra NOB;
  ld.global.v4.b32 {{%r24, %r25, %r26, %r27}}, [%rd5+4096];
  st.shared.v4.b32 [%r11+4096], {{%r24, %r25, %r26, %r27}};
NOB:
  fence.proxy.async.shared::cta;
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  tcgen05.fence::after_thread_sync;
  ld.shared.u32 %r5, [%r3];            // TMEM base address
  @!%p0 bra ISSUED;
  // descriptors: start>>4 | LBO 128>>4 <<16 | SBO 256>>4 <<32 | version 1<<46
  shr.u32 %r12, %r1, 4;
  and.b32 %r12, %r12, 16383;
  cvt.u64.u32 %rd10, %r12;
  or.b64 %rd10, %rd10, 70437464178688;
  add.u32 %r13, %r1, 4096;
  shr.u32 %r13, %r13, 4;
  and.b32 %r13, %r13, 16383;
  cvt.u64.u32 %rd11, %r13;
  or.b64 %rd11, %rd11, 70437464178688;
  mov.u32 %r14, 134479888;             // idesc: D f32, A/B f16, N>>3=2 @17, M>>4=8 @24
  setp.ne.u32 %p4, %r0, 0;             // enable-input-d = false (fresh accumulator)
  tcgen05.mma.cta_group::1.kind::f16 [%r5], %rd10, %rd11, %r14, %p4;
  tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r2];
ISSUED:
{w}  tcgen05.fence::after_thread_sync;
  shl.b32 %r15, %r4, 21;               // warp w reads TMEM lanes 32w.. (lane << 16)
  add.u32 %r16, %r5, %r15;
  tcgen05.ld.sync.aligned.32x32b.x8.b32 {{%r30, %r31, %r32, %r33, %r34, %r35, %r36, %r37}}, [%r16];
  tcgen05.wait::ld.sync.aligned;
  mov.u32 %r17, %ctaid.x;
  mad.lo.u32 %r18, %r17, 128, %r0;
  mul.wide.u32 %rd8, %r18, 32;
  add.u64 %rd9, %rd1, %rd8;
  st.global.v4.b32 [%rd9], {{%r30, %r31, %r32, %r33}};
  st.global.v4.b32 [%rd9+16], {{%r34, %r35, %r36, %r37}};
  tcgen05.fence::before_thread_sync;
  bar.sync 0;
  @!%p2 bra FREED;
  tcgen05.fence::after_thread_sync;
  tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r5, 32;
FREED:
  ret;
}}
"""


FILES.update({"ok_tcgen05_commit_wait.ptx": tc(), "bug_tmem_ld_before_commit_wait.ptx": tc(wait=False)})
if __name__ == "__main__":
    for n, t in FILES.items():
        (HERE / n).write_text(t)
