"""Mutation testing over the ``fast`` corpus (issue 18, item 4): single-bug mutants derived from
every fast-family PTX file, one class per synchronization obligation, each expected to be
rejected by the verifier (an error, any rule: ``ailower lower`` / ``eval`` reject on any error).

Classes (``CLASSES``), each applied at every site it finds in a file (bounded by ``MAX_SITES``):

* ``parity_xor`` / ``parity_sub`` / ``parity_selp`` / ``parity_imm``: an mbarrier wait's parity
  flipped, written as ``xor.b32 p', p, 1``, as ``sub.s32 p', 1, p``, through ``setp`` +
  ``selp``, or as the other immediate;
* ``no_proxy_fence``: one ``fence.proxy.async`` removed (generic writes then an async-proxy
  read: TMA store, wgmma, tcgen05.mma);
* ``no_mbar_wait``: one mbarrier wait loop removed where shared data is consumed after it (an
  MMA, ``tcgen05.cp`` or a generic shared read follows before the next mbarrier operation);
* ``expect_tx``: one ``expect_tx`` byte count halved;
* ``no_wgmma_wait`` / ``no_wgmma_fence``: one ``wgmma.wait_group`` / ``wgmma.fence`` removed;
* ``no_tcgen05_wait`` / ``no_tcgen05_fence``: one ``tcgen05.wait::ld/st`` / ``tcgen05.fence``
  removed;
* ``no_bar_sync``: one ``bar.sync`` / ``barrier.sync`` removed (not one of two identical
  adjacent barriers: removing a duplicate changes nothing);
* ``bar_count``: one named barrier's thread count lowered by 32;
* ``early_dealloc``: ``tcgen05.dealloc`` moved right after the last ``tcgen05.mma``;
* ``no_cluster_barrier``: one ``barrier.cluster.arrive`` / ``wait`` removed;
* ``store_refill``: one ``cp.async.bulk.wait_group.read`` removed (a TMA store's source reused
  before the read completed);
* ``early_release``: a ``wgmma.wait_group N`` followed by a stage-release arrive gets ``N + 1``
  (the stage is released before the wgmma reading it retires).

A class that finds no site in a file contributes nothing for it (e.g. no wgmma on sm_100a).
Used by ``bench/mutant_table.py --fast`` and ``tests/verifier/test_verifier_fast_mutants.py``.

**Mutants not emitted, and why** (:func:`mutants` ``keep_skipped=True`` returns them with the
reason in :attr:`FastMutant.skip`; the table counts them apart, never as caught):

* *equivalent* (:func:`equivalent`, decided on the original's control-flow graph, every path):
  a removed ``cp.async.bulk.wait_group`` with no bulk-group operation (a TMA/bulk store or
  reduction) issued since the last unpredicated ``wait_group 0`` on any path to it (e.g. one
  after ``tensormap.cp_fenceproxy``, which joins no bulk group); a removed ``wgmma.wait_group``
  with no ``wgmma.mma_async`` in flight the same way; a removed ``bar.sync``/``barrier.sync``
  in the kernel's branch-free prefix with an identical barrier (or the entry) next to it in its
  basic block through register-only instructions, so there is no memory access it alone
  orders; a removed ``tcgen05.wait::ld`` when on every path another unpredicated
  ``tcgen05.wait::ld`` (it completes every earlier ``tcgen05.ld`` of the thread) comes before
  anything but register code, further ``tcgen05.ld`` and weak loads / stores - i.e. before any
  TMEM write, dealloc or signal to another thread (rule TL4 of docs/ptx_rules.md: the ld's
  destination registers are ordered by their register dependency, PTX ISA 9.1 §9.7.16.8.5);
  a removed ``wgmma.wait_group N`` when on every path an unpredicated ``wgmma.wait_group M``
  with ``M <= N`` (it retires at least the same groups) comes before anything but register
  code off the wgmma operand registers, weak loads, ``wgmma.fence`` / ``commit_group`` and
  further ``wgmma.mma_async`` that do not swap accumulator and A registers - i.e. before any
  access of an in-flight register, store, barrier, arrive or fence (PTX ISA 9.1 §9.7.15.7.3);
  a removed ``wgmma.fence`` when, without it, every ``wgmma.mma_async`` on every path still
  has an unpredicated ``wgmma.fence`` after the entry and after each non-wgmma access of its
  accumulator / A registers (§9.7.15.7.1: the two places the fence is required; e.g. Triton's
  fence between two k-steps of one accumulator chain);
* *never executed* (``reached``: the source lines the emulator's per-instruction counts of the
  original show executed - reached with the guard predicate true -,
  ``emulator.run_kernel(coverage=True)`` at the launch ``ailower eval`` emulates): a mutation
  whose site no thread executes at that launch (e.g. Triton's K = 0 epilogue path, a ring
  refill predicated off when the K loop is short) changes nothing the product evaluates
  (``early_dealloc`` acts at another line and is not filtered);
* *equivalent on the executed paths* (``wait_effects``, the same run): a removed wait that, at
  every one of its executions there, blocked no thread, gave no thread new happens-before
  knowledge and retired no bulk group or wgmma registers - for ``tcgen05.wait::st``: no TMEM
  cell it completed was read before the writer's next ``wait::st`` (which completes every
  earlier store of the thread too); for ``tcgen05.wait::ld``: no cell whose load it completed
  was written (by any thread, the reader included) unless ordered after the reader's next
  ``wait::ld`` (Triton's attention: the wait after S's load, P written to other columns) -
  (e.g. the wait on the MMA barrier of
  the previous tile when a wait on a later commit of the same thread already covered it, or a
  ``wgmma.wait_group 0`` after the loop whose last iteration retired everything); a removed
  ``fence.proxy.async`` none of whose executions was the only proxy fence, since the write,
  of a thread whose generic-proxy writes an async-proxy read (wgmma / tcgen05.mma operand,
  TMA store source) then read (``Machine.note_fence_use``: e.g. Triton's fence before a TMA
  load into a buffer no generic write touched);
* *equivalent on the executed paths*, barriers (``barrier_effects``: the original's coverage
  runs with ``elect.sync`` electing the lowest and the highest lane, summed): a removed
  ``bar.sync`` / ``barrier.sync`` no instance of which ordered two conflicting operations of two
  of its threads that the barriers around it do not order (:mod:`emulator.barrier_use`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

MAX_SITES = 4
"""Mutants per class and file (the first sites in text order): bounds the table's run time."""


