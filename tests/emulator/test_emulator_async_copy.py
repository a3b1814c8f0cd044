"""TMA and bulk copies in the emulator (emulator/async_copy.py): tile loads with OOB zero fill and
the 128-byte swizzle, complete_tx on the mbarrier, tile stores through bulk groups, and their
happens-before obligations (wait before reading a TMA load, fence.proxy.async before a TMA store,
wait_group.read before refilling a store's source, exact expect_tx byte counts); plus fast-family
entries end to end on their Triton 3.6 fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import kernels
from emulator import GlobalMemory, Launch, run_kernel, run_launch
from emulator.async_copy import decode_tensor_map, encode_tensor_map, triton_box

ROWS, COLS = 6, 32          # the global tensor (u32), 128 B per row
BOX_ROWS = 8                # the box: 32 x 8 elements, rows 6 and 7 out of bounds
U32 = 2                     # PTX tensormap elemtype u32

HEAD = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 1024 .b8 buf[2048];
.shared .align 8 .b64 bar;
.visible .entry k(.param .align 64 .b8 tmap[128], .param .u64 out)
.reqntid 64
{{
.reg .pred %p<4>;
.reg .b32 %r<24>;
.reg .b64 %rd<12>;
mov.b64 %rd5, tmap;
cvta.param.u64 %rd6, %rd5;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r3, buf;
mov.u32 %r9, bar;
mov.u32 %r10, 0;
setp.eq.u32 %p1, %r1, 0;
"""

LOAD = HEAD + """@%p1 mbarrier.init.shared::cta.b64 [%r9], 1;
{init_fence}
bar.sync 0;
@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r9], {tx};
@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r3],
  [%rd6, {{%r10, %r10}}], [%r9];
{extra}
{wait}
shl.b32 %r2, %r1, 4;
add.u32 %r4, %r3, %r2;
ld.shared.v4.u32 {{%r11, %r12, %r13, %r14}}, [%r4];
mul.wide.u32 %rd2, %r1, 16;
add.s64 %rd3, %rd1, %rd2;
st.global.v4.u32 [%rd3], {{%r11, %r12, %r13, %r14}};
bar.sync 0;
@%p1 mbarrier.inval.shared::cta.b64 [%r9];
ret;
}}
"""
WAIT = """$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r9], 0;
@!%p2 bra.uni $L_wait;"""
# a second copy onto the same mbarrier that no expect_tx announced (into the second KiB)
EXTRA_COPY = ("add.u32 %r20, %r3, 1024;\n@%p1 cp.async.bulk.tensor.2d.shared::cluster.global."
              "mbarrier::complete_tx::bytes [%r20], [%rd6, {%r10, %r10}], [%r9];")

STORE = HEAD + """shl.b32 %r2, %r1, 4;
add.u32 %r4, %r3, %r2;
shl.b32 %r11, %r1, 2;
add.u32 %r12, %r11, 1;
add.u32 %r13, %r11, 2;
add.u32 %r14, %r11, 3;
st.shared.v4.u32 [%r4], {{%r11, %r12, %r13, %r14}};
{fence}
bar.sync 0;
@%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd6, {{%r10, %r10}}], [%r3];
@%p1 cp.async.bulk.commit_group;
{wait}
bar.sync 0;
st.shared.v4.u32 [%r4], {{%r10, %r10, %r10, %r10}};
ret;
}}
"""


def _tmap(addr: int, rows: int = ROWS, swizzle: int = 3) -> bytes:
    return encode_tensor_map(addr, U32, (COLS, rows), (COLS * 4,), (COLS, BOX_ROWS),
                             swizzle=swizzle)


def _swizzle128(box: np.ndarray) -> np.ndarray:
    """The hardware's 128-byte swizzle of a box of 128-byte rows at a 1024-aligned address
    (CUTLASS Swizzle<3,4,3>): 16-byte chunk c of row r lands at chunk c ^ (r % 8)."""
    rows = box.reshape(-1, 8, 16)  # row, chunk, byte
    out = np.empty_like(rows)
    for r in range(rows.shape[0]):
        for c in range(8):
            out[r, c ^ (r % 8)] = rows[r, c]
    return out.reshape(-1)


