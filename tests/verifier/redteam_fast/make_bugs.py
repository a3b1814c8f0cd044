"""Write the bug reproducers (issue 18, item 4 classes) as correct PTX + buggy twin into bugs/.

Each case is a small hand-written kernel in the idiom of public Hopper/Blackwell code (CUTLASS-
style TMA + mbarrier rings, `phase ^= 1`, warpgroup MMA, TMEM, clusters) and one textual
mutation. `<case>_ok.ptx` is correct (an error there is a false alarm); `<case>_bug.ptx` has the
bug (no error there is a miss). Run: python tests/verifier/redteam_fast/make_bugs.py
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def head(arch: str, name: str, ntid: int, extra: str = "") -> str:
    return f""".version 8.7
.target {arch}
.address_size 64

.extern .shared .align 1024 .b8 smem[];

.visible .entry {name}(
	.param .u64 {name}_p0,
	.param .u64 {name}_p1,
	.param .u32 {name}_p2
)
.reqntid {ntid}, 1, 1{extra}
{{
	.reg .pred 	%p<16>;
	.reg .b32 	%r<96>;
	.reg .b64 	%rd<32>;
	.reg .f32 	%f<64>;

	ld.param.u64 	%rd1, [{name}_p0];
	ld.param.u64 	%rd2, [{name}_p1];
	ld.param.u32 	%r90, [{name}_p2];
	mov.u32 	%r1, %tid.x;
	setp.eq.u32 	%p1, %r1, 0;
	mov.u32 	%r2, smem;
	add.u32 	%r3, %r2, 32768;
	shl.b32 	%r5, %r1, 2;
	add.u32 	%r6, %r2, %r5;
	mul.wide.u32 	%rd3, %r5, 1;
	add.s64 	%rd4, %rd2, %rd3;
"""


INIT1 = """	@%p1 mbarrier.init.shared::cta.b64 	[%r3], 1;
	fence.mbarrier_init.release.cluster;
	bar.sync 	0;
"""

WAIT = """WAIT{n}:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [%r3], {par};
	@!%p2 bra 	WAIT{n};
"""

# -- 1. parity as a loop-carried register flipped by xor (`phase ^= 1`) ---------------------
PARITY = head("sm_90a", "parity_loop", 128) + INIT1 + """	mov.u32 	%r10, 0;
	mov.u32 	%r11, 0;
	mov.f32 	%f1, 0f00000000;
LOOP:
	@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r3], 4096;
	@%p1 cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes 	[%r2], [%rd1], 4096, [%r3];
""" + WAIT.format(n=0, par="%r10") + """	ld.shared.f32 	%f2, [%r6];
	add.f32 	%f1, %f1, %f2;
	bar.sync 	0;
	xor.b32 	%r10, %r10, 1;
	add.u32 	%r11, %r11, 1;
	setp.lt.u32 	%p3, %r11, %r90;
	@%p3 bra 	LOOP;
	st.global.f32 	[%rd4], %f1;
	ret;
}
"""

# -- 2. generic smem writes -> TMA store needs fence.proxy.async ---------------------------
STORE = head("sm_90a", "tma_store_fence", 128) + """	mov.f32 	%f1, 0f3F800000;
	st.shared.f32 	[%r6], %f1;
	fence.proxy.async.shared::cta;
	bar.sync 	0;
	@%p1 cp.async.bulk.global.shared::cta.bulk_group 	[%rd2], [%r2], 512;
	@%p1 cp.async.bulk.commit_group;
	@%p1 cp.async.bulk.wait_group.read 	0;
	ret;
}
"""

# -- 3. consuming TMA data with no mbarrier wait -------------------------------------------
CONSUME = head("sm_90a", "tma_consume", 128) + INIT1 + """	@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r3], 512;
	@%p1 cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes 	[%r2], [%rd1], 512, [%r3];
""" + WAIT.format(n=0, par="0") + """	ld.shared.f32 	%f2, [%r6];
	st.global.f32 	[%rd4], %f2;
	ret;
}
"""

# -- 4. expect_tx bytes != bytes the copies complete (two copies on one barrier) -----------
EXPECT = head("sm_90a", "expect_tx_two", 128) + INIT1 + """	add.u32 	%r7, %r2, 4096;
	add.s64 	%rd5, %rd1, 4096;
	@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r3], 8192;
	@%p1 cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes 	[%r2], [%rd1], 4096, [%r3];
	@%p1 cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes 	[%r7], [%rd5], 4096, [%r3];
