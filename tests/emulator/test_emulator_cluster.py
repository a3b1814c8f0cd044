"""Thread-block clusters in the emulator (emulator/cluster.py): the cluster launch and special
registers, distributed shared memory through ``mapa``, ``barrier.cluster`` release/acquire (and a
``.relaxed`` arrive that publishes nothing), remote mbarrier arrivals, and the two cluster errors:
HB9 (a CTA exits while a peer may still read its shared memory) and HB8 (a remote arrive on an
mbarrier whose init is not visible). Each construct has a correct and a buggy twin."""

from __future__ import annotations

import numpy as np
import pytest

from emulator import GlobalMemory, Launch, run_launch

HEAD = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 16 .b8 buf[256];
.shared .align 8 .b64 bar;
.visible .entry k(.param .u64 out)
.reqntid 64
{cluster}
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %cluster_ctarank;
mov.u32 %r3, buf;
"""

# every CTA writes buf[tid] = 100 * rank + tid, synchronises with its peer, reads the peer's
# buf[tid] through mapa + ld.shared::cluster and stores it to out[64 * ctaid + tid]
DSMEM = HEAD + """shl.b32 %r4, %r1, 2;
add.u32 %r5, %r3, %r4;
mad.lo.u32 %r6, %r2, 100, %r1;
st.shared.u32 [%r5], %r6;
{sync1}
xor.b32 %r7, %r2, 1;
mapa.shared::cluster.u32 %r8, %r5, %r7;
ld.shared::cluster.u32 %r9, [%r8];
mov.u32 %r10, %ctaid.x;
mad.lo.u32 %r11, %r10, 64, %r1;
mul.wide.u32 %rd2, %r11, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r9;
{sync2}
ret;
}}
"""
SYNC = "barrier.cluster.arrive.aligned;\nbarrier.cluster.wait.aligned;"
SYNC_RELAXED = "barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;"
SYNC_FENCED = "fence.acq_rel.cluster;\n" + SYNC_RELAXED
CL2 = ".reqnctapercluster 2, 1, 1"


def _launch(ptx: str, grid=(2, 1, 1), n_out=128, cluster=None):
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(n_out, np.uint32))
    launch = Launch(grid=grid, threads=64, params={"out": out.to_bytes(8, "little")},
                    cluster=cluster)
    res = run_launch(ptx, launch, gmem, filename="cl.ptx")
    return res, gmem.buffer("out").view(np.uint32)


def _rules(res):
    return sorted({f.rule for f in res.findings if f.severity == "error"})


def _want_dsmem(n_ctas=2):
    got = []
    for c in range(n_ctas):
        peer = c ^ 1
        got += [100 * (peer % 2) + t for t in range(64)]
    return got


def test_dsmem_exchange_with_cluster_barriers_is_ordered_and_correct():
    res, out = _launch(DSMEM.format(cluster=CL2, sync1=SYNC, sync2=SYNC))
    assert res.status == "ok", res.message
    assert res.findings == []
    assert out.tolist() == _want_dsmem()


def test_dsmem_two_clusters_launch_gives_each_cluster_its_own_peer():
    res, out = _launch(DSMEM.format(cluster=CL2, sync1=SYNC, sync2=SYNC), grid=(4, 1, 1),
                       n_out=256)
    assert res.status == "ok" and res.findings == []
    assert out.tolist() == _want_dsmem(4)


def test_relaxed_cluster_arrive_does_not_publish_shared_writes():
    res, out = _launch(DSMEM.format(cluster=CL2, sync1=SYNC_RELAXED, sync2=SYNC))
    assert "HB1" in _rules(res)
    race = next(f for f in res.findings if f.rule == "HB1")
    assert "ld.shared::cluster" in race.message and "st.shared" in race.message
    assert any("relaxed" in n.message for n in race.notes)


def test_relaxed_arrive_after_cluster_release_fence_publishes():
    res, out = _launch(DSMEM.format(cluster=CL2, sync1=SYNC_FENCED, sync2=SYNC))
    assert res.status == "ok" and res.findings == [], [str(f) for f in res.findings]
    assert out.tolist() == _want_dsmem()


def test_no_cluster_barrier_before_the_peer_read_is_a_race():
    res, _ = _launch(DSMEM.format(cluster=CL2, sync1="", sync2=SYNC))
    assert "HB1" in _rules(res)


def test_exit_before_the_peers_dsmem_read_is_hb8():
    res, out = _launch(DSMEM.format(cluster=CL2, sync1=SYNC, sync2=""))
    assert _rules(res) == ["HB9"], [str(f) for f in res.findings]
    f = next(f for f in res.findings if f.rule == "HB9")
    assert "exits" in f.message and "ld.shared::cluster" in f.message
    assert out.tolist() == _want_dsmem()  # the values are right: only the ordering is wrong


def test_read_of_an_exited_peers_shared_memory_is_hb8():
    # rank 1 exits at once; rank 0 reads its shared memory afterwards
    ptx = HEAD.format(cluster=CL2) + """setp.eq.u32 %p1, %r2, 1;