@dataclass(frozen=True)
class FastMutant:
    """One seeded bug: ``cls`` (a key of :data:`CLASSES`), the source file, a site line (1-based,
    in the original), a one-line description and the mutated text."""

    cls: str
    base: str
    line: int
    what: str
    text: str
    skip: str = ""
    """Why the mutant is not part of the table ("" when it is): see the module docstring."""


# ------------------------------------------------------------------ equivalence on the CFG
#: base mnemonics of instructions that touch memory or synchronise (anything else only computes
#: registers); PTX ISA 9.1 chapter 9.7 (data movement, synchronization, tensor-core and async
#: instructions). ``exit``/``ret``/``trap`` end a path and are handled apart.
_MEMORY = frozenset({
    "ld", "ldu", "st", "atom", "red", "cp", "mbarrier", "wgmma", "tcgen05", "fence", "membar",
    "bar", "barrier", "tensormap", "ldmatrix", "stmatrix", "prefetch", "prefetchu", "call",
    "multimem", "suld", "sust", "sured", "tex", "tld4", "txq", "clusterlaunchcontrol",
    "griddepcontrol", "setmaxnreg", "applypriority", "discard", "alloca", "stacksave",
    "stackrestore", "mma", "wmma", "brkpt", "pmevent"})
_ENDS = frozenset({"exit", "ret", "trap"})


def _entry_cfg(text: str):
    """The CFG of the (first) entry with a body in ``text``, and line -> instruction index."""
    from verifier.analysis.cfg import build_cfg
    from verifier.ptx.parser import parse_ptx
    from verifier.tables import build_function

    mod = parse_ptx(text)
    fn = next(f for f in mod.entries if f.body is not None)
    cfg = build_cfg(build_function(fn))
    at = {}
    for i, ins in enumerate(cfg.instrs):
        at.setdefault(ins.line, i)
    return cfg, at


def _sig(ins) -> str:
    return ins.opcode + " " + ",".join(f"{o.kind}:{o.value}:{o.base}" for o in ins.operands)


def _uniform_prefix(cfg, bid: int) -> bool:
    """Whether block ``bid`` is reached from the entry through blocks with one successor each
    (no branch before it: every thread runs the same instructions up to it)."""
    cur, seen = 0, set()
    while cur != bid:
        if cur in seen or cur >= len(cfg.blocks):
            return False
        seen.add(cur)
        succ = cfg.blocks[cur].succs
        if len(succ) != 1 or succ[0].cond is not None:
            return False
        cur = succ[0].dst
    return True


def _barrier_redundant(cfg, i: int) -> bool:
    """Whether removing the unpredicated barrier at ``i`` changes no execution: it lies in the
    branch-free prefix of the kernel (every thread meets the same barriers in the same order,
    so no other site's arrivals pair with it), and within its basic block an identical
    unpredicated barrier - or the entry - is next to it through instructions that touch no
    memory: each access on the far side of it is then on the far side of that twin as well
    (PTX ISA 9.1 §9.7.13.1 bar.sync: a barrier orders the memory accesses of its
    participants; register-only instructions have none)."""
    me = cfg.instrs[i]
    if me.predicate is not None:
        return False
    bid = cfg.block_of[i]
    if not _uniform_prefix(cfg, bid):
        return False
    b = cfg.blocks[bid]
    sig = _sig(me)
    for rng in (range(i + 1, b.end), range(i - 1, b.start - 1, -1)):
        for j in rng:
            ins = cfg.instrs[j]
            if ins.base in ("bar", "barrier") and ins.predicate is None and _sig(ins) == sig:
                return True
            if ins.base in _MEMORY or ins.base in _ENDS:
                break
        else:
            if rng.step == -1 and bid == 0:
                return True  # nothing but register code before it since the entry
    return False


#: instructions with no effect another thread can observe through memory, allowed inside the
#: segments :func:`_barrier_merge_safe` compares (allocator permits, a thread's own wait for
#: its TMEM stores, the register-file resize)
_NO_SHARED_EFFECT = ("tcgen05.relinquish_alloc_permit", "tcgen05.wait::st", "tcgen05.wait::ld",
                     "setmaxnreg")


def _access(ins, resolve) -> tuple | list | None | bool:
    """The memory access of ``ins`` as (space, "r"/"w", (root, offset) or None, bytes) (a list
    of them for ``tcgen05.alloc``), None when it has none, False when it is one the merge check
    does not model."""
    op = ins.opcode
    if ins.base not in _MEMORY and ins.base not in _ENDS:
        return None
    if any(op.startswith(x) for x in _NO_SHARED_EFFECT):
        return None
    addr = next((o for o in ins.operands if o.kind == "address"), None)

    def where():
        return None if addr is None else resolve(addr)

    parts = ins.parts
    if ins.base in ("ld", "st") and len(parts) > 1:
        if parts[1] == "param" and ins.base == "ld":
            return None  # kernel parameters are read-only
        if not parts[1].startswith("shared"):
            return False
        vec = next((int(x[1:]) for x in parts if x in ("v2", "v4", "v8")), 1)
        from verifier.ptx.ast import type_size
        size = type_size(parts[-1])
        if size is None:
            return False
        return ("shared", "r" if ins.base == "ld" else "w", where(), size * vec)
    if ins.base == "mbarrier" and any(x.startswith("shared") for x in parts):
        return ("shared", "w", where(), 8)  # init/inval writes, the rest atomic updates
    if op.startswith("tcgen05.alloc"):  # writes the allocated address to shared memory
        return [("shared", "w", where(), 4), ("tmem", "w", None, 0)]
    if op.startswith("tcgen05.st"):
        return ("tmem", "w", None, 0)
    if op.startswith("tcgen05.ld"):
        return ("tmem", "r", None, 0)
    return False


