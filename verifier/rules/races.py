"""B9: shared memory written by one warp and read by another with no barrier in between, in
either order: write-after-read (a split-K scratch aliased onto an operand stage:
sgl-project/sglang#37287) and read-after-write (a reduction's barrier removed). Stores racing
stores are not reported (Triton's replicated stores write the same value).

Threads are reasoned about concretely: for each thread of the CTA (``.reqntid`` or the launch),
the set of threads that can reach each block is propagated over the CFG, deciding branches whose
predicate is a function of ``%tid.x`` (warp roles, lane selections); addresses of the read and
the write are evaluated per thread (loop counters at their first iteration). A pair is reported
only when a thread of one warp provably writes bytes a thread of another warp provably read on
a path with no barrier between; anything not evaluable is not reported.

Sources: PTX ISA 9.1 §8 (memory consistency: no order between threads without
synchronization), §9.7.13.1 (``bar.sync`` orders the memory accesses of its participants);
``docs/ptx_rules.md`` B6.
"""

from __future__ import annotations

import re
import time

from verifier.analysis import Property
from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.rules._flow import (
    call_effects,
    each_function,
    eval_concrete,
    event_findings,
    induction,
    is_cta_barrier,
    is_mbar_wait,
)

__all__ = ["smem_war_across_warps", "thread_masks"]

#: CPU-time budget of the per-thread evaluation of one function (seconds, process time); past
#: it the remaining pairs are not checked and one note says so.
BUDGET_S = 0.5
_MAX_THREADS = 1024
_TYPE_BITS = re.compile(r"[bsuf](8|16|32|64|128)$")


