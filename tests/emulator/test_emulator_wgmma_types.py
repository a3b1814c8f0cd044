"""wgmma operand types in the emulator against numpy (red team round 8, 2026-12-04): .tf32,
E5M2 x E4M3 and E4M3 x E5M2 (mixed FP8), s8 x u8 / u8 x s8 (mixed signedness) were
"unsupported"; same-type f16 / bf16 / e4m3 / e5m2 / s8 / u8 ran already and are checked here too.
A register A operand of an 8-bit type was read as pairs of 16-bit halves (wrong values): it is
"unsupported" now (register A is modelled for .f16 / .bf16).

One warpgroup, A (64 x K) and B (16 x K) K-major in the no-swizzle core-matrix layout (8 rows x
16 bytes; the two 16-byte K chunks LBO = 128 bytes apart, 8-row groups SBO = 256 apart, PTX ISA
9.1 §9.7.15.5.1), D = A B^T into the m64n16 accumulator fragment."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from emulator import EmulationUnsupported, GlobalMemory, Launch, run_launch

N = 16
LBO, SBO = 128, 256
TYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32,
         "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
         "s8": np.int8, "u8": np.uint8}


def _image(rows: int, mat: np.ndarray) -> np.ndarray:
    """The bytes of ``mat`` (rows, 32 bytes per row) in the K-major no-swizzle layout."""
    raw = np.ascontiguousarray(mat).view(np.uint8).reshape(rows, 32)
    img = np.zeros(rows // 8 * SBO, np.uint8)
    r = np.arange(rows)[:, None]
    kb = np.arange(32)[None, :]
    img[(r // 8) * SBO + (r % 8) * 16 + (kb // 16) * LBO + kb % 16] = raw
    return img


def _ptx(at: str, bt: str, a_regs: bool = False) -> str:
    k = 32 // np.dtype(TYPES[at]).itemsize
    ints = at in ("s8", "u8")
    dt = "s32" if ints else "f32"
    acc = ", ".join(f"%f{j}" for j in range(N // 2))
    imm = "" if ints else ", 1, 1" + (", 0, 0" if at in ("f16", "bf16") and not a_regs else
                                       ", 0" if at in ("f16", "bf16") else "")
    a_op = "{%a0, %a1, %a2, %a3}" if a_regs else "%rd11"
    hi = (LBO >> 4) << 16 | (SBO >> 4) << 32
    stores = "\n".join(f"st.global.b32 [%rd6+{4 * j}], %f{j};" for j in range(N // 2))
    return f""".version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 img, .param .u64 out)
