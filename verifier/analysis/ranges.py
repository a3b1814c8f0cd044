"""Byte ranges of shared-memory addresses and of the tiles matrix descriptors name.

An interval analysis over one function's registers, solved on demand for the backward slice of
a query (a fixpoint over the definitions the query depends on, widened to unbounded after a few
rounds, so loop counters terminate). An abstract value is

* ``("i", lo, hi)``: an integer in ``[lo, hi]``;
* ``("a", sym, shift, lo, hi, c)``: ``(address of shared symbol sym >> shift) + t + c`` for
  some ``t`` in ``[lo, hi]``. ``shift`` 0 is a shared byte address (``c`` = 0); ``shift`` 4 is
  the 14-bit *start address* field of a matrix descriptor (``(addr >> 4) & 0x3FFF``, PTX ISA
  9.1 §9.7.15.5.1 wgmma, §9.7.16.4.1 tcgen05 shared-memory descriptors) with the other fields
  in the constant ``c`` (its low 14 bits clear): leading / stride byte offsets, swizzle;
* ``None``: unknown.

Assumptions, each the ISA's or the hardware's: shared addresses are below 2^18 (256 KiB: a CTA
has at most 227 KiB, CUDA C Programming Guide, compute capability 9.0 / 10.0), so the
descriptor's 14-bit field holds ``addr >> 4`` whole and masks such as ``& 0x3FFF`` /
``bfe.u32 x, 4, 14+`` keep it; a shared symbol is 16-byte aligned (matrix start addresses must
be, §9.7.15.5.1; Triton's ``global_smem`` is ``.align 16``), so ``(sym + t) >> 4 = (sym >> 4) +
(t >> 4)``; arithmetic on the start field does not carry into the other fields.

``selp d, a, b, p`` with ``p = setp.<cmp> x, C`` just before it (same block, ``x`` not redefined
in between) refines the arm that is ``x``: ``selp r, 0, r1, p`` with ``p = r1 > 1`` gives
``r`` in ``{0} U (r1 <= 1)`` - the wrap-around stage counter of a pipelined loop.

Used by the proxy rules (W5 / TM8, :mod:`verifier.rules.async_proxy`) to tell generic writes
to a scratch buffer from writes to the tiles an MMA reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from verifier.analysis.cfg import CFG
from verifier.analysis.values import Values
from verifier.tables import is_special_register

__all__ = ["MatrixDesc", "Ranges", "footprint"]

INF = 1 << 62
_M14 = (1 << 14) - 1
_M18 = (1 << 18) - 1
_BOT = "bot"          # no value yet (fixpoint start)
_WIDEN_AFTER = 4      # changes of one definition before its bounds widen to unbounded
_MAX_ROUNDS = 40
_MAX_SLICE = 4000     # definitions in one query's slice (beyond: unknown)

_CMP = {"lt": lambda c: (-INF, c - 1), "le": lambda c: (-INF, c), "gt": lambda c: (c + 1, INF),
        "ge": lambda c: (c, INF), "eq": lambda c: (c, c)}
_NEG = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": None, "ne": "eq"}


def _iv(lo, hi):
    return ("i", lo, hi)


def _join(a, b):
    if a == _BOT:
        return b
    if b == _BOT:
        return a
    if a is None or b is None:
        return None
    if a[0] == "i" and b[0] == "i":
        return _iv(min(a[1], b[1]), max(a[2], b[2]))
    if a[0] == "a" and b[0] == "a" and a[1:3] == b[1:3] and a[5] == b[5]:
        return ("a", a[1], a[2], min(a[3], b[3]), max(a[4], b[4]), a[5])
    return None


def _widen(old, new):
    if old in (_BOT, None) or new is None or new == _BOT or old[0] != new[0]:
        return new
    lo = old[-3 if new[0] == "a" else 1]
    hi = old[-2 if new[0] == "a" else 2]
    nlo = new[-3 if new[0] == "a" else 1]
    nhi = new[-2 if new[0] == "a" else 2]
    lo = -INF if nlo < lo else lo
    hi = INF if nhi > hi else hi
    return _iv(lo, hi) if new[0] == "i" else ("a", new[1], new[2], lo, hi, new[5])


def _width(ins) -> int:
    for p in reversed(ins.parts):
        if len(p) > 1 and p[0] in "bsu" and p[1:] in ("8", "16", "32", "64"):
            return int(p[1:])
    return 32


def _fit(v, width: int):
    """Unknown when an interval leaves the register's range (it may have wrapped)."""
    if v is None or v[0] != "i":
        return v
    if v[1] < -(1 << (width - 1)) or v[2] > (1 << width) - 1:
        return None
    return v


