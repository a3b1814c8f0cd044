"""tcgen05 extensions in the emulator (emulator/tcgen05_ext.py): block-scaled MMA kinds
(mxf8f6f4 1X, mxf4 2X, mxf4nvf4 4X with UE8M0 and UE4M3 scales) against a numpy reference, the
scale-factor layout rules (duplication across lane partitions, valid scale_vec), tcgen05.cp and
tcgen05.shift."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from emulator import GlobalMemory, Launch, run_launch

N = 32  # accumulator columns (rows of B^T)
M = 128

_KINDS = {  # kind -> (scale_vec, bytes per row in total, MMAs, K elements per MMA, fp4)
    "mxf8f6f4": ("1X", 128, 4, 32, False),
    "mxf4": ("2X", 64, 2, 64, True),
    "mxf4nvf4": ("4X", 32, 1, 64, True),
}


def _image(rows: int, R: int, raw: np.ndarray) -> np.ndarray:
    """Non-swizzled K-major smem image of ``raw`` (rows, R): 8 x 16 B core matrices, LBO 128,
    SBO 8 * R (the layout the MMA descriptor below describes)."""
    sbo = 8 * R
    img = np.zeros(rows // 8 * sbo, np.uint8)
    r = np.arange(rows)[:, None]
    kb = np.arange(R)[None, :]
    img[(r // 8) * sbo + (r % 8) * 16 + (kb // 16) * 128 + kb % 16] = raw
    return img


def _ptx(kind: str, vec: str, R: int, n_mma: int, idescs: list[int]) -> str:
    sbo = 8 * R
    b_off = M * R
    lines = []
    for i in range(n_mma):
        da = (((i * 256) >> 4) | ((128 >> 4) << 16) | ((sbo >> 4) << 32) | (1 << 46))
        db = (((b_off + i * 256) >> 4) | ((128 >> 4) << 16) | ((sbo >> 4) << 32) | (1 << 46))
        lines += [f"add.s64 %rd13, %rd20, {da};", f"add.s64 %rd14, %rd20, {db};",
                  f"mov.b32 %r27, {idescs[i]};", f"mov.pred %p6, {0 if i == 0 else -1};",
                  f"@%p2 tcgen05.mma.cta_group::1.kind::{kind}.block_scale.scale_vec::{vec} "
                  f"[%r20], %rd13, %rd14, %r27, [%r25], [%r26], %p6;"]
    regs = ", ".join(f"%r{40 + j}" for j in range(32))
    stores = "\n".join(
        f"st.global.v4.b32 [%rd12+{16 * q}], {{%r{40 + 4 * q}, %r{41 + 4 * q}, %r{42 + 4 * q}, "
        f"%r{43 + 4 * q}}};" for q in range(8))
    nchunk = (M * R + N * R) // 16
    mmas = "\n".join(lines)
    return f""".version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 img, .param .u64 sa, .param .u64 sb, .param .u64 out)
