"""tcgen05 ordering through relaxed mbarrier synchronisation (PTX ISA 9.1 §9.7.16.6.3 and the
canonical patterns of §9.7.16.6.4): ``tcgen05.fence::before_thread_sync`` +
``mbarrier.arrive.relaxed`` on one side, ``mbarrier.try_wait.relaxed`` +
``tcgen05.fence::after_thread_sync`` on the other order the tcgen05 operations around them.
Before 2026-12-07 the emulator took a relaxed wait as ordering nothing, fence or not, and
reported the canonical pattern (the epilogue of ``fast.ptx_gemm_tc_sm100``) as a TMEM race.
Without either fence, or for a generic access after the relaxed wait, nothing is ordered."""

from __future__ import annotations

import numpy as np
import pytest

from emulator import GlobalMemory, Launch, run_launch

# warp 0 stores and loads TMEM (lane slab 0, column 0), then hands the cells to warp 4 (the same
# lane slab) through mbarrier `bar` (count 32): warp 4 overwrites them with tcgen05.st
PTX = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 pout)
.reqntid 160, 1, 1
{{
.reg .pred %p<4>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
.shared .align 4 .b32 tslot;
.shared .align 8 .b64 bar;
.shared .align 4 .b32 flag[32];
ld.param.u64 %rd1, [pout];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
mov.u32 %r9, tslot;
mov.u32 %r8, bar;
setp.eq.u32 %p1, %r2, 0;
setp.eq.u32 %p2, %r2, 4;
@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 32;
setp.eq.u32 %p3, %r1, 0;
@%p3 mbarrier.init.shared::cta.b64 [%r8], 32;
bar.sync 0;
ld.shared.b32 %r10, [%r9];
@%p2 bra CONSUMER;
@!%p1 bra DONE;
tcgen05.st.sync.aligned.32x32b.x1.b32 [%r10], {{%r1}};
tcgen05.wait::st.sync.aligned;
{pre}
tcgen05.ld.sync.aligned.32x32b.x1.b32 {{%r13}}, [%r10];
tcgen05.wait::ld.sync.aligned;
{shared_write}
{before}
mbarrier.arrive.relaxed.cta.shared::cta.b64 _, [%r8];
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd1, %rd3;
st.global.u32 [%rd4], %r13;
bra.uni DONE;
CONSUMER:
WAIT:
mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 %p0, [%r8], 0;
@!%p0 bra WAIT;
{after}
{shared_read}
tcgen05.st.sync.aligned.32x32b.x1.b32 [%r10], {{%r2}};
tcgen05.wait::st.sync.aligned;
DONE:
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, 32;
ret;
}}
"""
BEFORE = "tcgen05.fence::before_thread_sync;"
AFTER = "tcgen05.fence::after_thread_sync;"


def _run(before: str = BEFORE, after: str = AFTER, shared_write: str = "",
         shared_read: str = "", pre: str = ""):
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(160, np.uint32))
    ptx = PTX.format(before=before, after=after, shared_write=shared_write,
                     shared_read=shared_read, pre=pre)
    return run_launch(ptx, Launch(grid=(1, 1, 1), threads=160, arch="sm_100a",
                                  params={"pout": out.to_bytes(8, "little")}),
                      gmem, filename="relaxed.ptx")


def _errors(res) -> list:
    return [f for f in res.findings if f.severity == "error"]


def test_the_canonical_relaxed_hand_off_with_both_fences_is_ordered():
    res = _run()
    assert res.status == "ok" and not _errors(res), (res.message, res.findings)


@pytest.mark.parametrize("drop", ["before", "after"])
def test_a_relaxed_hand_off_without_either_fence_is_a_tmem_race(drop):
    res = _run(**{drop: ""})
    errs = _errors(res)
    assert errs and errs[0].rule == "HB1", res.findings
    assert "tcgen05.ld" in errs[0].message and "TMEM" in errs[0].message


#: each producer lane writes flag[lane]; each consumer lane reads flag[tid - 128]
FLAG_WRITE = ("shl.b32 %r21, %r1, 2; mov.u32 %r22, flag; add.u32 %r22, %r22, %r21; "
              "st.shared.u32 [%r22], %r1;")
FLAG_READ = ("sub.u32 %r21, %r1, 128; shl.b32 %r21, %r21, 2; mov.u32 %r22, flag; "
             "add.u32 %r22, %r22, %r21; ld.shared.u32 %r20, [%r22];")


def test_the_tcgen05_fences_do_not_order_a_generic_shared_read_after_a_relaxed_wait():
    # the fences order tcgen05 operations only: a value written before the relaxed arrive and
    # read after the relaxed wait races (release / acquire semantics would order it)
    res = _run(shared_write=FLAG_WRITE, shared_read=FLAG_READ)
    errs = _errors(res)
    assert len(errs) == 1 and errs[0].rule == "HB1", res.findings
    assert "'ld.shared.u32' (read) by thread 128" in errs[0].message


def test_a_before_fence_ahead_of_the_load_does_not_release_it():
    # fence::before_thread_sync must follow the load's wait::ld: placed before the load it
    # releases nothing of it (review of 2026-12-07: the snapshot shared the load's clock)
    res = _run(before="", pre=BEFORE)
    errs = _errors(res)
    assert errs and errs[0].rule == "HB1" and "tcgen05.ld" in errs[0].message, res.findings


#: warp 1 stores flag[] and arrives (release) on bar1; thread 0 waits on bar1 with a relaxed
#: try_wait, fence::after_thread_sync, then commits to bar2; warp 2 acquire-waits on bar2 and
#: reads flag[] (from the review of 2026-12-07)
COMMIT_LEAK = r""".version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 pout)
.reqntid 96, 1, 1
{
.reg .pred %p<6>;
.reg .b32 %r<40>;
.reg .b64 %rd<8>;
.shared .align 8 .b64 bar1;
.shared .align 8 .b64 bar2;
.shared .align 4 .b32 flag[32];
ld.param.u64 %rd1, [pout];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
and.b32 %r3, %r1, 31;
setp.eq.u32 %p3, %r1, 0;
@%p3 mbarrier.init.shared::cta.b64 [bar1], 32;
@%p3 mbarrier.init.shared::cta.b64 [bar2], 1;
bar.sync 0;
setp.eq.u32 %p1, %r2, 1;
@%p1 bra WRITER;
setp.eq.u32 %p2, %r2, 2;
@%p2 bra READER;
@!%p3 bra DONE;
W1:
mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 %p0, [bar1], 0;
@!%p0 bra W1;
tcgen05.fence::after_thread_sync;
tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar2];
bra.uni DONE;
WRITER:
shl.b32 %r4, %r3, 2;
mov.u32 %r5, flag;
add.u32 %r5, %r5, %r4;
st.shared.u32 [%r5], %r1;
mbarrier.arrive.release.cta.shared::cta.b64 _, [bar1];
bra.uni DONE;
READER:
W2:
mbarrier.try_wait.parity.shared::cta.b64 %p0, [bar2], 0;
@!%p0 bra W2;
shl.b32 %r4, %r3, 2;
mov.u32 %r5, flag;
add.u32 %r5, %r5, %r4;
ld.shared.u32 %r6, [%r5];
mul.wide.u32 %rd2, %r3, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r6;
DONE:
ret;
}
"""


def test_a_commit_does_not_pass_on_what_a_relaxed_wait_observed():
    # the relaxed wait acquired nothing generic for thread 0, so its commit's arrival does not
    # order warp 2's reads after warp 1's stores
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(32, np.uint32))
    res = run_launch(COMMIT_LEAK, Launch(grid=(1, 1, 1), threads=96, arch="sm_100a",
                                         params={"pout": out.to_bytes(8, "little")}), gmem,
                     filename="c.ptx")
    assert any(f.rule == "HB1" and "ld.shared" in f.message for f in _errors(res)), res.findings