def _load(tx: int = 1024, wait: str = WAIT, extra: str = "",
          init_fence: str = "fence.proxy.async.shared::cta;"):
    gmem = GlobalMemory()
    a = np.arange(ROWS * COLS, dtype=np.uint32) + 1000
    src = gmem.add("a", a)
    out = gmem.add("out", np.zeros(256, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=64,
                    params={"tmap": _tmap(src), "out": out.to_bytes(8, "little")})
    res = run_launch(LOAD.format(tx=tx, wait=wait, extra=extra, init_fence=init_fence), launch,
                     gmem,
                     filename="tma.ptx")
    return res, a, gmem.buffer("out")


def test_tensor_map_round_trip_and_triton_box_rule():
    raw = encode_tensor_map(0x1000, 6, (192, 320), (384,), (64, 128), swizzle=3)
    tm = decode_tensor_map(raw, "t")
    assert (tm.rank, tm.dims, tm.strides, tm.box, tm.swizzle, tm.esize) == (
        2, (192, 320), (384,), (64, 128), 3, 2)
    assert tm.box_bytes == 64 * 128 * 2
    # Triton 3.9's tensordesc_meta for the fast GEMMs: fp16 [128, 128] -> box [128, 64], 128 B
    assert triton_box((128, 128), 2) == ((64, 128), 3)
    assert triton_box((128, 128), 1) == ((128, 128), 3)
    assert triton_box((64, 16), 2) == ((16, 64), 1)


def test_tma_load_zero_fills_oob_rows_and_swizzles():
    res, a, out = _load()
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    box = np.zeros((BOX_ROWS, COLS), np.uint32)
    box[:ROWS] = a.reshape(ROWS, COLS)
    want = _swizzle128(box.view(np.uint8).reshape(-1))
    assert np.array_equal(out, want)


def test_mbarrier_init_needs_no_proxy_fence_before_a_tma_complete_tx():
    # PTX ISA 9.1, cp.async.bulk.tensor: the copy "accesses its mbarrier operand
    # using generic-proxy", the proxy of mbarrier.init: a CTA barrier after the init orders it
    # (Triton's TMA kernels have no fence there); the init-before-use race is still checked
    # (test_mbarrier_used_before_its_init_is_ordered_is_a_race)
    res, _, out = _load(init_fence="")
    assert res.status == "ok" and res.findings == [], res.findings
    fenced, _, out_fenced = _load()
    assert np.array_equal(out, out_fenced)


def test_mbarrier_used_before_its_init_is_ordered_is_a_race():
    # the barrier between the init (thread 0) and the other threads' waits removed
    text = LOAD.replace("{init_fence}\nbar.sync 0;", "{init_fence}")
    assert text != LOAD
    gmem = GlobalMemory()
    src = gmem.add("a", np.arange(ROWS * COLS, dtype=np.uint32))
    out = gmem.add("out", np.zeros(256, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=64,
                    params={"tmap": _tmap(src), "out": out.to_bytes(8, "little")})
    res = run_launch(text.format(tx=1024, wait=WAIT, extra="",
                                 init_fence="fence.proxy.async.shared::cta;"),
                     launch, gmem, filename="tma.ptx")
    hb1 = [f for f in res.findings if f.rule == "HB1"]
    assert hb1 and "mbarrier.init" in hb1[0].message and "mbarrier.try_wait" in hb1[0].message


def test_tma_load_without_the_mbarrier_wait_is_a_race():
    res, _, _ = _load(wait="")
    hb1 = [f for f in res.findings if f.rule == "HB1"]
    assert hb1, res.findings
    assert "ld.shared" in hb1[0].message and "cp.async.bulk.tensor" in hb1[0].message
    assert "TMA/bulk copy" in hb1[0].message
    # the note names the mbarrier wait, not cp.async's wait_group (red team round 6)
    missing = next(n.message for n in hb1[0].notes if "missing" in n.message)
    assert "mbarrier phase" in missing and "cp.async.wait_group" not in missing, missing


@pytest.mark.parametrize("tx", [512, 2048])
def test_wrong_expect_tx_never_completes_the_phase(tx):
    res, _, _ = _load(tx=tx)
    assert res.status == "deadlock"
    hb2 = [f for f in res.findings if f.rule == "HB2"]
    assert hb2 and f"tx-count {tx - 1024}" in " ".join(n.message for n in hb2[0].notes)


def test_copy_bytes_no_expect_tx_announced_are_reported_at_inval():
    res, _, _ = _load(extra=EXTRA_COPY)
    hb7 = [f for f in res.findings if f.rule == "HB7"]
    assert res.status == "ok" and hb7 and "tx-count -1024" in hb7[0].message


def _store(fence: str = "fence.proxy.async.shared::cta;",
           wait: str = "@%p1 cp.async.bulk.wait_group.read 0;", swizzle: int = 3):
    gmem = GlobalMemory()
    dst = gmem.add("c", np.full(ROWS * COLS, 7, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=64,
                    params={"tmap": _tmap(dst, swizzle=swizzle), "out": (0).to_bytes(8, "little")})
    res = run_launch(STORE.format(fence=fence, wait=wait), launch, gmem, filename="st.ptx")
    return res, gmem.buffer("c").view(np.uint32)


def test_tma_store_unswizzles_and_clips_oob_rows():
    res, c = _store()
    assert res.status == "ok" and res.findings == [], res.findings
    smem = np.arange(256, dtype=np.uint32).view(np.uint8)  # thread t wrote 4t..4t+3 at 16t
    # the box in smem is swizzled: undo it to get the logical rows; rows 6, 7 are clipped
    logical = _swizzle128(smem).view(np.uint32).reshape(BOX_ROWS, COLS)  # an involution
    assert np.array_equal(c.reshape(ROWS, COLS), logical[:ROWS])


def test_tma_store_without_proxy_fence_is_an_hb4_error():
    res, _ = _store(fence="")
    hb4 = [f for f in res.findings if f.rule == "HB4"]
    assert hb4 and hb4[0].severity == "error" and "fence.proxy.async" in hb4[0].message


def test_store_source_overwritten_before_wait_group_read_is_a_race():
    res, _ = _store(wait="")
    hb1 = [f for f in res.findings if f.rule == "HB1"]
    assert hb1 and "st.shared" in hb1[0].message and "TMA/bulk store" in hb1[0].message
    assert "wait_group.read" in " ".join(n.message for n in hb1[0].notes)


FAST36 = Path(__file__).resolve().parents[1] / "verifier" / "fixtures" / "fast36"


@pytest.mark.parametrize("name", ["fast.gemm_device_desc", "fast.gemm_ws"])
def test_fast_entry_emulates_ok_on_the_36_fixture(name):
    spec = kernels.get(name)
    text = (FAST36 / f"{name}_sm_90a.ptx").read_text()
    res = run_kernel(text, spec, "sm_90a", global_scratch_size=4096, time_limit_s=60)
    assert res.status == "ok" and res.ok, (res.message, res.findings)
    assert not [f for f in res.findings if f.severity == "error"]


def test_descriptor_address_taken_as_a_32_bit_param_address():
    # Triton 3.9: mov.b32 of the parameter, cvt to 64 bits, cvta.param to a generic address
    text = LOAD.replace("mov.b64 %rd5, tmap;", "mov.b32 %r21, tmap;\ncvt.u64.u32 %rd5, %r21;")
    assert text != LOAD
    gmem = GlobalMemory()
    a = np.arange(ROWS * COLS, dtype=np.uint32) + 1000
    src = gmem.add("a", a)
    out = gmem.add("out", np.zeros(256, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=64,
                    params={"tmap": _tmap(src), "out": out.to_bytes(8, "little")})
    res = run_launch(text.format(tx=1024, wait=WAIT, extra="",
                                 init_fence="fence.proxy.async.shared::cta;"),
                     launch, gmem, filename="tma.ptx")
    assert res.status == "ok" and res.findings == []
    box = np.zeros((BOX_ROWS, COLS), np.uint32)
    box[:ROWS] = a.reshape(ROWS, COLS)
    assert np.array_equal(gmem.buffer("out"), _swizzle128(box.view(np.uint8).reshape(-1)))


BRX = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
.reqntid 64
{
.reg .pred %p<2>;
.reg .b32 %r<8>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
$L_tab: .branchtargets $L_a, $L_b;
brx.idx %r2, $L_tab;
$L_a:
mov.u32 %r3, 10;
bra.uni $L_end;
$L_b:
mov.u32 %r3, 20;
$L_end:
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r3;
ret;
}
"""


def test_brx_idx_jumps_through_its_branchtargets_per_warp():
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(64, np.uint32))
    res = run_launch(BRX, Launch(grid=(1, 1, 1), threads=64,
                                 params={"out": out.to_bytes(8, "little")}), gmem)
    assert res.status == "ok"
    assert gmem.buffer("out").view(np.uint32).tolist() == [10] * 32 + [20] * 32


#: fast fixtures the emulator cannot run yet, and why (strict: they flip when the feature lands)
_NOT_YET: dict[str, str] = {}  # clusters and block_scale MMA landed (emulator/cluster.py,
#                                 emulator/tcgen05_ext.py): every fixture runs


def _fixture_params():
    return [pytest.param(p.stem, marks=pytest.mark.xfail(strict=True, reason=_NOT_YET[p.stem]))
            if p.stem in _NOT_YET else p.stem for p in sorted(FAST36.glob("*.ptx"))]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("AILOWER_RUN_SLOW") != "1",
                    reason="slow (18 emulations, ~45 s): set AILOWER_RUN_SLOW=1 to run")
@pytest.mark.parametrize("stem", _fixture_params())
def test_every_fast_fixture_emulates_ok(stem):
    name, _, arch = stem.rpartition("_sm_")
    res = run_kernel((FAST36 / f"{stem}.ptx").read_text(), kernels.get(name), "sm_" + arch,
                     global_scratch_size=4096, time_limit_s=60)
    assert res.status == "ok" and res.ok, (res.status, res.message,
                                           [f.rule for f in res.findings
                                            if f.severity == "error"])


def test_proxy_fence_in_another_thread_than_the_writer_is_an_hb4_error():
    # only the issuing thread fences: the other 63 writers' stores stay unfenced
    res, _ = _store(fence="@%p1 fence.proxy.async.shared::cta;")
    hb4 = [f for f in res.findings if f.rule == "HB4"]
    assert hb4 and hb4[0].severity == "error"
    assert "thread 0 " not in hb4[0].message.split("that ")[1].split(" wrote")[0]


REFILL = """{bar}
@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r9], 1024;
@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r3],
  [%rd6, {{%r10, %r10}}], [%r9];
$L_wait2:
mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r9], 1;
@!%p3 bra.uni $L_wait2;
bar.sync 0;
@%p1 mbarrier.inval.shared::cta.b64 [%r9];"""


@pytest.mark.parametrize("bar", ["fence.proxy.async.shared::cta;\nbar.sync 0;",
                                 "bar.sync 0;\nfence.proxy.async.shared::cta;", "bar.sync 0;",
                                 ""])
def test_tma_refill_of_a_buffer_other_threads_still_read(bar):
    # write-after-read across proxies: the second copy overwrites what every thread just read;
    # a barrier between the reads and the issue orders them, and a proxy fence on the way from
    # the generic reads to the async-proxy write (the readers' before the barrier, or the
    # issuer's after it) orders the two proxies (ptx_rules AP2; DeepEP#642): with the barrier
    # alone it is HB4
    tail = "bar.sync 0;\n@%p1 mbarrier.inval.shared::cta.b64 [%r9];"
    assert tail in LOAD
    text = LOAD.replace(tail, REFILL.replace("{bar}", bar))
    gmem = GlobalMemory()
    src = gmem.add("a", np.arange(ROWS * COLS, dtype=np.uint32))
    out = gmem.add("out", np.zeros(256, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=64,
                    params={"tmap": _tmap(src), "out": out.to_bytes(8, "little")})
    res = run_launch(text.format(tx=1024, wait=WAIT, extra="",
                                 init_fence="fence.proxy.async.shared::cta;"),
                     launch, gmem, filename="tma.ptx")
    hb1 = [f for f in res.findings if f.rule == "HB1"]
    if "fence" in bar:
        assert res.status == "ok" and res.findings == [], res.findings
    elif bar:
        assert [(f.rule, f.severity) for f in res.findings] == [("HB4", "error")], res.findings
        assert "write after read across proxies" in res.findings[0].message
        assert "'ld.shared" in res.findings[0].message
    else:
        assert hb1 and "cp.async.bulk.tensor" in hb1[0].message
        assert "ld.shared" in hb1[0].message and "(read)" in hb1[0].message


BULK = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 128 .b8 sbuf[256];
.shared .align 8 .b64 sbar;
.visible .entry k(.param .u64 src, .param .u64 dst)
.reqntid 32
{
.reg .pred %p<4>;
.reg .b32 %r<8>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [src];
ld.param.u64 %rd2, [dst];
mov.u32 %r1, %tid.x;
mov.u32 %r2, sbuf;
mov.u32 %r3, sbar;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
fence.mbarrier_init.release.cluster;
bar.sync 0;
@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 256;
@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd1], 256, [%r3];
$L_w:
mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;
@!%p2 bra.uni $L_w;
@%p1 cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd2], [%r2], 256;
@%p1 cp.async.bulk.commit_group;
@%p1 cp.async.bulk.wait_group 0;
ret;
}
"""


def test_bulk_copy_in_and_bulk_add_reduction_out():
    gmem = GlobalMemory()
    a = np.arange(64, dtype=np.float32) * 0.5
    src = gmem.add("src", a)
    dst = gmem.add("dst", np.full(64, 1.0, np.float32))
    launch = Launch(grid=(1, 1, 1), threads=32, params={"src": src.to_bytes(8, "little"),
                                                         "dst": dst.to_bytes(8, "little")})
    res = run_launch(BULK, launch, gmem, filename="bulk.ptx")
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert np.array_equal(gmem.buffer("dst").view(np.float32), a + 1.0)


def _coverage_fences(ptx: str, gmem: GlobalMemory, params: dict[str, bytes], threads: int
                     ) -> tuple[dict[int, int], object]:
    """(source line -> effects of each reached fence, the outcome) of one CTA running ``ptx``
    on a coverage run (``emulator.api._instrument``, as ``run_kernel(coverage=True)`` does)."""
    from emulator.api import _completion_effects, _instrument
    from emulator.machine import Machine
    from emulator.program import build_program
    from verifier.ptx.parser import parse_ptx

    prog = build_program(parse_ptx(ptx, "t.ptx"))
    mach = Machine(prog, Launch(grid=(1, 1, 1), threads=threads, params=params), gmem)
    _, effects = _instrument(mach)
    res = mach.run()
    _completion_effects(mach, effects)
    by_line: dict[int, int] = {}
    for ins, e in zip(prog.insts, effects.tolist()):
        if ins.base == "fence":
            by_line[ins.line] = by_line.get(ins.line, 0) + int(e)
    return by_line, res


def _fence_effects(fence: str, template: str = STORE
                   ) -> tuple[dict[int, int], list[str], list]:
    """(source line -> effects of each reached proxy fence, the PTX lines, the findings) of
    ``template`` (the STORE kernel) with ``fence`` between the generic writes and the barrier
    (:func:`_coverage_fences`)."""
    ptx = template.format(fence=fence, wait="@%p1 cp.async.bulk.wait_group.read 0;")
    gmem = GlobalMemory()
    dst = gmem.add("c", np.full(ROWS * COLS, 7, np.uint32))
    by_line, res = _coverage_fences(ptx, gmem, {"tmap": _tmap(dst),
                                                "out": (0).to_bytes(8, "little")}, 64)
    assert res.status == "ok", res.message
    return by_line, ptx.split("\n"), res.findings


def test_a_proxy_fence_that_alone_fences_a_tma_store_source_acted():
    eff, lines, _ = _fence_effects("fence.proxy.async.shared::cta;")
    ln = next(i for i, s in enumerate(lines, 1) if s.startswith("fence.proxy.async"))
    assert eff == {ln: 1}


def test_two_proxy_fence_sites_after_the_writes_each_are_removable():
    # either fence alone fences the store's source: removing one site leaves the other
    eff, _, _ = _fence_effects("fence.proxy.async.shared::cta;\nfence.proxy.async;")
    assert sorted(eff.values()) == [0, 0] and len(eff) == 2


def test_a_proxy_fence_before_the_generic_writes_fences_nothing():
    # the fence above the st.shared: the store reads unfenced bytes (HB4), the fence ordered
    # nothing
    text = STORE.replace("st.shared.v4.u32 [%r4], {{%r11",
                         "fence.proxy.async.shared::cta;\nst.shared.v4.u32 [%r4], {{%r11", 1)
    assert text != STORE
    eff, _, findings = _fence_effects("", text)
    assert any(f.rule == "HB4" for f in findings)
    assert list(eff.values()) == [0]


def test_a_fence_mbarrier_init_before_the_writes_does_not_hide_the_proxy_fence():
    # red team (round 4, H3): fence.mbarrier_init also counts as a fence for HB4; the fence
    # log must hold it too, or the proxy fence after the writes is credited nothing
    text = STORE.replace("shl.b32 %r2, %r1, 4;", "fence.mbarrier_init.release.cluster;\n"
                         "shl.b32 %r2, %r1, 4;", 1)
    assert text != STORE
    eff, lines, findings = _fence_effects("fence.proxy.async.shared::cta;", text)
    ln = next(i for i, s in enumerate(lines, 1) if s.startswith("fence.proxy.async"))
    assert eff[ln] == 1 and not findings


def _mixed(cpa: int, st: int, fence: str) -> str:
    """128 threads: t0's cp.async writes buf+``cpa``, t1 stores buf+``st`` then ``fence``; after
    a barrier one wgmma (test_barrier_use._WGMMA) reads buf."""
    from test_barrier_use import _WGMMA, HEAD
    return HEAD.format(nt=128, body=f"""
@%p1 cp.async.ca.shared.global [buf+{cpa}], [%rd1], 4;
@%p1 cp.async.commit_group;
@%p1 cp.async.wait_group 0;
@%p2 st.shared.u32 [buf+{st}], %r1;
{fence}
bar.sync 0;""" + _WGMMA + "wgmma.wait_group.sync.aligned 0;")


@pytest.mark.parametrize("cpa, st", [(4, 0), (0, 4)])
def test_an_unfenced_cp_async_byte_hides_neither_the_fence_nor_an_unfenced_store(cpa, st):
    # red team (round 4, H1b / H1): one wgmma reads a cp.async byte nobody fenced (an HB4
    # warning by policy) and a byte t1 stored then fenced. The fence is credited; without it
    # the store's byte is an HB4 error, whichever byte comes first
    def run(fence: str):
        gmem = GlobalMemory()
        out = gmem.add("out", np.zeros(64, np.uint32))
        by_line, res = _coverage_fences(_mixed(cpa, st, fence), gmem,
                                        {"out": out.to_bytes(8, "little")}, 128)
        return res, list(by_line.values())

    res, fences = run("@%p2 fence.proxy.async.shared::cta;")
    assert fences == [1]
    assert not [f for f in res.findings if f.severity == "error"], res.findings
    res, _ = run("")
    assert any(f.rule == "HB4" and f.severity == "error" for f in res.findings), res.findings


# red team round 6: cp.reduce.async.bulk into shared::cluster (PTX ISA 9.1 §9.7.9.25.4.2: the
# destination becomes dst <op> src, element-wise, and its complete_tx lands on the mbarrier) was
# emulated as a plain copy. t0 fills buf+256 and buf+1024 with a[0:4], reduces buf+256 into
# buf+1024 and reads back 2 * a[0:4] after the wait
REDUCE_SHARED = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 1024 .b8 buf[2048];
.visible .entry k(.param .u64 src, .param .u64 out)
.reqntid 32
{{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [src];
ld.param.u64 %rd2, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r9, 0;
setp.eq.u32 %p1, %r1, 0;
@!%p1 bra DONE;
mbarrier.init.shared::cta.b64 [buf+8], 1;
ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd1];
st.shared.v4.u32 [buf+256], {{%r10, %r11, %r12, %r13}};
st.shared.v4.u32 [buf+1024], {{%r10, %r11, %r12, %r13}};
fence.proxy.async.shared::cta;
mbarrier.arrive.expect_tx.shared::cta.b64 _, [buf+8], 16;
cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.{op}.{t} [buf+1024], [buf+256], 16, [buf+8];
WAIT:
mbarrier.try_wait.parity.shared::cta.b64 %p0, [buf+8], %r9;
@!%p0 bra WAIT;
ld.shared.v4.u32 {{%r10, %r11, %r12, %r13}}, [buf+1024];
st.global.v4.u32 [%rd2], {{%r10, %r11, %r12, %r13}};
DONE:
ret;
}}
"""


@pytest.mark.parametrize("op,t,want", [("add", "u32", lambda a: 2 * a),
                                       ("add", "u64", lambda a: 2 * a),
                                       ("xor", "b32", lambda a: 0 * a),
                                       ("min", "u32", lambda a: a)])
def test_bulk_reduction_into_shared_memory_reduces(op, t, want):
    gmem = GlobalMemory()
    a = np.arange(4, dtype=np.uint32) + 1000
    src = gmem.add("src", a)
    out = gmem.add("out", np.full(4, 7, np.uint32))
    res = run_launch(REDUCE_SHARED.format(op=op, t=t), Launch(grid=(1, 1, 1), threads=32, params={
        "src": src.to_bytes(8, "little"), "out": out.to_bytes(8, "little")}), gmem,
        filename="red.ptx")
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert gmem.buffer("out").view(np.uint32).tolist() == want(a).tolist()


@pytest.mark.parametrize("fences,bad", [
    ("fence.proxy.async.shared::cta;", False),       # every thread, the issuer included
    # the issuer alone (ThunderKittens): the other writers never fence their writes (issue
    # 18's "proxy fence in another thread than the writer"; ptx_rules AP1: the writing
    # threads fence), though the formal model's causality path runs through the issuer's
    ("@%p1 fence.proxy.async.shared::cta;", True),
    ("@!%p1 fence.proxy.async.shared::cta;", True),  # every writer but not the issuer
])
def test_fences_after_the_hand_off_barrier(fences, bad):
    # st.shared; bar.sync; {fences}; the issuer's TMA store. A fence counts on the causality
    # path from the write to the copy (PTX ISA 9.1 §8.9, proxy-preserved base causality
    # order): the issuer's own fence after the barrier is one when every writer fenced its
    # writes too (Triton 3.6's fence after the barrier in every thread);
    # the writers' fences after the barrier run concurrently with the issue and are not
    gmem = GlobalMemory()
    dst = gmem.add("c", np.full(ROWS * COLS, 7, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=64,
                    params={"tmap": _tmap(dst), "out": (0).to_bytes(8, "little")})
    text = STORE.replace("{fence}\nbar.sync 0;", "bar.sync 0;\n" + fences)
    assert text != STORE
    res = run_launch(text.format(wait="@%p1 cp.async.bulk.wait_group.read 0;"), launch, gmem,
                     filename="st.ptx")
    hb4 = [f for f in res.findings if f.rule == "HB4"]
    if bad:  # (the first unfenced byte is a writer's that never fenced)
        assert hb4 and hb4[0].severity == "error", res.findings
    else:
        assert res.status == "ok" and res.findings == [], res.findings


def test_a_fence_after_one_barrier_and_before_another_is_ordered():
    # the same fences followed by a second barrier before the issue: ordered
    res, _ = _store(fence="bar.sync 0;\nfence.proxy.async.shared::cta;")
    assert res.status == "ok" and res.findings == [], res.findings


# ---- a bulk copy's global source written through the generic proxy (red team round 8) ----
ROUNDTRIP = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 128 .b8 rbuf[512];
.shared .align 8 .b64 rbar;
.visible .entry k(.param .u64 px, .param .u64 pout)
.reqntid 128
{{
.reg .pred %p<4>;
.reg .b32 %r<8>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [px];
ld.param.u64 %rd4, [pout];
mov.u32 %r1, %tid.x;
mov.u32 %r2, rbar;
mov.u32 %r3, rbuf;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r1;
{fence}
bar.sync 0;
@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 512;
@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1], 512, [%r2];
$L_w:
mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
@!%p2 bra.uni $L_w;
shl.b32 %r4, %r1, 2;
add.u32 %r5, %r3, %r4;
ld.shared.u32 %r6, [%r5];
add.s64 %rd5, %rd4, %rd2;
st.global.u32 [%rd5], %r6;
ret;
}}
"""