def _add(a, b):
    if a is None or b is None:
        return None
    if a[0] == "a" and b[0] == "a":
        return None
    if b[0] == "a":
        a, b = b, a
    if a[0] == "i":
        return _iv(a[1] + b[1], a[2] + b[2])
    _, sym, shift, lo, hi, c = a
    if b[1] == b[2] and abs(b[1]) > _M14 and shift == 4:
        # a constant that also adds to the descriptor's other fields: exact only when the
        # start field does not borrow or carry over the whole interval
        k = b[1]
        nlo, nhi, nc = lo + (k & _M14), hi + (k & _M14), c + (k & ~_M14)
        if nlo > _M14:
            nlo, nhi, nc = nlo - (1 << 14), nhi - (1 << 14), nc + (1 << 14)
        return _sane(("a", sym, shift, nlo, nhi, nc))
    return _sane(("a", sym, shift, lo + b[1], hi + b[2], c))


def _sane(a):
    """A rooted value only while its offsets stay inside the field they live in (a shared
    address below 2^18, a start field below 2^14): beyond, it may have wrapped - unknown."""
    if a is None or a[0] != "a":
        return a
    lim = 1 << (18 - a[2])
    if a[3] < 0 or a[4] >= lim:
        return None
    return a


def _mul_const(a, k: int):
    if a is None or a[0] != "i":
        return None
    x, y = a[1] * k, a[2] * k
    return _iv(min(x, y), max(x, y))


def _bound_pow2(hi: int) -> int:
    return (1 << max(hi, 0).bit_length()) - 1


@dataclass(frozen=True)
class MatrixDesc:
    """A shared-memory matrix descriptor's decoded fields: the operand's start address is
    ``sym + [lo, hi]`` (bytes); ``lbo`` / ``sbo`` the leading / stride byte offsets; ``swizzle``
    the swizzle span in bytes (0: none, the 8 x 16-byte core-matrix layout)."""

    sym: str
    lo: int
    hi: int
    lbo: int
    sbo: int
    swizzle: int


