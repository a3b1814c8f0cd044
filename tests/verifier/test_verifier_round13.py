"""Red team round 13's Triton 3.6 warp-specialized attention (sm_100a) and what it taught the
static rules (``fixtures/redteam13``): a TMA copy's size is bounded by its mbarrier's constant
``expect_tx`` counts (AP3: a read above a copy of unknown size is a note, not an error); a
barrier that another warp re-initializes while this one waits at a CTA barrier has an unknown
phase count after it (MB5); arrival sites with a wait on the barrier between them may serve
different phases (MB7 a note). Each correct kernel was an error before; each broken twin stays
an error."""

from __future__ import annotations

import pytest

from verifier import verify

#: thread 0 issues a 2-D TMA copy into ``buf`` completing on ``bar`` (``expect_tx`` BYTES), and
#: every thread reads ``buf+READ`` before waiting on it
TMA_READ = """\
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pMap, .param .u32 pBytes)
.reqntid 128, 1, 1
{
.reg .pred %p<8>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
.shared .align 128 .b8 buf[8192];
.shared .align 8 .b64 bar;
mov.u32 %r1, %tid.x;
ld.param.u64 %rd1, [pMap];
ld.param.u32 %r9, [pBytes];
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [bar], 1;
fence.mbarrier_init.release.cluster;
bar.sync 0;
mov.u32 %r2, 0;
@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], BYTES;
@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [buf], [%rd1, {%r2, %r2}], [bar];
ld.shared.u32 %r3, [buf+READ];
$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;
@!%p3 bra $L_wait;
ld.shared.u32 %r4, [buf];
st.shared.u32 [buf+4096], %r4;
ret;
}
"""

#: warps 4-7 arrive on and wait for ``bar`` in two regions; warps 0-3 sit between them in
#: ``barrier.sync 1`` / ``barrier.sync 2`` and do REINIT (Triton 3.6's inval + init of every
#: mbarrier between two warp-specialized loops)
REGIONS = """\
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pOut)
.reqntid 256, 1, 1
{
.reg .pred %p<8>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
.shared .align 8 .b64 bar;
mov.u32 %r1, %tid.x;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [bar], 1;
bar.sync 0;
setp.lt.u32 %p2, %r1, 128;
@%p2 bra $L_default;
setp.eq.u32 %p3, %r1, 128;
@%p3 mbarrier.arrive.shared::cta.b64 _, [bar];
$L_w1:
mbarrier.try_wait.parity.shared::cta.b64 %p4, [bar], 0;
@!%p4 bra $L_w1;
barrier.sync 1;
barrier.sync 2;
@%p3 mbarrier.arrive.shared::cta.b64 _, [bar];
$L_w2:
mbarrier.try_wait.parity.shared::cta.b64 %p5, [bar], 0;
@!%p5 bra $L_w2;
bra $L_end;
$L_default:
barrier.sync 1;
REINIT
barrier.sync 2;
$L_end:
ret;
}
"""


def _findings(text: str) -> set[tuple[str, str]]:
    return {(f.rule, f.severity) for f in verify(text, arch="sm_90a", filename="k.ptx").findings
            if f.rule in ("AP3", "MB5", "MB7")}


@pytest.mark.parametrize("nbytes,read,want", [
    ("1024", "0", {("AP3", "error")}),       # the copy's first byte
    ("1024", "512", {("AP3", "error")}),     # inside the expected bytes
    ("1024", "2048", set()),                 # past them: another buffer
    ("%r9", "0", {("AP3", "error")}),        # unknown size, but its first byte
    ("%r9", "2048", {("AP3", "note")}),      # unknown size: the emulation decides
])
def test_a_read_before_the_wait_is_judged_by_the_copys_expected_bytes(nbytes, read, want):
    got = _findings(TMA_READ.replace("BYTES", nbytes).replace("READ", read))
    assert {x for x in got if x[0] == "AP3"} == want, got


def test_a_barrier_reinitialized_by_other_warps_starts_again_at_phase_0():
    text = REGIONS.replace("REINIT", "@%p1 mbarrier.inval.shared::cta.b64 [bar];\n"
                                     "@%p1 mbarrier.init.shared::cta.b64 [bar], 1;")
    got = _findings(text)
    assert not any(sev == "error" for _, sev in got), got
    assert ("MB7", "note") in got      # one arrival site per region: a wait between them


def test_without_the_reinit_the_second_region_waits_for_a_completed_phase():
    got = _findings(REGIONS.replace("REINIT", ""))
    assert ("MB5", "error") in got, got
