"""TL4 at a signal to other threads (red team round 13): an unread, unwaited ``tcgen05.ld`` is
reported at the thread's *second* signal, at its exit, or at its own TMEM write / dealloc, not
at the first signal: Triton 3.9 emits ``tcgen05.ld; bar.sync; tcgen05.wait::ld`` where the
barrier guards shared scratch (a TMEM write by another thread after it is the emulator's TMEM
write-after-read check). An ld that some warps never read nor wait for (cutlass#3652) stays an
error."""

from __future__ import annotations

from verifier import verify

KERNEL = """\
.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 pOut)
.reqntid 128, 1, 1
{
.reg .pred %p<8>;
.reg .b32 %r<64>;
.reg .b64 %rd<8>;
.shared .align 16 .b32 slot;
.shared .align 16 .b8 scratch[512];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
ld.param.u64 %rd1, [pOut];
setp.eq.u32 %p1, %r2, 0;
@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;
@%p1 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
ld.shared.u32 %r3, [slot];
shl.b32 %r4, %r2, 21;
add.u32 %r5, %r3, %r4;
tcgen05.ld.sync.aligned.32x32b.x2.b32 {%r10, %r11}, [%r5];
BODY
tcgen05.fence::before_thread_sync;
bar.sync 0;
@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;
ret;
}
"""

#: Triton 3.9's split-K epilogue order: the ld, a barrier for shared scratch, then the wait
TRITON = """st.shared.u32 [scratch], %r1;
bar.sync 0;
tcgen05.wait::ld.sync.aligned;
add.u32 %r12, %r10, %r11;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r12;
"""
#: cutlass#3652: warps 2 and 3 neither read the registers nor wait
HALF = """setp.lt.u32 %p2, %r2, 2;
@!%p2 bra $L_skip;
tcgen05.wait::ld.sync.aligned;
add.u32 %r12, %r10, %r11;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r12;
$L_skip:
"""


def _tl4(body: str) -> list[str]:
    rep = verify(KERNEL.replace("BODY\n", body), arch="sm_100a", select={"TL4"})
    return [f.message for f in rep.errors]


def test_a_wait_after_the_first_barrier_is_not_tl4():
    assert _tl4(TRITON) == []


def test_a_second_signal_with_the_ld_still_in_flight_is_tl4():
    got = _tl4(TRITON.replace("tcgen05.wait::ld.sync.aligned;\n",
                              "bar.sync 0;\ntcgen05.wait::ld.sync.aligned;\n"))
    assert any("signals other threads" in m for m in got), got


def test_warps_that_never_read_nor_wait_are_tl4():
    got = _tl4(HALF)
    assert any("exits" in m for m in got), got