""" + WAIT.format(n=0, par="0") + """	ld.shared.f32 	%f2, [%r6];
	ld.shared.f32 	%f3, [%r6+4096];
	add.f32 	%f2, %f2, %f3;
	st.global.f32 	[%rd4], %f2;
	ret;
}
"""

WG_DESC = """	cvt.u64.u32 	%rd10, %r2;
	shr.u64 	%rd10, %rd10, 4;
	and.b64 	%rd10, %rd10, 16383;
	or.b64 	%rd10, %rd10, 4611686293305294848;
	add.u32 	%r8, %r2, 2048;
	cvt.u64.u32 	%rd11, %r8;
	shr.u64 	%rd11, %rd11, 4;
	and.b64 	%rd11, %rd11, 16383;
	or.b64 	%rd11, %rd11, 4611686293305294848;
"""
WGMMA = """	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 	{%f1, %f2, %f3, %f4}, %rd10, %rd11, %p4, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
"""

# -- 5. accumulator read with no wgmma.wait_group ------------------------------------------
WGWAIT = head("sm_90a", "wgmma_wait", 128) + INIT1 + """	@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r3], 4096;
	@%p1 cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes 	[%r2], [%rd1], 4096, [%r3];
""" + WAIT.format(n=0, par="0") + WG_DESC + """	setp.ne.u32 	%p4, %r90, 0;
	mov.f32 	%f1, 0f00000000;
	mov.f32 	%f2, 0f00000000;
	mov.f32 	%f3, 0f00000000;
	mov.f32 	%f4, 0f00000000;
""" + WGMMA + """	wgmma.wait_group.sync.aligned 	0;
	add.f32 	%f5, %f1, %f2;
	add.f32 	%f6, %f3, %f4;
	add.f32 	%f5, %f5, %f6;
	st.global.f32 	[%rd4], %f5;
	ret;
}
"""

# -- 6. CUTLASS-like ring: producer warp 4, consumer warpgroup 0, 2 stages full/empty -------
#    stage s data at smem + s*4096 ; full[s] at smem+32768+8s ; empty[s] at smem+32784+8s
RING = head("sm_90a", "ws_ring", 160) + """	shr.u32 	%r20, %r1, 5;
	@%p1 mbarrier.init.shared::cta.b64 	[%r3], 1;
	@%p1 mbarrier.init.shared::cta.b64 	[%r3+8], 1;
	@%p1 mbarrier.init.shared::cta.b64 	[%r3+16], 128;
	@%p1 mbarrier.init.shared::cta.b64 	[%r3+24], 128;
	fence.mbarrier_init.release.cluster;
	bar.sync 	0;
	mov.u32 	%r21, 0;
	mov.u32 	%r22, 0;
	mov.u32 	%r23, 0;
	setp.eq.u32 	%p5, %r20, 4;
	@%p5 bra 	PRODUCER;
// consumer warpgroup: wait full[s], wgmma, retire, release empty[s]
	setp.ne.u32 	%p4, %r90, 0;
	mov.f32 	%f1, 0f00000000;
	mov.f32 	%f2, 0f00000000;
	mov.f32 	%f3, 0f00000000;
	mov.f32 	%f4, 0f00000000;
CLOOP:
	shl.b32 	%r24, %r22, 3;
	add.u32 	%r25, %r3, %r24;
	add.u32 	%r26, %r25, 16;
CWAIT:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [%r25], %r23;
	@!%p2 bra 	CWAIT;
	shl.b32 	%r27, %r22, 12;
	add.u32 	%r28, %r2, %r27;
	cvt.u64.u32 	%rd10, %r28;
	shr.u64 	%rd10, %rd10, 4;
	and.b64 	%rd10, %rd10, 16383;
	or.b64 	%rd10, %rd10, 4611686293305294848;
	add.u32 	%r29, %r28, 2048;
	cvt.u64.u32 	%rd11, %r29;
	shr.u64 	%rd11, %rd11, 4;
	and.b64 	%rd11, %rd11, 16383;
	or.b64 	%rd11, %rd11, 4611686293305294848;