def _conflict(a, b) -> bool:
    if a[0] != b[0] or (a[1] == "r" and b[1] == "r"):
        return False
    if a[2] is None or b[2] is None or a[0] == "tmem":
        return True
    (ra, oa), (rb, ob) = a[2], b[2]
    if ra != rb:
        # two named shared variables never overlap; "#" is an absolute address
        return ra == "#" or rb == "#"
    return oa < ob + b[3] and ob < oa + a[3]


def _barrier_merge_safe(cfg, i: int, values=None) -> bool:
    """Whether removing the unpredicated barrier at ``i`` leaves no conflicting pair of
    accesses unordered. It must lie in a block that no thread-dependent (divergent or
    warp-dependent) branch controls (``verifier.analysis.values``: every thread of the CTA runs
    the block's barriers in the same sequence, so no other site's arrivals pair with it), with
    an identical barrier after it in the block and one before it in the block or up a chain of
    single predecessors no such branch controls (or the entry); every access between the
    earlier twin and it, and every access between it and the later twin, must touch different
    memory (distinct shared variables, disjoint constant
    offsets from one, shared memory vs TMEM) or both read. Anything the check does not model
    (a TMA, a fence, a global store, an unknown address) makes the answer no. Accesses outside
    the twins stay ordered by them (PTX ISA 9.1 §9.7.13.1 bar.sync; §8 memory consistency
    model: only conflicting accesses need ordering)."""
    from verifier.analysis.values import M64, Values

    me = cfg.instrs[i]
    if me.predicate is not None:
        return False
    vals = values if values is not None else Values(cfg)
    bid = cfg.block_of[i]
    if bid in vals.divergent_blocks or bid in vals.partial_blocks:
        return False
    b = cfg.blocks[bid]
    sig = _sig(me)

    def twin(j: int) -> bool:
        ins = cfg.instrs[j]
        return ins.base in ("bar", "barrier") and ins.predicate is None and _sig(ins) == sig

    after = [j for j in range(i + 1, b.end) if twin(j)]
    if not after:
        return False
    # back to the earlier twin: through this block, then up a chain of single predecessors
    # (every path to the barrier passes through them) that no thread-dependent branch controls
    back: list[int] = []
    cur, j = bid, i - 1
    while True:
        blk = cfg.blocks[cur]
        while j >= blk.start and not twin(j):
            back.append(j)
            j -= 1
        if j >= blk.start:
            break  # the earlier twin
        if cur == 0:
            break  # the entry
        preds = [e.src for e in blk.preds if e.src < len(cfg.blocks)]
        if len(preds) != 1 or preds[0] in vals.divergent_blocks or \
                preds[0] in vals.partial_blocks or preds[0] == cur:
            return False
        cur = preds[0]
        j = cfg.blocks[cur].end - 1
    hi = after[0]

    def segment(js) -> list | None:
        out = []
        for j in js:
            ins = cfg.instrs[j]

            def resolve(addr, j=j):
                v = vals.op_val(addr, j)
                if v is None:
                    return None
                if v[0] == "s":
                    return (str(v[1]), int(v[2]))
                if v[0] == "k" and v[1] == M64:
                    return ("#", int(v[2]))
                return None

            acc = _access(ins, resolve)
            if acc is False:
                return None
            if acc is not None:
                out.extend(acc if isinstance(acc, list) else [acc])
        return out

    s1, s2 = segment(back), segment(range(i + 1, hi))
    if s1 is None or s2 is None:
        return False
    return not any(_conflict(a, c) for a in s1 for c in s2)


def _nothing_in_flight(cfg, i: int, issues, retires) -> bool:
    """Whether no operation ``issues(ins)`` can be outstanding when instruction ``i`` runs: on
    every path from the entry to ``i``, each such issue is followed by an instruction with
    ``retires(ins)`` (a forward may-analysis over the blocks, to a fixed point)."""
    n = len(cfg.blocks)
    out = [False] * n
    changed = True

    def transfer(state: bool, lo: int, hi: int) -> bool:
        for j in range(lo, hi):
            ins = cfg.instrs[j]
            if issues(ins):
                state = True
            elif retires(ins):
                state = False
        return state

    while changed:
        changed = False
        for bid in cfg.rpo:
            b = cfg.blocks[bid]
            inn = any(out[e.src] for e in b.preds if e.src < n)
            new = transfer(inn, b.start, b.end)
            if new != out[bid]:
                out[bid], changed = new, True
    b = cfg.blocks[cfg.block_of[i]]
    inn = any(out[e.src] for e in b.preds if e.src < n)
    return not transfer(inn, b.start, i)


