"""Role branches of warp-specialized code in hand-written style: one predicate register reused
for every test, and roles derived from ``%tid.x`` by shifts (warp = tid >> 5, warpgroup =
tid >> 7). The path solver must correlate them (``verifier/analysis/dataflow.py``: a compare in
the branch's own block decides a reused predicate; an unsigned ``ne 0`` is ``[1, inf)``;
ranges flow back through logical shifts), so that an allocation and its release under the same
role, or a generic write and a wgmma in disjoint roles, are not flagged -- and a real mismatch
of roles still is."""

from __future__ import annotations

import verifier

_TC = """
.version 8.7
.target sm_100a
.address_size 64
.extern .shared .align 16 .b8 smem[];
.visible .entry k(.param .u64 p)
.reqntid 128, 1, 1
{{
	.reg .pred %p0;
	.reg .b32 %r<8>;
	.reg .b32 %r_tid, %r_warp, %r_t;
	mov.u32 %r_tid, %tid.x;
	shr.u32 %r_warp, %r_tid, 5;
	mov.u32 %r1, smem;
	setp.ne.u32 %p0, %r_warp, {alloc_warp};
	@%p0 bra $L_rest;
	tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;
	tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
$L_rest:
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	ld.shared.b32 %r_t, [%r1];
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	setp.{cmp}.u32 %p0, %r_warp, {warp};
	@%p0 bra $L_exit;
	tcgen05.fence::after_thread_sync;
	tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r_t, 32;
$L_exit:
	exit;
}}
"""


def _rules(ptx: str, arch: str) -> dict[str, str]:
    rep = verifier.verify(ptx, arch=arch)
    return {f.rule: f.severity for f in rep.findings if f.severity in ("error", "warning")}


def test_alloc_and_dealloc_by_the_same_warp_through_a_reused_predicate_is_clean():
    # warp 0 allocates (branch on warp != 0) and warp 0 deallocates (branch on warp != 0 again)
    assert _rules(_TC.format(cmp="ne", warp=0, alloc_warp=0), "sm_100a") == {}


def test_alloc_and_dealloc_by_a_warp_other_than_warp_0_is_clean():
    # red team round 7 (2026-12-04): warp 5 (the MMA warp of a warp-specialized kernel)
    # allocates and deallocates; 'warp != 5' is no interval, so the solver keeps the excluded
    # value (dataflow._Assume: ("x", reg, 5)) and the path 'skip the alloc, do the dealloc' is
    # infeasible (TA5 was an error)
    for w in (1, 3, 5):
        ptx = _TC.format(cmp="ne", warp=w, alloc_warp=w).replace(".reqntid 128", ".reqntid 192")
        assert _rules(ptx, "sm_100a") == {}, w
    # and the excluded value does not hide a real mismatch: warp 5 allocates, warp 4 frees
    got = _rules(_TC.format(cmp="ne", warp=4, alloc_warp=5).replace(".reqntid 128",
                                                                    ".reqntid 192"), "sm_100a")
    assert got.get("TA5") == "error" and got.get("TA4") == "error", got


def test_dealloc_by_another_warp_than_the_allocating_one_is_still_an_error():
    # warp 1 deallocates what warp 0 allocated: warp 0 leaks (TA4), warp 1 frees nothing (TA5)
    got = _rules(_TC.format(cmp="ne", warp=1, alloc_warp=0), "sm_100a")
    assert got.get("TA4") == "error" and got.get("TA5") == "error", got