""" + WGMMA + """	wgmma.wait_group.sync.aligned 	0;
	mbarrier.arrive.shared::cta.b64 	_, [%r26];
	add.u32 	%r22, %r22, 1;
	setp.eq.u32 	%p6, %r22, 2;
	@%p6 xor.b32 	%r23, %r23, 1;
	@%p6 mov.u32 	%r22, 0;
	add.u32 	%r21, %r21, 1;
	setp.lt.u32 	%p3, %r21, %r90;
	@%p3 bra 	CLOOP;
	add.f32 	%f5, %f1, %f2;
	st.global.f32 	[%rd4], %f5;
	bra 	DONE;
// producer warp: one elected lane waits empty[s] (initial credit: parity 1), arms, copies
PRODUCER:
	setp.eq.u32 	%p7, %r1, 128;
	@!%p7 bra 	DONE;
	mov.u32 	%r23, 1;
PLOOP:
	shl.b32 	%r24, %r22, 3;
	add.u32 	%r25, %r3, %r24;
	add.u32 	%r26, %r25, 16;
PWAIT:
	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [%r26], %r23;
	@!%p2 bra 	PWAIT;
	shl.b32 	%r27, %r22, 12;
	add.u32 	%r28, %r2, %r27;
	mul.wide.u32 	%rd12, %r21, 4096;
	add.s64 	%rd13, %rd1, %rd12;
	mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r25], 4096;
	cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes 	[%r28], [%rd13], 4096, [%r25];
	add.u32 	%r22, %r22, 1;
	setp.eq.u32 	%p6, %r22, 2;
	@%p6 xor.b32 	%r23, %r23, 1;
	@%p6 mov.u32 	%r22, 0;
	add.u32 	%r21, %r21, 1;
	setp.lt.u32 	%p3, %r21, %r90;
	@%p3 bra 	PLOOP;
DONE:
	ret;
}
"""

# -- 7. named barrier between two warpgroups (WG1 produces smem, WG0 consumes) --------------
NAMED = head("sm_90a", "named_bar", 256) + """	setp.ge.u32 	%p5, %r1, 128;
	@!%p5 bra 	CONS;
	mov.f32 	%f1, 0f3F800000;
	st.shared.f32 	[%r6], %f1;
	bar.arrive 	1, 256;
	bra 	DONE;
CONS:
	bar.sync 	1, 256;
	ld.shared.f32 	%f2, [%r6+512];
	st.global.f32 	[%rd4], %f2;
DONE:
	ret;
}
"""

# -- 8. TMEM dealloc only after the MMA's commit arrived (sm_100a) -------------------------
TMEM = head("sm_100a", "tmem_dealloc", 128) + INIT1 + """	setp.lt.u32 	%p5, %r1, 32;
	add.u32 	%r4, %r2, 32776;
	@%p5 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 	[%r4], 32;
	@%p5 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
	tcgen05.fence::before_thread_sync;
	bar.sync 	0;
	tcgen05.fence::after_thread_sync;
	ld.shared.u32 	%r40, [%r4];
""" + WG_DESC + """	mov.u32 	%r41, 134742032;
	setp.ne.u32 	%p4, %r90, 0;
	@%p1 tcgen05.mma.cta_group::1.kind::f16 	[%r40], %rd10, %rd11, %r41, %p4;
	@%p1 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 	[%r3];
