"""Release / acquire between CTAs of different clusters (emulator/flags.py, ``Machine.xvc``):
the last-CTA reduction (each CTA stores a partial, fences at ``.gpu`` and bumps a counter with a
relaxed atomic; the CTA that sees the last count fences and sums every partial) and a grid-wide
flag. The vector clocks span one cluster, so before (2026-12-04) every such correct protocol
between CTAs without a common cluster was an HB1 false alarm; the broken twins (no fence on
either side, a fence at ``.cluster`` scope, data written after the fence) stay HB1.
Sources: PTX ISA 9.1 §8.7 (morally strong: the scopes must include both threads; CTAs of
different clusters share only ``.gpu``), §8.8, §8.9.1."""

from __future__ import annotations

import numpy as np
import pytest

from emulator import GlobalMemory, Launch
from emulator.machine import Machine
from emulator.program import build_program
from verifier.ptx.parser import parse_ptx

# thread 0 of each CTA stores part[cta] = 10 * cta + 7, then {rel}; atom.add on the counter;
# {acq}; the CTA whose atom returned nctaid - 1 publishes "last" to its CTA through shared
# memory and a bar.sync, and its thread t < nctaid reads part[t] into sums[t]
LAST_CTA = """.version 8.4
.target sm_90a
.address_size 64
.shared .align 4 .b32 amlast;
.visible .entry k(.param .u64 part, .param .u64 cnt, .param .u64 sums)
.reqntid 32
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<16>;
ld.param.u64 %rd1, [part];
ld.param.u64 %rd2, [cnt];
ld.param.u64 %rd3, [sums];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
mov.u32 %r3, %nctaid.x;
mov.u32 %r8, amlast;
setp.ne.u32 %p1, %r1, 0;
@%p1 bra WAIT;
mad.lo.u32 %r4, %r2, 10, 7;
mul.wide.u32 %rd4, %r2, 4;
add.s64 %rd5, %rd1, %rd4;
st.global.u32 [%rd5], %r4;
{late}
{rel}
atom.global.add.u32 %r5, [%rd2], 1;
{acq}
add.u32 %r6, %r3, -1;
setp.eq.u32 %p2, %r5, %r6;
selp.u32 %r7, 1, 0, %p2;
st.shared.u32 [%r8], %r7;
WAIT:
bar.sync 0;
ld.shared.u32 %r9, [%r8];
setp.eq.u32 %p3, %r9, 0;
@%p3 bra DONE;
setp.ge.u32 %p4, %r1, %r3;
@%p4 bra DONE;
mul.wide.u32 %rd6, %r1, 4;
add.s64 %rd7, %rd1, %rd6;
ld.global.u32 %r12, [%rd7];
add.s64 %rd8, %rd3, %rd6;
st.global.u32 [%rd8], %r12;
DONE:
ret;
}}
"""


def _launch(ptx: str, bufs: dict[str, np.ndarray], ctas: int, threads: int = 32,
            race_budget: int = 1 << 22, dynamic_smem: int = 0):
    """Emulate ``ptx`` over ``ctas`` CTAs with one pointer parameter per buffer (in order);
    returns the outcome and the buffers' contents after the launch."""
    gmem = GlobalMemory()
    params = {name: gmem.add(name, a).to_bytes(8, "little") for name, a in bufs.items()}
    launch = Launch(grid=(ctas, 1, 1), threads=threads, params=params,
                    dynamic_smem=dynamic_smem)
    res = Machine(build_program(parse_ptx(ptx, "grid_flags.ptx")), launch, gmem,
                  time_limit_s=30.0, race_budget=race_budget).run()
    out = {name: gmem.buffer(name).view(a.dtype)[:a.size] for name, a in bufs.items()}
    return res, out


def _errors(res) -> list[str]:
    assert res.status == "ok", res.message
    return sorted({f.rule for f in res.findings if f.severity == "error"})


def _run(ptx: str, ctas: int, race_budget: int = 1 << 22, threads: int = 32):
    res, out = _launch(ptx, {"part": np.zeros(ctas, np.uint32), "cnt": np.zeros(1, np.uint32),
                             "sums": np.zeros(32, np.uint32)}, ctas, threads, race_budget)
    return _errors(res), out["sums"][:ctas].tolist()


WANT = [10 * i + 7 for i in range(8)]


