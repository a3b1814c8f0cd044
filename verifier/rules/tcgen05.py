"""TA / TL / TM / TC / TF: tcgen05 (Blackwell 5th-generation tensor core) rules.

TMEM allocation lifecycle (TA), tcgen05.ld/st/wait (TL), mma/cp/shift with decoded constant
instruction and shared-memory descriptors (TM), commit (TC) and ordering/fences (TF). Sources:
PTX ISA 9.1 §9.7.16 (tcgen05) and ``docs/ptx_rules.md`` §1. TA11 is a warning-only
convention. TL6, TM2 and TC4 live in :mod:`verifier.rules.hazards`; TC3 and TF1 are guarantees
the analyses model (registry status ``semantics``, documented there).
"""

from __future__ import annotations

import re

from verifier.analysis import DIVERGENT, UNIFORM, Property
from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.rules._flow import (
    addr_val,
    call_effects,
    called_single_lane,
    each_function,
    event_findings,
    fmt_addr,
    is_arrive_signal,
    is_cta_barrier,
    is_mbar_wait,
    is_tc,
    mbar_operand,
    note_finding,
    ranges_of,
)

__all__ = [
    "commit_missing",
    "commit_not_issuer",
    "mma_idesc_invalid",
    "mma_issued_by_warp",
    "mma_sdesc_invalid",
    "mma_shape_invalid",
    "tc_alloc_fence_sandwich",
    "tc_fence_before_signal",
    "tc_operand_rules",
    "tc_wait_without_fence_after",
    "tmem_access_divergent",
    "tmem_addr_unpublished",
    "tmem_alloc_after_relinquish",
    "tmem_alloc_not_one_warp",
    "tmem_dealloc_mismatch",
    "tmem_dealloc_unordered",
    "tmem_lane_quarter",
    "tmem_ld_without_wait",
    "tmem_leak_on_exit",
    "tmem_mixed_cta_group",
    "tmem_mma_read_race",
    "tmem_ncols_increase",
    "tmem_ncols_invalid",
    "tmem_no_relinquish",
    "tmem_out_of_bounds",
    "tmem_pair_alloc_without_cluster_sync",
    "tmem_st_without_wait",
    "tmem_vector_length",
]


def _ncols(fa, ins, i) -> int | None:
    return fa.values.const(ins.operands[-1], i) if ins.operands else None


def _cta_group(ins) -> str | None:
    for p in ins.parts:
        if p.startswith("cta_group::"):
            return p[11:]
    return None


# ====================================================================== TA1 / TA2 / TA8 / TA11


def tmem_ncols_invalid(ctx: Context) -> list[Finding]:
    """``tcgen05.alloc``/``dealloc`` column count not a power of two in [32, 512] (TA1).

    What it checks:
        The ``nCols`` operand, when its value is known (immediate or a constant register), is a
        power of two between 32 and 512. A register whose value is unknown gives a note.

    Why it is bad:
        Undefined behaviour; at run time the guardrail ``allocation_granularity_invalid`` traps.

    Example:
        ``mov.b32 %r9, 96; tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], %r9;``

    Use instead:
        ``tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 128;``

    ptxas:
        ERR for an immediate on alloc only; register counts and dealloc (96, 1024) pass.

    References:
        PTX ISA 9.1 §9.7.16.7.1, §9.7.16.1.2; docs/ptx_rules.md TA1.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "alloc", "dealloc")):
        for i, ins in enumerate(fa.cfg.instrs):
            if not is_tc(ins, "alloc", "dealloc"):
                continue
            n = _ncols(fa, ins, i)
            if n is None:
                out.append(note_finding(ctx, "TA1", ins, f"cannot determine the column count of "
                                        f"'{ins.parts[1]}' statically"))
            elif not (32 <= n <= 512 and n & (n - 1) == 0):
                out.append(ctx.finding("TA1", ins.line, ins.col,
                                       f"'tcgen05.{ins.parts[1]}' column count {n} is not a power "
                                       "of two in [32, 512]",
                                       notes=[Note(message="TMEM is allocated in units of 32 "
                                                   "columns x 128 lanes, in powers of two")]))
    return out


def tmem_alloc_not_one_warp(ctx: Context) -> list[Finding]:
    """TMEM alloc/dealloc/relinquish not executed by exactly one converged warp (TA2).

    What it checks:
        ``tcgen05.alloc``, ``dealloc`` and ``relinquish_alloc_permit`` are warp-collective
        (``.sync.aligned``): the guard and the enclosing branches must be warp-uniform
        (``%tid.x < 32``, a warp id test), never lane-dependent (``elect.sync``, ``%laneid``),
        and with more than one warp per CTA they must not be executed by every warp.

    Why it is bad:
        A lane-predicated collective is undefined behaviour; several warps allocating at once
        can block each other forever.

    Example:
        ``@%p_elect tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 128;``

    Use instead:
        guard it with a warp-uniform predicate: ``setp.lt.u32 %p1, %tid.x, 32;``

    ptxas:
        no (a lane-predicated alloc is accepted).

    References:
        PTX ISA 9.1 §9.7.16.7.1, §9.7.16.5; CUTLASS ``tmem_allocator_sm100.hpp``;
        docs/ptx_rules.md TA2.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "alloc", "dealloc",
                                                     "relinquish_alloc_permit")):
        v = fa.values
        for i, ins in enumerate(fa.cfg.instrs):
            if not is_tc(ins, "alloc", "dealloc", "relinquish_alloc_permit"):
                continue
            c = v.context_class(i)
            if c == DIVERGENT or v.guard_single_lane(i):
                out.append(ctx.finding("TA2", ins.line, ins.col,
                                       f"warp-collective 'tcgen05.{ins.parts[1]}' is executed by "
                                       "only part of a warp",
                                       notes=[Note(message="its guard or an enclosing branch "
                                                   "depends on the lane (%tid.x, %laneid or "
                                                   "elect.sync)")]))
            elif c == UNIFORM and (fa.nwarps or 0) > 1 and fi.fn.kind == "entry":
                out.append(ctx.finding("TA2", ins.line, ins.col,
                                       f"'tcgen05.{ins.parts[1]}' is executed by all "
                                       f"{fa.nwarps} warps of the CTA",
                                       notes=[Note(message="exactly one warp must allocate and "
                                                   "free TMEM; guard it with a warp test such "
                                                   "as '%tid.x < 32'")]))
    return out


def tmem_mixed_cta_group(ctx: Context) -> list[Finding]:
    """Different ``.cta_group`` values among the tcgen05 instructions of one kernel (TA8).

    What it checks:
        Every tcgen05 instruction of an entry and of the ``.func`` it calls uses the same
        ``.cta_group::1`` or ``::2``.

    Why it is bad:
        Illegal; the allocation and the MMA pair state disagree.

    Example:
        ``tcgen05.alloc.cta_group::1 ...`` and ``tcgen05.commit.cta_group::2 ...`` in one kernel.

    Use instead:
        one ``.cta_group`` value throughout the kernel.

    ptxas:
        ERR in whole-program mode; no with ``ptxas -c``.

    References:
        PTX ISA 9.1 §9.7.16.7.1; docs/ptx_rules.md TA8.
    """
    out: list[Finding] = []
    by_name = {fi.fn.name: fi for fi in ctx.bodies()}
    for fi in ctx.bodies():
        if fi.fn.kind != "entry":
            continue
        seen: dict[str, object] = {}
        todo, done = [fi], set()
        while todo:
            g = todo.pop()
            if g.fn.name in done:
                continue
            done.add(g.fn.name)
            for ins, _ in g.instructions:
                if ins.parts[0] == "call" and len(ins.operands) > 1:
                    for o in ins.operands:
                        if o.kind in ("symbol", "label") and o.name in by_name:
                            todo.append(by_name[o.name])
                if ins.parts[0] != "tcgen05":
                    continue
                cg = _cta_group(ins)
                if cg is None:
                    continue
                if cg not in seen and seen:
                    first = next(iter(seen.values()))
                    out.append(ctx.finding("TA8", ins.line, ins.col,
                                           f"'.cta_group::{cg}' differs from '.cta_group::"
                                           f"{next(iter(seen))}' used earlier in kernel "
                                           f"'{fi.fn.name}'",
                                           notes=[Note(message="first use here",
                                                       line=first.line, col=first.col)]))
                seen.setdefault(cg, ins)
    return out


def tmem_no_relinquish(ctx: Context) -> list[Finding]:
    """Kernel allocates TMEM but never relinquishes the allocation permit (TA11, warning).

    What it checks:
        A function with ``tcgen05.alloc`` also executes ``tcgen05.relinquish_alloc_permit``.

    Why it is bad:
        Convention, not a hard rule: without it, other CTAs on the SM may wait for TMEM that
        this CTA will never allocate again; an unsatisfiable alloc blocks forever.

    Example:
        alloc / ... / dealloc without ``relinquish_alloc_permit``.

    Use instead:
        ``tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;`` after the last alloc.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.7.1 ("potentially blocking"); docs/ptx_rules.md TA11.
    """
    out: list[Finding] = []
    for fi in ctx.bodies():
        allocs = [ins for ins, _ in fi.instructions if is_tc(ins, "alloc")]
        if allocs and not any(is_tc(ins, "relinquish_alloc_permit") for ins, _ in fi.instructions):
            a = allocs[-1]
            out.append(ctx.finding("TA11", a.line, a.col,
                                   "tensor memory is allocated but the allocation permit is never "
                                   "relinquished",
                                   notes=[Note(message="other CTAs on this SM may block in "
                                               "'tcgen05.alloc' until this CTA exits")],
                                   severity="warning"))
    return out


# ====================================================================== TMEM lifecycle