@%p1 bra $L_out;
mapa.shared::cluster.u32 %r8, %r3, 1;
ld.shared::cluster.u32 %r9, [%r8];
bar.sync 0;
bar.sync 0;
st.global.u32 [%rd1], %r9;
$L_out:
ret;
}
"""
    res, _ = _launch(ptx)
    assert "HB9" in _rules(res)


def test_cluster_special_registers():
    ptx = HEAD.format(cluster=CL2) + """mov.u32 %r10, %ctaid.x;
mov.u32 %r11, %clusterid.x;
mov.u32 %r12, %nclusterid.x;
mov.u32 %r13, %cluster_ctaid.x;
mov.u32 %r14, %cluster_nctaid.x;
mov.u32 %r15, %cluster_nctarank;
mov.pred %p1, %is_explicit_cluster;
selp.u32 %r16, 1, 0, %p1;
setp.eq.u32 %p2, %r1, 0;
@!%p2 bra $L_out;
mul.wide.u32 %rd2, %r10, 32;
add.s64 %rd3, %rd1, %rd2;
st.global.v4.u32 [%rd3], {%r2, %r11, %r12, %r13};
st.global.v4.u32 [%rd3+16], {%r14, %r15, %r16, %r10};
$L_out:
ret;
}
"""
    res, out = _launch(ptx, grid=(6, 1, 1), n_out=48)
    assert res.status == "ok", res.message
    rows = out.reshape(6, 8).tolist()
    for c, r in enumerate(rows):
        assert r == [c % 2, c // 2, 3, c % 2, 2, 2, 1, c], (c, r)


def test_launch_shape_errors_are_faults():
    ptx = DSMEM.format(cluster=CL2, sync1=SYNC, sync2=SYNC)
    res, _ = _launch(ptx, grid=(3, 1, 1), n_out=192)
    assert res.status == "fault" and "not a multiple" in res.message
    res, _ = _launch(ptx, cluster=(1, 1, 1))
    assert res.status == "fault" and "contradicts" in res.message
    res, _ = _launch(DSMEM.format(cluster=".explicitcluster", sync1=SYNC, sync2=SYNC))
    assert res.status == "fault" and "no cluster shape" in res.message


def test_launch_cluster_without_directive_and_mapa_out_of_range():
    ptx = DSMEM.format(cluster="", sync1=SYNC, sync2=SYNC)
    res, out = _launch(ptx, cluster=(2, 1, 1))
    assert res.status == "ok" and res.findings == []
    assert out.tolist() == _want_dsmem()
    res, _ = _launch(ptx.replace("xor.b32 %r7, %r2, 1;", "add.u32 %r7, %r2, 2;"),
                     cluster=(2, 1, 1))
    assert res.status == "fault" and "rank" in res.message


# the consumer side of the mbarrier kernels: wait on the CTA's own mbarrier (phase 0), read
# buf[tid] and store it to out[tid] (a .format template: braces doubled)
_CONSUMER = """$L_cons:
{{
.reg .pred done;
$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 done, [%r20], 0;
@!done bra.uni $L_wait;
}}
shl.b32 %r4, %r1, 2;
add.u32 %r5, %r3, %r4;
ld.shared.u32 %r9, [%r5];
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r9;
$L_end:
"""

# rank 1 writes into rank 0's buf through DSMEM, then arrives remotely on rank 0's mbarrier
# (release); rank 0 waits on its own mbarrier (acquire) and reads its buf
MBAR = HEAD + """mov.u32 %r20, bar;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [%r20], 64;
{fence}
{sync1}
setp.eq.u32 %p2, %r2, 1;
@!%p2 bra $L_cons;
shl.b32 %r4, %r1, 2;
add.u32 %r5, %r3, %r4;
mapa.shared::cluster.u32 %r8, %r5, 0;
add.u32 %r6, %r1, 7;
st.shared::cluster.u32 [%r8], %r6;
mapa.shared::cluster.u32 %r21, %r20, 0;
mbarrier.arrive{sem}.shared::cluster.b64 _, [%r21];
bra.uni $L_end;
""" + _CONSUMER + """{sync2}
ret;
}}
"""
FENCE_INIT = "fence.mbarrier_init.release.cluster;"


def _mbar(fence=FENCE_INIT, sync1=SYNC_RELAXED, sem=".release.cluster", sync2=SYNC):
    return _launch(MBAR.format(cluster=CL2, fence=fence, sync1=sync1, sem=sem, sync2=sync2))


def test_remote_mbarrier_arrive_orders_dsmem_writes():
    res, out = _mbar()
    assert res.status == "ok" and res.findings == [], [str(f) for f in res.findings]
    assert out[:64].tolist() == [t + 7 for t in range(64)]


def test_remote_arrive_without_init_fence_is_hb7():
    res, _ = _mbar(fence="")
    assert "HB8" in _rules(res)
    f = next(f for f in res.findings if f.rule == "HB8")
    assert "fence.mbarrier_init" in f.message


def test_remote_arrive_not_ordered_after_the_init_fence_is_hb7():
    res, _ = _mbar(sync1="")
    assert "HB8" in _rules(res)


def test_relaxed_remote_arrive_does_not_publish_dsmem_writes():
    res, _ = _mbar(sem=".relaxed.cluster")
    assert "HB1" in _rules(res)


def test_atom_shared_cluster_on_a_peer_counter():
    ptx = HEAD.format(cluster=CL2) + """setp.eq.u32 %p1, %r1, 0;
