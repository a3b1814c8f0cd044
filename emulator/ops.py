"""Instruction semantics (PTX ISA 9.1 §9.7), registered into :data:`emulator.registry._HANDLERS`.

Each handler is ``h(m, ins, pc, exe, active)``: ``exe`` are the lanes that execute (guard
predicate applied), ``active`` the lanes standing at ``pc``. A handler returns ``True`` when it
moved the program counters itself (branches, barriers, blocking waits).
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np

from emulator.registry import WGMMA_UNIT, _Fault, _adapt, _lanes, handler
from emulator import async_copy as _async_copy
from emulator import flags as _flags
from emulator.numerics import NP, UINT, ftz32, round_f64_to, sat01

BF16 = np.dtype(ml_dtypes.bfloat16)
_PACKED = {"f16x2": np.dtype(np.float16), "bf16x2": BF16, "f32x2": np.dtype(np.float32)}


#: a modifier spelled like a PTX type (``.s16x2``, ``.f8x4``, ``.b128``, ``.e2m1``): a type the
#: emulator does not model, never a modifier to ignore
_TYPE_LIKE = re.compile(r"^(?:[bsuf](?:8|16|32|64|128)(?:x\d+)?|bf16(?:x\d+)?|tf32|"
                        r"e\dm\d(?:x\d+)?|ue\dm\d(?:x\d+)?)$")


def _typ(m, pc) -> str:
    """The one instruction type of the opcode at ``pc`` (``add.f32`` -> ``f32``).

    Raises:
        EmulationUnsupported: the opcode has no type, a type the emulator does not model
            (named), or more than one type (a type combination the handler does not model;
            handlers of multi-type opcodes - cvt, mma, mixed-precision add/sub/fma - decode
            their types themselves), with file:line:col.
    """
    t = m._typ_memo.get(pc)
    if t is not None:  # decoded at an earlier execution of this instruction
        return t
    mods, types = m._types[pc]
    opc = m.prog.insts[pc].opcode
    odd = [x for x in mods if _TYPE_LIKE.match(x)]
    if odd:
        raise m.prog.unsupported(pc, f"'{opc}' (type .{odd[0]} is not modelled)")
    if not types:
        raise m.prog.unsupported(pc, f"'{opc}' without a type")
    if len(types) != 1:
        raise m.prog.unsupported(pc, f"'{opc}' (type combination "
                                     f"{'.'.join(types)} is not modelled)")
    m._typ_memo[pc] = types[0]
    return types[0]


def _mods(m, pc) -> list[str]:
    return m._types[pc][0]


def _rnd(mods: list[str]) -> str:
    for r in ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi"):
        if r in mods:
            return r
    return "rn"


# ----------------------------------------------------------------------------- float helpers
def _fin(m, op, t, pc):
    """Float operand as float64 array (N,) or (N, 2) for packed types."""
    if t in _PACKED:
        raw = m.read(op, t, pc)
        el = _PACKED[t]
        arr = np.atleast_1d(raw).view(el).reshape(-1, 2) if raw.ndim else \
            np.array(raw).reshape(1).view(el).reshape(1, 2)
        return arr.astype(np.float64)
    return m.read(op, t, pc).astype(np.float64)


def _fout(x64: np.ndarray, t: str, mods: list[str]) -> np.ndarray:
    """Round float64 results to type ``t`` (packing pairs for packed types) -> bits array."""
    if t in _PACKED:
        el = _PACKED[t]
        r = round_f64_to(x64, el, _rnd(mods))
        if "sat" in mods:
            r = sat01(r)
        if "relu" in mods:
            r = np.where(r < 0, np.zeros_like(r), r)
        r = np.ascontiguousarray(np.broadcast_to(r, np.broadcast_shapes(r.shape, (1, 2))))
        return r.reshape(-1).view(UINT[2 * el.itemsize])
    dt = NP[t]
    r = round_f64_to(x64, dt, _rnd(mods))
    if "ftz" in mods and dt == np.float32:
        r = ftz32(r)
    if "sat" in mods:
        r = sat01(r)
    if "relu" in mods:
        r = np.where(r < 0, np.zeros_like(r), r)
    return r


def _ftz_in(x, t, mods):
    if "ftz" in mods and t in ("f32", "f32x2"):
        tiny = np.abs(x) < 1.1754943508222875e-38
        return np.where(tiny, np.copysign(0.0, x), x)
    return x


def _is_float(t: str) -> bool:
    return t in ("f16", "bf16", "f32", "f64", "f16x2", "bf16x2", "f32x2", "tf32")


# ----------------------------------------------------------------------------- int helpers
_SIGNED = {"s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64}


def _wide(t: str) -> str:
    return {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64", "b16": "u32",
            "b32": "u64"}[t]


# ============================================================================= data movement
@handler("mov")
def _mov(m, ins, pc, exe, active):
    t = _typ(m, pc)
    d, s = ins.operands[0], ins.operands[1]
    if d.kind == "vector":  # unpack
        raw = m.read(s, t, pc)
        n = len(d.elems)
        w = NP[t].itemsize // n
        parts = np.ascontiguousarray(_lanes(raw, m.N)).view(UINT[w]).reshape(-1, n)
        for i, e in enumerate(d.elems):
            m.write(e, parts[:, i], exe, pc)
        return
    if s.kind == "vector":  # pack
        n = len(s.elems)
        w = NP[t].itemsize // n
        cols = [_lanes(_adapt(np.atleast_1d(m.read(e, "b%d" % (8 * w), pc)), UINT[w]), m.N)
                for e in s.elems]
        packed = np.ascontiguousarray(np.stack(cols, axis=1)).view(UINT[w * n]).reshape(-1)
        m.write(d, packed, exe, pc)
        return
    m.write(d, m.read(s, t, pc), exe, pc)


def _ld_shape(m, pc):
    mods, types = m._types[pc]
    t = _typ(m, pc)  # a type the emulator does not model (.b128) is unsupported, not a crash
    vec = 1
    space = "generic"
    for x in mods:
        if x in ("v2", "v4", "v8"):
            vec = int(x[1:])
        elif x in ("global", "shared", "local", "param", "const", "shared::cta",
                   "shared::cluster"):
            space = x
    return space, vec, t


@handler("ld", "ldu")
def _ld(m, ins, pc, exe, active):
    space, vec, t = _ld_shape(m, pc)
    a = ins.operands[1]
    es = NP[t].itemsize if t != "b128" else 16
    if space == "param":
        name = a.base.name if a.base is not None else None
        if name not in m.launch.params:
            raise m.prog.unsupported(pc, f"ld.param of '{a.text}'")
        raw = m.launch.params[name]
        off = int(a.value or 0)
        blob = np.frombuffer(raw[off:off + es * vec].ljust(es * vec, b"\0"), dtype=UINT[es])
        vals = [np.full(m.N, blob[i], dtype=UINT[es]) for i in range(vec)]
    else:
        addr = m.address(a, pc)
        sync = _flags.sync_of(m._types[pc][0], atomic=False)
        got = m.mem_access(space, addr, es * vec, exe, pc, kind=_strength(m, pc), sync=sync)
        lanes = np.flatnonzero(exe)
        if sync is not None and space != "local":
            spin = m.spin_check(pc, exe, addr)
            if spin.any():  # they load again after the next write (Machine.spin_check)
                m.pc[active & ~spin] = pc + 1
                _ld_write(m, ins, pc, exe & ~spin, t, es, lanes, got, vec)
                return True
        _ld_write(m, ins, pc, exe, t, es, lanes, got, vec)
        return None
    _ld_dests(m, ins, pc, exe, t, es, vals)
    return None


def _ld_write(m, ins, pc, exe, t, es, lanes, got, vec) -> None:
    """Write the (k, es * vec) bytes ``got`` that lanes ``lanes`` loaded into the destination
    of the ``ld`` at ``pc``, for the lanes ``exe``."""
    words = np.ascontiguousarray(got).view(UINT[es]).reshape(-1, vec)
    vals = []
    for i in range(vec):
        full = np.zeros(m.N, dtype=UINT[es])
        full[lanes] = words[:, i]
        vals.append(full)
    _ld_dests(m, ins, pc, exe, t, es, vals)


def _ld_dests(m, ins, pc, exe, t, es, vals) -> None:
    d = ins.operands[0]
    dests = d.elems if d.kind == "vector" else (d,)
    for dst, v in zip(dests, vals):
        if t in _SIGNED:  # sign-extend into a wider register
            v = v.view(NP[t])
            info = m._info(dst.name or dst.text, pc) if dst.kind == "reg" else None
            if info is not None and info.storage != np.bool_ and info.storage.itemsize > es:
                v = v.astype({2: np.int16, 4: np.int32, 8: np.int64}[info.storage.itemsize])
        m.write(dst, v, exe, pc)


@handler("st")
def _st(m, ins, pc, exe, active):
    space, vec, t = _ld_shape(m, pc)
    a, s = ins.operands[0], ins.operands[1]
    es = NP[t].itemsize
    srcs = s.elems if s.kind == "vector" else (s,)
    lanes = np.flatnonzero(exe)
    if not lanes.size:
        return
    cols = [_lanes(_adapt(np.atleast_1d(m.read(e, "b%d" % (8 * es), pc)), UINT[es]), m.N)[lanes]
            for e in srcs]
    data = np.ascontiguousarray(np.stack(cols, axis=1)).view(np.uint8).reshape(lanes.size, -1)
    addr = m.address(a, pc)
    m.mem_access(space, addr, es * vec, exe, pc, data=data, kind=_strength(m, pc),
                 sync=_flags.sync_of(m._types[pc][0], atomic=False))
    if "async" in m._types[pc][0] and len(ins.operands) > 2:
        _async_complete_tx(m, ins.operands[2], pc, exe, es * vec)


def _async_complete_tx(m, mop, pc, exe, nbytes: int) -> None:
    """``st.async`` / ``red.async ... .mbarrier::complete_tx::bytes [a], b, [mbar]``: the write
    (done above, into the destination CTA's shared memory) completes ``nbytes`` of
    transactions on ``mbar`` (in the destination CTA), which makes it visible to the threads
    that observe the phase (PTX ISA 9.1 ``st.async``, ``red.async``): the writer's own clock
    joins the phase, the write's own ordering (a weak write releases nothing else)."""
    maddr = _addr_u(m, mop, pc)
    _async_copy.mbar_access(m, exe, maddr, pc, write=False)
    for ln in np.flatnonzero(exe):
        a = int(maddr[ln])
        if m.ntr and ln < m.ntr:
            st = m.mbar_get(int(ln), a, pc)
            col = int(m.vcol[ln])
            st["vc"][col] = max(int(st["vc"][col]), int(m.vc[ln, col]))
        m.mbar_complete_tx(int(ln), a, nbytes, pc)


def _strength(m, pc) -> str:
    """``strong`` (``strong_cta`` at ``.cta`` scope) for a morally strong ld/st (``.relaxed``/
    ``.acquire``/``.release``/``.volatile``, PTX ISA 9.1 §8.7: it does not race with atomics or
    other strong accesses whose scope includes both threads), else ``plain``."""
    mods = m._types[pc][0]
    if not any(x in mods for x in ("relaxed", "acquire", "release", "volatile")):
        return "plain"
    return "strong_cta" if "cta" in mods else "strong"


@handler("cvta")
def _cvta(m, ins, pc, exe, active):
    mods = _mods(m, pc)
    t = _typ(m, pc)
    v = m.read(ins.operands[1], t, pc).astype(np.uint64)
    if "shared" in mods or "shared::cta" in mods:
        v = v - np.uint64(0x7F00_0000_0000) if "to" in mods else v + np.uint64(0x7F00_0000_0000)
    elif "param" in mods:  # the .param state space <-> its generic window (async_copy)
        w = np.uint64(_async_copy.PARAM_WINDOW)
        v = v - w if "to" in mods else v + w
    elif not ({"global", "to"} & set(mods)):
        raise m.prog.unsupported(pc)
    m.write(ins.operands[0], v.astype(NP[t]), exe, pc)


# ============================================================================= arithmetic
def _binary_int(op, a, b, t):
    dt = NP[t]
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "and":
        return a & b
    if op == "or":
        return a | b
    if op == "xor":
        return a ^ b
    if op == "min":
        return np.minimum(a, b)
    if op == "max":
        return np.maximum(a, b)
    if op in ("div", "rem"):
        a64 = a.astype(np.int64) if dt.kind == "i" else a.astype(np.uint64)
        b64 = b.astype(np.int64) if dt.kind == "i" else b.astype(np.uint64)
        z = b64 == 0
        bs = np.where(z, 1, b64).astype(a64.dtype)
        if dt.kind == "i":
            q = np.abs(a64) // np.abs(bs)
            q = np.where((a64 < 0) ^ (bs < 0), -q, q)
            r = a64 - q * bs
        else:
            q = a64 // bs
            r = a64 % bs
        res = q if op == "div" else r
        res = np.where(z, -1 if op == "div" else a64, res)
        return res.astype(dt) if dt.kind == "i" else res.astype(dt)
    raise KeyError(op)


def _shift(op, a, s, t):
    dt = NP[t]
    w = 8 * dt.itemsize
    s = np.asarray(s).astype(np.uint64)
    big = s >= w
    sc = np.minimum(s, w - 1).astype(dt if dt.kind == "u" else UINT[dt.itemsize])
    if op == "shl":
        ua = a.view(UINT[dt.itemsize]) if a.ndim else np.asarray(a).astype(dt).view(
            UINT[dt.itemsize])
        r = (ua << sc.astype(UINT[dt.itemsize]))
        return np.where(big, 0, r).astype(UINT[dt.itemsize]).view(dt)
    if dt.kind == "i":
        return (a >> sc.astype(dt)).astype(dt)  # arithmetic; clamp gives sign fill
    r = a >> sc.astype(dt)
    return np.where(big, 0, r).astype(dt)


@handler("add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "mad", "fma",
         "mul24", "mad24")
def _arith(m, ins, pc, exe, active):
    op = ins.base
    mods, types = m._types[pc]
    ops = ins.operands
    if len(types) == 2 and types[0] == "f32" and types[1] in ("f16", "bf16") and op in (
            "add", "sub", "fma") and not any(_TYPE_LIKE.match(x) for x in mods):
        _mixed(m, ins, pc, exe, op, mods, types[1])
        return
    if op in ("add", "sub", "min", "max") and len(types) == 0 and any(
            x in ("s16x2", "u16x2") for x in mods):
        _int16x2(m, ins, pc, exe, op, mods)
        return
    t = _typ(m, pc)
    if t == "pred":
        a, b = m.read(ops[1], t, pc), m.read(ops[2], t, pc)
        r = {"and": a & b, "or": a | b, "xor": a ^ b}[op]
        m.write(ops[0], r, exe, pc)
        return
    if _is_float(t):
        a = _ftz_in(_fin(m, ops[1], t, pc), t, mods)
        b = _ftz_in(_fin(m, ops[2], t, pc), t, mods) if len(ops) > 2 else None
        if op in ("fma", "mad"):
            c = _ftz_in(_fin(m, ops[3], t, pc), t, mods)
            if t == "f32":
                # the f32 x f32 product is exact in f64; the sum is rounded once to f32
                r32 = _fma_f32_exact(a * b, c, _rnd(mods))
                if "ftz" in mods:
                    r32 = ftz32(r32)
                if "sat" in mods:
                    r32 = sat01(r32)
                m.write(ops[0], r32, exe, pc)
                return
            r = a * b + c
        elif op == "add":
            r = a + b
        elif op == "sub":
            r = a - b
        elif op == "mul":
            r = a * b
        elif op == "div":
            r = a / b
        elif op in ("min", "max"):
            nan = "NaN" in mods
            f = (np.minimum if op == "min" else np.maximum) if nan else (
                np.fmin if op == "min" else np.fmax)
            r = f(a, b)
            for extra in ops[3:]:  # three-input min/max (PTX ISA 8.8+)
                r = f(r, _ftz_in(_fin(m, extra, t, pc), t, mods))
            if "abs" in mods:
                r = np.abs(r)
        else:
            raise m.prog.unsupported(pc)
        if t in ("f32",) and op in ("add", "sub", "mul") and _rnd(mods) == "rn":
            # exact IEEE float32 arithmetic
            a32, b32 = a.astype(np.float32), b.astype(np.float32)
            r32 = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op](a32, b32)
            if "ftz" in mods:
                r32 = ftz32(r32)
            if "sat" in mods:
                r32 = sat01(r32)
            m.write(ops[0], r32, exe, pc)
            return
        m.write(ops[0], _fout(r, t, mods), exe, pc)
        return
    # integer
    if op in ("mul", "mad", "mul24", "mad24"):
        hi, wide = "hi" in mods, "wide" in mods
        a = m.read(ops[1], t, pc)
        b = m.read(ops[2], t, pc)
        if wide:
            wt = _wide(t)
            r = a.astype(NP[wt]) * b.astype(NP[wt])
            if op == "mad":
                r = r + m.read(ops[3], wt, pc)
            m.write(ops[0], r.astype(NP[wt]), exe, pc)
            return
        dt = NP[t]
        if hi:
            w = 8 * dt.itemsize
            if w <= 32:
                big = np.int64 if dt.kind == "i" else np.uint64
                r = ((a.astype(big) * b.astype(big)) >> w).astype(dt)
            else:
                r = _mulhi64(a, b, dt.kind == "i")
        else:
            r = (np.asarray(a) * np.asarray(b)).astype(dt)
        if op in ("mad", "mad24"):
            r = (r + m.read(ops[3], t, pc)).astype(dt)
        m.write(ops[0], r, exe, pc)
        return
    a, b = m.read(ops[1], t, pc), m.read(ops[2], t, pc)
    if op in ("min", "max") and len(ops) > 3:  # three-input integer min/max
        f = np.minimum if op == "min" else np.maximum
        r = f(f(a, b), m.read(ops[3], t, pc))
        if "relu" in mods:
            r = np.maximum(r, 0)
        m.write(ops[0], np.asarray(r).astype(NP[t]), exe, pc)
        return
    if op in ("add", "sub") and "sat" in mods and t == "s32":
        r = np.clip(_binary_int(op, a.astype(np.int64), b.astype(np.int64), "s64"),
                    -2**31, 2**31 - 1).astype(np.int32)
    else:
        r = np.asarray(_binary_int(op, a, b, t)).astype(NP[t])
    m.write(ops[0], r, exe, pc)


