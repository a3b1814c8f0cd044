"""Def-use chains, a constant / address / known-bits value analysis, thread-uniformity, and a
per-warp concrete evaluator over one function's :class:`~verifier.analysis.cfg.CFG`.

* **Def-use.** For every instruction, the register keys it defines and uses (guard predicate
  included). PTX registers are not SSA: a register defined at several places joins its values.
* **Values.** Per register: ``Val`` = a known-bits pair ``(mask, bits)`` (constants are fully
  known), or a shared-memory symbol plus a byte offset (``global_smem + 98304``), or unknown.
  Enough to decode Triton's instruction descriptors (``mov.b32 %r160, 136380432``), the constant
  high half of smem descriptors (``or.b64 %rd, %rd_lo, 0x4000004000000000``) and mbarrier / TMEM
  slot addresses.
* **Uniformity.** ``UNIFORM`` (same in every thread of the CTA: ``%ctaid``, parameters,
  constants), ``WARP`` (same within a warp: ``%tid.x >> 5``, ``%tid.x < 32``, ``shfl.sync.idx`` of a
  fixed lane, ``elect.sync``'s leader id) or ``DIVERGENT`` (``%tid``, ``%laneid``, loads from
  per-thread addresses). Predicates selecting one lane (``elect.sync``, ``%laneid == c``,
  ``%tid.x == c``) are also marked *single-lane*. Control dependence: a register defined in
  several blocks, one of them inside the region of a divergent branch, is divergent.
* **Concrete evaluation** of a register for a given warp (lane 0), used to check TMEM lane
  quarters (TL2) and column bounds (TM6) of Triton's warp-dependent addresses.

Sources: PTX ISA 9.1 §10 (special registers), §9.7.13.14 (``elect.sync``), §9.7.9.6
(``shfl.sync``), §9.7.1-§9.7.3 (integer and logic instructions).
"""

from __future__ import annotations

import heapq
import re

from verifier.analysis.cfg import CFG
from verifier.tables import is_special_register
from verifier.ptx.ast import Instruction, Operand

__all__ = ["DIVERGENT", "NO_DEF", "UNIFORM", "WARP", "Val", "Values", "defs_uses", "mul_half"]

UNIFORM, WARP, DIVERGENT = 0, 1, 2
CLASS_NAME = {UNIFORM: "uniform", WARP: "warp-uniform", DIVERGENT: "divergent"}

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1

#: Val: ("k", mask, bits) known bits | ("s", symbol, offset) shared address | None unknown.
Val = tuple | None

#: Base mnemonics whose operands are all uses (no register destination).
NO_DEF = frozenset({"st", "stmatrix", "red", "bar", "barrier", "bra", "brx", "ret", "exit",
                    "trap", "cp", "fence", "membar", "prefetch", "prefetchu", "setmaxnreg",
                    "griddepcontrol", "discard", "applypriority", "nanosleep", "pmevent",
                    "tensormap", "multimem", "st.async", "red.async", "cvta.to", "wmma.store",
                    "brkpt", "createpolicy.x"})

_WIDTH = re.compile(r"^[bsuf](8|16|32|64)$")


def mul_half(ins: Instruction, x: int, y: int, w: int) -> int:
    """``mul.hi`` / ``mul.wide`` (and ``mad``'s product) of the ``w``-bit operands ``x``, ``y``
    (unsigned bit patterns; ``.s*`` types multiply them as signed): the high ``w`` bits, or the
    full ``2w``-bit product (PTX ISA 9.1 §9.7.1.5, §9.7.1.6)."""
    if ins.parts[-1].startswith("s"):
        x, y = [(z ^ (1 << (w - 1))) - (1 << (w - 1)) for z in (x, y)]
    prod = x * y
    if "wide" in ins.parts:
        return prod & ((1 << (2 * w)) - 1)
    return (prod >> w) & ((1 << w) - 1)


def _width(ins: Instruction) -> int:
    for p in reversed(ins.parts):
        m = _WIDTH.match(p)
        if m:
            return int(m.group(1))
    return 64