setp.eq.u32 %p3, %r2, 0;
and.pred %p4, %p1, %p3;
@%p4 st.shared.u32 [%r3], 0;
barrier.cluster.arrive.aligned;
barrier.cluster.wait.aligned;
mapa.shared::cluster.u32 %r8, %r3, 0;
atom.shared::cluster.add.u32 %r9, [%r8], 1;
barrier.cluster.arrive.aligned;
barrier.cluster.wait.aligned;
@!%p4 bra $L_out;
ld.shared.u32 %r10, [%r3];
st.global.u32 [%rd1], %r10;
$L_out:
barrier.cluster.arrive.aligned;
barrier.cluster.wait.aligned;
ret;
}
"""
    res, out = _launch(ptx)
    assert res.status == "ok" and res.findings == [], [str(f) for f in res.findings]
    assert int(out[0]) == 128


def test_cluster_wait_without_arrive_is_a_fault():
    res, _ = _launch(DSMEM.format(cluster=CL2, sync1="barrier.cluster.wait.aligned;",
                                  sync2=SYNC))
    assert res.status == "fault" and "without a preceding" in res.message


def test_a_thread_that_never_arrives_deadlocks_the_cluster():
    ptx = DSMEM.format(cluster=CL2, sync1=SYNC, sync2=SYNC).replace(
        "st.global.u32 [%rd3], %r9;",
        "st.global.u32 [%rd3], %r9;\nsetp.eq.u32 %p5, %r1, 3;\n@%p5 bra $L_spin;")
    ptx = ptx.replace("ret;\n}", "ret;\n$L_spin:\nbar.sync 1, 32;\nret;\n}")
    res, _ = _launch(ptx)
    assert res.status == "deadlock"
    assert "HB2" in _rules(res)


@pytest.mark.parametrize("grid", [(2, 1, 1), (8, 1, 1)])
def test_cta_subset_runs_whole_clusters(grid):
    from emulator.machine import Machine
    from emulator.program import build_program
    from verifier.ptx.parser import parse_ptx
    ptx = DSMEM.format(cluster=CL2, sync1=SYNC, sync2=SYNC)
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(64 * grid[0], np.uint32))
    launch = Launch(grid=grid, threads=64, params={"out": out.to_bytes(8, "little")})
    res = Machine(build_program(parse_ptx(ptx, "cl.ptx")), launch, gmem, max_ctas=1).run()
    assert res.status == "ok" and res.findings == []
    if grid[0] == 2:  # a budget of 1 CTA still runs the whole (only) cluster
        assert res.cta_ids is None and res.ctas_run == 2
    else:
        assert len(res.cta_ids) == 2 and res.cta_ids[0] % 2 == 0 and res.cta_ids[1] == \
            res.cta_ids[0] + 1


# TMA multicast (emulator/cluster.py tma_multicast over emu-async's tensor maps): rank 0 loads
# one 32 x 8 u32 box into both CTAs; each CTA waits on its own mbarrier and copies it out
MCAST = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 1024 .b8 buf[1024];
.shared .align 8 .b64 bar;
.visible .entry k(.param .align 64 .b8 tmap[128], .param .u64 out)
.reqntid 64
.reqnctapercluster 2, 1, 1
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<12>;
mov.b64 %rd5, tmap;
cvta.param.u64 %rd6, %rd5;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %cluster_ctarank;
mov.u32 %r3, buf;
mov.u32 %r9, bar;
mov.u32 %r10, 0;
mov.u16 %rs1, {mask};
setp.eq.u32 %p1, %r1, 0;
setp.eq.u32 %p2, %r2, 0;
and.pred %p3, %p1, %p2;
@%p1 mbarrier.init.shared::cta.b64 [%r9], 1;
@%p1 fence.mbarrier_init.release.cluster;
barrier.cluster.arrive.relaxed.aligned;
barrier.cluster.wait.aligned;
@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r9], 1024;
@%p3 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r3], [%rd6, {{%r10, %r10}}], [%r9], %rs1;
$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r9], 0;
@!%p4 bra.uni $L_wait;
shl.b32 %r4, %r1, 4;
add.u32 %r5, %r3, %r4;
ld.shared.v4.u32 {{%r11, %r12, %r13, %r14}}, [%r5];
mad.lo.u32 %r6, %r2, 64, %r1;
mul.wide.u32 %rd2, %r6, 16;
add.s64 %rd3, %rd1, %rd2;
st.global.v4.u32 [%rd3], {{%r11, %r12, %r13, %r14}};
barrier.cluster.arrive.aligned;
barrier.cluster.wait.aligned;
ret;
}}
"""