def _waited_again(cfg, i: int, retires, quiet) -> bool:
    """Whether on every path from after instruction ``i`` an instruction with ``retires(ins)``
    (unpredicated) comes before any instruction that is not ``quiet(ins)`` and before the path
    ends (``exit`` / ``ret``): a backward must-analysis over the blocks (greatest fixed point:
    a loop of quiet instructions only orders nothing either)."""
    n = len(cfg.blocks)
    exit_id = cfg.exit_id

    def scan(lo: int, hi: int) -> bool | None:
        for j in range(lo, hi):
            ins = cfg.instrs[j]
            if retires(ins) and ins.predicate is None:
                return True
            if ins.base in _ENDS or not quiet(ins):
                return False
        return None  # fell through to the block's successors

    def block_ok(bid: int, lo: int, good: list[bool]) -> bool:
        b = cfg.blocks[bid]
        r = scan(lo, b.end)
        if r is not None:
            return r
        succ = [e.dst for e in b.succs]
        return bool(succ) and all(d != exit_id and d < n and good[d] for d in succ)

    good = [True] * n
    changed = True
    while changed:
        changed = False
        for bid in reversed(cfg.rpo):
            new = block_ok(bid, cfg.blocks[bid].start, good)
            if new != good[bid]:
                good[bid], changed = new, True
    return block_ok(cfg.block_of[i], i + 1, good)


def _tmem_ld_retire(ins) -> bool:
    return ins.opcode.startswith("tcgen05.wait::ld")


def _tmem_ld_quiet(ins) -> bool:
    """An instruction a pending ``tcgen05.ld`` may run past (PTX ISA 9.1 §9.7.16.8.5, rule TL4
    of docs/ptx_rules.md): register-only code (the ld's destination registers are ordered by
    their register dependency), further ``tcgen05.ld``, and weak loads / stores (no release:
    they signal no other thread). Anything that writes TMEM, deallocates, synchronises or
    fences is not."""
    if ins.base not in _MEMORY:
        return True
    if ins.opcode.startswith("tcgen05.ld"):
        return True
    if ins.base in ("ld", "ldu", "st"):
        # (st.async completes an mbarrier's tx-count: a signal; st.bulk: kept out as well)
        return not any(p in ("acquire", "release", "relaxed", "volatile", "mmio", "async",
                             "bulk") for p in ins.parts)
    return False


def _bulk_issue(ins) -> bool:
    return ins.base == "cp" and "bulk_group" in ins.parts


def _bulk_retire(ins) -> bool:
    return (ins.opcode.startswith("cp.async.bulk.wait_group") and ins.predicate is None and
            bool(ins.operands) and int(ins.operands[0].value or 0) == 0)


def _wgmma_issue(ins) -> bool:
    return ins.opcode.startswith("wgmma.mma_async")


def _wgmma_retire(ins) -> bool:
    return (ins.opcode.startswith("wgmma.wait_group") and ins.predicate is None and
            bool(ins.operands) and int(ins.operands[0].value or 0) == 0)


def _op_names(op) -> set[str]:
    """Register names inside operand ``op``, with the symbols: a register named without '%'
    (a PTX identifier, §4.4) parses as a symbol (a variable or label name among them only makes
    the analyses more conservative)."""
    out = {op.name or op.text} if op.kind in ("reg", "symbol") else set()
    if op.base is not None:
        out |= _op_names(op.base)
    for e in op.elems:
        out |= _op_names(e)
    return out


def _wgmma_shape(ins) -> str:
    return next((x for x in ins.opcode.split(".") if x.startswith("m64n")), "")


def _wgmma_acc_a(ins) -> tuple[set[str], set[str]]:
    """(accumulator, register-A) names of ``wgmma.mma_async`` ``ins``."""
    return (_op_names(ins.operands[0]),
            _op_names(ins.operands[1]) if ins.operands[1].kind == "vector" else set())


def _wgmma_regs(cfg) -> tuple[frozenset, frozenset]:
    """(accumulator, register-A) register names of every ``wgmma.mma_async`` of ``cfg``."""
    acc, a = set(), set()
    for ins in cfg.instrs:
        if _wgmma_issue(ins) and len(ins.operands) >= 2:
            mine_acc, mine_a = _wgmma_acc_a(ins)
            acc |= mine_acc
            a |= mine_a
    return frozenset(acc), frozenset(a)


def _names(ins) -> set[str]:
    return {n for op in ins.operands for n in _op_names(op)}


def _wgmma_wait_quiet(cfg) -> Callable:
    """What a removed ``wgmma.wait_group`` may run past until the next one retires its groups:
    register-only code touching no wgmma operand register (PTX ISA 9.1 §9.7.15.7.3: only the
    accumulator / A registers and the shared operands of an in-flight wgmma are its hazards),
    weak loads (a read of a wgmma operand byte is read-read), ``wgmma.fence`` /
    ``commit_group``, and further ``wgmma.mma_async`` whose accumulator is no wgmma's A and
    whose A is no wgmma's accumulator (same-shape accumulator chaining is ordered by the
    hardware). No store, barrier, arrive, fence or other signal: nothing another thread or the
    async proxy could observe before the next wait."""
    acc, a = _wgmma_regs(cfg)
    ops = acc | a
    shapes: dict[str, set[str]] = {}  # accumulator register -> shapes of the wgmma using it
    for ins in cfg.instrs:
        if _wgmma_issue(ins) and len(ins.operands) >= 2:
            for r in _wgmma_acc_a(ins)[0]:
                shapes.setdefault(r, set()).add(_wgmma_shape(ins))

    def quiet(ins) -> bool:
        if ins.base == "wgmma":
            if ins.opcode.startswith(("wgmma.fence", "wgmma.commit_group")):
                return True
            if _wgmma_issue(ins) and len(ins.operands) >= 2:
                mine_acc, mine_a = _wgmma_acc_a(ins)
                # (an accumulator another wgmma of a different shape uses is not chained:
                # §9.7.15.7.1 orders only accumulators across wgmma of the same shape)
                me = _wgmma_shape(ins)
                return not (mine_acc & a) and not (mine_a & acc) and \
                    all(shapes.get(r, set()) <= {me} for r in mine_acc)
            return False
        if _names(ins) & ops:
            return False
        if ins.base not in _MEMORY:
            return True
        return ins.base in ("ld", "ldu") and not any(
            p in ("acquire", "relaxed", "volatile", "mmio") for p in ins.parts)
    return quiet