class TmemLifecycle(Property):
    """Fact: (outstanding allocations (nCols or -1), relinquished, last nCols, cluster-synced)."""

    RULES = ("TA4", "TA5", "TA6", "TA7", "TA9")

    def initial(self):
        return ((), False, 0, False)

    def relevant(self, ins):
        return is_tc(ins, "alloc", "dealloc", "relinquish_alloc_permit") or (
            ins.parts[0] == "barrier" and len(ins.parts) > 2 and ins.parts[1] == "cluster"
            and ins.parts[2] in ("wait", "sync")) or bool(
            call_effects(self.fa, ins) & {"tmem_alloc", "tmem_dealloc"})

    def transfer(self, i, ins, fact, report):
        outs, rel, last, cs = fact
        if ins.parts[0] == "barrier":
            return (outs, rel, last, True)
        if ins.parts[0] == "call":
            # a callee that allocates and/or frees (a setup / teardown .func): an allocation
            # of unknown columns, or one outstanding allocation freed
            eff = call_effects(self.fa, ins)
            lst = list(outs)
            if "tmem_alloc" in eff and "tmem_dealloc" not in eff:
                lst.append(-1)
            elif "tmem_dealloc" in eff and "tmem_alloc" not in eff and lst:
                lst.pop(0)
            return (tuple(sorted(lst))[:4], rel, last, cs)
        op = ins.parts[1]
        n = self.values.const(ins.operands[-1], i) if ins.operands else None
        if op == "relinquish_alloc_permit":
            return (outs, True, last, cs)
        if op == "alloc":
            if rel:
                report("TA6", "'tcgen05.alloc' after 'tcgen05.relinquish_alloc_permit' in this CTA")
            if n is not None and last and n > last:
                report("TA7", f"tensor memory column count increases from {last} to {n} between "
                              "allocations of this CTA")
            if _cta_group(ins) == "2" and not cs:
                report("TA9", "'tcgen05.alloc.cta_group::2' is not preceded by a cluster barrier "
                              "that guarantees the peer CTA is running")
            outs = tuple(sorted(outs + (n if n is not None else -1,)))[:4]
            return (outs, rel, n if n is not None else last, cs)
        # dealloc
        if not outs:
            report("TA5", "'tcgen05.dealloc' frees TMEM that is not allocated on this path "
                          "(double free or no matching alloc)")
            return fact
        lst = list(outs)
        if n is not None and n in lst:
            lst.remove(n)
        elif -1 in lst:
            lst.remove(-1)
        else:
            report("TA5", f"'tcgen05.dealloc' of {n if n is not None else 'an unknown number of'} "
                          f"columns does not match the allocation of {lst[0]} columns")
            lst.pop(0)
        return (tuple(lst), rel, last, cs)

    def at_exit(self, i, fact, report):
        if fact[0]:
            cols = ", ".join(str(c) if c >= 0 else "?" for c in fact[0])
            report("TA4", f"tensor memory is not freed on this exit path ({cols} columns still "
                          "allocated)")

    def describe(self, i, ins, old, new):
        if ins.parts[0] == "barrier":
            return None
        if ins.parts[1] == "alloc":
            n = self.values.const(ins.operands[-1], i)
            return f"{n if n is not None else '?'} columns allocated here"
        return ins.parts[1] + " here"


class TmemLifecycleWarp(TmemLifecycle):
    """:class:`TmemLifecycle` along one warp's path, for the rules about the allocating warp
    (TA4: it frees before exit; TA5: it frees what it allocated): a guard on a warp-uniform
    condition (``@%p`` with ``%p`` a warp-index compare) is forked on like a CTA-uniform one, so
    an alloc by warp 1 and a later ``@!%p bra END; dealloc`` on the same condition correlate
    (``tcgen05.alloc``/``dealloc`` are warp-collective, ``.sync.aligned``: PTX ISA 9.1
    §9.7.16.7.1). The CTA-level rules (TA6 alloc after relinquish, TA7, TA9) keep the
    CTA's view, where another warp's alloc follows this one's relinquish."""

    FORK_CLASS = 1  # values.WARP


def tmem_leak_on_exit(ctx: Context) -> list[Finding]:
    """TMEM still allocated on some path to ``ret``/``exit`` (TA4).

    What it checks:
        On every path from a ``tcgen05.alloc`` to a kernel exit (early ``ret``/``exit``
        included) a matching ``tcgen05.dealloc`` executes. Path-sensitive: a dealloc under the
        same condition as the alloc is matched.

    Why it is bad:
        The columns stay owned after the CTA exits; later CTAs on the SM block in alloc.

    Example:
        ``tcgen05.alloc ... [%r1], 128;`` ... ``@%p1 ret;`` ... ``tcgen05.dealloc ... %r2, 128;``

    Use instead:
        free TMEM before every exit (branch to a common epilogue that deallocates).

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.1.2, §9.7.16.7.1; docs/ptx_rules.md TA4.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "alloc") or x.parts[0] == "call"):
        if fi.fn.kind != "entry":
            continue  # a .func's allocation is its caller's to free (a call counts as alloc)
        out += event_findings(ctx, fi, fa, TmemLifecycleWarp, "TA4",
                              "free it with 'tcgen05.dealloc' (same nCols) before this exit")
    return out


def tmem_dealloc_mismatch(ctx: Context) -> list[Finding]:
    """``tcgen05.dealloc`` without a matching allocation (TA5).

    What it checks:
        Each dealloc frees an allocation live on the path with the same ``nCols`` (no double
        free, no size mismatch), and its address comes from the shared-memory slot an alloc
        wrote.

    Why it is bad:
        Undefined behaviour; run-time guardrails ``col_being_dealloced_not_returned_by_alloc``,
        ``unallocated_columns_being_dealloced``.

    Example:
        alloc 128 columns, ``tcgen05.dealloc ... %r2, 64;``

    Use instead:
        ``tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 128;`` with ``%r2`` loaded from the
        alloc's slot.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.7.1; docs/ptx_rules.md TA5.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "dealloc")):
        out += event_findings(ctx, fi, fa, TmemLifecycleWarp, "TA5")
        cfg, v = fa.cfg, fa.values
        slots = {addr_val(fa, ins.operands[0], i) for i, ins in enumerate(cfg.instrs)
                 if is_tc(ins, "alloc") and ins.operands}
        slots.discard(None)
        for i, ins in enumerate(cfg.instrs):
            if not is_tc(ins, "dealloc") or not ins.operands or not slots:
                continue
            o = ins.operands[0]
            if o.kind != "reg":
                continue
            sites = v.def_sites.get(cfg.reg_key(o.name, i), [])
            if len(sites) != 1:
                continue
            d = cfg.instrs[sites[0]]
            if d.parts[0] == "ld" and "shared" in d.parts[1]:
                src = addr_val(fa, d.operands[1], sites[0])
                if src is not None and src not in slots:
                    out.append(ctx.finding(
                        "TA5", ins.line, ins.col,
                        f"'tcgen05.dealloc' address is loaded from '{fmt_addr(src)}', not from "
                        "the slot written by 'tcgen05.alloc'",
                        notes=[Note(message="address loaded here", line=d.line, col=d.col)]))
    return out


def tmem_alloc_after_relinquish(ctx: Context) -> list[Finding]:
    """``tcgen05.alloc`` after ``relinquish_alloc_permit`` (TA6).

    What it checks:
        No path executes an alloc after the CTA relinquished its allocation permit.

    Why it is bad:
        Illegal (UB); ptxas emits a run-time trap at alloc sites.

    Example:
        ``tcgen05.relinquish_alloc_permit...;`` then ``tcgen05.alloc...``

    Use instead:
        relinquish after the last allocation.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.7.1; docs/ptx_rules.md TA6.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "alloc")):
        out += event_findings(ctx, fi, fa, TmemLifecycle, "TA6")
    return out


def tmem_ncols_increase(ctx: Context) -> list[Finding]:
    """Column count grows between two allocations of the same CTA (TA7).

    What it checks:
        Along every path, each alloc's known nCols is at most the previous one's.

    Why it is bad:
        Undefined behaviour per the PTX ISA.

    Example:
        alloc 64 ... dealloc 64 ... alloc 128.

    Use instead:
        allocate the largest size first, or once.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.7.1; docs/ptx_rules.md TA7.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "alloc")):
        out += event_findings(ctx, fi, fa, TmemLifecycle, "TA7")
    return out