_WG = """
.version 8.7
.target sm_90a
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.visible .entry k(.param .u64 p)
.reqntid 256, 1, 1
{{
	.reg .pred %p0;
	.reg .b32 %r<8>;
	.reg .b32 %r_tid, %r_warp, %r_wg;
	.reg .b64 %rd<4>;
	.reg .f32 %f<4>;
	mov.u32 %r_tid, %tid.x;
	shr.u32 %r_warp, %r_tid, 5;
	shr.u32 %r_wg, %r_tid, 7;
	mov.u32 %r1, smem;
	setp.ne.u32 %p0, %r_warp, {writer};
	@%p0 bra $L_sync;
	mov.u32 %r2, 0;
	st.shared.b32 [%r1+8192], %r2;
$L_sync:
	bar.sync 0;
	setp.ne.u32 %p0, %r_wg, 1;
	@%p0 bra $L_exit;
	mov.b64 %rd1, 0;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {{%f0, %f1, %f2, %f3}}, %rd1, %rd1, 0, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
$L_exit:
	exit;
}}
"""


def test_generic_write_of_warp_0_does_not_reach_the_wgmma_of_warpgroup_1():
    # warp 0 is in warpgroup 0: its shared write never precedes warpgroup 1's wgmma
    assert "W5" not in _rules(_WG.format(writer=0), "sm_90a")


def test_generic_write_of_warp_4_reaches_the_wgmma_of_its_warpgroup():
    # warp 4 is in warpgroup 1: the write is handed to its own wgmma by a barrier, no fence
    assert _rules(_WG.format(writer=4), "sm_90a").get("W5") == "warning"


# ---- a hand-written ring's slot and phase: sequential guarded updates of reused registers --

_RING = """
.version 8.7
.target sm_90a
.address_size 64
.extern .shared .align 128 .b8 smem[];
.visible .entry k(.param .u64 p, .param .u32 n)
.reqntid 128, 1, 1
{{
	.reg .pred %p0;
	.reg .b32 %r<8>;
	.reg .b32 %r_s, %r_ph, %r_kt, %r_n, %r_full, %r_fb;
	.reg .b64 %rd<4>;
	ld.param.u32 %r_n, [n];
	ld.param.u64 %rd1, [p];
	mov.u32 %r_full, smem;
	mov.u32 %r0, %tid.x;
	setp.ne.u32 %p0, %r0, 0;
	@%p0 bra $L_sync;
	mbarrier.init.shared::cta.b64 [%r_full], 1;
	mbarrier.init.shared::cta.b64 [%r_full+8], 1;
	fence.mbarrier_init.release.cluster;
$L_sync:
	bar.sync 0;
	mov.u32 %r_s, 0;
	mov.u32 %r_ph, 0;
	mov.u32 %r_kt, 0;
$L_k:
	shl.b32 %r0, %r_s, 3;
	add.u32 %r_fb, %r_full, %r0;
	mov.u32 %r1, 0;
	@%p0 bra $L_wait;
	mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r_fb], 64;
	cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r_fb+64], [%rd1], 64, [%r_fb];
$L_wait:
	{wait}
	@!%p0 bra $L_wait;
	ld.shared.b32 %r2, [%r_fb+64];
	add.u32 %r_s, %r_s, 1;
	setp.eq.u32 %p0, %r_s, 2;
	@%p0 mov.u32 %r_s, 0;
	@%p0 xor.b32 %r_ph, %r_ph, 1;
	add.u32 %r_kt, %r_kt, 1;
	setp.lt.u32 %p0, %r_kt, %r_n;
	@%p0 bra $L_k;
	exit;
}}
"""
_OK_WAIT = "mbarrier.try_wait.parity.shared::cta.b64 %p0, [%r_fb], %r_ph;"
_BAD_WAIT = "xor.b32 %r3, %r_ph, 1;\n\tmbarrier.try_wait.parity.shared::cta.b64 %p0, [%r_fb], %r3;"


def _mb5(ptx: str) -> list[str]:
    rep = verifier.verify(ptx, arch="sm_90a", select={"MB5"})
    return [f.message for f in rep.findings if f.severity == "error"]