def _wgmma_fence_redundant(cfg, i: int) -> bool:
    """Whether ``wgmma.fence`` ``i`` can be removed without leaving a hazard it orders: with it
    gone, on every path each ``wgmma.mma_async`` still has an unpredicated ``wgmma.fence``
    after the entry and after every non-wgmma access of its accumulator / A registers (PTX ISA
    9.1 §9.7.15.7.1: the fence is required before the first wgmma.mma_async and between a
    register access and a wgmma.mma_async accessing the same registers). A forward
    may-analysis: the state is the set of operand registers accessed since the last fence (and
    "entry" while none ran), unioned over predecessors to a fixed point."""
    acc, a = _wgmma_regs(cfg)
    ops = acc | a
    n = len(cfg.blocks)
    out: list[frozenset | None] = [None] * n
    ENTRY = "<entry>"
    bad = [False]

    def transfer(state: frozenset, lo: int, hi: int, check: bool) -> frozenset:
        st = set(state)
        for j in range(lo, hi):
            ins = cfg.instrs[j]
            if ins.opcode.startswith("wgmma.fence") and j != i and ins.predicate is None:
                st.clear()
            elif _wgmma_issue(ins):
                # (name, shape) / (name, "A"): a wgmma's own access since the fence; only an
                # accumulator of the same shape is ordered without one (§9.7.15.7.1)
                mine_acc, mine_a = _wgmma_acc_a(ins) if len(ins.operands) >= 2 else (set(), set())
                me = _wgmma_shape(ins)
                wg_bad = any(isinstance(x, tuple) and (
                    (x[0] in mine_acc and x[1] != me) or (x[0] in mine_a and x[1] != "A"))
                    for x in st)
                if check and (ENTRY in st or _names(ins) & st or wg_bad):
                    bad[0] = True
                st |= {(r, me) for r in mine_acc} | {(r, "A") for r in mine_a}
            elif ins.base != "wgmma":
                st |= _names(ins) & ops
        return frozenset(st)

    def inn_of(bid: int) -> frozenset:
        preds = [out[e.src] for e in cfg.blocks[bid].preds
                 if e.src < n and out[e.src] is not None]
        inn = frozenset().union(*preds) if preds else frozenset()
        return inn | {ENTRY} if bid == cfg.rpo[0] else inn

    changed = True
    while changed:
        changed = False
        for bid in cfg.rpo:
            b = cfg.blocks[bid]
            new = transfer(inn_of(bid), b.start, b.end, False)
            if new != out[bid]:
                out[bid], changed = new, True
    for bid in cfg.rpo:
        transfer(inn_of(bid), cfg.blocks[bid].start, cfg.blocks[bid].end, True)
    return not bad[0]


def _values(cfg, cache: dict | None):
    """The value / uniformity analysis of ``cfg`` (memoised in ``cache`` by the CFG's id)."""
    from verifier.analysis.values import Values

    if cache is None:
        return Values(cfg)
    key = ("values", id(cfg))
    if key not in cache:
        cache[key] = Values(cfg)
    return cache[key]


def equivalent(cls: str, text: str, line: int, _cache: dict | None = None) -> str:
    """Why removing the site at ``line`` of ``text`` (class ``cls``) cannot change any
    execution, or "" when it may (module docstring: removed waits with nothing in flight on any
    path, barriers with an identical barrier next to them through register-only code)."""
    if cls not in ("store_refill", "no_wgmma_wait", "no_bar_sync", "no_tcgen05_wait",
                   "no_wgmma_fence", "no_tcgen05_fence"):
        return ""
    key = hash(text)
    if _cache is not None and key in _cache:
        cfg, at = _cache[key]
    else:
        cfg, at = _entry_cfg(text)
        if _cache is not None:
            _cache[key] = (cfg, at)
    i = at.get(line)
    if i is None or sum(ins.line == line for ins in cfg.instrs) > 1:
        return ""  # (a removal deletes the whole line: with two instructions, both go)
    if cls == "store_refill" and _nothing_in_flight(cfg, i, _bulk_issue, _bulk_retire):
        return "equivalent: no bulk-group operation can be in flight at this wait"
    if cls == "no_wgmma_wait" and _nothing_in_flight(cfg, i, _wgmma_issue, _wgmma_retire):
        return "equivalent: no wgmma.mma_async can be in flight at this wait"
    w = cfg.instrs[i]
    if (cls == "no_wgmma_wait" and w.opcode.startswith("wgmma.wait_group") and w.operands
            and w.operands[0].kind == "imm"):
        n_keep = int(w.operands[0].value or 0)
        if _waited_again(cfg, i, lambda ins: (
                ins.opcode.startswith("wgmma.wait_group") and ins.operands and
                ins.operands[0].kind == "imm" and int(ins.operands[0].value or 0) <= n_keep),
                _wgmma_wait_quiet(cfg)):
            return ("equivalent: on every path another wgmma.wait_group with no more groups "
                    "pending retires what it retired before anything touches a wgmma operand "
                    "register, stores, synchronises or signals")
    if (cls == "no_wgmma_fence" and w.opcode.startswith("wgmma.fence")
            and _wgmma_fence_redundant(cfg, i)):
        return ("equivalent: with it removed, every wgmma.mma_async still has a wgmma.fence "
                "after the entry and after each non-wgmma access of its registers, on every "
                "path")
    if (cls == "no_tcgen05_wait" and cfg.instrs[i].opcode.startswith("tcgen05.wait::ld")
            and _waited_again(cfg, i, _tmem_ld_retire, _tmem_ld_quiet)):
        return ("equivalent: on every path another tcgen05.wait::ld (which completes every "
                "earlier tcgen05.ld of the thread) comes before anything that writes TMEM, "
                "deallocates or signals another thread")
    if cls == "no_tcgen05_fence" and cfg.instrs[i].opcode.startswith("tcgen05.fence"):
        why = _tc_fence_redundant(cfg, i)
        if why:
            return why
    if cls == "no_bar_sync" and _barrier_redundant(cfg, i):
        return "equivalent: an identical barrier is next to it through register-only code"
    if cls == "no_bar_sync" and _barrier_merge_safe(cfg, i, _values(cfg, _cache)):
        return ("equivalent: the accesses between its twin barriers (or the entry) on either "
                "side of it do not conflict")
    return ""