def _mcast(mask: int, edit=lambda ptx: ptx):
    from emulator.async_copy import encode_tensor_map
    gmem = GlobalMemory()
    src = np.arange(8 * 32, dtype=np.uint32)
    sa = gmem.add("src", src)
    out = gmem.add("out", np.zeros(2 * 256, np.uint32))
    tmap = encode_tensor_map(sa, 2, (32, 8), (128,), (32, 8), swizzle=0)
    launch = Launch(grid=(2, 1, 1), threads=64, params={"tmap": tmap,
                                                         "out": out.to_bytes(8, "little")})
    ptx = MCAST.format(mask=mask).replace(".reg .b64 %rd<12>;", ".reg .b64 %rd<12>;\n"
                                                                ".reg .b16 %rs<2>;")
    res = run_launch(edit(ptx), launch, gmem, filename="mc.ptx")
    return res, gmem.buffer("out").view(np.uint32).reshape(2, 256), src


def test_tma_multicast_lands_in_every_cta_of_the_mask():
    res, out, src = _mcast(3)
    assert res.status == "ok", res.message
    assert [f for f in res.findings if f.severity == "error"] == [], \
        [str(f) for f in res.findings]
    assert (out[0] == src).all() and (out[1] == src).all()


def test_a_ctas_own_mbarrier_does_not_order_it_after_the_multicasts_bytes_in_its_peer():
    # red team round 6: each CTA waits on its own mbarrier, then reads the peer's copy of the
    # box through DSMEM. Observing its own phase says nothing about the peer's complete_tx
    # (PTX ISA 9.1 §9.7.9.25.4.1): a race. Missed while the copy unit was keyed by the
    # mbarrier offset alone (one unit and epoch for every destination of the multicast)
    def peer_read(ptx):
        out = ptx.replace("ld.shared.v4.u32 {%r11, %r12, %r13, %r14}, [%r5];",
                          "xor.b32 %r7, %r2, 1;\nmapa.shared::cluster.u32 %r8, %r5, %r7;\n"
                          "ld.shared::cluster.v4.u32 {%r11, %r12, %r13, %r14}, [%r8];")
        assert out != ptx
        return out
    res, out, src = _mcast(3, peer_read)
    assert "HB1" in _rules(res), [str(f) for f in res.findings]
    assert (out[0] == src).all() and (out[1] == src).all()


