"""A path-sensitive forward dataflow framework shared by the synchronization rules.

A rule describes a *property* (a typestate): an initial fact, a transfer function for the
instructions it cares about, and checks at those instructions and at kernel exit. The engine
solves it over the CFG to a fixed point (loops included) in the style of ESP (Das, Lerner and
Seigle, "ESP: Path-Sensitive Program Verification in Polynomial Time", PLDI 2002):

* the state at a program point is a set of ``(fact, assumptions)`` pairs; pairs with the same
  fact keep up to ``MAX_ALTERNATIVES`` distinct assumption sets (a bounded disjunction, so
  predicates correlated along different paths stay apart), then are merged by intersecting
  their assumptions, so the domain stays finite and the solver terminates;
* assumptions are branch outcomes on the path (``%p7`` is false) and the integer ranges they imply
  for the compared register (``setp.lt.s32 %p7, %r12, 64`` false gives ``%r12 >= 64``), or the
  one value they exclude (``setp.ne.u32 %p1, %r2, 5`` true: ``%r2 != 5``, the role test of a
  warp-specialized partition that is not warp 0); ``and.pred``
  / ``or.pred`` / ``not.pred`` definitions propagate them. An edge whose guard contradicts the
  assumptions is infeasible and not followed, so correlated branches (an allocation and a free
  under the same condition, a prologue MMA and the epilogue wait guarded by the same trip count)
  are not confused with bugs. Redefining a register drops the assumptions about it;
* an instruction whose guard (or a conjunct of an ``and.pred`` guard) is CTA-uniform and
  false under the path's assumptions executes in no thread and is skipped (a copy guarded by
  the complement of a later branch's predicate);
* each pair carries a witness: the relevant instructions and branch decisions that led to it
  (first found, bounded), reported with every finding.

Source of the method: ESP (PLDI 2002); Kildall's worklist fixed point for the propagation.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from verifier.analysis.cfg import CFG
from verifier.analysis.values import Values

__all__ = ["MAX_WITNESS", "Event", "Property", "Reporter", "solve"]

MAX_WITNESS = 12
#: Assumption sets kept per fact and block (a bounded disjunction; see :func:`_merge`).
MAX_ALTERNATIVES = 4
_MAX_VISITS = 200_000
_MAX_FORKS = 32         # guard forks per block visit
#: CPU-time budget of one property on one function (seconds, process time so that a loaded
#: machine does not cut the analysis short). Past it the solver stops and
#: the rule reports a note ("did not reach a fixed point") instead of running away.
TIME_BUDGET_S = 1.0
_INF = float("inf")


@dataclass(frozen=True, slots=True)
class Event:
    """A violation found on some path.

    Attributes:
        rule: rule id.
        index: instruction index of the offending instruction (None: the function's end).
        message: the finding text.
        witness: ``(instruction index, description)`` steps of the path, oldest first.
        severity: overrides the rule's default severity when set.
        fix: an optional fix-it hint.
    """

    rule: str
    index: int | None
    message: str
    witness: tuple[tuple[int, str], ...] = ()
    severity: str | None = None
    fix: str | None = None


Reporter = Callable[..., None]


class Property:
    """Base class of a typestate property. Subclasses override the hooks they need.

    ``relevant(ins)`` selects the instructions ``transfer`` sees (others only pass the state
    through). ``transfer(i, ins, fact, report)`` returns the new fact and may call
    ``report(rule, message, severity=None, fix=None)`` to flag instruction ``i`` on the current
    path. ``at_exit(i, fact, report)`` runs where the path leaves the function (``i`` is the
    ``ret``/``exit`` index, or None when control falls off the end). ``describe(i, ins, old,
    new)`` gives the witness text of a step (None: not recorded).
    """

    def __init__(self, cfg: CFG, values: Values, fa=None):
        self.cfg = cfg
        self.values = values
        self.fa = fa

    def initial(self) -> Hashable:
        """The fact at function entry."""
        return ()

    def relevant(self, ins) -> bool:
        """Whether ``transfer`` must see this instruction."""
        return False

    def relevant_index(self, i: int) -> bool:
        """Like :meth:`relevant`, by instruction index (override to use def-use facts)."""
        return self.relevant(self.cfg.instrs[i])

    def transfer(self, i: int, ins, fact: Hashable, report: Reporter) -> Hashable:
        """The fact after instruction ``i``."""
        return fact

    def at_exit(self, i: int | None, fact: Hashable, report: Reporter) -> None:
        """Checks where a path leaves the function."""

    def describe(self, i: int, ins, old: Hashable, new: Hashable) -> str | None:
        """Witness text for a step that changed the fact."""
        return None if old == new else ins.opcode


# assumptions: frozenset of ("p", key, bool) and ("r", key, lo, hi, domain), where domain is the
# compare's interpretation of the register ("s32", "u32", "s64", "u64"): ranges of different
# domains are never intersected (0xFFFFFFF0 is -16 as s32 and 4294967280 as u32)


class _Assume:
    """Branch assumptions: evaluation and refinement over predicate definitions."""

    def __init__(self, cfg: CFG, values: Values):
        self.cfg = cfg
        self.v = values
        self._defs: dict[str, tuple] = {}
        self._shift: dict[str, tuple[str, int, int]] = {}   # r = s + c mod 2^w (single-def)
        self._align: dict[str, int] = {}    # r is a multiple of this power of two
        self._shr: dict[str, tuple[str, int, int]] = {}    # r = s >> c, logical (single-def)
        self._since: dict[tuple[int, str, int], bool] = {}  # _unchanged_since cache
        for key, sites in values.def_sites.items():
            if len(sites) != 1:
                continue
            i = sites[0]
            ins = cfg.instrs[i]
            if ins.predicate is not None:
                continue
            b = ins.parts[0]
            ops = ins.operands
            if b in ("add", "sub") and len(ops) == 3 and ops[1].kind == "reg" and ops[1].name \
                    and ins.parts[-1] in ("s32", "s64", "u32", "u64") and "sat" not in ins.parts:
                c = values.const(ops[2], i)
                sk = cfg.reg_key(ops[1].name, i)
                if c is not None and len(values.def_sites.get(sk, ())) == 1:
                    w = int(ins.parts[-1][1:])
                    c = _wrap(c if b == "add" else -c, w)   # mod 2^w, as a signed w-bit value
                    self._shift[key] = (sk, c, w)
            if b == "shr" and len(ops) == 3 and ops[1].kind == "reg" and ops[1].name \
                    and ins.parts[-1] in ("u32", "u64", "b32", "b64"):
                c = values.const(ops[2], i)
                sk = cfg.reg_key(ops[1].name, i)
                w = int(ins.parts[-1][1:])
                if c is not None and 0 < c < w and len(values.def_sites.get(sk, ())) == 1:
                    self._shr[key] = (sk, c, w)     # r = s >> c (logical)
            if b in ("shl", "mul") and len(ops) == 3 and (b == "shl" or "lo" in ins.parts) \
                    and ins.parts[-1][1:] in ("32", "64"):
                c = values.const(ops[2], i)
                if c is not None and b == "shl" and 0 < c < int(ins.parts[-1][1:]):
                    self._align[key] = 1 << c          # x << c: a multiple of 2^c, wrapped too
                elif c is not None and b == "mul" and c > 1 and c & (c - 1) == 0:
                    self._align[key] = c
            if b == "setp" and len(ops) == 3 and len(ins.parts) >= 3 and ops[0].kind == "reg":
                a = ops[1]
                c = values.const(ops[2], i)
                ak = cfg.reg_key(a.name, i) if a.kind == "reg" and a.name else None
                t = ins.parts[-1]
                # the compared register may have several definitions (a loop counter): a
                # range then speaks of its value where the compare read it (_range_holds)
                if ak is not None and c is not None and values.def_sites.get(ak) \
                        and t[:1] in ("s", "u", "b") and t[1:] in ("16", "32", "64"):
                    w = int(t[1:])
                    dom = ("s" if t[0] == "s" else "u") + t[1:]
                    c = _wrap(c, w) if dom[0] == "s" else c & ((1 << w) - 1)
                    self._defs[key] = ("cmp", ins.parts[1], ak, c, dom, i)
                elif ak is not None and c is None and ops[2].kind == "reg" and ops[2].name \
                        and t[:1] in ("s", "u") and t[1:] in ("16", "32", "64"):
                    bk = cfg.reg_key(ops[2].name, i)
                    self._defs[key] = ("cmp2", ins.parts[1], ak, bk, t, i)
            elif b in ("and", "or") and "pred" in ins.parts and len(ops) == 3:
                ks = []
                for o in ops[1:]:
                    if o.kind != "reg":
                        break
                    ks.append((cfg.reg_key(o.name, i), o.negated))
                else:
                    self._defs[key] = (b, ks)
            elif b == "not" and "pred" in ins.parts and len(ops) == 2 and ops[1].kind == "reg":
                self._defs[key] = ("not", cfg.reg_key(ops[1].name, i))
        # compares of a single-definition register with a constant whose *predicate* is
        # redefined elsewhere (hand-written PTX reuses one %p for every test): a branch in the
        # compare's own block is still decided by it (:meth:`_def_here`)
        self._local: dict[int, tuple] = {}
        for key, sites in values.def_sites.items():
            if len(sites) < 2:
                continue
            for i in sites:
                ins = cfg.instrs[i]
                ops = ins.operands
                if ins.predicate is not None or ins.parts[0] != "setp" or len(ops) != 3 \
                        or len(ins.parts) < 3 or ops[0].kind != "reg":
                    continue
                a = ops[1]
                c = values.const(ops[2], i)
                ak = cfg.reg_key(a.name, i) if a.kind == "reg" and a.name else None
                t = ins.parts[-1]
                if ak is not None and c is not None and values.def_sites.get(ak) \
                        and t[:1] in ("s", "u", "b") and t[1:] in ("16", "32", "64"):
                    w = int(t[1:])
                    dom = ("s" if t[0] == "s" else "u") + t[1:]
                    c = _wrap(c, w) if dom[0] == "s" else c & ((1 << w) - 1)
                    self._local[i] = ("cmp", ins.parts[1], ak, c, dom, i)
        # r = s + c keeps s's power-of-two alignment when c is a multiple of it (mod 2^n too)
        for _ in range(4):
            grew = False
            for key, (sk, c, _w) in self._shift.items():
                m = self._align.get(sk)
                if m and c % m == 0 and self._align.get(key, 0) < m:
                    self._align[key] = m
                    grew = True
            if not grew:
                break

    def _def_here(self, key: str, at: int | None) -> tuple | None:
        """The compare that gives multiply-defined predicate ``key`` its value at instruction
        ``at``: its last definition before ``at`` in ``at``'s block, when that is a ``setp`` of a
        single-definition register with a constant (recorded in ``_local``); else None."""
        if at is None or not self._local:
            return None
        start = self.cfg.blocks[self.cfg.block_of[at]].start
        for j in range(at - 1, start - 1, -1):
            if key in self.v.defs[j]:
                return self._local.get(j)
        return None

    def _aligned(self, key: str, lo: float, hi: float) -> tuple[float, float]:
        """``[lo, hi]`` shrunk to the multiples of ``key``'s known power-of-two alignment
        (``shl``/``mul.lo`` by a constant; an empty range comes back with ``lo > hi``)."""
        m = self._align.get(key)
        if not m:
            return lo, hi
        if lo != -_INF:
            lo = -((-int(lo)) // m) * m
        if hi != _INF:
            hi = (int(hi) // m) * m
        return lo, hi

    def decide(self, A: frozenset, key: str, depth: int = 0, at: int | None = None
               ) -> bool | None:
        """Value of predicate ``key`` under assumptions ``A`` (None: unknown); ``at``: the
        instruction reading it (a predicate defined more than once is then decided by its
        compare in that block, :meth:`_def_here`)."""
        if ("p", key, True) in A:
            return True
        if ("p", key, False) in A:
            return False
        if depth > 4:
            return None
        d = self._defs.get(key)
        if d is None and depth == 0:
            d = self._def_here(key, at)
        if d is None:
            return None
        if d[0] == "cmp":
            _, cmp, rk, c, dom, _si = d
            if cmp in ("eq", "ne") and ("x", rk, c, dom) in A:
                return cmp == "ne"    # an excluded value (a path that took 'rk != c')
            lo, hi = -_INF, _INF
            for a in A:
                if a[0] == "r" and a[1] == rk and a[4] == dom:
                    lo, hi = max(lo, a[2]), min(hi, a[3])
            if lo == -_INF and hi == _INF:
                return None
            lo, hi = self._aligned(rk, lo, hi)
            if lo > hi:
                return None       # contradictory assumptions: the caller prunes the path
            return _cmp_decide(cmp, lo, hi, c)
        if d[0] == "cmp2":
            return self._decide_cmp2(A, d)
        if d[0] == "not":
            r = self.decide(A, d[1], depth + 1)
            return None if r is None else not r
        vals = []
        for k, neg in d[1]:
            r = self.decide(A, k, depth + 1)
            vals.append(None if r is None else (r != neg))
        if d[0] == "and":
            if False in vals:
                return False
            if all(x is True for x in vals):
                return True
            return None
        if True in vals:
            return True
        if all(x is False for x in vals):
            return False
        return None

    def _decide_cmp2(self, A: frozenset, d: tuple) -> bool | None:
        """A compare of two registers (``setp.lt %p15, %a, %b``) decided by an assumption on
        another compare of the same two registers and type (Triton's ``setp.ge %p14, %a, %b``
        that skips the loop, next to the ``%p15`` guarding the prologue copies), when both
        compares read the same values: the registers never change, or the two ``setp`` s are
        in one block with no definition of either between them."""
        _, cmp, ak, bk, t, si = d
        for a in A:
            if a[0] != "p":
                continue
            d2 = self._defs.get(a[1])
            if d2 is None or d2[0] != "cmp2" or d2[4] != t or {d2[2], d2[3]} != {ak, bk} \
                    or not self._same_reads(si, d2[5], (ak, bk)):
                continue
            rel = d2[1] if a[2] else _NEGATE.get(d2[1])
            if rel is not None and d2[2] != ak:
                rel = _SWAP.get(rel)
            r = _REL_IMPLIES.get((rel, cmp))
            if r is not None:
                return r
        return self._decide_affine(A, d)

    def _affine(self, key: str, at: int) -> tuple[str, int]:
        """``(base, offset)``: register ``key`` read at instruction ``at`` holds ``base +
        offset``, following single-definition ``add`` / ``sub`` of an immediate (up to 4 steps)
        whose base holds the same value there as at ``at``; ``(key, 0)`` otherwise."""
        off = 0
        for _ in range(4):
            sites = self.v.def_sites.get(key, ())
            if len(sites) != 1:
                break
            j = sites[0]
            ins = self.cfg.instrs[j]
            ops = ins.operands
            if ins.parts[0] not in ("add", "sub") or len(ops) != 3 or ins.predicate is not None:
                break
            step = None
            t = ins.parts[-1]
            w = int(t[1:]) if t[:1] in ("s", "u", "b") and t[1:] in ("16", "32", "64") else None
            if w is None:
                break
            for b, c, sign in ((ops[1], ops[2], 1), (ops[2], ops[1], 1)) if ins.parts[0] == "add" \
                    else ((ops[1], ops[2], -1),):
                k = self.v.const(c, j)
                if b.kind == "reg" and b.name and k is not None:
                    # two's complement: an immediate -64 comes back as 2**64 - 64
                    step = (self.cfg.reg_key(b.name, j), sign * _wrap(k, w))
                    break
            if step is None or not self._same_reads(j, at, (step[0],)):
                break
            key, off = step[0], off + step[1]
        return key, off

    def _decide_affine(self, A: frozenset, d: tuple) -> bool | None:
        """A signed compare of two registers decided by an assumption on another one over the
        same two base registers up to constant offsets: ``a + 64 >= b`` and ``a >= b - 64``
        both say ``a - b >= -64`` (Triton's sliding-window attention: the peeled first MMA
        under one form, the loop guard under the other). Signed types only (no wrap-around
        assumed, as LLVM's nsw arithmetic)."""
        _, cmp, ak, bk, t, si = d
        if t[:1] != "s":
            return None
        (x, ox), (y, oy) = self._affine(ak, si), self._affine(bk, si)
        if x == y:
            return None
        q = (cmp, oy - ox)   # x - y CMP q[1]
        for a in A:
            if a[0] != "p":
                continue
            d2 = self._defs.get(a[1])
            if d2 is None or d2[0] != "cmp2" or d2[4] != t:
                continue
            (x2, ox2), (y2, oy2) = self._affine(d2[2], d2[5]), self._affine(d2[3], d2[5])
            if {x2, y2} != {x, y} or not self._same_reads(si, d2[5], (x, y)):
                continue
            rel = d2[1] if a[2] else _NEGATE.get(d2[1])
            if rel is None:
                continue
            c2 = oy2 - ox2     # x2 - y2 REL c2
            if x2 != x:        # y - x REL c2  <=>  x - y SWAP(REL) -c2
                rel, c2 = _SWAP[rel], -c2
            r = _affine_implies(rel, c2, *q)
            if r is not None:
                return r
        return None

    def _same_reads(self, i: int, j: int, regs: tuple[str, ...]) -> bool:
        """Whether instructions ``i`` and ``j`` read the same values of ``regs``: each never
        changes, or none is redefined on a path from one of them to the other
        (:meth:`_unchanged_since`, either order)."""
        if all(self._fixed(r) for r in regs):
            return True
        return all(self._unchanged_since(i, r, j) for r in regs) or \
            all(self._unchanged_since(j, r, i) for r in regs)

    def contradicts(self, A: frozenset) -> bool:
        """Whether the register ranges in ``A`` are unsatisfiable: some register's assumed
        ranges (shrunk to its known power-of-two alignment) have an empty intersection, so no
        execution follows this path."""
        rng: dict[tuple, tuple[float, float]] = {}
        for a in A:
            if a[0] == "r":
                lo, hi = rng.get((a[1], a[4]), (-_INF, _INF))
                rng[(a[1], a[4])] = (max(lo, a[2]), min(hi, a[3]))
        for (k, dom), (lo, hi) in rng.items():
            lo, hi = self._aligned(k, lo, hi)
            if lo > hi or (lo == hi and ("x", k, lo, dom) in A):
                return True
        return False

    def never(self, A: frozenset, key: str, negated: bool, banned: set, upto: int = 0) -> bool:
        """An instruction guarded by ``@key`` (``@!key`` when ``negated``) executes in no thread
        under ``A``: the guard, or a conjunct of an ``and.pred`` guard, is false and CTA-uniform
        (so the branch decisions of this path, taken by every thread alike, decide it; with
        ``upto`` 1, warp-uniform too: one warp's path, :meth:`uniform_conjunct`).
        Registers in ``banned`` (redefined earlier in the block) are not trusted."""
        parts = [(key, negated)] + (self.conjuncts(key) if not negated else [])
        for k, neg in parts:
            if self.v.cls.get(k, 2) > upto:
                continue
            dk = self._defs.get(k)
            if dk is not None and dk[0] == "cmp" and dk[2] in banned:
                continue
            # a predicate set earlier in this block is still decided by the ranges of the
            # register its single compare reads (the compare is its only definition), not by
            # a stale assumption about the predicate itself
            if k in banned and not (dk is not None and dk[0] == "cmp"
                                    and len(self.v.def_sites.get(k, ())) == 1):
                continue
            if k in banned:
                A = frozenset(a for a in A if not (a[0] == "p" and a[1] == k))
            r = self.decide(A, k)
            if r is not None and r == neg:
                return True
        return False

    def conjuncts(self, key: str, depth: int = 0) -> list[tuple[str, bool]]:
        """The leaves ``(predicate, negated)`` of ``key``'s ``and.pred`` tree (nested ``and``s
        flattened, up to 4 levels: Triton guards a TMA copy with ``(tid < 32) & (elect & (trips
        > 0))``); empty when ``key`` is not an ``and.pred``."""
        d = self._defs.get(key)
        if d is None or d[0] != "and" or depth > 4:
            return []
        out: list[tuple[str, bool]] = []
        for k, neg in d[1]:
            sub = [] if neg else self.conjuncts(k, depth + 1)
            out += sub or [(k, neg)]
        return out

    def uniform_conjunct(self, A: frozenset, key: str, negated: bool, upto: int = 0
                         ) -> tuple[str, bool] | None:
        """``(predicate, value)``: the CTA-uniform condition under which an instruction guarded
        by ``@key`` / ``@!key`` can execute, when it is not yet decided by ``A`` (the guard
        itself when uniform, else the single uniform conjunct of its ``and.pred``); else None.
        Only guards whose uniform part is a single-definition ``setp`` are forked on (a compare
        of two registers is kept as an opaque predicate: a later branch on the same register
        is decided by it). ``upto`` 1 (``values.WARP``) also takes warp-uniform conditions (a
        warp-index compare): for properties of one warp's path (``Property.FORK_CLASS``)."""
        cands = [(key, not negated)]
        if not negated and self.conjuncts(key):
            cands = [(k, not neg) for k, neg in self.conjuncts(key)]
        found = None
        for k, val in cands:
            if self.v.cls.get(k, 2) > upto or len(self.v.def_sites.get(k, ())) != 1:
                continue
            if self.cfg.instrs[self.v.def_sites[k][0]].parts[0] != "setp":
                continue
            if self.decide(A, k) is not None:
                continue
            if found is not None:
                return None
            found = (k, val)
        return found

    def _fixed(self, key: str) -> bool:
        """Whether register ``key`` keeps one value once defined (a single definition on no
        CFG cycle, so no later execution redefines it)."""
        sites = self.v.def_sites.get(key, ())
        return len(sites) == 1 and self.cfg.block_of[sites[0]] not in self.cfg.in_cycle

    def _range_holds(self, setp_i: int, rk: str, at: int | None) -> bool:
        """Whether the range a ``setp`` at ``setp_i`` states about ``rk`` holds for ``rk``'s
        current value at instruction ``at``: ``rk`` is never redefined, or the setp precedes
        ``at`` in the same block with no definition of ``rk`` in between (in a loop, a predicate
        set in an earlier iteration speaks of an earlier value). Past the block, the solver
        drops (or, for a counter, moves: :func:`_advance`) the range where ``rk`` is
        redefined."""
        if self._fixed(rk):
            return True
        return at is not None and self._unchanged_since(setp_i, rk, at)

    def _unchanged_since(self, si: int, rk: str, at: int) -> bool:
        """Whether register ``rk`` holds at instruction ``at`` the value it had when the
        instruction at ``si`` last executed before it: no definition of ``rk`` lies on a CFG
        path from ``si`` to ``at`` that does not pass ``si`` again (a re-execution of ``si``
        speaks of the new value). A loop body's ``setp`` on a value computed earlier in the
        same iteration (Triton's ``k_tiles > 0`` guard of the prologue copies, tested again by
        the branch that skips the K loop) thus keeps its range; a compare from an earlier
        iteration of a redefined register does not."""
        ck = (si, rk, at)
        got = self._since.get(ck)
        if got is None:
            got = self._since[ck] = self._unchanged_walk(si, rk, at)
        return got

    def _unchanged_walk(self, si: int, rk: str, at: int) -> bool:
        cfg = self.cfg
        defs = [d for d in self.v.def_sites.get(rk, ()) if d != si]
        bs, ba = cfg.block_of[si], cfg.block_of[at]
        if bs == ba and si < at:
            return not any(si < d < at for d in defs)     # straight-line in one block
        if any(d > si and cfg.block_of[d] == bs for d in defs):
            return False                                  # redefined after si in its block

        def walk(starts, step):
            seen: set[int] = set()
            work = [b for b in starts if b != bs and b < len(cfg.blocks)]
            while work:
                b = work.pop()
                if b in seen:
                    continue
                seen.add(b)
                work.extend(e for e in step(b) if e != bs and e < len(cfg.blocks))
            return seen

        fwd = walk([e.dst for e in cfg.blocks[bs].succs],
                   lambda b: [e.dst for e in cfg.blocks[b].succs])
        if ba != bs and ba not in fwd:
            return False                                  # at is not reached from si
        # blocks from which `at` is reached without passing si: ba's predecessors backwards
        back = walk([e.src for e in cfg.blocks[ba].preds],
                    lambda b: [e.src for e in cfg.blocks[b].preds])
        for d in defs:
            b = cfg.block_of[d]
            if b == bs:
                if d < si and ba == bs and d < at:
                    # bs re-entered from its top (a loop), d before at: on the path
                    if any(e.dst == bs for x in fwd | {bs} for e in cfg.blocks[x].succs):
                        return False
                continue
            if b in fwd and (b in back or (b == ba and d < at)):
                return False
        return True

    def add(self, A: frozenset, key: str, value: bool, depth: int = 0,
            at: int | None = None) -> frozenset:
        """``A`` plus ``key == value`` (decided at instruction ``at``: a branch or a guarded
        instruction) and what it implies through the definitions."""
        A = A | {("p", key, value)}
        if depth > 4:
            return A
        d = self._defs.get(key)
        if d is None and depth == 0:
            d = self._def_here(key, at)
        if d is None:
            return A
        if d[0] == "cmp":
            _, cmp, rk, c, dom, si = d
            rng = _cmp_range(cmp, c, value, dom)
            if rng is None and (cmp == "ne") == value and cmp in ("eq", "ne") \
                    and self._range_holds(si, rk, at):
                return A | {("x", rk, c, dom)}    # rk != c: no interval, one excluded value
            if rng is None or not self._range_holds(si, rk, at):
                return A
            k2, (lo, hi) = rk, rng
            for _ in range(4):
                A = A | {("r", k2, lo, hi, dom)}
                sh = self._shr.get(k2)
                if sh is not None and dom[0] == "u" and sh[2] == int(dom[1:]) \
                        and self._fixed(sh[0]):
                    # r = s >> c in [lo, hi]: s in [lo << c, (hi << c) + 2^c - 1] (warp and
                    # warpgroup ids are shifts of %tid.x: a test on one bounds the others)
                    k2, sc, _w = sh
                    lo = max(lo, 0) << sc
                    hi = _INF if hi == _INF else (int(hi) << sc) + (1 << sc) - 1
                    continue
                nxt = self._shift.get(k2)
                if nxt is None or nxt[2] != int(dom[1:]) or not self._fixed(nxt[0]):
                    break       # r = s + c speaks of s's current value only if s never changes
                k2, off, _w = nxt
                lo, hi = _unshift(lo, hi, off, dom)
                if lo == -_INF and hi == _INF:
                    break
        elif d[0] == "not":
            A = self.add(A, d[1], not value, depth + 1, at)
        elif (d[0] == "and" and value) or (d[0] == "or" and not value):
            for k, neg in d[1]:
                A = self.add(A, k, value != neg, depth + 1, at)
        return A


def _wrap(c: int, w: int) -> int:
    """``c`` modulo ``2**w`` as a signed ``w``-bit value."""
    c &= (1 << w) - 1
    return c - (1 << w) if c >= 1 << (w - 1) else c


def _unshift(lo: float, hi: float, c: int, dom: str) -> tuple[float, float]:
    """Range of ``s`` given ``r = s + c`` (mod ``2**w``) lies in ``[lo, hi]`` in domain ``dom``
    (``s32``/``u32``/...): exact when no ``s`` of the domain can wrap into ``[lo, hi]``, else the
    bound on the wrapping side is dropped (a sound hull)."""
    w = int(dom[1:])
    if dom[0] == "u":
        c &= (1 << w) - 1
        if c == 0:
            return lo, hi
        # s > UMAX - c wraps to r in [0, c - 1]
        if lo >= c:
            return lo - c, hi - c
        return max(0, lo - c), _INF
    mn, mx = -(1 << (w - 1)), (1 << (w - 1)) - 1
    if c > 0:      # s > MAX - c wraps to r in [MIN, MIN + c - 1]
        return (lo - c, hi - c) if lo >= mn + c else (lo - c, _INF)
    if c < 0:      # s < MIN - c wraps to r in [MAX + c + 1, MAX]
        return (lo - c, hi - c) if hi <= mx + c else (-_INF, hi - c)
    return lo, hi


def _cmp_range(cmp: str, c: int, value: bool, dom: str = "") -> tuple[float, float] | None:
    """The values of the compared register for which ``setp.CMP r, c`` gives ``value`` as one
    interval, or None when they are not one (``ne c``; but an unsigned ``ne 0`` is ``[1, inf)``:
    the role tests ``warp != 0`` of warp-specialized code)."""
    if not value:
        cmp = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}.get(cmp, "")
    if cmp == "lt":
        return (-_INF, c - 1)
    if cmp == "le":
        return (-_INF, c)
    if cmp == "gt":
        return (c + 1, _INF)
    if cmp == "ge":
        return (c, _INF)
    if cmp == "eq":
        return (c, c)
    if cmp == "ne" and c == 0 and dom.startswith("u"):
        return (1, _INF)
    return None


def _rel_interval(rel: str, c: int) -> tuple[float, float] | None:
    """The integers ``v`` with ``v REL c`` as a closed interval (None for ``ne``)."""
    return {"lt": (-_INF, c - 1), "le": (-_INF, c), "gt": (c + 1, _INF), "ge": (c, _INF),
            "eq": (c, c)}.get(rel)


def _affine_implies(rel: str, c: int, qrel: str, qc: int) -> bool | None:
    """Given ``v REL c`` (integers), the value of ``v QREL qc``: True / False when implied,
    None when not decided."""
    a = _rel_interval(rel, c)
    if a is None:  # v != c
        if qrel in ("ne", "eq") and qc == c:
            return qrel == "ne"
        return None
    if qrel == "ne":
        return True if not (a[0] <= qc <= a[1]) else (False if a == (qc, qc) else None)
    b = _rel_interval(qrel, qc)
    if b is None:
        return None
    if b[0] <= a[0] and a[1] <= b[1]:
        return True
    if a[1] < b[0] or b[1] < a[0]:
        return False
    return None


_NEGATE = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}
_SWAP = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "eq": "eq", "ne": "ne"}
#: (known relation of a to b, compare of a with b) -> its value, where implied
_REL_IMPLIES = {
    **{("lt", c): v for c, v in (("lt", True), ("le", True), ("ne", True), ("gt", False),
                                 ("ge", False), ("eq", False))},
    **{("gt", c): v for c, v in (("gt", True), ("ge", True), ("ne", True), ("lt", False),
                                 ("le", False), ("eq", False))},
    **{("eq", c): v for c, v in (("eq", True), ("le", True), ("ge", True), ("ne", False),
                                 ("lt", False), ("gt", False))},
    ("le", "le"): True, ("le", "gt"): False, ("ge", "ge"): True, ("ge", "lt"): False,
    ("ne", "ne"): True, ("ne", "eq"): False,
}


