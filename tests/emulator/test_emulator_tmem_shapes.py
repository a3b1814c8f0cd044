"""Every ``tcgen05.ld`` / ``tcgen05.st`` shape in the emulator: ``32x32b``, ``16x64b``,
``16x128b``, ``16x256b``, ``16x32bx2``, with ``.num`` repetitions and 16-bit packing (before
2026-12-04 only ``32x32b`` and ``16x32bx2`` ran, the others said "unsupported", and only
``32x32b`` had happens-before records).

The expected cell of each (thread, register) is computed here from CUTLASS's CuTe layouts of
the ``SM100_TMEM_LOAD_*`` copy traits (``copy_traits_sm100.hpp``: a thread layout and a value
layout, in bits, over a (bits per data-path lane) x 16 or 32 lanes image), evaluated as CuTe
evaluates a layout - independently of the closed forms in :func:`emulator.ops.tmem_fragment`.
"""

from __future__ import annotations

import numpy as np
import pytest

from emulator import GlobalMemory, Launch, run_launch


def _colex(i: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for s in shape:
        out.append(i % s)
        i //= s
    return out


def _cute(i: int, shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    return sum(c * d for c, d in zip(_colex(i, shape), stride))


def _traits(shape: str, n: int):
    """(thread shape, thread stride, value shape, value stride, bits per lane, lanes) of
    CUTLASS's ``SM100_TMEM_LOAD_<shape> <n>x`` DstLayout (thread, value bit) -> image bit."""
    if shape == "32x32b":
        return (32,), (32 * n,), (32 * n,), (1,), 32 * n, 32
    if shape == "16x64b":  # ((2,2,8),(32,N)) : ((512N,32,64N),(1,64))
        return (2, 2, 8), (512 * n, 32, 64 * n), (32, n), (1, 64), 64 * n, 16
    if shape == "16x128b":  # ((4,8),(32,2,N)) : ((32,128N),(1,1024N,128))
        return (4, 8), (32, 128 * n), (32, 2, n), (1, 1024 * n, 128), 128 * n, 16
    if shape == "16x256b":  # ((4,8),(64,2,N)) : ((64,256N),(1,2048N,256))
        return (4, 8), (64, 256 * n), (64, 2, n), (1, 2048 * n, 256), 256 * n, 16
    if shape == "16x32bx2":  # ((16,2),32N) : ((64N,32N),1), the second half at column N
        return (16, 2), (64 * n, 32 * n), (32 * n,), (1,), 64 * n, 16
    raise ValueError(shape)


REGS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}


def expected_cells(shape: str, n: int, pack: bool) -> dict[tuple[int, int], list]:
    """{(thread, register): [(lane, column), ...]} (two columns, low half first, if packed)."""
    ts, td, vs, vd, bits, _ = _traits(shape, n)
    out = {}
    for t in range(32):
        for r in range(n * REGS[shape]):
            idx = _cute(t, ts, td) + _cute(32 * r, vs, vd)
            lane, col = idx // bits, (idx % bits) // 32
            out[t, r] = [(lane, 2 * col), (lane, 2 * col + 1)] if pack else [(lane, col)]
    return out


# warp 0 allocates 128 columns; every warp w fills its slab with 32x32b stores of
# (lane << 8 | column) at columns 0..NC-1 (both in the low 16 bits, for the packed loads), then does the tested access at lane offset
# 32 (w % 4) + {loff}, column {coff}; the registers (after a 32x32b load of the whole slab
# for the store test) go to out
HEAD = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 pout)
.reqntid 128, 1, 1
{{
.reg .pred %p<4>;
.reg .b32 %r<32>;
.reg .b32 %v<130>;
.reg .b64 %rd<8>;
.shared .align 4 .b32 tslot;
ld.param.u64 %rd1, [pout];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
and.b32 %r3, %r1, 31;
mov.u32 %r9, tslot;
setp.eq.u32 %p1, %r2, 0;
@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 128;
@%p1 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
ld.shared.b32 %r10, [%r9];
and.b32 %r11, %r2, 3;
shl.b32 %r11, %r11, 21;
add.u32 %r12, %r10, %r11;
shr.u32 %r6, %r11, 16;
add.u32 %r6, %r6, %r3;
shl.b32 %r6, %r6, 8;
"""
TAIL = """
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, 128;
ret;
}}
"""
NC = 64  # columns the image covers


def _fill(wait: bool = True) -> str:
    """32x32b.x64 store of (lane << 8 | column) into columns 0..63 of the warp's slab."""
    lines = [f"or.b32 %v{j}, %r6, {j};" for j in range(NC)]
    regs = ", ".join(f"%v{j}" for j in range(NC))
    lines.append(f"tcgen05.st.sync.aligned.32x32b.x64.b32 [%r12], {{{regs}}};")
    if wait:
        lines.append("tcgen05.wait::st.sync.aligned;")
    return "\n".join(lines) + "\n"


