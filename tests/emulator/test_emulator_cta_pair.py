"""tcgen05 ``.cta_group::2`` (CTA pair) in the emulator (emulator/cta_pair.py): a hand-written
sm_100a CTA-pair GEMM (a cluster of 2 CTAs, ``tcgen05.mma.cta_group::2`` with M = 256 (data-path
Layout A) or M = 128 (Layout B), operands written with st.shared + fence.proxy.async in both
CTAs, a multicast commit to both CTAs' mbarriers, each CTA reading its half of D with
``tcgen05.ld.32x32b``) against a float64 numpy reference, and the bug variants the
happens-before analysis must catch (PTX ISA 9.1 §9.7.16.5 issue granularity and CTA pair,
§9.7.16.10.5 data-path layouts, §9.7.16.12.1 tcgen05.commit)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import ml_dtypes
import numpy as np
import pytest

from emulator import EmulationUnsupported, GlobalMemory, Launch, run_launch
from emulator.async_copy import encode_tensor_map

N = 64          # columns of D (rows of B^T), split N/2 per CTA for B
RB = 64         # bytes of K per operand row: 2 MMAs of 32 bytes (f16 K = 32, tf32 K = 16)
ALLOC = 64      # TMEM columns allocated (jointly) by the pair
KINDS = {"f16": (np.float16, 0), "tf32": (np.float32, 2),
         "f8f6f4": (ml_dtypes.float8_e4m3fn, 0)}  # kind -> (element type, idesc A/B type)


def _image(rows: int, raw: np.ndarray) -> np.ndarray:
    """Non-swizzled K-major shared-memory image of ``raw`` (rows, RB bytes): 8-row x 16-byte
    core matrices, LBO 128 (between 16-byte K chunks), SBO 8 * RB (between 8-row groups)."""
    sbo = 8 * RB
    img = np.zeros(rows // 8 * sbo, np.uint8)
    r = np.arange(rows)[:, None]
    kb = np.arange(RB)[None, :]
    img[(r // 8) * sbo + (r % 8) * 16 + (kb // 16) * 128 + kb % 16] = raw
    return img


def _desc(start: int) -> int:
    """sm_100 shared-memory descriptor (PTX ISA 9.1 §9.7.16.4.1): start, LBO 128, SBO 8 * RB,
    the fixed 0b001 at bits 46-48, no swizzle; ``start`` is added to the smem base >> 4."""
    return (start >> 4) | ((128 >> 4) << 16) | (((8 * RB) >> 4) << 32) | (1 << 46)


def _ptx(M: int, kind: str, *, mask: int = 3, odd_fence: bool = True, odd_waits: bool = True,
         odd_exits_early: bool = False, odd_dealloc_early: bool = False,
         nobody_waits: bool = False, tma: bool = False, no_load_wait: bool = False) -> str:
    Mh, Nh = M // 2, N // 2
    img = (Mh + Nh) * RB
    a_bytes = Mh * RB
    at = KINDS[kind][1]
    idesc = (1 << 4) | (at << 7) | (at << 10) | ((N >> 3) << 17) | ((M >> 4) << 24)
    mmas = []
    for i in range(RB // 32):  # each MMA consumes 32 bytes of K: two 16-byte chunks (LBO 128)
        mmas += [f"add.s64 %rd13, %rd20, {_desc(i * 256)};",
                 f"add.s64 %rd14, %rd20, {_desc(a_bytes + i * 256)};",
                 f"setp.ne.u32 %p6, {i}, 0;",
                 f"tcgen05.mma.cta_group::2.kind::{kind} [%r20], %rd13, %rd14, %r27, %p6;"]
    nld = N if M == 256 else Nh  # columns each thread reads (Layout B folds the halves)
    regs = ", ".join(f"%r{40 + j}" for j in range(nld))
    stores = "\n".join(
        f"st.global.v4.b32 [%rd8+{16 * q}], {{%r{40 + 4 * q}, %r{41 + 4 * q}, %r{42 + 4 * q}, "
        f"%r{43 + 4 * q}}};" for q in range(nld // 4))
    fence = ("fence.proxy.async.shared::cta;" if odd_fence else
             "@%p3 fence.proxy.async.shared::cta;")
    skip_wait = "" if odd_waits else "@!%p3 bra $L_waited;"
    exit_early = "@!%p3 bra $L_exit;" if odd_exits_early else ""
    dealloc_early = "@!%p3 bra $L_dealloc;" if odd_dealloc_early else ""
    if nobody_waits:  # both CTAs skip the commit wait and the epilogue
        dealloc_early = "bra.uni $L_handoff;"
    copy = f"""mul.wide.u32 %rd3, %r3, {img};
