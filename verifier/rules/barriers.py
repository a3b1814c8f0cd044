"""B: bar / barrier / named barriers / cluster barrier / elect.sync / setmaxnreg, and G3.

Sources: PTX ISA 9.1 §9.7.13.1 (bar, barrier), §9.7.13.3 (barrier.cluster), §9.7.13.14
(elect.sync), §9.7.19.5 (setmaxnreg), §9.7.9.25.4.1 (multicast notes) and
``docs/ptx_rules.md`` §0, §6.
B6 (barriers do not order the async proxy) is enforced by AP1/W5/TM8/TF rules.
"""

from __future__ import annotations

from verifier.analysis import DIVERGENT, UNIFORM, WARP, Property
from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.rules._flow import (
    call_contexts,
    each_function,
    event_findings,
    is_mbar_wait,
    note_finding,
)

__all__ = [
    "barrier_arrive_reuse",
    "barrier_count_mismatch",
    "barrier_divergent",
    "barrier_operands_invalid",
    "barrier_partial_cta",
    "cluster_barrier_partial",
    "elect_setmaxnreg_invalid",
    "multicast_needs_arch_target",
]


def _bar(ins) -> bool:
    p = ins.parts
    return (p[0] == "bar" and len(p) > 1 and p[1] in ("sync", "arrive", "red")) or (
        p[0] == "barrier" and len(p) > 1 and p[1] in ("sync", "arrive", "red"))


def _id_count(fa, ins, i) -> tuple[int | None, int | None, bool]:
    """(barrier id, thread count, has a count operand)."""
    ops = [o for o in ins.operands]
    if ins.parts[1] == "red":
        ops = ops[1:]    # destination first
    bid = fa.values.const(ops[0], i) if ops else None
    has = len(ops) >= 2 and ops[1].kind in ("imm", "reg")
    cnt = fa.values.const(ops[1], i) if has else None
    return bid, cnt, has


def barrier_operands_invalid(ctx: Context) -> list[Finding]:
    """Barrier id or thread count invalid (B1).

    What it checks:
        Known barrier ids are 0-15; known thread counts are non-zero multiples of 32;
        ``bar.arrive`` has a count. Register counts of unknown value give a note.

    Why it is bad:
        Illegal; a count of 0 or not a multiple of the warp size never completes as intended.

    Example:
        ``mov.b32 %r5, 48; bar.sync 1, %r5;``

    Use instead:
        ``bar.sync 1, 64;``

    ptxas:
        ERR for immediates; register counts: no.

    References:
        PTX ISA 9.1 §9.7.13.1; docs/ptx_rules.md B1.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _bar):
        for i, ins in enumerate(fa.cfg.instrs):
            if not _bar(ins):
                continue
            bid, cnt, has = _id_count(fa, ins, i)
            if bid is not None and not 0 <= bid <= 15:
                out.append(ctx.finding("B1", ins.line, ins.col, f"barrier id {bid} is not in 0..15"))
            if ins.parts[1] == "arrive" and not has:
                out.append(ctx.finding("B1", ins.line, ins.col,
                                       f"'{ins.opcode}' needs a thread count"))
            if has and cnt is None:
                out.append(note_finding(ctx, "B1", ins, "barrier thread count is not a constant; "
                                        "its multiple-of-32 rule is not checked"))
            elif cnt is not None and (cnt == 0 or cnt % 32):
                out.append(ctx.finding("B1", ins.line, ins.col,
                                       f"barrier thread count {cnt} is not a non-zero multiple "
                                       "of 32"))
    return out


def barrier_divergent(ctx: Context) -> list[Finding]:
    """Aligned barrier in lane-divergent code (B2).

    What it checks:
        ``bar.sync/arrive/red`` and ``barrier.*.aligned`` have a guard and enclosing branches
        that are at least warp-uniform (never ``%laneid``/``%tid``-dependent or elected).

    Why it is bad:
        Undefined behaviour / deadlock: all threads of a warp must execute the same aligned
        barrier instruction (TIRx-kernels#21, facebookexperimental/triton#1040).

    Example:
        ``@%p_lane bra SKIP; bar.sync 0; SKIP:``

    Use instead:
        move the barrier out of the divergent region, or use non-aligned ``barrier.sync``.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.1; docs/ptx_rules.md B2.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _bar):
        v = fa.values
        for i, ins in enumerate(fa.cfg.instrs):
            if not _bar(ins):
                continue
            if ins.parts[0] == "barrier" and "aligned" not in ins.parts:
                continue
            if v.context_class(i) == DIVERGENT or v.guard_single_lane(i):
                out.append(ctx.finding("B2", ins.line, ins.col,
                                       f"aligned barrier '{ins.opcode}' is reached by only part "
                                       "of a warp",
                                       notes=[Note(message="its guard or an enclosing branch "
                                                   "depends on the lane")]))
    return out


