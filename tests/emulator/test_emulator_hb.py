"""Happens-before analysis of the emulator: races (HB1), deadlocks (HB2), divergent collectives
(HB3) on hand-written PTX, each paired with a correct twin that must stay clean."""

from __future__ import annotations

import numpy as np
import pytest

from emulator import GlobalMemory, Launch, run_launch

HEAD = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 16 .b8 buf[1024];
.visible .entry k(.param .u64 out)
.reqntid {T}
{{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
shl.b32 %r2, %r1, 2;
mov.u32 %r3, buf;
add.u32 %r4, %r3, %r2;
{body}
ret;
}}
"""


def _run(body: str, threads: int = 128, grid=(1, 1, 1)):
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(threads * int(np.prod(grid)), np.uint32))
    ptx = HEAD.format(T=threads, body=body)
    launch = Launch(grid=grid, threads=threads, params={"out": out.to_bytes(8, "little")})
    res = run_launch(ptx, launch, gmem, filename="t.ptx")
    _run.ptx = ptx
    return res, gmem.buffer("out").view(np.uint32)


def _line(text: str) -> int:
    """1-based line of the first line of the last PTX run containing ``text``."""
    return next(i for i, ln in enumerate(_run.ptx.split("\n"), 1) if text in ln)


NEIGHBOUR = """
st.shared.u32 [%r4], %r1;
{sync}
add.u32 %r5, %r1, 1;
and.b32 %r5, %r5, {mask};
shl.b32 %r6, %r5, 2;
add.u32 %r7, %r3, %r6;
ld.shared.u32 %r8, [%r7];
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r8;
"""


def test_store_tid_load_tid_plus_one_without_barrier_is_a_race():
    res, _ = _run(NEIGHBOUR.format(sync="", mask=127))
    races = [f for f in res.findings if f.rule == "HB1"]
    assert len(races) == 1
    f = races[0]
    assert (f.line, f.col) == (_line("ld.shared.u32 %r8"), 1)
    assert "ld.shared.u32" in f.message and "st.shared.u32" in f.message
    assert f.notes[0].line == _line("st.shared.u32 [%r4]")
    assert "missing synchronisation" in f.notes[1].message


def test_same_pattern_with_bar_sync_is_clean_and_correct():
    res, out = _run(NEIGHBOUR.format(sync="bar.sync 0;", mask=127))
    assert res.status == "ok" and res.findings == []
    assert out.tolist() == [(t + 1) % 128 for t in range(128)]


def test_race_inside_one_warp_is_still_a_race():
    # lanes 0..31 only: PTX gives no implicit warp-synchronous ordering (ISA 9.1 §8)
    res, _ = _run(NEIGHBOUR.format(sync="", mask=31), threads=32)
    assert [f.rule for f in res.findings] == ["HB1"]


def test_bar_warp_sync_orders_a_warp():
    res, _ = _run(NEIGHBOUR.format(sync="bar.warp.sync -1;", mask=31), threads=32)
    assert res.findings == []


def test_replicated_same_value_stores_are_not_races():
    body = """
mov.u32 %r9, 7;
st.shared.u32 [buf], %r9;
bar.sync 0;
ld.shared.u32 %r8, [buf];
"""
    res, _ = _run(body)
    assert res.findings == []


DUP_LOOP = """
setp.eq.u32 %p1, %r1, 0;
setp.eq.u32 %p2, %r1, 8;
or.pred %p3, %p1, %p2;
mov.u32 %r9, 0;
$L_loop:
{guard}
@%p3 st.shared.u32 [buf], %r9;
add.u32 %r9, %r9, 1;
setp.lt.u32 %p1, %r9, 3;
@%p1 bra $L_loop;
"""


def test_duplicated_layout_store_rewritten_by_the_same_lanes_is_not_a_race():
    # lanes 0 and 8 hold one element of a duplicated layout and store it each iteration with no
    # barrier between: each lane's new write follows its own old one, the byte always ends with
    # the current value; HB1 must not report lanes of one instruction writing the same value
    res, _ = _run(DUP_LOOP.format(guard=""), threads=32)
    assert res.status == "ok" and res.findings == [], res.findings


def test_duplicated_store_whose_old_writer_stopped_writing_is_a_race():
    # lane 8 writes only in the first iteration: its old write may land after lane 0's new one
    guard = ("setp.eq.u32 %p2, %r1, 8;\nsetp.ne.u32 %p1, %r9, 0;\nand.pred %p1, %p1, %p2;\n"
             "@%p1 mov.pred %p3, 0;")
    res, _ = _run(DUP_LOOP.format(guard=guard), threads=32)
    races = [f for f in res.findings if f.rule == "HB1"]
    assert races and "thread 8" in races[0].message + " ".join(n.message for n in races[0].notes)


def test_different_values_from_one_store_are_a_race():
    res, _ = _run("st.shared.u32 [buf], %r1;\n")
    assert [f.rule for f in res.findings] == ["HB1"]
    assert "write" in res.findings[0].message


def test_write_after_read_without_barrier_is_a_race():
    body = """
