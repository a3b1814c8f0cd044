"""Release / acquire through memory in the emulator (emulator/flags.py): a producer publishes
data with a flag, a consumer spins on the flag and then reads the data. Correct flag protocols
(``st.release`` -> ``ld.acquire``, release RMWs, fence + ``.relaxed`` patterns, ``membar`` +
``.volatile``) are ordered; each has a buggy twin the race check still reports: a relaxed
publish, a relaxed read with no acquire fence, data written after the release fence, and a
``.cta``-scope pattern between the CTAs of a cluster (PTX ISA 9.1 §8.8, §8.9.1, §8.7).
Before (2026-12-04), every correct protocol here was an HB1 false alarm. Red team round 9: an
acquire fence at ``.cta`` scope acquired a peer CTA's release, a narrower fence after a wide one
dropped the wide release, and a consumer spinning in code before its producer's timed out."""

from __future__ import annotations

import numpy as np
import pytest

from emulator import GlobalMemory, Launch, run_launch

# thread 0 writes buf[2] = 42 and publishes; thread 32 spins on the flag, reads buf[2] and
# stores it to out[0]
CTA = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 16 .b8 buf[256];
.shared .align 4 .b32 flag;
.visible .entry k(.param .u64 out)
.reqntid 64
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r3, buf;
mov.u32 %r20, flag;
setp.ne.u32 %p1, %r1, 0;
@%p1 bra CONSUMER;
st.shared.u32 [%r20], 0;
bar.sync 0;
st.shared.u32 [%r3+8], 42;
{pub}
bra DONE;
CONSUMER:
bar.sync 0;
setp.ne.u32 %p2, %r1, 32;
@%p2 bra DONE;
SPIN:
{take}
setp.eq.u32 %p3, %r21, 0;
@%p3 bra SPIN;
{after}
ld.shared.u32 %r22, [%r3+8];
st.global.u32 [%rd1], %r22;
DONE:
ret;
}}
"""

# the same across a cluster of 2: thread 0 of rank 0 writes rank 1's buf[2] through mapa and
# publishes on rank 1's flag; thread 0 of rank 1 spins on its own flag
CLUSTER = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 16 .b8 buf[256];
.shared .align 4 .b32 flag;
.visible .entry k(.param .u64 out)
.reqntid 64
.reqnctapercluster 2, 1, 1
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %cluster_ctarank;
mov.u32 %r3, buf;
mov.u32 %r20, flag;
st.shared.u32 [%r20], 0;
barrier.cluster.arrive.aligned;
barrier.cluster.wait.aligned;
setp.ne.u32 %p1, %r1, 0;
@%p1 bra DONE;
setp.ne.u32 %p2, %r2, 0;
@%p2 bra CONSUMER;
mapa.shared::cluster.u32 %r8, %r3, 1;
mapa.shared::cluster.u32 %r9, %r20, 1;
st.shared::cluster.u32 [%r8+8], 42;
{pub}
bra DONE;
CONSUMER:
SPIN:
{take}
setp.eq.u32 %p3, %r21, 0;
@%p3 bra SPIN;
{after}
ld.shared.u32 %r22, [%r3+8];
st.global.u32 [%rd1], %r22;
DONE:
{tail}
ret;
}}
"""

REL, ACQ = "st.release.cta.shared.u32 [%r20], 1;", "ld.acquire.cta.shared.u32 %r21, [%r20];"
RELAXED_ST, RELAXED_LD = "st.relaxed.cta.shared.u32 [%r20], 1;", \
    "ld.relaxed.cta.shared.u32 %r21, [%r20];"
CREL, CACQ = "st.release.cluster.shared::cluster.u32 [%r9], 1;", \
    "ld.acquire.cluster.shared::cta.u32 %r21, [%r20];"


def _run(ptx: str, grid=(1, 1, 1)):
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(4, np.uint32))
    launch = Launch(grid=grid, threads=64, params={"out": out.to_bytes(8, "little")})
    res = run_launch(ptx, launch, gmem, filename="flags.ptx")
    assert res.status == "ok", res.message
    errors = sorted({f.rule for f in res.findings if f.severity == "error"})
    return errors, int(gmem.buffer("out").view(np.uint32)[0])


