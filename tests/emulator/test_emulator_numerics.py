"""Instruction semantics of the emulator against independent Python/numpy models (PTX ISA 9.1
§9.7): integer wrap and sign rules, bit ops, conversions with rounding, shuffles and votes."""

from __future__ import annotations

import numpy as np

from emulator import GlobalMemory, Launch, run_launch

K = 21  # results per thread

HEAD = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
.reqntid 32
{
.reg .pred %p<8>;
.reg .b16 %h<8>;
.reg .b32 %r<64>;
.reg .f32 %f<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd2, %r1, 84;
add.s64 %rd3, %rd1, %rd2;
sub.s32 %r2, %r1, 16;              // signed value -16..15
cvt.rn.f32.s32 %f1, %r2;
mul.f32 %f2, %f1, 0f3E4CCCCD;      // x * 0.2
"""

BODY = [
    # 0: arithmetic shift right of a negative value
    "shr.s32 %r10, %r2, 2;",
    # 1: logical shift right of the same bits
    "shr.u32 %r10, %r2, 2;",
    # 2: signed division truncates toward zero
    "div.s32 %r10, %r2, 3;",
    # 3: signed remainder has the dividend's sign
    "rem.s32 %r10, %r2, 3;",
    # 4: mul.hi.s32
    "mul.hi.s32 %r10, %r2, 1000000007;",
    # 5: bfe.s32 (sign-extended field)
    "bfe.s32 %r10, %r2, 1, 3;",
    # 6: bfe.u32
    "bfe.u32 %r10, %r2, 1, 3;",
    # 7: prmt byte permute
    "prmt.b32 %r10, %r2, 0x11223344, 0x7531;",
    # 8: cvt.rzi.s32.f32 of x*0.2
    "cvt.rzi.s32.f32 %r10, %f2;",
    # 9: cvt.rni.s32.f32 (round half to even)
    "cvt.rni.s32.f32 %r10, %f2;",
    # 10: cvt.rn.f16.f32 then back to f32, bits of the f32
    "cvt.rn.f16.f32 %h1, %f2; cvt.f32.f16 %f3, %h1; mov.b32 %r10, %f3;",
    # 11: shfl.sync.up by 3 (lanes < 3 keep their own value)
    "shfl.sync.up.b32 %r10, %r1, 3, 0, -1;",
    # 12: shfl.sync.down by 5 with clamp 31
    "shfl.sync.down.b32 %r10, %r1, 5, 31, -1;",
    # 13: shfl.sync.idx from lane (tid*7)%32
    "mul.lo.u32 %r11, %r1, 7; and.b32 %r11, %r11, 31; shfl.sync.idx.b32 %r10, %r1, %r11, 31, -1;",
    # 14: vote.ballot of (tid % 3 == 0)
    "rem.u32 %r11, %r1, 3; setp.eq.u32 %p1, %r11, 0; vote.sync.ballot.b32 %r10, %p1, -1;",
    # 15: fma.rn.f32 bits
    "fma.rn.f32 %f4, %f2, %f1, 0f3F800000; mov.b32 %r10, %f4;",
    # 16: three-input max.f32 (PTX 8.8) with a -inf input
    "max.f32 %f5, 0fFF800000, %f2, %f1; mov.b32 %r10, %f5;",
    # 17-20: funnel shifts of (0x9abcdef0 : tid - 16) by tid (wrap: tid % 32) / tid + 20 (clamp)
    "shf.l.wrap.b32 %r10, %r2, 0x9abcdef0, %r1;",
    "shf.r.wrap.b32 %r10, %r2, 0x9abcdef0, %r1;",
    "add.u32 %r11, %r1, 20; shf.l.clamp.b32 %r10, %r2, 0x9abcdef0, %r11;",
    "add.u32 %r11, %r1, 20; shf.r.clamp.b32 %r10, %r2, 0x9abcdef0, %r11;",
]


def _expected(t: int) -> list[int]:
    x = t - 16
    u = x & 0xFFFFFFFF
    f2 = np.float32(np.float32(x) * np.float32(0.2))
    out = [
        (x >> 2) & 0xFFFFFFFF,
        u >> 2,
        int(x / 3) & 0xFFFFFFFF,
        (x - int(x / 3) * 3) & 0xFFFFFFFF,
        ((x * 1000000007) >> 32) & 0xFFFFFFFF,
    ]
    field = (u >> 1) & 0b111
    out.append((field - 8 if field & 0b100 else field) & 0xFFFFFFFF)
    out.append(field)
    src = u | (0x11223344 << 32)
    sel = 0x7531
    val = 0
    for i in range(4):
        s = (sel >> (4 * i)) & 0xF
        b = (src >> (8 * (s & 7))) & 0xFF
        if s & 8:
            b = 0xFF if b & 0x80 else 0
        val |= b << (8 * i)
    out.append(val)
    out.append(int(np.trunc(f2)) & 0xFFFFFFFF)
    out.append(int(np.rint(f2)) & 0xFFFFFFFF)
    out.append(int(np.array(np.float16(f2), np.float32).view(np.uint32)))
    out.append(t - 3 if t >= 3 else t)
    out.append(t + 5 if t + 5 <= 31 else t)
    out.append((t * 7) % 32)
    out.append(sum(1 << i for i in range(32) if i % 3 == 0))
    fma = np.float32(np.float64(f2) * np.float64(np.float32(x)) + 1.0)
    out.append(int(np.array(fma, np.float32).view(np.uint32)))
    out.append(int(np.array(max(f2, np.float32(x)), np.float32).view(np.uint32)))
    pair = (0x9abcdef0 << 32) | u  # b:a, a the low word
    for n, clamp in ((t, False), (t, False), (t + 20, True), (t + 20, True)):
        k = min(n, 32) if clamp else n % 32
        if len(out) % 2:  # .l: the high word of the 64-bit left shift
            out.append(((pair << k) >> 32) & 0xFFFFFFFF)
        else:  # .r: the low word of the right shift
            out.append((pair >> k) & 0xFFFFFFFF)
    return out


def test_instruction_semantics_match_independent_models():
    lines = [HEAD]
    for i, code in enumerate(BODY):
        lines.append(code)
        lines.append(f"st.global.u32 [%rd3+{4 * i}], %r10;")
    lines.append("ret;\n}\n")
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(32 * K, np.uint32))
    res = run_launch("\n".join(lines), Launch(grid=(1, 1, 1), threads=32,
                                              params={"out": out.to_bytes(8, "little")}),
                     gmem, filename="num.ptx")
    assert res.status == "ok", res.message
    got = gmem.buffer("out").view(np.uint32).reshape(32, K)
    for t in range(32):
        exp = _expected(t)
        for i in range(K):
            assert int(got[t, i]) == exp[i], f"thread {t}, case {i} ({BODY[i]}): " \
                                             f"{int(got[t, i]):#x} != {exp[i]:#x}"