ld.shared.u32 %r8, [buf];
bar.sync 0;
ld.shared.u32 %r8, [buf+4];
setp.eq.u32 %p1, %r1, 5;
@%p1 st.shared.u32 [buf+4], %r1;
"""
    res, _ = _run(body)
    assert [f.rule for f in res.findings] == ["HB1"]
    assert "(write)" in res.findings[0].message and "(read)" in res.findings[0].message


def test_named_barrier_count_not_reached_is_a_deadlock():
    body = """
setp.ge.u32 %p1, %r1, 64;
@%p1 bra $L_done;
bar.sync 1, 128;
$L_done:
"""
    res, _ = _run(body)
    assert res.status == "deadlock"
    f = [f for f in res.findings if f.rule == "HB2"]
    assert len(f) == 1 and f[0].line == _line("bar.sync 1, 128")
    assert "64 of 128 threads arrived" in f[0].notes[0].message
    assert "threads 0-63" in f[0].notes[0].message


def test_named_barrier_with_matching_count_completes():
    body = """
setp.ge.u32 %p1, %r1, 64;
@%p1 bra $L_done;
bar.sync 1, 64;
$L_done:
"""
    res, _ = _run(body)
    assert res.status == "ok" and res.findings == []


def test_full_barrier_after_early_exit_of_other_threads_completes():
    body = """
setp.ge.u32 %p1, %r1, 64;
@%p1 exit;
bar.sync 0;
"""
    res, _ = _run(body)
    assert res.status == "ok" and res.findings == []


def test_producer_consumer_named_barriers_are_ordered():
    # warp 0 writes, bar.arrive 2,64; warp 1 waits with bar.sync 2,64 then reads
    body = """
setp.lt.u32 %p1, %r1, 32;
@!%p1 bra $L_cons;
st.shared.u32 [%r4], %r1;
bar.arrive 2, 64;
bra.uni $L_end;
$L_cons:
bar.sync 2, 64;
sub.u32 %r5, %r2, 128;
add.u32 %r7, %r3, %r5;
ld.shared.u32 %r8, [%r7];
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r8;
$L_end:
"""
    res, out = _run(body, threads=64)
    assert res.status == "ok" and res.findings == []
    assert out[32:].tolist() == list(range(32))


def test_shfl_with_diverged_member_lanes_is_hb3():
    body = """
setp.lt.u32 %p1, %r1, 16;
@!%p1 bra $L_end;
shfl.sync.bfly.b32 %r8, %r1, 1, 31, -1;
$L_end:
"""
    res, _ = _run(body, threads=32)
    assert [f.rule for f in res.findings] == ["HB3"]
    assert "16-31" in res.findings[0].message


def test_cross_cta_write_conflict_on_global_is_a_race():
    body = """
st.global.u32 [%rd1], %r1;
"""
    res, _ = _run(body, threads=32, grid=(2, 1, 1))
    # within a CTA the values differ (race) and across CTAs too
    assert "HB1" in [f.rule for f in res.findings]


def test_out_of_bounds_store_is_a_fault():
    body = """
mul.wide.u32 %rd2, %r1, 4096;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r1;
"""
    res, _ = _run(body)
    assert res.status == "fault" and "illegal global address" in res.message
    assert "t.ptx:" in res.message


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_softmax_reduction_barrier_removed_is_flagged_intact_is_not(arch):
    import kernels
    from emulator import run_kernel
    from pathlib import Path

    fixtures = Path(__file__).parent.parent / "verifier" / "fixtures" / "triton36"
    path = fixtures / f"softmax_{arch}.ptx"
    src = path.read_text().split("\n")
    spec = kernels.get("softmax")
    dims = {"M": 5, "N": 4000}
    ok = run_kernel("\n".join(src), spec, arch, dims=dims, filename=path.name)
    assert ok.status == "ok", ok.message
    assert ok.findings == []
    first_bar = next(i for i, line in enumerate(src)
                     if "bar.sync" in line or "barrier.sync" in line)
    mut = src[:first_bar] + [""] + src[first_bar + 1:]
    bad = run_kernel("\n".join(mut), spec, arch, dims=dims, filename=path.name)
    races = [f for f in bad.findings if f.rule == "HB1"]
    assert races, bad.summary()
    assert races[0].line > first_bar + 1 and "shared" in races[0].message


def test_labels_resolve_through_their_inline_asm_scope():
    # Triton repeats `{ waitLoop: ... bra waitLoop; }`-style scopes; each branch must reach the
    # label of its own scope (the second scope's label must not capture the first branch)
    body = """
