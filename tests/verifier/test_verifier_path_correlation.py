"""The path solver correlates a guard with a later branch on the same value (red team round
13, Triton 3.6/3.9 grouped GEMM and split-K PTX): a compare with a constant of a register
computed in the loop body (``_Assume._unchanged_since``: no redefinition between the ``setp``
and the use), two compares of the same two registers (``setp.lt`` / ``setp.ge``:
``_Assume._decide_cmp2``), and enough guard forks per block for Triton's prologue (three init
guards, then the copy guards). Each correct kernel was an MB3/MB6 false alarm; each broken
twin (the skip branch no longer the complement of the copy guard) stays an error."""

from __future__ import annotations

import pytest

from verifier import verify

#: a persistent tile loop: per tile a size is loaded; thread 0 issues a bulk copy of the tile
#: when GUARD holds, the CTA skips the wait when SKIP's ``%p21`` holds; the mbarrier is
#: invalidated after the loop (MB3 when a copy may still be in flight)
KERNEL = """\
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pSizes, .param .u64 pSrc, .param .u32 pN)
.reqntid 128, 1, 1
{
.reg .pred %p<32>;
.reg .b32 %r<64>;
.reg .b64 %rd<16>;
.shared .align 128 .b8 buf[4096];
.shared .align 8 .b64 bar;
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
mov.u32 %r3, %nctaid.x;
ld.param.u64 %rd1, [pSizes];
ld.param.u64 %rd2, [pSrc];
ld.param.u32 %r4, [pN];
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [bar], 1;
bar.sync 0;
mov.u32 %r9, 0;
mov.u32 %r5, %r2;
$L_tile:
mul.wide.u32 %rd3, %r5, 4;
add.s64 %rd4, %rd1, %rd3;
ld.global.u32 %r6, [%rd4];
add.s32 %r22, %r6, 63;
GUARD
and.pred %p11, %p1, %p10;
setp.eq.u32 %p12, %r6, 12345;
@%p12 bra $L_next;
SKIP
@%p11 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 1024;
@%p11 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [buf], [%rd2], 1024, [bar];
@%p21 bra $L_next;
$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], %r9;
@!%p3 bra $L_wait;
xor.b32 %r9, %r9, 1;
ld.shared.u32 %r7, [buf];
bar.sync 0;
$L_next:
add.s32 %r5, %r5, %r3;
setp.lt.u32 %p4, %r5, %r4;
@%p4 bra $L_tile;
bar.sync 0;
@%p1 mbarrier.inval.shared::cta.b64 [bar];
ret;
}
"""


def _errors(guard: str, skip: str) -> list[tuple[str, int]]:
    text = KERNEL.replace("GUARD", guard).replace("SKIP", skip)
    return [(f.rule, f.line) for f in verify(text, arch="sm_90a", filename="k.ptx").errors]


@pytest.mark.parametrize("guard,skip,ok", [
    # the guard's compare sits in the loop body's first block, the branch after another one
    ("setp.gt.s32 %p10, %r22, 63;", "setp.lt.s32 %p21, %r22, 64;", True),
    ("setp.gt.s32 %p10, %r22, 63;", "setp.lt.s32 %p21, %r22, 128;", False),
    # two registers: the complement, the complement with swapped operands, and not one
    ("setp.lt.s32 %p10, %r6, %r4;", "setp.ge.s32 %p21, %r6, %r4;", True),
    ("setp.lt.s32 %p10, %r6, %r4;", "setp.le.s32 %p21, %r4, %r6;", True),
    ("setp.lt.s32 %p10, %r6, %r4;", "setp.le.s32 %p21, %r6, %r4;", False),
    # constant offsets on either side (red team round 15, sliding-window attention):
    # %r6 + 64 < %r4 (copy) against %r6 >= %r4 - 64 (skip) is the complement; with 65 both
    # hold at %r6 - %r4 == -65 (a copy whose wait is skipped)
    ("add.s32 %r23, %r6, 64;\nsetp.lt.s32 %p10, %r23, %r4;",
     "sub.s32 %r24, %r4, 64;\nsetp.ge.s32 %p21, %r6, %r24;", True),
    ("add.s32 %r23, %r6, 64;\nsetp.lt.s32 %p10, %r23, %r4;",
     "sub.s32 %r24, %r4, 65;\nsetp.ge.s32 %p21, %r6, %r24;", False),
    # a negative immediate is a negative offset: %r6 - 1 < %r4 and %r6 >= %r4 overlap at
    # %r6 == %r4 (the review of 2026-12-07: -1 was read as 2**64 - 1)
    ("add.s32 %r23, %r6, -1;\nsetp.lt.s32 %p10, %r23, %r4;",
     "setp.ge.s32 %p21, %r6, %r4;", False),
    # the same with the operands swapped in the second compare: %r4 - 64 <= %r6
    ("add.s32 %r23, %r6, 64;\nsetp.lt.s32 %p10, %r23, %r4;",
     "add.s32 %r24, %r4, -64;\nsetp.le.s32 %p21, %r24, %r6;", True),
])
def test_a_copy_guard_and_the_branch_that_skips_its_wait_are_correlated(guard, skip, ok):
    if "%r22" in skip:   # the branch's compare in a later block than the guard's
        got = _errors(guard, skip)
    else:                # Triton's order: the two compares side by side
        got = _errors(guard + "\n" + skip, "")
    if ok:
        assert got == [], got
    else:
        assert got and {r for r, _ in got} <= {"MB3", "MB6"}, got


def test_a_compare_of_a_register_redefined_in_between_decides_nothing():
    # %r22 is redefined between the guard's compare and the branch: the branch is not decided
    # by the guard (a later value), so the copy-then-skip path stays and is an error
    got = _errors("setp.gt.s32 %p10, %r22, 63;",
                  "add.s32 %r22, %r6, %r4;\nsetp.lt.s32 %p21, %r22, 64;")
    assert any(r == "MB3" for r, _ in got), got