add.s64 %rd4, %rd1, %rd3;
mov.u32 %r7, 0;
$L_copy:
mad.lo.u32 %r8, %r7, 128, %r1;
setp.ge.u32 %p5, %r8, {img // 16};
@%p5 bra $L_copied;
mul.wide.u32 %rd5, %r8, 16;
add.s64 %rd6, %rd4, %rd5;
ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd6];
shl.b32 %r9, %r8, 4;
add.u32 %r14, %r6, %r9;
st.shared.v4.u32 [%r14], {{%r10, %r11, %r12, %r13}};
add.u32 %r7, %r7, 1;
bra.uni $L_copy;
$L_copied:
{fence}"""
    load, load_wait = "", ""
    if tma:  # each CTA's thread 0 loads its half by TMA; both complete on the even CTA's lbar
        copy = ""
        load = f"""mapa.shared::cluster.u32 %r16, %r15, 0;
@%p4 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r15], {2 * img};
mov.b64 %rd9, tmap;
cvta.param.u64 %rd10, %rd9;
mul.lo.u32 %r17, %r3, {Mh + Nh};
mov.u32 %r18, 0;
@%p2 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2
  [%r6], [%rd10, {{%r18, %r17}}], [%r16];"""
        if not no_load_wait:
            load_wait = """$L_lwait:
mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r15], 0;
@!%p5 bra $L_lwait;"""
    return f""".version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 img, .param .u64 out, .param .align 64 .b8 tmap[128])