def _store_out(nregs: int) -> str:
    lines = [f"mul.wide.u32 %rd3, %r1, {4 * nregs};", "add.s64 %rd4, %rd1, %rd3;"]
    lines += [f"st.global.u32 [%rd4+{4 * j}], %v{j};" for j in range(nregs)]
    return "\n".join(lines) + "\n"


def _mods(shape: str, n: int, pack: str) -> str:
    return f"{shape}.x{n}" + (f".{pack}" if pack else "")


def _run(body: str, nout: int):
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(128 * nout, np.uint32))
    res = run_launch(HEAD.format() + body + TAIL.format(), Launch(
        grid=(1, 1, 1), threads=128, params={"pout": out.to_bytes(8, "little")},
        arch="sm_100a"), gmem, filename="shapes.ptx")
    return res, gmem.buffer("out").view(np.uint32).reshape(128, nout)


CASES = [(s, n, p) for s in ("32x32b", "16x64b", "16x128b", "16x256b", "16x32bx2")
         for n in (1, 2, 4) for p in (False, True) if not (p and s == "16x32bx2")]


def _ids(c):
    return f"{c[0]}.x{c[1]}" + (".pack" if c[2] else "")


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_load_reads_the_cells_of_the_layout(case):
    shape, n, pack = case
    nregs = n * REGS[shape]
    # the upper half-slab for 16-lane shapes; a packed access spans twice the columns
    loff, coff = (0 if shape == "32x32b" else 16), (0 if pack else 8)
    regs = ", ".join(f"%v{j}" for j in range(nregs))
    half = f", {n}" if shape == "16x32bx2" else ""
    body = _fill() + (
        f"add.u32 %r13, %r12, {(loff << 16) + coff};\n"
        f"tcgen05.ld.sync.aligned.{_mods(shape, n, 'pack::16b' if pack else '')}.b32 "
        f"{{{regs}}}, [%r13]{half};\n"
        "tcgen05.wait::ld.sync.aligned;\n") + _store_out(nregs)
    res, out = _run(body, nregs)
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    cells = expected_cells(shape, n, pack)
    for tid in range(128):
        slab = 32 * ((tid // 32) % 4)
        for r in range(nregs):
            want = [((slab + loff + ln) << 8) | (coff + c) for ln, c in cells[tid % 32, r]]
            got = int(out[tid, r])
            if pack:
                assert got == (want[0] & 0xFFFF) | ((want[1] & 0xFFFF) << 16), (tid, r)
            else:
                assert got == want[0], (tid, r, hex(got), hex(want[0]))


@pytest.mark.parametrize("case", [c for c in CASES if c[1] == 2], ids=_ids)
def test_store_writes_the_cells_of_the_layout(case):
    shape, n, pack = case
    nregs = n * REGS[shape]
    half = f", {n}" if shape == "16x32bx2" else ""
    # zero the image, store ((tid + 1) << 16 | register + 1) in the tested shape at lane
    # offset 0, column 4, then read the whole slab back with 32x32b
    lines = [f"mov.u32 %v{j}, 0;" for j in range(NC)]
    regs = ", ".join(f"%v{j}" for j in range(NC))
    lines.append(f"tcgen05.st.sync.aligned.32x32b.x64.b32 [%r12], {{{regs}}};")
    lines.append("tcgen05.wait::st.sync.aligned;")
    lines += ["shl.b32 %r14, %r1, 16;", "add.u32 %r14, %r14, 65536;"]
    lines += [f"or.b32 %v{j}, %r14, {j + 1};" for j in range(nregs)]
    sregs = ", ".join(f"%v{j}" for j in range(nregs))
    lines.append(f"tcgen05.st.sync.aligned.{_mods(shape, n, 'unpack::16b' if pack else '')}.b32 "
                 f"[%r12+4]{half}, {{{sregs}}};")
    lines.append("tcgen05.wait::st.sync.aligned;")
    lines.append(f"tcgen05.ld.sync.aligned.32x32b.x64.b32 {{{regs}}}, [%r12];")
    lines.append("tcgen05.wait::ld.sync.aligned;")
    res, out = _run("\n".join(lines) + "\n" + _store_out(NC), NC)
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    want = np.zeros((128, NC), np.int64)
    for w in range(4):  # every warp stores the same pattern into its own slab
        base = 32 * w
        for (t, r), cl in expected_cells(shape, n, pack).items():
            v = ((base + t + 1) << 16) | (r + 1)
            parts = [v & 0xFFFF, v >> 16] if pack else [v]
            for (ln, c), x in zip(cl, parts):
                want[base + ln, 4 + c] = x
    assert (out.astype(np.int64) == want).all(), np.argwhere(out != want)[:4]


def test_every_cell_of_each_layout_is_held_once():
    # the layouts are bijections between (thread, register) and the image's cells
    for shape, per in REGS.items():
        for n in (1, 2, 4):
            cells = [c for v in expected_cells(shape, n, False).values() for c in v]
            assert len(set(cells)) == len(cells) == 32 * n * per, (shape, n)


# ---- happens-before on the new shapes -------------------------------------------------------

def test_load_of_another_lanes_store_before_its_wait_is_a_race():
    # 16x256b thread t reads lanes t//4 (+8): cells other threads of the warp stored; with no
    # tcgen05.wait::st after the store, their stores are not complete (PTX ISA 9.1
    # tcgen05.wait: tcgen05.st is asynchronous)
    regs = ", ".join(f"%v{j}" for j in range(4))
    body = _fill(wait=False) + (
        f"tcgen05.ld.sync.aligned.16x256b.x1.b32 {{{regs}}}, [%r12];\n"
        "tcgen05.wait::ld.sync.aligned;\n") + _store_out(4)
    res, _ = _run(body, 4)
    assert [f.rule for f in res.findings] == ["HB1"], (res.message, res.findings)
    assert "wait::st" in res.findings[0].message


def test_load_after_the_warps_wait_is_ordered():
    # the same with the warp-collective tcgen05.wait::st.sync.aligned between: every lane's
    # store is complete before any lane of the warp goes on
    regs = ", ".join(f"%v{j}" for j in range(4))
    body = _fill(wait=True) + (
        f"tcgen05.ld.sync.aligned.16x256b.x1.b32 {{{regs}}}, [%r12];\n"
        "tcgen05.wait::ld.sync.aligned;\n") + _store_out(4)
    res, _ = _run(body, 4)
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)


def test_wrong_register_count_is_unsupported_not_wrong():
    body = _fill() + "tcgen05.ld.sync.aligned.16x256b.x1.b32 {%v0, %v1}, [%r12];\n"
    with pytest.raises(Exception, match="registers"):
        res, _ = _run(body, 2)
        raise AssertionError(res.message)
