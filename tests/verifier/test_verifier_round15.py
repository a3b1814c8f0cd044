"""Static rules changed for red team round 15 (2026-12-07), each with the correct code that was
flagged and the buggy twin that must stay flagged:

* a ``.func`` whose register parameters are named without '%' (``.func (.reg .b32 ok)
  try(.reg .b32 bar, ...)``, nvcc -G / CUTLASS helpers) reads them as registers (MB3 took
  ``bar`` for a symbol "before init"), and a ``try_wait`` result it returns is retried by the
  caller: MB10 is a note there, an error when the result is dropped;
* B9 treats a call of a ``.func`` that synchronises (``bar.sync`` in a CuTe-style
  ``cluster_sync`` helper) as a barrier, and still reports the race when no call is there;
* MB5: a first parity-1 wait on an mbarrier that only ``tcgen05.commit`` completes is a note
  (a "buffer free" credit barrier passes at once by design; as a data barrier the emulator
  sees the TMEM read of an unfinished MMA), an error on a barrier a TMA copy completes;
* TF5: an unfenced ``.relaxed`` wait stays unfenced past a later acquire wait on another
  mbarrier (the acquire orders only its own barrier's releases).
"""

from __future__ import annotations

import pytest

from verifier import parse_ptx, verify


def _rules(text: str, arch: str) -> set[tuple[str, str]]:
    return {(f.rule, f.severity) for f in verify(text, arch=arch, filename="k.ptx").findings}


TRY_FUNC = """\
.version 8.7
.target sm_90a
.address_size 64
.func (.reg .b32 ok) mbar_try(.reg .b32 bar, .reg .b32 parity)
{
.reg .pred %q;
mbarrier.try_wait.parity.shared::cta.b64 %q, [bar], parity;
RESULT
ret;
}
.visible .entry k(.param .u64 p)
.reqntid 32, 1, 1
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.shared .align 8 .b64 mb;
mov.u32 %r1, %tid.x;
mov.u32 %r5, mb;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [%r5], 32;
bar.sync 0;
mbarrier.arrive.shared::cta.b64 _, [%r5];
WAIT:
call.uni (%r10), mbar_try, (%r5, 0);
setp.eq.u32 %p2, %r10, 0;
@%p2 bra WAIT;
ret;
}
"""


def test_register_parameters_without_percent_are_registers():
    text = TRY_FUNC.replace("RESULT", "selp.b32 ok, 1, 0, %q;")
    fn = next(f for f in parse_ptx(text).functions if f.name == "mbar_try")
    wait = next(s for s in fn.body.stmts if getattr(s, "opcode", "").startswith("mbarrier"))
    assert wait.operands[1].base.kind == "reg" and wait.operands[2].kind == "reg"


@pytest.mark.parametrize("result,severity", [
    ("selp.b32 ok, 1, 0, %q;", "note"),   # returned: the caller's loop retries
    ("mov.u32 ok, 1;", "error"),           # dropped: nothing retries the wait
])
def test_a_try_wait_result_returned_by_a_func_is_the_callers_to_retry(result, severity):
    got = _rules(TRY_FUNC.replace("RESULT", result), "sm_90a")
    assert ("MB10", severity) in got, got
    assert not any(r == "MB3" for r, _ in got), got


STENCIL = """\
.version 8.7
.target sm_90a
.address_size 64
.func cta_sync()
{
bar.sync 0;
ret;
}
.visible .entry k(.param .u64 p)
.reqntid 64, 1, 1
{
.reg .b32 %r<16>;
.reg .f32 %f<8>;
.shared .align 4 .f32 u[64];
mov.u32 %r1, %tid.x;
shl.b32 %r2, %r1, 2;
mov.u32 %r3, u;
add.u32 %r4, %r3, %r2;
add.u32 %r5, %r1, 1;
and.b32 %r7, %r5, 63;
shl.b32 %r8, %r7, 2;
add.u32 %r6, %r3, %r8;
ld.shared.f32 %f1, [%r6];
SYNC
add.f32 %f2, %f1, %f1;
st.shared.f32 [%r4], %f2;
ret;
}
"""


@pytest.mark.parametrize("sync,flagged", [
    ("call.uni cta_sync, ();", False),   # the helper's bar.sync orders the read and the write
    ("", True),                          # the neighbour's read races with the in-place write
])
def test_a_call_of_a_synchronising_func_is_a_barrier_for_b9(sync, flagged):
    got = _rules(STENCIL.replace("SYNC", sync), "sm_90a")
    assert (("B9", "error") in got) == flagged, got