#: tcgen05 operations that are asynchronous (PTX ISA 9.1 §9.7.16.6.1): the ones the tcgen05
#: fences order across thread synchronisation; alloc / dealloc / relinquish are synchronous
_TC_ASYNC = ("ld", "st", "mma", "cp", "shift", "commit")


def _tc_async(ins) -> bool:
    return ins.base == "tcgen05" and len(ins.parts) > 1 and ins.parts[1] in _TC_ASYNC


def _thread_sync(ins) -> str | None:
    """The kind of thread synchronisation ``ins`` is ("cta barrier", "mbarrier wait",
    "mbarrier arrive", "cluster barrier"), or None."""
    from verifier.rules._flow import is_arrive_signal, is_mbar_wait

    p = ins.parts
    if ins.base in ("bar", "barrier"):
        return "cluster barrier" if len(p) > 1 and p[1] == "cluster" else "cta barrier"
    if is_mbar_wait(ins):
        return "mbarrier wait"
    return "mbarrier arrive" if is_arrive_signal(ins) else None


def _adjacent_sync(cfg, i: int, forward: bool) -> int | None:
    """The thread synchronisation next to the tcgen05 fence at ``i``: the first one after it
    (``forward``: ``before_thread_sync``) or before it (``after_thread_sync``: through a
    wait loop's branch back into the loop block) with only register code, branches and labels
    in between, along a single-successor / single-predecessor chain; None when there is none
    or something that touches memory comes first."""
    b = cfg.block_of[i]
    j = i
    for _ in range(64):
        blk = cfg.blocks[b]
        j = j + 1 if forward else j - 1
        if forward and j >= blk.end or not forward and j < blk.start:
            nxt = ([e.dst for e in blk.succs] if forward
                   else [e.src for e in blk.preds if e.src != b])
            if len(nxt) != 1 or nxt[0] >= len(cfg.blocks):
                return None
            b = nxt[0]
            j = cfg.blocks[b].start - 1 if forward else cfg.blocks[b].end
            continue
        ins = cfg.instrs[j]
        if _thread_sync(ins):
            return j
        if ins.base in _MEMORY or ins.base in _ENDS:
            return None
    return None


def _tc_fence_redundant(cfg, i: int) -> str:
    """Why removing the tcgen05 fence at ``i`` changes nothing the rulebook calls a bug, or "".
    (1) Its synchronisation is a CTA barrier that no asynchronous tcgen05 operation reaches on
    any path: only the synchronous ``tcgen05.alloc`` precedes it (the TMEM address hand-off,
    PTX ISA 9.1 §9.7.16.6.1, docs/ptx_rules.md TF4), so the fence orders nothing. (2) Its
    synchronisation has release / acquire semantics (no ``.relaxed``): the rulebook's TF3 /
    TF5 take such a barrier, arrive or wait as ordering the tcgen05 operations around it, as
    Triton's sm_100a code relies on (it has no tcgen05 fence); the verifier reports the
    missing fence as a warning there, not an error (the fence is what orders them after a
    ``.relaxed`` wait, cutlass#2974). Only a fence next to a ``.relaxed`` synchronisation (the
    PTX ISA's canonical patterns, §9.7.16.6.4) is a mutant."""
    ins = cfg.instrs[i]
    forward = "before_thread_sync" in ins.opcode
    j = _adjacent_sync(cfg, i, forward)
    if j is None:
        return ""
    sync = cfg.instrs[j]
    kind = _thread_sync(sync)
    if "relaxed" in sync.parts:
        return ""
    if kind == "cta barrier" and _nothing_in_flight(cfg, j, _tc_async, lambda _ins: False):
        return ("equivalent: no asynchronous tcgen05 operation reaches the CTA barrier it "
                "fences on any path (only the synchronous tcgen05.alloc: TF4)")
    return (f"equivalent under the rulebook (TF3 / TF5): the {kind} it fences has "
            "release / acquire semantics (no .relaxed), which order the tcgen05 operations "
            "around it; the fence is required next to a .relaxed synchronisation (cutlass#2974; "
            "Triton's sm_100a code has no tcgen05 fence)")


_REG_DECL = "\t.reg .b32 \t%ailower_m<4>;\n\t.reg .pred \t%ailower_q<2>;\n"


def _declare(text: str) -> str:
    """Add the mutants' scratch registers after the first ``.reg`` line of the entry body."""
    m = re.search(r"\n\s*\.reg [^\n]*\n", text)
    assert m, "no .reg declaration to put the scratch registers after"
    return text[:m.end()] + _REG_DECL + text[m.end():]


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _drop(text: str, m: re.Match) -> str:
    return text[:m.start()] + "\n" + text[m.end():]