@pytest.mark.parametrize("rel,acq", [
    ("membar.gl;", "membar.gl;"),
    ("fence.acq_rel.gpu;", "fence.acq_rel.gpu;"),
    ("fence.sc.gpu;", "fence.acquire.gpu;"),
    ("", ""),  # the atom itself is .acq_rel.gpu (below)
], ids=["membar", "fence-acq-rel", "fence-sc", "atom-acq-rel"])
def test_the_last_cta_reduction_across_clusters_is_ordered(rel, acq):
    ptx = LAST_CTA.format(rel=rel, acq=acq, late="")
    if not rel:
        ptx = ptx.replace("atom.global.add.u32", "atom.acq_rel.gpu.global.add.u32")
    # every CTA is its own cluster; the other thread of the last CTA learn of the partials
    # through the bar.sync after its thread 0's acquire
    assert _run(ptx, 8) == ([], WANT)


def test_the_last_cta_reduction_over_several_batches_is_ordered():
    # a race budget of 2 CTAs per batch: the counter's releases of earlier batches are kept
    T, W = 32, 32 + 18
    assert _run(LAST_CTA.format(rel="membar.gl;", acq="membar.gl;", late=""), 8,
                race_budget=2 * T * W) == ([], WANT)


@pytest.mark.parametrize("rel,acq,late", [
    ("", "", ""),
    ("membar.gl;", "", ""),
    ("", "membar.gl;", ""),
    ("fence.acq_rel.cluster;", "fence.acq_rel.cluster;", ""),
    ("membar.gl;", "membar.cta;", ""),
    ("membar.gl;", "membar.gl;", "__LATE__"),
], ids=["no-fences", "no-acquire-fence", "no-release-fence", "cluster-scope", "cta-acquire",
        "data-after-the-fence"])
def test_a_broken_last_cta_reduction_is_a_race(rel, acq, late):
    ptx = LAST_CTA.format(rel=rel, acq=acq, late=late)
    if late:  # the partial is rewritten after the release fence (another value, same place)
        ptx = ptx.replace("__LATE__", "").replace(
            "atom.global.add.u32 %r5, [%rd2], 1;",
            "add.u32 %r4, %r4, 0;\nst.global.u32 [%rd5], %r4;\n"
            "atom.global.add.u32 %r5, [%rd2], 1;")
    errors, got = _run(ptx, 8)
    assert "HB1" in errors and got == WANT


# the same handoff inside the last CTA through an mbarrier: warp 0's thread 0 acquires the
# partials, then arrives on an mbarrier; warp 1 waits on it and reads them
MBAR_HANDOFF = """.version 8.4
.target sm_90a
.address_size 64
.shared .align 8 .b64 bar;
.visible .entry k(.param .u64 part, .param .u64 cnt, .param .u64 sums)
.reqntid 64
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<16>;
ld.param.u64 %rd1, [part];
ld.param.u64 %rd2, [cnt];
ld.param.u64 %rd3, [sums];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
mov.u32 %r3, %nctaid.x;
mov.u32 %r8, bar;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [%r8], 1;
bar.sync 0;
setp.ge.u32 %p5, %r1, 32;
@%p5 bra CONSUMER;
@!%p1 bra DONE;
mad.lo.u32 %r4, %r2, 10, 7;
mul.wide.u32 %rd4, %r2, 4;
add.s64 %rd5, %rd1, %rd4;
st.global.u32 [%rd5], %r4;
membar.gl;
atom.global.add.u32 %r5, [%rd2], 1;
membar.gl;
add.u32 %r6, %r3, -1;
setp.ne.u32 %p2, %r5, %r6;
@%p2 bra DONE;
{arrive}
bra DONE;
CONSUMER:
add.u32 %r6, %r3, -1;
setp.ne.u32 %p2, %r2, %r6;
@%p2 bra DONE;
WAIT:
mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r8], 0;
@!%p3 bra WAIT;
sub.u32 %r10, %r1, 32;
setp.ge.u32 %p4, %r10, %r3;
@%p4 bra DONE;
mul.wide.u32 %rd6, %r10, 4;
add.s64 %rd7, %rd1, %rd6;
ld.global.u32 %r12, [%rd7];
add.s64 %rd8, %rd3, %rd6;
st.global.u32 [%rd8], %r12;
DONE:
ret;
}}
"""


