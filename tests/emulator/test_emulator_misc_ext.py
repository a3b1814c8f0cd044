"""setmaxnreg, griddepcontrol and clusterlaunchcontrol in the emulator (emulator/misc_ext.py):
correct uses run, and each rule has a buggy twin."""

from __future__ import annotations

import numpy as np

from emulator import GlobalMemory, Launch, run_launch

HEAD = """.version 8.7
.target sm_100a
.address_size 64
.shared .align 16 .b8 resp[16];
.shared .align 8 .b64 bar;
.visible .entry k(.param .u64 out)
.reqntid 256
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 7;
setp.eq.u32 %p1, %r2, 0;
mov.u32 %r30, %r1;
{body}
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r30;
ret;
}}
"""


def _launch(ptx: str, threads: int, words: int | None = None, arch: str = "sm_90a",
            name: str = "m.ptx"):
    """(result, the ``out`` buffer as u32) of one CTA of ``threads`` running ``ptx`` whose
    only parameter is the pointer ``out`` (``words`` u32, default one per thread)."""
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(words or threads, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=threads, arch=arch,
                    params={"out": out.to_bytes(8, "little")})
    res = run_launch(ptx, launch, gmem, filename=name)
    return res, gmem.buffer("out").view(np.uint32)


def _run(body: str):
    return _launch(HEAD.format(body=body), 256, arch="sm_100a")


WS = """@%p1 bra $L_prod;
setmaxnreg.inc.sync.aligned.u32 {inc};
bra.uni $L_join;
$L_prod:
setmaxnreg.dec.sync.aligned.u32 {dec};
$L_join:"""


def test_setmaxnreg_per_warpgroup_roles_run():
    res, out = _run(WS.format(inc=232, dec=40))
    assert res.status == "ok" and res.findings == [], res.message
    assert out.tolist() == list(range(256))


def test_setmaxnreg_count_not_a_multiple_of_8_is_a_fault():
    res, _ = _run(WS.format(inc=230, dec=40))
    assert res.status == "fault" and "multiple of 8" in res.message


def test_setmaxnreg_by_one_warp_of_a_warpgroup_runs():
    # Triton 3.6 warp specialization runs setmaxnreg per (one-warp) partition: not flagged
    body = """setp.lt.u32 %p2, %r1, 32;
@%p2 setmaxnreg.dec.sync.aligned.u32 40;"""
    res, _ = _run(body)
    assert res.status == "ok" and res.findings == []


def test_setmaxnreg_inc_below_the_previous_count_is_a_fault():
    body = """setmaxnreg.dec.sync.aligned.u32 80;
setmaxnreg.inc.sync.aligned.u32 64;"""
    res, _ = _run(body)
    assert res.status == "fault" and ".inc must not lower" in res.message


#: 384 threads launched at (at most) 168 registers each: warpgroup 0 the producer, 1 and 2 the
#: consumers (CUTLASS's ping-pong budget is 40 / 232 / 232: 64512 registers)
POOL = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
.maxnreg 168
.reqntid 384
{{
.reg .pred %p<8>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 7;
setp.eq.u32 %p1, %r2, 0;
@%p1 bra $L_prod;
setmaxnreg.inc.sync.aligned.u32 {inc};
bra.uni $L_join;
$L_prod:
{prod}
setmaxnreg.dec.sync.aligned.u32 {dec};
$L_join:
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r1;
ret;
}}
"""


def _pool(inc: int, dec: int, prod: str = "", maxnreg: bool = True):
    ptx = POOL.format(inc=inc, dec=dec, prod=prod)
    if not maxnreg:
        ptx = ptx.replace(".maxnreg 168\n", "")
    return _launch(ptx, 384, name="p.ptx")[0]


def test_setmaxnreg_inc_waits_for_the_registers_a_later_dec_releases():
    # the consumers' inc runs first and blocks until the producer's dec (after a delay loop)
    delay = """mov.u32 %r5, 0;