def _cmp_decide(cmp: str, lo: float, hi: float, c: int) -> bool | None:
    if cmp == "lt":
        return True if hi < c else (False if lo >= c else None)
    if cmp == "le":
        return True if hi <= c else (False if lo > c else None)
    if cmp == "gt":
        return True if lo > c else (False if hi <= c else None)
    if cmp == "ge":
        return True if lo >= c else (False if hi < c else None)
    if cmp == "eq":
        return True if lo == hi == c else (False if c < lo or c > hi else None)
    if cmp == "ne":
        r = _cmp_decide("eq", lo, hi, c)
        return None if r is None else not r
    return None


def solve(prop: Property) -> tuple[list[Event], bool]:
    """Run ``prop`` over its CFG to a fixed point.

    Returns:
        ``(events, converged)``: the violations found (deduplicated by rule, instruction and
        message; the first witness kept) and whether the fixed point was reached within the
        visit budget and :data:`TIME_BUDGET_S` (False: the caller must report that the result
        is incomplete).
    """
    cfg = prop.cfg
    values = prop.values
    if not cfg.blocks:
        return [], True
    assume = _Assume(cfg, values)
    fork_class = getattr(prop, "FORK_CLASS", 0)
    instrs = cfg.instrs
    rel = prop.relevant_index
    relevant = [[i for i in range(b.start, b.end) if rel(i)] for b in cfg.blocks]
    block_defs = [set(k for i in range(b.start, b.end) for k in values.defs[i])
                  for b in cfg.blocks]
    # state: per block, fact -> assumptions; witness per (block, fact)
    state: list[dict] = [dict() for _ in cfg.blocks]
    wit: list[dict] = [dict() for _ in cfg.blocks]
    events: dict[tuple, Event] = {}
    facts_at: dict[int, set] = {}
    init = prop.initial()
    state[0][init] = (frozenset(),)
    wit[0][init] = ()
    work = [0]
    queued = {0}
    visits = 0
    exit_id = cfg.exit_id
    deadline = time.process_time() + TIME_BUDGET_S
    while work:
        # process in reverse post-order position for fast convergence
        b = work.pop(0)
        queued.discard(b)
        visits += 1
        if visits > _MAX_VISITS or time.process_time() > deadline:
            return _confirm(prop, events, facts_at, assume), False
        blk = cfg.blocks[b]
        items = [(0, f, a, wit[b].get(f, ()), None, blk.start)
                 for f, alts in list(state[b].items()) for a in alts]
        nforks = 0
        rel_b = relevant[b]
        while items:
            k0, cur, A, w, skip, pos = items.pop()
            for k in range(k0, len(rel_b)):
                i = rel_b[k]
                ins = instrs[i]
                if i == skip:
                    continue          # the forked copy in which no thread executes it
                if ins.predicate is not None:
                    gk = cfg.reg_key(ins.predicate, i)
                    if A and assume.never(A, gk, ins.negated, _DefinedIn(values, pos, i),
                                          fork_class):
                        continue      # guarded off in every thread on this path
                    u = assume.uniform_conjunct(A, gk, ins.negated, fork_class)
                    if u is not None and nforks < _MAX_FORKS:
                        # fork on the CTA-uniform part of the guard: false (no thread executes
                        # the instruction) / true, so later branches correlate with it
                        nforks += 1
                        uk, uval = u
                        stale = _DefinedIn(values, pos, i)
                        Af = frozenset(x for x in A if x[1] not in stale)
                        items.append((k, cur, assume.add(Af, uk, not uval, at=i), w, i, i))
                        A = assume.add(Af, uk, uval, at=i)
                        pos = i
                cw = w

                def report(rule: str, message: str, severity: str | None = None,
                           fix: str | None = None, _i: int = i, _w: tuple = cw) -> None:
                    key = (rule, _i, message)
                    if key not in events:
                        events[key] = Event(rule, _i, message, _w + ((_i, "here"),), severity,
                                            fix)
                fs = facts_at.get(i)
                if fs is None:
                    facts_at[i] = {cur}
                elif len(fs) < 64:
                    fs.add(cur)
                new = prop.transfer(i, ins, cur, report)
                if new != cur:
                    d = prop.describe(i, ins, cur, new)
                    if d is not None:
                        w = (w + ((i, d),))[-MAX_WITNESS:]
                cur = new
            if A and block_defs[b]:
                stale = _DefinedIn(values, pos, blk.end) if pos != blk.start else block_defs[b]
                A = _advance(A, stale, values, instrs, pos, blk.end)
            for e in blk.succs:
                A2 = A
                w2 = w
                if e.cond is not None:
                    key, val = e.cond
                    known = assume.decide(A, key, at=blk.end - 1)
                    if known is not None and known != val:
                        continue
                    A2 = assume.add(A, key, val, at=blk.end - 1)
                    if assume.contradicts(A2):
                        continue          # no execution takes this edge on this path
                    last = instrs[blk.end - 1]
                    if last.parts[0] == "bra":
                        w2 = (w + ((blk.end - 1, "branch taken" if val != last.negated
                                    else "branch not taken"),))[-MAX_WITNESS:]
                if e.dst == exit_id:
                    last_i = blk.end - 1
                    li = last_i if instrs[last_i].parts[0] in ("ret", "exit", "trap") else None

                    def report_exit(rule: str, message: str, severity: str | None = None,
                                    fix: str | None = None, _i: int | None = li,
                                    _w: tuple = w2) -> None:
                        key = (rule, _i, message)
                        if key not in events:
                            events[key] = Event(rule, _i, message, _w, severity, fix)
                    if li is None or instrs[li].parts[0] != "trap":
                        prop.at_exit(li, cur, report_exit)
                    continue
                dst = state[e.dst]
                old = dst.get(cur)
                if old is None:
                    dst[cur] = (A2,)
                    wit[e.dst][cur] = w2
                else:
                    merged = _merge(old, A2)
                    if merged is None:
                        continue
                    dst[cur] = merged
                if e.dst not in queued:
                    queued.add(e.dst)
                    work.append(e.dst)
    return _confirm(prop, events, facts_at, assume), True