def test_cross_cluster_knowledge_passes_through_an_mbarrier():
    # the grid runs in CTA order, so the last CTA (7) is the one whose atom returns 7
    ptx = MBAR_HANDOFF.format(arrive="mbarrier.arrive.shared::cta.b64 _, [%r8];")
    assert _handoff(ptx) == ([], WANT)
    # a relaxed arrive publishes what the thread knew at its last release fence: the
    # membar.gl after the atom acquired the partials and then released them (ordered); with
    # the acquire in the atom itself and no fence after it, they were acquired after the last
    # release fence and do not go along
    relaxed = MBAR_HANDOFF.format(arrive="mbarrier.arrive.relaxed.cta.shared::cta.b64 _, [%r8];")
    assert _handoff(relaxed) == ([], WANT)
    late = relaxed.replace("atom.global.add.u32 %r5, [%rd2], 1;\nmembar.gl;",
                           "atom.acquire.gpu.global.add.u32 %r5, [%rd2], 1;")
    errors, got = _handoff(late)
    assert "HB1" in errors and got == WANT


def _handoff(ptx: str):
    return _run(ptx, 8, threads=64)


def test_a_spin_for_a_cta_of_a_later_batch_is_not_called_a_deadlock():
    # CTA 0 waits for a flag CTA 3 sets; with 2 CTAs per batch, CTA 3 runs only after CTA 0's
    # batch, which cannot finish: the emulator says it cannot decide (not HB2)
    ptx = """.version 8.4
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 flag)
.reqntid 32
{
.reg .pred %p<4>;
.reg .b32 %r<8>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [flag];
mov.u32 %r1, %ctaid.x;
mov.u32 %r2, %tid.x;
setp.ne.u32 %p1, %r2, 0;
@%p1 bra DONE;
setp.eq.u32 %p2, %r1, 3;
@%p2 bra SET;
setp.ne.u32 %p3, %r1, 0;
@%p3 bra DONE;
SPIN:
ld.acquire.gpu.global.u32 %r3, [%rd1];
setp.eq.u32 %p3, %r3, 0;
@%p3 bra SPIN;
bra DONE;
SET:
st.release.gpu.global.u32 [%rd1], 1;
DONE:
ret;
}
"""
    from emulator import EmulationUnsupported

    def run(budget):
        return _launch(ptx, {"flag": np.zeros(1, np.uint32)}, 4, race_budget=budget)[0]

    assert run(1 << 22).status == "ok"  # one batch: CTA 3 runs while CTA 0 spins
    with pytest.raises(EmulationUnsupported, match="later batches"):
        run(2 * 32 * 50)


# a spin lock across CTAs (Triton's split-K serial reduction: ``while tl.atomic_cas(lock, 0, 1)
# == 1: pass``, then a read-modify-write of the shared partial, then ``tl.atomic_xchg(lock,
# 0)``): thread 0 of each CTA adds ctaid + 1 to acc under the lock
LOCK = """.version 8.4
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 lock, .param .u64 acc)
.reqntid 32
{{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [lock];
ld.param.u64 %rd2, [acc];
mov.u32 %r1, %ctaid.x;
mov.u32 %r2, %tid.x;
setp.ne.u32 %p1, %r2, 0;
@%p1 bra DONE;
SPIN:
{take}
setp.ne.u32 %p2, %r3, 0;
@%p2 bra SPIN;
{after}
ld.global.u32 %r4, [%rd2];
add.u32 %r4, %r4, %r1;
add.u32 %r4, %r4, 1;
st.global.u32 [%rd2], %r4;
{give}
DONE:
ret;
}}
"""
CAS = "atom.global.acq_rel.gpu.cas.b32 %r3, [%rd1], 0, 1;"
XCHG = "atom.global.release.gpu.exch.b32 %r5, [%rd1], 0;"


def _lock(take, after, give, ctas=4):
    res, out = _launch(LOCK.format(take=take, after=after, give=give),
                       {"lock": np.zeros(1, np.uint32), "acc": np.zeros(1, np.uint32)}, ctas)
    return _errors(res), int(out["acc"][0])


@pytest.mark.parametrize("take,after,give", [
    (CAS, "", XCHG),
    ("atom.global.cas.b32 %r3, [%rd1], 0, 1;", "fence.acq_rel.gpu;",
     "fence.acq_rel.gpu;\natom.global.exch.b32 %r5, [%rd1], 0;"),
    (CAS, "", "st.release.gpu.global.u32 [%rd1], 0;"),
], ids=["acq-rel-cas", "relaxed-cas-fences", "release-store"])
def test_a_spin_lock_across_ctas_is_ordered(take, after, give):
    # the CAS loop of the CTAs waiting for the lock spun forever under min-PC scheduling (a
    # failed CAS was a write, so the loop never looked idle; a timeout); the critical sections
    # of CTAs without a common cluster were HB1 false alarms
    assert _lock(take, after, give) == ([], 1 + 2 + 3 + 4)