def _mixed(m, ins, pc, exe, op: str, mods: list[str], at: str) -> None:
    """Mixed-precision ``add/sub{.rnd}{.sat}.f32.atype d, a, c`` and
    ``fma.rnd{.sat}.f32.abtype d, a, b, c`` (PTX ISA 9.1 §9.7.4 "Mixed precision floating
    point instructions", sm_100+): the ``.atype`` (f16/bf16) operands - a for add/sub, a and b
    for fma - are converted exactly to f32, c is f32, and the result is rounded once to f32
    with ``.rnd`` (default .rn), then clamped to [0, 1] with ``.sat``. No ``.ftz`` form exists.
    """
    ops = ins.operands
    want = 4 if op == "fma" else 3
    if len(ops) != want or "ftz" in mods or (op == "fma" and _rnd(mods) not in
                                              ("rn", "rz", "rm", "rp")):
        raise m.prog.unsupported(pc, f"'{ins.opcode}' (operands or modifiers of the "
                                     f"mixed-precision form)")
    a = m.read(ops[1], at, pc).astype(np.float64)  # f16/bf16 -> f64 is exact
    if op == "fma":
        b = m.read(ops[2], at, pc).astype(np.float64)
        c = m.read(ops[3], "f32", pc).astype(np.float64)
        # a*b of two 11-/8-bit significands is exact in f64; a*b + c can need more than 53
        # bits when the exponents differ widely: _fma_f32_exact rounds the exact sum once
        r = _fma_f32_exact(a * b, c, _rnd(mods))
    else:
        c = m.read(ops[2], "f32", pc).astype(np.float64)
        # f16/bf16 and f32 values are exact in f64 and their sum/difference rounds once to f32
        # the same way as an exact sum would (double rounding f64 -> f32 of a sum of two f32
        # values is innocuous: 53 >= 2 * 24 + 2, Figueroa 1995)
        r = round_f64_to(a + c if op == "add" else a - c, np.dtype(np.float32), _rnd(mods))
    if "sat" in mods:
        r = sat01(r)
    m.write(ops[0], np.asarray(r, dtype=np.float32), exe, pc)


def _fma_f32_exact(p: np.ndarray, c: np.ndarray, rnd: str) -> np.ndarray:
    """float32 rounding (mode ``rnd``) of the exact ``p + c`` where ``p`` is an exact f64 product
    of two f16/bf16 values and ``c`` an f32 value: the f64 sum is exact unless the exponents
    differ widely, in which case the tiny addend only matters as a sticky bit; it is folded in
    through an error-free TwoSum and round-to-odd at 53 bits, after which one rounding to
    f32 is exact (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
    algorithms using rounding to odd", IEEE TC 2008: odd rounding at p + 2 bits or more)."""
    s = p + c
    # TwoSum: err = exact (p + c) - s, exactly representable
    bp = s - c
    err = (p - bp) + (c - (s - bp))
    nz = (err != 0) & np.isfinite(s)
    if nz.any():
        # round-to-odd on the f64 sum keeps the sticky information: a double rounding through
        # round-to-odd at >= 2 extra bits is exact (Boldo & Melquiond 2008)
        bits = s.view(np.int64)
        odd_fix = nz & ((bits & 1) == 0)
        toward = np.where(err > 0, np.inf, -np.inf)
        s = np.where(odd_fix, np.nextafter(s, toward), s)
    return round_f64_to(s, np.dtype(np.float32), rnd)


def _int16x2(m, ins, pc, exe, op: str, mods: list[str]) -> None:
    """Packed ``add/sub/min/max{.relu}.{s16x2,u16x2}`` (PTX ISA 9.1 §9.7.1, sm_90+ for add/sub):
    each 16-bit half is computed independently, add/sub wrap modulo 2**16, ``.relu`` (min/max
    of s16x2) clamps negative halves to 0."""
    signed = "s16x2" in mods
    el = np.int16 if signed else np.uint16
    ops = ins.operands
    if len(ops) != 3 or ("relu" in mods and not (signed and op in ("min", "max"))) or any(
            x == "sat" for x in mods):
        raise m.prog.unsupported(pc, f"'{ins.opcode}' (modifiers of the packed 16-bit form)")
    a = np.atleast_1d(m.read(ops[1], "b32", pc)).view(el).reshape(-1, 2).astype(np.int64)
    b = np.atleast_1d(m.read(ops[2], "b32", pc)).view(el).reshape(-1, 2).astype(np.int64)
    r = {"add": np.add, "sub": np.subtract, "min": np.minimum, "max": np.maximum}[op](a, b)
    if "relu" in mods:
        r = np.maximum(r, 0)
    r = np.ascontiguousarray(np.broadcast_to(r, np.broadcast_shapes(r.shape, (1, 2))))
    m.write(ops[0], (r & 0xFFFF).astype(np.uint16).reshape(-1).view(np.uint32), exe, pc)