.reqntid 128, 1, 1
{{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b32 %f<{N // 2}>;
.reg .b32 %a<4>;
.reg .b64 %rd<16>;
.shared .align 128 .b8 smem[2560];
ld.param.u64 %rd1, [img];
ld.param.u64 %rd2, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, smem;
mul.wide.u32 %rd3, %r1, 16;
add.s64 %rd4, %rd1, %rd3;
ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd4];
shl.b32 %r3, %r1, 4;
add.u32 %r8, %r2, %r3;
st.shared.v4.u32 [%r8], {{%r4, %r5, %r6, %r7}};
setp.lt.u32 %p1, %r1, 32;
@%p1 ld.global.v4.u32 {{%r4, %r5, %r6, %r7}}, [%rd4+2048];
@%p1 st.shared.v4.u32 [%r8+2048], {{%r4, %r5, %r6, %r7}};
mov.u32 %a0, 0;
mov.u32 %a1, 0;
mov.u32 %a2, 0;
mov.u32 %a3, 0;
fence.proxy.async.shared::cta;
bar.sync 0;
shr.u32 %r9, %r2, 4;
cvt.u64.u32 %rd9, %r9;
or.b64 %rd11, %rd9, {hi};
add.u32 %r10, %r2, 2048;
shr.u32 %r11, %r10, 4;
cvt.u64.u32 %rd10, %r11;
or.b64 %rd12, %rd10, {hi};
wgmma.fence.sync.aligned;
wgmma.mma_async.sync.aligned.m64n{N}k{k}.{dt}.{at}.{bt} {{{acc}}}, {a_op}, %rd12, 0{imm};
wgmma.commit_group.sync.aligned;
wgmma.wait_group.sync.aligned 0;
mul.wide.u32 %rd5, %r1, {4 * (N // 2)};
add.s64 %rd6, %rd2, %rd5;
{stores}
ret;
}}
"""


def _values(t: str, shape, rng) -> np.ndarray:
    if t in ("s8", "u8"):
        lo, hi = (-8, 8) if t == "s8" else (0, 16)
        return rng.integers(lo, hi, shape).astype(TYPES[t])
    # small integers and halves: exact in every float type here, products exact in f32
    return (rng.integers(-6, 7, shape) / 2.0).astype(TYPES[t])


def _run(at: str, bt: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    k = 32 // np.dtype(TYPES[at]).itemsize
    A, B = _values(at, (64, k), rng), _values(bt, (N, k), rng)
    img = np.concatenate([_image(64, A), _image(N, B)])
    gmem = GlobalMemory()
    src = gmem.add("img", img)
    out = gmem.add("out", np.zeros(128 * (N // 2), np.uint32))
    res = run_launch(_ptx(at, bt), Launch(grid=(1, 1, 1), threads=128, params={
        "img": src.to_bytes(8, "little"), "out": out.to_bytes(8, "little")}, arch="sm_90a"),
        gmem, filename="wg.ptx")
    raw = gmem.buffer("out").view(np.uint32).reshape(128, N // 2)
    got = np.zeros((64, N))
    vals = raw.view(np.int32 if at in ("s8", "u8") else np.float32).astype(np.float64)
    for lane in range(128):  # accumulator fragment: PTX ISA 9.1 §9.7.15.5.1, m64nNk* D
        w, g, t = lane // 32, lane % 32 // 4, lane % 4
        for q in range(N // 2):
            row = 16 * w + g + (8 if q % 4 >= 2 else 0)
            col = 8 * (q // 4) + 2 * t + (q % 2)
            got[row, col] = vals[lane, q]
    want = A.astype(np.float64) @ B.astype(np.float64).T
    return res, got, want


@pytest.mark.parametrize("at,bt", [("f16", "f16"), ("bf16", "bf16"), ("tf32", "tf32"),
                                   ("e4m3", "e4m3"), ("e5m2", "e5m2"), ("e5m2", "e4m3"),
                                   ("e4m3", "e5m2"), ("s8", "s8"), ("u8", "u8"), ("s8", "u8"),
                                   ("u8", "s8")])
def test_wgmma_types_match_numpy(at, bt):
    res, got, want = _run(at, bt)
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("at,bt", [("f16", "bf16"), ("bf16", "f16"), ("s8", "e4m3")])
def test_mixed_kinds_are_unsupported(at, bt):
    with pytest.raises(EmulationUnsupported):
        _run(at, bt)


def test_an_8_bit_register_a_is_unsupported_not_wrong():
    gmem = GlobalMemory()
    src = gmem.add("img", np.zeros(2560, np.uint8))
    out = gmem.add("out", np.zeros(128 * (N // 2), np.uint32))
    with pytest.raises(EmulationUnsupported, match="register"):
        run_launch(_ptx("e4m3", "e4m3", a_regs=True), Launch(
            grid=(1, 1, 1), threads=128, params={"img": src.to_bytes(8, "little"),
                                                 "out": out.to_bytes(8, "little")},
            arch="sm_90a"), gmem, filename="wg.ptx")


def _two_warpgroups(order: str) -> str:
    """The f16 kernel with 256 threads: warpgroup 1 copies the operands into shared memory,
    ``order`` (its fence and the hand-off barrier), warpgroup 0 runs the wgmma."""
    ptx = _ptx("f16", "f16").replace(".reqntid 128, 1, 1", ".reqntid 256, 1, 1")
    ptx = ptx.replace("mov.u32 %r1, %tid.x;", "mov.u32 %r1, %tid.x;\nand.b32 %r1, %r1, 127;\n"
                      "mov.u32 %r15, %tid.x;\nsetp.ge.u32 %p3, %r15, 128;")
    ptx = ptx.replace("st.shared.v4.u32 [%r8], ", "@%p3 st.shared.v4.u32 [%r8], ")
    ptx = ptx.replace("@%p1 st.shared.v4.u32 [%r8+2048]",
                      "and.pred %p2, %p1, %p3;\n@%p2 st.shared.v4.u32 [%r8+2048]")
    ptx = ptx.replace("fence.proxy.async.shared::cta;\nbar.sync 0;", order)
    return ptx.replace("wgmma.fence.sync.aligned;", "@%p3 bra.uni $L_end;\n"
                       "wgmma.fence.sync.aligned;").replace("ret;", "$L_end:\nret;")


@pytest.mark.parametrize("order,bad", [
    ("fence.proxy.async.shared::cta;\nbar.sync 0;", False),  # writers fence, then hand off
    ("bar.sync 0;\n@%p3 fence.proxy.async.shared::cta;", True),  # writers fence after it
    # the wgmma's warpgroup alone: the writers never fence (issue 18's "proxy fence in another
    # thread than the writer"; ptx_rules AP1/W5: the writing threads fence)
    ("bar.sync 0;\n@!%p3 fence.proxy.async.shared::cta;", True),
    ("bar.sync 0;\nfence.proxy.async.shared::cta;", False),  # both: Triton 3.6's order
])
def test_operand_writers_must_fence_before_the_hand_off(order, bad):
    # the writers' fence after the barrier runs concurrently with the other warpgroup's wgmma:
    # it does not order their writes before the async-proxy read (red team round 8); the
    # issuing warpgroup's own fence after the barrier does (PTX ISA 9.1 §8.9: a proxy fence
    # on the causality path from the write to the read) when the writers fenced theirs too
    rng = np.random.default_rng(0)
    A, B = _values("f16", (64, 16), rng), _values("f16", (N, 16), rng)
    gmem = GlobalMemory()
    src = gmem.add("img", np.concatenate([_image(64, A), _image(N, B)]))
    out = gmem.add("out", np.zeros(256 * (N // 2), np.uint32))
    res = run_launch(_two_warpgroups(order), Launch(grid=(1, 1, 1), threads=256, params={
        "img": src.to_bytes(8, "little"), "out": out.to_bytes(8, "little")}, arch="sm_90a"),
        gmem, filename="wg.ptx")
    hb4 = [f for f in res.findings if f.rule == "HB4"]
    if bad:
        assert hb4 and hb4[0].severity == "error", res.findings
        if "@%p3" in order:  # the writers fenced, after the barrier
            assert "neither that fence" in hb4[0].message, res.findings
    else:
        assert res.status == "ok" and res.findings == [], (res.message, res.findings)


def test_a_wgmma_without_one_warp_of_its_warpgroup_is_hb3():
    # red team round 8: warp 3 branches around the wgmma (PTX ISA 9.1 §9.7.15.5: every thread
    # of the warpgroup executes the same wgmma.mma_async); before, no finding
    ptx = _ptx("f16", "f16").replace(
        "wgmma.fence.sync.aligned;",
        "shr.u32 %r12, %r1, 5;\nsetp.eq.u32 %p2, %r12, 3;\n@%p2 bra.uni $L_skip;\n"
        "wgmma.fence.sync.aligned;").replace(
        "wgmma.wait_group.sync.aligned 0;", "wgmma.wait_group.sync.aligned 0;\n$L_skip:")
    rng = np.random.default_rng(0)
    A, B = _values("f16", (64, 16), rng), _values("f16", (N, 16), rng)
    gmem = GlobalMemory()
    src = gmem.add("img", np.concatenate([_image(64, A), _image(N, B)]))
    out = gmem.add("out", np.zeros(128 * (N // 2), np.uint32))
    res = run_launch(ptx, Launch(grid=(1, 1, 1), threads=128, params={
        "img": src.to_bytes(8, "little"), "out": out.to_bytes(8, "little")}, arch="sm_90a"),
        gmem, filename="wg.ptx")
    hb3 = [f for f in res.findings if f.rule == "HB3"]
    assert hb3 and hb3[0].severity == "error" and "warp(s) 3" in hb3[0].message, res.findings
