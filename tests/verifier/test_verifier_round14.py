"""Static rules changed for red team round 14 and the review of that change: TA3 accepts a
``bar.warp.sync`` only for the allocating warp's own read (an unpredicated alloc on the path),
and MB7 keeps an error when the arrivals of all sites together fall short of the count
(no phase can complete), while sites split by a wait with more arrivals are a note."""

from __future__ import annotations

import pytest

from verifier import verify

TA3_KERNEL = """\
.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 p)
.reqntid 128, 1, 1
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.shared .align 16 .b32 slot;
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
setp.eq.u32 %p1, %r2, 0;
BODY
ret;
}
"""


def _rules(text: str, arch: str) -> set[tuple[str, str]]:
    return {(f.rule, f.severity) for f in verify(text, arch=arch, filename="k.ptx").findings}


@pytest.mark.parametrize("body,flagged", [
    # warp 0 allocates in its own branch region and reads the slot back after bar.warp.sync
    ("@!%p1 bra DONE;\n"
     "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;\n"
     "bar.warp.sync -1;\nld.shared.u32 %r3, [slot];\nDONE:", False),
    # the alloc is predicated on warp 0 and every warp reads: the warp barrier orders nothing
    # for warps 1-3
    ("@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;\n"
     "bar.warp.sync -1;\nld.shared.u32 %r3, [slot];", True),
])
def test_a_warp_barrier_publishes_the_tmem_address_to_the_allocating_warp_only(body, flagged):
    got = _rules(TA3_KERNEL.replace("BODY", body), "sm_100a")
    assert (("TA3", "error") in got) == flagged, got


MB7_KERNEL = """\
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
.reqntid 128, 1, 1
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.shared .align 8 .b64 bar;
mov.u32 %r1, %tid.x;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [bar], COUNT;
bar.sync 0;
@%p1 mbarrier.arrive.shared::cta.b64 _, [bar];
W1:
mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
@!%p2 bra W1;
@%p1 mbarrier.arrive.shared::cta.b64 _, [bar];
W2:
mbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 1;
@!%p3 bra W2;
ret;
}
"""


@pytest.mark.parametrize("count,want", [
    (1, ("MB7", "note")),     # one arrival per phase, two phases: the sites serve each one
    (3, ("MB7", "error")),    # two arrivals in all against a count of 3: no phase completes
])
def test_arrival_sites_split_by_a_wait(count, want):
    got = {x for x in _rules(MB7_KERNEL.replace("COUNT", str(count)), "sm_90a")
           if x[0] == "MB7"}
    assert want in got and (want[1] == "error" or ("MB7", "error") not in got), got