def defs_uses(ins: Instruction) -> tuple[list[Operand], list[Operand]]:
    """``(defined register operands, used register operands)`` of one instruction.

    The guard predicate is not included (callers add it). ``wgmma.mma_async`` and
    ``tcgen05`` ops are modelled by the rules; here the accumulator vector of ``mma_async`` is
    both defined and used.
    """
    ops = ins.operands
    if not ops:
        return [], []
    b = ins.parts[0]
    p1 = ins.parts[1] if len(ins.parts) > 1 else ""
    if b in ("bar", "barrier") and "red" in ins.parts and ops[0].kind == "reg":
        # bar.red.{popc,and,or} d, a{, b}, {!}c: d is the CTA-wide reduction
        return [ops[0]], [r for o in ops[1:] for r in o.registers()]
    if b in NO_DEF or (b == "tcgen05" and p1 != "ld") or (b == "wgmma" and p1 != "mma_async") \
            or (b == "mbarrier" and p1 in ("init", "inval", "expect_tx", "complete_tx")):
        uses = [r for o in ops for r in o.registers()]
        return [], uses
    if b == "call":
        defs: list[Operand] = []
        uses = []
        first_list = ops[0].kind == "list" and len(ops) > 1 and ops[1].kind != "list"
        for k, o in enumerate(ops):
            if k == 0 and first_list:
                defs.extend(o.registers())
            else:
                uses.extend(o.registers())
        return defs, uses
    d = ops[0]
    uses = [r for o in ops[1:] for r in o.registers()]
    if d.kind in ("reg", "symbol"):
        defs = [d]
    elif d.kind in ("vector", "pair"):
        defs = [e for e in d.elems if e.kind in ("reg", "symbol")]
    elif d.kind == "address":   # e.g. an atom/st form with an address first: all uses
        return [], d.registers() + uses
    else:
        defs = []
    if b == "wgmma":
        uses = defs + uses
    return defs, uses