def test_tma_multicast_that_arms_only_one_cta_deadlocks_the_other():
    res, out, src = _mcast(1)
    assert res.status == "deadlock" and "HB2" in _rules(res)


# one CTA (no cluster, or a cluster of one): warp 1 writes buf through its own CTA's mapa address
# and arrives on the CTA's mbarrier through mapa (rank 0 = itself), the CUTLASS-style release of
# a stage; warp 0 waits on the mbarrier and reads buf (found by a red-team helper, 2026-12-03:
# the emulator faulted, "no initialised mbarrier", rejecting a correct kernel)
OWN = HEAD + """mov.u32 %r20, bar;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [%r20], 32;
{fence}
bar.sync 0;
setp.lt.u32 %p2, %r1, 32;
@%p2 bra $L_cons;
sub.u32 %r12, %r1, 32;
shl.b32 %r4, %r12, 2;
add.u32 %r5, %r3, %r4;
mapa.shared::cluster.u32 %r8, %r5, %r2;
add.u32 %r6, %r12, 7;
st.shared::cluster.u32 [%r8], %r6;
mapa.shared::cluster.u32 %r21, %r20, %r2;
mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r21];
bra.uni $L_end;
""" + _CONSUMER + """ret;
}}
"""


@pytest.mark.parametrize("cluster", ["", ".reqnctapercluster 1, 1, 1"])
def test_mapa_arrive_on_the_own_ctas_mbarrier_without_a_peer(cluster):
    res, out = _launch(OWN.format(cluster=cluster, fence=FENCE_INIT), grid=(1, 1, 1), n_out=64)
    assert res.status == "ok", res.message
    assert res.findings == [], [str(f) for f in res.findings]
    assert out[:32].tolist() == [t + 7 for t in range(32)]
    # the same kernel releasing with a relaxed arrive publishes nothing: the read races
    res, _ = _launch(OWN.format(cluster=cluster, fence=FENCE_INIT).replace(
        "arrive.release.cluster", "arrive.relaxed.cluster"), grid=(1, 1, 1), n_out=64)
    assert "HB1" in _rules(res), [str(f) for f in res.findings]