@pytest.mark.parametrize("fence,bad", [("", True), ("fence.proxy.async.global;", False),
                                       ("fence.proxy.async;", False)])
def test_generic_global_writes_read_back_by_a_bulk_copy(fence, bad):
    gmem = GlobalMemory()
    x = gmem.add("x", np.zeros(128, np.uint32))
    out = gmem.add("out", np.zeros(128, np.uint32))
    res = run_launch(ROUNDTRIP.format(fence=fence), Launch(
        grid=(1, 1, 1), threads=128, params={"px": x.to_bytes(8, "little"),
                                             "pout": out.to_bytes(8, "little")}),
        gmem, filename="rt.ptx")
    hb4 = [f for f in res.findings if f.rule == "HB4"]
    if bad:
        assert hb4 and hb4[0].severity == "error" and "global memory" in hb4[0].message, \
            res.findings
    else:
        assert res.status == "ok" and res.findings == [], (res.message, res.findings)
        assert gmem.buffer("out").view(np.uint32).tolist() == list(range(128))


def test_a_bulk_copy_of_global_bytes_another_cta_writes_unordered_is_a_race():
    # CTA 1 copies what CTA 0's threads write, with no ordering between the CTAs at all
    text = ROUNDTRIP.format(fence="fence.proxy.async.global;").replace(
        "st.global.u32 [%rd3], %r1;",
        "mov.u32 %r7, %ctaid.x;\nsetp.eq.u32 %p3, %r7, 0;\n@%p3 st.global.u32 [%rd3], %r1;")
    gmem = GlobalMemory()
    x = gmem.add("x", np.zeros(128, np.uint32))
    out = gmem.add("out", np.zeros(256, np.uint32))
    res = run_launch(text.replace("add.s64 %rd5, %rd4, %rd2;",
                                  "add.s64 %rd5, %rd4, %rd2;\nmul.wide.u32 %rd6, %r7, 512;\n"
                                  "add.s64 %rd5, %rd5, %rd6;"),
                     Launch(grid=(2, 1, 1), threads=128, params={
                         "px": x.to_bytes(8, "little"), "pout": out.to_bytes(8, "little")}),
                     gmem, filename="rt.ptx")
    assert "HB1" in [f.rule for f in res.findings], (res.message, res.findings)