def tmem_pair_alloc_without_cluster_sync(ctx: Context) -> list[Finding]:
    """``cta_group::2`` allocation without a prior cluster barrier (TA9).

    What it checks:
        Every ``tcgen05.alloc.cta_group::2`` is preceded on all paths by ``barrier.cluster.wait``
        (or ``barrier.cluster.sync``).

    Why it is bad:
        The paired alloc blocks until the peer CTA's warp arrives; without knowing the peer is
        running it can hang or corrupt the allocation state (cutlass#3316, tilelang#2644).

    Example:
        ``tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r1], 128;`` at kernel start.

    Use instead:
        ``barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;`` first.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.5, §9.7.16.7.1; docs/ptx_rules.md TA9.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "alloc")):
        out += event_findings(ctx, fi, fa, TmemLifecycle, "TA9")
    return out


# ====================================================================== TA3 / TF4 (address slot)


class TmemSlot(Property):
    """Fact: frozenset of ``(slot, guarded)``: alloc slots whose TMEM address no barrier has
    published yet, and whether the alloc was predicated.

    ``tcgen05.alloc`` is a *synchronous* tcgen05 instruction whose shared-memory write of the
    address keeps same-address ordering with non-tcgen05 instructions (PTX ISA 9.1
    §9.7.16.6.1): a CTA barrier publishes it like any shared store (TA3), a ``bar.warp.sync``
    to the allocating warp when the alloc was not predicated, and no
    ``tcgen05.fence`` is needed around that barrier (the fences order *asynchronous* tcgen05
    operations, §9.7.16.6.3; TF4 states that guarantee)."""

    RULES = ("TA3",)

    def initial(self):
        return frozenset()

    def relevant(self, ins):
        return is_tc(ins, "alloc") or is_cta_barrier(ins) or _is_warp_barrier(ins) or (
            ins.parts[0] == "ld" and len(ins.parts) > 1 and ins.parts[1].startswith("shared"))

    def transfer(self, i, ins, fact, report):
        fa = self.fa
        if is_tc(ins, "alloc"):
            s = addr_val(fa, ins.operands[0], i) if ins.operands else None
            if s is None:
                return fact
            # guarded: '@%p alloc' - the path also stands for threads of warps that skip it
            return fact | {(s, ins.predicate is not None)}
        if not fact:
            return fact
        if is_cta_barrier(ins):
            return frozenset()
        if _is_warp_barrier(ins):
            # an unguarded alloc on this path was executed by this thread's warp: a
            # bar.warp.sync orders the slot's write before the warp's later reads (PTX ISA 9.1
            # §9.7.12.4 bar.warp.sync: memory ordering among the participating threads); a
            # guarded one may be another warp's
            return frozenset(x for x in fact if x[1])
        s = addr_val(fa, ins.operands[1], i) if len(ins.operands) > 1 else None
        if any(x[0] == s for x in fact):
            report("TA3", "the TMEM address written by 'tcgen05.alloc' is read before a "
                          "barrier makes it visible")
        return frozenset(x for x in fact if x[0] != s)

    def describe(self, i, ins, old, new):
        if is_tc(ins, "alloc"):
            return "TMEM address written here"
        if is_cta_barrier(ins):
            return "barrier"
        if _is_warp_barrier(ins):
            return "warp barrier"
        return None


def _is_warp_barrier(ins) -> bool:
    """``bar.warp.sync`` (a full-mask or any member mask: the allocating warp's lanes)."""
    return tuple(ins.parts[:3]) == ("bar", "warp", "sync")


def tmem_addr_unpublished(ctx: Context) -> list[Finding]:
    """TMEM base address read from shared memory without a barrier after the alloc (TA3).

    What it checks:
        ``tcgen05.alloc`` writes the TMEM address to shared memory with a weak store; a later
        ``ld.shared`` of that slot must follow a CTA barrier on every path.

    Why it is bad:
        Other warps read a stale or garbage address; dealloc then fails (cutlass#2835).

    Example:
        ``tcgen05.alloc ... [global_smem], 128;`` then ``ld.shared.b32 %r2, [global_smem];``

    Use instead:
        alloc; ``bar.sync 0``; ``ld.shared`` (the alloc is synchronous, so the barrier alone
        publishes the address: PTX ISA 9.1 §9.7.16.6.1; TF4).

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.6.1, §9.7.16.7.1; cutlass#2835; docs/ptx_rules.md TA3.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "alloc")):
        out += event_findings(ctx, fi, fa, TmemSlot, "TA3",
                              "insert 'bar.sync 0' between the alloc and the load")
    return out


def tc_alloc_fence_sandwich(ctx: Context) -> list[Finding]:
    """Guarantee modeled by the analysis, not a defect check: TMEM address publication (TF4).

    What it checks:
        Nothing by itself (it reports no finding). ``tcgen05.alloc`` is a synchronous tcgen05
        instruction, and the allocation instructions that access shared memory keep
        same-address ordering with non-tcgen05 instructions (PTX ISA 9.1 §9.7.16.6.1). Its
        write of the TMEM address is therefore ordered by a CTA barrier (or any release /
        acquire pair) like an ``st.shared``: alloc, ``bar.sync``, ``ld.shared`` of the address
        is correct without ``tcgen05.fence::before_thread_sync`` / ``after_thread_sync`` (those
        order the *asynchronous* tcgen05 operations, §9.7.16.6.3, §9.7.16.11.1: TF3, TF5).
        Before 2026-12 this row warned on that pattern (Triton's sm_100a code); the rule that
        enforces the consequence is TA3 (no barrier at all between the alloc and the load).

    Why it is bad:
        Not applicable: this row states a guarantee.

    Example:
        ``@%p1 tcgen05.alloc...shared::cta.b32 [global_smem], 256; bar.sync 0;
        ld.shared.b32 %r2, [global_smem];`` (Triton 3.6 / 3.9 sm_100a)

    Use instead:
        nothing to change.

    ptxas:
        not applicable.

    References:
        PTX ISA 9.1 §9.7.16.6.1, §9.7.16.6.3, §9.7.16.7.1; docs/verifier-fast.md.
    """
    return []


# ====================================================================== TL4/TL5/TF2/TA10/TF5/TF3


def _tmem_region(fa, ins, i):
    """``(root register, first column, end column)`` of a TMEM access relative to a base
    register (following ``add`` of constants), or None when unknown."""
    if is_tc(ins, "ld", "st"):
        shape, num = _shape_num(ins)
        width = num * _SHAPE_COLS[shape] if shape and num else None
        if shape == "16x32bx2" and width is not None:
            # the second 16-lane half starts at the immediate column offset (PTX ISA 9.1
            # §9.7.16.8.3 .16x32bx2): the access spans [0, offset + width) around its gap
            off = next((op.value for op in ins.operands
                        if op.kind == "imm" and isinstance(op.value, int)), None)
            width = None if off is None else max(width, off + width)
        o = _taddr_operand(ins)
    elif is_tc(ins, "mma") and len(ins.operands) > 3:
        d = _decode_idesc(fa.values.const(ins.operands[3], i))
        width = d["N"] if d else None
        o = ins.operands[0] if ins.operands[0].kind == "address" else None
    else:
        return None
    if o is None or o.base is None or o.base.kind != "reg" or width is None:
        return None
    v, cfg = fa.values, fa.cfg
    key, lo, hi = cfg.reg_key(o.base.name, i), o.value or 0, o.value or 0
    for _ in range(8):
        sites = v.def_sites.get(key, ())
        if len(sites) != 1:
            break
        j = sites[0]
        d = cfg.instrs[j]
        if d.parts[0] != "add" or len(d.operands) != 3:
            break
        # either operand may be the offset (addition commutes: Triton 3.9 writes both orders)
        step = None
        for b, o in ((d.operands[1], d.operands[2]), (d.operands[2], d.operands[1])):
            if b.kind != "reg":
                continue
            c = v.const(o, j)
            if c is not None:
                step = (b, c, c)
                break
        if step is None:
            for b, o in ((d.operands[1], d.operands[2]), (d.operands[2], d.operands[1])):
                # base + a register whose column bits (15:0) are partly known: an offset range
                y = v.op_val(o, j) if o.kind == "reg" and b.kind == "reg" else None
                if y is None or y[0] != "k":
                    continue
                known = y[1] & 0xFFFF
                ones = y[2] & known
                step = (b, ones, ones | (0xFFFF & ~known))
                break
        if step is None:
            break
        lo, hi = lo + step[1], hi + step[2]
        key = cfg.reg_key(step[0].name, j)
    if hi - lo > 0xFFFF:
        return None
    return (key, lo & 0xFFFF, (hi & 0xFFFF) + width)


_CROSSED = "@crossed"
"""Tag of a pending ``tcgen05.st`` region (or unread ``tcgen05.ld``) that a CTA barrier /
arrive has already published."""


def _ld_of(j) -> int:
    """The ``tcgen05.ld`` index of an entry of :class:`TmemAccess`'s unread set (``j`` or
    ``(_CROSSED, j)``)."""
    return j[1] if isinstance(j, tuple) else j


def _conflict(pending, region) -> bool:
    for r in pending:
        if r is not None and r[0] == _CROSSED:
            r = r[1]
        if r is None or region is None or r[0] != region[0]:
            return True
        if r[1] < region[2] and region[1] < r[2]:
            return True
    return False


class TmemAccess(Property):
    """Fact: (pending ld, pending st, mma state (0 none, 1 issued, 2 committed), commit barrier,
    TMEM accessed since the last CTA barrier, unfenced wait (0, 1 acquire, 2 relaxed),
    completed tcgen05 access not yet fenced before a signal, ``tcgen05.ld`` instructions whose
    destination registers this thread has not read yet).

    A ``tcgen05.ld`` whose registers were read is complete in this thread (true register
    dependency, PTX ISA 9.1 §9.7.16.8.5); one whose registers were not read is still in flight at
    a signal to other threads unless ``tcgen05.wait::ld`` ran (TL4). An mbarrier wait orders the
    TMEM accesses of the arriving threads (for TA10) when every arrive on that mbarrier follows
    ``tcgen05.fence::before_thread_sync`` (the hand-off of PTX ISA 9.1 §9.7.16.6.4.3)."""

    RULES = ("TL4", "TL5", "TF2", "TA10", "TF5", "TF3")
    CONFIRM = ("TF2", "TF5")

    def initial(self):
        return (frozenset(), frozenset(), 0, None, False, 0, False, frozenset())

    def __init__(self, cfg, values, fa=None):
        super().__init__(cfg, values, fa)
        instrs = cfg.instrs
        self._ld_regs: dict[int, frozenset] = {}
        for i, ins in enumerate(instrs):
            if is_tc(ins, "ld"):
                self._ld_regs[i] = frozenset(values.defs[i])
        all_ld = frozenset().union(*self._ld_regs.values()) if self._ld_regs else frozenset()
        self._reads_ld = [bool(all_ld) and ins.parts[0] != "tcgen05"
                          and not all_ld.isdisjoint(values.uses[i])
                          for i, ins in enumerate(instrs)]
        # mbarriers every arrive on which is preceded (same block) by fence::before_thread_sync
        fenced: dict = {}
        self._arrive_spans: list[tuple[tuple, bool]] = []   # ((sym, lo, hi), fenced)
        for blk in cfg.blocks:
            armed = False
            for i in range(blk.start, blk.end):
                ins = instrs[i]
                if is_tc(ins, "fence") and "before_thread_sync" in ins.opcode:
                    armed = True
                elif ins.parts[0] == "tcgen05":
                    armed = False
                elif ins.parts[0] == "mbarrier" and len(ins.parts) > 1 \
                        and ins.parts[1].startswith("arrive"):
                    v = addr_val(fa, mbar_operand(ins), i) if fa is not None else None
                    fenced[v] = fenced.get(v, True) and armed
                    span = _mbar_span(fa, ins, i, v)
                    self._arrive_spans.append((span, armed))
        self._fenced_mbars = {v for v, ok in fenced.items() if ok and v is not None}

    def relevant(self, ins):
        return ins.parts[0] == "tcgen05" or is_mbar_wait(ins) or is_cta_barrier(ins) \
            or is_arrive_signal(ins)

    def _fenced_span(self, span) -> bool | None:
        """A wait on an mbarrier somewhere in ``span`` (``(sym, lo, hi)``: a computed address,
        CUTLASS's ``tmem_empty + 8 * (i & 1)``) orders the arriving threads' TMEM accesses:
        some ``mbarrier.arrive`` may target the span and every one that may is fenced (an
        arrive whose address is unknown may target it: then None, undecided, when the arrives
        known to target it are all fenced)."""
        if span is None:
            return False
        hits = [(ok, sp is None) for sp, ok in self._arrive_spans
                if sp is None or (sp[0] == span[0] and sp[1] < span[2] + 8
                                  and span[1] < sp[2] + 8)]
        known = [ok for ok, unknown in hits if not unknown]
        if not known or not all(known):
            return False
        return None if any(unknown for _, unknown in hits) else True

    def at_exit(self, i, fact, report):
        if any(isinstance(j, tuple) for j in fact[7]):
            report("TL4", "the thread exits while a 'tcgen05.ld' whose registers it never read "
                          "is still in flight past a signal to other threads (no "
                          "'tcgen05.wait::ld')")

    def relevant_index(self, i):
        return self._reads_ld[i] or self.relevant(self.cfg.instrs[i])

    def transfer(self, i, ins, fact, report):
        pl, ps, mma, mbar, since, aw, needf, unc = fact
        p = ins.parts
        if unc and self._reads_ld[i]:
            uses = self.values.uses[i]
            unc = frozenset(j for j in unc if self._ld_regs[_ld_of(j)].isdisjoint(uses))
            if not self.relevant(ins):
                return (pl, ps, mma, mbar, since, aw, needf, unc)
        if p[0] == "tcgen05":
            op = p[1]
            if op in ("ld", "st", "mma", "cp", "shift") and aw:
                sev = "error" if aw == 2 else "warning"
                how = "a '.relaxed'" if aw == 2 else "a default-acquire"
                report("TF5", f"'tcgen05.{op}' follows {how} mbarrier wait without "
                              "'tcgen05.fence::after_thread_sync'", severity=sev)
                aw = 0
            reg = _tmem_region(self.fa, ins, i) if op in ("ld", "st", "mma") else None
            if op == "ld":
                if mma:
                    report("TF2", "'tcgen05.ld' reads TMEM while an issued 'tcgen05.mma' may "
                                  "still write it (no commit -> mbarrier wait in between)"
                           + _TF2_CROSSED[mma == 3], severity="note" if mma == 3 else None)
                if ps and _conflict(ps, reg):
                    report("TL5", "'tcgen05.ld' after 'tcgen05.st' without 'tcgen05.wait::st'")
                return ((pl | {reg}) if len(pl) < 8 else pl | {None}, ps, mma, mbar, True, aw,
                        needf, unc | {i})
            if op == "st":
                if pl and _conflict(pl, reg):
                    report("TL4", "'tcgen05.st' may overwrite TMEM still being read by an "
                                  "earlier 'tcgen05.ld' (no 'tcgen05.wait::ld')")
                if mma:
                    report("TF2", "'tcgen05.st' writes TMEM while an issued 'tcgen05.mma' may "
                                  "still access it" + _TF2_CROSSED[mma == 3],
                           severity="note" if mma == 3 else None)
                return (pl, (ps | {reg}) if len(ps) < 8 else ps | {None}, mma, mbar, True, aw,
                        needf, unc)
            if op in ("mma", "cp", "shift"):
                if pl and _conflict(pl, reg):
                    report("TL4", f"'tcgen05.{op}' may overwrite TMEM still being read by an "
                                  "earlier 'tcgen05.ld' (no 'tcgen05.wait::ld')")
                if ps and _conflict(ps, reg):
                    report("TL5", f"'tcgen05.{op}' after 'tcgen05.st' without "
                                  "'tcgen05.wait::st'")
                return (pl, ps, 1, None, True, aw, needf, unc)
            if op == "commit":
                if mma in (1, 3):
                    v = addr_val(self.fa, mbar_operand(ins), i)
                    return (pl, ps, 2, v, since, aw, needf, unc)
                return (pl, ps, mma, mbar, since, aw, needf, unc)
            if op.startswith("wait::ld"):
                return (frozenset(), ps, mma, mbar, since, aw, True, frozenset())
            if op.startswith("wait::st"):
                return (pl, frozenset(), mma, mbar, since, aw, True, unc)
            if op.startswith("fence"):
                if "before_thread_sync" in ins.opcode:
                    return (pl, ps, mma, mbar, since, aw, False, unc)
                return (pl, ps, mma, mbar, since, 0, needf, unc)
            if op == "dealloc":
                if pl:
                    report("TL4", "'tcgen05.dealloc' while a 'tcgen05.ld' is still reading "
                                  "(no 'tcgen05.wait::ld')")
                if mma:
                    report("TF2", "'tcgen05.dealloc' while an issued 'tcgen05.mma' may still "
                                  "write TMEM" + _TF2_CROSSED[mma == 3],
                           severity="note" if mma == 3 else None)
                if since == _SINCE_UNDECIDED:
                    report("TA10", "'tcgen05.dealloc' follows a wait on an mbarrier whose "
                                   "arrives known statically all follow "
                                   "'tcgen05.fence::before_thread_sync', but an arrive whose "
                                   "address is not known may target it: not decided statically",
                           severity="note")
                elif since:
                    report("TA10", "'tcgen05.dealloc' is not ordered after the TMEM accesses of "
                                   "the other warps by a barrier")
                return (pl, ps, mma, mbar, since, aw, needf, unc)
            return (pl, ps, mma, mbar, since, aw, needf, unc)
        if is_mbar_wait(ins):
            v = addr_val(self.fa, mbar_operand(ins), i)
            if mma in (2, 3):
                if mbar is None or v is None or v == mbar:
                    mma = 0
            if v is not None and v in self._fenced_mbars:
                since = False
            elif since:
                # a constant or computed wait address against the arrives' intervals (the
                # final phase's wait on tmem_empty[1] while the epilogue arrives on
                # tmem_empty + 8 * (i & 1))
                f = self._fenced_span(_mbar_span(self.fa, ins, i, v))
                since = False if f else (_SINCE_UNDECIDED if f is None else since)
            # an unfenced .relaxed wait stays unfenced past a later acquire wait (on any
            # mbarrier: the acquire orders what that phase's arrivals released, not what the
            # relaxed wait observed)
            return (pl, ps, mma, mbar, since, 2 if "relaxed" in p or aw == 2 else 1, needf, unc)
        if is_cta_barrier(ins) or is_arrive_signal(ins):
            # a pending ld at a barrier is not reported: Triton 3.9 syncs before its
            # 'wait::ld' once the registers are consumed; the TMEM write that would race is
            # checked where this thread issues it (st / mma / dealloc)
            # an ld still unread and unwaited at a signal is reported at the next signal (or
            # at exit, or at a TMEM write / dealloc of this thread): Triton 3.9 emits
            # 'tcgen05.ld; bar.sync; tcgen05.wait::ld' where the bar.sync guards shared
            # scratch, and a TMEM write by another thread after the first signal is checked
            # concretely by the emulator (its TMEM write-after-read check); an ld that this
            # thread never reads nor waits for (cutlass#3652) still reaches the next signal
            if any(isinstance(j, tuple) for j in unc):
                report("TL4", f"'{ins.opcode}' signals other threads while a 'tcgen05.ld' whose "
                              "registers this thread never read is still in flight (no "
                              "'tcgen05.wait::ld')")
            unc = frozenset((_CROSSED, _ld_of(j)) for j in unc)
            # a store pending at one signal is reported at the next one: Triton's epilogue
            # stores P, signals, stores O, then 'wait::st' (completing both) before the barrier
            # that hands TMEM to the MMA issuer; consumers in this thread are checked at their
            # ld / mma. A store still pending at a second signal reaches threads that are
            # ordered after no completion of it.
            if any(r is not None and r[0] == _CROSSED for r in ps) or (
                    ps and is_arrive_signal(ins) and not is_cta_barrier(ins)):
                report("TL5", f"'{ins.opcode}' signals other threads while a 'tcgen05.st' is "
                              "pending (no 'tcgen05.wait::st')")
            ps = frozenset(r if r is not None and r[0] == _CROSSED else (_CROSSED, r)
                           for r in ps)
            if is_arrive_signal(ins) and needf and p[0] == "mbarrier" and "expect_tx" not in p:
                sev = "error" if "relaxed" in p else "warning"
                report("TF3", f"'{ins.opcode}' hands TMEM results to other threads without "
                              "'tcgen05.fence::before_thread_sync'", severity=sev)
            if is_cta_barrier(ins):
                # committed MMAs: another thread may have waited on the commit's mbarrier before
                # this barrier (CUTLASS's MMA warp frees TMEM after the epilogue's wait and a
                # CTA barrier), which the per-thread path cannot see: a note, for emulation
                return (pl, ps, 3 if mma == 2 else mma, mbar, False, aw, needf, unc)
        return (pl, ps, mma, mbar, since, aw, needf, unc)

    def describe(self, i, ins, old, new):
        if old == new:
            return None
        return ins.opcode.split(".sync")[0]


#: TF2's message tail: (no barrier since the commit, a CTA barrier since the commit)
_TF2_CROSSED = ("", "; the MMAs were committed and a CTA barrier followed, so another thread's "
                    "wait on the commit may order this after their completion (not decided "
                    "statically)")

_HINTS = {
    "TL4": "insert 'tcgen05.wait::ld.sync.aligned;' after the 'tcgen05.ld'",
    "TL5": "insert 'tcgen05.wait::st.sync.aligned;' after the 'tcgen05.st'",
    "TF2": "commit the MMA to an mbarrier ('tcgen05.commit') and wait on it before touching TMEM",
    "TA10": "all warps: 'tcgen05.wait::ld', 'tcgen05.fence::before_thread_sync', 'bar.sync 0', "
            "then the dealloc warp: 'tcgen05.fence::after_thread_sync'",
    "TF5": "insert 'tcgen05.fence::after_thread_sync;' after the wait",
    "TF3": "insert 'tcgen05.fence::before_thread_sync;' before the signal",
}


def _access_rule(rule: str):
    def check(ctx: Context) -> list[Finding]:
        out: list[Finding] = []
        for fi, fa in each_function(ctx, lambda x: x.parts[0] == "tcgen05"):
            out += event_findings(ctx, fi, fa, TmemAccess, rule, _HINTS[rule])
        return out
    return check


def tmem_ld_without_wait(ctx: Context) -> list[Finding]:
    """Missing ``tcgen05.wait::ld`` after ``tcgen05.ld`` (TL4).

    What it checks:
        After a ``tcgen05.ld``, a ``tcgen05.wait::ld`` precedes (on every path) any
        ``tcgen05.st``/``mma``/``cp``/``shift`` of overlapping TMEM columns, the ``dealloc``,
        and the signals to other threads. Reading the destination registers in the same thread
        needs no wait (true register dependency); a load whose registers this thread never read
        (e.g. only half of the lanes consume the result) is a TL4 error at the second signal
        after it, or at the exit (one CTA barrier between the load and its ``wait::ld`` is
        Triton 3.9's order, cutlass#3652).

    Why it is bad:
        Write-after-read race on TMEM, or TMEM freed while still being read.

    Example:
        ``tcgen05.ld ... {%r1, ...}, [%r9];`` ``bar.sync 0;`` ``tcgen05.dealloc ...``

    Use instead:
        ``tcgen05.ld ...; tcgen05.wait::ld.sync.aligned;`` before the barrier.

    ptxas:
        no (``wait::ld`` lowers to a scoreboard wait).

    References:
        PTX ISA 9.1 §9.7.16.6.4.5, §9.7.16.8.5; cutlass#2525; docs/ptx_rules.md TL4.
    """
    return _access_rule("TL4")(ctx)


def tmem_st_without_wait(ctx: Context) -> list[Finding]:
    """Missing ``tcgen05.wait::st`` after ``tcgen05.st`` (TL5).

    What it checks:
        After a ``tcgen05.st``, ``tcgen05.wait::st`` precedes any ``tcgen05.ld``/``mma`` and any
        signal to other threads.

    Why it is bad:
        Read-after-write / write-after-write race on TMEM (an MMA accumulates into unwritten
        zeros).

    Example:
        ``tcgen05.st ... [%r9], {...};`` ``bar.sync 0;`` ``tcgen05.mma ...``

    Use instead:
        ``tcgen05.st ...; tcgen05.wait::st.sync.aligned;``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.8.5, §9.7.16.6.4.2; docs/ptx_rules.md TL5.
    """
    return _access_rule("TL5")(ctx)


def tmem_mma_read_race(ctx: Context) -> list[Finding]:
    """TMEM touched while an issued MMA is not known complete (TF2).

    What it checks:
        After ``tcgen05.mma``/``cp``/``shift``, a ``tcgen05.ld``/``st`` or ``dealloc`` of the
        same thread is preceded on every path by ``tcgen05.commit`` and a wait on an mbarrier
        (the commit's, when both addresses are known). Pipelined pairs (mma→mma, cp→mma) need
        nothing (TF1).

    Why it is bad:
        The MMA is asynchronous: the epilogue reads an unfinished accumulator.

    Example:
        ``tcgen05.mma ...; tcgen05.ld ...``

    Use instead:
        ``tcgen05.commit ... [bar]; mbarrier.try_wait ... [bar]; tcgen05.fence::after_thread_sync;
        tcgen05.ld ...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.6.4.2; docs/ptx_rules.md TF1, TF2.
    """
    return _access_rule("TF2")(ctx)


def tmem_dealloc_unordered(ctx: Context) -> list[Finding]:
    """``tcgen05.dealloc`` not ordered after the TMEM accesses by a barrier (TA10).

    What it checks:
        Between the last TMEM access (ld/st/mma/cp/shift) and a dealloc there is a CTA barrier on
        every path, or a wait on an mbarrier every arrive on which follows
        ``tcgen05.fence::before_thread_sync`` (the mbarrier hand-off of §9.7.16.6.4.3).

    Why it is bad:
        Another warp may still read the freed columns: "unspecified launch failure" (cutlass#3435,
        TLX #652/#1707).

    Example:
        ``tcgen05.ld ...; tcgen05.wait::ld...; @%p1 tcgen05.dealloc ...``

    Use instead:
        ``tcgen05.fence::before_thread_sync; bar.sync 0; tcgen05.fence::after_thread_sync;`` then
        dealloc.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.5; docs/ptx_rules.md TA10.
    """
    return _access_rule("TA10")(ctx)


def tc_wait_without_fence_after(ctx: Context) -> list[Finding]:
    """tcgen05 op after an mbarrier wait without ``tcgen05.fence::after_thread_sync`` (TF5).

    What it checks:
        A ``tcgen05.ld``/``st``/``mma``/``cp``/``shift`` that follows an mbarrier wait is preceded
        by ``tcgen05.fence::after_thread_sync``. Policy: a **warning** after a default-acquire
        wait (Triton 3.6-3.9 and CUTLASS examples rely on it), an **error** after a ``.relaxed``
        wait.

    Why it is bad:
        Per the PTX canonical patterns the tcgen05 op is not ordered after the wait; with a
        relaxed wait nothing orders it at all.

    Example:
        ``mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 %p, [bar], 0; ... tcgen05.ld``

    Use instead:
        ``... @!%p bra wait; tcgen05.fence::after_thread_sync; tcgen05.ld ...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.6.4; cutlass#2974; docs/ptx_rules.md TF5.
    """
    return _access_rule("TF5")(ctx)


def tc_fence_before_signal(ctx: Context) -> list[Finding]:
    """TMEM results handed to other threads without ``tcgen05.fence::before_thread_sync`` (TF3).

    What it checks:
        After ``tcgen05.wait::ld``/``wait::st``, an ``mbarrier.arrive`` that releases the data is
        preceded by ``tcgen05.fence::before_thread_sync``. Warning for a release arrive (the
        default), error for a ``.relaxed`` one.

    Why it is bad:
        The consumer may observe the arrive before the TMEM accesses are ordered.

    Example:
        ``tcgen05.wait::st.sync.aligned; mbarrier.arrive.relaxed.cta.shared::cta.b64 _, [bar];``

    Use instead:
        ``tcgen05.wait::st...; tcgen05.fence::before_thread_sync; mbarrier.arrive...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.6.3, §9.7.16.6.4.3-4; docs/ptx_rules.md TF3.
    """
    return _access_rule("TF3")(ctx)


# ====================================================================== TL1 / TL2 / TL3 / TM6


def tmem_access_divergent(ctx: Context) -> list[Finding]:
    """Warp-collective ``tcgen05.ld``/``st``/``wait`` in lane-divergent code (TL1).

    What it checks:
        Guard and enclosing branches of every ``tcgen05.ld``, ``st``, ``wait::ld``, ``wait::st``
        are warp-uniform.

    Why it is bad:
        ``.sync.aligned`` requires all 32 lanes, converged; otherwise undefined behaviour.

    Example:
        ``@%p_elect tcgen05.ld.sync.aligned.32x32b.x4.b32 {...}, [%r9];``

    Use instead:
        execute it unguarded (or under a warp-uniform guard) and select lanes afterwards.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.8.3-5; docs/ptx_rules.md TL1.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "ld", "st", "wait::ld", "wait::st")):
        v = fa.values
        for i, ins in enumerate(fa.cfg.instrs):
            if not is_tc(ins, "ld", "st", "wait::ld", "wait::st"):
                continue
            if v.context_class(i) == DIVERGENT or v.guard_single_lane(i):
                out.append(ctx.finding("TL1", ins.line, ins.col,
                                       f"warp-collective '{ins.opcode.split('.sync')[0]}' is "
                                       "executed by only part of a warp",
                                       notes=[Note(message="its guard or an enclosing branch "
                                                   "depends on the lane")]))
    return out


_SHAPE_COLS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}
_SHAPE_REGS = {"32x32b": 1, "16x64b": 1, "16x128b": 2, "16x256b": 4, "16x32bx2": 1}


def _shape_num(ins) -> tuple[str | None, int | None]:
    shape = num = None
    for p in ins.parts:
        if p in _SHAPE_COLS:
            shape = p
        m = re.fullmatch(r"x(\d+)", p)
        if m:
            num = int(m.group(1))
    return shape, num


def _taddr_operand(ins):
    for o in ins.operands:
        if o.kind == "address":
            return o
    return None


def _tmem_slots(fa) -> dict:
    cached = fa.cache.get("tmem_slots")
    if cached is not None:
        return cached
    slots = {}
    for i, ins in enumerate(fa.cfg.instrs):
        if is_tc(ins, "alloc") and ins.operands:
            s = addr_val(fa, ins.operands[0], i)
            if s is not None:
                slots[s] = 0
    fa.cache["tmem_slots"] = slots
    return slots


#: TmemAccess's "TMEM accessed since the last ordering point" when the ordering is a wait the
#: static rule cannot decide (:meth:`TmemAccess._fenced_span` None)
_SINCE_UNDECIDED = 2


def _mbar_span(fa, ins, i: int, v) -> tuple | None:
    """``(sym, lo, hi)``: the mbarrier operand of ``ins`` lies at ``sym + lo .. sym + hi``
    (``v``, its resolved value, when known; else the interval analysis); None when unknown."""
    if v is not None:
        return (v[1], v[2], v[2]) if v[0] == "s" else None
    if fa is None:
        return None
    return ranges_of(fa).address(mbar_operand(ins), i)


def _per_warp(fa, o, i) -> list[int | None] | None:
    """Concrete taddr for each warp of the CTA (lane 0), TMEM base = 0; None: threads unknown."""
    if fa.nwarps is None or o is None:
        return None
    slots = _tmem_slots(fa)
    out = []
    base = o.base
    for w in range(fa.nwarps):
        env = {"%tid.x": 32 * w, "%laneid": 0, "%warpid": w}
        if base is None:
            out.append(None)
            continue
        v = fa.values.concrete(base, i, env, slots)
        out.append(None if v is None else v + (o.value or 0))
    return out


def tmem_lane_quarter(ctx: Context) -> list[Finding]:
    """``tcgen05.ld``/``st`` outside the executing warp's TMEM lane quarter (TL2).

    What it checks:
        Warp ``w`` may only access TMEM lanes ``32*(w%4)`` .. ``32*(w%4)+31`` (taddr bits 31:16 are
        the lane). The address is evaluated concretely for every warp of the CTA (threads from
        ``.reqntid`` or the launch), with the TMEM base loaded from the alloc slot taken as 0.
        Undecidable addresses give a note.

    Why it is bad:
        Undefined behaviour / wrong data; run-time guardrail ``current_warp_owner_invalid``.

    Example:
        every warp loads ``[%r_tmem_base]`` (lane 0) with ``tcgen05.ld.sync.aligned.32x32b.x8``.

    Use instead:
        add ``(warp_id % 4) * 32 << 16`` to the address.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.8.1, §9.7.16.1.1; docs/ptx_rules.md TL2.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "ld", "st")):
        v = fa.values
        for i, ins in enumerate(fa.cfg.instrs):
            if not is_tc(ins, "ld", "st"):
                continue
            o = _taddr_operand(ins)
            vals = _per_warp(fa, o, i)
            if vals is None or any(x is None for x in vals):
                out.append(note_finding(ctx, "TL2", ins, "cannot determine the TMEM lane of this "
                                        "access for every warp statically"))
                continue
            if v.context_class(i) != UNIFORM:
                continue   # executed by a subset of warps: the subset is not known
            for w, a in enumerate(vals):
                lane = (a >> 16) & 0xFFFF
                q = w % 4
                if not 32 * q <= lane < 32 * q + 32:
                    out.append(ctx.finding(
                        "TL2", ins.line, ins.col,
                        f"warp {w} accesses TMEM lane {lane}, outside its lane quarter "
                        f"{32 * q}..{32 * q + 31}",
                        notes=[Note(message=f"address evaluated for warp {w}: {a:#010x} "
                                            "(lane = bits 31:16)")]))
                    break
    return out


def tmem_vector_length(ctx: Context) -> list[Finding]:
    """``tcgen05.ld``/``st`` register vector length does not match ``.shape`` × ``.num`` (TL3).

    What it checks:
        The number of registers equals ``num`` × (1 for 32x32b/16x64b/16x32bx2, 2 for 16x128b,
        4 for 16x256b); ``.16x32bx2`` has the immediate half-split offset operand.

    Why it is bad:
        Not assemblable.

    Example:
        ``tcgen05.ld.sync.aligned.32x32b.x4.b32 {%r1, %r2}, [%r9];``

    Use instead:
        ``{%r1, %r2, %r3, %r4}``

    ptxas:
        ERR.

    References:
        PTX ISA 9.1 §9.7.16.8.3-4 (Tables 49, 50); docs/ptx_rules.md TL3.
    """
    out: list[Finding] = []
    for fi in ctx.bodies():
        for ins, _ in fi.instructions:
            if not is_tc(ins, "ld", "st"):
                continue
            shape, num = _shape_num(ins)
            if shape is None or num is None:
                continue
            want = num * _SHAPE_REGS[shape]
            vec = next((o for o in ins.operands if o.kind == "vector"), None)
            if vec is None:
                continue
            if len(vec.elems) != want:
                out.append(ctx.finding("TL3", vec.line, vec.col,
                                       f"'{shape}.x{num}' needs {want} registers, the vector "
                                       f"has {len(vec.elems)}",
                                       notes=[Note(message="register count = .num x the shape's "
                                                   "registers per lane (PTX ISA Table 49)")]))
    return out


def tmem_out_of_bounds(ctx: Context) -> list[Finding]:
    """TMEM access outside the allocated columns (TM6).

    What it checks:
        When the kernel allocates a known column count and an access address is known (per
        warp), ``column + width`` stays within it: ``tcgen05.ld``/``st`` width = ``.num`` × the
        shape's columns; ``tcgen05.mma`` width = N of its constant instruction descriptor. In an
        ``.entry`` without calls, no TMEM access (ld/st/mma/cp/shift) lies on a path where no
        ``tcgen05.alloc`` executed (a warp-role branch around the alloc counts as allocating;
        CTA-uniform conditions are followed with the solver's correlated assumptions).

    Why it is bad:
        Undefined behaviour; run-time guardrails ``unallocated_columns_access``,
        ``access_out_of_physical_bounds``.

    Example:
        128 columns allocated, ``tcgen05.ld.sync.aligned.32x32b.x64.b32 {...}, [%r9+96];``

    Use instead:
        allocate enough columns or fix the column offset.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.1; docs/ptx_rules.md TM6.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "alloc")):
        sizes = {fa.values.const(ins.operands[-1], i) for i, ins in enumerate(fa.cfg.instrs)
                 if is_tc(ins, "alloc") and ins.operands}
        if len(sizes) != 1 or None in sizes:
            continue
        ncols = sizes.pop()
        for i, ins in enumerate(fa.cfg.instrs):
            width = None
            if is_tc(ins, "ld", "st"):
                shape, num = _shape_num(ins)
                if shape and num:
                    width = num * _SHAPE_COLS[shape]
                o = _taddr_operand(ins)
            elif is_tc(ins, "mma") and len(ins.operands) > 3:
                d = _decode_idesc(fa.values.const(ins.operands[3], i))
                width = d["N"] if d else None
                o = ins.operands[0] if ins.operands[0].kind == "address" else None
            else:
                continue
            vals = _per_warp(fa, o, i)
            if width is None or not vals or any(x is None for x in vals):
                continue
            for a in vals:
                col = a & 0xFFFF
                if col + width > ncols:
                    out.append(ctx.finding(
                        "TM6", ins.line, ins.col,
                        f"access to tensor memory columns {col}..{col + width - 1} exceeds the "
                        f"{ncols} allocated columns"))
                    break
    for fi, fa in each_function(ctx, lambda x: is_tc(x, *_TMEM_OPS)):
        if fi.fn.kind != "entry" or any(ins.parts[0] == "call" for ins in fa.cfg.instrs):
            continue       # a .func works on its caller's allocation; calls may allocate
        out += event_findings(ctx, fi, fa, TmemAllocated, "TM6",
                              "allocate with 'tcgen05.alloc' (and publish the address) on every "
                              "path that reaches the access")
    return out


_TMEM_OPS = ("ld", "st", "mma", "cp", "shift")


class TmemAllocated(Property):
    """Fact: a ``tcgen05.alloc`` executed in the CTA on this path (TM6, access with no
    allocation). A branch on a warp-dependent condition whose region contains an alloc counts
    as the alloc (another warp allocates there; the warps meet at the publishing barrier);
    branches on CTA-uniform conditions decide it, with the solver's correlated-branch
    assumptions (an alloc and the accesses under the same uniform predicate are consistent)."""

    RULES = ("TM6",)

    def __init__(self, cfg, values, fa=None):
        super().__init__(cfg, values, fa)
        alloc_blocks = {cfg.block_of[i] for i, ins in enumerate(cfg.instrs) if is_tc(ins, "alloc")}
        self._role = set()
        for b, c in values.branch_class.items():
            if c != UNIFORM and alloc_blocks & cfg.region(b):
                self._role.add(cfg.blocks[b].end - 1)

    def initial(self):
        return False

    def relevant_index(self, i):
        return i in self._role or is_tc(self.cfg.instrs[i], "alloc", *_TMEM_OPS)

    def transfer(self, i, ins, fact, report):
        if i in self._role or is_tc(ins, "alloc"):
            return True
        if not fact:
            report("TM6", f"'{ins.opcode.split('.sync')[0]}' accesses tensor memory on a path "
                          "where no 'tcgen05.alloc' executed")
        return fact

    def describe(self, i, ins, old, new):
        return None if old == new else "allocated here"


# ====================================================================== TM1/TM3/TM4/TM5/TM7/TC1


def mma_issued_by_warp(ctx: Context) -> list[Finding]:
    """``tcgen05.mma``/``cp``/``shift`` issued by every lane of a warp (TM1).

    What it checks:
        These single-thread instructions run under a single-lane guard (``elect.sync``,
        ``%laneid == c``, ``%tid.x == c``, ``(%tid.x & 31) == c``), directly, through an
        enclosing branch, or in a ``.func`` every call of which is made by one elected lane.

    Why it is bad:
        Executed by a whole warp they issue 32 independent MMAs: duplicated work and extra
        mbarrier arrivals through the commits.

    Example:
        ``tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r3, %p1;`` with no guard.

    Use instead:
        ``elect.sync %r0|%p9, -1; @%p9 tcgen05.mma...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.5, §9.7.16.10.9.1; docs/ptx_rules.md TM1.
    """
    out: list[Finding] = []
    single = called_single_lane(ctx)
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "mma", "cp", "shift")):
        v = fa.values
        if fi.fn.kind != "entry" and fi.fn.name in single:
            continue                  # every call runs in one elected lane
        for i, ins in enumerate(fa.cfg.instrs):
            if is_tc(ins, "mma", "cp", "shift") and not v.guard_single_lane(i):
                out.append(ctx.finding("TM1", ins.line, ins.col,
                                       f"single-thread 'tcgen05.{ins.parts[1]}' is issued by "
                                       "every lane of the warp",
                                       notes=[Note(message="32 lanes issue 32 independent "
                                                   "operations")],
                                       fix=None))
    return out


