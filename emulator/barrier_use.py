"""Which CTA barriers ordered anything, on one concrete execution (``run_kernel(coverage=True)``).

A ``bar.sync`` / ``barrier.sync`` instance orders the memory operations its participants
performed before it with those they perform after it (PTX ISA 9.1 §9.7.13.1; §8.9 the
memory consistency model: only *conflicting* operations - same location, at least one a write,
from two threads - need ordering). Triton emits such barriers conservatively (its membar pass
puts one around every shared-memory op that another thread *might* touch), so removing one is
often not a bug at all; a mutation table must not count those removals as missed bugs. This
module measures, per barrier site, the instances that may have ordered a conflicting pair:

* each thread's memory operations are summarised per *window* (between two barrier arrivals
  of that thread) as two bits: **read** (a plain ``ld`` of shared / global / generic memory, a
  ``wgmma.mma_async`` reading its shared operands, a ``prefetch``) and **write-or-sync**
  (everything else that touches memory or orders it: stores, atomics, ``mbarrier`` ops,
  ``cp.async*`` / TMA issue, ``tensormap``, ``tcgen05``, ``barrier.cluster``,
  ``bar.warp.sync``, loads with ``.acquire`` / ``.relaxed`` / ``.volatile``, an unknown opcode;
  a ``fence`` / ``membar`` counts once its thread has touched memory before it - a fence with no
  earlier access of its thread orders nothing); the addresses are ignored (any two summaries
  with a write-or-sync and anything conflict);
* instance *I* with participants *S* (all of them waiting: a ``bar.arrive`` participant makes
  it count as acting) **acted** when, for two different threads a, b of S, a's operations
  since its previous barrier instance that every thread of S waited at conflict with b's
  operations until its next such instance. An instance of another barrier passed on the way
  counts as a write-or-sync (it may carry the ordering on to a third thread);
* an instance whose arrivals came from more than one source line, or that never completed,
  counts as acting (removing one site would pair the others differently).

A site whose every instance did not act can be removed without changing the happens-before
order of any two conflicting operations of this execution: every such pair stays ordered by
the barriers around it. ``emulator.run_kernel`` returns the counts as
``EmulationResult.barrier_effects``; ``tests/verifier/fast_mutants.py`` leaves such removals
out of the mutation table as equivalent on the executed paths (a second run electing the
highest lane of ``elect.sync`` must agree, since PTX ISA 9.1 §9.7.13.x says only that the
election is deterministic, not which lane wins).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

READ, WRITE = 1, 2
_FENCE, _BOUNDARY = 3, 4

#: opcodes with no memory effect another thread can observe (register, warp-collective value
#: exchange without ordering guarantees, address computation, hints)
_NONE = frozenset((
    "abs", "activemask", "add", "addc", "and", "bfe", "bfi", "bfind", "bmsk", "bra", "brev",
    "brx", "clz", "cnot", "copysign", "cos", "createpolicy", "cvt", "cvta", "div", "elect",
    "ex2", "exit", "fma", "fns", "getctarank", "isspacep", "lg2", "lop3", "mad", "mad24",
    "madc", "mapa", "max", "min", "mov", "mul", "mul24", "nanosleep", "neg", "not", "or",
    "popc", "prmt", "rcp", "redux", "rem", "ret", "rsqrt", "sad", "selp", "set", "setmaxnreg",
    "setp", "shf", "shfl", "shl", "shr", "sin", "slct", "sqrt", "sub", "subc", "tanh", "testp",
    "vote", "xor", "match", "szext", "dp4a", "dp2a", "mma", "applypriority", "discard_hint",
    "pmevent", "trap", "brkpt", "stacksave", "stackrestore", "alloca"))
_SYNC_LOAD = ("acquire", "relaxed", "volatile", "mmio")


def classify(ins: Any) -> int:
    """The window summary bit of instruction ``ins`` (module docstring): 0 (none), READ, WRITE,
    ``_FENCE`` (a fence: WRITE once its thread touched memory) or ``_BOUNDARY`` (a CTA
    barrier the tracker sees as an arrival)."""
    base, parts = ins.base, ins.parts
    if base in ("bar", "barrier"):
        if "warp" in parts or "cluster" in parts:
            return WRITE
        return _BOUNDARY
    if base in ("fence", "membar"):
        return _FENCE
    if base in ("ld", "ldu", "ldmatrix"):
        if len(parts) > 1 and parts[1] in ("param", "const"):
            return 0
        return WRITE if any(p in _SYNC_LOAD for p in parts) else READ
    if base == "prefetch" or base == "prefetchu":
        return READ
    if base == "wgmma":
        return READ if len(parts) > 1 and parts[1] == "mma_async" else 0
    if base in _NONE:
        return 0
    return WRITE  # stores, atomics, mbarrier, cp.async*, tensormap, tcgen05, unknown


class BarrierUse:
    """Per-thread window summaries and barrier instances of one :class:`~emulator.machine.
    Machine` run; install with :meth:`install`, feed each executed instruction through
    :meth:`step`, read :meth:`effects` after the run."""

    def __init__(self, mach: Any) -> None:
        self.mach = mach
        self.kind = np.array([classify(ins) for ins in mach.prog.insts], np.int8)
        self.cur = np.zeros(0, np.int8)
        self.touched = np.zeros(0, np.bool_)
        # thread (global lane) -> [(instance key or None, summary of the window before it)]
        self.hist: dict[int, list[tuple[tuple | None, int]]] = defaultdict(list)
        # instance key (global CTA, barrier id, generation) -> {thread: (pc, waited, index)}
        self.inst: dict[tuple, dict[int, tuple[int, bool, int]]] = defaultdict(dict)
        self.fired: set[tuple] = set()
        self.gen: dict[tuple[int, int], int] = defaultdict(int)

    def install(self) -> None:
        """Wrap the machine's barrier arrival, barrier release and batch run."""
        m = self.mach
        arrive, release, run_batch = m.barrier, m._release_barriers, m._run_batch

        def barrier(pc, exe, bar_id, count, wait):
            lanes = np.flatnonzero(exe)
            T = m.T
            for lane in lanes.tolist():
                g = int(m.glane[lane])
                key = (g // T, int(bar_id[lane]))
                ik = (*key, self.gen[key])
                h = self.hist[g]
                self.inst[ik][g] = (pc, bool(wait), len(h))
                h.append((ik, int(self.cur[lane])))
                self.cur[lane] = 0
            return arrive(pc, exe, bar_id, count, wait)

        def release_barriers(pc, ctas):
            ctas = np.asarray(ctas, dtype=np.int64).reshape(-1)
            before = m.bar_count[ctas].copy() if ctas.size else None
            out = release(pc, ctas)
            if before is not None:
                after = m.bar_count[ctas]
                for i, b in np.argwhere((before > 0) & (after == 0)).tolist():
                    key = (int(m.batch_ids[ctas[i]]), int(b))
                    self.fired.add((*key, self.gen[key]))
                    self.gen[key] += 1
            return out

        def batch(ids):
            n = np.asarray(ids).size * m.T
            self.cur = np.zeros(n, np.int8)
            self.touched = np.zeros(n, np.bool_)
            try:
                return run_batch(ids)
            finally:
                for lane in range(min(n, getattr(m, "N", n))):
                    self.hist[int(m.glane[lane])].append((None, int(self.cur[lane])))

        m.barrier, m._release_barriers, m._run_batch = barrier, release_barriers, batch

    def step(self, pc: int, exe: np.ndarray) -> None:
        """Record instruction ``pc`` executed by the lanes of ``exe`` (guard true)."""
        k = self.kind[pc]
        if k == 0 or k == _BOUNDARY:
            return
        if k == _FENCE:
            self.cur[exe & self.touched] |= WRITE
            return
        self.cur[exe] |= k
        self.touched[exe] = True

    def _waiters(self, ik: tuple) -> set[int] | None:
        if ik not in self.fired:
            return None
        return {g for g, (_, w, _) in self.inst[ik].items() if w}

    def _side(self, g: int, idx: int, members: set[int], forward: bool) -> int:
        """Summary of thread ``g``'s operations on one side of its arrival ``idx``, out to
        the nearest instance every thread of ``members`` waited at."""
        h = self.hist[g]
        acc = 0
        j = idx + 1 if forward else idx
        while 0 <= j < len(h):
            ik, bits = h[j]
            acc |= bits
            nxt = h[j][0] if forward else (h[j - 1][0] if j > 0 else None)
            if nxt is None:
                break
            w = self._waiters(nxt)
            if w is not None and members <= w:
                break
            acc |= WRITE  # another barrier passed: it may carry the ordering on
            j += 1 if forward else -1
        return acc

    def acted(self, ik: tuple) -> bool:
        """Whether instance ``ik`` may have ordered two conflicting operations (module
        docstring)."""
        parts = self.inst[ik]
        if ik not in self.fired or len({pc for pc, _, _ in parts.values()}) > 1 or \
                not all(w for _, w, _ in parts.values()):
            return True
        members = set(parts)
        before = {g: self._side(g, idx, members, False) for g, (_, _, idx) in parts.items()}
        after = {g: self._side(g, idx, members, True) for g, (_, _, idx) in parts.items()}
        bw = [g for g, b in before.items() if b & WRITE]
        ba = [g for g, b in before.items() if b]
        aw = [g for g, b in after.items() if b & WRITE]
        aa = [g for g, b in after.items() if b]
        return _cross(bw, aa) or _cross(ba, aw)

    def effects(self) -> dict[int, int]:
        """Per program counter of a CTA barrier site: the number of its instances that acted
        (an instance counts at each site it has arrivals from)."""
        out: dict[int, int] = defaultdict(int)
        for ik, parts in self.inst.items():
            a = self.acted(ik)
            for pc in {pc for pc, _, _ in parts.values()}:
                out[pc] += int(a)
        return dict(out)


def _cross(xs: list[int], ys: list[int]) -> bool:
    """Whether some x of ``xs`` and y of ``ys`` are different threads."""
    if not xs or not ys:
        return False
    return len(xs) > 1 or len(ys) > 1 or xs[0] != ys[0]