""" + WAIT.format(n=0, par="0") + """	tcgen05.fence::after_thread_sync;
	and.b32 	%r43, %r1, 96;
	shl.b32 	%r43, %r43, 16;
	add.u32 	%r44, %r40, %r43;
	tcgen05.ld.sync.aligned.32x32b.x1.b32 	{%r42}, [%r44];
	tcgen05.wait::ld.sync.aligned;
	st.global.u32 	[%rd4], %r42;
	tcgen05.fence::before_thread_sync;
	bar.sync 	0;
	tcgen05.fence::after_thread_sync;
	@%p5 tcgen05.dealloc.cta_group::1.sync.aligned.b32 	%r40, 32;
	ret;
}
"""

# -- 9. DSMEM read of the peer CTA, ordered by cluster barriers (cluster of 2) --------------
DSMEM = head("sm_90a", "dsmem_peer", 128, "\n.reqnctapercluster 2, 1, 1") + """	mov.u32 	%r30, %cluster_ctarank;
	xor.b32 	%r31, %r30, 1;
	cvt.rn.f32.u32 	%f1, %r30;
	st.shared.f32 	[%r6], %f1;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	mapa.shared::cluster.u32 	%r32, %r6, %r31;
	ld.shared::cluster.f32 	%f2, [%r32];
	st.global.f32 	[%rd4], %f2;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	ret;
}
"""

# -- 10. TMA store staging buffer reused for the next tile --------------------------------
REFILL = head("sm_90a", "store_refill", 128) + """	mov.f32 	%f1, 0f3F800000;
	st.shared.f32 	[%r6], %f1;
	fence.proxy.async.shared::cta;
	bar.sync 	0;
	@%p1 cp.async.bulk.global.shared::cta.bulk_group 	[%rd2], [%r2], 512;
	@%p1 cp.async.bulk.commit_group;
	@%p1 cp.async.bulk.wait_group.read 	0;
	bar.sync 	0;
	mov.f32 	%f2, 0f40000000;
	st.shared.f32 	[%r6], %f2;
	fence.proxy.async.shared::cta;
	bar.sync 	0;
	add.s64 	%rd5, %rd2, 512;
	@%p1 cp.async.bulk.global.shared::cta.bulk_group 	[%rd5], [%r2], 512;
	@%p1 cp.async.bulk.commit_group;
	@%p1 cp.async.bulk.wait_group.read 	0;
	ret;
}
"""


def tm_head(name: str) -> str:
    """head() plus a by-value 128-byte CUtensorMap parameter (Triton / CUTLASS host-descriptor
    style) whose generic address is in %rd21; tile coordinates (0, 0) in %r50/%r51."""
    h = head("sm_90a", name, 128).replace(f"	.param .u32 {name}_p2\n",
        f"	.param .u32 {name}_p2,\n	.param .align 64 .b8 {name}_tm[128]\n")
    return h + f"""	mov.u64 	%rd20, {name}_tm;
	cvta.param.u64 	%rd21, %rd20;
	mov.u32 	%r50, 0;
	mov.u32 	%r51, 0;
"""


# -- 3c. tensor-map TMA load consumed by ld.shared with no wait ----------------------------
TCONSUME = tm_head("tma_tensor_consume") + INIT1 + """	@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 	_, [%r3], 8192;
	@%p1 cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes 	[%r2], [%rd21, {%r50, %r51}], [%r3];