def commit_not_issuer(ctx: Context) -> list[Finding]:
    """``tcgen05.commit`` not issued by the single thread that issued the MMAs (TC1).

    What it checks:
        The commit runs under a single-lane guard like the MMAs it must track.

    Why it is bad:
        A commit tracks only the executing thread's MMAs: lanes that issued none arrive at
        once (the consumer reads an unfinished accumulator) and the mbarrier gets 32 arrivals.

    Example:
        ``@%p_elect tcgen05.mma ...;`` then an unguarded ``tcgen05.commit ... [bar];``

    Use instead:
        ``@%p_elect tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.12.1; docs/ptx_rules.md TC1.
    """
    out: list[Finding] = []
    single = called_single_lane(ctx)
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "commit")):
        v = fa.values
        if fi.fn.kind != "entry" and fi.fn.name in single:
            continue
        for i, ins in enumerate(fa.cfg.instrs):
            if is_tc(ins, "commit") and not v.guard_single_lane(i):
                out.append(ctx.finding("TC1", ins.line, ins.col,
                                       "'tcgen05.commit' is executed by every lane of the warp, "
                                       "not only by the thread that issued the MMAs",
                                       notes=[Note(message="lanes that issued no MMA arrive on "
                                                   "the mbarrier immediately")]))
    return out