$L_spin:
add.u32 %r5, %r5, 1;
setp.lt.u32 %p2, %r5, 50;
@%p2 bra $L_spin;"""
    res = _pool(232, 40, delay)
    assert res.status == "ok" and res.findings == [], (res.status, res.message)


def test_setmaxnreg_budget_over_the_register_pool_is_a_deadlock():
    # 2 x 128 x (240 - 168) = 18432 asked, 128 x (168 - 40) = 16384 released
    res = _pool(240, 40)
    assert res.status == "deadlock", (res.status, res.message)
    hb2 = [f for f in res.findings if f.rule == "HB2"]
    assert hb2 and any("setmaxnreg.inc waits for registers" in n.message for n in hb2[0].notes)


def test_setmaxnreg_pool_without_maxnreg_is_bounded_by_the_register_file():
    # without .maxnreg the launch count is bounded by 65536 / 384 -> 168: the same budgets
    assert ".maxnreg" not in POOL.format(inc=0, dec=0, prod="").replace(".maxnreg 168\n", "")
    ok = _pool(232, 40, maxnreg=False)
    assert ok.status == "ok", ok.message
    assert _pool(240, 40, maxnreg=False).status == "deadlock"


def test_griddepcontrol_completes_at_once():
    res, out = _run("griddepcontrol.wait;\ngriddepcontrol.launch_dependents;")
    assert res.status == "ok" and res.findings == []
    assert out.tolist() == list(range(256))


# the response is read as two b64 words (the emulator does not model .b128 registers: real
# kernels' 'ld.shared.b128' is reported unsupported); query_cancel does not look at q's bits
CLC = """mov.u32 %r3, resp;
mov.u32 %r4, bar;
setp.eq.u32 %p2, %r1, 0;
@%p2 mbarrier.init.shared::cta.b64 [%r4], 1;
bar.sync 0;
@%p2 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r4], 16;
@%p2 clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r3], [%r4];
$L_w:
mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r4], 0;
@!%p3 bra $L_w;
{{
.reg .b128 q;
ld.shared.v2.b64 {{%rd4, %rd5}}, [%r3];
clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p4, q;
{get}
}}
selp.u32 %r30, 1000, %r1, %p4;
bar.sync 0;"""


def test_clusterlaunchcontrol_try_cancel_never_succeeds():
    res, out = _run(CLC.format(get="@%p4 clusterlaunchcontrol.query_cancel.get_first_ctaid."
                                   "v4.b32.b128 {%r5, %r6, %r7, %r8}, q;"))
    assert res.status == "ok", res.message
    assert [f for f in res.findings if f.severity == "error"] == []
    assert out.tolist() == list(range(256))  # is_canceled was false in every thread


def test_get_first_ctaid_of_a_failed_cancel_is_a_fault():
    res, _ = _run(CLC.format(get="clusterlaunchcontrol.query_cancel.get_first_ctaid."
                                 "v4.b32.b128 {%r5, %r6, %r7, %r8}, q;"))
    assert res.status == "fault" and "is_canceled is false" in res.message


BRX = """and.b32 %r5, %r1, {mask};
$L_tbl: .branchtargets $L_a, $L_b, $L_c;
brx.idx %r5, $L_tbl;
$L_a:
mov.u32 %r30, 100;
bra.uni $L_end;
$L_b:
mov.u32 %r30, 200;
bra.uni $L_end;
$L_c:
mov.u32 %r30, 300;
$L_end:"""


def test_brx_idx_branches_per_lane_through_its_table():
    res, out = _run(BRX.format(mask=1))  # lanes alternate between targets 0 and 1
    assert res.status == "ok" and res.findings == [], res.message
    assert out.tolist() == [100 if t % 2 == 0 else 200 for t in range(256)]


def test_brx_idx_past_the_table_is_a_fault():
    res, _ = _run(BRX.format(mask=3))  # index 3 of a 3-entry table
    assert res.status == "fault" and "outside the 3 targets" in res.message


CALL = """.version 8.7
.target sm_90a
.address_size 64
.func (.param .b32 fret) madd(.param .b32 fa, .param .b32 fb)
{{
.reg .b32 %r<4>;
.reg .pred %p<2>;
ld.param.b32 %r1, [fa];
ld.param.b32 %r2, [fb];
setp.gt.u32 %p1, %r1, 31;
@%p1 bra $L_big;
mad.lo.u32 %r3, %r1, %r2, 1;
st.param.b32 [fret], %r3;
ret;
$L_big:
{inner}
st.param.b32 [fret], %r3;
ret;
}}
{extra}
.visible .entry k(.param .u64 out)
.reqntid 64
{{
.reg .b32 %r<8>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
{{
.param .b32 p0;
.param .b32 p1;
.param .b32 rv;
st.param.b32 [p0], %r1;
st.param.b32 [p1], 3;
call.uni (rv), madd, (p0, p1);
ld.param.b32 %r2, [rv];
}}
{{
.param .b32 p0;
.param .b32 p1;
.param .b32 rv;
st.param.b32 [p0], %r2;
st.param.b32 [p1], 2;
call.uni (rv), madd, (p0, p1);
ld.param.b32 %r3, [rv];
}}
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r3;
ret;
}}
"""


def _call(inner="mov.u32 %r3, 0;", extra=""):
    import numpy as np
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(64, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=64, params={"out": out.to_bytes(8, "little")})
    res = run_launch(CALL.format(inner=inner, extra=extra), launch, gmem, filename="c.ptx")
    return res, gmem.buffer("out").view(np.uint32)


def _want(t: int) -> int:
    def madd(a, b):
        return 0 if a > 31 else a * b + 1
    return madd(madd(t, 3), 2)


def test_call_of_a_func_with_params_returns_and_divergent_ret():
    res, out = _call()
    assert res.status == "ok" and res.findings == [], res.message
    assert out.tolist() == [_want(t) for t in range(64)]


def test_recursive_call_is_refused_clearly():
    import pytest
    from emulator import EmulationUnsupported
    inner = """{
.param .b32 q0;
.param .b32 q1;
.param .b32 qr;
st.param.b32 [q0], 0;
st.param.b32 [q1], 0;
call.uni (qr), madd, (q0, q1);
ld.param.b32 %r3, [qr];
}"""
    with pytest.raises(EmulationUnsupported, match="recursive 'call' of 'madd'"):
        _call(inner=inner)


# register parameters (PTX ISA 9.1 §5.1.6.4: a .func's .reg parameters are passed by value),
# named without '%' as nvcc -G / CUTLASS helpers write them; `step` writes its own input
REGCALL = """.version 8.7
.target sm_90a
.address_size 64
.func (.reg .b32 r) step(.reg .b32 a, .reg .b32 b)
{
.reg .pred %p9;
$L_top:
add.u32 a, a, b;
setp.lt.u32 %p9, a, 10;
@%p9 bra $L_top;
mov.u32 r, a;
ret;
}
.visible .entry k(.param .u64 out)
.reqntid 32
{
.reg .b32 %r<8>;
.reg .pred %p<10>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
call.uni (%r2), step, (%r1, 4);
call.uni (%r3), step, (%r2, %r1);
mul.wide.u32 %rd2, %r1, 12;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r1;
st.global.u32 [%rd3+4], %r2;
st.global.u32 [%rd3+8], %r3;
ret;
}
"""


def test_register_parameters_are_copied_in_and_returned_by_value():
    res, out = _launch(REGCALL, 32, words=32 * 3, name="regcall.ptx")
    assert res.status == "ok", res.message
    got = out.reshape(32, 3)

    def step(a: int, b: int) -> int:
        a += b
        while a < 10 and b:
            a += b
        return a

    for t in range(32):
        r2 = step(t, 4)
        # the caller's %r1 is unchanged by the callee's writes to its copy 'a'
        assert got[t].tolist() == [t, r2, step(r2, t)], t


# thread 0 pre-arrives for the idle threads with .noComplete (count {pre}) and reads the
# pending arrival count of the returned state; then every thread arrives and waits
NOCOMPLETE = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
.reqntid 64
{{
.reg .pred %p<8>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
.shared .align 8 .b64 bar;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
setp.eq.u32 %p1, %r1, 0;
mov.u32 %r2, 0;
@!%p1 bra SKIP;
mbarrier.init.shared::cta.b64 [bar], 96;
mbarrier.arrive.noComplete.shared::cta.b64 %rd2, [bar], {pre};
mbarrier.pending_count.b64 %r2, %rd2;
SKIP:
bar.sync 0;
mbarrier.arrive.shared::cta.b64 %rd3, [bar];
W:
mbarrier.test_wait.shared::cta.b64 %p2, [bar], %rd3;
@!%p2 bra W;
mul.wide.u32 %rd4, %r1, 4;
add.s64 %rd5, %rd1, %rd4;
st.global.u32 [%rd5], %r2;
ret;
}}
"""


def _nocomplete(pre: int):
    return _launch(NOCOMPLETE.format(pre=pre), 64, name="nc.ptx")


def test_pending_count_reads_the_arrivals_pending_before_the_arrive():
    res, out = _nocomplete(32)
    assert res.status == "ok" and not res.findings, res.message
    assert int(out[0]) == 96   # the state before the .noComplete arrive of 32


def test_a_nocomplete_arrive_that_would_complete_the_phase_is_a_fault():
    res, _ = _nocomplete(96)
    assert res.status == "fault" and ".noComplete" in res.message, res.message


def test_a_nocomplete_arrive_with_bytes_outstanding_does_not_complete_the_phase():
    # pending reaches 0 but the tx-count does not: the phase stays open, no fault (review of
    # 2026-12-07)
    text = NOCOMPLETE.format(pre=96).replace(
        "mbarrier.init.shared::cta.b64 [bar], 96;",
        "mbarrier.init.shared::cta.b64 [bar], 96;\nmbarrier.expect_tx.shared::cta.b64 [bar], 16;")
    res, _ = _launch(text, 64, name="nc.ptx")
    assert res.status != "fault" or ".noComplete" not in res.message, res.message