def _advance(A: frozenset, stale, values: Values, instrs, lo: int, hi: int) -> frozenset:
    """``A`` past the definitions in instructions ``[lo, hi)`` (the registers in ``stale``):
    assumptions about a redefined register are dropped, except a range of a counter whose one
    definition there is ``add``/``sub`` of a constant to itself: the range moves with it and is
    widened in the direction of the step (``%i`` in [0, 0], then ``add %i, %i, 1``: ``%i >= 1``),
    so a branch taken only when the counter has its start value (a producer that skips its
    first wait: ``setp.eq %p, %i, 0; @%p bra``) is not taken again on a later iteration. A
    counter that wraps around is not modelled (the wrap would make such a branch feasible
    again: a missed path, never a false error)."""
    out = []
    steps: dict = {}
    for a in A:
        k = a[1]
        if k not in stale:
            out.append(a)
            continue
        if a[0] != "r":
            continue
        if k not in steps:
            steps[k] = _self_step(values, instrs, k, lo, hi)
        c = steps[k]
        if c is None:
            continue
        _, _, rlo, rhi, dom = a
        if c > 0:
            out.append(("r", k, rlo + c, _INF, dom))
        elif c < 0:
            out.append(("r", k, -_INF, rhi + c, dom))
    return frozenset(out)