def commit_missing(ctx: Context) -> list[Finding]:
    """MMA kernel waits on an mbarrier that nothing arrives on (TC2).

    What it checks:
        In a function issuing ``tcgen05.mma``, every mbarrier that is waited on (address known)
        has an arrival source: ``tcgen05.commit``, ``mbarrier.arrive*`` or a bulk copy with
        ``complete_tx``. Arrivals at unknown addresses make the rule undecidable (note).

    Why it is bad:
        Without the commit the waiter hangs.

    Example:
        ``tcgen05.mma ...;`` (commit deleted) ``mbarrier.try_wait.parity... [bar], 0;``

    Use instead:
        ``tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.12.1; docs/ptx_rules.md TC2.
    """
    from verifier.rules.mbarrier import arrival_sources

    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "mma")):
        srcs, unknown = arrival_sources(fa)
        for i, ins in enumerate(fa.cfg.instrs):
            if not is_mbar_wait(ins):
                continue
            b = addr_val(fa, mbar_operand(ins), i)
            if b is None or b in srcs:
                continue
            if unknown:
                out.append(note_finding(ctx, "TC2", ins, f"cannot match the arrivals of mbarrier "
                                        f"'{fmt_addr(b)}': some arrive at unknown addresses"))
                continue
            out.append(ctx.finding("TC2", ins.line, ins.col,
                                   f"wait on mbarrier '{fmt_addr(b)}' that no 'tcgen05.commit' or "
                                   "arrive ever signals: the waiter hangs",
                                   notes=[Note(message="commit the MMAs to this mbarrier with "
                                               "'tcgen05.commit'")]))
    return out