@pytest.mark.parametrize("pub,take,after", [
    (REL, ACQ, ""),
    ("fence.acq_rel.cta;\n" + RELAXED_ST, RELAXED_LD, "fence.acq_rel.cta;"),
    ("atom.release.cta.shared.exch.b32 %r25, [%r20], 1;", ACQ, ""),
    ("red.release.cta.shared.add.u32 [%r20], 1;", "atom.acquire.cta.shared.or.b32 %r21, [%r20], 0;",
     ""),
    ("membar.cta;\nst.volatile.shared.u32 [%r20], 1;", "ld.volatile.shared.u32 %r21, [%r20];",
     "membar.cta;"),
], ids=["release-acquire", "fences-relaxed", "atom-release", "red-release-atom-acquire",
        "membar-volatile"])
def test_a_correct_flag_protocol_in_a_cta_is_ordered(pub, take, after):
    assert _run(CTA.format(pub=pub, take=take, after=after)) == ([], 42)


@pytest.mark.parametrize("pub,take,after,data", [
    (RELAXED_ST, ACQ, "", 42),  # a relaxed publish releases nothing
    (REL, RELAXED_LD, "", 42),  # a relaxed read acquires only with a fence after it
    ("fence.acq_rel.cta;\nst.shared.u32 [%r3+8], 43;\n" + RELAXED_ST, ACQ, "", 43),
    ("st.release.cta.shared.u32 [%r20], 1;\nst.shared.u32 [%r20], 1;", ACQ, "", 42),
], ids=["relaxed-publish", "relaxed-read-no-fence", "data-after-the-fence",
        "weak-rewrite-ends-the-release-sequence"])
def test_a_broken_flag_protocol_in_a_cta_is_a_race(pub, take, after, data):
    errors, got = _run(CTA.format(pub=pub, take=take, after=after))
    assert "HB1" in errors and got == data


@pytest.mark.parametrize("bump,want", [
    ("red.relaxed.cta.shared.add.u32 [%r20], 1;", []),
    ("st.relaxed.cta.shared.u32 [%r20], 2;", ["HB1"]),
], ids=["rmw-continues", "store-ends"])
def test_an_rmw_continues_the_release_sequence(bump, want):
    # thread 1 waits (relaxed, no acquire) for thread 0's release, then moves the flag to 2;
    # the consumer waits for 2. Through an RMW the release sequence of thread 0's release goes
    # on (the consumer acquires thread 0's data); a plain strong store ends it
    one = ("setp.ne.u32 %p4, %r1, 1;\n@%p4 bra NOTONE;\nSPIN1:\n"
           "ld.relaxed.cta.shared.u32 %r26, [%r20];\nsetp.eq.u32 %p5, %r26, 0;\n"
           f"@%p5 bra SPIN1;\n{bump}\nbra DONE;\nNOTONE:\nsetp.ne.u32 %p2, %r1, 32;")
    ptx = CTA.format(pub=REL, take=ACQ, after="").replace("setp.ne.u32 %p2, %r1, 32;", one)
    ptx = ptx.replace("setp.eq.u32 %p3, %r21, 0;", "setp.ne.u32 %p3, %r21, 2;")
    assert _run(ptx) == (want, 42)


@pytest.mark.parametrize("pub,take,after", [
    (CREL, CACQ, ""),
    ("red.release.cluster.shared::cluster.add.u32 [%r9], 1;", CACQ, ""),
    ("fence.acq_rel.cluster;\nst.relaxed.cluster.shared::cluster.u32 [%r9], 1;",
     "ld.relaxed.cluster.shared::cta.u32 %r21, [%r20];", "fence.acq_rel.cluster;"),
], ids=["release-acquire", "red-release", "fences-relaxed"])
def test_a_correct_flag_protocol_across_a_cluster_is_ordered(pub, take, after):
    # also no HB9: the peer's flag write was observed by the owner before it exited
    assert _run(CLUSTER.format(pub=pub, take=take, after=after, tail=""), grid=(2, 1, 1)) == \
        ([], 42)