def _self_step(values: Values, instrs, key: str, lo: int, hi: int) -> int | None:
    """``c`` when register ``key``'s only definition in ``[lo, hi)`` is ``add key, key, c`` (or
    ``sub key, key, -c``) with an immediate ``c``, unpredicated; else None."""
    sites = values.def_sites.get(key, ())
    j = bisect.bisect_left(sites, lo)
    here = [d for d in sites[j:] if d < hi]
    if len(here) != 1:
        return None
    ins = instrs[here[0]]
    ops = ins.operands
    if ins.predicate is not None or ins.parts[0] not in ("add", "sub") or len(ops) != 3 or \
            ops[1].kind != "reg" or ops[0].name != ops[1].name or ops[2].kind != "imm":
        return None
    c = int(ops[2].value or 0)
    return c if ins.parts[0] == "add" else -c


class _DefinedIn:
    """``key in x``: register ``key`` has a definition at an index in ``[lo, hi)`` (binary search
    over its sorted definition sites; no per-instruction set building)."""

    __slots__ = ("defs", "hi", "lo")

    def __init__(self, values: Values, lo: int, hi: int):
        self.defs, self.lo, self.hi = values.def_sites, lo, hi

    def __contains__(self, key) -> bool:
        sites = self.defs.get(key)
        if not sites or self.lo >= self.hi:
            return False
        j = bisect.bisect_left(sites, self.lo)
        return j < len(sites) and sites[j] < self.hi