_KINDS_AB = {"f16": {0, 1}, "tf32": {2}, "f8f6f4": {0, 1, 2, 3, 4, 5}, "i8": {0, 1},
             "mxf8f6f4": {0, 1, 2, 3, 4, 5}, "mxf4": {1, 5}, "mxf4nvf4": {1, 5}}
_KINDS_D = {"f16": {0, 1}, "tf32": {1}, "f8f6f4": {0, 1}, "i8": {2}}
_KINDS_K = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32, "mxf8f6f4": 32, "mxf4": 64,
            "mxf4nvf4": 64}


def _decode_idesc(x: int | None) -> dict | None:
    """Fields of a tcgen05 instruction descriptor (PTX ISA 9.1 §9.7.16.4.2, Table 44)."""
    if x is None:
        return None
    return {"sparse_sel": x & 3, "sparse": (x >> 2) & 1, "sat": (x >> 3) & 1,
            "dfmt": (x >> 4) & 3, "rsv6": (x >> 6) & 1, "afmt": (x >> 7) & 7,
            "bfmt": (x >> 10) & 7, "nega": (x >> 13) & 1, "negb": (x >> 14) & 1,
            "ta": (x >> 15) & 1, "tb": (x >> 16) & 1, "N": ((x >> 17) & 0x3F) << 3,
            "rsv23": (x >> 23) & 1, "M": ((x >> 24) & 0x1F) << 4, "rsv29": (x >> 29) & 1,
            "shift": (x >> 30) & 3, "raw": x}