# red team round 6: a bulk copy into a peer CTA's shared memory (a shared::cluster destination
# from mapa) completing on the peer's mbarrier (PTX ISA 9.1 §9.7.9.25.4.1 cp.async.bulk: the
# destination and its mbarrier are in .shared::cluster, in one CTA); it was a fault ("outside
# the CTA's shared memory"). Rank 0's t0 copies 16 B from global (or its own shared memory)
# into rank 1's buf+128; rank 1's t32 announces the bytes, waits, reads them
PEER_COPY = HEAD.replace(".param .u64 out)", ".param .u64 out, .param .u64 src)") + """\
ld.param.u64 %rd4, [src];
setp.eq.u32 %p1, %r1, 0;
setp.eq.u32 %p6, %r2, 0;
and.pred %p7, %p6, %p1;
setp.eq.u32 %p2, %r1, 32;
setp.ne.u32 %p3, %r2, 0;
and.pred %p4, %p3, %p2;
@%p1 mbarrier.init.shared::cta.b64 [bar], 1;
@%p1 ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd4];
@%p1 st.shared.v4.u32 [buf+64], {{%r10, %r11, %r12, %r13}};
@%p1 fence.proxy.async.shared::cta;
fence.mbarrier_init.release.cluster;
barrier.cluster.arrive.aligned;
barrier.cluster.wait.aligned;
add.u32 %r20, %r3, 128;
mapa.shared::cluster.u32 %r21, %r20, 1;
mov.u32 %r23, bar;
mapa.shared::cluster.u32 %r22, %r23, {mrank};
@%p4 mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 16;
barrier.cluster.arrive.aligned;
barrier.cluster.wait.aligned;
@%p7 {copy}
@!%p4 bra SKIP;
mov.u32 %r9, 0;
{wait}
ld.shared.u32 %r5, [buf+128];
st.global.u32 [%rd1], %r5;
SKIP:
barrier.cluster.arrive.aligned;
barrier.cluster.wait.aligned;
ret;
}}
"""
PEER_WAIT = """WAIT:
mbarrier.try_wait.parity.shared::cta.b64 %p0, [bar], %r9;
@!%p0 bra WAIT;"""
PEER_COPIES = {
    "global": "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r21], [%rd4], "
              "16, [%r22];",
    "dsmem": "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r21], "
             "[buf+64], 16, [%r22];"}


def _peer_copy(copy: str, wait: str = PEER_WAIT, mrank: int = 1):
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(4, np.uint32))
    src = gmem.add("src", np.arange(4, dtype=np.uint32) + 1000)
    launch = Launch(grid=(2, 1, 1), threads=64, params={"out": out.to_bytes(8, "little"),
                                                        "src": src.to_bytes(8, "little")})
    res = run_launch(PEER_COPY.format(cluster=CL2, copy=PEER_COPIES[copy], wait=wait,
                                      mrank=mrank), launch, gmem, filename="cl.ptx")
    return res, gmem.buffer("out").view(np.uint32)


@pytest.mark.parametrize("copy", sorted(PEER_COPIES))
def test_bulk_copy_into_a_peers_shared_memory_completes_on_its_mbarrier(copy):
    res, out = _peer_copy(copy)
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert out[0] == 1000
    res, _ = _peer_copy(copy, wait="")
    assert "HB1" in _rules(res), res.findings
    # the mbarrier in another CTA than the destination: PTX requires them in one CTA
    res, _ = _peer_copy(copy, mrank=0)
    assert res.status == "fault" and "another CTA" in res.message


@pytest.mark.parametrize("copy", sorted(PEER_COPIES))
@pytest.mark.parametrize("wait", ["", PEER_WAIT])
def test_a_cta_that_exits_before_observing_a_peers_copy_arrival_is_hb9(copy, wait):
    # the destination CTA neither reads the bytes nor (without `wait`) waits on the mbarrier
    # they complete on: the cluster barrier after the issue does not order the copy's
    # asynchronous arrival, so it may land after the CTA exited (red team round 11, m15)
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(4, np.uint32))
    src = gmem.add("src", np.arange(4, dtype=np.uint32) + 1000)
    launch = Launch(grid=(2, 1, 1), threads=64, params={"out": out.to_bytes(8, "little"),
                                                        "src": src.to_bytes(8, "little")})
    text = PEER_COPY.format(cluster=CL2, copy=PEER_COPIES[copy], wait=wait, mrank=1).replace(
        "ld.shared.u32 %r5, [buf+128];\nst.global.u32 [%rd1], %r5;\n", "")
    assert "buf+128" not in text.split("mapa")[-1]
    res = run_launch(text, launch, gmem, filename="cl.ptx")
    if wait:
        assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    else:
        assert _rules(res) == ["HB9"], [str(f) for f in res.findings]
        msgs = [f.message for f in res.findings]
        assert any("asynchronous arrival" in m and "cp.async.bulk" in m for m in msgs), msgs
        # a copy out of the sender's own shared memory also still reads it when the sender
        # exits: nobody on the receiving side waited, so no cluster barrier orders that either
        outgoing = [m for m in msgs if "may still read the source" in m]
        assert len(outgoing) == (copy == "dsmem"), msgs


