"""Single-lane predicates are tracked per definition (red team round 13): a predicate register
that holds a lane test (``setp.eq %p1, %laneid-ish, 0``, ``elect.sync``) and is later
redefined by a uniform test (hand-written PTX and inline asm reuse one ``%p`` for every test)
is single-lane only where a single-lane definition reaches. Before, every branch on the
register counted as divergent: B2 on the loop's barriers, W1 on every wgmma after it."""

from __future__ import annotations

from verifier import verify

KERNEL = """\
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 n)
.reqntid 128, 1, 1
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<4>;
.shared .align 8 .b64 bar;
.shared .align 16 .b8 buf[512];
mov.u32 %r1, %tid.x;
and.b32 %r2, %r1, 31;
ld.param.u32 %r3, [n];
ld.param.u64 %rd1, [out];
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [bar], 4;
bar.sync 0;
mov.u32 %r4, 0;
$L_loop:
shl.b32 %r5, %r1, 2;
mov.u32 %r7, buf;
add.u32 %r8, %r7, %r5;
st.shared.u32 [%r8], %r4;
bar.warp.sync -1;
setp.eq.u32 %p1, %r2, 0;
@%p1 mbarrier.arrive.shared::cta.b64 _, [bar];
bar.sync 0;
ld.shared.u32 %r6, [buf];
bar.sync 0;
add.u32 %r4, %r4, 1;
setp.lt.u32 %p1, %r4, %r3;
@%p1 bra $L_loop;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r6;
ret;
}
"""


def _rules(text: str) -> list[str]:
    return sorted({f.rule for f in verify(text, arch="sm_90a").errors})


def test_a_lane_predicate_reused_for_the_loop_test_is_uniform_at_the_back_edge():
    assert _rules(KERNEL) == []


def test_a_back_edge_on_the_lane_predicate_itself_stays_divergent():
    text = KERNEL.replace("setp.lt.u32 %p1, %r4, %r3;\n", "")
    assert "B2" in _rules(text)