def _merge(old: tuple, A: frozenset) -> tuple | None:
    """Add assumption set ``A`` to the alternatives kept for one fact at a block entry.

    Up to :data:`MAX_ALTERNATIVES` alternatives are kept (a bounded disjunction, so branches
    correlated on *different* paths reaching the same fact stay distinguishable: an allocation
    skipped under ``%p2`` on one path and under ``!%p1`` on another). ``A`` is dropped when an
    alternative is a subset of it (that one already covers it); alternatives that are supersets
    of ``A`` are replaced by it. Past the bound all collapse into their intersection, as in ESP.
    Returns None when nothing changed. Terminates: every collapse strictly shrinks the set.
    """
    for S in old:
        if S <= A or _implies(A, S):
            return None
    alts = [S for S in old if not A <= S] + [A]
    if len(alts) > MAX_ALTERNATIVES:
        inter = alts[0]
        for S in alts[1:]:
            inter = inter & S
        return (inter,)
    return tuple(alts)


def _implies(A: frozenset, S: frozenset) -> bool:
    """Every assumption of ``S`` holds under ``A``: it is in ``A``, or it is a register range
    that a range of ``A`` for the same register and domain lies inside (a moved counter's
    ``%i >= 2`` implies the kept ``%i >= 1``)."""
    for s_ in S:
        if s_ in A:
            continue
        if s_[0] != "r":
            return False
        if not any(a[0] == "r" and a[1] == s_[1] and a[4] == s_[4] and a[2] >= s_[2]
                   and a[3] <= s_[3] for a in A):
            return False
    return True