def _mulhi64(a, b, signed):
    """High 64 bits of a 64 x 64-bit product (exact, through Python integers)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    hi = [((int(x) * int(y)) >> 64) & ((1 << 64) - 1) for x, y in zip(a.reshape(-1), b.reshape(-1))]
    out = np.array(hi, dtype=np.uint64).reshape(a.shape)
    return out.view(np.int64) if signed else out


@handler("shl", "shr")
def _shl(m, ins, pc, exe, active):
    t = _typ(m, pc)
    a = m.read(ins.operands[1], t, pc)
    s = m.read(ins.operands[2], "u32", pc)
    m.write(ins.operands[0], _shift(ins.base, np.asarray(a), s, t), exe, pc)


@handler("not", "neg", "abs", "popc", "clz", "brev", "cnot")
def _unary(m, ins, pc, exe, active):
    op = ins.base
    mods, types = m._types[pc]
    t = _typ(m, pc)
    if _is_float(t):
        a = _fin(m, ins.operands[1], t, pc)
        r = -a if op == "neg" else np.abs(a)
        m.write(ins.operands[0], _fout(_ftz_in(r, t, mods), t, mods), exe, pc)
        return
    a = np.asarray(m.read(ins.operands[1], t, pc))
    if op == "not":
        r = ~a
    elif op == "cnot":
        r = (a == 0).astype(a.dtype)
    elif op == "neg":
        r = (-a.astype(np.int64)).astype(a.dtype) if a.dtype.kind != "b" else ~a
    elif op == "abs":
        r = np.abs(a.astype(np.int64)).astype(a.dtype)
    elif op == "popc":
        u = a.view(UINT[a.dtype.itemsize]).astype(np.uint64)
        r = np.zeros(u.shape, dtype=np.uint32)
        for i in range(8 * a.dtype.itemsize):
            r += ((u >> np.uint64(i)) & np.uint64(1)).astype(np.uint32)
    elif op == "clz":
        w = 8 * a.dtype.itemsize
        u = a.view(UINT[a.dtype.itemsize]).astype(np.uint64)
        r = np.full(u.shape, w, dtype=np.uint32)
        for i in range(w):
            r = np.where((u >> np.uint64(i)) & np.uint64(1), np.uint32(w - 1 - i), r)
    else:  # brev
        w = 8 * a.dtype.itemsize
        u = a.view(UINT[a.dtype.itemsize]).astype(np.uint64)
        r = np.zeros(u.shape, dtype=np.uint64)
        for i in range(w):
            r |= ((u >> np.uint64(i)) & np.uint64(1)) << np.uint64(w - 1 - i)
        r = r.astype(UINT[a.dtype.itemsize])
    m.write(ins.operands[0], r, exe, pc)


@handler("bfe")
def _bfe(m, ins, pc, exe, active):
    t = _typ(m, pc)
    dt = NP[t]
    w = 8 * dt.itemsize
    a = m.read(ins.operands[1], t, pc)
    pos = m.read(ins.operands[2], "u32", pc).astype(np.int64) & 0xFF
    ln = m.read(ins.operands[3], "u32", pc).astype(np.int64) & 0xFF
    ua = np.asarray(a).view(UINT[dt.itemsize]).astype(np.uint64) if np.ndim(a) else \
        np.array(a).view(UINT[dt.itemsize]).astype(np.uint64)
    pos_c = np.minimum(pos, w - 1)
    field = (ua >> pos_c.astype(np.uint64))
    lc = np.minimum(ln, 64)
    maskv = np.where(lc >= 64, np.uint64(0xFFFFFFFFFFFFFFFF),
                     (np.uint64(1) << np.minimum(lc, 63).astype(np.uint64)) - np.uint64(1))
    r = field & maskv
    if dt.kind == "i":
        sbit_pos = np.minimum(pos + ln - 1, w - 1)
        sign = np.where(ln == 0, 0, (ua >> sbit_pos.astype(np.uint64)) & np.uint64(1))
        ext = np.where((sign == 1) & (ln < w), ~maskv, np.uint64(0))
        r = r | ext
    r = np.where(ln == 0, np.uint64(0), r)
    r = np.where((pos >= w) & (dt.kind == "u"), np.uint64(0), r)
    m.write(ins.operands[0], r.astype(UINT[dt.itemsize]), exe, pc)


#: bits of the emulator's opaque mbarrier state that hold the pending arrival count (the
#: count is below 2**20: PTX ISA 9.1 §9.7.13.15.1, mbarrier.init's count range)
_PENDING_MASK = (1 << 20) - 1


@handler("shf")
def _shf(m, ins, pc, exe, active):
    """``shf.{l,r}.{wrap,clamp}.b32 d, a, b, c``: funnel shift of the 64-bit value ``b:a``
    (``a`` the low word) by ``c`` (``.wrap``: ``c & 31``; ``.clamp``: ``min(c, 32)``); ``.l``
    keeps the high word of the left shift, ``.r`` the low word of the right shift (PTX ISA 9.1
    §9.7.8.11, 'shf')."""
    mods = m._types[pc][0]
    a = np.asarray(m.read(ins.operands[1], "u32", pc)).astype(np.uint64)
    b = np.asarray(m.read(ins.operands[2], "u32", pc)).astype(np.uint64)
    c = np.asarray(m.read(ins.operands[3], "u32", pc)).astype(np.uint64)
    n = np.minimum(c, np.uint64(32)) if "clamp" in mods else c & np.uint64(31)
    v = (b << np.uint64(32)) | a
    if "l" in mods:
        r = (v << n) >> np.uint64(32)
    else:
        r = v >> n
    m.write(ins.operands[0], (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), exe, pc)


@handler("bfi")
def _bfi(m, ins, pc, exe, active):
    t = _typ(m, pc)
    dt = NP[t]
    a = np.asarray(m.read(ins.operands[1], t, pc)).astype(np.uint64)
    b = np.asarray(m.read(ins.operands[2], t, pc)).astype(np.uint64)
    pos = m.read(ins.operands[3], "u32", pc).astype(np.uint64) & np.uint64(0xFF)
    ln = m.read(ins.operands[4], "u32", pc).astype(np.uint64) & np.uint64(0xFF)
    maskv = ((np.uint64(1) << np.minimum(ln, 63)) - np.uint64(1)) << np.minimum(pos, 63)
    r = (b & ~maskv) | ((a << np.minimum(pos, 63)) & maskv)
    m.write(ins.operands[0], r.astype(UINT[dt.itemsize]), exe, pc)


@handler("prmt")
def _prmt(m, ins, pc, exe, active):
    mods = _mods(m, pc)
    if any(x in mods for x in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")):
        raise m.prog.unsupported(pc)
    a = _lanes(m.read(ins.operands[1], "b32", pc), m.N).astype(np.uint64)
    b = _lanes(m.read(ins.operands[2], "b32", pc), m.N).astype(np.uint64)
    c = _lanes(m.read(ins.operands[3], "b32", pc), m.N).astype(np.uint64)
    x = a | (b << np.uint64(32))
    r = np.zeros(m.N, dtype=np.uint64)
    for i in range(4):
        sel = (c >> np.uint64(4 * i)) & np.uint64(0xF)
        byte = (x >> ((sel & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
        sgn = np.where(sel & np.uint64(8), np.where(byte & np.uint64(0x80), np.uint64(0xFF),
                                                    np.uint64(0)), byte)
        r |= sgn << np.uint64(8 * i)
    m.write(ins.operands[0], r.astype(np.uint32), exe, pc)


@handler("lop3")
def _lop3(m, ins, pc, exe, active):
    t = _typ(m, pc)
    a, b, c = (np.asarray(m.read(ins.operands[i], t, pc)) for i in (1, 2, 3))
    lut = int(ins.operands[4].value or 0)
    r = np.zeros(np.broadcast_shapes(a.shape, b.shape, c.shape), dtype=NP[t])
    for i in range(8):
        if lut >> i & 1:
            r |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    m.write(ins.operands[0], r, exe, pc)


@handler("selp")
def _selp(m, ins, pc, exe, active):
    t = _typ(m, pc)
    a = m.read(ins.operands[1], t, pc)
    b = m.read(ins.operands[2], t, pc)
    c = m.read(ins.operands[3], "pred", pc)
    m.write(ins.operands[0], np.where(c, a, b).astype(NP[t]), exe, pc)


_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater,
    "hs": np.greater_equal,
}


def _compare(cmp: str, a, b, fl: bool):
    if fl:
        nan = np.isnan(a) | np.isnan(b)
        if cmp == "num":
            return ~nan
        if cmp == "nan":
            return nan
        if cmp.endswith("u") and cmp[:-1] in _CMP:
            return _CMP[cmp[:-1]](a, b) | nan
        r = _CMP[cmp](a, b)
        return r & ~nan if cmp != "ne" else r & ~nan
    return _CMP[cmp](a, b)


@handler("setp")
def _setp(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    t = _typ(m, pc)
    cmp = mods[0]
    boolop = next((x for x in mods[1:] if x in ("and", "or", "xor")), None)
    fl = _is_float(t)
    if fl:
        a = _ftz_in(_fin(m, ins.operands[1], t, pc), t, mods)
        b = _ftz_in(_fin(m, ins.operands[2], t, pc), t, mods)
    else:
        a, b = m.read(ins.operands[1], t, pc), m.read(ins.operands[2], t, pc)
    if t in ("u8", "u16", "u32", "u64", "b16", "b32", "b64") or cmp in ("lo", "ls", "hi", "hs"):
        ut = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[NP[t].itemsize]
        if not fl:
            a, b = np.asarray(a).view(ut) if np.ndim(a) else np.asarray(a).astype(ut), \
                np.asarray(b).view(ut) if np.ndim(b) else np.asarray(b).astype(ut)
    r = _compare(cmp, a, b, fl)
    if t in _PACKED:
        raise m.prog.unsupported(pc)
    r = _lanes(r, m.N)
    d = ins.operands[0]
    q = None
    if boolop:
        c = m.read(ins.operands[3], "pred", pc)
        f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[boolop]
        p_ = f(r, c)
        q = f(~r, c)
    else:
        p_, q = r, ~r
    if d.kind == "pair":
        m.write(d.elems[0], p_, exe, pc)
        m.write(d.elems[1], q, exe, pc)
    else:
        m.write(d, p_, exe, pc)


@handler("testp")
def _testp(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    a = _fin(m, ins.operands[1], _typ(m, pc), pc)
    k = mods[0]
    tiny = np.finfo(NP[types[-1]]).tiny
    r = {"finite": np.isfinite(a), "infinite": np.isinf(a), "number": ~np.isnan(a),
         "notanumber": np.isnan(a), "normal": np.isfinite(a) & (np.abs(a) >= tiny),
         "subnormal": (np.abs(a) < tiny) & (a != 0)}[k]
    m.write(ins.operands[0], r, exe, pc)


@handler("copysign")
def _copysign(m, ins, pc, exe, active):
    t = _typ(m, pc)
    a = _fin(m, ins.operands[1], t, pc)
    b = _fin(m, ins.operands[2], t, pc)
    m.write(ins.operands[0], np.copysign(b, a).astype(NP[t]), exe, pc)


# ----------------------------------------------------------------------------- special functions
def _special(op, x):
    if op == "ex2":
        return np.exp2(x)
    if op == "lg2":
        return np.log2(x)
    if op == "rcp":
        return 1.0 / x
    if op == "rsqrt":
        return 1.0 / np.sqrt(x)
    if op == "sqrt":
        return np.sqrt(x)
    if op == "sin":
        return np.sin(x)
    if op == "cos":
        return np.cos(x)
    if op == "tanh":
        return np.tanh(x)
    raise KeyError(op)


@handler("ex2", "lg2", "rcp", "rsqrt", "sqrt", "sin", "cos", "tanh")
def _sfu(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    t = _typ(m, pc)
    x = _ftz_in(_fin(m, ins.operands[1], t, pc), t, mods)
    r = _special(ins.base, x)
    m.write(ins.operands[0], _fout(r, t, mods), exe, pc)


# ----------------------------------------------------------------------------- cvt
def _unpack_fp8x2(raw16: np.ndarray, t: str) -> np.ndarray:
    el = NP["e4m3" if t.startswith("e4m3") else "e5m2"]
    return np.ascontiguousarray(raw16).view(np.uint8).reshape(-1, 2).view(el).astype(np.float64)


@handler("cvt")
def _cvt(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    if len(types) != 2:
        raise m.prog.unsupported(pc)
    dt_, at = types
    d = ins.operands[0]
    if dt_ in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2") and at == "f32":
        hi = m.read(ins.operands[1], "f32", pc).astype(np.float64)
        lo = m.read(ins.operands[2], "f32", pc).astype(np.float64)
        if "relu" in mods:
            hi, lo = np.maximum(hi, 0), np.maximum(lo, 0)
        el = {"f16x2": np.dtype(np.float16), "bf16x2": BF16, "e4m3x2": NP["e4m3"],
              "e5m2x2": NP["e5m2"]}[dt_]
        pair = np.stack(np.broadcast_arrays(lo, hi), axis=-1)
        if "satfinite" in mods:
            mx = float(ml_dtypes.finfo(el).max)
            pair = np.where(np.isnan(pair), pair, np.clip(pair, -mx, mx))
        r = round_f64_to(pair, el, _rnd(mods)) if el in (np.float16,) else pair.astype(el)
        r = np.ascontiguousarray(np.broadcast_to(r, (m.N, 2)))
        m.write(d, r.view(UINT[2 * el.itemsize]).reshape(-1), exe, pc)
        return
    if at in ("e4m3x2", "e5m2x2") and dt_ in ("f16x2", "bf16x2"):
        raw = _lanes(m.read(ins.operands[1], "b16", pc), m.N)
        f = _unpack_fp8x2(raw, at)
        el = np.dtype(np.float16) if dt_ == "f16x2" else BF16
        m.write(d, np.ascontiguousarray(f.astype(el)).view(np.uint32).reshape(-1), exe, pc)
        return
    if dt_ in _PACKED or at in _PACKED:
        raise m.prog.unsupported(pc)
    src = m.read(ins.operands[1], at, pc)
    rnd = _rnd(mods)
    if _is_float(dt_) or dt_ in ("e4m3", "e5m2"):
        x = np.asarray(src).astype(np.float64)
        x = _ftz_in(x, at, mods)
        if _is_float(at) and rnd in ("rni", "rzi", "rmi", "rpi"):
            f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd]
            r = f(x).astype(NP[dt_])
        elif NP[dt_] in (np.float16, np.float32, np.float64):
            r = round_f64_to(x, NP[dt_], rnd if rnd in ("rn", "rz", "rm", "rp") else "rn")
        else:
            r = x.astype(NP[dt_])
        if "sat" in mods:
            r = sat01(r)
        if "ftz" in mods and NP[dt_] == np.float32:
            r = ftz32(r)
        m.write(d, r, exe, pc)
        return
    # destination integer
    dd = NP[dt_]
    if _is_float(at):
        x = np.asarray(src).astype(np.float64)
        f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}.get(rnd, np.trunc)
        y = f(x)
        info = np.iinfo(dd)
        y = np.where(np.isnan(y), 0, np.clip(y, info.min, info.max))
        m.write(d, y.astype(dd), exe, pc)
        return
    x = np.asarray(src)
    if "sat" in mods:
        info = np.iinfo(dd)
        x = np.clip(x.astype(np.float64) if x.dtype.itemsize == 8 else x.astype(np.int64),
                    info.min, info.max)
    r = x.astype(dd)
    # cvt to a narrow type zero/sign-extends into the register (PTX ISA 9.1 §9.7.9.21)
    m.write(d, r, exe, pc)


# ============================================================================= control
@handler("bra", "brx")
def _bra(m, ins, pc, exe, active):
    tgt = ins.operands[0]
    if ins.base == "brx":
        return _brx(m, ins, pc, exe, active)
    if tgt.kind != "label":
        raise m.prog.unsupported(pc)
    dest = m.prog.envs[pc].label(tgt.name or tgt.text)
    if dest is None:
        raise m.prog.unsupported(pc, f"branch to unknown label '{tgt.text}'")
    m.pc[exe] = dest
    m.pc[active & ~exe] = pc + 1
    return True


def _brx(m, ins, pc, exe, active):
    """``brx.idx{.uni} index, tlist``: each lane jumps to entry ``index`` of the
    ``.branchtargets`` list ``tlist`` (PTX ISA 9.1 §9.7.12.3; an index outside the list is
    undefined behaviour: a fault here)."""
    if len(ins.operands) < 2 or ins.operands[1].kind != "label":
        raise m.prog.unsupported(pc)
    name = ins.operands[1].name or ins.operands[1].text
    labels = m.prog.branch_targets.get(name)
    if labels is None:
        raise m.prog.unsupported(pc, f"brx.idx to '{name}', which is no .branchtargets list")
    dests = []
    for lb in labels:
        d = m.prog.envs[pc].label(lb)
        if d is None:
            raise m.prog.unsupported(pc, f"branch target '{lb}' is no label")
        dests.append(d)
    idx = _lanes(m.read(ins.operands[0], "u32", pc), m.N).astype(np.int64)
    bad = exe & (idx >= len(dests))
    if bad.any():
        raise _Fault("fault", f"brx.idx index {int(idx[bad][0])} outside the {len(dests)} "
                              f"targets of '{name}' ({m.prog.where(pc)})")
    table = np.array(dests, np.int64)
    m.pc[exe] = table[idx[exe]]
    m.pc[active & ~exe] = pc + 1
    return True


@handler("ret", "exit")
def _exit(m, ins, pc, exe, active):
    m.on_exit(exe)
    m.pc[active & ~exe] = pc + 1
    return True


@handler("trap")
def _trap(m, ins, pc, exe, active):
    if exe.any():
        raise _Fault("fault", f"'trap' executed at {m.prog.where(pc)}")


@handler("nanosleep", "prefetch", "prefetchu", "membar", "griddepcontrol",
         "setmaxnreg", "pmevent", "discard", "applypriority", "brkpt")
def _nop(m, ins, pc, exe, active):
    return None


@handler("createpolicy")
def _createpolicy(m, ins, pc, exe, active):
    m.write(ins.operands[0], np.zeros(m.N, np.uint64), exe, pc)


# ============================================================================= barriers
@handler("bar", "barrier")
def _bar(m, ins, pc, exe, active):
    mods = _mods(m, pc)
    ops = ins.operands
    if "warp" in mods:  # bar.warp.sync membermask
        mask = _lanes(m.read(ops[0], "b32", pc), m.N).astype(np.int64) & 0xFFFFFFFF
        return _warp_sync(m, pc, exe, active, mask)
    if "cluster" in mods:
        raise m.prog.unsupported(pc)
    if "red" in mods:
        raise m.prog.unsupported(pc)
    wait = "arrive" not in mods
    if ops:
        bid = _lanes(m.read(ops[0], "u32", pc), m.N).astype(np.int64)
    else:
        bid = np.zeros(m.N, np.int64)
    cnt = (_lanes(m.read(ops[1], "u32", pc), m.N).astype(np.int64)
           if len(ops) > 1 else None)
    m.pc[active & ~exe] = pc + 1
    if not wait:
        m.pc[exe] = pc + 1
    m.barrier(pc, exe, bid, cnt, wait)
    return True


def _warp_sync(m, pc, exe, active, mask):
    """``bar.warp.sync membermask`` (PTX ISA 9.0 §9.7.13.4): each executing lane waits until
    every lane of its warp named in ``membermask`` (``mask``: (N,) int64, per lane) has executed
    a ``bar.warp.sync`` with the same membermask (at this or another PC), then the group's
    clocks are joined (the barrier orders memory among them).

    Fast path: every mask lane executes it in this step -> join now, no lane is held. Otherwise
    the arriving lanes block (``block_kind`` 4, ``block_id`` = their mask) until the rest come;
    a mask lane that never arrives leaves them blocked, which the scheduler reports as HB2.
    Raises ``_Fault("fault")`` when the mask names a lane that already exited (ISA: undefined)."""
    m.pc[active & ~exe] = pc + 1
    lanes = np.flatnonzero(exe)
    if not lanes.size:
        return True
    bit = np.int64(1) << m.laneid[lanes].astype(np.int64)
    mk = mask[lanes]
    key = (lanes // 32) * (1 << 32) + mk  # (warp, membermask): one rendezvous
    uk, inv = np.unique(key, return_inverse=True)
    arrived = np.zeros(uk.size, np.int64)
    np.bitwise_or.at(arrived, inv, bit)
    umk = uk & 0xFFFFFFFF
    waiting = m.blocked & (m.block_kind == 4)
    if not waiting.any() and not ((umk & ~arrived) != 0).any():
        m.pc[lanes] = pc + 1  # fast path: the whole mask is here now
        _warp_join(m, [lanes[inv == g] for g in range(uk.size)] if uk.size > 1 else [lanes])
        return True
    for g in range(uk.size):
        ls = lanes[inv == g]
        w, gm = int(uk[g] >> 32), int(umk[g])
        sl = slice(w * 32, w * 32 + 32)
        wl = np.flatnonzero(waiting[sl] & (m.block_id[sl] == gm)) + w * 32
        have = int(arrived[g])
        for l in wl:
            have |= 1 << int(m.laneid[l])
        dead = int(np.bitwise_or.reduce(np.where(m.done[sl], np.int64(1) << m.laneid[sl].astype(np.int64),
                                                 np.int64(0)))) & gm & ~have
        if dead:
            raise _Fault("fault", f"bar.warp.sync membermask 0x{gm:08x} names exited lanes "
                                  f"0x{dead:08x} of warp {w} ({m.prog.where(pc)}); PTX ISA 9.0 "
                                  f"§9.7.13.4 leaves this undefined")
        if gm & ~have:  # not all here: hold the arrivals
            m.blocked[ls] = True
            m.block_kind[ls] = 4
            m.block_id[ls] = gm
            m.pc[ls] = pc
            continue
        m.blocked[wl] = False
        m.block_kind[wl] = 0
        m.pc[wl] += 1
        m.pc[ls] = pc + 1
        _warp_join(m, [np.concatenate([ls, wl])])
    return True


def _warp_join(m, groups):
    """Join the clocks of each lane group (arrays of lane ids) and tick them."""
    if not m.ntr:
        return
    for ls in groups:
        ls = ls[ls < m.ntr]
        if not ls.size:
            continue
        m.vc[ls] = m.vc[ls].max(axis=0)
        m._tick(ls)


# ============================================================================= warp collectives
def _warp_view(m, arr):
    return _lanes(arr, m.N).reshape(-1, 32)


@handler("shfl")
def _shfl(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    mode = next(x for x in mods if x in ("up", "down", "bfly", "idx"))
    d = ins.operands[0]
    a = _lanes(m.read(ins.operands[1], "b32", pc), m.N)
    b_raw = m.read(ins.operands[2], "u32", pc)
    c_raw = m.read(ins.operands[3], "u32", pc)
    mask = m.read(ins.operands[4], "u32", pc) if len(ins.operands) > 4 else None
    m.warp_members(pc, exe, mask)
    # lane and clamp immediates (Triton's butterflies: 'shfl.sync.bfly.b32 d, a, 16, 31, -1')
    # give the same source lanes at every execution: computed once per instruction and batch
    uniform = np.ndim(b_raw) == 0 and np.ndim(c_raw) == 0
    ck = (pc, m.N, int(b_raw), int(c_raw)) if uniform else None
    hit = m.op_cache.get(ck) if uniform else None
    if hit is not None:
        src, ok = hit
        m.write(d.elems[0] if d.kind == "pair" else d, a[src], exe, pc)
        if d.kind == "pair":
            m.write(d.elems[1], ok, exe, pc)
        return
    b = _lanes(b_raw, m.N).astype(np.int64) & 31
    c = _lanes(c_raw, m.N).astype(np.int64)
    lane = m.laneid
    clamp = c & 31
    seg = (c >> 8) & 31
    maxl = (lane & seg) | (clamp & ~seg)
    minl = lane & seg
    if mode == "up":
        j = lane - b
        ok = j >= maxl
    elif mode == "down":
        j = lane + b
        ok = j <= maxl
    elif mode == "bfly":
        j = lane ^ b
        ok = j <= maxl
    else:
        j = minl | (b & ~seg)
        ok = j <= maxl
    j = np.where(ok, j, lane)
    src = np.arange(m.N) - lane + j
    src = np.clip(src, 0, m.N - 1)
    if uniform:
        m.op_cache[ck] = (src, ok)
    m.write(d.elems[0] if d.kind == "pair" else d, a[src], exe, pc)
    if d.kind == "pair":
        m.write(d.elems[1], ok, exe, pc)


@handler("vote")
def _vote(m, ins, pc, exe, active):
    mods = _mods(m, pc)
    mask = m.read(ins.operands[-1], "u32", pc) if len(ins.operands) > 2 else None
    m.warp_members(pc, exe, mask)
    p = _lanes(m.read(ins.operands[1], "pred", pc), m.N)
    ex = exe.reshape(-1, 32)
    pv = p.reshape(-1, 32) & ex
    if "ballot" in mods:
        bits = (pv.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1)
        r = np.repeat(bits.astype(np.uint32), 32)
    elif "any" in mods:
        r = np.repeat(pv.any(axis=1), 32)
    elif "all" in mods:
        r = np.repeat((pv | ~ex).all(axis=1), 32)
    elif "uni" in mods:
        r = np.repeat(((pv | ~ex).all(axis=1)) | (~pv).all(axis=1), 32)
    else:
        raise m.prog.unsupported(pc)
    m.write(ins.operands[0], r, exe, pc)


@handler("activemask")
def _activemask(m, ins, pc, exe, active):
    ex = active.reshape(-1, 32)
    bits = (ex.astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1)
    m.write(ins.operands[0], np.repeat(bits.astype(np.uint32), 32), exe, pc)


@handler("redux")
def _redux(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    t = _typ(m, pc)
    op = next(x for x in mods if x in ("add", "min", "max", "and", "or", "xor"))
    mask = m.read(ins.operands[2], "u32", pc) if len(ins.operands) > 2 else None
    m.warp_members(pc, exe, mask)
    ex = exe.reshape(-1, 32)
    if t == "f32":
        a = _warp_view(m, m.read(ins.operands[1], "f32", pc)).astype(np.float64)
        if "abs" in mods:
            a = np.abs(a)
        fill = np.inf if op == "min" else -np.inf
        a = np.where(ex, a, fill)
        if "NaN" in mods:
            r = a.min(axis=1) if op == "min" else a.max(axis=1)
        else:
            r = np.nanmin(a, axis=1) if op == "min" else np.nanmax(a, axis=1)
        m.write(ins.operands[0], np.repeat(r.astype(np.float32), 32), exe, pc)
        return
    a = _warp_view(m, m.read(ins.operands[1], t, pc)).astype(np.int64 if t.startswith("s")
                                                               else np.uint64)
    if op == "add":
        r = np.where(ex, a, 0).sum(axis=1)
    elif op == "min":
        r = np.where(ex, a, np.iinfo(a.dtype).max).min(axis=1)
    elif op == "max":
        r = np.where(ex, a, np.iinfo(a.dtype).min).max(axis=1)
    else:
        f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        ident = np.iinfo(a.dtype).max if op == "and" else 0
        r = f.reduce(np.where(ex, a, a.dtype.type(ident)), axis=1)
    m.write(ins.operands[0], np.repeat(r.astype(NP[t]), 32), exe, pc)


@handler("elect")
def _elect(m, ins, pc, exe, active):
    mask = m.read(ins.operands[1], "u32", pc) if len(ins.operands) > 1 else None
    m.warp_members(pc, exe, mask)
    ex = exe.reshape(-1, 32)
    if m.elect_highest:  # run_kernel(elect="highest")
        first = 31 - np.argmax(ex[:, ::-1], axis=1)
    else:
        first = np.argmax(ex, axis=1)
    leader = np.zeros_like(ex)
    has = ex.any(axis=1)
    leader[np.arange(ex.shape[0])[has], first[has]] = True
    d = ins.operands[0]
    lid = np.repeat(first.astype(np.uint32), 32)
    if d.kind == "pair":
        m.write(d.elems[0], lid, exe, pc)
        m.write(d.elems[1], leader.reshape(-1), exe, pc)
    else:
        m.write(d, leader.reshape(-1), exe, pc)


# ============================================================================= atomics
@handler("atom", "red")
def _atom(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    t = _typ(m, pc)
    space = "global" if "global" in mods else (
        "shared::cluster" if "shared::cluster" in mods else ("shared" if any(
            x.startswith("shared") for x in mods) else "generic"))
    op = next((x for x in mods if x in ("add", "min", "max", "inc", "dec", "cas", "exch", "and",
                                        "or", "xor")), None)
    if op is None or any(x in mods for x in ("v2", "v4", "v8", "noftz")) and op != "add":
        raise m.prog.unsupported(pc)
    ret = ins.base == "atom"
    ops = ins.operands
    aop = ops[1] if ret else ops[0]
    addr = m.address(aop, pc)
    akind = "atomic_cta" if "cta" in _mods(m, pc) else "atomic"  # default scope .gpu
    vec = next((int(x[1:]) for x in mods if x in ("v2", "v4", "v8")), 1)
    if vec > 1:
        _atom_vector_add(m, ins, pc, exe, t, space, addr, vec, ret, akind)
        return None
    b = _lanes(m.read(ops[2] if ret else ops[1], t, pc), m.N)
    c = _lanes(m.read(ops[3], t, pc), m.N) if op == "cas" else None
    es = NP[t].itemsize
    lanes = np.flatnonzero(exe)
    olds = np.zeros(m.N, dtype=NP[t])
    syn = _flags.sync_of(mods, atomic=True)
    same = np.zeros(m.N, np.bool_)  # lanes whose atomic left the value as it was
    for ln in lanes:  # atomics are serialised in lane order
        one = np.zeros(m.N, np.bool_)
        one[ln] = True
        raw = m.mem_access(space, addr, es, one, pc, kind=akind, sync=syn)
        old = raw.view(NP[t])[0, 0] if raw.ndim == 2 else raw.view(NP[t])[0]
        bv = b[ln]
        if op == "add":
            new = old + bv
        elif op == "min":
            new = min(old, bv)
        elif op == "max":
            new = max(old, bv)
        elif op == "exch":
            new = bv
        elif op == "cas":
            new = c[ln] if old == bv else old
        elif op == "and":
            new = old & bv
        elif op == "or":
            new = old | bv
        elif op == "xor":
            new = old ^ bv
        elif op == "inc":
            new = 0 if old >= bv else old + 1
        else:
            new = bv if (old == 0 or old > bv) else old - 1
        olds[ln] = old
        newb = np.array([new], dtype=NP[t]).view(np.uint8).reshape(1, es)
        unchanged = newb.tobytes() == np.asarray(raw).reshape(-1)[:es].tobytes()
        same[ln] = unchanged
        if op == "cas" and old != bv:
            continue  # a failed compare-and-swap writes nothing (it is a read)
        m.mem_access(space, addr, es, one, pc, data=newb, kind=akind, sync=syn, rmw=True,
                     same=unchanged)
    if ret and same.any():
        spin = m.spin_check(pc, same, addr)
        if spin.any():  # they run the atomic again after the next write (Machine.spin_check)
            m.pc[active & ~spin] = pc + 1
            m.write(ops[0], olds, exe & ~spin, pc)
            return True
    if ret:
        m.write(ops[0], olds, exe, pc)
    if ins.base == "red" and "async" in mods and len(ops) > 2:
        _async_complete_tx(m, ops[2], pc, exe, es)
    return None


def _atom_vector_add(m, ins, pc, exe, t: str, space: str, addr: np.ndarray, vec: int,
                     ret: bool, akind: str) -> None:
    """``atom/red{.sem}{.scope}.global.add.v2/.v4/.v8.{f32,f16,bf16}`` (PTX ISA 9.1 ``atom``,
    sm_90+): the add of each element is atomic on its own (the vector is not one atomic
    operation); ``atom`` returns the old elements. Lanes are serialised in lane order."""
    # (.global, or a generic address of global memory: a vector atom may be used with no other
    # space, PTX ISA 9.1 atom; a generic address of shared memory is the emulator's fault)
    if t not in ("f32", "f16", "bf16") or space not in ("global", "generic") or \
            vec * NP[t].itemsize > 16:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' (vector atomics: .global .add of "
                                     f".f32 x 2/4, .f16/.bf16 x 2/4/8)")
    ops = ins.operands
    src = ops[2] if ret else ops[1]
    if src.kind != "vector" or len(src.elems) != vec or (ret and (
            ops[0].kind != "vector" or len(ops[0].elems) != vec)):
        raise m.prog.unsupported(pc, f"'{ins.opcode}' with operands that are not "
                                     f"{vec}-element vectors")
    dt = NP[t]
    es = dt.itemsize
    b = np.stack([_lanes(m.read(e, t, pc), m.N).astype(dt) for e in src.elems], axis=1)
    olds = np.zeros((m.N, vec), dtype=dt)
    for ln in np.flatnonzero(exe):
        one = np.zeros(m.N, np.bool_)
        one[ln] = True
        raw = m.mem_access(space, addr, es * vec, one, pc, kind=akind)
        old = np.ascontiguousarray(raw.reshape(-1)[:es * vec]).view(dt)
        new = (old.astype(np.float64) + b[ln].astype(np.float64)).astype(dt)
        olds[ln] = old
        m.mem_access(space, addr, es * vec, one, pc, data=new.view(np.uint8).reshape(1, -1),
                     kind=akind)
    if ret:
        for i, d in enumerate(ops[0].elems):
            m.write(d, olds[:, i], exe, pc)


# ============================================================================= sm_80 matrix ops
def _nmat(mods) -> int:
    for x in mods:
        if x in ("x1", "x2", "x4"):
            return int(x[1])
    return 1


def _warp_lanes(m, exe, pc, op):
    """Executing lanes as whole warps (W, 32); .sync.aligned ops need every lane of the warp."""
    if m.N % 32:
        raise m.prog.unsupported(pc, f"'{op}' with a partial warp")
    ex = exe.reshape(-1, 32)
    full = ex.all(axis=1)
    part = ex.any(axis=1) & ~full
    if part.any():
        m.warp_members(pc, exe, np.uint32(0xFFFFFFFF))
    return np.flatnonzero(full)


@handler("ldmatrix")
def _ldmatrix(m, ins, pc, exe, active):
    mods = _mods(m, pc)
    if "m8n8" not in mods or _typ(m, pc) != "b16":
        raise m.prog.unsupported(pc)
    nm = _nmat(mods)
    trans = "trans" in mods
    warps = _warp_lanes(m, exe, pc, "ldmatrix")
    if not warps.size:
        return
    addr = m.address(ins.operands[1], pc)
    lanes = (warps[:, None] * 32 + np.arange(8 * nm)).reshape(-1)
    sel = np.zeros(m.N, np.bool_)
    sel[lanes] = True
    space = "shared" if any(x.startswith("shared") for x in mods) else "generic"
    rows = m.mem_access(space, addr, 16, sel, pc)  # lanes in increasing order == `lanes` sorted
    rows = np.ascontiguousarray(rows).view(np.uint16).reshape(warps.size, nm, 8, 8)
    L = np.arange(32)
    g, t = L // 4, L % 4
    dests = ins.operands[0].elems if ins.operands[0].kind == "vector" else (ins.operands[0],)
    wl = (warps[:, None] * 32 + L).reshape(-1)
    for j, d in enumerate(dests):
        if trans:
            lo, hi = rows[:, j, 2 * t, g], rows[:, j, 2 * t + 1, g]
        else:
            lo, hi = rows[:, j, g, 2 * t], rows[:, j, g, 2 * t + 1]
        val = lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16))
        full = np.zeros(m.N, np.uint32)
        full[wl] = val.reshape(-1)
        e2 = np.zeros(m.N, np.bool_)
        e2[wl] = True
        m.write(d, full, e2 & exe, pc)


@handler("stmatrix")
def _stmatrix(m, ins, pc, exe, active):
    mods = _mods(m, pc)
    if "m8n8" not in mods or _typ(m, pc) != "b16":
        raise m.prog.unsupported(pc)
    nm = _nmat(mods)
    trans = "trans" in mods
    warps = _warp_lanes(m, exe, pc, "stmatrix")
    if not warps.size:
        return
    addr = m.address(ins.operands[0], pc)
    srcs = ins.operands[1].elems if ins.operands[1].kind == "vector" else (ins.operands[1],)
    L = np.arange(32)
    g, t = L // 4, L % 4
    mats = np.zeros((warps.size, nm, 8, 8), np.uint16)
    wl = (warps[:, None] * 32 + L)
    for j, s in enumerate(srcs):
        v = _lanes(m.read(s, "b32", pc), m.N)[wl]  # (W, 32)
        lo, hi = (v & 0xFFFF).astype(np.uint16), (v >> 16).astype(np.uint16)
        if trans:
            mats[:, j, 2 * t, g], mats[:, j, 2 * t + 1, g] = lo, hi
        else:
            mats[:, j, g, 2 * t], mats[:, j, g, 2 * t + 1] = lo, hi
    lanes = (warps[:, None] * 32 + np.arange(8 * nm)).reshape(-1)
    sel = np.zeros(m.N, np.bool_)
    sel[lanes] = True
    data = np.ascontiguousarray(mats.reshape(warps.size * nm * 8, 8)).view(np.uint8)
    space = "shared" if any(x.startswith("shared") for x in mods) else "generic"
    m.mem_access(space, addr, 16, sel, pc, data=data)


def _regs(m, op, pc, wl, t="b32"):
    els = op.elems if op.kind == "vector" else (op,)
    return [_lanes(m.read(e, t, pc), m.N)[wl] for e in els]


@handler("mma")
def _mma(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    shape = next((x for x in mods if x.startswith("m") and "n" in x and "k" in x), "")
    if "sync" not in mods or shape not in ("m16n8k16", "m16n8k8", "m16n8k32") or \
            "row" not in mods or "col" not in mods:
        raise m.prog.unsupported(pc)
    dt_, at, bt, ct = types if len(types) == 4 else (None,) * 4
    warps = _warp_lanes(m, exe, pc, "mma.sync")
    if not warps.size:
        return
    W = warps.size
    L = np.arange(32)
    g, t = L // 4, L % 4
    wl = warps[:, None] * 32 + L  # (W, 32)
    M, N = 16, 8
    K = int(shape.split("k")[1])
    A = np.zeros((W, M, K))
    B = np.zeros((W, K, N))
    ra = _regs(m, ins.operands[1], pc, wl)
    rb = _regs(m, ins.operands[2], pc, wl)
    rc = _regs(m, ins.operands[3], pc, wl, "b32")
    if at in ("f16", "bf16"):
        el = np.float16 if at == "f16" else BF16
        def halves(r):
            r = np.ascontiguousarray(r.astype(np.uint32))
            h = r.view(np.uint16).reshape(W, 32, 2).view(el).astype(np.float64)
            return h[..., 0], h[..., 1]
        a_map = [(g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8)]
        for i, (rr, cc) in enumerate(a_map[:len(ra)]):
            lo, hi = halves(ra[i])
            A[:, rr, cc], A[:, rr, cc + 1] = lo, hi
        b_map = [2 * t, 2 * t + 8]
        for i, kk in enumerate(b_map[:len(rb)]):
            lo, hi = halves(rb[i])
            B[:, kk, g], B[:, kk + 1, g] = lo, hi
    elif at in ("s8", "u8", "e4m3", "e5m2") and K == 32 and bt == at:
        el = {"s8": np.int8, "u8": np.uint8, "e4m3": NP["e4m3"], "e5m2": NP["e5m2"]}[at]
        def quads(r):
            q = np.ascontiguousarray(r.astype(np.uint32)).view(np.uint8).reshape(W, 32, 4)
            return q.view(el).astype(np.float64)
        a_map = [(g, 4 * t), (g + 8, 4 * t), (g, 4 * t + 16), (g + 8, 4 * t + 16)]
        for i, (rr, cc) in enumerate(a_map):
            q = quads(ra[i])
            for e in range(4):
                A[:, rr, cc + e] = q[..., e]
        for i, kk in enumerate([4 * t, 4 * t + 16]):
            q = quads(rb[i])
            for e in range(4):
                B[:, kk + e, g] = q[..., e]
    else:
        raise m.prog.unsupported(pc)
    C = np.zeros((W, M, N))
    cdt = np.float32 if ct == "f32" else np.int32
    c_map = [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]
    for i, (rr, cc) in enumerate(c_map):
        C[:, rr, cc] = np.ascontiguousarray(rc[i].astype(np.uint32)).view(cdt).astype(np.float64)
    D = np.matmul(A, B) + C
    dests = ins.operands[0].elems
    e2 = np.zeros(m.N, np.bool_)
    e2[wl.reshape(-1)] = True
    for i, (rr, cc) in enumerate(c_map):
        v = D[:, rr, cc]
        if dt_ == "f32":
            bits = v.astype(np.float32).view(np.uint32)
        else:
            bits = np.clip(v, -2**31, 2**31 - 1).astype(np.int64).astype(np.int32).view(np.uint32)
        full = np.zeros(m.N, np.uint32)
        full[wl.reshape(-1)] = bits.reshape(-1)
        m.write(dests[i], full, e2 & exe, pc)


# ============================================================================= cp.async
@handler("cp")
def _cp(m, ins, pc, exe, active):
    mods = _mods(m, pc)
    if "bulk" in mods:  # cp.async.bulk{.tensor}, cp.reduce.async.bulk{.tensor}
        return _async_copy.bulk(m, ins, pc, exe, active)
    if mods[:3] == ["async", "mbarrier", "arrive"]:
        # cp.async.mbarrier.arrive{.noinc} [mbar] (PTX ISA 9.1 §9.7.9.25.3.4): an arrive-on
        # the mbarrier once every prior cp.async of the thread completed; without .noinc the
        # pending count is incremented first, so only .noinc counts as one of the arrivals.
        # Modelled at once: the thread's copies complete now, then the arrive
        addr = _addr_u(m, ins.operands[0], pc)
        _async_copy.mbar_access(m, exe, addr, pc, write=False)
        m.async_wait_all_groups(exe, pc)
        for ln in np.flatnonzero(exe):
            m.mbar_arrive(int(ln), int(addr[ln]), 1 if "noinc" in mods else 0, 0, pc)
        return None
    if not mods or mods[0] != "async" or any(x in mods for x in ("tensor", "mbarrier")):
        raise m.prog.unsupported(pc)
    if "commit_group" in mods:
        m.async_commit(exe)
        return None
    if "wait_group" in mods or "wait_all" in mods:
        n = 0 if "wait_all" in mods else int(ins.operands[0].value or 0)
        if "wait_all" in mods:
            m.async_commit(exe)
        m.async_wait(exe, n, pc)
        return None
    ops = ins.operands
    size = int(ops[2].value or 0)
    if size not in (4, 8, 16):
        raise m.prog.unsupported(pc, f"cp.async size {ops[2].text}")
    src_size = (_lanes(m.read(ops[3], "u32", pc), m.N).astype(np.int64)
                if len(ops) > 3 and ops[3].kind in ("reg", "imm") else
                np.full(m.N, size, np.int64))
    dst = m.address(ops[0], pc)
    src = m.address(ops[1], pc)
    lanes = np.flatnonzero(exe)
    data = np.zeros((lanes.size, size), np.uint8)
    for s in np.unique(src_size[lanes]):
        s = int(min(s, size))
        if s <= 0:
            continue
        sel_l = lanes[src_size[lanes] == s]
        e2 = np.zeros(m.N, np.bool_)
        e2[sel_l] = True
        got = m.mem_access("global", src, s, e2, pc)
        data[np.isin(lanes, sel_l), :s] = got
    m.async_issue(dst, data, lanes, pc)


# ============================================================================= wgmma (sm_90a)
def _async_read(m, lane: int, flat_idx: np.ndarray, pc: int, wgmma: bool = False) -> None:
    """An async-proxy read of shared bytes (wgmma / tcgen05.mma operand), see
    :meth:`Machine.async_read`."""
    m.async_read(lane, flat_idx, pc, wgmma=wgmma)
def _desc_fields(desc: int):
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    swz = (desc >> 62) & 3
    return start, lbo, sbo, swz


def _kmajor_bytes(desc: int, rows: int, row_bytes: int) -> np.ndarray:
    """Byte addresses (rows, row_bytes) of a K-major operand described by an sm_90 matrix
    descriptor (PTX ISA 9.1 §9.7.15.5.1: start/LBO/SBO >> 4, swizzle in bits 62-63)."""
    start, lbo, sbo, swz = _desc_fields(desc)
    r = np.arange(rows)[:, None]
    kb = np.arange(row_bytes)[None, :]
    if swz == 0:  # interleaved 8x16 B core matrices
        a = start + (r // 8) * sbo + (r % 8) * 16 + (kb // 16) * lbo + kb % 16
        return a
    width = {1: 128, 2: 64, 3: 32}[swz]
    a = start + (r // 8) * sbo + (r % 8) * width + kb
    mask = width // 16 - 1
    return a ^ (((a >> 7) & mask) << 4)


def _mnmajor_bytes(desc: int, mn: int, k: int, es: int) -> np.ndarray:
    """Byte addresses (mn, k * es) of an MN-major (transposed) operand with a swizzled layout:
    rows of the swizzle width run along MN, 8-row groups along K are SBO apart, swizzle-width
    blocks along MN are LBO apart (PTX ISA 9.1 §9.7.15.5.1, canonical MN-major layouts)."""
    start, lbo, sbo, swz = _desc_fields(desc)
    if swz == 0:
        raise ValueError("MN-major interleaved layout")
    width = {1: 128, 2: 64, 3: 32}[swz]
    per = width // es
    n = np.arange(mn)[:, None]
    kk = np.arange(k)[None, :]
    a = start + (kk // 8) * sbo + (kk % 8) * width + (n % per) * es + (n // per) * lbo
    mask = width // 16 - 1
    a = a ^ (((a >> 7) & mask) << 4)
    # (mn, k) element addresses -> byte addresses (mn, k * es)
    return (a[:, :, None] + np.arange(es)).reshape(mn, k * es)


def _wg_whole(m, ins, pc, bases: np.ndarray, ex: np.ndarray) -> None:
    """HB3: a ``wgmma.mma_async.sync.aligned`` that some warps of its warpgroup do not execute
    with the others (they skipped it, wait elsewhere or exited): "all threads in the
    warpgroup must execute the same wgmma.mma_async" (PTX ISA 9.1 §9.7.15.5; min-PC
    scheduling runs a lagging warp up to the instruction first, so a warp missing here is
    not merely late). ``ex`` (G, 128): the executing lanes of each issuing warpgroup."""
    warps = ex.reshape(ex.shape[0], 4, 32).any(axis=2)  # (G, 4)
    if warps.all():
        return
    g = int(np.flatnonzero(~warps.all(axis=1))[0])
    key = ("HB3", pc)
    if key in m.findings:
        return
    from verifier.findings import Finding, Note
    base = int(bases[g])
    w0 = int(m.tid[base]) // 32
    missing = [w0 + k for k in range(4) if not warps[g, k]]
    m.findings[key] = Finding(
        rule="HB3", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
        message=(f"'{ins.opcode.split(' ')[0]}' is executed by warpgroup {w0 // 4} "
                 f"({m._who(int(m.glane[base])).split(' of ')[-1]}) without its warp(s) "
                 f"{', '.join(map(str, missing))}: every thread of the warpgroup must execute "
                 f"the same wgmma"),
        notes=[Note(message="the warps of a warpgroup must reach each wgmma together (no "
                            "warp-dependent branch around it)")])


_TF32 = np.dtype(np.float32)  # marker: .tf32 operands are f32 bit patterns, truncated
_WG_EL = {"f16": np.dtype(np.float16), "bf16": BF16, "tf32": _TF32, "e4m3": NP["e4m3"],
          "e5m2": NP["e5m2"], "s8": np.dtype(np.int8), "u8": np.dtype(np.uint8)}


@handler("wgmma")
def _wgmma(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    if "fence" in mods:
        m.wg_fence(exe)
        return None
    if "commit_group" in mods or "wait_group" in mods:
        # in-flight registers (HB6): per thread, groups are numbered by its commits
        if "commit_group" in mods:
            m.wg_committed[exe] += 1
        elif m.wg_pending:
            keep = m.wg_committed - int(ins.operands[0].value or 0)
            for k in list(m.wg_pending):
                pend = m.wg_pending[k]
                pend[exe & (pend > 0) & (pend <= keep)] = 0
                if not pend.any():
                    del m.wg_pending[k]
        # values are computed at issue; the happens-before analysis tracks the operand reads of
        # each committed group and orders them for a thread only after its wait_group covers it
        lanes = np.flatnonzero(exe)
        if not m.ntr:
            return None
        n = int(ins.operands[0].value or 0) if "wait_group" in mods else 0
        lanes = lanes[lanes < m.ntr]
        if not lanes.size:
            return None
        # per (CTA, warpgroup) of the executing lanes, in lane order (lanes ascend, so their
        # keys do): a commit closes one epoch per warpgroup; a wait orders each of its lanes
        # after the latest epoch among the groups it covers
        cta = m.cta_local[lanes]
        wgk = cta * (m.T // 128 + 1) + m.tid[lanes] // 128
        starts = np.flatnonzero(np.r_[True, wgk[1:] != wgk[:-1]])
        ends = np.r_[starts[1:], lanes.size]
        for b, e_ in zip(starts.tolist(), ends.tolist()):
            c = int(cta[b])
            key = (c, int(m.tid[lanes[b]]) // 128)
            if "commit_group" in mods:  # the warpgroup's own async unit (WGMMA_UNIT + wg)
                m.wg_clk[key] += 1
                m.wg_groups.setdefault(key, []).append(int(m.wg_clk[key]))
            else:
                groups = m.wg_groups.get(key, [])
                covered = groups[:len(groups) - n] if n else groups
                if covered:
                    ac = int(m.acol[c]) + WGMMA_UNIT + key[1]
                    sel = lanes[b:e_]
                    m.vc[sel, ac] = np.maximum(m.vc[sel, ac], max(covered))
        return None
    if "mma_async" not in mods or "sp" in mods:
        raise m.prog.unsupported(pc)
    shape = next(x for x in mods if x.startswith("m64n"))
    N = int(shape[4:shape.index("k")])
    K = int(shape[shape.index("k") + 1:])
    if len(types) < 3:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' without its three types")
    dt_, at, bt = types[0], types[1], types[2]
    ops = ins.operands
    a_reg = ops[1].kind == "vector"
    rest = ops[3:]
    trans_b = int(rest[-1].value or 0) if (at in ("f16", "bf16") and len(rest) >= 4) else 0
    trans_a = int(rest[-2].value or 0) if (not a_reg and at in ("f16", "bf16")) else 0
    if trans_a:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' with a transposed (MN-major) A operand")
    # the executing warpgroups: four consecutive warps of a CTA, the first one's rank a multiple
    # of 4 (PTX ISA 9.1 §9.7.15.1); a CTA whose size is not a multiple of 128 threads has a
    # partial last warpgroup, which may not issue wgmma (its other warps may run anything)
    run = np.flatnonzero(exe)
    if not run.size:
        return None
    wtid = m.tid[run] - m.tid[run] % 128
    bases = np.unique(run - m.tid[run] + wtid)
    if (wtid + 128 > m.T).any():
        first = int(wtid[wtid + 128 > m.T][0])
        raise m.prog.unsupported(pc, f"wgmma by the partial warpgroup of threads {first}-"
                                     f"{m.T - 1} of a {m.T}-thread CTA")
    L = np.arange(128)
    ex = exe[bases[:, None] + L[None, :]]  # (G, 128)
    _wg_whole(m, ins, pc, bases, ex)
    # HB10: no wgmma.fence yet, or operand registers accessed since the thread's last one
    # (a register named without '%' parses as a symbol)
    acc_ = [d for d in ops[0].elems if d.kind in ("reg", "symbol")]
    regs_ = acc_ + ([d for d in ops[1].elems if d.kind in ("reg", "symbol")] if a_reg else [])
    keys_ = [(d.name or d.text, m._info(d.name or d.text, pc).key) for d in regs_]
    shape_code = 1 + 1000 * N + K  # the same shape (m64nNkK): chained accumulators need no fence
    m.wg_fence_check(pc, exe, keys_, shape_code, len(acc_))
    m.wg_used(exe, [k for _, k in keys_], shape_code, len(acc_))
    if dt_ not in ("f32", "s32") or len(ops[0].elems) != N // 2:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' with a .{dt_} accumulator of "
                                     f"{len(ops[0].elems)} registers (only .f32 / .s32 "
                                     f"accumulators, N/2 registers, are modelled)")
    # operand types (PTX ISA 9.1 §9.7.15.5.1): f16 / bf16 / tf32 with their own kind, E4M3 /
    # E5M2 mixed freely, s8 / u8 mixed freely; K * element size is 32 bytes
    el_a, el_b = _WG_EL.get(at), _WG_EL.get(bt)
    if el_a is None or el_b is None or (at != bt and not (
            {at, bt} <= {"e4m3", "e5m2"} or {at, bt} <= {"s8", "u8"})):
        raise m.prog.unsupported(pc)
    el = el_a
    es = np.dtype(el).itemsize
    if K * es != 32:
        raise m.prog.unsupported(pc, f"'{ins.opcode}': K = {K} for .{at} operands")
    if a_reg and es != 2:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' with a .{at} A operand in registers "
                                     f"(register A is modelled for .f16 / .bf16)")
    S = m.shared.shape[1]
    sh = m.shared.reshape(-1)
    scale_d = _lanes(m.read(rest[0], "pred", pc), m.N)
    dests = ops[0].elems
    w, lane = L // 32, L % 32
    g, t = lane // 4, lane % 4
    bdesc_all = _lanes(m.read(ops[2], "b64", pc), m.N)
    adesc_all = None if a_reg else _lanes(m.read(ops[1], "b64", pc), m.N)
    acc_dt = np.float32 if dt_ == "f32" else np.int32
    if not ex.all():
        m.warp_members(pc, exe, np.uint32(0xFFFFFFFF))
    ctas = m.cta_local[bases].astype(np.int64)
    cache = m.__dict__.setdefault("_wg_idx_cache", {})

    def operand_idx(desc: int, rows: int, trans: bool) -> np.ndarray:
        # byte addresses of an operand per descriptor value (the same for every CTA and every
        # loop iteration of a pipeline stage: cached)
        key = (desc, rows, K, es, trans)
        idx = cache.get(key)
        if idx is None:
            idx = (_mnmajor_bytes(desc, rows, K, es) if trans else
                   _kmajor_bytes(desc, rows, K * es))
            if len(cache) > 4096:
                cache.clear()
            cache[key] = idx
        return idx

    def gather(descs: np.ndarray, rows: int, trans: bool, what: str, el) -> np.ndarray:
        """(G, rows, K) float64 operand values of every warpgroup, async reads recorded."""
        flat = np.empty((bases.size, rows, K * es), np.int64)
        for i in range(bases.size):
            idx = operand_idx(int(descs[bases[i]]), rows, trans)
            if (idx < 0).any() or (idx >= m.smem_bytes).any():
                raise _Fault("fault", f"wgmma {what} operand outside shared memory "
                                      f"({m.prog.where(pc)})")
            flat[i] = ctas[i] * S + idx
        _async_read(m, bases, flat.reshape(bases.size, -1), pc, wgmma=True)
        if el is _TF32:  # f32 bits, the low 13 mantissa bits not used (PTX ISA 9.1 .tf32)
            return (sh[flat].view(np.uint32) & np.uint32(0xFFFFE000)).view(
                np.float32).astype(np.float64)
        return sh[flat].view(el).astype(np.float64)

    Bv = gather(bdesc_all, N, bool(trans_b), "B", el_b)  # (G, N, K)
    if a_reg:
        Av = np.zeros((bases.size, 64, K))
        rows_ = [16 * w + g, 16 * w + g + 8, 16 * w + g, 16 * w + g + 8]
        cols_ = [2 * t, 2 * t, 2 * t + 8, 2 * t + 8]
        lanes_g = (bases[:, None] + L[None, :])  # (G, 128)
        for i in range(4):
            ra = _lanes(m.read(ops[1].elems[i], "b32", pc), m.N)[lanes_g]
            h = np.ascontiguousarray(ra.astype(np.uint32)).view(np.uint16).reshape(
                bases.size, 128, 2).view(el).astype(np.float64)
            Av[:, rows_[i], cols_[i]] = h[:, :, 0]
            Av[:, rows_[i], cols_[i] + 1] = h[:, :, 1]
    else:
        Av = gather(adesc_all, 64, False, "A", el_a)  # (G, 64, K)
    D = np.matmul(Av, Bv.transpose(0, 2, 1))  # (G, 64, N), exact products, f64 sums
    lanes = (bases[:, None] + L[None, :]).reshape(-1)
    e2 = np.zeros(m.N, np.bool_)
    e2[lanes] = True
    e2 &= exe
    sd = _lanes(scale_d, m.N)[lanes]
    # accumulator fragment layout (PTX ISA 9.1 §9.7.15.5.1, m64nNk16 D): register 4j+q of
    # lane L holds row 16*warp + L/4 (+8 for q >= 2), column 8j + 2*(L%4) + (q&1)
    qs = np.arange(N // 2)
    R = (16 * w + g)[None, :] + np.where((qs % 4) >= 2, 8, 0)[:, None]  # (N/2, 128)
    C = (8 * (qs // 4) + (qs % 2))[:, None] + (2 * t)[None, :]
    V = D[:, R, C].transpose(1, 0, 2).reshape(N // 2, -1)  # (N/2, G*128) in lane order
    # every accumulator register at once: (N/2, lanes) old bits, new bits
    every = lanes.size == m.N  # all warpgroups of the batch issue it (lanes = 0..N-1)
    old = np.empty((N // 2, lanes.size), np.uint32)
    for k in range(N // 2):
        r = _lanes(m.read(dests[k], "b32", pc), m.N)
        old[k] = r if every else r[lanes]
    cur = np.where(sd[None, :], old.view(acc_dt).astype(np.float64), 0.0)
    v = V + cur
    if acc_dt == np.float32:
        bits = v.astype(np.float32).view(np.uint32)
    else:
        bits = np.clip(v, -2**31, 2**31 - 1).astype(np.int64).astype(np.int32).view(np.uint32)
    direct = every and bool(e2.all())
    env = m.prog.envs[pc]
    for k in range(N // 2):
        if every:
            full = bits[k]
        else:
            full = np.zeros(m.N, np.uint32)
            full[lanes] = bits[k]
        d = dests[k]
        if direct and d.kind == "reg":
            info = env.lookup(d.name or d.text)
            if info is not None and info.storage == np.uint32:
                # what Machine.write does with a 32-bit value for every lane: the register
                # takes the array (wgmma itself is exempt from the HB6 register check)
                m.regs[info.key] = full
                continue
        m.write(d, full, e2, pc)
    # the accumulator (and register A) stay in flight until a wait_group retires the group the
    # next commit_group of each thread forms
    # (the operand keys HB10 took: the accumulator first, then register A)
    for j, (_, k) in enumerate(keys_):
        if j >= len(acc_):
            m.wg_a_keys.add(k)
        pend = m.wg_pending.setdefault(k, np.zeros(m.N, dtype=np.int64))
        pend[exe] = m.wg_committed[exe] + 1
    return None


def proxy_fence_spaces(ins) -> tuple[str, ...]:
    """The state spaces whose generic / async-proxy accesses fence ``ins`` orders (HB4):
    ``fence.proxy.async`` both, ``fence.proxy.async.shared::{cta,cluster}`` shared memory,
    ``fence.proxy.async.global`` global memory (PTX ISA 9.1 §9.7.13.4: the optional state space
    restricts the fence to it); every other fence none (``fence.mbarrier_init`` orders only
    the mbarrier inits, for other CTAs: not a proxy fence for data)."""
    p = ins.parts
    if "proxy" not in p or not any(x.startswith("async") for x in p[2:]):
        return ()
    if any(x.startswith("shared") for x in p):
        return ("shared",)
    if "global" in p:
        return ("global",)
    return ("shared", "global")


def counts_as_proxy_fence(ins) -> bool:
    """Whether fence ``ins`` counts for HB4 on shared memory (``Machine.pfence``)."""
    return "shared" in proxy_fence_spaces(ins)


@handler("fence")
def _fence(m, ins, pc, exe, active):
    spaces = proxy_fence_spaces(ins)
    if spaces:
        m.proxy_fence(exe, spaces)
    return None


# ============================================================================= mbarrier
def _addr_u(m, op, pc):
    if op.kind == "address":
        return m.address(op, pc)
    return _lanes(m.read(op, "u64", pc), m.N).astype(np.int64)


@handler("mbarrier")
def _mbarrier(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    ops = ins.operands
    kind = mods[0]
    if any(x == "shared::cluster" for x in mods) and kind not in (
            "arrive", "arrive_drop", "expect_tx", "complete_tx"):
        raise m.prog.unsupported(pc, f"'{ins.opcode}' on a cluster address")
    if kind == "init":
        addr = _addr_u(m, ops[0], pc)
        cnt = _lanes(m.read(ops[1], "u32", pc), m.N)
        _async_copy.mbar_access(m, exe, addr, pc, write=True)
        for ln in np.flatnonzero(exe):
            m.mbar_init(int(ln), int(addr[ln]), int(cnt[ln]), pc)
            _async_copy.note_init(m, int(ln), int(addr[ln]), pc)
        return None
    if kind == "inval":
        addr = _addr_u(m, ops[0], pc)
        _async_copy.mbar_access(m, exe, addr, pc, write=True)
        from emulator import cluster as _cluster  # (cluster imports this module)
        for ln in np.flatnonzero(exe):
            key = m.mbar_key(int(ln), int(addr[ln]))
            st = m.mbar.pop(key, None)
            if st is not None:
                _cluster.late_arrival_check(m, key[0], key[1], st, inval_pc=pc)
                if m.tmap_probe is not None:
                    m.tmap_probe.close(st)
                _async_copy.check_inval(m, st, int(addr[ln]), pc)
        return None
    if kind in ("arrive", "arrive_drop", "expect_tx", "complete_tx"):
        has_dst = kind in ("arrive", "arrive_drop") and ops[0].kind != "address"
        aop = ops[1] if has_dst else ops[0]
        addr = _addr_u(m, aop, pc)
        rest = ops[2:] if has_dst else ops[1:]
        val = (_lanes(m.read(rest[0], "u32", pc), m.N) if rest else None)
        _async_copy.mbar_access(m, exe, addr, pc, write=False)
        states = np.zeros(m.N, np.uint64)
        for ln in np.flatnonzero(exe):
            a = int(addr[ln])
            if kind == "expect_tx":
                st = m.mbar_get(int(ln), a, pc)
                st["tx"] += int(val[ln])
            elif kind == "complete_tx":
                m.mbar_complete_tx(int(ln), a, int(val[ln]), pc, asynchronous=False)
            elif "expect_tx" in mods:
                pend = int(m.mbar_get(int(ln), a, pc)["pending"])
                states[ln] = (np.uint64(m.mbar_arrive(int(ln), a, 1, int(val[ln]), pc))
                              << np.uint64(63)) | np.uint64(pend & _PENDING_MASK)
            else:
                c = int(val[ln]) if val is not None else 1
                st = m.mbar_get(int(ln), a, pc)
                if kind == "arrive_drop":
                    st["count"] -= c
                pend = int(st["pending"])
                if "noComplete" in mods and pend - c <= 0 and int(st["tx"]) == 0:
                    # PTX ISA 9.1 §9.7.13.15.13: a .noComplete arrive must not complete the
                    # phase (undefined behaviour)
                    raise _Fault("fault", f"'{ins.opcode}' of {c} on an mbarrier with {pend} "
                                          f"pending arrivals would complete the phase "
                                          f"(.noComplete: undefined) ({m.prog.where(pc)})")
                states[ln] = (np.uint64(m.mbar_arrive(int(ln), a, c, 0, pc))
                              << np.uint64(63)) | np.uint64(pend & _PENDING_MASK)
        if has_dst:
            # the opaque state: the phase parity in bit 63, the pending arrival count before
            # the arrive in the low bits (mbarrier.pending_count)
            m.write(ops[0], states, exe, pc)
        return None
    if kind == "pending_count":
        st_ = _lanes(m.read(ops[1], "b64", pc), m.N).astype(np.uint64)
        m.write(ops[0], (st_ & np.uint64(_PENDING_MASK)).astype(np.uint32), exe, pc)
        return None
    if kind in ("try_wait", "test_wait"):
        addr = _addr_u(m, ops[1], pc)
        if "parity" in mods:
            par = _lanes(m.read(ops[2], "u32", pc), m.N)
        else:
            # the state an mbarrier.arrive returned (opaque in PTX, PTX ISA 9.1
            # §9.7.13.15.16): here the parity of its phase in bit 63; that phase is complete
            # once the current phase's parity differs, as for a parity wait
            par = (_lanes(m.read(ops[2], "b64", pc), m.N).astype(np.uint64) >> np.uint64(63)
                   ).astype(np.int64)
        _async_copy.mbar_access(m, exe, addr, pc, write=False)
        # .relaxed: no acquire (PTX ISA 9.1 §9.7.13.15.16 .sem; the default is .acquire)
        ok = m.mbar_wait(pc, exe, addr, par, acquire="relaxed" not in mods)
        m.write(ops[0], ok, exe & ~m.blocked, pc)
        m.pc[active & ~m.blocked] = pc + 1
        return True
    raise m.prog.unsupported(pc)


# ============================================================================= tcgen05 (sm_100a)
_SWZ100 = {0: 0, 2: 1, 4: 2, 6: 3}  # sm_100 layout code -> sm_90 swizzle code (128/64/32 B)


def _desc100(desc: int) -> int:
    """Re-express an sm_100 shared-memory descriptor (swizzle in bits 61-63, PTX ISA 9.1
    §9.7.16.4.1) in the sm_90 field layout used by :func:`_kmajor_bytes`."""
    code = (desc >> 61) & 7
    if code not in _SWZ100:
        raise ValueError(f"swizzle code {code}")
    low = desc & ((1 << 46) - 1)
    return low | (_SWZ100[code] << 62)


def _tmem(m):
    if m.tmem is None:
        m.tmem = np.zeros((m.shared.shape[0], 128, 512), np.uint32)
    return m.tmem


#: tcgen05.ld / tcgen05.st shapes: 32-bit registers per ``.num`` repetition (PTX ISA 9.1
#: §9.7.16.8.3-4, Tables 49 / 50).
TMEM_SHAPE_REGS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}


def tmem_fragment(mods, t: np.ndarray, half: int = 0):
    """The TMEM cells of one warp's ``tcgen05.ld`` / ``tcgen05.st``.

    ``mods``: the instruction's modifiers (shape, ``.num`` as ``xN``, ``pack::16b`` /
    ``unpack::16b``); ``t``: (k,) lane ids (0-31) of the executing threads; ``half``: the
    immediate column offset of the second half of a ``16x32bx2`` access. Returns ``(rows,
    cols, nregs, packed)``: int64 arrays of shape (k, nregs, 2 if packed else 1), the TMEM lane
    and column (relative to the address's lane and column) that register ``r`` of thread
    ``t[i]`` holds, and for a packed access the two columns whose low 16 bits form its low and
    high half. None when the shape is not one of :data:`TMEM_SHAPE_REGS`.

    Layouts (lane ``t``, register ``r``): the PTX ISA 9.1 tcgen05 matrix-fragment figures of
    each shape, as CUTLASS's ``SM100_TMEM_LOAD_*`` copy traits (``copy_traits_sm100.hpp``)
    lay them out; ``.num`` repeats the pattern along the columns:

    * ``32x32b``: lane ``t``, column ``r``;
    * ``16x64b``: lane ``t//4 + 8 (t%2)``, column ``(t//2)%2 + 2r``;
    * ``16x128b``: lane ``t//4 + 8 (r%2)``, column ``t%4 + 4 (r//2)``;
    * ``16x256b``: lane ``t//4 + 8 ((r//2)%2)``, column ``r%2 + 2 (t%4) + 8 (r//4)``
      (the m16n8 accumulator fragment of ``mma.sync``);
    * ``16x32bx2``: lane ``t%16``, column ``r``, plus ``half`` for threads 16-31.

    With ``.pack::16b`` (ld) / ``.unpack::16b`` (st) each register's 32 bits are two 16-bit
    elements in the low halves of two adjacent columns: the logical column ``c`` above becomes
    physical columns ``2c`` and ``2c + 1``."""
    shape = next((x for x in mods if x in TMEM_SHAPE_REGS), None)
    num = next((int(x[1:]) for x in mods if x.startswith("x") and x[1:].isdigit()), None)
    if shape is None or num is None:
        return None
    n = num * TMEM_SHAPE_REGS[shape]
    r = np.arange(n, dtype=np.int64)[None, :]
    t = np.asarray(t, np.int64)[:, None]
    if shape == "32x32b":
        rows, cols = t + 0 * r, r + 0 * t
    elif shape == "16x64b":
        rows, cols = t // 4 + 8 * (t % 2) + 0 * r, (t // 2) % 2 + 2 * r
    elif shape == "16x128b":
        rows, cols = t // 4 + 8 * (r % 2), t % 4 + 4 * (r // 2)
    elif shape == "16x256b":
        rows, cols = t // 4 + 8 * ((r // 2) % 2), r % 2 + 2 * (t % 4) + 8 * (r // 4)
    else:  # 16x32bx2
        rows, cols = t % 16 + 0 * r, r + np.where(t >= 16, half, 0)
    packed = "pack::16b" in mods or "unpack::16b" in mods
    if packed:
        return (np.stack([rows, rows], axis=2), np.stack([2 * cols, 2 * cols + 1], axis=2), n,
                True)
    return rows[:, :, None], cols[:, :, None], n, False


def tmem_allocated(m, c: int, col0: int, ncols: int, pc: int, what: str) -> None:
    """Fault unless TMEM columns ``col0 .. col0 + ncols - 1`` of batch CTA ``c`` are allocated
    (``tcgen05.alloc``): an MMA / copy / load / store outside the allocation is an illegal
    access (PTX ISA 9.1 §9.7.16.7.1). ``what`` names the operand in the message."""
    used = m.tmem_used[c, col0:col0 + ncols]
    if used.size < ncols or not used.all():
        bad = col0 + (int(np.flatnonzero(~used)[0]) if used.size and not used.all() else used.size)
        raise _Fault("fault", f"'{m.prog.insts[pc].opcode}' {what} reaches TMEM column {bad}, "
                              f"which is not allocated (tcgen05.alloc) ({m.prog.where(pc)})")


def _warp_leaders(m, exe) -> list[int]:
    """The first executing lane of each (CTA, warp) with one (a CTA has at most 32 warps;
    lane ids, and so the warp ids, ascend)."""
    lanes = np.flatnonzero(exe)
    if not lanes.size:
        return []
    wid = m.cta_local[lanes].astype(np.int64) * 32 + m.tid[lanes] // 32
    return lanes[np.r_[True, wid[1:] != wid[:-1]]].tolist()


@handler("tcgen05")
def _tcgen05(m, ins, pc, exe, active):
    mods, types = m._types[pc]
    op = mods[0]
    ops = ins.operands
    if "cta_group::2" in mods:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' (2-CTA)")
    if op == "relinquish_alloc_permit":
        # the CTA gives up its right to allocate: any later tcgen05.alloc by any of its warps
        # is illegal (PTX ISA 9.1 §9.7.16.7.1)
        for ln in _warp_leaders(m, exe):
            m.tmem_relinquished[int(m.cta_local[ln])] = True
        return None
    if op in ("wait::ld", "wait::st", "fence::before_thread_sync", "fence::after_thread_sync"):
        return None
    if op == "alloc":
        addr = _addr_u(m, ops[0], pc)
        ncol = _lanes(m.read(ops[1], "u32", pc), m.N)
        tm = _tmem(m)
        for ln in _warp_leaders(m, exe):  # warp-collective: one allocation per warp
            c = int(m.cta_local[ln])
            n = int(ncol[ln])
            # PTX ISA 9.1 §9.7.16.7.1: the column count is a power of two in 32..512, and no
            # alloc follows the CTA's relinquish_alloc_permit
            if n < 32 or n > 512 or n & (n - 1):
                raise _Fault("fault", f"tcgen05.alloc of {n} columns: the column count must "
                                      f"be a power of two in 32..512 ({m.prog.where(pc)})")
            if m.tmem_relinquished[c]:
                raise _Fault("fault", f"tcgen05.alloc after the CTA relinquished its "
                                      f"allocation permit (tcgen05.relinquish_alloc_permit) "
                                      f"({m.prog.where(pc)})")
            base = m.tmem_first_fit(c, n)
            if base < 0:
                free = int(512 - m.tmem_used[c].sum())
                raise _Fault("fault", f"tcgen05.alloc of {n} columns: only {free} free "
                                      f"({m.prog.where(pc)})")
            m.tmem_used[c, base:base + n] = True
            one = np.zeros(m.N, np.bool_)
            one[ln] = True
            m.mem_access("shared", addr, 4, one, pc,
                         data=np.array([[base]], np.uint32).view(np.uint8).reshape(1, 4))
        del tm
        return None
    if op == "dealloc":
        taddr = _lanes(m.read(ops[0], "u32", pc), m.N) if ops[0].kind != "imm" else \
            np.full(m.N, int(ops[0].value or 0), np.int64)
        ncol = _lanes(m.read(ops[1], "u32", pc), m.N)
        for ln in _warp_leaders(m, exe):  # warp-collective: one deallocation per warp
            c = int(m.cta_local[ln])
            c0, n = int(taddr[ln]) & 0xFFFF, int(ncol[ln])
            if c0 + n > 512 or not m.tmem_used[c, c0:c0 + n].all():
                raise _Fault("fault", f"tcgen05.dealloc of columns {c0}-{c0 + n - 1}, which are "
                                      f"not all allocated (a double free, or no matching "
                                      f"alloc) ({m.prog.where(pc)})")
            m.tmem_used[c, c0:c0 + n] = False
        return None
    if op in ("ld", "st"):
        return _tmem_ld_st(m, ins, pc, exe, mods, op)
    if op == "commit":
        if "mbarrier::arrive::one" not in mods or "multicast::cluster" in mods:
            raise m.prog.unsupported(pc)
        addr = _addr_u(m, ops[0], pc)
        for ln in np.flatnonzero(exe):  # mma completes at issue: the arrive is immediate
            c = int(m.cta_local[ln])
            epoch = m.async_complete_epoch(c)
            st = m.mbar_get(int(ln), int(addr[ln]) & 0xFFFFFFFF, pc)
            ac = int(m.acol[c])
            st["vc"][ac] = max(int(st["vc"][ac]), epoch)  # the async unit's release
            st["async_in_phase"] = True  # the MMAs may complete later (Machine.mbar_wait)
            m.mbar_arrive(int(ln), int(addr[ln]) & 0xFFFFFFFF, 1, 0, pc)
        return None
    if op == "mma":
        return _tc_mma(m, ins, pc, exe, mods)
    raise m.prog.unsupported(pc)


def _tmem_ld_st(m, ins, pc, exe, mods, op):
    """``tcgen05.ld.sync.aligned.<shape>.<num>{.pack::16b}.b32 regs, [taddr]{, imm}`` and
    ``tcgen05.st...{.unpack::16b}.b32 [taddr]{, imm}, regs`` (shapes and layouts:
    :func:`tmem_fragment`). Faults: a lane outside 128 x 512, outside the warp's 32-lane slab,
    or a column outside the CTA's allocation (PTX ISA 9.1 §9.7.16.8.3, §9.7.16.7.1)."""
    ops = ins.operands
    if any(x.startswith("red") or x in ("min", "max") for x in mods):
        raise m.prog.unsupported(pc, f"'{ins.opcode}' (reduction)")
    regs = next(o for o in ops if o.kind == "vector").elems
    aop = next(o for o in ops if o.kind == "address")
    imms = [o for o in ops if o.kind == "imm"]
    if ("pack::16b" in mods or "unpack::16b" in mods) and "16x32bx2" in mods:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' (16x32bx2 with 16-bit packing)")
    taddr = _lanes(m.read(aop.base, "u32", pc) if aop.base is not None and
                   aop.base.kind == "reg" else np.uint32(0), m.N).astype(np.int64) + \
        int(aop.value or 0)
    lanes = np.flatnonzero(exe)
    frag = tmem_fragment(mods, m.laneid[lanes], int(imms[0].value or 0) if imms else 0)
    if frag is None:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' shape")
    drow, dcol, nregs, packed = frag
    if len(regs) != nregs:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' with {len(regs)} registers")
    tm = _tmem(m)
    row = ((taddr[lanes] >> 16) & 0xFFFF)[:, None, None] + drow
    col = (taddr[lanes] & 0xFFFF)[:, None, None] + dcol
    cta = m.cta_local[lanes]
    if (row > 127).any() or (col > 511).any():
        raise _Fault("fault", f"TMEM access outside 128 lanes x 512 columns "
                              f"({m.prog.where(pc)})")
    # warp w of its warpgroup reaches only TMEM lanes 32 (w % 4) .. 32 (w % 4) + 31 (PTX ISA
    # 9.1, the tcgen05 tensor-memory access restrictions of tcgen05.ld / tcgen05.st): another
    # warp's slab is an illegal access, not a value
    q = ((m.tid[lanes] // 32) % 4)[:, None, None]
    off = (row < 32 * q) | (row > 32 * q + 31)
    if off.any():
        k = int(np.flatnonzero(off.any(axis=(1, 2)))[0])
        w = int(m.tid[lanes][k]) // 32
        raise _Fault("fault", f"'{ins.opcode}' by warp {w} reaches TMEM lane "
                              f"{int(row[k][off[k]][0])}, outside its lanes {32 * (w % 4)}-"
                              f"{32 * (w % 4) + 31} (a warp accesses the 32-lane slab of its "
                              f"position in the warpgroup) ({m.prog.where(pc)})")
    C3 = np.broadcast_to(cta[:, None, None], row.shape)
    bad = ~m.tmem_used[C3, col]  # columns outside the CTA's allocation (§9.7.16.7.1)
    if bad.any():
        raise _Fault("fault", f"'{ins.opcode}' reaches TMEM column {int(col[bad][0])}, which "
                              f"is not allocated (tcgen05.alloc) ({m.prog.where(pc)})")
    if op == "ld":
        cells = tm[C3, row, col]  # (k, nregs, 1 or 2)
        val = (cells[..., 0] & 0xFFFF) | ((cells[..., 1] & 0xFFFF) << 16) if packed else \
            cells[..., 0]
        for j, r in enumerate(regs):
            full = np.zeros(m.N, np.uint32)
            full[lanes] = val[:, j]
            m.write(r, full, exe, pc)
    else:
        for j, r in enumerate(regs):
            v = _lanes(m.read(r, "b32", pc), m.N)[lanes].astype(np.uint32)
            if packed:  # the two 16-bit halves into the low halves of two columns
                tm[cta, row[:, j, 0], col[:, j, 0]] = v & 0xFFFF
                tm[cta, row[:, j, 1], col[:, j, 1]] = v >> 16
            else:
                tm[cta, row[:, j, 0], col[:, j, 0]] = v


_TC_TYPES = {"kind::f16": {0: np.float16, 1: BF16},
             "kind::f8f6f4": {0: NP["e4m3"], 1: NP["e5m2"]},
             "kind::tf32": {2: np.float32},
             "kind::i8": {0: np.uint8, 1: np.int8}}


def _tc_mma(m, ins, pc, exe, mods):
    """tcgen05.mma cta_group::1, A and B from smem descriptors, D (f32) in TMEM; the instruction
    descriptor gives M (bits 24-28, >>4), N (bits 17-22, >>3), types (7-9, 10-12), transposes
    (15, 16) (PTX ISA 9.1 §9.7.16.4.2)."""
    kind = next((x for x in mods if x.startswith("kind::")), None)
    if kind not in _TC_TYPES or any(x in mods for x in ("ws", "sp", "block_scale")):
        raise m.prog.unsupported(pc)
    ops = ins.operands
    a_tmem = ops[1].kind == "address"
    tm = _tmem(m)
    S = m.shared.shape[1]
    sh = m.shared.reshape(-1)
    dt_ = _lanes(m.address(ops[0], pc), m.N)
    ad = (_lanes(m.address(ops[1], pc), m.N) if a_tmem else
          _lanes(m.read(ops[1], "b64", pc), m.N))
    bd = _lanes(m.read(ops[2], "b64", pc), m.N)
    idv = _lanes(m.read(ops[3], "u32", pc), m.N)
    en = _lanes(m.read(ops[4], "pred", pc), m.N) if len(ops) > 4 else None
    for ln in np.flatnonzero(exe):
        idesc = int(idv[ln])
        Mv, Nv = ((idesc >> 24) & 0x1F) << 4, ((idesc >> 17) & 0x3F) << 3
        at, bt = (idesc >> 7) & 7, (idesc >> 10) & 7
        ta, tb = (idesc >> 15) & 1, (idesc >> 16) & 1
        dcode = (idesc >> 4) & 3
        want = 2 if kind == "kind::i8" else 1  # s32 / f32 accumulator
        if dcode != want or Mv not in (64, 128):
            raise m.prog.unsupported(pc, f"'{ins.opcode}' with idesc 0x{idesc:x} (need an "
                                         f"f32/s32 accumulator, M=64 or 128)")
        acc = np.int32 if want == 2 else np.float32
        types = _TC_TYPES[kind]
        if at not in types or bt not in types:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' operand types {at}/{bt}")
        ea, eb = np.dtype(types[at]), np.dtype(types[bt])
        K = 32 // ea.itemsize  # bytes per K step: 32 (f16 K=16, fp8 K=32, tf32 K=8)
        try:
            db = _desc100(int(bd[ln]))
            da = None if a_tmem else _desc100(int(ad[ln]))
        except ValueError as e:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' descriptor ({e})") from None
        aidx = None if a_tmem else (_mnmajor_bytes(da, Mv, K, ea.itemsize) if ta else
                                    _kmajor_bytes(da, Mv, K * ea.itemsize))
        bidx = (_mnmajor_bytes(db, Nv, K, eb.itemsize) if tb else
                _kmajor_bytes(db, Nv, K * eb.itemsize))
        for idx in ((bidx,) if a_tmem else (aidx, bidx)):
            if (idx < 0).any() or (idx >= m.smem_bytes).any():
                raise _Fault("fault", f"tcgen05.mma operand outside shared memory "
                                      f"({m.prog.where(pc)})")
        c = int(m.cta_local[ln])
        if a_tmem:  # A (M x K) in TMEM: row r in lane r, K packed into 32-bit columns
            ta_ = int(ad[ln])
            al, ac = (ta_ >> 16) & 0xFFFF, ta_ & 0xFFFF
            ncol = K * ea.itemsize // 4
            if al + (Mv if Mv == 128 else 112) > 128 or ac + ncol > 512:
                raise _Fault("fault", f"tcgen05.mma A outside TMEM ({m.prog.where(pc)})")
            tmem_allocated(m, c, ac, ncol, pc, "A operand")
            r = np.arange(Mv)
            arows = al + (r if Mv == 128 else 32 * (r // 16) + r % 16)
            A = np.ascontiguousarray(tm[c, arows, ac:ac + ncol]).view(ea).astype(
                np.float64).reshape(Mv, K)
        else:
            A = np.ascontiguousarray(sh[c * S + aidx]).view(ea).astype(np.float64)
        B = np.ascontiguousarray(sh[c * S + bidx]).view(eb).astype(np.float64)
        _async_read(m, int(ln), c * S + bidx, pc)
        if not a_tmem:
            _async_read(m, int(ln), c * S + aidx, pc)
        D = A @ B.T
        taddr = int(dt_[ln])
        lane0, col0 = (taddr >> 16) & 0xFFFF, taddr & 0xFFFF
        if col0 + Nv > 512 or lane0 + Mv > 128:
            raise _Fault("fault", f"tcgen05.mma accumulator outside TMEM ({m.prog.where(pc)})")
        # data-path layout (PTX ISA 9.1 §9.7.16.10.5): M=128 row r -> lane r; M=64 (layout F)
        # rows 16q..16q+15 -> lanes 32q..32q+15 of lane quarter q
        r = np.arange(Mv)
        rows = lane0 + (r if Mv == 128 else 32 * (r // 16) + r % 16)
        if rows.max() > 127:
            raise _Fault("fault", f"tcgen05.mma accumulator outside TMEM ({m.prog.where(pc)})")
        tmem_allocated(m, c, col0, Nv, pc, "accumulator")
        cur = tm[c, rows, col0:col0 + Nv]
        if en is None or en[ln]:
            D = D + cur.view(acc).astype(np.float64)
        if acc == np.int32:
            D = np.clip(D, -2**31, 2**31 - 1).astype(np.int64).astype(np.int32)
        tm[c, rows, col0:col0 + Nv] = np.ascontiguousarray(D.astype(acc)).view(np.uint32)
    return None