.reqntid 128
{{
.reg .pred %p<8>;
.reg .b32 %r<80>;
.reg .b64 %rd<24>;
.shared .align 1024 .b8 smem[{M * R + N * R}];
.shared .align 8 .b64 bar;
.shared .align 4 .b32 tslot;
ld.param.u64 %rd1, [img];
ld.param.u64 %rd2, [sa];
ld.param.u64 %rd3, [sb];
ld.param.u64 %rd4, [out];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
setp.lt.u32 %p1, %r1, 32;
setp.eq.u32 %p2, %r1, 0;
mov.u32 %r3, tslot;
@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r3], 64;
@%p1 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
mov.u32 %r4, bar;
@%p2 mbarrier.init.shared::cta.b64 [%r4], 1;
mov.u32 %r5, smem;
mov.u32 %r6, 0;
$L_copy:
mad.lo.u32 %r7, %r6, 128, %r1;
setp.ge.u32 %p3, %r7, {nchunk};
@%p3 bra $L_copied;
mul.wide.u32 %rd5, %r7, 16;
add.s64 %rd6, %rd1, %rd5;
ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd6];
shl.b32 %r8, %r7, 4;
add.u32 %r9, %r5, %r8;
st.shared.v4.u32 [%r9], {{%r10, %r11, %r12, %r13}};
add.u32 %r6, %r6, 1;
bra.uni $L_copy;
$L_copied:
fence.proxy.async.shared::cta;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
ld.shared.b32 %r20, [tslot];
shl.b32 %r21, %r2, 21;
add.u32 %r22, %r20, %r21;
mul.wide.u32 %rd7, %r1, 16;
add.s64 %rd8, %rd2, %rd7;
ld.global.v4.u32 {{%r30, %r31, %r32, %r33}}, [%rd8];
add.u32 %r23, %r22, 32;
tcgen05.st.sync.aligned.32x32b.x4.b32 [%r23], {{%r30, %r31, %r32, %r33}};
mul.wide.u32 %rd9, %r1, 4;
add.s64 %rd10, %rd3, %rd9;
ld.global.u32 %r34, [%rd10];
add.u32 %r24, %r22, 40;
tcgen05.st.sync.aligned.32x32b.x1.b32 [%r24], {{%r34}};
tcgen05.wait::st.sync.aligned;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
add.u32 %r25, %r20, 32;
add.u32 %r26, %r20, 40;
shr.u32 %r28, %r5, 4;
cvt.u64.u32 %rd20, %r28;
{mmas}
@%p2 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r4];
$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r4], 0;
@!%p5 bra $L_wait;
tcgen05.fence::after_thread_sync;
tcgen05.ld.sync.aligned.32x32b.x32.b32 {{{regs}}}, [%r22];
tcgen05.wait::ld.sync.aligned;
mul.wide.u32 %rd11, %r1, 128;
add.s64 %rd12, %rd4, %rd11;
{stores}
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 64;
ret;
}}
"""


def _idesc(kind: str, i: int, ue8m0: bool = True) -> int:
    fp4 = kind != "mxf8f6f4"
    sf = (2 * i) if kind == "mxf4" else (i if kind == "mxf8f6f4" else 0)
    t = 1 if fp4 else 0
    return ((sf << 4) | (t << 7) | (t << 10) | ((N >> 3) << 17) | (int(ue8m0) << 23) |
            ((M >> 7) << 27) | (sf << 29))


def _decode(raw: np.ndarray, fp4: bool) -> np.ndarray:
    if fp4:
        lo = (raw & 0xF).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        hi = (raw >> 4).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        return np.stack([lo, hi], axis=-1).reshape(raw.shape[0], -1)
    return raw.view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _scales(rng, rows: int, ue8m0: bool) -> np.ndarray:
    if ue8m0:
        return rng.integers(120, 135, (rows, 4), dtype=np.uint8)
    return rng.integers(0x30, 0x50, (rows, 4), dtype=np.uint8)  # UE4M3 0.125 .. 2


def _sval(raw: np.ndarray, ue8m0: bool) -> np.ndarray:
    if ue8m0:
        return np.exp2(raw.astype(np.float64) - 127)
    return raw.view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _run(kind: str, ue8m0: bool = True, seed: int = 0, vec: str | None = None,
         break_dup: bool = False, no_wait_st: bool = False):
    sv, R, n_mma, kper, fp4 = _KINDS[kind]
    rng = np.random.default_rng(seed)
    if fp4:
        ra = rng.integers(0, 256, (M, R), dtype=np.uint8)
        rb = rng.integers(0, 256, (N, R), dtype=np.uint8)
    else:  # E4M3 without NaN (0x7F / 0xFF)
        ra = rng.integers(0, 0x7F, (M, R), dtype=np.uint8) | (
            rng.integers(0, 2, (M, R), dtype=np.uint8) << 7)
        rb = rng.integers(0, 0x7F, (N, R), dtype=np.uint8) | (
            rng.integers(0, 2, (N, R), dtype=np.uint8) << 7)
    sa, sb = _scales(rng, M, ue8m0), _scales(rng, N, ue8m0)
    img = np.concatenate([_image(M, R, ra), _image(N, R, rb)])
    wa = sa.copy().view(np.uint32).reshape(M)  # word of row r: bytes = K blocks 0..3
    wb = sb.copy().view(np.uint32).reshape(N)
    t = np.arange(128)
    sa_thr = np.stack([wa[t % 32 + 32 * j] for j in range(4)], axis=1).astype(np.uint32)
    if break_dup:
        sa_thr[32:64] ^= np.uint32(0x01010101)
    sb_thr = wb[t % 32].astype(np.uint32)
    gmem = GlobalMemory()
    addrs = [gmem.add("img", img), gmem.add("sa", sa_thr.reshape(-1)), gmem.add("sb", sb_thr),
             gmem.add("out", np.zeros(128 * N, np.float32))]
    ptx = _ptx(kind, vec or sv, R, n_mma, [_idesc(kind, i, ue8m0) for i in range(n_mma)])
    if no_wait_st:
        ptx = ptx.replace("tcgen05.wait::st.sync.aligned;", "", 1)
    launch = Launch(grid=(1, 1, 1), threads=128, arch="sm_100a",
                    params={n: a.to_bytes(8, "little") for n, a in
                            zip(("img", "sa", "sb", "out"), addrs)})
    res = run_launch(ptx, launch, gmem, filename="mx.ptx")
    got = gmem.buffer("out").view(np.float32).reshape(128, N)
    A, B = _decode(ra, fp4), _decode(rb, fp4)
    blk = kper // {"1X": 1, "2X": 2, "4X": 4}[sv]
    A = A * np.repeat(_sval(sa, ue8m0), blk, axis=1)[:, :A.shape[1]]
    B = B * np.repeat(_sval(sb, ue8m0), blk, axis=1)[:, :B.shape[1]]
    return res, got, (A @ B.T)


@pytest.mark.parametrize("kind,ue8m0", [("mxf8f6f4", True), ("mxf4", True),
                                        ("mxf4nvf4", True), ("mxf4nvf4", False)])
def test_block_scaled_mma_matches_numpy(kind, ue8m0):
    res, got, want = _run(kind, ue8m0)
    assert res.status == "ok", res.message
    assert [f for f in res.findings if f.severity == "error"] == []
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert np.abs(want).max() > 0
    # every row has four different K-block scales: ignoring SF_ID (always byte 0) would not
    # match; nor would one scale for the whole row


def test_scales_not_duplicated_to_every_lane_partition_is_a_fault():
    res, _, _ = _run("mxf8f6f4", break_dup=True)
    assert res.status == "fault" and "duplicated" in res.message


def test_scales_read_before_their_tcgen05_wait_st_is_a_tmem_race():
    # the values still match (stores complete at issue here): only the ordering is wrong
    res, got, want = _run("mxf8f6f4", no_wait_st=True)
    races = [f for f in res.findings if f.rule == "HB1"]
    assert races and "tensor memory" in races[0].message
    assert "tcgen05.wait::st" in races[0].message


def test_invalid_scale_vec_for_the_kind_is_a_fault():
    res, _, _ = _run("mxf8f6f4", vec="2X")
    assert res.status == "fault" and "scale_vec" in res.message


CP = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 src, .param .u64 out)
.reqntid 128
{{
.reg .pred %p<8>;
.reg .b32 %r<80>;
.reg .b64 %rd<24>;
.shared .align 1024 .b8 smem[{smem}];
.shared .align 8 .b64 bar;
.shared .align 4 .b32 tslot;
ld.param.u64 %rd1, [src];
ld.param.u64 %rd4, [out];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
setp.lt.u32 %p1, %r1, 32;
setp.eq.u32 %p2, %r1, 0;
mov.u32 %r3, tslot;
@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r3], 32;
mov.u32 %r4, bar;
@%p2 mbarrier.init.shared::cta.b64 [%r4], 1;
mov.u32 %r5, smem;
mov.u32 %r6, 0;
$L_copy:
mad.lo.u32 %r7, %r6, 128, %r1;
setp.ge.u32 %p3, %r7, {nchunk};
@%p3 bra $L_copied;
mul.wide.u32 %rd5, %r7, 16;
add.s64 %rd6, %rd1, %rd5;
ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd6];
shl.b32 %r8, %r7, 4;
add.u32 %r9, %r5, %r8;
st.shared.v4.u32 [%r9], {{%r10, %r11, %r12, %r13}};
add.u32 %r6, %r6, 1;
bra.uni $L_copy;
$L_copied:
fence.proxy.async.shared::cta;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
ld.shared.b32 %r20, [tslot];
shl.b32 %r21, %r2, 21;
add.u32 %r22, %r20, %r21;
shr.u32 %r28, %r5, 4;
cvt.u64.u32 %rd20, %r28;
add.s64 %rd13, %rd20, {desc};
@%p2 tcgen05.cp.cta_group::1.{shape} [%r20], %rd13;
{shift}
@%p2 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r4];
$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 %p5, [%r4], 0;
@!%p5 bra $L_wait;
tcgen05.fence::after_thread_sync;
tcgen05.ld.sync.aligned.32x32b.x8.b32 {{%r40, %r41, %r42, %r43, %r44, %r45, %r46, %r47}}, [%r22];
tcgen05.wait::ld.sync.aligned;
mul.wide.u32 %rd11, %r1, 32;
add.s64 %rd12, %rd4, %rd11;
st.global.v4.b32 [%rd12], {{%r40, %r41, %r42, %r43}};
st.global.v4.b32 [%rd12+16], {{%r44, %r45, %r46, %r47}};
tcgen05.fence::before_thread_sync;
bar.sync 0;
@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, 32;
ret;
}}
"""