mov.u32 %r9, 0;
{
.reg .pred p;
setp.eq.u32 p, %r9, 0;
@p bra skip;
add.u32 %r9, %r9, 100;
skip:
add.u32 %r9, %r9, 1;
}
{
.reg .pred p;
setp.eq.u32 p, %r9, 1;
@p bra skip;
add.u32 %r9, %r9, 1000;
skip:
add.u32 %r9, %r9, 10;
}
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r9;
"""
    res, out = _run(body, threads=32)
    assert res.status == "ok"
    assert out.tolist() == [11] * 32


# issue 18: bar.warp.sync is a rendezvous (PTX ISA 9.0 §9.7.13.4): lanes that diverged wait for
# each other. Lane 0 writes a shared word on its own path, lanes 1..31 reach the barrier first.
DIVERGED_EXCHANGE = """
setp.ne.u32 %p1, %r1, 0;
@%p1 bra $L_join;
mov.u32 %r9, 42;
st.shared.u32 [buf], %r9;
{sync0}
bra.uni $L_read;
$L_join:
{sync1}
$L_read:
ld.shared.u32 %r8, [buf];
"""


def test_diverged_bar_warp_sync_orders_the_exchange():
    body = DIVERGED_EXCHANGE.format(sync0="bar.warp.sync -1;", sync1="bar.warp.sync -1;")
    res, _ = _run(body, threads=32)
    assert res.status == "ok" and res.findings == []


def test_diverged_exchange_without_bar_warp_sync_is_a_race():
    res, _ = _run(DIVERGED_EXCHANGE.format(sync0="", sync1=""), threads=32)
    assert [f.rule for f in res.findings] == ["HB1"]


def test_bar_warp_sync_waiting_for_a_lane_that_never_arrives_is_a_deadlock():
    # lane 0 waits on a named barrier the others never reach; they wait on it at bar.warp.sync
    body = """
setp.ne.u32 %p1, %r1, 0;
@%p1 bra $L_join;
bar.sync 1, 32;
bra.uni $L_end;
$L_join:
bar.warp.sync -1;
$L_end:
"""
    res, _ = _run(body, threads=32)
    assert res.status == "deadlock"
    assert [f.rule for f in res.findings] == ["HB2"]
    assert any("bar.warp.sync membermask 0xffffffff" in n.message for n in res.findings[0].notes)


def test_bar_warp_sync_naming_an_exited_lane_is_reported():
    body = """
setp.eq.u32 %p1, %r1, 0;
@%p1 bra $L_end;
bar.warp.sync -1;
$L_end:
"""
    res, _ = _run(body, threads=32)
    # lanes 1..31 arrive first and wait on lane 0, which exits: reported as HB2 (a fault when
    # the mask names a lane that exited before the arrival)
    assert res.status == "deadlock" and [f.rule for f in res.findings] == ["HB2"]


# red team round 13: a counter zeroed by thread 0 and then incremented by every thread. The
# zeroing thread's own atomic used to replace its plain-store record, so the other threads'
# atomics (not ordered after the store without the barrier) were compared with an atomic only
ZERO_THEN_ATOM = """
setp.eq.u32 %p1, %r1, 0;
@%p1 st.shared.u32 [buf], 0;
{sync}
atom.shared.add.u32 %r5, [buf], 1;
bar.sync 0;
ld.shared.u32 %r6, [buf];
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r6;
"""


@pytest.mark.parametrize("threads", [32, 128])
def test_atomics_not_ordered_after_the_zeroing_store_race_with_it(threads):
    res, out = _run(ZERO_THEN_ATOM.format(sync="bar.sync 0;"), threads=threads)
    assert res.status == "ok" and res.findings == [], res.findings
    assert (out == threads).all()
    res, _ = _run(ZERO_THEN_ATOM.format(sync=""), threads=threads)
    hb1 = [f for f in res.findings if f.rule == "HB1"]
    assert hb1 and "atom" in hb1[0].message and "st.shared" in hb1[0].message, res.findings