class Values:
    """Def-use, values and uniformity of one function (built once, read by rules).

    Attributes:
        cfg: the function's CFG.
        defs: per instruction, the defined register keys.
        uses: per instruction, the used register keys (guard predicate included).
        def_sites: register key -> instruction indices defining it.
        use_sites: register key -> instruction indices using it.
        cls: register key -> UNIFORM / WARP / DIVERGENT.
        single_lane: register keys of predicates true in at most one lane of a warp.
        branch_class: block id -> class of its terminating conditional branch (absent:
            unconditional or none).
        divergent_blocks: block ids inside the region of a divergent branch.
        partial_blocks: block ids inside the region of a warp-uniform (not CTA-uniform) branch.
        single_blocks: block ids reached only on the lane-selecting edge of a single-lane branch.
    """

    def __init__(self, cfg: CFG, arg_classes: dict[str, int] | None = None):
        self.cfg = cfg
        instrs = cfg.instrs
        n = len(instrs)
        self.defs: list[list[str]] = [[] for _ in range(n)]
        self.uses: list[list[str]] = [[] for _ in range(n)]
        self.def_sites: dict[str, list[int]] = {}
        self.use_sites: dict[str, list[int]] = {}
        self.def_ops: list[list[Operand]] = [[] for _ in range(n)]
        key = cfg.reg_key
        for i, ins in enumerate(instrs):
            ds, us = defs_uses(ins)
            self.def_ops[i] = ds
            dk = [key(o.name or o.text, i) for o in ds]
            uk = [key(o.name or o.text, i) for o in us if o.name and not is_special_register(o.name)]
            if ins.predicate is not None:
                uk.append(key(ins.predicate, i))
            self.defs[i] = dk
            self.uses[i] = uk
            for k in dk:
                self.def_sites.setdefault(k, []).append(i)
            for k in uk:
                self.use_sites.setdefault(k, []).append(i)
        self._val: dict[str, Val] = {}
        self._busy: set[str] = set()
        self.cls: dict[str, int] = {}
        self.single_lane: set[str] = set()
        #: (definition site, key) of the single-lane definitions (a predicate register reused
        #: for a uniform test later is single-lane only where such a definition reaches)
        self.single_sites: set[tuple[int, str]] = set()
        #: (definition site, key) of predicates false in exactly one lane (``setp.ne`` of the
        #: lane index with a constant: ``@%p bra SKIP`` leaves one lane on the fall-through)
        self.single_neg_sites: set[tuple[int, str]] = set()
        self._tid: set[str] = set()     # registers equal to %tid.x
        self._lane: set[str] = set()    # registers equal to %laneid
        self.branch_class: dict[int, int] = {}
        self.divergent_blocks: set[int] = set()
        self.partial_blocks: set[int] = set()
        self.single_blocks: set[int] = set()
        self._uniformity()

    # ------------------------------------------------------------------ values

    def op_val(self, o: Operand, i: int) -> Val:
        """Value of operand ``o`` of instruction ``i``."""
        k = o.kind
        if k == "imm":
            v = o.value
            if isinstance(v, int):
                return ("k", M64, v & M64)
            return None
        if k == "reg":
            if is_special_register(o.name or ""):
                return None
            return self.val(self.cfg.reg_key(o.name, i))
        if k == "symbol":
            return ("s", o.name, o.value or 0)
        if k == "address":
            base = o.base
            if base is None:
                return None
            bv = self.op_val(base, i) if base.kind != "symbol" else ("s", base.name, 0)
            return _add(bv, ("k", M64, (o.value or 0) & M64))
        return None

    def const(self, o: Operand, i: int) -> int | None:
        """The operand's value when fully known, else None."""
        v = self.op_val(o, i)
        if v is not None and v[0] == "k" and v[1] == M64:
            return v[2]
        return None

    def val(self, key: str) -> Val:
        """Value of register ``key`` (joined over its definitions)."""
        try:
            return self._val[key]
        except KeyError:
            pass
        if key in self._busy:
            return None
        self._busy.add(key)
        sites = self.def_sites.get(key, ())
        out: Val = None
        first = True
        for i in sites:
            v = self._eval_def(i, key)
            if first:
                out, first = v, False
            elif v != out:
                out = _join(out, v)
            if out is None:
                break
        self._busy.discard(key)
        self._val[key] = out
        return out

    def _eval_def(self, i: int, key: str) -> Val:
        ins = self.cfg.instrs[i]
        b = ins.parts[0]
        ops = ins.operands
        if ins.predicate is not None and len(self.def_sites.get(key, ())) > 0:
            # a guarded definition keeps the old value in the other threads
            if len(self.def_sites[key]) == 1:
                return None
        w = _width(ins)
        wm = M64 if w >= 64 else (1 << w) - 1
        if b == "mov" and len(ops) == 2:
            d, s = ops
            if d.kind == "vector":
                src = self.op_val(s, i)
                idx = [self.cfg.reg_key(e.name, i) if e.kind == "reg" else None for e in d.elems]
                if key not in idx or src is None or src[0] != "k":
                    return None
                part = 64 // len(d.elems)
                sh = part * idx.index(key)
                pm = (1 << part) - 1
                return ("k", (src[1] >> sh) & pm, (src[2] >> sh) & pm)
            if s.kind == "vector":
                part = w // max(1, len(s.elems))
                mask = bits = 0
                for k, e in enumerate(s.elems):
                    v = self.op_val(e, i)
                    if v is None or v[0] != "k":
                        continue
                    pm = (1 << part) - 1
                    mask |= (v[1] & pm) << (part * k)
                    bits |= (v[2] & pm) << (part * k)
                return ("k", mask, bits) if mask else None
            return _trunc(self.op_val(s, i), wm)
        if len(ops) < 2:
            return None
        if b in ("cvta", "cvt"):
            v = self.op_val(ops[1], i)
            src_w = _width_of(ins.parts[-1])
            if v is None:
                if b == "cvt" and src_w and src_w < 64 and ins.parts[-1][0] in "ub" and w > src_w:
                    sm = (1 << src_w) - 1
                    return ("k", M64 ^ sm, 0)     # zero-extended: the upper bits are 0
                return None
            if v[0] == "s":
                return v
            if "to" in ins.parts and "shared" in ins.parts:
                return v
            src_w = _width_of(ins.parts[-1])
            if src_w and src_w < 64 and ins.parts[-1][0] == "u":
                sm = (1 << src_w) - 1
                return ("k", (v[1] & sm) | (M64 ^ sm), v[2] & sm)
            return _trunc(v, wm)
        a = self.op_val(ops[1], i)
        c = self.op_val(ops[2], i) if len(ops) > 2 else None
        if b in ("add", "sub"):
            if b == "sub":
                if c is not None and c[0] == "k" and c[1] == M64:
                    c = ("k", M64, (-c[2]) & M64)
                else:
                    return None
            return _trunc(_add(a, c), wm)
        if b == "bfe" and len(ops) == 4 and (a is None or a[0] != "k"):
            ln = self.const(ops[3], i)
            if ln is not None and ("u32" in ins.parts or "u64" in ins.parts) and ln < w:
                return ("k", wm ^ ((1 << ln) - 1), 0)
            return None
        if b == "and" and (a is None or a[0] != "k") and c is not None and c[0] == "k" \
                and c[1] & wm == wm:
            return ("k", wm & ~c[2], 0)          # bits cleared by the mask are known zero
        if a is None or a[0] != "k":
            return None
        if b == "bfe" and len(ops) == 4:
            pos = self.const(ops[2], i)
            ln = self.const(ops[3], i)
            if pos is None or ln is None or "u32" not in ins.parts and "u64" not in ins.parts:
                return None
            lm = (1 << ln) - 1
            return ("k", ((a[1] >> pos) & lm) | (wm ^ lm), (a[2] >> pos) & lm)
        if b == "not":
            return ("k", a[1] & wm, (~a[2]) & a[1] & wm)
        if c is None or c[0] != "k":
            if b == "and" and c is None:
                return None
            if b == "or" and c is None:
                return None
            return None
        am, av, cm, cv = a[1], a[2], c[1], c[2]
        if b == "and":
            m = (am & cm) | (am & ~av) | (cm & ~cv)
            return ("k", m & wm, av & cv & m & wm)
        if b == "or":
            m = (am & cm) | (am & av) | (cm & cv)
            return ("k", m & wm, (av | cv) & m & wm)
        if b == "xor":
            m = am & cm
            return ("k", m & wm, (av ^ cv) & m & wm)
        if am != M64 and am != wm or cm != M64 and cm != wm:
            if b == "shl" and (cm & 0xFF) == 0xFF:
                s = cv & 0xFF
                return ("k", ((am << s) | ((1 << s) - 1)) & wm, (av << s) & wm)
            if b == "shr" and (cm & 0xFF) == 0xFF and "s32" not in ins.parts and "s64" not in ins.parts:
                s = cv & 0xFF
                return ("k", ((am >> s) | (wm ^ (wm >> s))) & wm, (av >> s) & wm)
            return None
        x, y = av & wm, cv & wm
        if b == "shl":
            r = x << y
        elif b == "shr":
            if ("s32" in ins.parts or "s64" in ins.parts) and x >> (w - 1):
                x -= 1 << w
            r = x >> y
        elif b == "mul":
            if "hi" in ins.parts or "wide" in ins.parts:
                # the high half / the full double-width product: the low-width mask would
                # keep the wrong bits (PTX ISA 9.1 §9.7.1.5)
                if (am & wm) != wm or (cm & wm) != wm:
                    return None
                r = mul_half(ins, x, y, w)
                return ("k", M64 if "wide" in ins.parts else wm, r)
            r = x * y
        else:
            return None
        return ("k", wm, r & wm)

    # ------------------------------------------------------------------ uniformity

    def _reach(self) -> list[int]:
        """Per block, a bitmask of the blocks reachable from it through at least one edge."""
        cfg = self.cfg
        n = len(cfg.blocks)
        succ = [[d for d in cfg.succ_ids(b) if d != cfg.exit_id] for b in range(n)]
        out = [0] * n
        for b in range(n):
            m = 0
            work = list(succ[b])
            while work:
                x = work.pop()
                if m >> x & 1:
                    continue
                m |= 1 << x
                work.extend(succ[x])
            out[b] = m
        return out

    def _reaches(self, d: int, i: int) -> bool:
        bo = self.cfg.block_of
        bd, bu = bo[d], bo[i]
        return (bd == bu and d < i) or bool(self._reach_mask[bd] >> bu & 1)

    def _reaching_defs(self) -> None:
        """Classic reaching definitions (Kildall) over the blocks, as bitsets of def sites.

        A guarded definition (``@%p mov``) does not kill: the threads with the guard false keep
        the old value. Linear in the program size per iteration (big-int bitsets), so long
        redefinition chains stay cheap (the old pairwise reachability test was cubic on them).
        """
        cfg = self.cfg
        instrs = cfg.instrs
        nb = len(cfg.blocks)
        bit: dict[tuple[int, str], int] = {}
        self._site_of_bit: list[tuple[int, str]] = []
        keymask: dict[str, int] = {}
        for k, sites in self.def_sites.items():
            m = 0
            for d in sites:
                b = len(self._site_of_bit)
                bit[(d, k)] = b
                self._site_of_bit.append((d, k))
                m |= 1 << b
            keymask[k] = m
        self._keymask = keymask
        self._bit = bit
        gen = [0] * nb
        kill = [0] * nb
        for blk in cfg.blocks:
            g = 0
            kl = 0
            for i in range(blk.start, blk.end):
                guarded = instrs[i].predicate is not None
                for k in self.defs[i]:
                    if not guarded:
                        km = keymask[k]
                        g &= ~km
                        kl |= km
                    g |= 1 << bit[(i, k)]
            gen[blk.id] = g
            kill[blk.id] = kl
        preds: list[list[int]] = [[] for _ in range(nb)]
        for blk in cfg.blocks:
            for d in cfg.succ_ids(blk.id):
                if d != cfg.exit_id:
                    preds[d].append(blk.id)
        inn = [0] * nb
        out = list(gen)
        order = list(cfg.rpo) + [b for b in range(nb) if b not in set(cfg.rpo)]
        changed = True
        while changed:
            changed = False
            for b in order:
                x = 0
                for p in preds[b]:
                    x |= out[p]
                inn[b] = x
                o = gen[b] | (x & ~kill[b])
                if o != out[b]:
                    out[b] = o
                    changed = True
        self._in = inn
        self._rd_cache: dict[tuple[str, int], tuple[int, ...]] = {}
        # def site -> the uses it reaches (for the uniformity worklist)
        rev: dict[tuple[int, str], list[int]] = {}
        for i, uk in enumerate(self.uses):
            for k in uk:
                for d in self.reaching(k, i):
                    rev.setdefault((d, k), []).append(i)
        self._reached_uses = rev

    def reaching(self, key: str, i: int) -> tuple[int, ...]:
        """Definition sites of register ``key`` that reach instruction ``i`` (a use there)."""
        ck = (key, i)
        r = self._rd_cache.get(ck)
        if r is not None:
            return r
        sites = self.def_sites.get(key, ())
        if not sites:
            r = ()
        else:
            b = self.cfg.block_of[i]
            start = self.cfg.blocks[b].start
            local = [d for d in sites if start <= d < i]
            out: list[int] = []
            killed = False
            for d in reversed(local):
                out.append(d)
                if self.cfg.instrs[d].predicate is None:
                    killed = True
                    break
            if not killed:
                m = self._in[b] & self._keymask[key]
                sob = self._site_of_bit
                while m:
                    low = m & -m
                    out.append(sob[low.bit_length() - 1][0])
                    m ^= low
            r = tuple(out)
        self._rd_cache[ck] = r
        return r

    def use_class(self, key: str, i: int) -> int:
        """Uniformity of register ``key`` as used by instruction ``i``: the worst class of the
        definitions that reach ``i`` (DIVERGENT when several reach it and one lies in a divergent
        region: the value depends on the path the thread took).

        For registered uses the worst class is maintained incrementally as definition sites are
        classified (``_ucache``), so a use reached by many definitions (a chain of guarded
        redefinitions) costs O(1) per query instead of O(reaching definitions)."""
        sites = self.def_sites.get(key)
        if not sites:
            return UNIFORM
        if len(sites) == 1:
            return self._site_cls.get((sites[0], key), UNIFORM)
        ck = (key, i)
        if ck in self._use_pairs:
            m = self._ucache.get(ck, UNIFORM)
        else:
            m = UNIFORM
            for d in self.reaching(key, i):
                m = max(m, self._site_cls.get((d, key), UNIFORM))
                if m == DIVERGENT:
                    break
        if m < DIVERGENT:
            blocks = self._reach_blocks.get(ck)
            if blocks is None:
                bo = self.cfg.block_of
                blocks = frozenset(bo[d] for d in self.reaching(key, i))
                self._reach_blocks[ck] = blocks
            if len(blocks) > 1 and not blocks.isdisjoint(self.divergent_blocks):
                return DIVERGENT
        return m

    def _uniformity(self) -> None:
        cfg = self.cfg
        instrs = cfg.instrs
        self._reaching_defs()
        rev = self._reached_uses
        self._use_pairs = {(k, i) for i, uk in enumerate(self.uses) for k in uk}
        self._reach_blocks: dict[tuple[str, int], frozenset] = {}
        self._site_cls: dict[tuple[int, str], int] = {}
        self._ucache: dict[tuple[str, int], int] = {}
        prev = (frozenset(), frozenset())     # the regions the first pass assumes
        for _ in range(6):
            site = self._site_cls
            site.clear()
            ucache = self._ucache
            ucache.clear()
            # forward instruction order (a heap of indices): definitions are classified before
            # their uses, so straight-line code is classified once per pass
            work = list(range(len(instrs)))
            in_work = set(work)
            while work:
                i = heapq.heappop(work)
                in_work.discard(i)
                for k, c in self._classify(i):
                    if c > site.get((i, k), -1):
                        site[(i, k)] = c
                        for u in rev.get((i, k), ()):
                            uk = (k, u)
                            if c > ucache.get(uk, UNIFORM):
                                ucache[uk] = c
                            if u not in in_work:
                                in_work.add(u)
                                heapq.heappush(work, u)
            self._branches()
            state = (frozenset(self.divergent_blocks), frozenset(self.partial_blocks))
            if state == prev:
                break
            prev = state
        cls: dict[str, int] = {}
        for (i, k), c in self._site_cls.items():
            if c > cls.get(k, -1):
                cls[k] = c
        self.cls = cls

    def _classify(self, i: int) -> list[tuple[str, int]]:
        ins = self.cfg.instrs[i]
        dk = self.defs[i]
        if not dk:
            return []
        b = ins.parts[0]
        ops = ins.operands
        key = self.cfg.reg_key
        uc = self.use_class
        guard = UNIFORM
        if ins.predicate is not None:
            pk = key(ins.predicate, i)
            guard = uc(pk, i)
            if self.is_single_lane(pk, i):
                guard = DIVERGENT

        def oc(o: Operand) -> int:
            m = UNIFORM
            for r in o.registers():
                n = r.name or ""
                if is_special_register(n):
                    m = max(m, _special_class(n))
                else:
                    m = max(m, uc(key(n, i), i))
            return m

        srcs = ops[1:] if ops else ()
        c = max((oc(o) for o in srcs), default=UNIFORM)
        out: list[tuple[str, int]] = []
        if b == "mov" and len(ops) == 2 and ops[1].kind == "reg":
            n = ops[1].name or ""
            if n == "%tid.x":
                self._tid.add(dk[0])
            elif n == "%laneid":
                self._lane.add(dk[0])
            elif key(n, i) in self._tid:
                self._tid.add(dk[0])
        if b == "elect":
            # 'elect.sync _|%p' (a sink for the leader id): only register elements are defined
            for o, k in zip([o for o in (ops[0].elems or (ops[0],)) if o.kind == "reg"], dk):
                if o.kind == "reg" and _is_pred_operand(ins, o):
                    self._mark_single(i, k)
                    out.append((k, DIVERGENT))
                else:
                    out.append((k, max(WARP, guard)))
            return out
        if b in ("vote", "redux", "activemask") or (b == "match" and "all" in ins.parts):
            c = WARP              # warp-wide results
        elif b == "shfl":
            mode = ins.parts[2] if len(ins.parts) > 2 else ""
            if mode == "idx" and len(ops) >= 3 and ops[2].kind == "imm":
                c = WARP          # every lane reads the same (fixed) source lane
            else:
                c = DIVERGENT
        elif b in ("ld", "ldu"):
            sp = ins.parts[1] if len(ins.parts) > 1 else ""
            if sp in ("param", "const"):
                c = UNIFORM
            elif sp == "local":
                c = DIVERGENT
            elif "volatile" in ins.parts or "relaxed" in ins.parts or "acquire" in ins.parts:
                c = max(c, WARP) if c <= WARP else c
        elif b in ("atom", "tcgen05", "wgmma", "mma", "ldmatrix", "mbarrier", "tld4", "tex",
                   "suld", "cp", "match"):
            c = DIVERGENT
        elif b in ("shr", "div") and len(ops) == 3 and dk:
            src = key(ops[1].name, i) if ops[1].kind == "reg" else None
            amt = self.const(ops[2], i)
            if src in self._tid and amt is not None:
                if (b == "shr" and amt >= 5) or (b == "div" and amt % 32 == 0 and amt > 0):
                    c = WARP
        elif b in ("and", "or") and "pred" in ins.parts and len(ops) == 3:
            # '!%p' of a single-lane %p is true in all lanes but one: not single-lane
            ks = [key(o.name, i) for o in ops[1:] if o.kind == "reg" and not o.negated]
            if b == "and" and any(self.is_single_lane(k, i) for k in ks):
                self._mark_single(i, dk[0])
                c = DIVERGENT
        elif b in ("and", "rem") and len(ops) == 3:
            src = key(ops[1].name, i) if ops[1].kind == "reg" else None
            m = self.const(ops[2], i)
            if b == "and" and src in self._tid and m is not None and m & 31 == 0:
                c = WARP
            elif src in self._tid and m is not None and ins.predicate is None and (
                    (b == "and" and m == 31) or (b == "rem" and m == 32)
                    and "s32" not in ins.parts):
                self._lane.add(dk[0])     # %tid.x & 31 == %laneid (1-D CTA, PTX ISA §10.3)
        elif b == "setp" and len(ops) >= 3:
            cmp = ins.parts[1] if len(ins.parts) > 1 else ""
            a, bb = ops[1], ops[2]
            ak = key(a.name, i) if a.kind == "reg" and not is_special_register(a.name or "") else None
            cv = self.const(bb, i)
            src_tid = (a.kind == "reg" and a.name == "%tid.x") or ak in self._tid
            src_lane = (a.kind == "reg" and a.name == "%laneid") or ak in self._lane
            if (src_tid or src_lane) and cv is not None:
                if cmp == "eq":
                    for k in dk[:1]:
                        self._mark_single(i, k)
                elif cmp == "ne" and len(ops) == 3:
                    for k in dk[:1]:
                        self.single_neg_sites.add((i, k))
                elif src_tid and ((cmp in ("lt", "ge") and cv % 32 == 0)
                                  or (cmp in ("le", "gt") and (cv + 1) % 32 == 0)):
                    c = WARP
        c = max(c, guard)
        for k in dk:
            out.append((k, c))
        return out

    def _branches(self) -> None:
        cfg = self.cfg
        self.branch_class.clear()
        div: set[int] = set()
        part: set[int] = set()
        single: set[int] = set()
        for blk in cfg.blocks:
            conds = [e for e in blk.succs if e.cond is not None]
            last = cfg.instrs[blk.end - 1] if blk.end > blk.start else None
            if not conds and last is not None and last.parts[0] == "brx" \
                    and "uni" not in last.parts and len(blk.succs) > 1 and last.operands:
                # brx.idx: the index register picks the target (a jump table: Triton's
                # warp-specialized partition dispatch on a per-warp state byte)
                c = self.operand_class(last.operands[0], blk.end - 1)
                self.branch_class[blk.id] = c
                if c == DIVERGENT:
                    div |= cfg.region(blk.id)
                elif c == WARP:
                    part |= cfg.region(blk.id)
                continue
            if not conds:
                continue
            if last.parts[0] in ("bra", "brx") and "uni" in last.parts:
                # .uni asserts the branch is non-divergent *within a warp* (PTX ISA 9.1
                # bra): the predicate may still differ between warps (nvcc's and CUTLASS's
                # warp-role dispatch `@%p bra.uni PRODUCER` on a warp index)
                c = min(self.use_class(conds[0].cond[0], blk.end - 1), WARP)
            else:
                pk = conds[0].cond[0]
                c = self.use_class(pk, blk.end - 1)
                if self.is_single_lane(pk, blk.end - 1):
                    c = DIVERGENT
                    for e in conds:
                        if e.cond[1]:
                            single |= cfg.edge_region(e)
                elif self.is_single_lane(pk, blk.end - 1, negated=True):
                    c = DIVERGENT
                    for e in conds:
                        if not e.cond[1]:
                            single |= cfg.edge_region(e)
            self.branch_class[blk.id] = c
            if c == DIVERGENT:
                div |= cfg.region(blk.id)
            elif c == WARP:
                part |= cfg.region(blk.id)
        self.divergent_blocks = div
        self.partial_blocks = part
        self.single_blocks = single

    # ------------------------------------------------------------------ queries

    def guard_class(self, i: int) -> int:
        """Uniformity class of instruction ``i``'s guard predicate (UNIFORM when unguarded)."""
        ins = self.cfg.instrs[i]
        if ins.predicate is None:
            return UNIFORM
        k = self.cfg.reg_key(ins.predicate, i)
        if self.is_single_lane(k, i):
            return DIVERGENT
        return self.use_class(k, i)

    def _mark_single(self, i: int, key: str) -> None:
        self.single_lane.add(key)
        self.single_sites.add((i, key))

    def is_single_lane(self, key: str, i: int, negated: bool = False) -> bool:
        """Predicate ``key`` as read by instruction ``i`` is true in at most one lane per warp:
        every definition reaching ``i`` is a single-lane one (``elect.sync``, a lane / thread
        index ``setp.eq`` with a constant, an ``and`` with such a predicate). A register reused
        for a uniform test (hand-written PTX with one ``%p`` for every test) is not. With
        ``negated``: false in at most one lane (a ``setp.ne`` of the lane index with a
        constant), so ``@!key`` runs in at most one lane."""
        sites = self.single_neg_sites if negated else self.single_sites
        if not negated and key not in self.single_lane:
            return False
        reach = self.reaching(key, i)
        return bool(reach) and all((d, key) in sites for d in reach)

    def guard_single_lane(self, i: int) -> bool:
        """Instruction ``i`` runs in at most one lane per warp (guard or region)."""
        ins = self.cfg.instrs[i]
        if ins.predicate is not None and self.is_single_lane(
                self.cfg.reg_key(ins.predicate, i), i, negated=ins.negated):
            return True
        return self.cfg.block_of[i] in self.single_blocks

    def context_class(self, i: int) -> int:
        """Worst of the guard class and the enclosing branch regions (DIVERGENT when the
        instruction runs in only part of a warp)."""
        b = self.cfg.block_of[i]
        c = self.guard_class(i)
        if b in self.divergent_blocks:
            c = DIVERGENT
        elif b in self.partial_blocks:
            c = max(c, WARP)
        return c

    def operand_class(self, o: Operand, i: int) -> int:
        """Uniformity of an operand of instruction ``i``."""
        m = UNIFORM
        for r in o.registers():
            n = r.name or ""
            if is_special_register(n):
                m = max(m, _special_class(n))
            else:
                m = max(m, self.use_class(self.cfg.reg_key(n, i), i))
        return m

    def concrete(self, o: Operand, i: int, env: dict[str, int], loads: dict[tuple, int],
                 depth: int = 0) -> int | None:
        """Concrete value of operand ``o`` at instruction ``i`` for one thread.

        Args:
            env: values of special registers (``%tid.x``, ``%laneid``, ``%warpid``).
            loads: value of ``ld.shared`` from a resolved address ``("s", sym, off)``
                (the TMEM base address slot, as 0).
        Returns None when any input is unknown or a register has several definitions.
        """
        if depth > 48:
            return None
        k = o.kind
        if k == "imm":
            return o.value if isinstance(o.value, int) else None
        if k != "reg":
            return None
        n = o.name or ""
        if is_special_register(n):
            return env.get(n)
        key = self.cfg.reg_key(n, i)
        sites = self.def_sites.get(key, ())
        if len(sites) != 1:
            return None
        j = sites[0]
        ins = self.cfg.instrs[j]
        if ins.predicate is not None:
            return None
        b = ins.parts[0]
        ops = ins.operands
        w = _width(ins)
        wm = (1 << w) - 1 if w < 64 else M64

        def ev(x: Operand, e: dict[str, int] = env) -> int | None:
            return self.concrete(x, j, e, loads, depth + 1)
        if b == "mov" and len(ops) == 2 and ops[1].kind in ("reg", "imm"):
            return ev(ops[1])
        if b == "ld" and len(ops) == 2 and "shared" in ins.parts:
            v = self.op_val(ops[1], j)
            return loads.get(v) if v is not None else None
        if b == "shfl" and len(ops) >= 3 and len(ins.parts) > 2 and ins.parts[2] == "idx":
            lane = ev(ops[2])
            if lane is None or "%tid.x" not in env:
                return None
            e2 = dict(env)
            base = env["%tid.x"] - env.get("%laneid", env["%tid.x"] % 32)
            e2["%tid.x"] = base + lane
            e2["%laneid"] = lane
            return ev(ops[1], e2)
        if len(ops) < 3 and b not in ("not", "cvt"):
            return None
        if b == "cvt" and len(ops) == 2:
            return ev(ops[1])
        vals = [ev(x) for x in ops[1:]]
        if any(v is None for v in vals):
            return None
        a = vals[0]
        c = vals[1] if len(vals) > 1 else 0
        if b == "add":
            r = a + c
        elif b == "sub":
            r = a - c
        elif b in ("mul", "mad") and ("hi" in ins.parts or "wide" in ins.parts):
            r = mul_half(ins, a & wm, c & wm, w)
            if b == "mad" and len(vals) == 3:
                r += vals[2]
            return r & (M64 if "wide" in ins.parts else wm)
        elif b == "mul":
            r = a * c
        elif b == "shl":
            r = a << c
        elif b == "shr":
            r = a >> c
        elif b == "and":
            r = a & c
        elif b == "or":
            r = a | c
        elif b == "xor":
            r = a ^ c
        elif b == "div" and c:
            r = a // c
        elif b == "rem" and c:
            r = a % c
        elif b == "bfe" and len(vals) == 3:
            r = (a >> c) & ((1 << vals[2]) - 1)
        elif b == "mad" and len(vals) == 3:
            r = a * c + vals[2]
        else:
            return None
        return r & wm