""" + WAIT.format(n=0, par="0") + """	ld.shared.f32 	%f2, [%r6];
	st.global.f32 	[%rd4], %f2;
	ret;
}
"""

# -- 2b. generic smem writes -> tensor-map TMA store -----------------------------------------
TSTORE = tm_head("tma_tensor_store") + """	mov.f32 	%f1, 0f3F800000;
	st.shared.f32 	[%r6], %f1;
	fence.proxy.async.shared::cta;
	bar.sync 	0;
	@%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group 	[%rd21, {%r50, %r51}], [%r2];
	@%p1 cp.async.bulk.commit_group;
	@%p1 cp.async.bulk.wait_group.read 	0;
	ret;
}
"""


def once(text: str, old: str, new: str) -> str:
    """Replace the single occurrence of ``old`` (an AssertionError names it otherwise)."""
    assert text.count(old) == 1, f"mutation anchor {old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


W0 = WAIT.format(n=0, par="0")
# (case, bug class, correct text, buggy text)
CASES = [
    ("c01_parity_xor_init", "parity flipped via xor", PARITY,
     once(PARITY, "	mov.u32 	%r10, 0;\n", "	mov.u32 	%r9, 0;\n	xor.b32 	%r10, %r9, 1;\n")),
    ("c01b_parity_xor_dropped", "parity flipped via xor", PARITY,
     once(PARITY, "xor.b32 	%r10, %r10, 1;", "xor.b32 	%r10, %r10, 0;")),
    ("c01c_ring_parity_xor", "parity flipped via xor", RING,
     once(RING, "	mov.u32 	%r23, 1;\nPLOOP:", "	mov.u32 	%r23, 1;\n	xor.b32 	%r23, %r23, 1;\nPLOOP:")),
    ("c02_fence_proxy_store", "fence.proxy.async removed before TMA store", STORE,
     once(STORE, "	fence.proxy.async.shared::cta;\n", "")),
    ("c03_wait_removed", "mbarrier wait removed before consuming TMA data", CONSUME,
     once(CONSUME, W0, "")),
    ("c03b_ring_wait_removed", "mbarrier wait removed before consuming TMA data", RING,
     once(RING, "CWAIT:\n	mbarrier.try_wait.parity.shared::cta.b64 	%p2, [%r25], %r23;\n	@!%p2 bra 	CWAIT;\n", "")),
    ("c02b_fence_proxy_tensor_store", "fence.proxy.async removed before TMA store", TSTORE,
     once(TSTORE, "	fence.proxy.async.shared::cta;\n", "")),
    ("c03c_tensor_wait_removed", "mbarrier wait removed before consuming TMA data", TCONSUME,
     once(TCONSUME, W0, "")),
    ("c03d_wgmma_no_mbar_wait", "mbarrier wait removed before consuming TMA data", WGWAIT,
     once(WGWAIT, W0, "")),
    ("c04_expect_tx_bytes", "wrong expect_tx bytes", EXPECT,
     once(EXPECT, "[%r3], 8192;", "[%r3], 4096;")),
    ("c05_wgmma_wait_removed", "wgmma.wait_group removed", WGWAIT,
     once(WGWAIT, "	wgmma.wait_group.sync.aligned 	0;\n", "")),
    ("c06_stage_release_early", "stage released before wgmma retires", RING,
     once(RING, "	wgmma.wait_group.sync.aligned 	0;\n	mbarrier.arrive.shared::cta.b64 	_, [%r26];\n",
          "	mbarrier.arrive.shared::cta.b64 	_, [%r26];\n	wgmma.wait_group.sync.aligned 	0;\n")),
    ("c07_named_bar_count", "named barrier with wrong count", NAMED,
     once(NAMED, "bar.sync 	1, 256;", "bar.sync 	1, 128;")),
    ("c08_tmem_dealloc_early", "TMEM dealloc before last MMA", TMEM,
     once(once(TMEM, "	@%p5 tcgen05.dealloc.cta_group::1.sync.aligned.b32 	%r40, 32;\n", ""),
          "	@%p1 tcgen05.commit", "	@%p5 tcgen05.dealloc.cta_group::1.sync.aligned.b32 	%r40, 32;\n	@%p1 tcgen05.commit")),
    ("c09_cluster_bar_dsmem", "cluster barrier removed before DSMEM access", DSMEM,
     once(DSMEM, "	barrier.cluster.arrive.release.aligned;\n	barrier.cluster.wait.acquire.aligned;\n	mapa",
          "	mapa")),
    ("c09b_cluster_bar_exit", "cluster barrier removed before exit", DSMEM,
     once(DSMEM, "	barrier.cluster.arrive.release.aligned;\n	barrier.cluster.wait.acquire.aligned;\n	ret;",
          "	ret;")),
    ("c10_store_src_refill", "TMA store source refilled before wait_group.read", REFILL,
     REFILL.replace("	@%p1 cp.async.bulk.wait_group.read 	0;\n	bar.sync 	0;\n", "	bar.sync 	0;\n", 1)),
    ("c10b_store_src_refill_nobar", "TMA store source refilled before wait_group.read", REFILL,
     REFILL.replace("	@%p1 cp.async.bulk.wait_group.read 	0;\n	bar.sync 	0;\n",
                    "	@%p1 cp.async.bulk.wait_group.read 	0;\n", 1)),
]


def main() -> None:
    out = HERE / "bugs"
    out.mkdir(exist_ok=True)
    for case, _cls, ok, bug in CASES:
        assert ok != bug, case
        (out / f"{case}_ok.ptx").write_text(ok)
        (out / f"{case}_bug.ptx").write_text(bug)
    print(f"wrote {2 * len(CASES)} files to {out}")


if __name__ == "__main__":
    main()