def _cp(shape: str, rows: int, rbytes: int, shift: str = "", swizzle128: int | None = None):
    """Copy ``rows`` x ``rbytes`` random words through tcgen05.cp. ``swizzle128``: the source is
    128-byte swizzled rows (SBO 1024) and the copy takes the 32 bytes at that byte offset of
    each row (a K-advanced descriptor), else non-swizzled core matrices."""
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 2**32, (rows, rbytes // 4), dtype=np.uint32)
    r = np.arange(rows)[:, None]
    kb = np.arange(rbytes)[None, :]
    if swizzle128 is None:
        img = np.zeros(4096, np.uint8)
        sbo = 8 * rbytes  # 8 rows x 16 B core matrices, LBO 128 between K chunks
        img[(r // 8) * sbo + (r % 8) * 16 + (kb // 16) * 128 + kb % 16] = raw.view(np.uint8)
        desc = ((128 >> 4) << 16) | ((sbo >> 4) << 32) | (1 << 46)
    else:
        img = np.zeros(rows // 8 * 1024, np.uint8)
        a = (r // 8) * 1024 + (r % 8) * 128 + swizzle128 + kb
        img[a ^ (((a >> 7) & 7) << 4)] = raw.view(np.uint8)
        desc = (swizzle128 >> 4) | (1 << 16) | ((1024 >> 4) << 32) | (1 << 46) | (2 << 61)
    gmem = GlobalMemory()
    a = [gmem.add("src", img), gmem.add("out", np.zeros(128 * 8, np.uint32))]
    launch = Launch(grid=(1, 1, 1), threads=128, arch="sm_100a",
                    params={"src": a[0].to_bytes(8, "little"), "out": a[1].to_bytes(8, "little")})
    res = run_launch(CP.format(desc=desc, shape=shape, shift=shift, smem=img.size,
                               nchunk=img.size // 16), launch, gmem, filename="cp.ptx")
    return res, gmem.buffer("out").view(np.uint32).reshape(128, 8), raw


def test_tcgen05_cp_128x256b_lands_row_per_lane():
    res, out, raw = _cp("128x256b", 128, 32)
    assert res.status == "ok" and [f for f in res.findings if f.severity == "error"] == []
    assert (out == raw).all()


def test_tcgen05_cp_32x128b_warpx4_duplicates_into_every_partition():
    res, out, raw = _cp("32x128b.warpx4", 32, 16)
    assert res.status == "ok"
    for p in range(4):
        assert (out[32 * p:32 * p + 32, :4] == raw).all()


@pytest.mark.parametrize("mc,parts", [("warpx2::02_13", (0, 1, 2, 3)),
                                      ("warpx2::01_23", (0, 2, 1, 3))])
def test_tcgen05_cp_64x128b_warpx2(mc, parts):
    res, out, raw = _cp(f"64x128b.{mc}", 64, 16)
    assert res.status == "ok"
    # 02_13: rows 0-31 -> partitions 0 and 1, rows 32-63 -> 2 and 3;
    # 01_23: rows 0-31 -> partitions 0 and 2, rows 32-63 -> 1 and 3
    first, second = (parts[0], parts[1]), (parts[2], parts[3])
    for p in first:
        assert (out[32 * p:32 * p + 32, :4] == raw[:32]).all(), p
    for p in second:
        assert (out[32 * p:32 * p + 32, :4] == raw[32:]).all(), p


def test_tcgen05_shift_down_moves_lanes_of_a_partition():
    res, out, raw = _cp("128x256b", 128, 32, shift="@%p1 tcgen05.shift.cta_group::1.down [%r20];")
    assert res.status == "ok", res.message
    assert (out[1:32] == raw[0:31]).all() and (out[0] == raw[0]).all()
    assert (out[32:] == raw[32:]).all()


def test_tcgen05_cp_from_a_128b_swizzled_source_at_a_k_offset():
    res, out, raw = _cp("128x256b", 128, 32, swizzle128=64)
    assert res.status == "ok", res.message
    assert (out == raw).all()


# ------------------------------------------------------------------ TMEM written by the MMA
_FAST36 = __import__("pathlib").Path(__file__).resolve().parents[1] / "verifier" / "fixtures" \
    / "fast36"


def _persistent_sm100(drop_wait_before_ld: int | None = None, coverage: bool = False):
    """Triton 3.6's persistent TMA GEMM on sm_100a, optionally without the mbarrier wait that
    precedes its ``k``-th ``tcgen05.ld`` (the wait on the MMA's ``tcgen05.commit``)."""
    import kernels
    from emulator import run_kernel
    text = (_FAST36 / "fast.gemm_tma_persistent_sm_100a.ptx").read_text()
    if drop_wait_before_ld is not None:
        lines = text.split("\n")
        lds = [i for i, s in enumerate(lines) if "tcgen05.ld." in s]
        at = lds[drop_wait_before_ld]
        w = max(i for i in range(at) if "mbarrier.try_wait" in lines[i])
        assert "bra.uni waitLoop" in lines[w + 1]
        lines[w], lines[w + 1] = "\tsetp.eq.u32 complete, 0, 0;", ""
        text = "\n".join(lines)
    return run_kernel(text, kernels.get("fast.gemm_tma_persistent"), "sm_100a",
                      global_scratch_size=4096, time_limit_s=60, coverage=coverage)


def test_tmem_read_before_the_mma_commit_is_waited_for_is_a_race():
    # the epilogue's tcgen05.ld without the wait on the accumulator's commit barrier
    res = _persistent_sm100(drop_wait_before_ld=1)
    hb = [f for f in res.findings if f.rule == "HB1" and "tensor memory" in f.message]
    assert hb and hb[0].severity == "error", [(f.rule, f.message[:80]) for f in res.findings]
    assert "tcgen05.ld" in hb[0].message and "tcgen05.mma" in hb[0].message
    assert not res.ok


def test_tmem_read_after_the_commit_wait_is_ordered_and_coverage_counts_lines():
    res = _persistent_sm100(coverage=True)
    assert res.ok, (res.status, [(f.rule, f.message[:80]) for f in res.findings
                                 if f.severity == "error"])
    lines = (_FAST36 / "fast.gemm_tma_persistent_sm_100a.ptx").read_text().split("\n")
    mma = [i + 1 for i, s in enumerate(lines) if "tcgen05.mma" in s]
    assert res.line_counts is not None and all(res.line_counts.get(n, 0) > 0 for n in mma[:1])
    # a line that is no instruction (a comment) is never counted
    assert all(not lines[n - 1].lstrip().startswith("//") for n in res.line_counts)