def _is_pred_operand(ins: Instruction, o: Operand) -> bool:
    """``elect.sync %r|%p``: the second element of the pair is the predicate."""
    d = ins.operands[0]
    if d.kind == "pair":
        return o is d.elems[1]
    return False


def _special_class(name: str) -> int:
    if name.startswith(("%tid", "%laneid", "%lanemask", "%clock", "%globaltimer", "%smid")):
        return DIVERGENT
    if name.startswith("%warpid"):
        return WARP
    return UNIFORM


def _width_of(t: str) -> int | None:
    m = _WIDTH.match(t)
    return int(m.group(1)) if m else None


def _trunc(v: Val, wm: int) -> Val:
    if v is None or v[0] != "k":
        return v
    return ("k", v[1] & wm | (M64 ^ wm) if wm != M64 else v[1], v[2] & wm)


def _add(a: Val, c: Val) -> Val:
    if a is None or c is None:
        return None
    if a[0] == "s" and c[0] == "k" and c[1] == M64:
        off = c[2] if c[2] < (1 << 63) else c[2] - (1 << 64)
        return ("s", a[1], a[2] + off)
    if c[0] == "s" and a[0] == "k" and a[1] == M64:
        return _add(c, a)
    if a[0] == "k" and c[0] == "k" and a[1] == M64 and c[1] == M64:
        return ("k", M64, (a[2] + c[2]) & M64)
    if a[0] == "k" and c[0] == "k":
        # the low bits below the lowest unknown bit of either operand are known
        low = 0
        while low < 64 and (a[1] >> low) & 1 and (c[1] >> low) & 1:
            low += 1
        if low == 0:
            return None
        lm = (1 << low) - 1
        return ("k", lm, (a[2] + c[2]) & lm)
    return None


def _join(a: Val, b: Val) -> Val:
    if a is None or b is None:
        return None
    if a[0] == "k" and b[0] == "k":
        m = a[1] & b[1] & ~(a[2] ^ b[2])
        return ("k", m & M64, a[2] & m) if m else None
    return None