def _decode_idesc_block_scaled(x: int | None) -> dict | None:
    """Fields of the instruction descriptor of the block-scaled kinds (``.kind::mxf8f6f4``,
    ``.kind::mxf4``, ``.kind::mxf4nvf4`` with ``.block_scale``; PTX ISA 9.1 §9.7.16.4.2, the
    block-scaled table): bits 0-1 and 3, 6, 24-26, 31 reserved; 2 sparsity; 4-5 the B scale
    factor ID; 7-9 / 10-12 A / B type; 13-14 negate; 15-16 transpose; 17-22 N>>3; 23 the
    scale type (0 UE4M3, 1 UE8M0); 27-28 M>>7; 29-30 the A scale factor ID."""
    if x is None:
        return None
    return {"rsv": x & 0b11 | ((x >> 3) & 1) << 2 | ((x >> 6) & 1) << 3
            | ((x >> 24) & 7) << 4 | ((x >> 31) & 1) << 7,
            "sparse": (x >> 2) & 1, "bsf": (x >> 4) & 3, "afmt": (x >> 7) & 7,
            "bfmt": (x >> 10) & 7, "ta": (x >> 15) & 1, "tb": (x >> 16) & 1,
            "N": ((x >> 17) & 0x3F) << 3, "stype": (x >> 23) & 1, "M": ((x >> 27) & 3) << 7,
            "asf": (x >> 29) & 3, "raw": x}


def _scale_vec(ins, kind: str) -> int:
    """Scale factors per 32-bit TMEM word the MMA uses: 1 (``.scale_vec::1X`` / mxf8f6f4
    ``.block32``), 2 (``2X`` / mxf4* ``.block32``), 4 (``4X`` / ``.block16``)."""
    for p in ins.parts:
        if p.startswith("scale_vec::"):
            return int(p[len("scale_vec::"):-1] or 1)
    if "block16" in ins.parts:
        return 4
    return 1 if kind == "mxf8f6f4" else 2


def _block_scaled_problems(ins, kind: str, x: int) -> list[str]:
    """TM4 problems of a constant block-scaled instruction descriptor ``x``."""
    d = _decode_idesc_block_scaled(x)
    probs = []
    if d["rsv"]:
        probs.append("a reserved bit (0-1, 3, 6, 24-26 or 31) is set")
    if d["sparse"] != ("sp" in ins.parts):
        probs.append("sparsity flag (bit 2) does not match "
                     + ("'.sp'" if "sp" in ins.parts else "a dense MMA"))
    for f in ("afmt", "bfmt"):
        if kind in _KINDS_AB and d[f] not in _KINDS_AB[kind]:
            probs.append(f"{f[0].upper()} format code {d[f]} is invalid for 'kind::{kind}'")
    # UE4M3 scales exist only for mxf4nvf4 (NVFP4); mxf8f6f4 and mxf4 take UE8M0
    if d["stype"] == 0 and kind != "mxf4nvf4":
        probs.append(f"scale type UE4M3 (bit 23 = 0) is invalid for 'kind::{kind}' (UE8M0 only)")
    if kind.startswith("mxf4") and (d["ta"] or d["tb"]):
        probs.append(f"transpose bits 15-16 are set: 'kind::{kind}' takes K-major operands only")
    vec = _scale_vec(ins, kind)
    legal = {1: {0, 1, 2, 3}, 2: {0, 2}, 4: {0}}[vec if vec in (1, 2, 4) else 1]
    for f, who in (("asf", "A"), ("bsf", "B")):
        if d[f] not in legal:
            probs.append(f"{who} scale factor ID {d[f]} is invalid with {vec} scale factors "
                         f"per word (legal: {', '.join(map(str, sorted(legal)))})")
    return probs