_WAIT = re.compile(r"\n(?P<ind>[ \t]*)(?P<pred>@!?%\w+\s+)?mbarrier\.(?:try|test)_wait\.parity"
                   r"(?P<mods>[\w.:]*)\s+(?P<dst>%?\w+),\s*\[(?P<bar>[^\]]+)\],\s*(?P<par>[%\w]+)"
                   r"\s*;")


def _parity(form: str) -> Callable[[str], Iterator[tuple[int, str, str]]]:
    def gen(text: str) -> Iterator[tuple[int, str, str]]:
        for m in _WAIT.finditer(text):
            par = m.group("par")
            reg = par.startswith("%")
            if form == "imm":
                if reg:
                    continue
                new = m.group(0)[:m.start("par") - m.start()] + str(1 - int(par, 0)) + \
                    m.group(0)[m.end("par") - m.start():]
                yield _line_of(text, m.start() + 1), f"parity {par} -> {1 - int(par, 0)}", \
                    text[:m.start()] + new + text[m.end():]
                continue
            if not reg:
                continue
            calc = {"xor": f"xor.b32 \t%ailower_m0, {par}, 1;",
                    "sub": f"sub.s32 \t%ailower_m0, 1, {par};",
                    "selp": f"setp.eq.u32 \t%ailower_q0, {par}, 0;\n{m.group('ind')}"
                            f"selp.b32 \t%ailower_m0, 1, 0, %ailower_q0;"}[form]
            body = m.group(0)[:m.start("par") - m.start()] + "%ailower_m0" + \
                m.group(0)[m.end("par") - m.start():]
            new = f"\n{m.group('ind')}{calc}" + body
            yield _line_of(text, m.start() + 1), f"parity {par} flipped ({form})", \
                _declare(text[:m.start()] + new + text[m.end():])
    return gen


def _remove(pattern: str, what: str, skip_dup: bool = False
            ) -> Callable[[str], Iterator[tuple[int, str, str]]]:
    rx = re.compile(r"\n[ \t]*(?:@!?%\w+\s+)?" + pattern + r"[^\n]*")

    def gen(text: str) -> Iterator[tuple[int, str, str]]:
        for m in rx.finditer(text):
            if skip_dup:
                here = m.group(0).strip()
                nxt = text[m.end():].lstrip("\n").split("\n", 1)[0].strip()
                prv = text[:m.start()].rsplit("\n", 1)[-1].strip()
                if here in (nxt, prv):
                    continue
            yield _line_of(text, m.start() + 1), f"{what}: {m.group(0).strip()[:60]}", \
                _drop(text, m)
    return gen


def _no_mbar_wait(text: str) -> Iterator[tuple[int, str, str]]:
    consume = re.compile(r"wgmma\.mma_async|tcgen05\.mma|tcgen05\.cp|ld\.shared|ldmatrix")
    for m in _WAIT.finditer(text):
        rest = text[m.end():]
        nxt = re.search(r"mbarrier\.", rest)
        window = rest[:nxt.start()] if nxt else rest
        if not consume.search(window):
            continue
        # the wait and its retry branch (Triton: `@!complete bra.uni waitLoop;`)
        retry = re.match(r"\n[ \t]*@!?%?\w+\s+bra(?:\.uni)?\s+\S+;", rest)
        end = m.end() + (retry.end() if retry else 0)
        dst = m.group("dst")
        # keep the predicate defined (true) so the code after still assembles
        fill = f"\n{m.group('ind')}setp.eq.u32 \t{dst}, 0, 0;" if dst.startswith("%") or \
            dst.isidentifier() else ""
        yield _line_of(text, m.start() + 1), f"mbarrier wait removed before a consumer", \
            text[:m.start()] + fill + "\n" + text[end:]