@pytest.mark.parametrize("pub,take", [
    ("st.release.cta.shared::cluster.u32 [%r9], 1;", CACQ),
    (CREL, "ld.acquire.cta.shared::cta.u32 %r21, [%r20];"),
    ("fence.acq_rel.cta;\nst.relaxed.cluster.shared::cluster.u32 [%r9], 1;", CACQ),
], ids=["cta-release", "cta-acquire", "cta-fence"])
def test_a_cta_scope_pattern_orders_nothing_across_the_cluster(pub, take):
    errors, got = _run(CLUSTER.format(pub=pub, take=take, after="", tail=""), grid=(2, 1, 1))
    assert "HB1" in errors and got == 42


@pytest.mark.parametrize("after", ["fence.acq_rel.cta;", "fence.acquire.cta;", "membar.cta;"])
def test_a_cta_scope_acquire_fence_orders_nothing_across_the_cluster(after):
    # a .relaxed.cluster read of the peer's release, then an acquire fence at .cta scope: the
    # fence-acquire pattern is not morally strong with the peer's release (PTX ISA 9.1
    # §8.9.1); it acquired the peer's writes before (red team round 9)
    take = "ld.relaxed.cluster.shared::cta.u32 %r21, [%r20];"
    errors, got = _run(CLUSTER.format(pub=CREL, take=take, after=after, tail=""),
                       grid=(2, 1, 1))
    assert "HB1" in errors and got == 42
    wide = after.replace(".cta", ".cluster") if "membar" not in after else "membar.gl;"
    assert _run(CLUSTER.format(pub=CREL, take=take, after=wide, tail=""),
                grid=(2, 1, 1)) == ([], 42)


def test_a_narrower_fence_after_a_wide_one_keeps_the_wide_release():
    # fence.acq_rel.cluster; fence.acq_rel.cta; st.relaxed.cluster: the first fence and the
    # relaxed store are a release pattern at .cluster scope of what came before the fence (the
    # .cta fence in between replaced it: HB1 false alarm, red team round 9)
    pub = ("fence.acq_rel.cluster;\nfence.acq_rel.cta;\n"
           "st.relaxed.cluster.shared::cluster.u32 [%r9], 1;")
    take = "ld.relaxed.cluster.shared::cta.u32 %r21, [%r20];"
    assert _run(CLUSTER.format(pub=pub, take=take, after="fence.acq_rel.cluster;", tail=""),
                grid=(2, 1, 1)) == ([], 42)
    # the data written between the two fences is released to the CTA only
    late = pub.replace("fence.acq_rel.cta;", "fence.acq_rel.cta;\n"
                       "st.shared::cluster.u32 [%r8+8], 43;")
    errors, got = _run(CLUSTER.format(pub=late, take=take, after="fence.acq_rel.cluster;",
                                      tail=""), grid=(2, 1, 1))
    assert "HB1" in errors and got == 43


