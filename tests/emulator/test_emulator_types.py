"""Instruction types as the emulator decodes them: mixed-precision ``add/sub/fma .f32.f16/.bf16``
(sm_100, PTX ISA 9.1 §9.7.4) computed exactly (operands converted exactly to f32, one rounding),
the packed 16-bit integer forms, and every type combination the emulator does not model reported
as "unsupported" with file:line:col, never computed silently wrong."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from emulator import EmulationUnsupported, GlobalMemory, Launch, run_launch

HEAD = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 inp)
.reqntid 32
{
.reg .b16 %h<8>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
ld.param.u64 %rd4, [inp];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
mul.wide.u32 %rd5, %r1, 8;
add.s64 %rd6, %rd4, %rd5;
ld.global.b16 %h1, [%rd6];
ld.global.b16 %h2, [%rd6+2];
ld.global.b32 %r2, [%rd6+4];
"""
TAIL = "st.global.b32 [%rd3], %r10;\nret;\n}\n"


def _run(body: str, h1: np.ndarray, h2: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Run ``body`` (reads %h1, %h2 as 16-bit bits, %r2 as f32 bits; writes %r10) on 32 lanes."""
    inp = np.zeros((32, 4), np.uint16)
    inp[:, 0], inp[:, 1] = h1, h2
    inp[:, 2:4] = c.astype(np.float32).view(np.uint16).reshape(32, 2)
    g = GlobalMemory()
    out = g.add("out", np.zeros(32, np.uint32))
    ia = g.add("inp", inp)
    launch = Launch(grid=(1, 1, 1), threads=32, params={"out": out.to_bytes(8, "little"),
                                                        "inp": ia.to_bytes(8, "little")})
    res = run_launch(HEAD + body + "\n" + TAIL, launch, g, filename="t.ptx")
    assert res.status == "ok", res.message
    return g.buffer("out").view(np.float32).copy()


def _exact_f32(x: Fraction, mode: str) -> np.float32:
    """Round the exact rational ``x`` to float32 with PTX mode rn/rz/rm/rp (reference model)."""
    lo = np.float32(float(x))  # within one ulp of x
    cands = sorted({np.nextafter(lo, np.float32(-np.inf)), lo,
                    np.nextafter(lo, np.float32(np.inf))}, key=lambda v: Fraction(float(v)))
    below = max(v for v in cands if Fraction(float(v)) <= x)
    above = min(v for v in cands if Fraction(float(v)) >= x)
    if below == above:
        return below
    if mode == "rz":
        return below if x > 0 else above
    if mode == "rm":
        return below
    if mode == "rp":
        return above
    db, da = x - Fraction(float(below)), Fraction(float(above)) - x
    if db != da:
        return below if db < da else above
    return below if (below.view(np.uint32) & 1) == 0 else above


RNG = np.random.default_rng(7)


def _operands(el):
    # wide exponent spread so that a*b + c needs more than 53 bits, plus exact-tie cases
    a = (RNG.standard_normal(32) * np.exp2(RNG.integers(-10, 10, 32))).astype(el)
    b = (RNG.standard_normal(32) * np.exp2(RNG.integers(-10, 10, 32))).astype(el)
    c = (RNG.standard_normal(32) * np.exp2(RNG.integers(-40, 40, 32))).astype(np.float32)
    return a, b, c


@pytest.mark.parametrize("at,el", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
@pytest.mark.parametrize("op", ["add", "sub", "fma"])
@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_mixed_precision_matches_exact_rounding(op, at, el, mode):
    a, b, c = _operands(el)
    if op == "fma":
        body = f"fma.{mode}.f32.{at} %r10, %h1, %h2, %r2;"
    else:
        body = f"{op}.{mode}.f32.{at} %r10, %h1, %r2;"
    got = _run(body, a.view(np.uint16), b.view(np.uint16), c)
    for i in range(32):
        fa, fb, fc = Fraction(float(a[i])), Fraction(float(b[i])), Fraction(float(c[i]))
        exact = {"add": fa + fc, "sub": fa - fc, "fma": fa * fb + fc}[op]
        want = _exact_f32(exact, mode)
        assert got[i].view(np.uint32) == want.view(np.uint32), (i, op, a[i], b[i], c[i], got[i],
                                                                want)


def test_mixed_precision_sat_clamps():
    a = np.full(32, 3.0, np.float16)
    c = np.linspace(-5, 1, 32).astype(np.float32)
    got = _run("add.rn.sat.f32.f16 %r10, %h1, %r2;", a.view(np.uint16), a.view(np.uint16), c)
    assert np.array_equal(got, np.clip(3.0 + c.astype(np.float64), 0, 1).astype(np.float32))


def test_f32_fma_is_one_rounding():
    # a*b + c where the f64 sum of the exact product would double-round: compare with the exact
    # rational result for many random f32 triples
    body = ("mov.b32 %r3, {%h1, %h2};\n"   # a: f32 from the two halves
            "fma.rn.f32 %r10, %r3, %r3, %r2;")
    a16 = RNG.integers(0, 2**16, 32, dtype=np.uint16)
    b16 = (RNG.integers(0x3000, 0x4400, 32)).astype(np.uint16)
    c = (RNG.standard_normal(32) * np.exp2(RNG.integers(-60, 60, 32))).astype(np.float32)
    got = _run(body, a16, b16, c)
    a = (a16.astype(np.uint32) | (b16.astype(np.uint32) << 16)).view(np.float32)
    for i in range(32):
        fa = Fraction(float(a[i]))
        want = _exact_f32(fa * fa + Fraction(float(c[i])), "rn")
        assert got[i].view(np.uint32) == want.view(np.uint32), i


def test_packed_s16x2_add_and_min_relu():
    h1 = np.array([0x7FFF, 0x8000, 5, 0xFFFF] * 8, np.uint16)
    h2 = np.array([1, 0xFFFF, 0xFFF0, 2] * 8, np.uint16)
    c = np.zeros(32, np.float32)
    got = _run("mov.b32 %r3, {%h1, %h2}; add.s16x2 %r10, %r3, %r3;", h1, h2, c).view(np.uint32)
    lo = (h1.astype(np.int64) * 2) & 0xFFFF
    hi = (h2.astype(np.int64) * 2) & 0xFFFF
    assert np.array_equal(got, (lo | (hi << 16)).astype(np.uint32))
    got = _run("mov.b32 %r3, {%h1, %h2}; mov.b32 %r4, {%h2, %h1}; "
               "min.relu.s16x2 %r10, %r3, %r4;", h1, h2, c).view(np.uint32)
    s1, s2 = h1.view(np.int16).astype(np.int64), h2.view(np.int16).astype(np.int64)
    m = np.maximum(np.minimum(s1, s2), 0)
    assert np.array_equal(got, (m | (m << 16)).astype(np.uint32))


@pytest.mark.parametrize("body,what", [
    ("mul.rn.f32.f16 %r10, %h1, %r2;", "type combination f32.f16"),      # no such PTX form
    ("add.f16.f32 %h3, %h1, %r2; mov.b32 %r10, 0;", "type combination f16.f32"),
    ("add.rn.ftz.f32.f16 %r10, %h1, %r2;", "mixed-precision form"),       # no .ftz form
    ("add.rn.f32.e4m3 %r10, %h1, %r2;", "type combination f32.e4m3"),
    ("add.u16x4 %r10, %r2, %r2;", "type .u16x4 is not modelled"),
])
def test_unknown_type_combination_is_unsupported_with_location(body, what):
    g = GlobalMemory()
    out = g.add("out", np.zeros(32, np.uint32))
    ia = g.add("inp", np.zeros(64, np.uint32))
    launch = Launch(grid=(1, 1, 1), threads=32, params={"out": out.to_bytes(8, "little"),
                                                        "inp": ia.to_bytes(8, "little")})
    with pytest.raises(EmulationUnsupported) as ei:
        run_launch(HEAD + body + "\n" + TAIL, launch, g, filename="t.ptx")
    msg = str(ei.value)
    assert what in msg and "t.ptx:20:" in msg, msg