COMMIT_CREDIT = """\
.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 p)
.reqntid 128, 1, 1
{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
.shared .align 8 .b64 freebar;
.shared .align 8 .b64 fullbar;
.shared .align 4 .b32 slot;
mov.u32 %r1, %tid.x;
mov.u32 %r20, freebar;
mov.u32 %r21, fullbar;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [%r20], 1;
@%p1 mbarrier.init.shared::cta.b64 [%r21], 1;
bar.sync 0;
@!%p1 bra DONE;
mov.u32 %r2, 0;
LOOP:
and.b32 %r3, %r2, 1;
xor.b32 %r4, %r3, 1;
WAITFREE:
mbarrier.try_wait.parity.shared::cta.b64 %p2, [WAITBAR], %r4;
@!%p2 bra WAITFREE;
ld.shared.u32 %r9, [slot];
tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r20];
TMA
add.u32 %r2, %r2, 1;
setp.lt.u32 %p3, %r2, 4;
@%p3 bra LOOP;
DONE:
ret;
}
"""


@pytest.mark.parametrize("bar,tma,severity", [
    # only tcgen05.commit completes freebar: its first parity-1 wait may be a credit wait
    ("%r20", "", "note"),
    # a TMA copy completes fullbar: the first parity-1 wait reads data that has not landed
    ("%r21", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r21], 16;", "error"),
])
def test_a_first_parity_one_wait_on_a_commit_only_barrier_is_left_to_the_emulator(
        bar, tma, severity):
    got = _rules(COMMIT_CREDIT.replace("WAITBAR", bar).replace("TMA", tma), "sm_100a")
    assert ("MB5", severity) in got, got
    assert ("MB5", "error" if severity == "note" else "note") not in got, got


RELAXED_THEN_ACQUIRE = """\
.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 p)
.reqntid 128, 1, 1
{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
.shared .align 8 .b64 empty;
.shared .align 8 .b64 full;
.shared .align 4 .b32 slot;
mov.u32 %r1, %tid.x;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [empty], 1;
@%p1 mbarrier.init.shared::cta.b64 [full], 1;
@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;
bar.sync 0;
ld.shared.u32 %r2, [slot];
@!%p1 bra DONE;
W1:
mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 %p2, [empty], 1;
@!%p2 bra W1;
W2:
mbarrier.try_wait.parity.shared::cta.b64 %p3, [full], 0;
@!%p3 bra W2;
FENCE
mov.b64 %rd1, 0;
tcgen05.mma.cta_group::1.kind::f16 [%r2], %rd1, %rd1, 136314896, 0;
DONE:
ret;
}
"""


@pytest.mark.parametrize("fence,flagged", [
    ("", True),
    ("tcgen05.fence::after_thread_sync;", False),
])
def test_an_unfenced_relaxed_wait_is_not_fenced_by_a_later_acquire_wait(fence, flagged):
    got = _rules(RELAXED_THEN_ACQUIRE.replace("FENCE", fence), "sm_100a")
    assert (("TF5", "error") in got) == flagged, got


#: a 3-stage ring whose parity is (k / 3) & 1, computed as LLVM does for a division by 3:
#: mul.hi.u32 by 0xAAAAAAAB, then shr 1 (Triton 3.6 / 3.9 Gluon wgmma ring, red team round 15)
DIV3_RING = """\
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
.reqntid 128, 1, 1
{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
.shared .align 128 .b8 buf[3072];
.shared .align 8 .b64 full[3];
ld.param.u64 %rd1, [p];
mov.u32 %r1, %tid.x;
setp.eq.u32 %p1, %r1, 0;
mov.u32 %r20, full;
@%p1 mbarrier.init.shared::cta.b64 [%r20], 1;
@%p1 mbarrier.init.shared::cta.b64 [%r20+8], 1;
@%p1 mbarrier.init.shared::cta.b64 [%r20+16], 1;
bar.sync 0;
mov.u32 %r2, 0;
LOOP:
mul.hi.u32 %r3, %r2, -1431655765;
shr.u32 %r4, %r3, 1;
mul.lo.u32 %r5, %r4, 3;
sub.s32 %r6, %r2, %r5;
shl.b32 %r7, %r6, 3;
add.u32 %r8, %r20, %r7;
shl.b32 %r9, %r6, 10;
mov.u32 %r10, buf;
add.u32 %r11, %r10, %r9;
@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], 1024;
@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r11], [%rd1], 1024, [%r8];
and.b32 %r12, %r4, 1;
XORPAR
WAIT:
mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], %r13;
@!%p2 bra WAIT;
ld.shared.u32 %r14, [%r11];
bar.sync 0;
add.u32 %r2, %r2, 1;
setp.lt.u32 %p3, %r2, 9;
@%p3 bra LOOP;
ret;
}
"""