# warp 0 spins on the flag in code placed before warp 1's producer code: under min-PC
# scheduling the spinning warp always had the lowest program counter and the producer never
# ran (a timeout after 60 s; red team round 9)
CONSUMER_FIRST = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 16 .b8 buf[128];
.shared .align 4 .b32 flag;
.visible .entry k(.param .u64 out)
.reqntid 64
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
and.b32 %r3, %r1, 31;
mov.u32 %r4, buf;
mov.u32 %r5, flag;
setp.eq.u32 %p1, %r1, 0;
@%p1 st.shared.u32 [%r5], 0;
bar.sync 0;
shl.b32 %r6, %r3, 2;
add.u32 %r7, %r4, %r6;
setp.ge.u32 %p2, %r1, 32;
@%p2 bra PRODUCER;
mov.u32 %r12, 0;
SPIN:
ld.acquire.cta.shared.u32 %r8, [%r5];
setp.ne.u32 %p3, %r8, 0;
@%p3 bra GOT;
{retry}
nanosleep.u32 20;
bra.uni SPIN;
GOT:
ld.shared.u32 %r9, [%r7];
mul.wide.u32 %rd2, %r3, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r9;
bra.uni DONE;
PRODUCER:
mad.lo.u32 %r10, %r3, 3, 1;
st.shared.u32 [%r7], %r10;
bar.warp.sync -1;
setp.eq.u32 %p4, %r3, 0;
{publish}
DONE:
ret;
}}
"""


def _run32(ptx: str):
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(32, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=64, params={"out": out.to_bytes(8, "little")})
    res = run_launch(ptx, launch, gmem, filename="spin.ptx", time_limit_s=30.0)
    return res, gmem.buffer("out").view(np.uint32)[:32]


def test_a_consumer_spinning_before_its_producer_in_program_order_completes():
    res, out = _run32(CONSUMER_FIRST.format(
        retry="", publish="@%p4 st.release.cta.shared.u32 [%r5], 1;"))
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert out.tolist() == [3 * i + 1 for i in range(32)]
    # the same with a relaxed publish is still the race
    res, out = _run32(CONSUMER_FIRST.format(
        retry="", publish="@%p4 st.relaxed.cta.shared.u32 [%r5], 1;"))
    assert res.status == "ok" and "HB1" in {f.rule for f in res.findings}


def test_a_spin_on_a_flag_no_thread_writes_is_a_deadlock():
    res, _ = _run32(CONSUMER_FIRST.format(retry="", publish=""))
    assert res.status == "deadlock", res.message
    (f,) = [f for f in res.findings if f.rule == "HB2"]
    assert "spins on memory no thread writes" in " ".join(n.message for n in f.notes)


def test_a_bounded_spin_that_gives_up_is_not_a_deadlock():
    # the loop leaves after 100 rounds: being parked while the flag is unchanged must not
    # turn it into a deadlock (it only delays the spinning lanes)
    retry = "add.u32 %r12, %r12, 1;\nsetp.ge.u32 %p5, %r12, 100;\n@%p5 bra DONE;"
    res, out = _run32(CONSUMER_FIRST.format(retry=retry, publish=""))
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert out.tolist() == [0] * 32


def test_a_ping_pong_handoff_on_one_flag():
    # thread 0 (first in program order) waits for flag == 0, writes data, releases flag = 1;
    # thread 32 waits for 1, adds the data, releases 0; four rounds (timed out before)
    ptx = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 4 .b32 data;
.shared .align 4 .b32 flag;
.visible .entry k(.param .u64 out)
.reqntid 64
{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, data;
mov.u32 %r3, flag;
setp.eq.u32 %p1, %r1, 0;
@%p1 st.shared.u32 [%r3], 0;
bar.sync 0;
mov.u32 %r10, 0;
@!%p1 bra.uni CONS;
PSPIN:
ld.acquire.cta.shared.u32 %r4, [%r3];
setp.ne.u32 %p2, %r4, 0;
@%p2 bra.uni PSPIN;
mul.lo.u32 %r5, %r10, 10;
st.shared.u32 [%r2], %r5;
st.release.cta.shared.u32 [%r3], 1;
add.u32 %r10, %r10, 1;
setp.lt.u32 %p3, %r10, 4;
@%p3 bra.uni PSPIN;
bra.uni DONE;
CONS:
setp.ne.u32 %p4, %r1, 32;
@%p4 bra.uni DONE;
mov.u32 %r11, 0;
CSPIN:
ld.acquire.cta.shared.u32 %r4, [%r3];
setp.ne.u32 %p5, %r4, 1;
@%p5 bra.uni CSPIN;
ld.shared.u32 %r6, [%r2];
add.u32 %r11, %r11, %r6;
st.release.cta.shared.u32 [%r3], 0;
add.u32 %r10, %r10, 1;
setp.lt.u32 %p6, %r10, 4;
@%p6 bra.uni CSPIN;
st.global.u32 [%rd1], %r11;
DONE:
ret;
}
"""
    res, out = _run32(ptx)
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert int(out[0]) == 0 + 10 + 20 + 30
