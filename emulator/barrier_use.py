"""Which CTA barriers ordered anything, on one concrete execution (``run_kernel(coverage=True)``).

A ``bar.sync`` / ``barrier.sync`` instance orders the memory operations its participants
performed before it with those they perform after it (PTX ISA 9.1 §9.7.13.1; §8.9 the
memory consistency model: only *conflicting* operations - same location, at least one a write,
from two threads - need ordering). Triton emits such barriers conservatively (its membar pass
puts one around every shared-memory op that another thread *might* touch), so removing one is
often not a bug at all; a mutation table must not count those removals as missed bugs. This
module measures, per barrier site, the instances that may have ordered a conflicting pair.

Each thread's operations are summarised per *window* (between two barrier arrivals of that
thread):

* **by address** where the emulator sees every byte the instruction touches: plain (weak)
  ``ld`` / ``st`` / ``ldmatrix`` / ``stmatrix``, relaxed ``atom`` / ``red`` (a write),
  non-bulk ``cp.async`` (source read, destination write), ``wgmma.mma_async`` (its shared
  operands read), TMA / bulk copies without multicast (destination written, shared source
  read, global source read at *unknown* addresses: it conflicts with any global write; a
  load into shared memory completed through an mbarrier writes its bytes at that completion,
  so they conflict with operations *after* a barrier - a refill issued there - and reach
  others *before* it only through the completion: a wait that acquired it, below),
  ``tensormap.cp_fenceproxy`` (its 128 bytes, for every lane of the warp: it is
  warp-collective), ``cp.async.wait_group`` (the thread's copies land there), and the
  ``tcgen05`` operations on tensor memory - ``ld`` / ``st`` of every shape (their
  cells, in flight until ``wait::ld`` / ``wait::st``), ``mma`` / ``cp`` (accumulator,
  TMEM operand and scale cells and shared operands, *asynchronous*: a barrier after the
  issue orders them with other threads' tcgen05 operations, which run in issue order, but
  with anything else only through the completion the thread's next ``tcgen05.commit``
  publishes on its mbarrier - a release of those accesses), ``alloc`` / ``dealloc`` (the
  columns they hand out / take back, all 128 lanes; the address ``alloc`` writes to shared
  memory; ``relinquish_alloc_permit`` a read of the CTA's allocation permit, which
  ``alloc`` writes) - as sets of granules read and written (8 shared or global bytes; 4 TMEM columns
  of one lane; a granule a plain access touches only in part by its bytes, so that two
  threads' accesses to different bytes of one granule - a 4-byte ``cp.async`` each - are no
  conflicting pair), taken from the happens-before checker's own calls (``Machine._hb_check``,
  the same bytes it race-checks; TMEM cells through ``Machine.tmem_note``, the emulator's
  own cell computation); and ``mbarrier`` operations as
  operations on their object with the phase they landed in: ``init`` / ``inval`` (a write), an *arrival*
  (``arrive``, ``arrive.expect_tx``), a *tx* operation (``expect_tx``, ``complete_tx``, a
  copy's completion) and a *wait* (``test_wait`` / ``try_wait``);
* **address-blind** (two bits, **read** and **write-or-sync**, conflicting with any operation
  of the other side) for everything else that touches or orders memory: strong / ``.acquire``
  / ``.volatile`` loads and stores, ``atom`` with ordering semantics, other ``tcgen05``
  operations (``shift``, multicast commits, ``cta_group::2``),
  ``barrier.cluster``, bulk wait / commit groups,
  ``mbarrier.arrive_drop``, multicast copies, an unknown opcode, and every instruction run
  by a thread the race checker does not track. A ``fence`` / ``membar`` (and the release of
  ``tensormap.cp_fenceproxy``, and the uni-directional ``.release`` / ``.acquire`` proxy
  fences) counts as a write once its thread has touched memory or passed a barrier before it
  (a fence is cumulative: it also orders what the thread observed) *and* the thread does a
  relaxed strong operation summarised by address (``atom`` / ``red`` without ordering
  semantics, a ``.relaxed`` mbarrier operation): a fence synchronises with another thread
  only through a strong access of its own thread after it (release) or before it (acquire)
  (PTX ISA 9.1 §8.8, release / acquire patterns), and strong accesses summarised blind are
  writes themselves. A bidirectional ``fence.proxy.*`` and ``tcgen05.fence::*`` count as
  nothing (they order only their own thread's accesses across proxies / with its thread
  synchronisation, and those accesses are summarised themselves); a ``bar.warp.sync`` counts
  as nothing in a thread whose whole warp takes part in the instance (a thread it could order
  something for is then a participant, compared directly), else as a write.

Instance *I* with participants *S* (all of them waiting: a ``bar.arrive`` participant makes
it count as acting) **acted** when, for two different threads a, b of S, a's summary since its
previous barrier instance that every thread of S waited at (*before*) and b's summary until
its next such instance (*after*) have

1. a conflicting pair: a blind write and anything, a blind read and a write, a granule one
   side writes and the other touches, an mbarrier ``init`` and any operation on that object,
   a wait and a modifying operation on one object, or two modifying operations on one object
   that do not commute. They commute when a's is an *arrival* and both landed in the same
   phase: while a's arrival is outstanding the phase's pending count is at least 1, so no
   order of b's arrive / tx operations before it can complete the phase early, and once it is
   done the counts are the same (PTX ISA 9.1 §9.7.13.15.1-2: a phase completes when the
   pending arrival count and the tx-count both reach zero; the tx-count may go negative).
   Not a conflict: a's asynchronous accesses (a copy's landing bytes, tcgen05.mma / cp)
   against b's generic ones (only their completion orders those), and a's wgmma read of a
   granule against b's write when b's own ``wgmma.wait_group`` retired that group before
   the barrier (wgmma groups are warpgroup-collective: b is ordered after the reads by its
   own program order);
2. a chain through a third thread: b's after-side *releases* (an mbarrier arrival or tx
   operation of phase p) and a third thread c whose wait on that object succeeded at a later
   phase (so it acquired b's release) does, from that wait until the first barrier instance
   of another site that a arrived at after this one and c waited at, something that
   conflicts with a's before-side - or anything address-blind, or a release of its own (the
   chain may go on); not when a's before-side holds only arrivals on the objects and phases
   of every one of b's releases (whoever acquires b's then acquires a's directly). Or a's
   before-side *acquires* (a successful wait at phase q) and some releaser d of an earlier
   phase of that object did, between the latest barrier instance of another site that every
   participant waited at before this one and its release, something that conflicts with b's
   after-side (what a acquired reaches b only through this barrier) - for a copy's
   completion, the bytes that copy wrote (its ``complete_tx`` publishes those, not its
   issuer's other operations; the issuer's own ``arrive.expect_tx`` is a release of its own);
   a span of d's holding an acquire of its own counts as a conflict (the chain may go on).

The two sides reach past the other instances of the same site (removing a site removes
all of them: a write two iterations before a read is then ordered by neither); an instance of
another barrier passed on the way counts as a blind write (it may carry the ordering on to a
third thread); an instance whose arrivals came from more than one source line,
or that never completed, counts as acting (removing one site would pair the others
differently).

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

from emulator.async_copy import _state as _bulk_state
from emulator.ops import _addr_u
from emulator.registry import _lanes

READ, WRITE = 1, 2
_FENCE, _BOUNDARY = 3, 4
#: the window bit of a ``bar.warp.sync``: nothing in a thread whose whole warp takes part in
#: the instance (a thread it could carry an ordering on to is itself a participant, whose own
#: accesses are compared directly), else a blind write
_WARP = 8

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
    """The address-blind window summary bit of instruction ``ins`` (module docstring): 0
    (none), READ, WRITE, ``_FENCE`` (a fence: WRITE once its thread touched memory) or
    ``_BOUNDARY`` (a CTA barrier the tracker sees as an arrival)."""
    base, parts = ins.base, ins.parts
    if base in ("bar", "barrier"):
        if "cluster" in parts:
            return WRITE
        if "warp" in parts:
            return _WARP
        return _BOUNDARY
    if base == "fence" and len(parts) > 1 and parts[1] == "proxy" and not any(
            p in _SEM for p in parts):
        # a bidirectional proxy fence orders its own thread's accesses across proxies (PTX ISA
        # 9.1 §9.7.13.4 membar/fence: fence.proxy.proxykind): what a barrier after it orders
        # is its thread's accesses, summarised themselves. The uni-directional ones
        # (fence.proxy.tensormap::generic.release / .acquire ...) have release / acquire
        # semantics at a scope and count as fences
        return 0
    if base in ("fence", "membar"):
        return _FENCE
    if base in ("ld", "ldu", "ldmatrix"):
        if len(parts) > 1 and parts[1] in ("param", "const"):
            return 0
        return WRITE if any(p in _SYNC_LOAD for p in parts) else READ
    if base == "prefetch" or base == "prefetchu":
        return READ
    if base == "wgmma":
        # mma_async reads its shared operands; wait_group completes in-flight operand reads
        return READ if len(parts) > 1 and parts[1] in ("mma_async", "wait_group") else 0
    if base == "tcgen05" and len(parts) > 1 and parts[1].startswith("fence::"):
        # tcgen05.fence::before/after_thread_sync orders the thread's own tcgen05 operations
        # with its thread synchronisation (PTX ISA 9.1 §9.7.16.6.3); those operations are
        # summarised themselves
        return 0
    if base == "tcgen05" and len(parts) > 1 and parts[1] == "relinquish_alloc_permit":
        # no memory effect; it only orders a later tcgen05.alloc of the CTA (a write here)
        return READ
    if base in _NONE or (base == "cp" and "commit_group" in parts):
        return 0  # (a commit only groups the thread's own copies; the wait completes them)
    return WRITE  # stores, atomics, mbarrier, cp.async*, tensormap, tcgen05, unknown


#: :func:`addressed` codes
MEM, MBAR, COPY, WAIT, TC = 1, 2, 3, 4, 5
#: tcgen05 operations summarised by address (``TC``): their TMEM cells through
#: ``Machine.tmem_note`` (``emulator.tcgen05_ext``), shared bytes through the checker
_TC_OPS = ("ld", "st", "mma", "cp", "commit", "wait::ld", "wait::st", "alloc", "dealloc",
           "relinquish_alloc_permit")
_SEM = ("acquire", "release", "acq_rel", "sc")  # memory-ordering semantics qualifiers
_ORDERING = (*_SEM, "relaxed", "volatile", "mmio")
_MBAR_OPS = {"init": "init", "inval": "init", "arrive": "arr", "expect_tx": "tx", "complete_tx": "tx",
             "try_wait": "wait", "test_wait": "wait"}


def addressed(ins: Any) -> int:
    """How the operations of ``ins`` are summarised by address (module docstring): ``MEM``
    (every byte it touches passes the happens-before checker), ``MBAR`` (an mbarrier operation
    on its object), ``COPY`` (a TMA / bulk copy: its bytes through the checker, its mbarrier
    completion as a tx operation, a global source at unknown addresses), or 0 (address-blind,
    :func:`classify`)."""
    base, parts = ins.base, ins.parts
    if base in ("st", "red", "atom") and "async" in parts:
        return 0  # st.async / red.async: a remote write that also completes an mbarrier's tx
    if base in ("ld", "ldu", "st"):
        if len(parts) > 1 and parts[1] in ("param", "const", "local"):
            return 0
        return 0 if any(p in _ORDERING for p in parts) else MEM
    if base in ("ldmatrix", "stmatrix"):
        return MEM
    if base == "tensormap" and len(parts) > 1 and parts[1] in ("replace", "cp_fenceproxy"):
        # a generic-proxy write of the field / the 128-byte copy of a tensor map from shared
        # to global memory (emulator.async_copy._tensormap; cp_fenceproxy's release part is a
        # fence, ``_fence_like``)
        return MEM
    if base in ("atom", "red"):
        return 0 if any(p in _SEM for p in parts) else MEM
    if base == "wgmma":
        if len(parts) > 1 and parts[1] == "wait_group":
            return WAIT
        return MEM if len(parts) > 1 and parts[1] == "mma_async" else 0
    if base == "mbarrier":
        if len(parts) < 2 or parts[1] not in _MBAR_OPS:
            return 0
        return MBAR
    if base == "tcgen05":
        op = parts[1] if len(parts) > 1 else ""
        if op not in _TC_OPS or "multicast::cluster" in parts or "cta_group::2" in parts or \
                (op == "commit" and "mbarrier::arrive::one" not in parts):
            return 0  # multicast, shift: address-blind
        return TC
    if base == "cp":
        if "bulk" in parts and "wait_group" in parts:
            return WAIT
        if len(parts) > 1 and parts[1] == "async" and ("wait_group" in parts or
                                                      "wait_all" in parts):
            # cp.async.wait_group / wait_all: the thread's own copies land here, their bytes
            # recorded through the checker's completion call (``checked``); nothing else
            return MEM
        if "commit_group" in parts or "prefetch" in parts or "multicast::cluster" in parts:
            return 0
        if "bulk" in parts:
            return COPY
        if len(parts) > 1 and parts[1] == "async" and not any(
                p.startswith("mbarrier") for p in parts):  # (cp.async.mbarrier.arrive: blind)
            return MEM  # non-bulk cp.async: source read, destination write (async_issue)
    return 0


_SPACES = ("global", "shared::cluster", "shared::cta", "shared")


class _Win:
    """One thread's operations over one or more windows, by address (module docstring):
    granules read / written (8-byte granules; shared ones even, global ones odd), mbarrier
    operations ``(granule, op, phase)``, a global read at unknown addresses, whether a wait
    (an acquire) is among them."""

    __slots__ = ("acq", "cw", "gr_any", "mb", "r", "rb", "rg", "rp", "tr", "tw", "w", "wb")

    def __init__(self) -> None:
        self.r: set[int] = set()
        self.w: set[int] = set()
        # granules a plain access read / wrote only in part (a 4-byte ``cp.async``, a ``b16``
        # load) -> the bytes it touched (bit i: byte i of the granule): two threads' accesses
        # to different bytes of one granule do not conflict. A granule in ``r`` / ``w`` is
        # one the window touched in full (or that a path recording granules only - a wgmma's
        # or a bulk store's in-flight reads, an mbarrier init - added), all 8 bytes: a granule
        # may be in both, and every check takes both
        self.rb: dict[int, int] = {}
        self.wb: dict[int, int] = {}
        # of the granules read: those read by a plain (thread) access, and per granule read by
        # a wgmma the groups that read it ((warpgroup, commit-group number)): every thread of
        # the warpgroup that retires such a group is ordered after its reads by itself
        self.rp: set[int] = set()
        self.rg: dict[int, set[tuple[int, int]]] = {}
        # shared granules a copy issued here writes when it completes (a TMA / bulk load into
        # shared memory, completed through its mbarrier): conflicts of later accesses with
        # them are ordered by that completion, not by a barrier after the issue
        self.cw: set[int] = set()
        # granules an asynchronous tcgen05 operation issued here reads / writes (tcgen05.mma
        # operands and accumulator, tcgen05.cp source and destination): ordered for other
        # threads by the completion its tcgen05.commit publishes, and among tcgen05
        # operations by their issue order (a barrier between two issues orders them)
        self.tr: set[int] = set()
        self.tw: set[int] = set()
        self.mb: list[tuple[int, str, int]] = []
        self.gr_any = False
        self.acq = False

    def merge(self, o: _Win | None) -> None:
        if o is None:
            return
        self.r |= o.r
        self.w |= o.w
        _or_masks(self.rb, o.rb)
        _or_masks(self.wb, o.wb)
        self.rp |= o.rp
        for x, gks in o.rg.items():
            self.rg.setdefault(x, set()).update(gks)
        self.cw |= o.cw
        self.tr |= o.tr
        self.tw |= o.tw
        self.mb.extend(o.mb)
        self.gr_any |= o.gr_any
        self.acq |= o.acq

    def empty(self) -> bool:
        return not (self.r or self.w or self.rb or self.wb or self.cw or self.tr or self.tw
                    or self.mb or self.gr_any)

    def writes(self) -> bool:
        return bool(self.w or self.wb or self.cw or self.tw) or any(op not in _WAITS
                                                                    for _, op, _ in self.mb)

    def releases(self) -> bool:
        return any(op in ("arr", "tx") for _, op, _ in self.mb)

    def global_write(self) -> bool:
        return any(x >= 0 and x & 1 for x in self.w) or any(  # (TMEM granules are negative)
            x & 1 for x in self.wb)

    def touched_w(self) -> set[int]:
        """The granules it writes, a granule it writes in part included (conservative)."""
        return self.w.union(self.cw, self.tw, self.wb)

    def touched_r(self) -> set[int]:
        """The granules it reads, a granule it reads in part included (conservative)."""
        return self.r.union(self.tr, self.rb)


class BarrierUse:
    """Per-thread window summaries and barrier instances of one :class:`~emulator.machine.
    Machine` run; install with :meth:`install`, feed each executed instruction through
    :meth:`step`, read :meth:`effects` after the run."""

    def __init__(self, mach: Any) -> None:
        self.mach = mach
        insts = mach.prog.insts
        self.kind = np.array([classify(ins) for ins in insts], np.int8)
        self.addr = np.array([addressed(ins) for ins in insts], np.int8)
        self.spin = _spin_waits(mach.prog)
        self.cur = np.zeros(0, np.int8)
        self.acur: dict[int, _Win] = {}
        # lane -> in-flight reads / writes of its wgmma groups and bulk (store) groups:
        # [kind, group, granules read, granules written]; a wait that retires one adds them
        self.pend: dict[int, list[list]] = defaultdict(list)
        # mbarrier granule -> successful waits (thread, phase then, index of its window)
        self.acquires: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        # mbarrier granule -> arrivals / tx operations (thread, phase, index of its window,
        # for a copy's completion the shared granules that copy writes, filled in as it runs
        # (its complete_tx releases those bytes, not its issuer's earlier operations), for a
        # tcgen05.commit what the asynchronous tcgen05 operations it tracks access; None for
        # an arrival / expect_tx, which releases the thread's operations before it; its
        # sequence number, :attr:`acq_seq`)
        self.releases: dict[int, list[tuple[int, int, int, _Win | None, int]]] = \
            defaultdict(list)
        self._copying: dict[int, tuple[int, set[int]]] = {}  # lane -> (pc, its copy's bytes)
        # lane -> what its asynchronous tcgen05 operations since its last commit access
        self._tc_async: dict[int, _Win] = {}
        self.incarnation: dict[int, int] = defaultdict(int)  # mbarrier granule -> inits so far
        # (warpgroup, wgmma commit-group number) -> thread -> index of the window in which the
        # thread's wgmma.wait_group retired that group; per thread the last group retired
        self.wg_retired: dict[tuple[int, int], dict[int, int]] = defaultdict(dict)
        self.wg_done: dict[int, int] = {}
        # thread -> (window index, sequence number) of its successful mbarrier waits; the
        # sequence numbers order a thread's mbarrier operations within a window
        self.acq_seq: dict[int, list[tuple[int, int]]] = defaultdict(list)
        self.seq = 0
        self.touched = np.zeros(0, np.bool_)
        # per lane of the batch: it executed a fence (after touching memory) / a relaxed
        # strong operation that is summarised by address (a fence turns it into a release or
        # acquire pattern, PTX ISA 9.1 §8.8: fence + strong write, strong read + fence)
        self.fenced = np.zeros(0, np.bool_)
        self.relaxed = np.zeros(0, np.bool_)
        self.fence_like = np.array([_fence_like(ins) for ins in insts], np.bool_)
        self.relaxed_op = np.array([_relaxed_strong(ins) for ins in insts], np.bool_)
        self._exe = np.zeros(0, np.bool_)
        # thread (global lane) -> [(instance key or None, blind bits, by-address summary)]
        self.hist: dict[int, list[tuple[tuple | None, int, _Win | None]]] = defaultdict(list)
        # instance key (global CTA, barrier id, generation) -> {thread: (pc, waited, index)}
        self.inst: dict[tuple, dict[int, tuple[int, bool, int]]] = defaultdict(dict)
        self.fired: set[tuple] = set()
        self.gen: dict[tuple[int, int], int] = defaultdict(int)
        self._waiting: dict[tuple, set[int] | None] = {}  # :meth:`_waiters`, after the run
        self._site_of: dict[tuple, frozenset[int]] = {}  # :meth:`_sites`, after the run

    def _win(self, lane: int) -> _Win:
        w = self.acur.get(lane)
        if w is None:
            w = self.acur[lane] = _Win()
        return w

    def install(self) -> None:
        """Wrap the machine's barrier arrival, barrier release, batch run and happens-before
        access check."""
        m = self.mach
        arrive, release, run_batch = m.barrier, m._release_barriers, m._run_batch
        hb_check = m._hb_check
        insts = m.prog.insts

        def barrier(pc, exe, bar_id, count, wait):
            lanes = np.flatnonzero(exe)
            T = m.T
            self.touched[lanes] = True  # it observes the others' operations from here on
            for lane in lanes.tolist():
                g = int(m.glane[lane])
                key = (g // T, int(bar_id[lane]))
                ik = (*key, self.gen[key])
                h = self.hist[g]
                self.inst[ik][g] = (pc, bool(wait), len(h))
                h.append((ik, int(self.cur[lane]), self.acur.pop(lane, None)))
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
            self.acur = {}
            self.pend = defaultdict(list)
            self._copying = {}
            self._tc_async = {}
            self.touched = np.zeros(n, np.bool_)
            self.fenced = np.zeros(n, np.bool_)
            self.relaxed = np.zeros(n, np.bool_)
            try:
                return run_batch(ids)
            finally:
                for lane in range(min(n, getattr(m, "N", n))):
                    self.hist[int(m.glane[lane])].append(
                        (None, int(self.cur[lane]), self.acur.pop(lane, None)))

        def checked(sh, space, lanes, idx, pc, data, kind, rec_lane=None, rec_clk=None):
            if kind == "async_complete" and insts[pc].base == "cp" and "bulk" not in \
                    insts[pc].parts:
                # a cp.async's bytes land at the wait_group that completes it (``pc`` is the
                # copy's): writes of the waiting thread, in its window now
                self._record(space, lanes, idx, True, pc)
            elif kind != "async_complete" and self.addr[pc] in (MEM, COPY, TC) and not (
                    insts[pc].base == "cp" and space == "shared" and kind == "atomic"
                    and idx.shape[-1] == 8):  # a copy's complete_tx: recorded in step()
                self._record(space, lanes, idx, data is not None or kind == "async_issue", pc)
            return hb_check(sh, space, lanes, idx, pc, data, kind, rec_lane, rec_clk)

        m.barrier, m._release_barriers, m._run_batch = barrier, release_barriers, batch
        m._hb_check = checked
        m.tmem_note = self._tmem_note

    def _tmem_note(self, write: bool, ln: int, c: int, rows: np.ndarray, cols: np.ndarray,
                   pc: int) -> None:
        """TMEM cells (batch CTA ``c``, ``rows`` x ``cols``) that lane ``ln`` accesses at
        ``pc`` (``Machine.tmem_note``): a ``tcgen05.ld`` / ``st`` reads / writes them and they
        stay in flight until its ``wait::ld`` / ``wait::st``; a ``tcgen05.mma`` / ``cp`` access
        them asynchronously (``_Win.tr`` / ``tw``) until the thread's next commit."""
        g = _tmem_granules(c, rows, cols)
        op = self.mach.prog.insts[pc].parts[1]
        w = self._win(ln)
        if op in ("ld", "st"):
            (w.w if write else w.r).update(g)
            if not write:
                w.rp.update(g)
            kind = "tst" if write else "tld"
            pl = self.pend[ln]
            if not pl or pl[-1][0] != kind or pl[-1][4] != pc:
                pl.append([kind, 0, set(), set(), pc])
            pl[-1][3 if write else 2].update(g)
            return
        (w.tw if write else w.tr).update(g)
        acc = self._tc_async.setdefault(ln, _Win())
        (acc.w if write else acc.r).update(g)

    def _record(self, space: str, lanes: np.ndarray, idx: np.ndarray, write: bool, pc: int
                ) -> None:
        """Granules of one checked access of ``lanes`` into their windows; a wgmma's operand
        reads and a bulk store's source reads / global writes also stay in flight (``pend``)
        until the wait that retires their group."""
        m = self.mach
        lanes = np.asarray(lanes).reshape(-1)
        if not lanes.size:
            return
        tag = 0 if space == "shared" else 1
        B = np.asarray(idx, dtype=np.int64).reshape(lanes.size, -1)  # the bytes, per lane
        g = (B // 8) * 2 + tag
        ins = m.prog.insts[pc]
        kind = None
        if ins.base == "wgmma":
            kind = "wg"
        elif ins.base == "cp" and "bulk" in ins.parts and not any(
                x.startswith("mbarrier::") for x in ins.parts):  # a store: bulk group
            kind = "bulk"
        # a load into shared memory completed through an mbarrier: its writes land at the
        # completion (_Win.cw)
        landing = write and space == "shared" and ins.base == "cp" and \
            "mbarrier::complete_tx::bytes" in ins.parts
        if ins.base == "tcgen05" and ins.parts[1] in ("mma", "cp"):
            # an asynchronous tensor-core read of shared memory (the operand descriptors)
            for r, ln in enumerate(lanes.tolist()):
                if ln < m.ntr:
                    gs = np.unique(g[r]).tolist()
                    self._win(ln).tr.update(gs)
                    self._tc_async.setdefault(ln, _Win()).r.update(gs)
            return
        if ins.base == "tensormap" and ins.parts[1] == "cp_fenceproxy":
            # warp-collective (.sync.aligned): the emulator moves the bytes for one lane per
            # warp; every executing lane of the warp did the copy
            ex = np.flatnonzero(self._exe[:m.ntr])
            reps = [int(np.count_nonzero(ex // 32 == ln // 32)) for ln in lanes]
            g = np.repeat(g, reps, axis=0)
            B = np.repeat(B, reps, axis=0)
            lanes = np.concatenate([ex[ex // 32 == ln // 32] for ln in lanes])
        # a plain access's granules touched only in part go to the window by byte (_Win.rb /
        # wb); a wgmma's operand reads (per commit group, _Win.rg) and a copy's landing bytes
        # stay whole granules, as does everything kept in flight (``pend``): coarser is safe
        nb = B.shape[1]
        # (fewer than 8 bytes: no granule whole; ``part``: every byte goes by byte)
        part = nb < 8 and not landing and kind != "wg"
        full = None if landing or kind == "wg" or part else _whole(B)
        whole_rows = None if full is None else full.all(axis=1).tolist()
        masks = _masks(B, tag) if part else None
        small = nb <= 16  # (a short row: its granules as a list, repeats and all)
        rows = g.tolist() if small else None
        for r, ln in enumerate(lanes.tolist()):
            if ln >= m.ntr:
                continue
            w = self._win(ln)
            gs = rows[r] if small else np.unique(g[r]).tolist()
            if part:
                _or_masks(w.wb if write else w.rb, masks[r])
            elif full is None or whole_rows[r]:
                (w.cw if landing else w.w if write else w.r).update(gs)
            else:
                fr = full[r]
                (w.w if write else w.r).update(np.unique(g[r][fr]).tolist())
                _or_masks(w.wb if write else w.rb, _masks(B[r:r + 1][:, ~fr], tag)[0])
            if kind == "wg" and not write:
                gk = (self._warpgroup(int(m.glane[ln])), int(m.wg_committed[ln]) + 1)
                for x in gs:
                    w.rg.setdefault(x, set()).add(gk)
            elif not write and not landing:
                w.rp.update(gs)
            if landing and self._copying.get(ln, (None,))[0] == pc:
                self._copying[ln][1].update(gs)
            if kind is not None:
                grp = (int(m.wg_committed[ln]) + 1 if kind == "wg" else
                       int(_bulk_state(m).committed[ln]))
                pl = self.pend[ln]
                if not pl or pl[-1][0] != kind or pl[-1][1] != grp or pl[-1][4] != pc:
                    pl.append([kind, grp, set(), set(), pc])
                pl[-1][3 if write else 2].update(gs)

    def step(self, pc: int, exe: np.ndarray) -> None:
        """Record instruction ``pc`` executed by the lanes of ``exe`` (guard true)."""
        self._exe = exe
        k = self.kind[pc]
        if k == 0 or k == _BOUNDARY:
            return
        if self.fence_like[pc]:
            # a fence orders other threads' operations only through a strong access of its
            # own thread (release: fence then a strong write; acquire: a strong read then the
            # fence); blind strong accesses are writes themselves, so it counts as a write
            # once the thread also does a relaxed operation summarised by address
            t = exe & self.touched
            self.fenced |= t
            self.cur[t & self.relaxed] |= WRITE
            if k == _FENCE:
                return
        if self.relaxed_op[pc]:
            self.relaxed |= exe
            self.cur[exe & self.fenced] |= WRITE
        a = self.addr[pc]
        if not a:
            self.cur[exe] |= k
            self.touched[exe] = True
            return
        m = self.mach
        self.touched[exe] = True
        blind = exe.copy()
        blind[:m.ntr] = False  # threads the race checker does not track: address-blind
        if blind.any():
            self.cur[blind] |= k if a in (MEM, WAIT) else WRITE
        lanes = np.flatnonzero(exe[:m.ntr])
        if a == MBAR:
            self._mbar_ops(pc, lanes)
        elif a == COPY:
            self._copy_ops(pc, lanes)
        elif a == WAIT:
            self._retire(pc, lanes)
        elif a == TC:
            self._tc_ops(pc, lanes)

    def _tc_ops(self, pc: int, lanes: np.ndarray) -> None:
        """The parts of a tcgen05 operation ``Machine.tmem_note`` does not report, before it
        runs: ``wait::ld`` / ``wait::st`` retire the thread's in-flight loads / stores (their
        cells join its window here); ``commit`` arrives on its mbarrier, releasing what the
        thread's asynchronous tcgen05 operations since its last commit access (PTX ISA 9.1
        'tcgen05.commit': the mbarrier tracks their completion); ``alloc`` / ``dealloc``
        write the columns they hand out / take back, in all 128 lanes (the address the alloc
        writes to shared memory passes the checker); ``relinquish_alloc_permit`` reads the
        CTA's allocation permit, which ``alloc`` writes."""
        m = self.mach
        ins = m.prog.insts[pc]
        op = ins.parts[1]
        if op in ("wait::ld", "wait::st"):
            kind = "tld" if op == "wait::ld" else "tst"
            for ln in lanes.tolist():
                pl = self.pend.get(ln)
                if not pl:
                    continue
                w = self._win(ln)
                for e in pl:
                    if e[0] == kind:
                        w.r |= e[2]
                        w.rp |= e[2]
                        w.w |= e[3]
                self.pend[ln] = [e for e in pl if e[0] != kind]
            return
        if op == "commit":
            addr = _addr_u(m, ins.operands[0], pc)
            for ln in lanes.tolist():
                gran, ph = self._granule(ln, int(addr[ln]) & 0xFFFFFFFF)
                w = self._win(ln)
                w.mb.append((gran, "arr", ph))
                g = int(m.glane[ln])
                # a commit tracks every earlier asynchronous tcgen05 operation of the thread
                # (not only those since its previous commit), and the emulator releases the
                # committing thread's own operations with it too (an arrival): both
                done = _Win()
                done.merge(self._tc_async.get(ln))
                self.releases[gran].append((g, ph, len(self.hist[g]), done, self._tick()))
                self.releases[gran].append((g, ph, len(self.hist[g]), None, self._tick()))
            return
        if op == "relinquish_alloc_permit":
            # no memory effect: it orders only a later tcgen05.alloc of the CTA (PTX ISA 9.1
            # 'tcgen05.relinquish_alloc_permit'), a read of the CTA's allocation permit
            for ln in lanes.tolist():
                self._win(ln).r.add(_permit(int(m.cta_local[ln])))
            return
        if op not in ("alloc", "dealloc"):
            return  # ld / st / mma / cp: their cells come through Machine.tmem_note
        ops = ins.operands
        if op == "alloc":
            ncol = _lanes(m.read(ops[1], "u32", pc), m.N)
        else:  # dealloc [taddr], ncols
            taddr = _lanes(m.read(ops[0], "u32", pc), m.N) if ops[0].kind == "reg" else \
                np.full(m.N, int(ops[0].value or 0))
            ncol = _lanes(m.read(ops[1], "u32", pc), m.N)
        rows = np.arange(128)[:, None]
        for ln in lanes.tolist():
            c = int(m.cta_local[ln])
            c0 = max(m.tmem_first_fit(c, int(ncol[ln])), 0) if op == "alloc" else \
                int(taddr[ln]) & 0xFFFF
            cols = np.arange(c0, min(c0 + int(ncol[ln]), 512))[None, :]
            w = self._win(ln)
            w.w.update(_tmem_granules(c, rows, cols))
            if op == "alloc":
                w.w.add(_permit(c))

    def _tick(self) -> int:
        self.seq += 1
        return self.seq

    def _warpgroup(self, g: int) -> int:
        """A global id of thread ``g``'s warpgroup (its CTA's threads 128 k .. 128 k + 127)."""
        T = self.mach.T
        return (g // T) * (T // _WARPGROUP + 1) + (g % T) // _WARPGROUP

    def _retire(self, pc: int, lanes: np.ndarray) -> None:
        """``wgmma.wait_group N`` / ``cp.async.bulk.wait_group{.read} N``: the reads (and,
        without ``.read``, a bulk store's writes) of the groups it retires complete here (the
        retire rules of ``emulator.ops._wgmma`` and ``emulator.async_copy._wait_group``)."""
        m = self.mach
        ins = m.prog.insts[pc]
        n = int(ins.operands[0].value or 0) if ins.operands else 0
        wg = ins.base == "wgmma"
        read_only = "read" in ins.parts
        bst = None if wg else _bulk_state(m)
        if wg:  # every thread of the warpgroup: the groups it retires here, and when
            for ln in lanes.tolist():
                g = int(m.glane[ln])
                top = int(m.wg_committed[ln]) - n
                for grp in range(self.wg_done.get(g, 0) + 1, top + 1):
                    self.wg_retired[(self._warpgroup(g), grp)].setdefault(g, len(self.hist[g]))
                self.wg_done[g] = max(self.wg_done.get(g, 0), top)
        for ln in lanes.tolist():
            pl = self.pend.get(ln)
            if not pl:
                continue
            w = self._win(ln)
            keep = []
            for e in pl:
                if wg and e[0] == "wg" and e[1] <= int(m.wg_committed[ln]) - n:
                    w.r |= e[2]
                    gk = (self._warpgroup(int(m.glane[ln])), e[1])
                    for x in e[2]:
                        w.rg.setdefault(x, set()).add(gk)
                    continue
                if not wg and e[0] == "bulk" and e[1] < int(bst.committed[ln]) - n:
                    w.r |= e[2]
                    w.rp |= e[2]
                    e[2] = set()
                    if not read_only:
                        w.w |= e[3]
                        continue
                keep.append(e)
            self.pend[ln] = keep

    def _granule(self, lane: int, addr: int) -> tuple[int, int]:
        """(mbarrier granule, phase now or -1) of the mbarrier at ``addr`` used by ``lane``;
        the phase counts on across re-initialisations (each ``init`` starts a new incarnation
        ``_INCARNATION`` phases later), so phases of two incarnations never compare as one."""
        m = self.mach
        key = m.mbar_key(lane, addr)
        st = m.mbar.get(key)
        flat = key[0] * m.shared.shape[1] + key[1]
        gran = (flat // 8) * 2
        if st is None:
            return gran, -1
        return gran, self.incarnation[gran] * _INCARNATION + int(st["phase"])

    def _mbar_ops(self, pc: int, lanes: np.ndarray) -> None:
        m = self.mach
        ins = m.prog.insts[pc]
        op = _MBAR_OPS[ins.parts[1]]
        ops = ins.operands
        if op == "wait" or (ins.parts[1] == "arrive" and ops and ops[0].kind != "address"):
            aop = ops[1]
        else:
            aop = ops[0]
        addr = _addr_u(m, aop, pc)
        par = _lanes(m.read(ops[2], "u32", pc), m.N) if op == "wait" else None
        spin = pc in self.spin
        for ln in lanes.tolist():
            gran, ph = self._granule(ln, int(addr[ln]))  # as the mbarrier handler passes it
            w = self._win(ln)
            if op == "init":
                w.w.add(gran)
                if ins.parts[1] == "init":
                    self.incarnation[gran] += 1  # the operations after it: a new incarnation
                continue
            g = int(m.glane[ln])
            if op in ("arr", "tx"):
                w.mb.append((gran, op, ph))
                self.releases[gran].append((g, ph, len(self.hist[g]), None, self._tick()))
                continue
            ok = ph >= 0 and (int(par[ln]) & 1) != (ph & 1)
            if spin and not ok:
                continue  # a failed attempt of a spin loop: it only runs the wait again
            w.mb.append((gran, "spin" if spin else "wait", ph))
            w.acq = True
            if ok:
                # it succeeds (emulator.machine.Machine.mbar_wait): it acquires the arrivals
                # of every phase before ``ph``
                self.acquires[gran].append((g, ph, len(self.hist[g])))
                self.acq_seq[g].append((len(self.hist[g]), self._tick()))

    def _copy_ops(self, pc: int, lanes: np.ndarray) -> None:
        m = self.mach
        ins = m.prog.insts[pc]
        parts = ins.parts
        spaces = [x for x in parts if x in _SPACES]
        src_global = len(spaces) >= 2 and spaces[1] == "global"
        mb_op = None
        if "mbarrier::complete_tx::bytes" in parts:
            mb_op = ins.operands[2] if "tensor" in parts else ins.operands[3]
        addr = m.address(mb_op, pc) if mb_op is not None else None
        for ln in lanes.tolist():
            w = self._win(ln)
            w.gr_any |= src_global
            if addr is not None:
                gran, ph = self._granule(ln, int(addr[ln]) & 0xFFFFFFFF)
                w.mb.append((gran, "tx", ph))
                g = int(m.glane[ln])
                landed = _Win()
                self._copying[ln] = (pc, landed.cw)
                self.releases[gran].append((g, ph, len(self.hist[g]), landed, self._tick()))

    def _waiters(self, ik: tuple) -> set[int] | None:
        """The threads that waited at instance ``ik`` (None: it never completed); read after
        the run, so kept once computed."""
        if ik not in self._waiting:
            self._waiting[ik] = (None if ik not in self.fired else
                                 {g for g, (_, w, _) in self.inst[ik].items() if w})
        return self._waiting[ik]

    def _sites(self, ik: tuple) -> frozenset[int]:
        """The barrier sites (program counters) instance ``ik`` has arrivals from; read after
        the run, so kept once computed."""
        if ik not in self._site_of:
            self._site_of[ik] = frozenset(pc for pc, _, _ in self.inst[ik].values())
        return self._site_of[ik]

    def _side(self, g: int, idx: int, members: set[int], forward: bool, site: int,
              full: bool = False) -> tuple[int, _Win]:
        """(blind bits, by-address summary) of thread ``g``'s operations on one side of its
        arrival ``idx``, out to the nearest instance of another site than ``site`` (a removal
        removes every instance of its site) that every thread of ``members`` waited at."""
        h = self.hist[g]
        acc, win = 0, _Win()
        j = idx + 1 if forward else idx
        while 0 <= j < len(h):
            _, bits, aw = h[j]
            acc |= bits
            win.merge(aw)
            nxt = h[j][0] if forward else (h[j - 1][0] if j > 0 else None)
            if nxt is None:
                break
            if self._sites(nxt) == {site}:
                # the same site: removed with this one; an instance with other participants
                # may have linked this one's threads to others (a chain through the site)
                if self._waiters(nxt) != members:
                    acc |= WRITE
                j += 1 if forward else -1
                continue
            w = self._waiters(nxt)
            if w is not None and members <= w:
                break
            acc |= WRITE  # another barrier passed: it may carry the ordering on
            j += 1 if forward else -1
        return _warp_bits(acc, full), win

    def acted(self, ik: tuple) -> bool:
        """Whether instance ``ik`` may have ordered two conflicting operations (module
        docstring)."""
        return bool(self.why_acted(ik))

    def why_acted(self, ik: tuple) -> str:
        """Why instance ``ik`` may have ordered two conflicting operations: one line naming
        the first conflict found (threads as ``CTA.thread``, 8-byte granules, mbarrier
        objects), or "" when it did not (module docstring)."""
        parts = self.inst[ik]
        if ik not in self.fired:
            return "the instance never completed"
        if len(self._sites(ik)) > 1:
            return "its arrivals come from more than one barrier site"
        if not all(w for _, w, _ in parts.values()):
            return "a participant only arrived (bar.arrive)"
        members = set(parts)
        site = next(iter(parts.values()))[0]
        # the warps all of whose threads take part: a bar.warp.sync of theirs orders nothing
        # for a thread outside the instance
        T = self.mach.T

        def warp(g: int) -> tuple[int, int]:
            return g // T, (g % T) // 32

        lanes_of: dict[tuple[int, int], int] = defaultdict(int)
        for g in members:
            lanes_of[warp(g)] += 1
        inside = {wp for wp, k in lanes_of.items() if k == min(32, T - 32 * wp[1])}
        before = {g: self._side(g, idx, members, False, site, warp(g) in inside)
                  for g, (_, _, idx) in parts.items()}
        after = {g: self._side(g, idx, members, True, site, warp(g) in inside)
                 for g, (_, _, idx) in parts.items()}
        # address-blind bits against anything / any write of the other side
        bn = [g for g, (b, w) in before.items() if b or not w.empty()]
        an = [g for g, (b, w) in after.items() if b or not w.empty()]
        bwr = [g for g, (b, w) in before.items() if b & WRITE or w.writes()]
        awr = [g for g, (b, w) in after.items() if b & WRITE or w.writes()]
        if _cross([g for g, (b, _) in before.items() if b & WRITE], an) or \
                _cross(bn, [g for g, (b, _) in after.items() if b & WRITE]) or \
                _cross([g for g, (b, _) in before.items() if b & READ], awr) or \
                _cross(bwr, [g for g, (b, _) in after.items() if b & READ]):
            return "an address-blind operation on one side, an access of another thread on the other"
        # a global source at unknown addresses against a global write
        if _cross([g for g, (_, w) in before.items() if w.gr_any],
                  [g for g, (_, w) in after.items() if w.global_write()]) or \
                _cross([g for g, (_, w) in before.items() if w.global_write()],
                       [g for g, (_, w) in after.items() if w.gr_any]):
            return "a global read at unknown addresses (a copy's source) and a global write"
        # a chain through a third thread: an acquire before the barrier
        acq = [g for g, (_, w) in before.items() if w.acq]
        if _cross(acq, an):
            m0 = next(iter(parts))
            h0 = self.hist[m0]
            earlier = {h0[k][0] for k in range(parts[m0][2])
                       if h0[k][0] is not None and (w := self._waiters(h0[k][0])) is not None
                       and members <= w
                       and self._sites(h0[k][0]) != {site}}
            for a_ in acq:
                spans = self._released(a_, parts[a_][2], before[a_][1], earlier)
                if spans is None:
                    if any(b_ != a_ for b_ in an):
                        return (f"{self._who(a_)} acquired before it from a releaser that had "
                                f"acquired itself (the chain may go on)")
                    continue
                for b_ in an:
                    # (b acquired that release itself before the barrier: ordered after it)
                    if b_ != a_ and any(_conflict(db, dw, *after[b_])
                                        for d, db, dw, copy, x, p in spans
                                        if (copy or d != b_) and not self._acquired(
                                            b_, x, p, parts[b_][2])):
                        return (f"{self._who(a_)} acquired before it what {self._who(b_)} "
                                f"conflicts with after it")
        # by address: granules and mbarrier objects
        idx_r: dict[int, set[int]] = defaultdict(set)
        idx_w: dict[int, set[int]] = defaultdict(set)
        idx_m: dict[int, list[tuple[int, str, int]]] = defaultdict(list)
        # asynchronous tcgen05 accesses after it: against those before it the barrier orders
        # the issues, and tcgen05 operations run in issue order (PTX ISA 9.1 §9.7.16.6)
        idx_tr: dict[int, set[int]] = defaultdict(set)
        idx_tw: dict[int, set[int]] = defaultdict(set)
        # granules touched only in part after it (_Win.rb / wb): thread -> its bytes
        idx_rpg: dict[int, dict[int, int]] = defaultdict(dict)
        idx_wpg: dict[int, dict[int, int]] = defaultdict(dict)
        for g, (_, w) in after.items():
            for x in w.r | w.tr:
                idx_r[x].add(g)
            for x in w.w | w.cw | w.tw:  # (what is issued after it accesses after it)
                idx_w[x].add(g)
            for x, mk in w.rb.items():
                idx_rpg[x][g] = mk
            for x, mk in w.wb.items():
                idx_wpg[x][g] = mk
            for x in w.tr:
                idx_tr[x].add(g)
            for x in w.tw:
                idx_tw[x].add(g)
            for x, op, ph in w.mb:
                idx_m[x].append((g, op, ph))
        for a_, (_, w) in before.items():
            # an asynchronous tcgen05 access before it reaches generic accesses after it only
            # through its commit's completion (the chains); other tcgen05 operations directly
            for x in w.tw:
                if (idx_tw.get(x, _EMPTY) | idx_tr.get(x, _EMPTY)) - {a_}:
                    return (f"{self._who(a_)}'s tcgen05 operation writes {self._gran(x)} "
                            f"before it, another thread's tcgen05 operation accesses it after")
            for x in w.tr:
                if idx_tw.get(x, _EMPTY) - {a_}:
                    return (f"{self._who(a_)}'s tcgen05 operation reads {self._gran(x)} "
                            f"before it, another thread's tcgen05 operation writes it after")
            for x in w.w:
                if _other(a_, idx_w.get(x), idx_r.get(x), idx_wpg.get(x), idx_rpg.get(x)) \
                        or any(g != a_ for g, _, _ in idx_m.get(x, ())):
                    return f"{self._who(a_)} wrote {self._gran(x)} before it, another thread touches it after"
            for x, mk in w.wb.items():  # a granule written in part: whole, or a common byte
                if _other(a_, idx_w.get(x), idx_r.get(x)) or _overlap(
                        a_, mk, idx_wpg.get(x), idx_rpg.get(x)) or any(
                        g != a_ for g, _, _ in idx_m.get(x, ())):
                    return (f"{self._who(a_)} wrote {self._bytes(x, mk)} before it, another "
                            f"thread touches them after")
            for x, mk in w.rb.items():
                if _other(a_, idx_w.get(x)) or _overlap(a_, mk, idx_wpg.get(x)) or any(
                        g != a_ and op not in _WAITS for g, op, _ in idx_m.get(x, ())):
                    return (f"{self._who(a_)} read {self._bytes(x, mk)} before it, another "
                            f"thread writes them after")
            for x in w.r:
                writers = idx_w.get(x, _EMPTY).union(idx_wpg.get(x, ())) - {a_}
                if writers and x not in w.rp and x in w.rg:
                    # read only by wgmma groups: a writer that retired each of them itself
                    # before this barrier is ordered after the reads by its program order
                    writers = {b for b in writers if not all(
                        self.wg_retired.get(gk, {}).get(b, 1 << 62) <= parts[b][2]
                        for gk in w.rg[x])}
                if writers or any(
                        g != a_ and op not in _WAITS for g, op, _ in idx_m.get(x, ())):
                    return f"{self._who(a_)} read {self._gran(x)} before it, another thread writes it after"
            for x, op, ph in w.mb:
                if _other(a_, idx_w.get(x), idx_wpg.get(x)) or (
                        op not in _WAITS and _other(a_, idx_r.get(x), idx_rpg.get(x))):
                    return (f"{self._who(a_)}'s mbarrier {op} on {self._gran(x)} before it, "
                            f"a plain access of another thread after")
                for g, op2, ph2 in idx_m.get(x, ()):
                    if g != a_ and not _commute(op, ph, op2, ph2, self._observed(
                            g, x, ph, parts[g][2])):
                        return (f"mbarrier {self._gran(x)}: {op} (phase {ph % _INCARNATION}) of "
                                f"{self._who(a_)} before it and {op2} (phase "
                                f"{ph2 % _INCARNATION}) of {self._who(g)} after do not commute")
        # a release after the barrier, acquired by a third thread
        for b_, (_, wb) in after.items():
            rel = [(x, ph) for x, op, ph in wb.mb if op in ("arr", "tx")]
            if not rel:
                continue
            for a_ in bn:
                if a_ == b_:
                    continue
                ba, wa = before[a_]
                if not ba and _covered(wa, wb):
                    continue
                if self._chain(a_, parts[a_][2], ba, wa, rel, b_, site):
                    return (f"{self._who(b_)} releases an mbarrier after it; a third thread "
                            f"acquires that and conflicts with {self._who(a_)} before it")
        return ""

    def _who(self, g: int) -> str:
        return f"CTA {g // self.mach.T} thread {g % self.mach.T}"

    def _gran(self, x: int) -> str:
        if x < 0:
            k = -1 - x
            return f"TMEM lane {(k // 128) % 128} columns {4 * (k % 128)}-{4 * (k % 128) + 3}"
        space = "global" if x & 1 else "shared"
        return f"{space} granule 0x{(x >> 1) * 8:x}"

    def _bytes(self, x: int, mk: int) -> str:
        at = [(x >> 1) * 8 + i for i in range(8) if mk >> i & 1]
        return f"{'global' if x & 1 else 'shared'} bytes {', '.join(f'0x{b:x}' for b in at)}"

    def _observed(self, b: int, gran: int, p: int, b_idx: int) -> bool:
        """Whether thread b had seen phase p - 1 of the mbarrier at ``gran`` complete before its
        arrival ``b_idx`` (a successful wait of its at phase >= p, or p == 0): then a spin wait
        of b's that runs earlier cannot pass on phase p - 1's parity (``_commute``)."""
        if p % _INCARNATION == 0:
            return True  # the first phase of its incarnation
        return any(g == b and q >= p and widx <= b_idx
                   for g, q, widx in self.acquires.get(gran, ()))

    def _released(self, a: int, a_idx: int, wa: _Win, earlier: set[tuple]
                  ) -> list[tuple[int, int, _Win, bool, int, int]] | None:
        """What thread a acquired by its successful waits in the window before its arrival
        ``a_idx`` (summary ``wa``): per release of an earlier phase of the waited object, as
        ``(releaser d, blind bits, summary, whether a copy's, mbarrier granule, phase)`` - for
        an arrival / expect_tx,
        d's operations from the latest barrier instance of ``earlier`` (instances of other
        sites that every participant waited at before this one: they order d's earlier
        operations before everyone's later ones) to the window of its release; for a copy's
        completion, the bytes that copy wrote (its ``complete_tx`` publishes them, not its
        issuer's other operations, PTX ISA 9.1 §9.7.9.25.2; they land at its completion, so
        they count even when a or the other side's thread issued it: program order does not
        cover them). None when one of the arrival spans holds an acquire of its own (the
        chain may go on)."""
        waited = {x for x, op, _ in wa.mb if op in _WAITS}
        lo = a_idx
        h_a = self.hist[a]
        while lo > 0 and h_a[lo - 1][0] not in earlier:
            lo -= 1
        out: list[tuple[int, int, _Win, bool, int, int]] = []
        seen: set[tuple[int, int, int]] = set()
        for x in waited:
            qs = [q for g, q, widx in self.acquires.get(x, ()) if g == a and lo <= widx <= a_idx]
            if not qs:
                continue
            q = max(qs)
            for d, p, widx, landed, seq in self.releases.get(x, ()):
                key = (d, widx, id(landed) if landed is not None else 0)
                if p >= q or (d == a and landed is None) or key in seen:
                    continue
                seen.add(key)
                if landed is not None:  # a copy's bytes, or a commit's tcgen05 accesses
                    out.append((d, 0, landed, True, x, p))
                    continue
                h_d = self.hist[d]
                j = min(widx, len(h_d) - 1)
                if any(h_d[k][0] in earlier for k in range(widx, len(h_d))):
                    continue  # d passed one of them after its release: ordered before b
                db, dw = 0, _Win()
                while j >= 0:
                    db |= _warp_bits(h_d[j][1])
                    dw.merge(h_d[j][2])
                    if j == 0 or h_d[j - 1][0] in earlier:
                        break
                    if h_d[j - 1][0] is not None:
                        db |= WRITE  # another barrier passed on the way
                    j -= 1
                if any(j <= w2 <= widx and s2 < seq for w2, s2 in self.acq_seq.get(d, ())):
                    return None  # d acquired something before its release (it may carry on)
                out.append((d, db, dw, False, x, p))
        return out

    def _acquired(self, b: int, gran: int, p: int, b_idx: int) -> bool:
        """Whether thread b's successful wait on the mbarrier at ``gran`` at a phase after
        ``p``, before its arrival ``b_idx``, acquired the releases of phase ``p`` itself."""
        return any(g == b and q > p and widx <= b_idx
                   for g, q, widx in self.acquires.get(gran, ()))

    def _chain(self, a: int, a_idx: int, ba: int, wa: _Win, rel: list[tuple[int, int]],
               b: int, site: int) -> bool:
        """Whether thread a's before-side (``ba``, ``wa``; its arrival ``a_idx``) may conflict
        with what a third thread c does after acquiring one of b's releases ``rel`` (mbarrier
        granule, phase): c's operations from its successful wait on a later phase until the
        first barrier instance of another site that a arrived at after this one and c waited
        at (that instance orders a's side before c's rest). A blind bit or a release of c's in
        that span counts as a conflict (the chain may go on)."""
        h_a = self.hist[a]
        later = {h_a[k][0] for k in range(a_idx + 1, len(h_a)) if h_a[k][0] is not None}
        stop: dict[int, int] = {}
        for x, p in rel:
            for c, q, widx in self.acquires.get(x, ()):
                if q <= p or c == a or c == b:
                    continue
                h_c = self.hist[c]
                if c not in stop:
                    stop[c] = next((j for j, (ik, _, _) in enumerate(h_c)
                                    if ik in later and ik in self.fired
                                    and self.inst[ik][c][1]
                                    and self._sites(ik) != {site}),
                                   len(h_c))
                if widx > stop[c]:
                    continue  # c waited after an instance that already orders a's side
                cb, cw = 0, _Win()
                for j in range(widx, min(stop[c] + 1, len(h_c))):
                    cb |= _warp_bits(h_c[j][1])
                    cw.merge(h_c[j][2])
                    if j < stop[c] and h_c[j][0] is not None:
                        cb |= WRITE  # another barrier passed on the way
                if cb or cw.releases() or _conflict(ba, wa, cb, cw):
                    return True
        return False

    def effects(self) -> dict[int, int]:
        """Per program counter of a CTA barrier site: the number of its instances that acted
        (an instance counts at each site it has arrivals from)."""
        out: dict[int, int] = defaultdict(int)
        for ik in self.inst:
            a = self.acted(ik)
            for pc in self._sites(ik):
                out[pc] += int(a)
        return dict(out)


def _whole(B: np.ndarray) -> np.ndarray | None:
    """Per byte of ``B`` (accesses x bytes: the shared or global bytes each lane's access
    touches), whether its access touches every byte of its 8-byte granule; None when every
    access touches whole granules only (the common case: aligned, multiples of 8 bytes)."""
    k, nb = B.shape
    if not B.size:
        return None
    if nb % 8 == 0 and not (B[:, 0] % 8).any() and (np.diff(B, axis=1) == 1).all():
        return None  # contiguous, aligned, whole granules
    Bs = np.sort(B, axis=1)
    if nb > 1 and (np.diff(Bs, axis=1) == 0).any():
        # a byte twice in one access: count the distinct bytes row by row
        out = np.zeros(B.shape, np.bool_)
        for r in range(k):
            u, inv = np.unique(B[r], return_inverse=True)
            gu, cnt = np.unique(u // 8, return_counts=True)
            out[r] = np.isin(u // 8, gu[cnt == 8])[inv]
        return out
    # sorted distinct bytes: the byte at position p with offset o in its granule lies in a
    # whole granule iff positions p - o and p - o + 7 hold bytes of that granule too (the 8
    # positions between them then hold its 8 distinct bytes)
    G = Bs // 8
    P = np.arange(nb)[None, :]
    lo = P - Bs % 8
    hi = lo + 7
    ok = (lo >= 0) & (hi < nb)
    whole = ok & (np.take_along_axis(G, np.clip(lo, 0, nb - 1), 1) == G) & \
        (np.take_along_axis(G, np.clip(hi, 0, nb - 1), 1) == G)
    # back to B's order
    order = np.argsort(B, axis=1, kind="stable")
    out = np.empty(B.shape, np.bool_)
    np.put_along_axis(out, order, whole, 1)
    return out


def _masks(B: np.ndarray, tag: int) -> list[dict[int, int]]:
    """Per row of ``B`` (accesses x bytes), granule -> the bytes of it the access touches (bit
    i: byte i of the granule; granules as :meth:`BarrierUse._record` numbers them)."""
    G = (B // 8) * 2 + tag
    M = np.left_shift(1, B % 8)
    if not B.size:
        return [{} for _ in range(B.shape[0])]
    if (G == G[:, :1]).all():  # each access within one granule (the common case)
        return [{gr: mk} for gr, mk in zip(G[:, 0].tolist(),
                                           np.bitwise_or.reduce(M, axis=1).tolist())]
    out = []
    for gs, ms in zip(G.tolist(), M.tolist()):
        d: dict[int, int] = {}
        for gr, mk in zip(gs, ms):
            d[gr] = d.get(gr, 0) | mk
        out.append(d)
    return out


def _or_masks(into: dict[int, int], other: dict[int, int]) -> None:
    """``into`` |= ``other`` (granule -> byte mask)."""
    if not into:
        into.update(other)
        return
    for x, mk in other.items():
        into[x] = into.get(x, 0) | mk


def _overlap(a: int, mk: int, *per: dict[int, int] | None) -> bool:
    """Whether a thread other than ``a`` of ``per`` (thread -> byte mask of one granule, None:
    empty) touched a byte of ``mk``."""
    return any(d and any(g != a and m & mk for g, m in d.items()) for d in per)


def _tmem_granules(c: int, rows: np.ndarray, cols: np.ndarray) -> list[int]:
    """Granules (negative ints: apart from the shared / global ones) of the TMEM cells of
    batch CTA ``c`` at ``rows`` x ``cols`` (broadcastable), 4 columns to a granule."""
    r, k = np.broadcast_arrays(np.asarray(rows, np.int64), np.asarray(cols, np.int64) // 4)
    return (-1 - ((c * 128 + r) * 128 + k)).ravel().tolist()


def _permit(c: int) -> int:
    """The pseudo-granule of batch CTA ``c``'s TMEM allocation permit (below every TMEM
    cell's granule)."""
    return -(1 << 40) - c


_EMPTY: frozenset[int] = frozenset()
_WARPGROUP = 128  # threads per warpgroup (PTX ISA 9.1 §9.7.15: four contiguous warps)
_INCARNATION = 1 << 20  # phases per mbarrier incarnation in the phase numbers recorded here


def _warp_bits(bits: int, full: bool = False) -> int:
    """Window bits with a ``bar.warp.sync`` (:data:`_WARP`) dropped when the thread's whole
    warp takes part in the instance (``full``), else read as a blind write."""
    if not bits & _WARP:
        return bits
    return bits & ~_WARP if full else (bits & ~_WARP) | WRITE


def _conflict(xb: int, xw: _Win, yb: int, yw: _Win) -> bool:
    """Whether one thread's side (blind bits ``xb``, summary ``xw``) and another's (``yb``,
    ``yw``) hold a conflicting pair (module docstring, 1)."""
    if (xb & WRITE and (yb or not yw.empty())) or (yb & WRITE and (xb or not xw.empty())):
        return True
    if (xb & READ and (yb & WRITE or yw.writes())) or (yb & READ and xw.writes()):
        return True
    if (xw.gr_any and yw.global_write()) or (yw.gr_any and xw.global_write()):
        return True
    ymb = {x for x, _, _ in yw.mb}
    ymod = {x for x, op, _ in yw.mb if op not in _WAITS}
    # (a granule touched in part counts as touched whole here: coarser, so safe)
    xw_w, yw_w = xw.touched_w(), yw.touched_w()
    xw_r, yw_r = xw.touched_r(), yw.touched_r()
    if xw_w & (yw_r | yw_w | ymb) or xw_r & (yw_w | ymod):
        return True
    for x, op, ph in xw.mb:
        if x in yw_w or (op not in _WAITS and x in yw_r):
            return True
        for y, op2, ph2 in yw.mb:
            if y == x and not _commute(op, ph, op2, ph2):
                return True
    return False


_WAITS = ("wait", "spin")


def _commute(op_a: str, ph_a: int, op_b: str, ph_b: int, observed: bool = False) -> bool:
    """Whether mbarrier operation ``op_a`` (before the barrier) and ``op_b`` (after it, another
    thread) on one object may run in either order with the same outcome (module docstring):
    two waits; an arrival before and an arrival / tx operation after, in the same phase; or an
    arrival / tx operation of phase p before and a spin-loop wait after that succeeded at phase
    p + 1, when its thread had already seen phase p - 1 complete (``observed``): run earlier,
    it fails until phase p completes, then passes as before - without that, run during phase
    p - 1 it would pass at once on the same parity."""
    if op_a in _WAITS and op_b in _WAITS:
        return True
    if ph_a < 0:
        return False
    if op_b == "spin":
        return op_a in ("arr", "tx") and ph_b == ph_a + 1 and observed
    return op_a == "arr" and op_b in ("arr", "tx") and ph_a == ph_b


def _fence_like(ins: Any) -> bool:
    """A fence with ordering semantics (``fence`` / ``membar`` but a bidirectional
    ``fence.proxy.*``, :func:`classify`) or the release of ``tensormap.cp_fenceproxy``."""
    return classify(ins) == _FENCE or (ins.base == "tensormap" and len(ins.parts) > 1
                                       and ins.parts[1] == "cp_fenceproxy")


def _relaxed_strong(ins: Any) -> bool:
    """A strong operation summarised by address that a fence can make a release / acquire:
    ``atom`` / ``red`` without ordering semantics (relaxed by default), ``.relaxed``
    mbarrier operations."""
    if ins.base in ("atom", "red"):
        return addressed(ins) == MEM
    return ins.base == "mbarrier" and "relaxed" in ins.parts


def _spin_waits(prog: Any) -> set[int]:
    """Program counters of the ``mbarrier.try_wait`` / ``test_wait`` instructions that form a
    spin loop: the next instruction branches back to the wait itself when the wait's
    predicate is false (``L: mbarrier.try_wait... %p, ...; @!%p bra L;``, Triton's and the
    hand-written kernels' form). A failed attempt of such a wait has no effect but to run it
    again, so only its successful execution counts."""
    out = set()
    insts = prog.insts
    for pc, ins in enumerate(insts[:-1]):
        if ins.base != "mbarrier" or len(ins.parts) < 2 or \
                ins.parts[1] not in ("try_wait", "test_wait") or not ins.operands:
            continue
        nxt = insts[pc + 1]
        pred = ins.operands[0].name or ins.operands[0].text
        if nxt.base != "bra" or not nxt.negated or nxt.predicate != pred or \
                not nxt.operands or nxt.operands[0].kind != "label":
            continue
        if prog.envs[pc + 1].label(nxt.operands[0].name or nxt.operands[0].text) == pc:
            out.add(pc)
    return out


def _covered(before: _Win, after: _Win) -> bool:
    """Whether thread a's before-side ``before`` is acquired by whoever acquires a release of
    thread b's after-side ``after`` without this barrier: a's are only arrivals, on the objects
    and phases of every one of b's releases."""
    if before.r or before.w or before.rb or before.wb or before.cw or before.tr or \
            before.tw or before.gr_any or before.acq or not before.mb:
        return False
    if any(op != "arr" for _, op, _ in before.mb):
        return False
    mine = {(x, ph) for x, _, ph in before.mb}
    return all((x, ph) in mine for x, op, ph in after.mb if op in ("arr", "tx"))


def _other(a: int, *sets: set[int] | dict[int, int] | None) -> bool:
    """Whether one of ``sets`` (of threads; None: empty) holds a thread other than ``a``."""
    return any(s and (len(s) > 1 or a not in s) for s in sets)


def _cross(xs: list[int], ys: list[int]) -> bool:
    """Whether some x of ``xs`` and y of ``ys`` are different threads."""
    if not xs or not ys:
        return False
    return len(xs) > 1 or len(ys) > 1 or xs[0] != ys[0]