def footprint(d: MatrixDesc, rows: int, row_bytes: int, elem: int | None,
              major: str | None) -> tuple[str, int, int]:
    """``(sym, lo, hi)``: the bytes ``[sym + lo, sym + hi)`` hold every byte an operand of
    ``rows`` rows (M or N) and ``row_bytes`` bytes along K (32 for every dense MMA K step)
    described by ``d`` can read, for a K-major (``major == "K"``) or MN-major (``"MN"``)
    layout, or either (None). ``elem``: element bytes (MN-major extent; None: 1, the widest).

    K-major: ``rows / 8`` groups of 8 rows ``sbo`` apart; a row is ``swizzle`` bytes (or two
    16-byte core matrices ``lbo`` apart without swizzle). MN-major: atoms of 8 K-rows, the MN
    extent split into ``swizzle``-byte (or 16-byte) pieces; both strides are taken as the larger
    of ``lbo`` / ``sbo`` (an over-approximation). A swizzle permutes 16-byte chunks inside its
    repeat (8 x span bytes), so the range is rounded out to it (PTX ISA 9.1 §9.7.15.5.1,
    §9.7.16.4.1: matrix descriptor layouts and swizzling modes)."""
    w = d.swizzle
    groups = max(1, -(-rows // 8))
    if w:
        k_span = (groups - 1) * d.sbo + 7 * w + row_bytes
        rep = 8 * w
    else:
        k_span = (groups - 1) * d.sbo + (d.lbo if row_bytes > 16 else 0) + 128
        rep = 16
    e = elem or 1
    piece = w or 16
    mn_pieces = max(1, -(-(rows * e) // piece))
    k_groups = max(1, -(-(row_bytes // e) // 8))
    stride = max(d.lbo, d.sbo)
    mn_span = (mn_pieces - 1 + k_groups - 1) * stride + (8 * w if w else 128)
    span = k_span if major == "K" else mn_span if major == "MN" else max(k_span, mn_span)
    lo = d.lo - d.lo % rep
    hi = d.hi + span
    hi += (-hi) % rep
    return d.sym, lo, hi


class Ranges:
    """The interval analysis of one function (module docstring)."""

    def __init__(self, cfg: CFG, values: Values, threads: int | None = None):
        self.cfg = cfg
        self.v = values
        self.threads = threads
        self._done: dict[tuple[int, str], object] = {}

    # ------------------------------------------------------------------ queries
    def reg(self, key: str, i: int):
        """Abstract value of register ``key`` where instruction ``i`` uses it."""
        sites = self.v.reaching(key, i)
        if not sites:
            return None
        self._solve([(d, key) for d in sites])
        out = _BOT
        for d in sites:
            out = _join(out, self._done.get((d, key)))
        return None if out == _BOT else out

    def operand(self, o, i: int):
        """Abstract value of operand ``o`` of instruction ``i`` (``[base + imm]`` included)."""
        if o is None:
            return None
        if o.kind == "address":
            if o.base is None:
                return None
            b = self.operand(o.base, i) if o.base.kind != "symbol" else \
                ("a", o.base.name, 0, 0, 0, 0)
            return _add(b, _iv(o.value or 0, o.value or 0))
        if o.kind == "imm":
            return _iv(o.value, o.value) if isinstance(o.value, int) else None
        if o.kind == "symbol":
            return _sane(("a", o.name, 0, o.value or 0, o.value or 0, 0))
        if o.kind == "reg":
            if is_special_register(o.name or ""):
                return self._special(o.name)
            return self.reg(self.cfg.reg_key(o.name, i), i)
        return None

    def address(self, o, i: int):
        """``(sym, lo, hi)``: the shared address operand ``o`` of instruction ``i`` is
        ``sym + t`` for some ``lo <= t <= hi``; None when unknown."""
        v = _sane(self.operand(o, i))
        if v is None or v[0] != "a" or v[2] != 0 or v[3] <= -INF or v[4] >= INF:
            return None
        return v[1], v[3], v[4]

    def descriptor(self, o, i: int, sm100: bool) -> MatrixDesc | None:
        """The decoded 64-bit matrix descriptor operand ``o`` of instruction ``i`` (sm_90
        wgmma layout: swizzle in bits 62-63; sm_100 tcgen05 layout with ``sm100``: bits
        61-63), or None when its start address is not a known range of one shared symbol."""
        v = _sane(self.operand(o, i))
        if v is None or v[0] != "a" or v[2] != 4 or v[3] <= -INF or v[4] >= INF:
            return None
        c = v[5]
        lbo = ((c >> 16) & _M14) << 4
        sbo = ((c >> 32) & _M14) << 4
        if sm100:
            code = (c >> 61) & 7
            sw = {0: 0, 1: 128, 2: 128, 4: 64, 6: 32}.get(code)
        else:
            sw = {0: 0, 1: 128, 2: 64, 3: 32}[(c >> 62) & 3]
        if sw is None:
            return None
        return MatrixDesc(v[1], 16 * v[3], 16 * v[4], lbo, sbo, sw)

    # ------------------------------------------------------------------ fixpoint
    def _special(self, name: str):
        base = name.split(".")[0]
        if base == "%tid":
            return _iv(0, (self.threads or 1024) - 1)
        if base == "%laneid":
            return _iv(0, 31)
        if base == "%warpid":
            return _iv(0, 63)
        return None

    def _deps(self, j: int) -> list[tuple[int, str]]:
        ins = self.cfg.instrs[j]
        out = []
        regs = []
        for o in ins.operands[1:]:
            regs += [r for r in o.registers()] if hasattr(o, "registers") else []
        for r in regs:
            if r.name and not is_special_register(r.name):
                k = self.cfg.reg_key(r.name, j)
                out += [(d, k) for d in self.v.reaching(k, j)]
        return out

    def _solve(self, roots: list[tuple[int, str]]) -> None:
        todo = [r for r in roots if r not in self._done]
        if not todo:
            return
        slice_: list[tuple[int, str]] = []
        seen = set(todo)
        stack = list(todo)
        while stack:
            s = stack.pop()
            slice_.append(s)
            if len(slice_) > _MAX_SLICE:
                for s2 in seen:
                    self._done.setdefault(s2, None)
                return
            for dep in self._deps(s[0]):
                if dep not in seen and dep not in self._done:
                    seen.add(dep)
                    stack.append(dep)
        slice_.sort()
        cur: dict[tuple[int, str], object] = {s: _BOT for s in slice_}
        changes = dict.fromkeys(slice_, 0)
        for _ in range(_MAX_ROUNDS):
            moved = False
            for s in slice_:
                new = self._transfer(s[0], s[1], cur)
                old = cur[s]
                if new != old:
                    changes[s] += 1
                    if changes[s] > _WIDEN_AFTER:
                        new = _widen(old, new) if old != _BOT else new
                        if changes[s] > 2 * _WIDEN_AFTER:
                            new = None
                    if new != old:
                        cur[s] = new
                        moved = True
            if not moved:
                break
        else:
            cur = dict.fromkeys(slice_)  # did not settle: unknown
        for s, val in cur.items():
            self._done[s] = None if val == _BOT else val

    def _use(self, o, j: int, cur):
        if o is None:
            return None
        if o.kind == "reg" and o.name and not is_special_register(o.name):
            k = self.cfg.reg_key(o.name, j)
            out = _BOT
            for d in self.v.reaching(k, j):
                out = _join(out, cur.get((d, k), self._done.get((d, k))))
            if out == _BOT:
                return _BOT
            if out is None:
                return self._bits(k)
            return out
        if o.kind == "address":
            if o.base is None:
                return None
            b = self._use(o.base, j, cur) if o.base.kind != "symbol" else \
                ("a", o.base.name, 0, 0, 0, 0)
            return b if b == _BOT else _add(b, _iv(o.value or 0, o.value or 0))
        return self.operand(o, j)

    def _bits(self, key: str):
        """The known-bits bound of :class:`Values` (over all definitions of ``key``)."""
        val = self.v.val(key)
        if val is None:
            return None
        if val[0] == "s":
            return _sane(("a", val[1], 0, val[2], val[2], 0))
        mask, bits = val[1], val[2]
        unknown = ~mask & ((1 << 64) - 1)
        if unknown >> 32:
            return None
        return _iv(bits & mask, (bits & mask) | unknown)

    def _transfer(self, j: int, key: str, cur):
        ins = self.cfg.instrs[j]
        p = ins.parts
        ops = ins.operands
        op = p[0]
        w = _width(ins)
        if not ops or ops[0].kind != "reg" or not ops[0].name \
                or self.cfg.reg_key(ops[0].name, j) != key:
            return None  # a vector / second destination (mov {a, b}, %rd; elect.sync %r|%p)

        def ev(k):
            return self._use(ops[k], j, cur) if k < len(ops) else None

        srcs = [ev(k) for k in range(1, len(ops))]
        if _BOT in srcs and op != "selp":
            return _BOT
        if op == "mov" and len(ops) == 2:
            if ops[1].kind == "vector":
                return self._pack(ops[1], j, cur)
            return srcs[0]
        if op == "cvt" and len(ops) == 2:
            return _fit(srcs[0], w)
        if op == "add" and len(ops) == 3 and not any(x in p for x in ("f32", "f64", "f16")):
            return _fit(_add(srcs[0], srcs[1]), w)
        if op == "sub" and len(ops) == 3 and srcs[1] is not None and srcs[1][0] == "i":
            return _fit(_add(srcs[0], _iv(-srcs[1][2], -srcs[1][1])), w)
        if op in ("mul", "shl") and len(ops) == 3 and ("lo" in p or op == "shl" or "wide" in p):
            k = srcs[1]
            if k is None or k[0] != "i" or k[1] != k[2]:
                if op == "mul" and srcs[0] and k and srcs[0][0] == k[0] == "i" \
                        and srcs[0][1] >= 0 and k[1] >= 0:
                    return _fit(_iv(srcs[0][1] * k[1], srcs[0][2] * k[2]), 64 if "wide" in p else w)
                return None
            f = k[1] if op == "mul" else (1 << k[1] if 0 <= k[1] < 64 else None)
            if f is None:
                return None
            a = srcs[0]
            if a is not None and a[0] == "a" and op == "shl" and k[1] == 4 and a[2] == 4 \
                    and a[5] == 0:
                return ("a", a[1], 0, 16 * a[3], 16 * a[4], 0)
            return _fit(_mul_const(a, f), 64 if "wide" in p else w)
        if op == "mad" and "lo" in p and len(ops) == 4:
            a, k, c = srcs
            if a and k and a[0] == k[0] == "i" and k[1] == k[2]:
                return _fit(_add(_mul_const(a, k[1]), c), w)
            return None
        if op == "shr" and len(ops) == 3:
            a, k = srcs
            if k is None or k[0] != "i" or k[1] != k[2] or not 0 <= k[1] < 64:
                return None
            s = k[1]
            if a is not None and a[0] == "a":
                if a[2] == 0 and s == 4:
                    return ("a", a[1], 4, a[3] >> 4, a[4] >> 4, 0)
                return None
            if a is None:
                return _iv(0, (1 << (w - s)) - 1) if "u" + str(w) in p or "b" + str(w) in p \
                    else None
            return _iv(a[1] >> s, a[2] >> s) if a[1] >= 0 else None
        if op == "bfe" and len(ops) == 4:
            a, pos, ln = srcs
            if pos is None or ln is None or pos[1] != pos[2] or ln[1] != ln[2]:
                return None
            if a is not None and a[0] == "a":
                if a[2] == 0 and a[5] == 0 and pos[1] == 4 and ln[1] >= 14 and "u32" in p:
                    return ("a", a[1], 4, a[3] >> 4, a[4] >> 4, 0)
                return None
            if "u32" in p or "u64" in p:
                return _iv(0, (1 << min(ln[1], w)) - 1)
            return None
        if op == "and" and len(ops) == 3:
            a, b = srcs
            if a is not None and a[0] == "i" and a[1] == a[2]:
                a, b = b, a
            if b is None or b[0] != "i" or b[1] != b[2]:
                if a and b and a[0] == b[0] == "i" and a[1] >= 0 and b[1] >= 0:
                    return _iv(0, min(a[2], b[2]))
                return None
            mask = b[1] & ((1 << w) - 1)
            if a is not None and a[0] == "a":
                keep = _M14 if a[2] == 4 else _M18
                if mask & keep == keep:
                    return ("a", a[1], a[2], a[3], a[4], a[5] & mask)
                return None
            if a is not None and a[1] >= 0 and a[2] <= (mask & ~(mask + 1)):
                return a  # the mask keeps every bit the value can have
            return _iv(0, mask)  # any bit pattern (negative ones too) and a mask >= 0
        if op in ("or", "xor") and len(ops) == 3:
            a, b = srcs
            if a is not None and a[0] == "i" and a[1] == a[2] and (b is None or b[0] != "i"
                                                                  or b[1] != b[2]):
                a, b = b, a
            if a is not None and a[0] == "a" and b is not None and b[0] == "i" and b[1] == b[2]:
                k = b[1] & ((1 << w) - 1)
                if a[2] == 4 and k & _M14 == 0 and op == "or":
                    return ("a", a[1], 4, a[3], a[4], a[5] | k)
                return None
            if a and b and a[0] == b[0] == "i" and a[1] >= 0 and b[1] >= 0:
                return _iv(0, _bound_pow2(max(a[2], b[2])))
            return None
        if op == "rem" and len(ops) == 3:
            a, k = srcs
            if k and k[0] == "i" and k[1] == k[2] and k[1] > 0 and ("u32" in p or "u64" in p or
                                                                  (a and a[0] == "i" and a[1] >= 0)):
                return _iv(0, k[1] - 1)
            return None
        if op in ("min", "max") and len(ops) == 3:
            a, b = srcs
            if a and b and a[0] == b[0] == "i":
                f = min if op == "min" else max
                return _iv(f(a[1], b[1]), f(a[2], b[2]))
            return None
        if op == "selp" and len(ops) == 4:
            return self._selp(j, cur)
        return None

    def _pack(self, vec, j: int, cur):
        """``mov.b64 %rd, {lo, hi}``: a descriptor built from two 32-bit halves."""
        elems = getattr(vec, "elems", None) or []
        if len(elems) != 2:
            return None
        lo, hi = (self._use(e, j, cur) for e in elems)
        if _BOT in (lo, hi):
            return _BOT
        if hi is None or hi[0] != "i" or hi[1] != hi[2]:
            return None
        h = (hi[1] & 0xFFFFFFFF) << 32  # an immediate may be written signed (-2147467232)
        if lo is not None and lo[0] == "a" and lo[2] == 4 and 0 <= lo[5] < (1 << 32):
            return ("a", lo[1], 4, lo[3], lo[4], lo[5] | h)
        if lo is not None and lo[0] == "i" and lo[1] == lo[2]:
            return _iv((lo[1] & 0xFFFFFFFF) | h, (lo[1] & 0xFFFFFFFF) | h)
        return None

    def _selp(self, j: int, cur):
        ins = self.cfg.instrs[j]
        ops = ins.operands
        a, b = self._use(ops[1], j, cur), self._use(ops[2], j, cur)
        pk = self.cfg.reg_key(ops[3].name, j) if ops[3].kind == "reg" and ops[3].name else None
        ref = self._refine(j, pk) if pk else None
        if ref is not None:
            xkey, signed, lo_t, hi_t, lo_f, hi_f = ref
            for side in (1, 2):
                o = ops[side]
                if o.kind == "reg" and o.name and self.cfg.reg_key(o.name, j) == xkey:
                    rng = (lo_t, hi_t) if side == 1 else (lo_f, hi_f)
                    val = a if side == 1 else b
                    # an unsigned compare bounds the value as this domain does only when it
                    # is known to be non-negative
                    sg, wd = signed
                    dom = (-(1 << (wd - 1)), (1 << (wd - 1)) - 1) if sg else (0, (1 << wd) - 1)
                    # refined only when the value lies in the compare's domain (a value
                    # above 2^31 compared as s32 reads negative)
                    if val not in (_BOT, None) and val[0] == "i" and dom[0] <= val[1] \
                            and val[2] <= dom[1]:
                        nlo, nhi = max(val[1], rng[0]), min(val[2], rng[1])
                        val = _iv(nlo, nhi) if nlo <= nhi else _BOT
                    if side == 1:
                        a = val
                    else:
                        b = val
        return _join(a, b)

    def _refine(self, j: int, pk: str):
        """``(x, signed, true range, false range)`` of the predicate ``pk`` used by instruction
        ``j`` when it is ``setp.<cmp>.<int> pk, x, C`` earlier in the same block with neither
        redefined in between (``ne``'s true range and ``eq``'s false one bound nothing)."""
        cfg = self.cfg
        sites = self.v.reaching(pk, j)
        if len(sites) != 1:
            return None
        s = sites[0]
        d = cfg.instrs[s]
        if d.predicate is not None or cfg.block_of[s] != cfg.block_of[j] or s >= j:
            return None
        if d.parts[0] != "setp" or len(d.parts) < 3 or len(d.operands) != 3 \
                or d.operands[0].kind != "reg" or not d.operands[0].name \
                or cfg.reg_key(d.operands[0].name, s) != pk \
                or d.operands[1].kind != "reg" or d.operands[2].kind != "imm":
            return None  # (a predicate pair %p|%q: the second one is the negation)
        cmp = d.parts[1]
        if cmp not in _CMP or not isinstance(d.operands[2].value, int) or not any(
                t in d.parts for t in ("s32", "s64", "u32", "u64")):
            return None
        signed = "s32" in d.parts or "s64" in d.parts
        xkey = cfg.reg_key(d.operands[1].name, s)
        for t in range(s + 1, j):
            if xkey in self.v.defs[t] or pk in self.v.defs[t]:
                return None
        w = 64 if ("s64" in d.parts or "u64" in d.parts) else 32
        c = d.operands[2].value & ((1 << w) - 1)  # the immediate as the compare reads it
        if signed and c >> (w - 1):
            c -= 1 << w
        neg = _NEG[cmp]
        return xkey, (signed, w), *_CMP[cmp](c), *(_CMP[neg](c) if neg in _CMP else (-INF, INF))