@pytest.mark.parametrize("take,after,give", [
    ("atom.global.cas.b32 %r3, [%rd1], 0, 1;", "", XCHG),
    (CAS, "", "st.global.u32 [%rd1], 0;"),
    (CAS, "", "atom.global.cta.release.exch.b32 %r5, [%rd1], 0;"),
], ids=["relaxed-cas", "weak-unlock", "cta-scope-unlock"])
def test_a_broken_spin_lock_is_a_race(take, after, give):
    errors, got = _lock(take, after, give)
    assert "HB1" in errors and got == 1 + 2 + 3 + 4


def test_a_spin_on_an_atomic_add_of_zero_waits_for_the_producer():
    # Triton has no atomic load: ``while tl.atomic_add(flag, 0) == 0: pass``; CTA 0 waits
    # for CTA 3's flag, then reads its data
    take = "atom.global.acquire.gpu.add.u32 %r3, [%rd1], 0;"
    ptx = """.version 8.4
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 lock, .param .u64 acc)
.reqntid 32
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [lock];
ld.param.u64 %rd2, [acc];
mov.u32 %r1, %ctaid.x;
mov.u32 %r2, %tid.x;
setp.ne.u32 %p1, %r2, 0;
@%p1 bra DONE;
setp.eq.u32 %p2, %r1, 3;
@%p2 bra PRODUCE;
setp.ne.u32 %p2, %r1, 0;
@%p2 bra DONE;
SPIN:
TAKE
setp.eq.u32 %p3, %r3, 0;
@%p3 bra SPIN;
ld.global.u32 %r4, [%rd2+4];
st.global.u32 [%rd2], %r4;
bra DONE;
PRODUCE:
st.global.u32 [%rd2+4], 77;
atom.global.release.gpu.exch.b32 %r5, [%rd1], 1;
DONE:
ret;
}
"""
    for t, want in ((take, []), (take.replace("acquire.", ""), ["HB1"])):
        res, out = _launch(ptx.replace("TAKE", t), {"lock": np.zeros(1, np.uint32),
                                                    "acc": np.zeros(2, np.uint32)}, 4)
        assert _errors(res) == want
        assert int(out["acc"][0]) == 77


def test_tritons_broadcast_spin_lock_is_ordered():
    # Triton 3.9's ``while tl.atomic_cas(lock, 0, 1) == 1: pass`` with num_warps=4: thread 0
    # runs the CAS and broadcasts its result through shared memory between two bar.sync, the
    # whole CTA loops; then every thread adds its element under the lock. The broadcast store
    # of the same value each round kept the loop from looking idle (a timeout)
    ptx = """.version 8.4
.target sm_90a
.address_size 64
.extern .shared .align 16 .b8 global_smem[];
.visible .entry k(.param .u64 lock, .param .u64 acc)
.reqntid 128
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd7, [lock];
ld.param.u64 %rd2, [acc];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
setp.eq.b32 %p1, %r1, 0;
mov.b32 %r9, global_smem;
LOOP:
bar.sync 0;
mov.b32 %r7, 0;
mov.b32 %r8, 1;
mov.u32 %r6, 0x0;
@%p1 atom.global.acq_rel.gpu.cas.b32 %r6, [%rd7], %r7, %r8;
@%p1 st.shared::cta.b32 [%r9], %r6;
bar.sync 0;
ld.shared.b32 %r10, [global_smem];
setp.eq.b32 %p2, %r10, 1;
@%p2 bra LOOP;
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd6, %rd2, %rd3;
ld.global.b32 %r11, [%rd6];
add.u32 %r12, %r11, %r2;
st.global.b32 [%rd6], %r12;
bar.sync 0;
@%p1 atom.global.gpu.acq_rel.exch.b32 %r13, [%rd7], %r7;
bar.sync 0;
ret;
}
"""
    res, out = _launch(ptx, {"lock": np.zeros(1, np.uint32), "acc": np.zeros(128, np.uint32)},
                       4, threads=128, dynamic_smem=64)
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert out["acc"].tolist() == [0 + 1 + 2 + 3] * 128