def _kind(ins) -> str | None:
    for p in ins.parts:
        if p.startswith("kind::"):
            return p[6:]
    return None


def mma_shape_invalid(ctx: Context) -> list[Finding]:
    """``tcgen05.mma`` shape (M, N) not legal for its kind and cta_group (TM3).

    What it checks:
        Decoding a constant instruction descriptor (M>>4 in bits 24-28, N>>3 in bits 17-22):
        ``cta_group::1``: M ∈ {64, 128}, N = 8..256 in steps of 8 (16 for M = 128);
        ``cta_group::2``: M ∈ {128, 256}, N = 16..256 in steps of 16. A non-constant descriptor
        gives a note.

    Why it is bad:
        Undefined behaviour.

    Example:
        ``mov.b32 %r3, 0x08220490;`` (N = 136 with M = 128)

    Use instead:
        N a multiple of 16 for M = 128.

    ptxas:
        no (even an immediate descriptor is accepted).

    References:
        PTX ISA 9.1 §9.7.16.2.1 (Table 39), §9.7.16.4.2; docs/ptx_rules.md TM3.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "mma")):
        for i, ins in enumerate(fa.cfg.instrs):
            if not is_tc(ins, "mma") or len(ins.operands) < 4 or "ws" in ins.parts:
                continue
            d = _decode_idesc(fa.values.const(ins.operands[3], i))
            if d is None:
                out.append(note_finding(ctx, "TM3", ins, "the instruction descriptor is not a "
                                        "constant; shape not checked"))
                continue
            kind = _kind(ins) or ""
            if kind.startswith("mx"):
                continue
            m, n = d["M"], d["N"]
            if _cta_group(ins) == "2":
                ok = m in (128, 256) and 16 <= n <= 256 and n % 16 == 0
            else:
                ok = m in (64, 128) and 8 <= n <= 256 and n % (16 if m == 128 else 8) == 0
            if not ok:
                out.append(ctx.finding("TM3", ins.line, ins.col,
                                       f"shape M={m}, N={n} is not legal for 'kind::{kind}' "
                                       f"with 'cta_group::{_cta_group(ins) or '1'}'",
                                       notes=[Note(message=f"decoded from instruction descriptor "
                                                   f"{d['raw']:#010x}")]))
    return out


def mma_idesc_invalid(ctx: Context) -> list[Finding]:
    """Invalid field in a constant tcgen05 instruction descriptor (TM4).

    What it checks:
        Reserved bits 6, 23, 29 are 0; the D / A / B format codes are valid for the kind;
        the sparsity flag (bit 2) matches the use of ``.sp``; max-shift (bits 30-31) is 0
        without ``.ws``. Block-scaled kinds (``mxf8f6f4``, ``mxf4``, ``mxf4nvf4``) use their
        own layout: bit 23 is the scale type (UE8M0, or UE4M3 for mxf4nvf4 only), bits 4-5 and
        29-30 the B and A scale factor IDs (any of 0-3 with one scale per word, 0 or 2 with
        two, 0 with four), no transpose for mxf4*.

    Why it is bad:
        Undefined behaviour / wrong results; run-time guardrail
        ``sparse_mismatch_between_idesc_mod``.

    Example:
        bit 2 set on a dense ``tcgen05.mma.cta_group::1.kind::f16``.

    Use instead:
        clear the sparsity flag (or use ``tcgen05.mma.sp``).

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.4.2 (Table 44); docs/ptx_rules.md TM4.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "mma")):
        for i, ins in enumerate(fa.cfg.instrs):
            if not is_tc(ins, "mma") or len(ins.operands) < 4:
                continue
            d = _decode_idesc(fa.values.const(ins.operands[3], i))
            if d is None:
                continue
            kind = _kind(ins) or ""
            if kind.startswith("mx") or "block_scale" in ins.parts:
                for p in _block_scaled_problems(ins, kind, d["raw"]):
                    out.append(ctx.finding("TM4", ins.line, ins.col,
                                           f"instruction descriptor {d['raw']:#010x}: {p}",
                                           notes=[Note(message="layout: PTX ISA 9.1 §9.7.16.4.2, "
                                                       "block-scaled kinds")]))
                continue
            probs = []
            for bit in ("rsv6", "rsv23", "rsv29"):
                if d[bit]:
                    probs.append(f"reserved bit {bit[3:]} is set")
            if d["sparse"] != ("sp" in ins.parts):
                probs.append("sparsity flag (bit 2) does not match "
                             + ("'.sp'" if "sp" in ins.parts else "a dense MMA"))
            if kind in _KINDS_D and d["dfmt"] not in _KINDS_D[kind]:
                probs.append(f"D format code {d['dfmt']} is invalid for 'kind::{kind}'")
            if kind in _KINDS_AB:
                for f in ("afmt", "bfmt"):
                    if d[f] not in _KINDS_AB[kind]:
                        probs.append(f"{f[0].upper()} format code {d[f]} is invalid for "
                                     f"'kind::{kind}'")
            if d["shift"] and "ws" not in ins.parts:
                probs.append("max-shift bits 30-31 are set without '.ws'")
            for p in probs:
                out.append(ctx.finding("TM4", ins.line, ins.col,
                                       f"instruction descriptor {d['raw']:#010x}: {p}",
                                       notes=[Note(message="layout: PTX ISA 9.1 Table 44")]))
    return out


def mma_sdesc_invalid(ctx: Context) -> list[Finding]:
    """Invalid constant field in an sm_100 shared-memory matrix descriptor (TM5).

    What it checks:
        For the A/B descriptors of ``tcgen05.mma`` (64-bit registers whose high bits are known,
        e.g. ``mov.b64 %rd, {%lo, 0x40004040}``): bits 46-48 are the fixed ``0b001``; the
        swizzle mode (bits 61-63) is one of 0, 1, 2, 4, 6.

    Why it is bad:
        The tensor core reads garbage operands.

    Example:
        high word ``0x60004040`` (swizzle 3).

    Use instead:
        ``0x40004040`` (128-byte swizzle, SBO 1024 B, version bits 0b001).

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.4.1; docs/ptx_rules.md TM5.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "mma")):
        for i, ins in enumerate(fa.cfg.instrs):
            if not is_tc(ins, "mma") or len(ins.operands) < 3:
                continue
            for o in ins.operands[1:3]:
                if o.kind != "reg":
                    continue
                v = fa.values.op_val(o, i)
                if v is None or v[0] != "k":
                    continue
                mask, bits = v[1], v[2]
                fix46 = 0b111 << 46
                if mask & fix46 == fix46 and (bits >> 46) & 7 != 1:
                    out.append(ctx.finding("TM5", ins.line, ins.col,
                                           f"shared-memory descriptor '{o.text}' has bits 46-48 = "
                                           f"{(bits >> 46) & 7:#05b}, not the fixed 0b001"))
                sw = 0b111 << 61
                if mask & sw == sw and (bits >> 61) & 7 in (3, 5, 7):
                    out.append(ctx.finding("TM5", ins.line, ins.col,
                                           f"shared-memory descriptor '{o.text}' has invalid "
                                           f"swizzle mode {(bits >> 61) & 7} (bits 61-63)",
                                           notes=[Note(message="valid modes: 0 none, 1 128B with "
                                                       "32B atom, 2 128B, 4 64B, 6 32B")]))
    return out


def tc_operand_rules(ctx: Context) -> list[Finding]:
    """Small tcgen05 operand rules (TM7).

    What it checks:
        ``tcgen05.shift``: the TMEM lane of its address is a multiple of 32 (per warp, when
        known); ``tcgen05.cp``: ``.64x128b`` needs ``.warpx2::02_13``/``::01_23``, ``.32x128b``
        needs ``.warpx4``.

    Why it is bad:
        Undefined behaviour.

    Example:
        ``tcgen05.cp.cta_group::1.64x128b [%r1], %rd2;``

    Use instead:
        ``tcgen05.cp.cta_group::1.64x128b.warpx2::02_13 [%r1], %rd2;``

    ptxas:
        partially (syntax); shift lane alignment: no.

    References:
        PTX ISA 9.1 §9.7.16.9.2-3; docs/ptx_rules.md TM7.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_tc(x, "shift", "cp")):
        for i, ins in enumerate(fa.cfg.instrs):
            if is_tc(ins, "cp"):
                if "64x128b" in ins.parts and not any(p.startswith("warpx2") for p in ins.parts):
                    out.append(ctx.finding("TM7", ins.line, ins.col,
                                           "'tcgen05.cp' '.64x128b' needs a '.warpx2::' qualifier"))
                if "32x128b" in ins.parts and not any(p.startswith("warpx4") for p in ins.parts):
                    out.append(ctx.finding("TM7", ins.line, ins.col,
                                           "'tcgen05.cp' '.32x128b' needs '.warpx4'"))
            elif is_tc(ins, "shift"):
                vals = _per_warp(fa, _taddr_operand(ins), i)
                if not vals or any(x is None for x in vals):
                    out.append(note_finding(ctx, "TM7", ins, "cannot determine the TMEM lane of "
                                            "'tcgen05.shift' statically"))
                    continue
                bad = [(w, (a >> 16) & 0xFFFF) for w, a in enumerate(vals)
                       if ((a >> 16) & 0xFFFF) % 32]
                if bad:
                    w, lane = bad[0]
                    out.append(ctx.finding("TM7", ins.line, ins.col,
                                           f"'tcgen05.shift' TMEM lane {lane} is not aligned to 32"
                                           f" (warp {w})"))
    return out
