"""emulator.barrier_use: which CTA barrier instances may have ordered two conflicting memory
operations of two of their threads, on one concrete run; and run_kernel(elect="highest")."""

from __future__ import annotations

import numpy as np

from emulator import GlobalMemory, Launch
from emulator.api import _instrument
from emulator.barrier_use import READ, WRITE, BarrierUse, classify
from emulator.machine import Machine
from emulator.program import build_program
from verifier.ptx.parser import parse_ptx

HEAD = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 16 .b8 buf[1024];
.visible .entry k(.param .u64 out)
.reqntid 64
{{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
setp.eq.u32 %p1, %r1, 0;
setp.eq.u32 %p2, %r1, 1;
mov.u32 %r3, buf;
{body}
ret;
}}
"""


def _effects(body: str, elect_highest: bool = False) -> tuple[dict[int, int], str]:
    """(barrier source line -> instances that acted, the PTX) of one 64-thread CTA."""
    ptx = HEAD.format(body=body)
    prog = build_program(parse_ptx(ptx, "t.ptx"))
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(64, np.uint32))
    mach = Machine(prog, Launch(grid=(1, 1, 1), threads=64,
                                params={"out": out.to_bytes(8, "little")}), gmem)
    mach.elect_highest = elect_highest
    use = BarrierUse(mach)
    use.install()
    _instrument(mach, use)
    res = mach.run()
    assert res.status == "ok", res.message
    by_line: dict[int, int] = {}
    for pc, k in use.effects().items():
        by_line[prog.insts[pc].line] = by_line.get(prog.insts[pc].line, 0) + k
    return by_line, ptx


def _line(ptx: str, needle: str, k: int = 0) -> int:
    return [i for i, s in enumerate(ptx.split("\n"), 1) if needle in s][k]


def test_a_barrier_between_two_threads_write_and_read_acts():
    eff, ptx = _effects("""
@%p1 st.shared.u32 [buf], %r1;
bar.sync 0;
@%p2 ld.shared.u32 %r5, [buf];""")
    assert eff[_line(ptx, "bar.sync")] == 1


def test_a_barrier_around_one_threads_operations_only_does_not_act():
    # thread 0 alone touches memory on both sides: program order already orders them
    eff, ptx = _effects("""
@%p1 st.shared.u32 [buf], %r1;
bar.sync 0;
@%p1 ld.shared.u32 %r5, [buf];""")
    assert eff[_line(ptx, "bar.sync")] == 0


def test_two_reads_do_not_conflict_but_an_mbarrier_op_counts_as_a_write():
    eff, ptx = _effects("""
@%p1 ld.shared.u32 %r5, [buf];
bar.sync 0;
@%p2 ld.shared.u32 %r6, [buf];
@%p1 ld.shared.u32 %r7, [buf+64];
bar.sync 0;
@%p2 mbarrier.init.shared::cta.b64 [buf+64], 1;""")
    assert eff[_line(ptx, "bar.sync", 0)] == 0
    assert eff[_line(ptx, "bar.sync", 1)] == 1  # t0's read before the 2nd, t1's init after


def test_the_window_reaches_back_past_a_barrier_not_every_participant_waited_at():
    # t0's store, then a 32-thread named barrier among warp 0 only, then the CTA barrier; t1's
    # read after it is ordered with t0's store by the CTA barrier alone
    eff, ptx = _effects("""
@%p1 st.shared.u32 [buf], %r1;
setp.lt.u32 %p3, %r1, 32;
@%p3 bar.sync 1, 32;
bar.sync 0;
@%p2 ld.shared.u32 %r5, [buf];""")
    assert eff[_line(ptx, "bar.sync 0")] == 1


def test_a_fence_counts_only_after_its_thread_touched_memory():
    eff, ptx = _effects("""
fence.proxy.async.shared::cta;
bar.sync 0;
@%p2 st.shared.u32 [buf], %r1;
@%p1 st.shared.u32 [buf+4], %r1;
bar.sync 0;
fence.proxy.async.shared::cta;
bar.sync 0;""")
    assert eff[_line(ptx, "bar.sync", 0)] == 0  # nobody accessed memory before the fences
    assert eff[_line(ptx, "bar.sync", 1)] == 1  # t1's and t0's stores vs the others' fences


def test_which_lane_elect_sync_elects_decides_whether_two_operations_share_a_thread():
    body = """
@%p1 st.shared.u32 [buf], %r1;
bar.sync 0;
setp.lt.u32 %p3, %r1, 32;
@!%p3 bra DONE;
elect.sync %r7|%p0, -1;
@%p0 ld.shared.u32 %r5, [buf];
DONE:"""
    low, ptx = _effects(body)
    high, _ = _effects(body, elect_highest=True)
    assert low[_line(ptx, "bar.sync")] == 0  # lane 0 elected: thread 0 stored and reads
    assert high[_line(ptx, "bar.sync")] == 1  # lane 31: another thread reads t0's store


def test_classify_names_reads_writes_and_nothing():
    prog = build_program(parse_ptx(HEAD.format(body="""
ld.shared.u32 %r5, [buf];
ld.acquire.gpu.global.u32 %r6, [%rd1];
add.u32 %r7, %r5, %r6;
st.global.u32 [%rd1], %r7;"""), "t.ptx"))
    kinds = {ins.opcode: classify(ins) for ins in prog.insts}
    assert kinds["ld.shared.u32"] == READ
    assert kinds["ld.acquire.gpu.global.u32"] == WRITE  # an acquire can carry ordering
    assert kinds["add.u32"] == 0
    assert kinds["st.global.u32"] == WRITE
    assert kinds["ld.param.u64"] == 0
