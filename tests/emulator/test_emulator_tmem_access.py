"""TMEM access rules of the emulator (red team round 7, 2026-12-04): a warp reaches only the
32-lane slab of its position in the warpgroup; columns outside the CTA's allocation are an
illegal access; ``tcgen05.dealloc`` frees its columns for later allocations and a dealloc of
columns that are not allocated is a fault (PTX ISA 9.1 §9.7.16.7.1 and the tcgen05.ld / st
access restrictions). Each was silently accepted before (a wrong-slab kernel even matched its
reference) or, for an alloc after a dealloc, faulted on a correct kernel."""

from __future__ import annotations

import numpy as np
import pytest

from emulator import GlobalMemory, Launch, run_launch

# warp 0 allocates NCOL columns; every warp stores its thread id into TMEM lane 32 (w % 4) +
# laneid (its own slab: {lane}), column {col}, loads it back and writes it to out[tid]
PTX = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 pout)
.reqntid 128, 1, 1
{{
.reg .pred %p<4>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
.shared .align 4 .b32 tslot;
ld.param.u64 %rd1, [pout];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
mov.u32 %r9, tslot;
setp.eq.u32 %p1, %r2, 0;
@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], {ncol};
{relinquish}
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
ld.shared.b32 %r10, [%r9];
{lane}
shl.b32 %r11, %r11, 21;
add.u32 %r12, %r10, %r11;
tcgen05.st.sync.aligned.32x32b.x1.b32 [%r12+{col}], {{%r1}};
tcgen05.wait::st.sync.aligned;
tcgen05.ld.sync.aligned.32x32b.x1.b32 {{%r13}}, [%r12+{col}];
tcgen05.wait::ld.sync.aligned;
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd1, %rd3;
st.global.u32 [%rd4], %r13;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
{tail}
ret;
}}
"""
OWN_SLAB = "and.b32 %r11, %r2, 3;"
RELINQUISH = "@%p1 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;"
DEALLOC = "@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, {ncol};"


def _run(lane: str = OWN_SLAB, col: int = 0, ncol: int = 32, tail: str | None = None,
         relinquish: str = RELINQUISH):
    tail = DEALLOC.format(ncol=ncol) if tail is None else tail
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(128, np.uint32))
    res = run_launch(PTX.format(lane=lane, col=col, ncol=ncol, tail=tail, relinquish=relinquish),
                     Launch(grid=(1, 1, 1), threads=128, params={"pout": out.to_bytes(8, "little")},
                            arch="sm_100a"), gmem, filename="tm.ptx")
    return res, gmem.buffer("out").view(np.uint32)


def test_each_warp_in_its_own_slab_and_columns_is_correct():
    res, out = _run(col=31)
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert out.tolist() == list(range(128))


@pytest.mark.parametrize("lane", ["add.u32 %r11, %r2, 1;\nand.b32 %r11, %r11, 3;",  # w + 1
                                  "mov.u32 %r11, 0;"])                               # all slab 0
def test_a_warp_outside_its_lane_slab_is_a_fault(lane):
    res, _ = _run(lane=lane)
    assert res.status == "fault" and "outside its lanes" in res.message, res.message


def test_a_column_outside_the_allocation_is_a_fault():
    res, _ = _run(col=40)
    assert res.status == "fault" and "column 40, which is not allocated" in res.message


def test_dealloc_frees_the_columns_for_a_later_alloc():
    # 512 columns, freed, then 512 again (a bump allocator faulted: "only 0 free"); the permit
    # is relinquished after the last alloc only (TA6)
    again = (DEALLOC.format(ncol=512) + "\nbar.sync 0;\n"
             "@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 512;\n"
             + RELINQUISH + "\nbar.sync 0;\n" + DEALLOC.format(ncol=512))
    res, out = _run(ncol=512, tail=again, relinquish="")
    assert res.status == "ok" and res.findings == [], res.message
    assert out.tolist() == list(range(128))


def test_a_double_free_is_a_fault():
    res, _ = _run(tail=DEALLOC.format(ncol=32) + "\n" + DEALLOC.format(ncol=32))
    assert res.status == "fault" and "not all allocated" in res.message, res.message


# ---- an MMA's accumulator: allocated columns, and no dealloc before the MMA completes -------
# warp 0 allocates {ncol} columns; thread 0 issues one M=128 N=64 kind::f16 MMA of zeroed
# operands (no swizzle, LBO 128, SBO 256) into column {dcol}, commits to bar; {wait} then
# a CTA barrier and warp 0's dealloc
MMA = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k()
.reqntid 128, 1, 1
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
.shared .align 1024 .b8 smem[32768];
.shared .align 8 .b64 bar;
.shared .align 4 .b32 tslot;
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
setp.eq.u32 %p1, %r2, 0;
setp.eq.u32 %p2, %r1, 0;
mov.u32 %r9, tslot;
mov.u32 %r5, bar;
@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], {ncol};
@%p1 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
@%p2 mbarrier.init.shared::cta.b64 [%r5], 1;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
ld.shared.b32 %r10, [%r9];
add.u32 %r11, %r10, {dcol};
mov.u32 %r12, smem;
shr.u32 %r13, %r12, 4;
mov.b32 %r14, 16400;
mov.b32 %r15, 8;
or.b32 %r13, %r13, 524288;
mov.b64 %rd1, {{%r13, %r14}};
add.u32 %r16, %r12, 16384;
shr.u32 %r17, %r16, 4;
or.b32 %r17, %r17, 524288;
mov.b64 %rd2, {{%r17, %r14}};
mov.b32 %r18, 135266320;
setp.ne.u32 %p3, 0, 0;
@%p2 tcgen05.mma.cta_group::1.kind::f16 [%r11], %rd1, %rd2, %r18, %p3;
@%p2 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r5];
{wait}
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, {ncol};
ret;
}}
"""
WAIT = """$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r5], 0;
@!%p4 bra $L_wait;"""


def _mma(wait: str = WAIT, ncol: int = 64, dcol: int = 0):
    res = run_launch(MMA.format(wait=wait, ncol=ncol, dcol=dcol),
                     Launch(grid=(1, 1, 1), threads=128, params={}, arch="sm_100a"),
                     GlobalMemory(), filename="mma.ptx")
    return res


def test_dealloc_after_every_thread_waited_on_the_commit_is_ordered():
    res = _mma()
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)


def test_dealloc_before_the_mma_is_known_complete_is_a_race():
    # nobody waits on the commit's mbarrier: the tensor core may still write the freed columns
    res = _mma(wait="")
    hb = [f for f in res.findings if f.rule == "HB1" and "frees TMEM columns" in f.message]
    assert hb and hb[0].severity == "error", (res.message, res.findings)


def test_an_accumulator_outside_the_allocation_is_a_fault():
    # 64 columns allocated, the N = 64 accumulator at column 32 reaches column 95
    res = _mma(dcol=32)
    assert res.status == "fault" and "column 64, which is not allocated" in res.message, \
        res.message