def _modelled_path(cfg: CFG, ev: Event, assume: _Assume) -> bool:
    """Every branch decision on the event's witness tests a predicate the assumptions model
    (a comparison with a constant, or ``and``/``or``/``not`` of such, or a compare of two
    registers): the path is feasible as far as the solver can tell, not merely undecided.
    Compares of two registers model a path only while any two of them on it that share a
    register compare the same pair with the same values (:meth:`_Assume._same_reads`, so
    :meth:`_Assume._decide_cmp2` correlated them): ``%r3 >= %r69`` and ``%r3 >= %r66`` with
    ``%r69 = %r66 - 64`` - a linear relation - or a compare of a redefined register are beyond
    the solver, so the path is undecided."""
    seen: list[tuple] = []
    for i, step in ev.witness:
        if not step.startswith("branch"):
            continue
        ins = cfg.instrs[i]
        d = None if ins.predicate is None else assume._defs.get(cfg.reg_key(ins.predicate, i))
        if d is None:
            return False
        if d[0] != "cmp2":
            continue
        regs = {d[2], d[3]}
        for e in seen:
            other = {e[2], e[3]}
            if regs & other and (regs != other or not assume._same_reads(
                    d[5], e[5], tuple(sorted(regs)))):
                return False
        seen.append(d)
    return True