def test_ring_phase_flipped_under_a_guard_is_followed():
    """Slot ``s`` wraps at 2 and the phase flips under the same guard (``@%p0``, a reused
    predicate): the consumer's parities 0, 0, 1, 1, 0, ... per slot alternate -- clean."""
    assert _mb5(_RING.format(wait=_OK_WAIT)) == []


def test_ring_phase_inverted_is_an_error():
    """The consumer's first wait on each slot uses parity 1 (``phase ^ 1``): it passes on the
    fresh barrier before the bulk copy lands."""
    msgs = _mb5(_RING.format(wait=_BAD_WAIT))
    assert msgs and "parity 1" in msgs[0], msgs


_TC_GUARDED = """
.version 8.7
.target sm_100a
.address_size 64
.extern .shared .align 16 .b8 smem[];
.visible .entry k(.param .u64 p)
.reqntid 192, 1, 1
{{
	.reg .pred %p<12>;
	.reg .b32 %r<8>;
	.reg .b32 %r_tid, %r_warp, %r_t;
	mov.u32 %r_tid, %tid.x;
	shr.u32 %r_warp, %r_tid, 5;
	mov.u32 %r1, smem;
	setp.eq.u32 %p2, %r_warp, 1;
	@%p2 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 32;
	@%p2 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	ld.shared.b32 %r_t, [%r1];
	setp.eq.u32 %p3, %r_warp, 0;
	@%p3 bra $L_done;
	@%p2 bra $L_done;
	add.u32 %r2, %r_t, 1;
$L_done:
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	{free}
	tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r_t, 32;
$L_exit:
	exit;
}}
"""


def test_a_warp_guarded_alloc_and_a_branch_around_the_dealloc_correlate():
    # red team round 10 (2026-12-04): warp 1 allocates under '@%p2' and frees after
    # '@!%p2 bra' (the same predicate, or a fresh compare of the warp index): TA4 was an error
    # on the path 'allocate, then leave as warp 0' - the alloc's warp guard was not forked on,
    # so the solver never learnt that the allocating thread is warp 1 (CUTLASS's
    # 'if (warp_idx == 1) free()')
    for free in ("@!%p2 bra $L_exit;",
                 "setp.ne.u32 %p9, %r_warp, 1;\n\t@%p9 bra $L_exit;"):
        assert _rules(_TC_GUARDED.format(free=free), "sm_100a") == {}, free
    # a dealloc by warp 2 of what warp 1 allocated is still both errors
    got = _rules(_TC_GUARDED.format(free="setp.ne.u32 %p9, %r_warp, 2;\n\t@%p9 bra $L_exit;"),
                 "sm_100a")
    assert got.get("TA4") == "error" and got.get("TA5") == "error", got


_ROLE_UNI = """
.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
.reqntid 256, 1, 1
{{
	.reg .pred %p<4>;
	.reg .b32 %r<8>;
	mov.u32 %r1, %tid.x;
	shr.u32 %r2, %r1, 7;
	setp.eq.u32 %p1, %r2, 0;
	{branch}
	bar.sync 1, 128;
	bra.uni $L_exit;
$L_producer:
	bar.sync 2, 128;
$L_exit:
	exit;
}}
"""


def test_a_bra_uni_role_dispatch_is_warp_uniform_not_cta_uniform():
    # '@%p bra.uni' promises the branch does not diverge inside a warp (PTX ISA 9.1 bra); the
    # warpgroups still go different ways, so the consumers' 'bar.sync 1, 128' is reached by
    # 128 of the 256 threads (B3 "all 256 threads reach this barrier" was an error: red team
    # round 10, nvcc's and CUTLASS's role dispatch)
    for branch in ("@%p1 bra.uni $L_producer;", "@%p1 bra $L_producer;"):
        assert _rules(_ROLE_UNI.format(branch=branch), "sm_90a") == {}, branch
    # with no role branch every thread reaches the count-128 barrier: still B3
    got = _rules(_ROLE_UNI.format(branch=""), "sm_90a")
    assert got.get("B3") == "error", got