@pytest.mark.parametrize("xorpar,flagged", [
    ("mov.u32 %r13, %r12;", False),          # (k / 3) & 1: 0, 0, 0, 1, 1, 1, ...
    ("xor.b32 %r13, %r12, 1;", True),        # flipped: the first wait passes at once
])
def test_a_parity_from_a_division_by_mul_hi_is_evaluated(xorpar, flagged):
    got = _rules(DIV3_RING.replace("XORPAR", xorpar), "sm_90a")
    assert (("MB5", "error") in got) == flagged, got


W7_KERNEL = """\
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
.reqntid 128, 1, 1
{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
.reg .f32 %f<8>;
.shared .align 128 .b8 buf[16384];
mov.u32 %r1, %tid.x;
and.b32 %r2, %r1, 127;
shl.b32 %r3, %r2, 2;
mov.u32 %r4, buf;
add.u32 %r5, %r4, %r3;
wgmma.fence.sync.aligned;
wgmma.commit_group.sync.aligned;
wgmma.wait_group.sync.aligned 0;
st.shared.f32 [%r5+8192], %f1;
ld.shared.f32 %f2, [%r5+READ];
ret;
}
"""


@pytest.mark.parametrize("read,flagged", [
    ("0", False),      # the stores fill [8192, 8704), the read is in [0, 512): disjoint bytes
    ("8196", True),    # another thread's stored value: no barrier in between
])
def test_w7_reads_of_bytes_the_stores_cannot_touch_are_not_flagged(read, flagged):
    got = _rules(W7_KERNEL.replace("READ", read), "sm_90a")
    assert (("W7", "error") in got) == flagged, got


TRAP_KERNEL = """\
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
.reqntid 128, 1, 1
{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.shared .align 4 .b32 buf[128];
mov.u32 %r1, %tid.x;
shl.b32 %r2, %r1, 2;
mov.u32 %r3, buf;
add.u32 %r4, %r3, %r2;
st.shared.u32 [%r4], %r1;
setp.gt.u32 %p1, %r1, 1000;
EXIT
bar.sync 0;
ld.shared.u32 %r5, [%r3];
ret;
}
"""


@pytest.mark.parametrize("early,flagged", [
    ("@%p1 trap;", False),   # an assertion: the kernel aborts, no thread skips the barrier
    ("@%p1 ret;", True),     # an early return of some threads: the others wait for ever
])
def test_a_trap_is_not_an_early_exit_that_skips_a_barrier(early, flagged):
    got = _rules(TRAP_KERNEL.replace("EXIT", early), "sm_90a")
    assert any(sev == "error" for _r, sev in got) == flagged, got


GATHER = """\
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
.reqntid 128, 1, 1
{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
.shared .align 128 .b8 rows[2048];
.shared .align 8 .b64 bar;
ld.param.u64 %rd1, [p];
mov.u32 %r1, %tid.x;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [bar], 1;
bar.sync 0;
@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 2048;
setp.lt.u32 %p2, %r1, LANES;
shl.b32 %r2, %r1, 9;
mov.u32 %r3, rows;
add.u32 %r4, %r3, %r2;
@%p2 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r4], [%rd1], 512, [bar];
W:
mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;
@!%p3 bra W;
ret;
}
"""


def test_a_copy_several_lanes_issue_is_left_to_the_emulator_by_mb8():
    # lanes 0-3 each deliver 512 bytes: the static rule cannot count the lanes (a note); the
    # emulated launch does (no finding with 4 lanes, a deadlock with 3)
    got = _rules(GATHER.replace("LANES", "4"), "sm_90a")
    assert ("MB8", "note") in got and ("MB8", "error") not in got, got
    import emulator
    text3 = GATHER.replace("LANES", "3")
    ok = emulator.check_default_launch(GATHER.replace("LANES", "4"), arch="sm_90a",
                                       filename="g.ptx")
    assert all(c.status == "ok" and not c.findings for c in ok), [c.render() for c in ok]
    bad = emulator.check_default_launch(text3, arch="sm_90a", filename="g.ptx")
    assert any(f.rule == "HB2" for c in bad for f in c.findings), [c.render() for c in bad]


def test_w7_still_sees_the_first_of_many_stores():
    # nine stores after the wait; the read overlaps only the first (the review of 2026-12-07:
    # only the newest eight were kept)
    stores = "st.shared.f32 [%r5+8192], %f1;\n" + "".join(
        f"st.shared.f32 [%r5+{1024 * k}], %f1;\n" for k in range(1, 9))
    text = W7_KERNEL.replace("st.shared.f32 [%r5+8192], %f1;\n", stores).replace("READ", "8196")
    assert ("W7", "error") in _rules(text, "sm_90a")


def test_mb8_keeps_an_expect_tx_no_number_of_lanes_can_reach():
    # 4 lanes could deliver 2048 (a note), but 256 is less than one lane's 512 bytes
    text = GATHER.replace("LANES", "4").replace("], 2048;", "], 256;")
    assert ("MB8", "error") in _rules(text, "sm_90a")