# ---- st.async / red.async into the peer, completing on its mbarrier (red team round 8) -----
# each CTA arms its own mbarrier for 4 bytes, then stores its rank into the peer's buf[0]
# ({op}) completing on the peer's mbarrier; after its wait it reads buf[0] and writes out[rank]
ST_ASYNC = """.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pOut)
.reqntid 64, 1, 1
.reqnctapercluster 2, 1, 1
{{
.reg .pred %p<8>;
.reg .b32 %r<40>;
.reg .b64 %rd<20>;
.shared .align 16 .b8 buf[64];
.shared .align 8 .b64 bar;
mov.u32 %r1, %tid.x;
mov.u32 %r2, bar;
mov.u32 %r3, buf;
mov.u32 %r4, %cluster_ctarank;
xor.b32 %r5, %r4, 1;
ld.param.u64 %rd2, [pOut];
mul.wide.u32 %rd9, %r4, 4;
add.s64 %rd2, %rd2, %rd9;
setp.eq.u32 %p1, %r1, 0;
@%p1 st.shared.u32 [%r3], 100;
@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
fence.mbarrier_init.release.cluster;
barrier.cluster.arrive.release.aligned;
barrier.cluster.wait.acquire.aligned;
@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 4;
mapa.shared::cluster.u32 %r7, %r3, %r5;
mapa.shared::cluster.u32 %r8, %r2, %r5;
@%p1 {op}
$L_w:
{wait}
@%p1 ld.shared.u32 %r9, [%r3];
@%p1 st.global.u32 [%rd2], %r9;
barrier.cluster.arrive.release.aligned;
barrier.cluster.wait.acquire.aligned;
ret;
}}
"""
_ST = "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%r7], %r4, [%r8];"
_RED = ("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 "
        "[%r7], %r4, [%r8];")
_W = ("mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [%r2], 0;\n"
      "@!%p2 bra $L_w;")


@pytest.mark.parametrize("op,want", [(_ST, [1, 0]), (_RED, [101, 100])])
def test_st_async_and_red_async_complete_on_the_peers_mbarrier(op, want):
    # was HB2 (the store's complete_tx never happened: both CTAs waited forever)
    from emulator import GlobalMemory, Launch, run_launch
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(2, np.uint32))
    res = run_launch(ST_ASYNC.format(op=op, wait=_W), Launch(
        grid=(2, 1, 1), threads=64, params={"pOut": out.to_bytes(8, "little")}, arch="sm_90a"),
        gmem, filename="st_async.ptx")
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert gmem.buffer("out").view(np.uint32).tolist() == want


def test_reading_the_st_async_data_without_the_wait_is_a_race():
    from emulator import GlobalMemory, Launch, run_launch
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(2, np.uint32))
    res = run_launch(ST_ASYNC.format(op=_ST, wait=""), Launch(
        grid=(2, 1, 1), threads=64, params={"pOut": out.to_bytes(8, "little")}, arch="sm_90a"),
        gmem, filename="st_async.ptx")
    assert "HB1" in [f.rule for f in res.findings], (res.message, res.findings)


def test_st_async_bytes_count_for_mb8_only_as_a_note():
    from verifier import verify
    rep = verify(ST_ASYNC.format(op=_ST, wait=_W), arch="sm_90a", select={"MB8"})
    assert [f.severity for f in rep.findings] in ([], ["note"]), rep.render()