def _size(ins) -> int:
    bits = next((int(m.group(1)) for p in reversed(ins.parts) if (m := _TYPE_BITS.match(p))), 32)
    vec = next((int(p[1:]) for p in ins.parts if p in ("v2", "v4", "v8")), 1)
    return max(1, bits * vec // 8)


def _is_read(ins) -> bool:
    p = ins.parts
    return p[0] == "ld" and len(p) > 1 and p[1].startswith("shared")


def _is_write(ins) -> bool:
    p = ins.parts
    return p[0] == "st" and len(p) > 1 and p[1].startswith("shared")


class _Threads:
    """Per-thread reachability of blocks and concrete values (see the module docstring)."""

    def __init__(self, fa, deadline: float):
        self.fa = fa
        self.n = min(fa.threads or 0, _MAX_THREADS)
        self.env_cache: dict[int, dict] = {}
        self.syms: dict = {}
        self._pred: dict[tuple[str, int], int | None] = {}
        self.deadline = deadline
        self.masks = self._propagate() if self.n else None

    def env(self, t: int) -> dict:
        e = self.env_cache.get(t)
        if e is None:
            e = {"%tid.x": t, "%laneid": t % 32, "%warpid": t // 32}
            self.env_cache[t] = e
        return e

    def value(self, o, i: int, t: int):
        """Value of operand ``o`` at ``i`` in thread ``t`` (None: not a function of the thread
        index alone)."""
        return eval_concrete(self.fa, o, i, self.env(t), self.syms)

    def pred_mask(self, key: str, i: int) -> int | None:
        """Bitmask of the threads in which predicate register ``key`` (used at ``i``) is true,
        or None when it is not a function of the thread index alone."""
        ck = (key, i)
        if ck in self._pred:
            return self._pred[ck]
        fa = self.fa
        sites = fa.values.def_sites.get(key, ())
        m: int | None = None
        if time.process_time() > self.deadline:
            raise _OverBudget
        if len(sites) == 1 and fa.cfg.instrs[sites[0]].predicate is None:
            j = sites[0]
            d = fa.cfg.instrs[j]
            m = self._setp_mask(d, j)
        self._pred[ck] = m
        return m

    def _setp_mask(self, d, j) -> int | None:
        p, ops = d.parts, d.operands
        if p[0] == "setp" and len(ops) == 3 and len(p) >= 3:
            cmp = p[1]
            signed = p[-1][0] == "s"
            m = 0
            for t in range(self.n):
                a = self.value(ops[1], j, t)
                b = self.value(ops[2], j, t)
                if a is None or b is None:
                    return None
                if not signed:
                    a &= 0xFFFFFFFFFFFFFFFF
                    b &= 0xFFFFFFFFFFFFFFFF
                r = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                     "ge": a >= b, "lo": a < b, "ls": a <= b, "hi": a > b, "hs": a >= b}.get(cmp)
                if r is None:
                    return None
                if r:
                    m |= 1 << t
            return m
        if p[0] in ("and", "or") and "pred" in p and len(ops) == 3:
            ms = []
            for o in ops[1:]:
                if o.kind != "reg":
                    return None
                x = self.pred_mask(self.fa.cfg.reg_key(o.name, j), j)
                if x is None:
                    return None
                ms.append(x ^ ((1 << self.n) - 1) if o.negated else x)
            return ms[0] & ms[1] if p[0] == "and" else ms[0] | ms[1]
        if p[0] == "not" and "pred" in p and len(ops) == 2 and ops[1].kind == "reg":
            x = self.pred_mask(self.fa.cfg.reg_key(ops[1].name, j), j)
            return None if x is None else x ^ ((1 << self.n) - 1)
        return None

    def guard_mask(self, i: int) -> int:
        """Threads that can execute instruction ``i`` (block reachability and guard)."""
        fa = self.fa
        m = self.masks[fa.cfg.block_of[i]]
        ins = fa.cfg.instrs[i]
        if ins.predicate is not None:
            g = self.pred_mask(fa.cfg.reg_key(ins.predicate, i), i)
            if g is not None:
                m &= g ^ ((1 << self.n) - 1) if ins.negated else g
        return m

    def _propagate(self) -> list[int]:
        cfg = self.fa.cfg
        full = (1 << self.n) - 1
        masks = [0] * len(cfg.blocks)
        masks[0] = full
        work = [0]
        while work:
            b = work.pop()
            blk = cfg.blocks[b]
            for e in blk.succs:
                if e.dst == cfg.exit_id:
                    continue
                m = masks[b]
                if e.cond is not None:
                    key, val = e.cond
                    pm = self.pred_mask(key, blk.end - 1)
                    if pm is not None:
                        m &= pm if val else pm ^ full
                if m & ~masks[e.dst]:
                    masks[e.dst] |= m
                    work.append(e.dst)
        return masks


class _OverBudget(Exception):
    """The per-thread evaluation ran past :data:`BUDGET_S`."""


def thread_masks(fa) -> _Threads | None:
    """The per-thread view of a function (cached on its analysis), or None without a known
    thread count or when building it ran out of the budget (``fa.cache["b9_over"]`` is set)."""
    if "threads" not in fa.cache:
        deadline = fa.cache.setdefault("b9_deadline", time.process_time() + BUDGET_S)
        try:
            fa.cache["threads"] = _Threads(fa, deadline)
        except _OverBudget:
            fa.cache["threads"] = None
            fa.cache["b9_over"] = True
    r = fa.cache["threads"]
    return r if r is not None and r.n else None


def _multi_def_regs(fa, o, i, depth=0, acc=None):
    acc = set() if acc is None else acc
    if o is None or depth > 32:
        return acc
    if o.kind == "address":
        return _multi_def_regs(fa, o.base, i, depth + 1, acc)
    if o.kind != "reg" or not o.name or o.name.startswith("%tid") or o.name == "%laneid":
        return acc
    key = fa.cfg.reg_key(o.name, i)
    sites = fa.values.def_sites.get(key, ())
    if len(sites) != 1:
        acc.add(key)
        return acc
    j = sites[0]
    for x in fa.cfg.instrs[j].operands[1:]:
        _multi_def_regs(fa, x, j, depth + 1, acc)
    return acc


def _start_value(fa, key):
    """``(operand, index)`` of the loop-entry value of a pointer advanced in a loop: two
    unguarded definitions, ``key = expr`` (not using ``key``) and ``add key, key, c``."""
    cfg, v = fa.cfg, fa.values
    sites = v.def_sites.get(key, ())
    if len(sites) != 2:
        return None
    init = None
    inc = False
    for j in sites:
        d = cfg.instrs[j]
        if d.predicate is not None:
            return None
        uses = v.uses[j]
        if d.parts[0] == "add" and key in uses and len(d.operands) == 3 \
                and v.const(d.operands[2], j) is not None:
            inc = True
        elif key not in uses:
            init = j
    if init is None or not inc:
        return None
    d = cfg.instrs[init]
    if d.parts[0] == "mov" and len(d.operands) == 2:
        return (d.operands[1], init)
    # re-evaluate the defining instruction through a synthetic single-def view: its operands
    return _InitExpr(d, init)


class _InitExpr(tuple):
    """``(instruction, index)`` of a non-mov loop-entry definition (evaluated by operands)."""

    def __new__(cls, d, j):
        return tuple.__new__(cls, (d, j))


class SmemWarState(Property):
    """Fact: ``(reads, writes)``: ``ld.shared`` / ``st.shared`` sites since the last barrier or
    mbarrier wait (the newest 8 of each)."""

    RULES = ("B9",)

    def initial(self):
        return ((), ())

    def relevant(self, ins):
        return _is_read(ins) or _is_write(ins) or is_cta_barrier(ins) or is_mbar_wait(ins) \
            or (ins.parts[0] in ("bar", "barrier") and "arrive" not in ins.parts) \
            or (ins.parts[0] == "call" and "sync" in call_effects(self.fa, ins))

    def transfer(self, i, ins, fact, report):
        reads, writes = fact
        if ins.parts[0] == "call":
            # a callee that synchronises (a barrier or an mbarrier wait in a helper .func)
            return ((), ())
        if not (_is_read(ins) or _is_write(ins)):
            if ins.predicate is not None and ins.parts[0] in ("bar", "barrier"):
                # a guarded barrier may not execute in this CTA (a CTA-uniform guard the engine
                # could not fork on, e.g. a redefined predicate): it orders nothing for sure
                return fact
            return ((), ())
        is_w = _is_write(ins)
        others = reads if is_w else writes
        out = (reads, (writes + (i,))[-8:] if i not in writes else writes) if is_w else \
            ((reads + (i,))[-8:] if i not in reads else reads, writes)
        if not others:
            return out
        th = thread_masks(self.fa)
        if th is None:
            return out
        deadline = self.fa.cache.setdefault("b9_deadline", time.process_time() + BUDGET_S)
        if time.process_time() > deadline:
            self.fa.cache["b9_over"] = True
            return out
        mine = _cached_addrs(th, ins, i, th.guard_mask(i))
        if not mine:
            return out
        msz = _size(ins)
        for r in others:
            od = self.cfg.instrs[r]
            oa = _cached_addrs(th, od, r, th.guard_mask(r))
            if not oa:
                continue
            if is_w:
                hit = _cross_warp_overlap(mine, msz, oa, _size(od))
            else:
                hit = _cross_warp_overlap(oa, _size(od), mine, msz)
            if hit is None:
                continue
            tw, tr, _addr = hit
            if is_w:
                report("B9", f"'{ins.opcode}' in thread {tw} (warp {tw // 32}) overwrites shared "
                             f"memory that thread {tr} (warp {tr // 32}) read at line {od.line}, "
                             "with no barrier between the read and the write")
            else:
                report("B9", f"'{ins.opcode}' in thread {tr} (warp {tr // 32}) reads shared "
                             f"memory that thread {tw} (warp {tw // 32}) wrote at line {od.line}, "
                             "with no barrier between the write and the read")
            return out
        return out

    def describe(self, i, ins, old, new):
        return None if old == new else ins.opcode


def _cached_addrs(th, ins, i, mask):
    c = th.fa.cache.setdefault("b9_addrs", {})
    k = (i, mask)
    if k not in c:
        c[k] = _addr_map_expr(th, ins, i, mask)
    return c[k]


def _addr_map_expr(th, ins, i, mask):
    fa = th.fa
    o = next((x for x in ins.operands if x.kind == "address"), None)
    if o is None:
        return None
    starts = {}
    for key in _multi_def_regs(fa, o, i):
        ind = induction(fa, key)
        if ind is not None:
            starts[key] = ("const", ind[0])
            continue
        s = _start_value(fa, key)
        if s is None:
            return None
        starts[key] = ("expr", s)
    out = {}
    t, m = 0, mask
    while m:
        if m & 1:
            env = dict(th.env(t))
            for k, (kind, v) in starts.items():
                if kind == "const":
                    env[k] = v
                    continue
                if isinstance(v, _InitExpr):
                    d, j = v
                    val = _eval_ins(fa, d, j, env, th.syms)
                else:
                    val = eval_concrete(fa, v[0], v[1], env, th.syms)
                if val is None:
                    return None
                env[k] = val
            a = eval_concrete(fa, o, i, env, th.syms)
            if a is None:
                return None
            out[t] = a
        m >>= 1
        t += 1
    return out


def _eval_ins(fa, d, j, env, syms):
    """Value an (add/sub/mad/...) instruction computes, through a one-off register binding."""
    b, ops = d.parts[0], d.operands
    vals = [eval_concrete(fa, x, j, env, syms) for x in ops[1:]]
    if any(x is None for x in vals) or not vals:
        return None
    a = vals[0]
    c = vals[1] if len(vals) > 1 else 0
    return {"add": lambda: a + c, "sub": lambda: a - c, "mul": lambda: a * c,
            "shl": lambda: a << c, "or": lambda: a | c}.get(b, lambda: None)()


def _cross_warp_overlap(w: dict, wsz: int, r: dict, rsz: int):
    """``(writer, reader, address)`` of a byte written by one warp and read by another."""
    by_byte: dict[int, set[int]] = {}
    for t, a in r.items():
        for x in range(a, a + rsz):
            by_byte.setdefault(x, set()).add(t // 32)
    for t, a in w.items():
        for x in range(a, a + wsz):
            ws = by_byte.get(x)
            if ws and (len(ws) > 1 or t // 32 not in ws):
                reader = next(tt for tt, aa in r.items() if aa <= x < aa + rsz
                              and tt // 32 != t // 32)
                return t, reader, x
    return None


def smem_war_across_warps(ctx: Context) -> list[Finding]:
    """Shared memory written and read by different warps with no barrier in between (B9).

    What it checks:
        Between an ``ld.shared`` and a later ``st.shared`` (or an ``st.shared`` and a later
        ``ld.shared``) on some path, with no barrier (``bar.sync``/``barrier.sync``, named or
        not) and no mbarrier wait in between: a thread of one warp writes a byte that a thread of
        another warp reads. Threads, branch conditions
        on ``%tid.x`` and addresses are evaluated concretely per thread (module docstring);
        pairs that are not evaluable are not reported.

    Why it is bad:
        Nothing orders the two warps' accesses: a fast warp overwrites data a slow warp has not
        read yet (sglang#37287), or reads a slot before its writer stored it.

    Example:
        every compute warp reads all of ``sA``; then ``st.shared.f32 [sA + warp*128 + lane*4]``
        with the only barrier after the stores.

    Use instead:
        a barrier over the participating warps (``bar.sync 1, 128;``) before the first store.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §8, §9.7.13.1; sglang#37287.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _is_write):
        if not any(_is_read(ins) for ins in fa.cfg.instrs) or fa.threads is None:
            continue
        out += event_findings(ctx, fi, fa, SmemWarState, "B9",
                              "insert a barrier over the participating warps between the two "
                              "accesses")
        if fa.cache.get("b9_over"):
            out.append(ctx.finding("B9", fi.fn.line, fi.fn.col,
                                   f"per-thread evaluation of '{fi.fn.name}' ran out of its "
                                   f"{BUDGET_S} s budget; some shared-memory write-after-read "
                                   "pairs were not checked", severity="note",
                                   notes=[Note(message="B9: budget exhausted")]))
    return out