def _expect_tx(text: str) -> Iterator[tuple[int, str, str]]:
    rx = re.compile(r"(mbarrier\.(?:arrive\.)?expect_tx[\w.:]*\s+[^;]*,\s*)(\d+)(\s*;)")
    for m in rx.finditer(text):
        n = int(m.group(2))
        if n < 32:
            continue
        yield _line_of(text, m.start()), f"expect_tx {n} -> {n // 2}", \
            text[:m.start(2)] + str(n // 2) + text[m.end(2):]


def _bar_count(text: str) -> Iterator[tuple[int, str, str]]:
    rx = re.compile(r"(\n[ \t]*(?:@!?%\w+\s+)?bar(?:rier)?\.(?:sync|arrive)[\w.]*\s+\d+\s*,\s*)"
                    r"(\d+)(\s*;)")
    for m in rx.finditer(text):
        n = int(m.group(2))
        if n <= 32:
            continue
        yield _line_of(text, m.start() + 1), f"named barrier count {n} -> {n - 32}", \
            text[:m.start(2)] + str(n - 32) + text[m.end(2):]


def _early_dealloc(text: str) -> Iterator[tuple[int, str, str]]:
    d = re.search(r"\n[ \t]*(?:@!?%\w+\s+)?tcgen05\.dealloc[^\n]*", text)
    mmas = list(re.finditer(r"\n[ \t]*(?:@!?%\w+\s+)?tcgen05\.mma[^\n]*", text))
    if d is None or not mmas or mmas[-1].start() > d.start():
        return
    last = mmas[-1]
    out = text[:d.start()] + "\n" + text[d.end():]
    out = out[:last.end()] + d.group(0) + out[last.end():]
    yield _line_of(text, d.start() + 1), "tcgen05.dealloc moved after the last tcgen05.mma", out


def _early_release(text: str) -> Iterator[tuple[int, str, str]]:
    rx = re.compile(r"(\n[ \t]*wgmma\.wait_group\.sync\.aligned\s+)(\d+)(\s*;)")
    for m in rx.finditer(text):
        after = text[m.end():m.end() + 600]
        if not re.search(r"mbarrier\.arrive(?!\.expect_tx)", after):
            continue
        n = int(m.group(2))
        yield _line_of(text, m.start() + 1), f"wgmma.wait_group {n} -> {n + 1} before the " \
            "stage release", text[:m.start(2)] + str(n + 1) + text[m.end(2):]


CLASSES: dict[str, Callable[[str], Iterator[tuple[int, str, str]]]] = {
    "parity_xor": _parity("xor"),
    "parity_sub": _parity("sub"),
    "parity_selp": _parity("selp"),
    "parity_imm": _parity("imm"),
    "no_proxy_fence": _remove(r"fence\.proxy\.async(?!\.global)", "proxy fence removed"),
    "no_mbar_wait": _no_mbar_wait,
    "expect_tx": _expect_tx,
    "no_wgmma_wait": _remove(r"wgmma\.wait_group", "wgmma.wait_group removed"),
    "no_wgmma_fence": _remove(r"wgmma\.fence", "wgmma.fence removed"),
    "no_tcgen05_wait": _remove(r"tcgen05\.wait::", "tcgen05.wait removed"),
    "no_tcgen05_fence": _remove(r"tcgen05\.fence::", "tcgen05.fence removed"),
    "no_bar_sync": _remove(r"bar(?:rier)?\.sync\b", "barrier removed", skip_dup=True),
    "bar_count": _bar_count,
    "early_dealloc": _early_dealloc,
    "no_cluster_barrier": _remove(r"barrier\.cluster\.(?:arrive|wait)", "cluster barrier removed"),
    "store_refill": _remove(r"cp\.async\.bulk\.wait_group\.read", "wait_group.read removed"),
    "early_release": _early_release,
}
"""Mutation class -> generator of ``(site line, description, mutated text)``."""


#: classes whose mutation removes a wait at the site line (the dynamic equivalence applies)
_WAIT_REMOVALS = ("store_refill", "no_wgmma_wait", "no_mbar_wait", "no_tcgen05_wait",
                  "no_proxy_fence")
#: classes whose mutation acts at another line than the site (the reach filter does not apply)
_NONLOCAL = ("early_dealloc",)


def left_out(cls: str, text: str, line: int, reached: dict[int, int] | set[int] | None = None,
             wait_effects: dict[int, int] | None = None, _cache: dict | None = None,
             barrier_effects: dict[int, int] | None = None) -> str:
    """Why the ``cls`` mutant at ``line`` of ``text`` is not part of the table, or "": it is
    :func:`equivalent`; or (``reached``: lines the emulated original executed) its site is never
    executed at the launch; or (``wait_effects``: per reached wait line, its executions that
    acted, ``EmulationResult.wait_effects``) the removed wait never blocked, acquired or retired
    anything at any of its executions there - it orders nothing on every executed path; or
    (``barrier_effects``: per reached barrier line, its instances that may have ordered two
    conflicting operations, ``EmulationResult.barrier_effects`` - of every emulated run of the
    original, e.g. both ``elect.sync`` choices) no instance of the removed barrier ordered
    anything the barriers around it do not."""
    why = equivalent(cls, text, line, _cache)
    if why:
        return why
    if reached is not None and cls not in _NONLOCAL and line not in reached:
        return "never executed: no thread executes the site at the emulated launch"
    if (wait_effects is not None and cls in _WAIT_REMOVALS and line in wait_effects
            and wait_effects[line] == 0):
        if cls == "no_proxy_fence":
            return ("equivalent on the executed paths: no async-proxy read at the emulated "
                    "launch depended on the removed proxy fence alone (no generic-written "
                    "bytes it alone fenced)")
        if "tcgen05.wait::ld" in text.splitlines()[line - 1]:
            return ("equivalent on the executed paths: no TMEM write (by the reader or "
                    "another thread) at the emulated launch depended on the loads the removed "
                    "wait completed (each write to their cells came after the reader's next "
                    "tcgen05.wait::ld; the loaded registers are ordered by their register "
                    "dependency, rulebook TL4)")
        return ("equivalent on the executed paths: the removed wait never blocked, acquired "
                "or retired anything at the emulated launch")
    if (barrier_effects is not None and cls == "no_bar_sync" and line in barrier_effects
            and barrier_effects[line] == 0):
        return ("equivalent on the executed paths: no instance of the removed barrier ordered "
                "two conflicting operations of two of its threads that the barriers around it "
                "do not order (emulator.barrier_use)")
    return ""


def mutants(base: str, text: str, classes: list[str] | None = None,
            max_sites: int = MAX_SITES, reached: dict[int, int] | set[int] | None = None,
            keep_skipped: bool = False, wait_effects: dict[int, int] | None = None,
            barrier_effects: dict[int, int] | None = None) -> list[FastMutant]:
    """Every mutant of ``text`` (named ``base``) for ``classes`` (default all), at most
    ``max_sites`` per class (counted over the emitted ones), without those :func:`left_out`
    names a reason for (``reached`` / ``wait_effects``: the original's
    ``EmulationResult.line_counts`` / ``wait_effects`` at the emulated launch; None: only the
    static equivalence). ``keep_skipped``: return the left-out mutants too, with
    :attr:`FastMutant.skip` set.

    Raises:
        KeyError: an unknown class name.
    """
    out = []
    cache: dict = {}
    for cls in classes or list(CLASSES):
        k = 0
        for line, what, new in CLASSES[cls](text):
            if k >= max_sites:
                break
            skip = left_out(cls, text, line, reached, wait_effects, cache, barrier_effects)
            if skip:
                if keep_skipped:
                    out.append(FastMutant(cls, base, line, what, new, skip))
                continue
            k += 1
            out.append(FastMutant(cls, base, line, what, new))
    return out
