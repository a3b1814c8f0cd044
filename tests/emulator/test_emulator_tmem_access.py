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