def _confirm(prop: Property, events: dict, facts_at: dict, assume: _Assume) -> list[Event]:
    """For the rules a property lists in ``CONFIRM``: keep an error only when every fact reaching
    the instruction triggers it; otherwise the violation depends on a path the analysis could not
    prove infeasible (loop-carried or data-dependent correlations): a note. Messages a property
    lists in ``CONFIRM_EXEMPT`` stay errors when every branch on their witness is modelled
    (:func:`_modelled_path`)."""
    out = []
    instrs = prop.cfg.instrs
    for (rule, i, msg), ev in events.items():
        if i is None or ev.severity == "note" or i not in facts_at or \
                rule not in getattr(prop, "CONFIRM", ()) or (
                    any(x in msg for x in getattr(prop, "CONFIRM_EXEMPT", ()))
                    and _modelled_path(prop.cfg, ev, assume)):
            out.append(ev)
            continue
        hits = 0
        facts = facts_at[i]
        for f in facts:
            got: list = []
            prop.transfer(i, instrs[i], f, lambda r, m, *a, _g=got, **k: _g.append((r, m)))
            if (rule, msg) in got:
                hits += 1
        if hits == len(facts):
            out.append(ev)
        else:
            out.append(Event(rule, i, msg + " (on some paths only; the analysis could not prove "
                             "the others infeasible)", ev.witness, "note", ev.fix))
    return out