.reqntid 128, 1, 1
.reqnctapercluster 2, 1, 1
{{
.reg .pred %p<8>;
.reg .b16 %rs<2>;
.reg .b32 %r<120>;
.reg .b64 %rd<24>;
.shared .align 1024 .b8 smem[{img}];
.shared .align 8 .b64 bar;
.shared .align 8 .b64 lbar;
.shared .align 4 .b32 tslot;
ld.param.u64 %rd1, [img];
ld.param.u64 %rd2, [out];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
mov.u32 %r3, %cluster_ctarank;
setp.lt.u32 %p1, %r1, 32;
setp.eq.u32 %p2, %r1, 0;
setp.eq.u32 %p3, %r3, 0;
and.pred %p4, %p2, %p3;
mov.u32 %r4, tslot;
barrier.cluster.arrive.relaxed.aligned;
barrier.cluster.wait.aligned;
@%p1 tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r4], {ALLOC};
@%p1 tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;
mov.u32 %r5, bar;
@%p2 mbarrier.init.shared::cta.b64 [%r5], 1;
mov.u32 %r15, lbar;
@%p2 mbarrier.init.shared::cta.b64 [%r15], 1;
@%p2 fence.mbarrier_init.release.cluster;
mov.u32 %r6, smem;
{copy}
tcgen05.fence::before_thread_sync;
barrier.cluster.arrive.release.aligned;
barrier.cluster.wait.acquire.aligned;
tcgen05.fence::after_thread_sync;
ld.shared.b32 %r20, [%r4];
{load}
{exit_early}
@!%p4 bra $L_issued;
shr.u32 %r21, %r6, 4;
cvt.u64.u32 %rd20, %r21;
{load_wait}
mov.b32 %r27, {idesc};
{chr(10).join(mmas)}
mov.b16 %rs1, {mask};
tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64
  [%r5], %rs1;
$L_issued:
{dealloc_early}
{skip_wait}
$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 %p7, [%r5], 0;
@!%p7 bra $L_wait;
$L_waited:
tcgen05.fence::after_thread_sync;
shl.b32 %r34, %r2, 21;
add.u32 %r35, %r20, %r34;
tcgen05.ld.sync.aligned.32x32b.x{nld}.b32 {{{regs}}}, [%r35];
tcgen05.wait::ld.sync.aligned;
and.b32 %r30, %r1, {Mh - 1};
shr.u32 %r31, %r1, {Mh.bit_length() - 1};
mul.lo.u32 %r31, %r31, {Nh};
mad.lo.u32 %r32, %r3, {Mh}, %r30;
mad.lo.u32 %r33, %r32, {N}, %r31;
mul.wide.u32 %rd7, %r33, 4;
add.s64 %rd8, %rd2, %rd7;
{stores}
$L_handoff:
tcgen05.fence::before_thread_sync;
barrier.cluster.arrive.release.aligned;
barrier.cluster.wait.acquire.aligned;
tcgen05.fence::after_thread_sync;
$L_dealloc:
@%p1 tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r20, {ALLOC};
$L_exit:
ret;
}}
"""


def _ptxas() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    p = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    return p if os.path.exists(p) else shutil.which("ptxas")


def _run_ptx(ptx: str):
    return _run(ptx=ptx)


def _run(M: int = 256, kind: str = "f16", seed: int = 0, ptx: str | None = None, **bug):
    """Launch the pair GEMM (one cluster of 2 CTAs); returns (result, D got, D want)."""
    Mh, Nh = M // 2, N // 2
    dt = KINDS[kind][0]
    kel = RB // np.dtype(dt).itemsize
    rng = np.random.default_rng(seed)
    # small multiples of 1/4: exact in f16, tf32 and E4M3, exact products, sums exact in f32
    A = (rng.integers(-8, 9, (M, kel)) / 4).astype(dt)
    B = (rng.integers(-8, 9, (N, kel)) / 4).astype(dt)
    raw = lambda x: np.ascontiguousarray(x).view(np.uint8)  # noqa: E731
    img = np.concatenate([np.concatenate([_image(Mh, raw(A[r * Mh:(r + 1) * Mh])),
                                          _image(Nh, raw(B[r * Nh:(r + 1) * Nh]))])
                          for r in range(2)])
    gmem = GlobalMemory()
    a_img = gmem.add("img", img)
    a_out = gmem.add("out", np.full(M * N, np.nan, np.float32))
    # the image as u32 rows of RB bytes; a box is one CTA's (Mh + Nh) rows
    tmap = encode_tensor_map(a_img, 2, (RB // 4, 2 * (Mh + Nh)), (RB,), (RB // 4, Mh + Nh))
    launch = Launch(grid=(2, 1, 1), threads=128, arch="sm_100a", cluster=(2, 1, 1),
                    params={"img": a_img.to_bytes(8, "little"),
                            "out": a_out.to_bytes(8, "little"), "tmap": tmap})
    res = run_launch(ptx if ptx is not None else _ptx(M, kind, **bug), launch, gmem,
                     filename="pair.ptx")
    got = gmem.buffer("out").view(np.float32).reshape(M, N)
    return res, got, A.astype(np.float64) @ B.astype(np.float64).T


def _errors(res):
    return [(f.rule, f.message) for f in res.findings if f.severity == "error"]


VARIANTS = {"ok": {}, "mask_issuer_only": {"mask": 1}, "odd_no_fence": {"odd_fence": False},
            "odd_no_wait": {"odd_waits": False}, "odd_exits_early": {"odd_exits_early": True},
            "odd_dealloc_early": {"odd_dealloc_early": True},
            "nobody_waits": {"nobody_waits": True},
            "tma": {"tma": True}, "tma_no_load_wait": {"tma": True, "no_load_wait": True}}


@pytest.mark.parametrize("name", sorted(VARIANTS))
@pytest.mark.parametrize("M", [256, 128])
def test_every_kernel_is_legal_ptx(name, M):
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no ptxas")
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "pair.ptx")
        with open(f, "w") as fh:
            fh.write(_ptx(M, "f16", **VARIANTS[name]))
        r = subprocess.run([ptxas, "-arch=sm_100a", f, "-o", os.devnull], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("M,kind", [(256, "f16"), (256, "tf32"), (256, "f8f6f4"), (128, "f16"),
                                    (128, "tf32"), (128, "f8f6f4")])
def test_cta_pair_gemm_matches_numpy(M, kind):
    res, got, want = _run(M, kind)
    assert res.status == "ok", res.message
    assert _errors(res) == []
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("M", [256, 128])
def test_cta_pair_gemm_with_cta_group_2_tma_loads(M):
    # the odd CTA's TMA completes on the even CTA's mbarrier (.cta_group::2): the issuer's wait
    # on it orders the MMA after both CTAs' operand bytes
    res, got, want = _run(M, tma=True)
    assert res.status == "ok", res.message
    assert _errors(res) == []
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_pair_mma_before_the_tma_completes_is_a_race():
    res, _, _ = _run(tma=True, no_load_wait=True)
    hb1 = [m for r, m in _errors(res) if r == "HB1" and "shared" in m]
    assert hb1 and "tcgen05.mma" in hb1[0], _errors(res)


def test_commit_mask_naming_only_the_issuer_deadlocks_the_odd_cta():
    res, _, _ = _run(mask=1)
    assert res.status == "deadlock", res.message
    hb2 = [f for f in res.findings if f.rule == "HB2"]
    assert hb2 and "mbarrier" in " ".join(n.message for n in hb2[0].notes)


def test_odd_cta_reading_tmem_without_the_commit_wait_is_a_tmem_race():
    res, got, want = _run(odd_waits=False)
    hb = [m for r, m in _errors(res) if r == "HB1" and "tensor memory" in m]
    assert hb and "tcgen05.ld" in hb[0] and "of CTA (1,0,0)" in hb[0], _errors(res)
    assert "CTA-pair 'tcgen05.mma' issued by CTA (0,0,0)" in hb[0], hb[0]
    # the even CTA's half is still ordered (its threads waited) and right
    np.testing.assert_allclose(got[:128], want[:128], rtol=1e-6, atol=1e-6)


def test_odd_operand_written_without_a_proxy_fence_is_hb4():
    res, _, _ = _run(odd_fence=False)
    hb4 = [(r, m) for r, m in _errors(res) if r == "HB4"]
    assert hb4 and "tcgen05.mma" in hb4[0][1] and "CTA (1,0,0)" in hb4[0][1], _errors(res)


def test_odd_cta_exiting_while_the_pair_mma_is_in_flight():
    # the odd CTA leaves right after the operand hand-off: the MMA still reads its shared
    # memory (HB9) and the even CTA's collective dealloc waits for it forever
    res, _, _ = _run(odd_exits_early=True)
    hb9 = [m for r, m in _errors(res) if r == "HB9"]
    assert hb9 and "CTA 1 exits" in hb9[0] and "tcgen05.mma" in hb9[0], _errors(res)
    assert res.status == "deadlock"
    notes = " ".join(n.message for f in res.findings if f.rule == "HB2" for n in f.notes)
    assert "peer CTA 1" in notes and "it exited" in notes, notes


def test_odd_dealloc_before_the_cluster_barrier_deadlocks():
    # PTX ISA 9.1 §9.7.16.5: one CTA deallocates before the cluster barrier, the other after:
    # the collective dealloc may block, so this may deadlock
    res, _, _ = _run(odd_dealloc_early=True)
    assert res.status == "deadlock", res.message
    notes = " ".join(n.message for f in res.findings if f.rule == "HB2" for n in f.notes)
    assert "tcgen05.dealloc.cta_group::2" in notes and "barrier.cluster" in notes, notes


def test_dealloc_and_exit_while_the_pair_mma_may_still_run():
    # neither CTA waits on the commit: the collective dealloc frees columns the MMA may still
    # write (HB1), and both CTAs exit with the MMA not known complete (HB9)
    res, _, _ = _run(nobody_waits=True)
    errs = _errors(res)
    assert any(r == "HB1" and "frees TMEM columns 0-63" in m and "issued by CTA 0" in m
               for r, m in errs), errs
    assert any(r == "HB9" and "exits while the CTA-pair" in m for r, m in errs), errs


def test_cta_group_2_without_a_peer_is_a_fault():
    gmem = GlobalMemory()
    a_img = gmem.add("img", np.zeros(20480, np.uint8))
    a_out = gmem.add("out", np.zeros(256 * N, np.float32))
    ptx = _ptx(256, "f16").replace(".reqnctapercluster 2, 1, 1\n", "")
    res = run_launch(ptx, Launch(grid=(1, 1, 1), threads=128, arch="sm_100a",
                                 params={"img": a_img.to_bytes(8, "little"),
                                         "out": a_out.to_bytes(8, "little")}),
                     gmem, filename="pair.ptx")
    assert res.status == "fault" and "no peer" in res.message, res.message


def test_pair_mma_issued_by_the_odd_cta_is_unsupported():
    ptx = _ptx(256, "f16").replace("setp.eq.u32 %p3, %r3, 0;", "setp.eq.u32 %p3, %r3, 1;")
    with pytest.raises(EmulationUnsupported, match="issued by the odd CTA of the pair"):
        _run_ptx(ptx)


@pytest.mark.parametrize("op", ["tcgen05.cp.cta_group::2.128x256b [%r20], %rd13;",
                                "tcgen05.shift.cta_group::2.down [%r20];"])
def test_pair_cp_and_shift_are_unsupported(op):
    ptx = _ptx(256, "f16").replace("mov.b16 %rs1, 3;", op + "\nmov.b16 %rs1, 3;")
    with pytest.raises(EmulationUnsupported, match=r"\(2-CTA\)"):
        _run_ptx(ptx)


@pytest.mark.parametrize("tma", [False, True])
@pytest.mark.parametrize("M", [256, 128])
def test_pair_kernels_have_no_verifier_error(M, tma):
    # the static rules on the correct pair kernels: the odd CTA's TMA completes on the even
    # CTA's barrier through mapa, so the copies the barrier receives are not all visible to
    # MB8's byte sum (a note, not "expects 20480 bytes but the copies deliver 0")
    from verifier import verify
    rep = verify(_ptx(M, "f16", tma=tma), arch="sm_100a", threads=128, filename="pair.ptx")
    assert rep.ok, rep.render()
    if tma:
        assert any(f.rule == "MB8" and f.severity == "note" for f in rep.findings)