def barrier_count_mismatch(ctx: Context) -> list[Finding]:
    """Named-barrier thread counts inconsistent (B3).

    What it checks:
        All known counts used with one barrier id are equal, and no count exceeds the CTA's
        threads (when known); a barrier that every thread of the CTA reaches (no predicate, no
        warp- or lane-dependent branch or early exit before it) has no count below the CTA's
        threads (the first arrivals would complete it: a red-team evasion of B9).

    Why it is bad:
        Deadlock or early release (FlashMLA#57: 256 on a path only 128 threads reach).

    Example:
        ``bar.arrive 1, 256;`` and ``bar.sync 1, 128;``

    Use instead:
        one count per id = 32 x participating warps.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.1; docs/ptx_rules.md B3.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _bar):
        seen: dict[int, tuple[int, object]] = {}
        for i, ins in enumerate(fa.cfg.instrs):
            if not _bar(ins):
                continue
            bid, cnt, has = _id_count(fa, ins, i)
            if cnt is None:
                continue
            if fa.threads is not None and cnt > fa.threads:
                out.append(ctx.finding("B3", ins.line, ins.col,
                                       f"barrier count {cnt} exceeds the {fa.threads} threads of "
                                       "the CTA: it never completes"))
            elif (fa.threads is not None and 0 < cnt < fa.threads and fi.fn.kind == "entry"
                  and ins.predicate is None and fa.values.context_class(i) == UNIFORM
                  and fa.cfg.block_of[i] not in fa.values.partial_blocks
                  and not _per_group_id(fa, ins, i)):
                # every thread of the CTA reaches it: the first `cnt` arrivals complete it and
                # the rest start a new instance, so which threads it orders depends on timing
                out.append(ctx.finding(
                    "B3", ins.line, ins.col,
                    f"all {fa.threads} threads of the CTA reach this barrier but its count is "
                    f"{cnt}: it completes with whichever {cnt} threads arrive first",
                    notes=[Note(message=f"use count {fa.threads} (or no count), or a separate "
                                        "barrier id per thread group")]))
            if bid is None:
                continue
            if bid in seen and seen[bid][0] != cnt:
                first = seen[bid][1]
                out.append(ctx.finding("B3", ins.line, ins.col,
                                       f"barrier {bid} is used with count {cnt} here and "
                                       f"{seen[bid][0]} elsewhere",
                                       notes=[Note(message="other count", line=first.line,
                                                   col=first.col)]))
            seen.setdefault(bid, (cnt, ins))
    return out


def _per_group_id(fa, ins, i: int) -> bool:
    """The barrier id of ``ins`` is a register that is not CTA-uniform (FA3 / CUTLASS's
    ``bar.sync 1 + tid / 128, 128``: each warpgroup its own named barrier, so a count below
    the CTA's threads is that group's)."""
    o = ins.operands[0] if ins.operands else None
    return (o is not None and o.kind == "reg" and bool(o.name)
            and fa.values.cls.get(fa.cfg.reg_key(o.name, i), DIVERGENT) != UNIFORM)


def barrier_partial_cta(ctx: Context) -> list[Finding]:
    """CTA-wide barrier reached by only some warps, or skipped by an early exit (B4).

    What it checks:
        A barrier without a thread count (all threads of the CTA) does not sit in a region
        entered on a warp-dependent condition (in a ``.func``: nor is the function called from
        such a region, through call chains: triton#9786), and no ``ret``/``exit`` taken by only
        some threads precedes a reachable CTA-wide barrier.

    Why it is bad:
        Threads that never arrive make the others wait forever (flashinfer#2996, FBGEMM#5857).

    Example:
        ``@%p_warp0 bra PRODUCER; ... bar.sync 0; ... PRODUCER: ... ret;``

    Use instead:
        a named barrier with the participating count, or make all threads reach it.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.1; docs/ptx_rules.md B4.
    """
    out: list[Finding] = []
    calls = call_contexts(ctx)
    for fi, fa in each_function(ctx):
        cfg, v = fa.cfg, fa.values
        cta = [i for i, ins in enumerate(cfg.instrs)
               if _bar(ins) and ins.parts[1] == "sync" and not _id_count(fa, ins, i)[2]]
        if not cta:
            continue
        caller_c, site = calls.get(fi.fn.name, (UNIFORM, None)) if fi.fn.kind != "entry" \
            else (UNIFORM, None)
        for i in cta:
            ins = cfg.instrs[i]
            c = v.context_class(i)
            if c == WARP and _rendezvous(fa, cta, i):
                out.append(note_finding(
                    ctx, "B4", ins,
                    f"non-aligned '{ins.opcode}' is reached from warp-dependent branches; every "
                    "side of them reaches a non-aligned barrier with the same id (a rendezvous "
                    "of partitions, allowed without .aligned): whether every warp arrives is "
                    "left to emulation"))
            elif c == WARP:
                out.append(ctx.finding("B4", ins.line, ins.col,
                                       f"'{ins.opcode}' without a thread count waits for the whole "
                                       "CTA but only the warps taking a warp-dependent branch "
                                       "reach it",
                                       notes=[Note(message="use a named barrier with the count "
                                                   "of participating threads")]))
            elif c == UNIFORM and caller_c != UNIFORM and site is not None:
                out.append(ctx.finding("B4", ins.line, ins.col,
                                       f"'{ins.opcode}' without a thread count waits for the whole "
                                       f"CTA but '{fi.fn.name}' is called by only some warps",
                                       notes=[Note(message="the call, in a warp-dependent branch "
                                                   "of the caller", line=site.line,
                                                   col=site.col),
                                              Note(message="use a named barrier with the count "
                                                   "of participating threads")]))
        cta_blocks = {cfg.block_of[i] for i in cta}
        for i, ins in enumerate(cfg.instrs):
            if ins.parts[0] not in ("ret", "exit"):
                continue
            b = cfg.block_of[i]
            partial = v.guard_class(i) != UNIFORM or b in v.divergent_blocks \
                or b in v.partial_blocks
            if not partial:
                continue
            # a CTA-wide barrier the remaining threads can still reach
            origins = [b] if ins.predicate is not None else [
                d for d, c in v.branch_class.items() if c != UNIFORM and b in cfg.region(d)]
            hit = None
            for o in origins:
                seen, work = {o}, [o]
                while work and hit is None:
                    x = work.pop()
                    for d in cfg.succ_ids(x):
                        if d == cfg.exit_id or d in seen:
                            continue
                        if d in cta_blocks and not (d == b):
                            hit = d
                            break
                        seen.add(d)
                        work.append(d)
                if hit is not None:
                    break
            if hit is not None:
                bi = next(j for j in cta if cfg.block_of[j] == hit)
                out.append(ctx.finding("B4", ins.line, ins.col,
                                       f"'{ins.parts[0]}' taken by only some threads skips the "
                                       "CTA-wide barrier the others wait at",
                                       notes=[Note(message="barrier reached by the remaining "
                                                   "threads", line=cfg.instrs[bi].line,
                                                   col=cfg.instrs[bi].col)]))
    return out


def _invariant_guard(fa, ins, i) -> tuple[object, bool] | None:
    """(value token, negated) of ``ins``'s guard when the predicate is the same each time a
    thread reaches ``ins``: every definition reaching ``ins`` is the same register-only
    instruction (``setp.eq %p, %r30, 0`` written twice) over registers defined outside every
    loop, by the same definitions; or one definition outside every loop. Else None."""
    if ins.predicate is None:
        return None
    cfg, v = fa.cfg, fa.values
    key = cfg.reg_key(ins.predicate, i)
    defs = v.reaching(key, i)
    if not defs:
        return None
    if len(defs) == 1 and cfg.block_of[defs[0]] not in cfg.in_cycle:
        return (("def", defs[0]), ins.negated)
    tokens = set()
    for d in defs:
        dins = cfg.instrs[d]
        if dins.parts[0] not in ("setp", "not", "mov", "and", "or", "xor") or dins.predicate:
            return None
        srcs = []
        for o in dins.operands[1:]:
            if o.kind == "reg":
                rd = v.reaching(cfg.reg_key(o.name or "", d), d)
                if not rd or any(cfg.block_of[x] in cfg.in_cycle for x in rd):
                    return None
                srcs.append((o.name, tuple(sorted(rd))))
            elif o.kind == "imm":
                srcs.append((o.text, ()))
            else:
                return None
        tokens.add((dins.opcode, tuple(srcs)))
    return (tokens.pop(), ins.negated) if len(tokens) == 1 else None


def _nonaligned_id(fa, ins, i) -> int | None:
    """The constant barrier id of a non-``.aligned`` ``barrier.sync/arrive`` (else None)."""
    if ins.parts[0] != "barrier" or "aligned" in ins.parts:
        return None
    return _id_count(fa, ins, i)[0]


def _rendezvous(fa, cta: list[int], i: int) -> bool:
    """Non-aligned CTA-wide barrier ``i`` (B4 context WARP) is a cross-site rendezvous: on every
    side of every warp-dependent branch whose region holds it, a non-aligned CTA-wide barrier
    with the same id is reachable.

    The non-aligned ``barrier.sync`` lets different warps arrive at one barrier instance from
    different instructions (PTX ISA 9.1 §9.7.13.1: "the .aligned modifier indicates that all
    threads in CTA will execute the same barrier instruction"; without it they need not): a
    warp-specialized kernel's partitions meet that way (Triton 3.9 sm_100a ``barrier.sync 1``
    / ``barrier.sync 0`` in its default and worker partitions). Whether every warp really
    arrives is a counting question the static rule cannot settle; emulation can.
    """
    cfg, v = fa.cfg, fa.values
    bid = _nonaligned_id(fa, cfg.instrs[i], i)
    if bid is None:
        return False
    sites = {cfg.block_of[j] for j in cta if _nonaligned_id(fa, cfg.instrs[j], j) == bid}
    b = cfg.block_of[i]
    branches = [d for d, c in v.branch_class.items() if c == WARP and b in cfg.region(d)]
    if not branches:
        return False

    # a side that reaches a same-id site arrives; a side that runs to the kernel's exit
    # releases the barrier when it exits (PTX ISA 9.1 §9.7.12 exit: "if the exiting threads
    # are holding up the barrier, the barrier is released"). Whether the sides' timing
    # matches (a partition parked at another barrier first) is a question of the concrete
    # execution, left to emulation.
    others = sites - {b} or {cfg.block_of[j] for j in cta if j != i
                             and _nonaligned_id(fa, cfg.instrs[j], j) == bid}
    return bool(others) and _sides_meet(cfg, branches, sites)


def _sides_meet(cfg, branches, sites: set[int]) -> bool:
    """Every side of every branch in ``branches`` reaches a block of ``sites`` or the kernel's
    exit (:func:`_rendezvous`, :func:`_cluster_rendezvous`)."""

    def met(side: int) -> bool:
        seen, work = {side}, [side]
        while work:
            x = work.pop()
            if x in sites:
                return True
            for d in cfg.succ_ids(x):
                if d == cfg.exit_id:
                    return True
                if d not in seen:
                    seen.add(d)
                    work.append(d)
        return False

    return all(met(s) for d in branches for s in cfg.succ_ids(d) if s != cfg.exit_id)


class ArriveReuse(Property):
    """Fact: the ``(barrier id, guard)`` of the named-barrier arrives since the last wait.
    A property of one warp's path: warp-uniform guards (a warpgroup-index test) are forked
    on, so ``@%p bar.arrive 1; @%p bra EXIT; bar.sync 1`` never takes both the arrive and
    the fall-through."""

    RULES = ("B5",)
    FORK_CLASS = 1  # values.WARP

    def initial(self):
        return frozenset()

    def relevant(self, ins):
        return _bar(ins) or is_mbar_wait(ins) or (
            ins.parts[0] == "barrier" and "cluster" in ins.parts)

    def transfer(self, i, ins, fact, report):
        # fact: (barrier id, guard) of the arrives since the last wait; guard: (predicate,
        # negated) when the arrive's guard is a loop-invariant predicate, else None
        if not _bar(ins):
            return frozenset()
        bid, cnt, has = _id_count(self.fa, ins, i)
        if bid is None:
            return frozenset()
        g = _invariant_guard(self.fa, ins, i)
        # '@%p bar.arrive 3; @!%p bar.arrive 2' then '@%p bar.sync 2; @!%p bar.sync 3' (a
        # ping-pong of two consumer warpgroups): complementary guards of one unchanged
        # predicate are never both taken by a thread
        if any(b == bid and not (g is not None and ag is not None and ag[0] == g[0]
                                 and ag[1] != g[1]) for b, ag in fact):
            report("B5", f"second operation on barrier {bid} after 'bar.arrive' with no wait in "
                         "between: this warp may run a generation ahead")
        if ins.parts[1] == "arrive":
            return frozenset({(bid, g)}) | frozenset(x for x in fact if x[0] == bid)
        return frozenset()

    def describe(self, i, ins, old, new):
        return ins.opcode if ins.parts[1] == "arrive" else None


def barrier_arrive_reuse(ctx: Context) -> list[Finding]:
    """Barrier used again after ``bar.arrive`` before any wait (B5).

    What it checks:
        After ``bar.arrive id``, the same thread performs no other operation on ``id`` before
        some waiting synchronization (``bar.sync`` of another id, an mbarrier wait, a cluster
        barrier).

    Why it is bad:
        The warp may arrive on the next generation before the current one completed: skew and
        deadlock (vllm#26026).

    Example:
        ``LOOP: ... bar.arrive 1, 256; bra LOOP;`` with no wait on the consumer's barrier.

    Use instead:
        ``bar.sync 2, 256;`` (wait for the consumer) before the next ``bar.arrive 1, 256;``.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.1; docs/ptx_rules.md B5.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: _bar(x) and x.parts[1] == "arrive"):
        out += event_findings(ctx, fi, fa, ArriveReuse, "B5")
    return out


def _cluster(ins) -> bool:
    return ins.parts[0] == "barrier" and len(ins.parts) > 2 and ins.parts[1] == "cluster"


class ClusterBarrier(Property):
    RULES = ("B7",)

    def initial(self):
        return False

    def relevant(self, ins):
        return _cluster(ins)

    def transfer(self, i, ins, fact, report):
        op = ins.parts[2]
        if op == "arrive":
            if fact:
                report("B7", "'barrier.cluster.arrive' twice without 'barrier.cluster.wait'")
            return True
        if op == "wait":
            if not fact:
                report("B7", "'barrier.cluster.wait' without a preceding "
                             "'barrier.cluster.arrive' in this thread")
            return False
        return fact

    def at_exit(self, i, fact, report):
        if fact:
            report("B7", "the thread exits after 'barrier.cluster.arrive' without the matching "
                         "'barrier.cluster.wait'")

    def describe(self, i, ins, old, new):
        return ins.opcode


def _cluster_rendezvous(fa, i: int) -> bool:
    """Cluster barrier ``i`` in thread-dependent code is a rendezvous of roles: on every side
    of every thread-dependent branch whose region holds it, a cluster barrier of the same kind
    (arrive / wait) or the kernel's exit is reachable (exited threads do not take part, PTX
    ISA 9.1 §9.7.13.3 "all non-exited threads")."""
    cfg, v = fa.cfg, fa.values
    op = cfg.instrs[i].parts[2]
    sites = {cfg.block_of[j] for j, x in enumerate(cfg.instrs)
             if _cluster(x) and x.parts[2] == op}
    b = cfg.block_of[i]
    branches = [d for d, c in v.branch_class.items() if c != UNIFORM and b in cfg.region(d)]
    return bool(branches) and _sides_meet(cfg, branches, sites)


def cluster_barrier_partial(ctx: Context) -> list[Finding]:
    """Cluster barrier not executed by every thread, or arrive/wait unpaired (B7).

    What it checks:
        ``barrier.cluster.arrive``/``wait`` run in CTA-uniform code (no warp- or lane-dependent
        guard or branch), and on every path each arrive is followed by one wait before the next
        arrive or the exit.

    Why it is bad:
        Every non-exited thread of every CTA must arrive once per phase: partial participation
        deadlocks (triton#9456).

    Example:
        ``@%p_warp0 barrier.cluster.arrive.release.aligned;``

    Use instead:
        execute it unguarded in all threads.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.3; docs/ptx_rules.md B7.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _cluster):
        v = fa.values
        for i, ins in enumerate(fa.cfg.instrs):
            if not _cluster(ins) or v.context_class(i) == UNIFORM:
                continue
            aligned_ok = v.context_class(i) == WARP or "aligned" not in ins.parts
            if aligned_ok and _cluster_rendezvous(fa, i):
                out.append(note_finding(
                    ctx, "B7", ins,
                    f"'{ins.opcode}' is reached from thread-dependent branches; every side of "
                    "them reaches a 'barrier.cluster." + ins.parts[2] + "' or the exit (each "
                    "role arrives at its own site, allowed: PTX ISA 9.1 §9.7.13.3): whether "
                    "every thread arrives once per phase is left to emulation"))
            else:
                out.append(ctx.finding("B7", ins.line, ins.col,
                                       f"'{ins.opcode}' is executed by only some threads of the "
                                       "cluster",
                                       notes=[Note(message="every non-exited thread of every CTA "
                                                   "must arrive once per phase")]))
        out += event_findings(ctx, fi, fa, ClusterBarrier, "B7")
    return out


def elect_setmaxnreg_invalid(ctx: Context) -> list[Finding]:
    """``elect.sync`` mask excludes executing lanes; ``setmaxnreg`` misuse (B8).

    What it checks:
        A constant ``elect.sync`` membermask is full when the whole warp executes it;
        ``setmaxnreg`` is not lane-divergent and its value is a multiple of 8 in [24, 256].

    Why it is bad:
        Undefined behaviour.

    Example:
        ``@%p_lane setmaxnreg.dec.sync.aligned.u32 40;``

    Use instead:
        execute ``setmaxnreg`` in all 4 warps of the warpgroup.

    ptxas:
        setmaxnreg value: ERR; divergence: no.

    References:
        PTX ISA 9.1 §9.7.13.14, §9.7.19.5; docs/ptx_rules.md B8.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: x.parts[0] in ("elect", "setmaxnreg")):
        v = fa.values
        for i, ins in enumerate(fa.cfg.instrs):
            if ins.parts[0] == "elect" and len(ins.operands) >= 2:
                m = v.const(ins.operands[-1], i)
                if m is not None and (m & 0xFFFFFFFF) != 0xFFFFFFFF and \
                        v.context_class(i) != DIVERGENT and ins.predicate is None:
                    out.append(ctx.finding("B8", ins.line, ins.col,
                                           f"'elect.sync' membermask {m & 0xFFFFFFFF:#x} excludes "
                                           "lanes that execute it"))
            elif ins.parts[0] == "setmaxnreg":
                if v.context_class(i) == DIVERGENT or v.guard_single_lane(i):
                    out.append(ctx.finding("B8", ins.line, ins.col,
                                           "'setmaxnreg' is executed by only part of a warp"))
                c = v.const(ins.operands[0], i) if ins.operands else None
                if c is not None and (c % 8 or not 24 <= c <= 256):
                    out.append(ctx.finding("B8", ins.line, ins.col,
                                           f"'setmaxnreg' value {c} is not a multiple of 8 in "
                                           "[24, 256]"))
    return out


def multicast_needs_arch_target(ctx: Context) -> list[Finding]:
    """``.multicast::cluster`` bulk copy on a non-``a``/``f`` target (G3, warning).

    What it checks:
        ``cp.async.bulk*`` with ``.multicast::cluster`` is used only with an architecture-specific
        (``sm_90a``, ``sm_100a``) or family (``sm_100f``) target.

    Why it is bad:
        It is meant for those targets and may be slow elsewhere.

    Example:
        ``.target sm_90`` with ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes
        .multicast::cluster ...``

    Use instead:
        ``.target sm_90a``

    ptxas:
        INFO (advisory).

    References:
        PTX ISA 9.1 §9.7.9.25.4.1 (Notes); docs/ptx_rules.md G3.
    """
    arch = ctx.module.arch or ""
    if arch.endswith(("a", "f")):
        return []
    out: list[Finding] = []
    for fi in ctx.bodies():
        for ins, _ in fi.instructions:
            if ins.parts[0] == "cp" and "multicast::cluster" in ins.parts:
                out.append(ctx.finding("G3", ins.line, ins.col,
                                       f"'.multicast::cluster' is meant for 'a'/'f' targets, the "
                                       f"target is '{arch}'", severity="warning"))
    return out


_ = WARP
