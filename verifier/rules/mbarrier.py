"""MB: mbarrier rules (object, lifecycle, init visibility, parity, arrival and tx accounting,
memory semantics, retry loops).

mbarriers are identified by their resolved shared-memory address (``global_smem+98304``, a
``.shared`` variable plus offset); operations at unresolved addresses make the affected checks
undecidable (a note) rather than silently passing. Sources: PTX ISA 9.1 §9.7.13.15 (mbarrier),
§9.7.13.4 (``fence.mbarrier_init``), §9.7.9.25.4 (bulk copies) and ``docs/ptx_rules.md`` §2. MB6
(phase run-ahead: a second arrive without a wait) lives in :mod:`verifier.rules.hazards`; its
second half (phase skew of one elected arriver for a warp group) is not checked.
"""

from __future__ import annotations

from verifier.analysis import UNIFORM, Property
from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.rules._flow import (
    ranges_of,
    local_def,
    eval_instr,
    unmodelled_guard,
    eval_concrete,
    induction,
    addr_val,
    call_effects,
    each_function,
    event_findings,
    fmt_addr,
    is_cta_barrier,
    is_mbar_wait,
    is_smem_read,
    is_tc,
    mbar_operand,
    wait_parity_operand,
    note_finding,
)

__all__ = [
    "arrival_sources",
    "mbar_arrival_count",
    "mbar_count_out_of_range",
    "mbar_init_not_visible",
    "mbar_lifecycle",
    "mbar_object_invalid",
    "mbar_parity",
    "mbar_relaxed_wait",
    "mbar_try_wait_no_retry",
    "mbar_tx_count",
]


def _is_mbar(ins) -> bool:
    return ins.parts[0] == "mbarrier"


def _uses_mbar(ins) -> bool:
    return _is_mbar(ins) or is_tc(ins, "commit") or (
        ins.parts[0] == "cp" and any(p.startswith("mbarrier::complete_tx") for p in ins.parts))


def arrival_sources(fa) -> tuple[set, bool]:
    """``(resolved mbarrier addresses that something arrives on, any arrival at an unknown
    address)``. Arrivals: ``mbarrier.arrive*``, ``tcgen05.commit``, bulk copies with
    ``complete_tx``, ``cp.async.mbarrier.arrive``."""
    srcs: set = set()
    unknown = False
    for i, ins in enumerate(fa.cfg.instrs):
        p = ins.parts
        is_src = (p[0] == "mbarrier" and len(p) > 1 and (p[1].startswith("arrive")
                                                         or p[1] == "complete_tx")) \
            or is_tc(ins, "commit") \
            or (p[0] == "cp" and any(x.startswith("mbarrier::complete_tx") for x in p)) \
            or (p[0] == "cp" and len(p) > 2 and p[1] == "async" and p[2] == "mbarrier")
        if not is_src:
            continue
        o = mbar_operand(ins)
        if p[0] == "cp" and len(p) > 2 and p[2] == "mbarrier":
            o = next((x for x in ins.operands if x.kind == "address"), None)
        v = addr_val(fa, o, i)
        if v is None:
            unknown = True
        else:
            srcs.add(v)
    return srcs, unknown


def mbar_object_invalid(ctx: Context) -> list[Finding]:
    """mbarrier object misaligned or operation in the wrong state space (MB1).

    What it checks:
        A resolved mbarrier address is 8-byte aligned (offset and the variable's ``.align``);
        ``init``/``inval``/``test_wait``/``try_wait`` use ``.shared::cta`` (or ``.shared``),
        never ``.shared::cluster``.

    Why it is bad:
        Undefined behaviour.

    Example:
        ``mbarrier.init.shared::cta.b64 [bars+4], 1;``

    Use instead:
        ``.shared .align 8 .b64 bars[2];`` and ``[bars+8]``.

    ptxas:
        misalignment: no.

    References:
        PTX ISA 9.1 §9.7.13.15.1, .8, .13; docs/ptx_rules.md MB1.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _uses_mbar):
        for i, ins in enumerate(fa.cfg.instrs):
            if not _uses_mbar(ins):
                continue
            v = addr_val(fa, mbar_operand(ins), i)
            if v is not None and v[0] == "s":
                var = ctx.module_vars.get(v[1]) or fa.cfg.scopes[i].lookup_var(v[1])
                if v[2] % 8:
                    out.append(ctx.finding("MB1", ins.line, ins.col,
                                           f"mbarrier at '{fmt_addr(v)}' is not 8-byte aligned"))
                elif var is not None and var.align is not None and var.align < 8:
                    out.append(ctx.finding("MB1", ins.line, ins.col,
                                           f"mbarrier variable '{v[1]}' is declared with "
                                           f"'.align {var.align}', it needs 8",
                                           notes=[Note(message="declared here", line=var.line,
                                                       col=var.col)]))
            p = ins.parts
            if _is_mbar(ins) and len(p) > 1 and p[1] in ("init", "inval", "try_wait",
                                                         "test_wait") \
                    and "shared::cluster" in p:
                out.append(ctx.finding("MB1", ins.line, ins.col,
                                       f"'mbarrier.{p[1]}' is only allowed on '.shared::cta'"))
    return out


def mbar_count_out_of_range(ctx: Context) -> list[Finding]:
    """mbarrier expected count or tx-count out of range (MB2).

    What it checks:
        ``mbarrier.init`` count ∈ [1, 2^20-1]; ``expect_tx`` / ``arrive.expect_tx`` /
        ``complete_tx`` tx-count ≤ 2^20-1, when the value is known.

    Why it is bad:
        Undefined behaviour (a zero count never completes a phase as intended).

    Example:
        ``mbarrier.init.shared::cta.b64 [bar], 0;``

    Use instead:
        the number of arrivals per phase, at least 1.

    ptxas:
        no (not even for immediates).

    References:
        PTX ISA 9.1 §9.7.13.15.2, .9; docs/ptx_rules.md MB2.
    """
    out: list[Finding] = []
    lim = (1 << 20) - 1
    for fi, fa in each_function(ctx, _is_mbar):
        for i, ins in enumerate(fa.cfg.instrs):
            p = ins.parts
            if not _is_mbar(ins) or len(p) < 2 or not ins.operands:
                continue
            if p[1] == "init":
                c = fa.values.const(ins.operands[-1], i)
                if c is not None and not 1 <= c <= lim:
                    out.append(ctx.finding("MB2", ins.line, ins.col,
                                           f"mbarrier init count {c} is outside [1, {lim}]"))
            elif "expect_tx" in p or p[1] in ("expect_tx", "complete_tx"):
                c = fa.values.const(ins.operands[-1], i)
                if c is not None and c > lim:
                    out.append(ctx.finding("MB2", ins.line, ins.col,
                                           f"mbarrier tx-count {c} exceeds {lim}"))
    return out


class MbarLifecycle(Property):
    """Fact: (frozenset of (bar, 'live'|'dead'), frozenset of bars with async arrivals pending)."""

    RULES = ("MB3",)
    CONFIRM = ("MB3",)
    #: an inval with an async arrival pending on the path stays an error even when other facts
    #: reach the inval, provided every branch on its witness is modelled by the solver's
    #: assumptions (guards correlated with branches are forked on, so such a path is feasible;
    #: issue 13's false alarm was a copy guarded by the complement of the branch that skips
    #: the wait). Witnesses through unmodelled branches stay notes: a register-register compare
    #: counts as modelled only where it is correlated with the other compares of its registers
    #: on the witness (dataflow._modelled_path).
    CONFIRM_EXEMPT = ("while an asynchronous arrival",)

    def initial(self):
        return (frozenset(), frozenset())

    def relevant(self, ins):
        return _uses_mbar(ins) or "mbar_init" in call_effects(self.fa, ins)

    def transfer(self, i, ins, fact, report):
        states, pend = fact
        st = dict(states)
        p = ins.parts
        if p[0] == "call":
            # the callee initializes mbarriers (their addresses passed in): like an init at
            # an unknown address
            st = {k: v for k, v in st.items() if v in ("live", "fresh")}
            st["*"] = "live"
            return (frozenset(st.items()), pend)
        b = addr_val(self.fa, mbar_operand(ins), i)
        if is_mbar_wait(ins):
            pend = frozenset() if b is None else frozenset(
                x for x in pend if x != b and x != ("?", b))
        if b is None:
            if p[0] == "mbarrier" and p[1] == "init":
                # an init at an unknown address may (re)initialize any barrier
                st = {k: v for k, v in st.items() if v in ("live", "fresh")}
                st["*"] = "live"
                return (frozenset(st.items()), pend)
            return (states, pend)
        cur = real = st.get(b)
        if cur is None and "*" in st:
            cur = "live"
        if p[0] == "mbarrier" and p[1] == "init":
            if real == "live":
                report("MB3", f"mbarrier '{fmt_addr(b)}' is initialized again while live "
                              "(no 'mbarrier.inval' in between)")
            elif real == "fresh":
                # Triton 3.6 initializes aliased barrier allocations of one shared offset in a
                # row: undefined by the PTX ISA (§9.7.13.15.9: init of a valid object), but no
                # operation observed the first initialization
                report("MB3", f"mbarrier '{fmt_addr(b)}' is initialized again, with no use since "
                              "its previous 'mbarrier.init' and no 'mbarrier.inval' in between",
                       severity="warning")
            st[b] = "fresh"
            return (frozenset(st.items()), pend - {b})
        if p[0] == "mbarrier" and p[1] == "inval":
            if cur not in ("live", "fresh"):
                report("MB3", f"'mbarrier.inval' of '{fmt_addr(b)}', which is not initialized")
            if b in pend:
                report("MB3", f"'mbarrier.inval' of '{fmt_addr(b)}' while an asynchronous "
                              "arrival (commit / complete_tx) may still target it")
            elif ("?", b) in pend:
                report("MB3", f"'mbarrier.inval' of '{fmt_addr(b)}' while an asynchronous "
                              "arrival issued under a data-dependent guard (a loop-carried "
                              "prefetch) may still target it", severity="note")
            st[b] = "dead"
            return (frozenset(st.items()), pend - {b, ("?", b)})
        if real == "fresh":
            st[b] = "live"
            states = frozenset(st.items())
        if cur not in ("live", "fresh"):
            what = "after 'mbarrier.inval'" if cur == "dead" else "before 'mbarrier.init'"
            report("MB3", f"'{ins.opcode.split('.shared')[0]}' uses mbarrier '{fmt_addr(b)}' "
                          f"{what}")
        if is_tc(ins, "commit") or p[0] == "cp":
            # a copy whose CTA-uniform guard the path solver cannot model (a register-register
            # compare such as Triton's `k + stages < n_k` prefetch guard) may be off in every
            # thread on this path: its arrival is only possibly pending
            pend = pend | {("?", b) if unmodelled_guard(self.fa, i) else b}
        return (states, pend)

    def describe(self, i, ins, old, new):
        return ins.opcode.split(".shared")[0]


def mbar_lifecycle(ctx: Context) -> list[Finding]:
    """mbarrier used before init, after inval, initialized twice, or invalidated in use (MB3).

    What it checks:
        Per resolved mbarrier, on every path: init before any other operation, no second init
        while live, no use after ``inval``, and no ``inval`` while a ``tcgen05.commit`` or a bulk
        copy's ``complete_tx`` may still arrive (no wait on it since).

    Why it is bad:
        Undefined behaviour; an inval racing an asynchronous arrive corrupts the barrier
        (triton#10409).

    Example:
        ``mbarrier.try_wait...[bar]`` with the ``mbarrier.init`` deleted.

    Use instead:
        ``mbarrier.init.shared::cta.b64 [bar], 1;`` then a barrier, then use.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.15, .3, .9, .10; triton#10409; docs/ptx_rules.md MB3.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _uses_mbar):
        handed = _handed_over_inits(fa)
        for f in event_findings(ctx, fi, fa, MbarLifecycle, "MB3"):
            site = handed.get((f.line, f.col)) if f.severity == "error" and \
                "before 'mbarrier.init'" in f.message else None
            if site is not None:
                f = ctx.finding("MB3", f.line, f.col, f.message + "; another partition "
                                "initializes it and a CTA barrier on this path may hand it "
                                "over (left to emulation)", severity="note",
                                notes=[Note(message="mbarrier.init in another partition",
                                            line=site.line, col=site.col)])
            out.append(f)
    return out


def _handed_over_inits(fa) -> dict[tuple[int, int], object]:
    """Uses of an mbarrier whose init sits on another thread's path but is ordered before the use
    by a CTA barrier: ``(line, col)`` of the use -> the init instruction.

    Warp-specialized code initializes barriers in one partition after the role branch and
    releases the others through a CTA-wide (often non-aligned) ``barrier.sync``; the path of a
    worker thread never contains the init. A use counts as handed over when some init of the
    same address reaches a CTA barrier from which the use is reachable (PTX ISA 9.1 §9.7.13.1:
    the barrier orders the initializing thread's prior memory operations for the participants).
    """
    cfg = fa.cfg
    inits: dict = {}
    bars: list[int] = []
    calls: list[int] = []  # calls of functions that initialize mbarriers (any address)
    for i, ins in enumerate(cfg.instrs):
        p = ins.parts
        if p[0] == "mbarrier" and len(p) > 1 and p[1] == "init":
            b = addr_val(fa, mbar_operand(ins), i)
            if b is not None:
                inits.setdefault(b, []).append(i)
        elif is_cta_barrier(ins):
            bars.append(i)
        elif "mbar_init" in call_effects(fa, ins):
            calls.append(i)
    if calls:
        for b in {addr_val(fa, mbar_operand(x), i) for i, x in enumerate(cfg.instrs)
                  if _uses_mbar(x)} - {None}:
            inits.setdefault(b, []).extend(calls)
    if not inits or not bars:
        return {}
    def bid(j: int):
        ops = cfg.instrs[j].operands
        if cfg.instrs[j].parts[0] not in ("bar", "barrier") or cfg.instrs[j].parts[1] == "cluster":
            return "cluster" if cfg.instrs[j].parts[1:2] == ["cluster"] else None
        if cfg.instrs[j].parts[1] == "red":
            ops = ops[1:]
        return fa.values.const(ops[0], j) if ops else None

    out: dict[tuple[int, int], object] = {}
    after_bar: dict[int, set[int]] = {}
    for j in bars:
        after_bar[j] = _reach_from(cfg, cfg.block_of[j])
    for i, ins in enumerate(cfg.instrs):
        if not _uses_mbar(ins) or (ins.parts[0] == "mbarrier" and ins.parts[1] == "init"):
            continue
        b = addr_val(fa, mbar_operand(ins), i)
        before = {bid(j) for j in bars if j != i and cfg.block_of[i] in after_bar[j]}
        if not before:
            continue
        for k in inits.get(b, ()):
            reach_k = _reach_from(cfg, cfg.block_of[k])
            # the init's thread reaches a barrier of an id this use's thread passed before it:
            # one barrier instance (the same instruction or a rendezvous of partitions)
            if any(cfg.block_of[j] in reach_k and bid(j) in before for j in bars):
                out[(ins.line, ins.col)] = cfg.instrs[k]
                break
    return out


def _reach_from(cfg, b: int) -> set[int]:
    """Blocks reachable from block ``b`` (``b`` included)."""
    seen, work = {b}, [b]
    while work:
        x = work.pop()
        for d in cfg.succ_ids(x):
            if d != cfg.exit_id and d not in seen:
                seen.add(d)
                work.append(d)
    return seen


def _cluster_use(ins) -> bool:
    p = ins.parts
    return "multicast::cluster" in p or (p[0] == "mbarrier" and "shared::cluster" in p
                                        and "cluster" in p)


class MbarInit(Property):
    """Fact: (bars initialized but not published by a CTA barrier (with init guard),
    bars not yet published to the cluster, fence.mbarrier_init seen since init)."""

    RULES = ("MB4",)
    CONFIRM = ("MB4",)

    def initial(self):
        return (frozenset(), frozenset(), False)

    def relevant(self, ins):
        return _uses_mbar(ins) or is_cta_barrier(ins) or ins.parts[0] == "fence"

    def transfer(self, i, ins, fact, report):
        cta, clu, fenced = fact
        p = ins.parts
        if p[0] == "fence":
            return (cta, clu, fenced or "mbarrier_init" in ins.opcode)
        if is_cta_barrier(ins):
            if p[0] == "barrier" and "cluster" in p and fenced:
                clu = frozenset()
            return (frozenset(), clu, fenced)
        b = addr_val(self.fa, mbar_operand(ins), i)
        if b is None:
            return fact
        if p[0] == "mbarrier" and p[1] == "init":
            g = ins.predicate
            return (cta | {(b, g)}, clu | {b}, False)
        single = self.values.guard_single_lane(i)
        for bb, g in cta:
            # a single-lane use may be the initializing thread itself
            if bb == b and ins.predicate != g and not single:
                report("MB4", f"mbarrier '{fmt_addr(b)}' is used by other threads before a "
                              "barrier makes its initialization visible")
                break
        if _cluster_use(ins) and b in clu:
            report("MB4", f"mbarrier '{fmt_addr(b)}' is used across the cluster before "
                          "'fence.mbarrier_init.release.cluster' and a cluster barrier")
        return fact

    def describe(self, i, ins, old, new):
        if ins.parts[0] == "mbarrier" and ins.parts[1] == "init":
            return "mbarrier initialized here"
        return None


def mbar_init_not_visible(ctx: Context) -> list[Finding]:
    """mbarrier used before its initialization is visible (MB4).

    What it checks:
        Between ``mbarrier.init`` (by one thread) and the first use by other threads (an
        instruction not under the init's guard) there is a CTA barrier on every path; uses
        across the cluster (multicast, remote arrive) also need ``fence.mbarrier_init.release.
        cluster`` followed by a cluster barrier.

    Why it is bad:
        Other threads (or CTAs) arrive on or wait for an uninitialized barrier: UB or hang.

    Example:
        ``@%p0 mbarrier.init.shared::cta.b64 [bar], 1;`` then immediately
        ``mbarrier.try_wait...[bar]`` by all threads.

    Use instead:
        ``@%p0 mbarrier.init ...; bar.sync 0;``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.4, §9.7.9.25.4.1; docs/ptx_rules.md MB4.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _uses_mbar):
        out += event_findings(ctx, fi, fa, MbarInit, "MB4",
                              "insert 'bar.sync 0;' after the initialization")
    return out


class MbarParity(Property):
    """Fact: frozenset of (bar, completed waits mod 2 or -1 unknown, last wait site)."""

    RULES = ("MB5",)

    def initial(self):
        return frozenset()

    def relevant(self, ins):
        return (_is_mbar(ins) and len(ins.parts) > 1 and (ins.parts[1] == "init"
                                                          or is_mbar_wait(ins))) \
            or is_cta_barrier(ins)

    def transfer(self, i, ins, fact, report):
        if is_cta_barrier(ins):
            # another thread may re-initialize a barrier while this one waits at the CTA
            # barrier (Triton 3.6's warp-specialized regions: the default warpgroup invalidates
            # and re-inits every mbarrier while the workers sit in 'barrier.sync 1'): a barrier
            # with several init sites has an unknown phase count after a CTA barrier, unless
            # this thread initialized it itself and has not waited on it since
            re = self._reinit_bars()
            if not re or not any(x[0] in re and (x[1], x[2]) != (0, -1) for x in fact):
                return fact
            return frozenset((k, -1, -1) if k in re and (n, last) != (0, -1) else (k, n, last)
                             for k, n, last in fact)
        b = addr_val(self.fa, mbar_operand(ins), i)
        st = {x[0]: (x[1], x[2]) for x in fact}
        if ins.parts[1] == "init":
            if b is None:
                return fact
            st[b] = (0, -1)
            return frozenset((k, v[0], v[1]) for k, v in st.items())
        if b is None:
            return frozenset((k, -1, -1) for k in st)
        if "parity" not in ins.parts:
            return fact
        po = wait_parity_operand(ins)
        par = self.values.const(po, i) if po is not None else None
        if par is None and po is not None and po.kind == "reg":
            # parity computed by single-definition register arithmetic (xor / sub / setp +
            # selp / not of constants): evaluated, so a flip in any written form is seen
            x = eval_concrete(self.fa, po, i, {}, {})
            par = None if x is None else x & 1
        n, last = st.get(b, (-1, -1))
        retry = last == i          # re-executed through its retry loop: same logical wait
        before = (n ^ 1) if retry and n >= 0 else n
        if par is not None and before >= 0 and par != before:
            what = ("passes at once: that phase already completed" if before == 0
                    else "waits for a phase that is not the current one")
            credit = before == 0 and b not in self._data_bars()
            # a barrier only tcgen05.commit completes may be a credit barrier too (the MMA
            # finished reading a buffer: "scale buffer free", CUTLASS's smem 'empty' fed by
            # umma_arrive); whether the first pass reads an unfinished MMA's TMEM results is
            # the emulator's question (HB1 on the TMEM read), not decided here
            committed = before == 0 and not credit and b in commit_only_barriers(self.fa)
            report("MB5", f"wait on mbarrier '{fmt_addr(b)}' with parity {par}, but {before} "
                          f"completed phase(s) were waited for on this path: it {what}"
                   + ("; nothing asynchronous completes this barrier (no bulk copy, expect_tx "
                      "or tcgen05.commit): a producer's first wait on an 'empty' slot passes "
                      "by design" if credit else "")
                   + ("; only tcgen05.commit completes this barrier: as a credit ('buffer "
                      "free') barrier its first wait passes by design, as a data barrier it "
                      "reads unfinished MMA results (not decided statically)"
                      if committed else ""),
                   severity="note" if credit or committed else None)
        if retry:
            return fact
        if par is None:
            st[b] = (-1, i)
        else:
            st[b] = ((par ^ 1) if n < 0 else (n ^ 1), i)
        return frozenset((k, v[0], v[1]) for k, v in st.items())

    def describe(self, i, ins, old, new):
        return ins.opcode.split(".shared")[0]

    def _reinit_bars(self) -> set:
        """Resolved mbarriers with more than one ``mbarrier.init`` site (cached)."""
        if getattr(self, "_reinit", None) is None:
            sites: dict = {}
            for i, ins in enumerate(self.fa.cfg.instrs):
                if _is_mbar(ins) and len(ins.parts) > 1 and ins.parts[1] == "init":
                    b = addr_val(self.fa, mbar_operand(ins), i)
                    if b is not None:
                        sites[b] = sites.get(b, 0) + 1
            self._reinit = {b for b, n in sites.items() if n > 1}
        return self._reinit

    def _data_bars(self) -> set:
        """:func:`data_barriers` of this function (cached)."""
        if getattr(self, "_data", None) is None:
            self._data = data_barriers(self.fa)
        return self._data


def data_barriers(fa) -> set:
    """mbarriers that asynchronous data completes (bulk copies with ``complete_tx``,
    ``expect_tx``, ``tcgen05.commit``, ``cp.async.mbarrier.arrive``): a first wait that
    passes at once on one of them reads data that has not landed. The others are credit
    ("empty") barriers whose arrivals are plain ``mbarrier.arrive``s of consumers: their
    initial phase is free (PTX ISA 9.1 §9.7.13.15.16: parity 1 on a fresh barrier succeeds
    at once, the idiom CUTLASS' ``PipelineTmaAsync`` producer start state relies on)."""
    cfg = fa.cfg
    data: set = set()
    for i, ins in enumerate(cfg.instrs):
        o = _data_arrival(ins, commits=True)
        if o is None:
            continue
        v = addr_val(fa, o, i)
        if v is not None:
            data.add(v)
    plain = set()
    every = set()
    for i, ins in enumerate(cfg.instrs):
        p = ins.parts
        if p[0] != "mbarrier":
            continue
        v = addr_val(fa, mbar_operand(ins), i)
        if v is None:
            continue
        every.add(v)
        if len(p) > 1 and p[1].startswith("arrive") and not any("expect_tx" in x for x in p):
            plain.add(v)
    # a barrier counts as a credit barrier only when plain arrivals on it are known and
    # no data arrival resolves to it (ring-indexed data arrivals at unresolved
    # addresses are taken to target their own "full" ring)
    return data | (every - plain)


def _data_arrival(ins, commits: bool):
    """The mbarrier operand of an asynchronous data arrival (a bulk / tensor copy's
    complete-tx, an ``expect_tx``, ``cp.async.mbarrier.arrive``; with ``commits`` also
    ``tcgen05.commit``), or None for any other instruction."""
    p = ins.parts
    if (commits and is_tc(ins, "commit")) or (p[0] == "cp" and any(
            x.startswith("mbarrier::complete_tx") for x in p)) or (
            p[0] == "mbarrier" and any("expect_tx" in x for x in p)):
        return mbar_operand(ins)
    if p[0] == "cp" and len(p) > 2 and p[1] == "async" and p[2] == "mbarrier":
        return next((x for x in ins.operands if x.kind == "address"), None)
    return None


def commit_only_barriers(fa) -> set:
    """Resolved mbarriers that ``tcgen05.commit`` targets and no bulk copy, expect_tx or
    ``cp.async.mbarrier.arrive`` does: an unresolved data arrival (a ring-indexed address)
    excludes the barriers in its address interval, and every barrier when that interval is
    unknown. Such a barrier is a data barrier (the accumulator is ready) or a credit barrier
    (the MMA finished reading a buffer); which one is not decided statically: MB5 leaves a
    first parity-1 wait on it to the emulator (a TMEM read of an unfinished MMA is HB1 there).
    Cached on the function's analysis."""
    got = fa.cache.get("commit_only_barriers")
    if got is None:
        got = fa.cache["commit_only_barriers"] = _commit_only(fa)
    return got


def _commit_only(fa) -> set:
    commits, other, spans = set(), set(), []
    for i, ins in enumerate(fa.cfg.instrs):
        if is_tc(ins, "commit"):
            v = addr_val(fa, mbar_operand(ins), i)
            if v is not None:
                commits.add(v)
            continue
        o = _data_arrival(ins, commits=False)
        if o is None:
            continue
        v = addr_val(fa, o, i)
        if v is not None:
            other.add(v)
            continue
        # a ring-indexed data arrival: the interval of addresses it may target
        span = ranges_of(fa).address(o, i) if o is not None else None
        if span is None:
            return set()
        spans.append(span)

    def hit(v) -> bool:
        return (isinstance(v, tuple) and len(v) == 3 and v[0] == "s"
                and any(sym == v[1] and lo <= v[2] + 7 and v[2] <= hi + 7
                        for sym, lo, hi in spans))
    return {v for v in commits - other if not hit(v)}


def credit_barriers(fa) -> set:
    """Resolved mbarriers known to be credit ("empty") barriers: plain ``mbarrier.arrive``s
    resolve to them and no data arrival does (:func:`data_barriers`)."""
    plain = set()
    for i, ins in enumerate(fa.cfg.instrs):
        p = ins.parts
        if p[0] == "mbarrier" and len(p) > 1 and p[1].startswith("arrive") \
                and not any("expect_tx" in x for x in p):
            v = addr_val(fa, mbar_operand(ins), i)
            if v is not None:
                plain.add(v)
    return plain - data_barriers(fa)


def mbar_parity(ctx: Context) -> list[Finding]:
    """mbarrier wait with the wrong phase parity (MB5).

    What it checks:
        For a resolved mbarrier, the k-th logical wait after its init (a retry loop counts once)
        uses the constant parity ``k % 2``. Register parities computed from a loop counter
        (``and.b32 %p, %k, 1``, ``(k / S) % 2`` of a ring of S slots): the wait's slot address and
        parity are evaluated for the first iterations, and consecutive visits of one mbarrier
        must alternate parity (a single-slot barrier waited with a ring parity, tilelang#3087).
        Parities not computable from one loop counter are not checked.

    Why it is bad:
        On a fresh barrier parity 1 passes at once (consumer reads unlanded data); a parity that
        was not flipped waits for the wrong phase (hang or race, flash-attention#1317).

    Example:
        first wait: ``mbarrier.try_wait.parity.shared::cta.b64 %p, [bar], 1;``

    Use instead:
        parity 0 for the first phase, flipping after each completed wait.

    ptxas:
        parity immediates outside {0, 1}: ERR; wrong-but-valid parity: no.

    References:
        PTX ISA 9.1 §9.7.13.15.4, .16; flash-attention#1317; docs/ptx_rules.md MB5.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, is_mbar_wait):
        out += event_findings(ctx, fi, fa, MbarParity, "MB5")
        loop = _loop_parity(ctx, fa)
        done = {(f.line, f.col) for f in loop}
        out += loop + [f for f in _loop_phase(ctx, fa) if (f.line, f.col) not in done]
    return out


def _scc(cfg, b: int) -> set[int]:
    """The blocks on a cycle through block ``b`` (its strongly connected component)."""
    fwd = _reach_from(cfg, b)
    back, work = {b}, [b]
    preds: dict[int, list[int]] = {}
    for x in range(len(cfg.blocks)):
        for d in cfg.succ_ids(x):
            preds.setdefault(d, []).append(x)
    while work:
        x = work.pop()
        for p in preds.get(x, ()):
            if p not in back:
                back.add(p)
                work.append(p)
    return fwd & back


def _loop_phase(ctx: Context, fa) -> list[Finding]:
    """MB5 for parities carried in registers through a loop (``phase ^= 1``, ``phase ^= (idx ==
    S - 1)`` through ``setp`` / ``selp``, ``not``), in any written form: the loop-carried
    registers the wait's slot address and parity depend on are executed concretely for the
    first iterations (each from its one definition before the loop, updated by its one
    unguarded definition inside it), giving the sequence of (mbarrier, parity) this wait visits.

    Reported: two consecutive visits of one mbarrier with the same parity (the second passes on
    the phase the first consumed), and a first visit with parity 1 of a barrier asynchronous
    data completes, when nothing waits on it before the loop (PTX ISA 9.1 §9.7.13.15.16: parity
    1 on a fresh barrier succeeds at once, so the consumer reads data that has not landed).
    A wait that does not run once per iteration, a register not evaluable (a load, a
    parameter) or an update under a guard: not checked."""
    out: list[Finding] = []
    cfg, v = fa.cfg, fa.values
    for i, ins in enumerate(cfg.instrs):
        if not is_mbar_wait(ins) or "parity" not in ins.parts or not ins.operands:
            continue
        b = cfg.block_of[i]
        if b not in cfg.in_cycle:
            continue
        par_o, bar_o = wait_parity_operand(ins), mbar_operand(ins)
        if par_o is None or par_o.kind != "reg" or bar_o is None:
            continue
        deps = _counters(fa, par_o, i) | _counters(fa, bar_o, i)
        if not deps or len(deps) > 6:
            continue
        loop = _scc(cfg, b)
        init: dict = {}
        update: dict = {}
        before: dict = {}
        ok = True
        for k in deps:
            sites = v.def_sites.get(k, ())
            ins_in = [j for j in sites if cfg.block_of[j] in loop]
            ins_out = [j for j in sites if cfg.block_of[j] not in loop]
            guarded = any(cfg.instrs[j].predicate is not None for j in ins_in)
            if not ins_in or not ins_out or (
                    (len(ins_in) > 1 or guarded) and not _update_block(fa, ins_in)):
                ok = False     # updates spread over several blocks, or guards not local
                break
            u = ins_in[-1]
            ub = cfg.block_of[u]
            if ub == b and ins_in[0] < i < u:
                ok = False     # the wait sits between the updates of its block
                break
            if cfg.dominates(ub, b) and (ub != b or u < i):
                before[k] = True       # updated before the wait in each iteration
            elif cfg.dominates(b, ub) and (ub != b or u > i):
                before[k] = False
            else:
                ok = False
                break
            # the value entering the loop: the definition outside it that reaches the loop
            entry = [j for j in v.reaching(k, ins_in[0]) if cfg.block_of[j] not in loop] \
                or ins_out
            if len(entry) != 1:
                ok = False
                break
            init[k], update[k] = entry[0], tuple(ins_in)
        if not ok:
            continue
        syms: dict = {}
        env = {}
        for k, j in init.items():
            x = eval_instr(fa, j, {}, syms, entry=True, local=True)
            if x is None:
                ok = False
                break
            env[k] = x
        if not ok:
            continue
        seq = []

        def step(env: dict, first: bool) -> dict | None:
            """Loop-carried values after the updates of one iteration (``first``: only the
            updates that precede the wait, for the values the wait sees)."""
            nxt = dict(env)
            blocks: dict = {}
            for k, js in update.items():
                if first and not before[k]:
                    continue
                blocks.setdefault(cfg.block_of[js[0]], []).extend((j, k) for j in js)
            # the update blocks in program order, each from the values the earlier ones left
            for seq_ in sorted(blocks.values(), key=min):
                got = _run_updates(fa, sorted(seq_), nxt, syms)
                if got is None:
                    return None
                nxt.update(got)
            return nxt

        for _t in range(_LOOP_TRIPS):
            seen = step(env, True)          # values at the wait in this iteration
            if seen is None:
                break
            a = eval_concrete(fa, bar_o, i, seen, syms, local=True)
            par = eval_concrete(fa, par_o, i, seen, syms, local=True)
            if a is None or par is None:
                break
            seq.append((a, par & 1, seen))
            nxt = step(env, False)
            if nxt is None:
                break
            env = nxt
        if len(seq) < 2:
            continue
        consumer = _wait_role(fa, i) == "consumer"
        credits = credit_barriers(fa)
        commit_only = commit_only_barriers(fa)
        last: dict = {}
        for t, (a, par, _e) in enumerate(seq):
            # a credit ("empty") barrier's free initial phase is the producer's start state
            # even when an MMA follows the wait (an accumulator-empty barrier of a persistent
            # tcgen05 kernel: the MMA warp produces into TMEM)
            credit = _as_addr(a, syms) in credits
            if a not in last and par == 1 and consumer and not credit \
                    and not _waited_before(fa, loop, b, _as_addr(a, syms)):
                committed = _as_addr(a, syms) in commit_only
                out.append(ctx.finding(
                    "MB5", ins.line, ins.col,
                    f"the first wait on this mbarrier (loop iteration {t}) uses parity 1: on a "
                    "fresh barrier it passes at once, before the asynchronous data it waits "
                    "for has landed" + ("; only tcgen05.commit completes this barrier: as a "
                                        "credit ('buffer free') barrier its first wait passes "
                                        "by design (not decided statically)"
                                        if committed else ""),
                    severity="note" if committed else None,
                    notes=[Note(message="parity evaluated from the loop-carried registers "
                                        f"{', '.join(sorted(k.split('#')[0] for k in deps))}")]))
                break
            if a in last and last[a] == par:
                out.append(ctx.finding(
                    "MB5", ins.line, ins.col,
                    f"two consecutive waits on the same mbarrier (loop iterations up to {t}) "
                    f"use parity {par}: the second passes on the phase the first consumed",
                    notes=[Note(message="parity evaluated from the loop-carried registers "
                                        f"{', '.join(sorted(k.split('#')[0] for k in deps))}")]))
                break
            last[a] = par
    return out


def _update_block(fa, js: list[int]) -> bool:
    """Several in-loop definitions of one loop-carried register can be executed as one update
    when they all lie in one basic block and each guard is a predicate set earlier in that
    block (``add %s, %s, 1; setp.eq %p, %s, S; @%p mov %s, 0; @%p xor %ph, %ph, 1``: the ring
    slot and phase updates of hand-written pipelines)."""
    cfg = fa.cfg
    b = cfg.block_of[js[0]]
    if any(cfg.block_of[j] != b for j in js):
        return False
    for j in js:
        g = cfg.instrs[j].predicate
        if g is not None and local_def(fa, cfg.reg_key(g, j), j) is None:
            return False
    return True


def _run_updates(fa, seq: list[tuple[int, str]], env: dict, syms: dict) -> dict | None:
    """Execute the block of the definitions ``seq`` ((instruction, register) of loop-carried
    registers, one block: :func:`_update_block`) from the values ``env`` holds at the block's
    entry: every instruction from the block's start through the last of them, in program
    order, each reading the values of its own moment - the loop-carried ones the earlier
    updates wrote and the temporaries (compares, selects) the block computed before
    (``setp.eq %p, %s, 2; selp %t, 1, 0, %p; xor %ph, %ph, %t; add %s, %s, 1; selp %s, 0, %s,
    %p``: the compare reads the slot before its increment). A guarded instruction applies when
    its guard holds. Returns the registers' values after the block, or None when one of them
    cannot be evaluated."""
    cfg = fa.cfg
    v = fa.values
    local = dict(env)
    regs = {k for _, k in seq}
    b = cfg.block_of[seq[0][0]]
    last = max(j for j, _ in seq)
    for j in range(cfg.blocks[b].start, last + 1):
        keys = v.defs[j]
        if not keys:
            continue
        ins = cfg.instrs[j]
        if len(keys) != 1:
            for k in keys:
                local[k] = None   # several results (elect.sync %r|%p, a vector): not modelled
            continue
        if ins.predicate is not None:
            gk = cfg.reg_key(ins.predicate, j)
            if gk in local:
                g = local[gk]
            else:
                d = local_def(fa, gk, j)
                g = None if d is None else eval_instr(fa, d, local, syms, local=True)
            if g is None:
                local[keys[0]] = None
                continue
            if bool(g) == bool(ins.negated):
                continue
            x = eval_instr(fa, j, local, syms, guarded=True, local=True)
        else:
            x = eval_instr(fa, j, local, syms, local=True)
        local[keys[0]] = x
    if any(local.get(k) is None for k in regs):
        return None
    return {k: local[k] for k in regs}


def _as_addr(a: int, syms: dict):
    """:func:`eval_concrete`'s fake address back to ``("s", symbol, offset)`` (else None)."""
    for name, base in syms.items():
        if base <= a < base + (1 << 32):
            return ("s", name, a - base)
    return None


def _wait_role(fa, i: int) -> str | None:
    """``consumer`` when what follows wait ``i`` (in program order, up to the next mbarrier
    operation) first reads shared memory or runs an MMA; ``producer`` when it first issues a
    bulk copy or ``expect_tx``; else None."""
    instrs = fa.cfg.instrs
    for j in range(i + 1, min(len(instrs), i + 400)):
        x = instrs[j]
        p = x.parts
        if p[0] == "cp" and len(p) > 2 and p[2].startswith("bulk"):
            return "producer"
        if p[0] == "mbarrier":
            return "producer" if any("expect_tx" in t for t in p) else (
                None if not is_mbar_wait(x) or j > i + 2 else None)
        if (p[0] == "wgmma" and p[1] == "mma_async") or is_tc(x, "mma", "cp", "ld") \
                or is_smem_read(x):
            return "consumer"
    return None


def _waited_before(fa, loop: set, b: int, addr) -> bool:
    """A wait on mbarrier ``addr`` (or at an unresolved address, or ``addr`` unknown) runs
    outside ``loop`` on a path into block ``b``: the loop's first visit may not be the
    barrier's first phase."""
    cfg = fa.cfg
    for i, ins in enumerate(cfg.instrs):
        if is_mbar_wait(ins) and cfg.block_of[i] not in loop \
                and b in _reach_from(cfg, cfg.block_of[i]):
            w = addr_val(fa, mbar_operand(ins), i)
            if addr is None or w is None or w == addr:
                return True
    return False


def _data_barrier_addrs(fa) -> tuple[set, bool]:
    """(concrete addresses of mbarriers that bulk copies / expect_tx / tcgen05.commit
    complete, evaluated without loop state; whether some such arrival is not evaluable). Bases
    of symbols follow :func:`eval_concrete`'s numbering, so only compare within one call."""
    out: set = set()
    unknown = False
    for i, ins in enumerate(fa.cfg.instrs):
        p = ins.parts
        if is_tc(ins, "commit") or (p[0] == "cp" and any(
                x.startswith("mbarrier::complete_tx") for x in p)) or (
                p[0] == "mbarrier" and any("expect_tx" in x for x in p)):
            a = addr_val(fa, mbar_operand(ins), i)
            if a is None:
                unknown = True
            else:
                out.add(a)
    return out, unknown


def _waits_outside(fa, loop: set) -> set:
    """Resolved mbarrier addresses waited on outside the blocks ``loop``."""
    out = set()
    for i, ins in enumerate(fa.cfg.instrs):
        if is_mbar_wait(ins) and fa.cfg.block_of[i] not in loop:
            a = addr_val(fa, mbar_operand(ins), i)
            if a is not None:
                out.add(a)
    return out


_LOOP_TRIPS = 8


def _counters(fa, o, i, depth=0, acc=None):
    """Multi-definition registers the operand's value depends on (through single-def chains)."""
    acc = set() if acc is None else acc
    if o is None or depth > 32:
        return acc
    if o.kind == "address":
        return _counters(fa, o.base, i, depth + 1, acc)
    if o.kind != "reg" or not o.name:
        return acc
    cfg, v = fa.cfg, fa.values
    key = cfg.reg_key(o.name, i)
    sites = v.def_sites.get(key, ())
    if len(sites) != 1:
        j = local_def(fa, key, i)   # a reused temporary defined earlier in this block
        if j is None:
            acc.add(key)
            return acc
        for x in cfg.instrs[j].operands[1:]:
            _counters(fa, x, j, depth + 1, acc)
        return acc
    j = sites[0]
    for x in cfg.instrs[j].operands[1:]:
        _counters(fa, x, j, depth + 1, acc)
    return acc


def _loop_parity(ctx: Context, fa) -> list[Finding]:
    """MB5 for register parities indexed by a loop counter (ring pipelines, single-slot
    barriers): a wait executed once per iteration (its block dominates the counter's increment)
    must flip its parity between consecutive visits of the same mbarrier (each visit consumes
    one phase, PTX ISA 9.1 §9.7.13.15.16). Both the slot address and the parity are evaluated
    for the first iterations; anything not evaluable is not checked."""
    out: list[Finding] = []
    cfg = fa.cfg
    for i, ins in enumerate(cfg.instrs):
        if not is_mbar_wait(ins) or "parity" not in ins.parts or not ins.operands:
            continue
        if cfg.block_of[i] not in cfg.in_cycle:
            continue
        par_o, bar_o = wait_parity_operand(ins), mbar_operand(ins)
        if par_o is None or par_o.kind != "reg" or bar_o is None:
            continue
        deps = _counters(fa, par_o, i) | _counters(fa, bar_o, i)
        if len(deps) != 1:
            continue
        key = next(iter(deps))
        ind = induction(fa, key)
        if ind is None:
            continue
        init, step, inc = ind
        if step == 0 or not cfg.dominates(cfg.block_of[i], cfg.block_of[inc]) \
                or cfg.block_of[inc] == cfg.block_of[i]:
            continue
        syms: dict = {}
        last: dict = {}
        for t in range(_LOOP_TRIPS):
            k = init + step * t
            env = {key: k}
            a = eval_concrete(fa, bar_o, i, env, syms)
            par = eval_concrete(fa, par_o, i, env, syms)
            if a is None or par is None:
                break
            par &= 1
            if a in last and last[a][1] == par:
                kp = last[a][0]
                out.append(ctx.finding(
                    "MB5", ins.line, ins.col,
                    f"wait with parity {par} on the same mbarrier in iterations "
                    f"{key.split('#')[0]} = {kp} and {k}: consecutive waits must alternate "
                    "parity (the second passes on the phase the first already consumed)",
                    notes=[Note(message=f"the parity is computed from loop counter "
                                        f"'{key.split('#')[0]}' (incremented here)",
                                line=cfg.instrs[inc].line, col=cfg.instrs[inc].col),
                           Note(message="MB5: a single-slot barrier completing once per "
                                        "iteration needs parity k % 2; a ring of S slots "
                                        "(k / S) % 2")]))
                break
            last[a] = (k, par)
    return out


def _issuers(fa, i) -> int | None:
    """Threads executing instruction ``i`` once: 1 for a single-lane guard in a warp-restricted
    context, the warp count for a per-warp single lane in uniform code, the CTA size for
    unguarded uniform code; None when unknown."""
    v = fa.values
    single = v.guard_single_lane(i)
    c = v.context_class(i)
    ins = fa.cfg.instrs[i]
    if single:
        if ins.predicate is not None:
            k = fa.cfg.reg_key(ins.predicate, i)
            if _selects_one_warp(fa, k) or c != UNIFORM:
                return 1
        if c != UNIFORM or fa.cfg.block_of[i] in v.partial_blocks:
            return 1
        return fa.nwarps
    if c == UNIFORM and ins.predicate is None:
        return fa.threads
    return None


def _selects_one_warp(fa, key, depth=0) -> bool:
    v = fa.values
    sites = v.def_sites.get(key, [])
    if len(sites) != 1 or depth > 4:
        return False
    ins = fa.cfg.instrs[sites[0]]
    if ins.parts[0] == "and" and "pred" in ins.parts:
        return any(o.kind == "reg" and _selects_one_warp(fa, fa.cfg.reg_key(o.name, sites[0]),
                                                         depth + 1) for o in ins.operands[1:])
    if ins.parts[0] == "setp" and ins.parts[1] == "eq":
        return v.cls.get(key, 0) <= 1 or key in v.single_lane
    return False


def mbar_arrival_count(ctx: Context) -> list[Finding]:
    """Arrivals per phase differ from the mbarrier's expected count (MB7).

    What it checks:
        For a resolved mbarrier with a constant init count whose arrival sites lie outside loops
        and execute once per phase: the sum over sites of (executing threads × arrivals each:
        ``arrive`` count operand or 1, ``arrive.expect_tx`` 1, ``tcgen05.commit`` 1) equals the
        count. A waited barrier with no arrival at all is always reported (MB7, or TC2 for MMA
        commits). Sites whose thread count is unknown give a note.

    Why it is bad:
        Too few arrivals hang the waiters; too many complete the phase early (DeepGEMM#51).

    Example:
        ``mbarrier.init.shared::cta.b64 [bar], 2;`` with one elected arrive.

    Use instead:
        init count = arrivals per phase.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.15.7, .13-.15; DeepGEMM#51, #429; docs/ptx_rules.md MB7.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _is_mbar):
        cfg, v = fa.cfg, fa.values
        inits: dict = {}
        waits: dict = {}
        arrivals: dict = {}
        all_waits: dict = {}
        # a call may arrive on any mbarrier (its address passed as an argument)
        unknown = any(ins.parts[0] == "call" for ins in cfg.instrs)
        has_mma = any(is_tc(ins, "mma") for ins in cfg.instrs)
        for i, ins in enumerate(cfg.instrs):
            p = ins.parts
            if not _uses_mbar(ins):
                continue
            b = addr_val(fa, mbar_operand(ins), i)
            is_arr = (p[0] == "mbarrier" and p[1].startswith("arrive")) or is_tc(ins, "commit")
            if b is None:
                unknown = unknown or is_arr
                continue
            if p[0] == "mbarrier" and p[1] == "init":
                inits.setdefault(b, (i, v.const(ins.operands[-1], i)))
            elif is_mbar_wait(ins):
                waits.setdefault(b, i)
                all_waits.setdefault(b, []).append(i)
            elif is_arr:
                arrivals.setdefault(b, []).append(i)
        for b, (ii, count) in inits.items():
            init = cfg.instrs[ii]
            arr = arrivals.get(b, [])
            if b in waits and not arr and not has_mma and not unknown:
                w = cfg.instrs[waits[b]]
                out.append(ctx.finding("MB7", w.line, w.col,
                                       f"wait on mbarrier '{fmt_addr(b)}' that nothing arrives on"
                                       ": the waiters hang",
                                       notes=[Note(message=f"initialized with count {count} here",
                                                   line=init.line, col=init.col)]))
                continue
            if not arr or count is None or unknown:
                continue
            if any(cfg.block_of[i] in cfg.in_cycle for i in arr):
                continue   # per-phase accounting over loops is not decided
            total = 0
            for i in arr:
                ins = cfg.instrs[i]
                n = _issuers(fa, i)
                if n is None:
                    out.append(note_finding(ctx, "MB7", ins, "cannot determine how many threads "
                                            f"arrive on mbarrier '{fmt_addr(b)}' here"))
                    total = None
                    break
                each = 1
                if ins.parts[0] == "mbarrier" and "expect_tx" not in ins.parts and \
                        len([o for o in ins.operands if o.kind != "address"]) >= 2:
                    each = v.const(ins.operands[-1], i) or 1
                total += n * each
            blocks = sorted({cfg.block_of[i] for i in arr})
            exclusive = any(not _reaches(cfg, a, c) and not _reaches(cfg, c, a)
                            for k, a in enumerate(blocks) for c in blocks[k + 1:])
            phased = any(_in_order(cfg, a, w) and _in_order(cfg, w, c)
                         for w in all_waits.get(b, ()) for a in arr for c in arr if a != c)
            # several tcgen05.commit sites in sequence (FA4's unrolled P0.V0 commit, P1.V1
            # commit on one count-1 barrier): each arrives when its MMAs complete, so they may
            # complete successive phases the waiters take in turn
            phased = phased or (total is not None and count > 0 and total > count
                                and total % count == 0
                                and sum(is_tc(cfg.instrs[i], "commit") for i in arr) >= 2)
            if total is not None and total > count and phased:
                # a wait on the barrier between two arrival sites (arrive; wait; arrive; wait):
                # the sites may serve different phases (fewer arrivals than the count in all
                # of them together stay an error: no phase can complete)
                first = cfg.instrs[arr[0]]
                out.append(note_finding(ctx, "MB7", first,
                                        f"mbarrier '{fmt_addr(b)}' expects {count} arrivals per "
                                        f"phase and a wait on it lies between its arrival sites, "
                                        f"or they are commits completing successive phases "
                                        f"({total} if all served one phase): not decided "
                                        f"statically"))
            elif total is not None and total != count and exclusive:
                # sites on paths that exclude each other (a branch on the cluster rank: one
                # CTA arrives here, its peer there) do not all run in one CTA: the sum is
                # not the count of one execution
                first = cfg.instrs[arr[0]]
                out.append(note_finding(ctx, "MB7", first,
                                        f"mbarrier '{fmt_addr(b)}' expects {count} arrivals per "
                                        f"phase and its arrival sites lie on paths that exclude "
                                        f"each other ({total} if all ran): not decided "
                                        f"statically"))
            elif total is not None and total != count:
                first = cfg.instrs[arr[0]]
                out.append(ctx.finding("MB7", first.line, first.col,
                                       f"mbarrier '{fmt_addr(b)}' expects {count} arrivals per "
                                       f"phase but {total} arrive",
                                       notes=[Note(message=f"initialized with count {count} here",
                                                   line=init.line, col=init.col)]
                                       + [Note(message="arrival", line=cfg.instrs[i].line,
                                               col=cfg.instrs[i].col) for i in arr[1:4]]))
    return out


def mbar_tx_count(ctx: Context) -> list[Finding]:
    """expect_tx bytes differ from the bytes the bulk copies deliver (MB8).

    What it checks:
        For a resolved mbarrier whose ``expect_tx``/``arrive.expect_tx`` sites and
        ``cp.async.bulk`` copies completing on it lie outside loops: Σ expected bytes = Σ copy
        sizes (constants). Tensor copies (box size in the tensormap) make it undecidable (note).
        On every path, a bulk/tensor copy completing on an mbarrier has its bytes registered
        (``expect_tx``) in the same phase before a plain arrive or a wait can complete that phase
        (a phase that never registered ``expect_tx``).

    Why it is bad:
        Too many expected bytes hang the waiter; too few let it read data that has not landed
        (cutlass#851).

    Example:
        ``mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 2048;`` with one 4096-byte copy.

    Use instead:
        expect exactly the bytes landing in this CTA.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.15.2, .5, .6; cutlass#851; docs/ptx_rules.md MB8.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _is_tx_copy):
        out += event_findings(ctx, fi, fa, TxPhase, "MB8",
                              "register the bytes with 'mbarrier.arrive.expect_tx' (or "
                              "'mbarrier.expect_tx') in the same phase as the copy")
    for fi, fa in each_function(ctx, lambda x: "expect_tx" in x.parts
                                or (x.parts[0] == "mbarrier" and x.parts[1] == "expect_tx")):
        cfg, v = fa.cfg, fa.values
        exp: dict = {}
        got: dict = {}
        undecided: dict = {}
        # a copy whose mbarrier is not resolved (a mapa / shared::cluster address: a CTA pair's
        # or a peer's barrier) or that multicasts may deliver its bytes to any barrier here
        elsewhere: list[int] = []
        for i, ins in enumerate(cfg.instrs):
            p = ins.parts
            b = addr_val(fa, mbar_operand(ins), i)
            if _is_tx_copy(ins) and (b is None or "multicast::cluster" in p):
                elsewhere.append(i)
            if b is None:
                continue
            if p[0] == "mbarrier" and "expect_tx" in p or (p[0] == "mbarrier"
                                                          and p[1] == "expect_tx"):
                c = v.const(ins.operands[-1], i)
                exp.setdefault(b, []).append((i, c))
            elif p[0] in ("st", "red") and _is_tx_copy(ins):
                got.setdefault(b, []).append((i, _async_store_bytes(ins)))
            elif p[0] == "cp" and any(x.startswith("mbarrier::complete_tx") for x in p):
                if "tensor" in p:
                    undecided[b] = i
                    continue
                sz = [o for o in ins.operands if o.kind != "address"]
                c = v.const(sz[0], i) if sz else None
                got.setdefault(b, []).append((i, c))
        for b, es in exp.items():
            sites = [i for i, _ in es] + [i for i, _ in got.get(b, [])]
            if b in undecided:
                out.append(note_finding(ctx, "MB8", cfg.instrs[undecided[b]],
                                        "tensor copy bytes depend on the tensormap box; "
                                        "expect_tx not checked"))
                continue
            if any(cfg.block_of[i] in cfg.in_cycle for i in sites):
                continue
            if any(c is None for _, c in es + got.get(b, [])):
                out.append(note_finding(ctx, "MB8", cfg.instrs[es[0][0]],
                                        "non-constant byte counts; expect_tx not checked"))
                continue
            e = sum(c for _, c in es)
            g = sum(c for _, c in got.get(b, []))
            multi = next((i for i, _ in got.get(b, []) if not v.guard_single_lane(i)), None)
            # lanes multiply the copies' bytes: only a count that some number of lanes can
            # reach (a multiple of what one pass of the copy sites delivers) is undecided
            if e != g and multi is not None and g > 0 and e > g and e % g == 0:
                # a copy several lanes issue (DeepEP's multi-lane gather) delivers its bytes once
                # per lane: the count is the emulator's (it runs every lane)
                out.append(note_finding(
                    ctx, "MB8", cfg.instrs[es[0][0]],
                    f"mbarrier '{fmt_addr(b)}' expects {e} transaction bytes and the copy "
                    f"instructions resolved to it deliver {g} per issuing thread; the copy at "
                    f"line {cfg.instrs[multi].line} may run in several lanes (not decided "
                    f"statically)"))
                continue
            if e != g and elsewhere:
                out.append(note_finding(
                    ctx, "MB8", cfg.instrs[es[0][0]],
                    f"mbarrier '{fmt_addr(b)}' expects {e} transaction bytes and the copies "
                    f"resolved to it deliver {g}; the copy at line "
                    f"{cfg.instrs[elsewhere[0]].line} completes on an mbarrier the static rule "
                    f"cannot resolve (or multicasts) and may deliver the rest"))
                continue
            if e != g:
                ins = cfg.instrs[es[0][0]]
                out.append(ctx.finding("MB8", ins.line, ins.col,
                                       f"mbarrier '{fmt_addr(b)}' expects {e} transaction bytes "
                                       f"but the bulk copies deliver {g}",
                                       notes=[Note(message=f"copy of {c} bytes",
                                                   line=cfg.instrs[i].line, col=cfg.instrs[i].col)
                                              for i, c in got.get(b, [])[:4]]))
    return out


def _is_tx_copy(ins) -> bool:
    """A bulk / tensor copy, or an ``st.async`` / ``red.async`` (PTX ISA 9.1), completing
    transaction bytes on an mbarrier."""
    return ins.parts[0] in ("cp", "st", "red") and any(
        x.startswith("mbarrier::complete_tx") for x in ins.parts) and (
        ins.parts[0] == "cp" or "async" in ins.parts)


def _async_store_bytes(ins) -> int | None:
    """Bytes an ``st.async`` / ``red.async`` delivers: its type size times its vector width."""
    from verifier.ptx.ast import TYPE_SIZES
    n = next((int(x[1:]) for x in ins.parts if x in ("v2", "v4", "v8")), 1)
    sz = next((TYPE_SIZES[x] for x in reversed(ins.parts) if x in TYPE_SIZES), None)
    return None if sz is None else sz * n


class TxPhase(Property):
    """Fact: (mbarriers whose current phase registered an expect_tx, mbarriers that received a
    complete_tx copy in the current phase with no expect_tx). A phase ends at a wait on the
    mbarrier (or its init). A copy's bytes must be registered in its phase before the phase can
    complete: a plain arrive or a wait while a copy is unregistered is MB8 (PTX ISA 9.1
    §9.7.13.15.2, .5, .6: the phase completes when the pending arrivals reach zero *and* the
    tx-count is zero; without expect_tx the count can reach zero before the bytes land)."""

    RULES = ("MB8",)

    def initial(self):
        return (frozenset(), frozenset())

    def relevant(self, ins):
        return _is_tx_copy(ins) or (ins.parts[0] == "mbarrier" and len(ins.parts) > 1 and (
            ins.parts[1] in ("init", "expect_tx") or ins.parts[1].startswith("arrive")
            or is_mbar_wait(ins)))

    def _expect_sites(self, b, at: int) -> int | None:
        """An ``expect_tx`` on mbarrier ``b`` that may execute before the copy at ``at`` in
        the CFG (any thread), or None."""
        cyc = self.cfg.in_cycle
        looped = self.cfg.block_of[at] in cyc
        for j, ins in enumerate(self.cfg.instrs):
            p = ins.parts
            # in the same phase structure as the copy (both in a loop, or neither: a
            # prologue's expect_tx registers no loop iteration's bytes)
            if p[0] == "mbarrier" and "expect_tx" in p \
                    and self._key(mbar_operand(ins), j) == b and _in_order(self.cfg, j, at) \
                    and (self.cfg.block_of[j] in cyc) == looped:
                return j
        return None

    def _key(self, o, i):
        v = addr_val(self.fa, o, i)
        if v is not None:
            return v
        if o is not None and o.kind == "address" and o.base is not None and o.base.name:
            return ("r", self.cfg.reg_key(o.base.name, i), o.value or 0)
        return None

    def transfer(self, i, ins, fact, report):
        exp, unreg = fact
        b = self._key(mbar_operand(ins), i)
        if b is None:
            return fact
        p = ins.parts
        mine = {x for x in unreg if x[0] == b}  # (mbarrier, copy site) unregistered
        if _is_tx_copy(ins):
            return fact if b in exp else (exp, unreg | {(b, i)})
        if p[1] == "init" or is_mbar_wait(ins):
            if mine and is_mbar_wait(ins):
                # another thread may have registered the bytes (thread 0's expect_tx before a
                # CTA barrier, lanes 0-3 issuing the copies): this path cannot tell; the
                # emulator runs the threads together
                other = self._expect_sites(b, min(j for _, j in mine))
                report("MB8", f"wait on mbarrier '{_fmt(b)}' whose phase received a bulk copy "
                              "(complete_tx) but never registered its bytes with expect_tx: the "
                              "phase can complete before the data lands"
                       + (f" (an expect_tx on it at line {self.cfg.instrs[other].line}, on "
                          "another thread's path, may have registered them: not decided "
                          "statically)" if other is not None else ""),
                       severity="note" if other is not None else None)
            return (exp - {b}, unreg - mine)
        if "expect_tx" in p or p[1] == "expect_tx":
            return (exp | {b}, unreg - mine)
        if mine:              # a plain arrive: may complete the phase
            report("MB8", f"'{ins.opcode.split('.shared')[0]}' on mbarrier '{_fmt(b)}' may "
                          "complete a phase whose bulk copy bytes were never registered with "
                          "expect_tx")
        return fact

    def describe(self, i, ins, old, new):
        return None if old == new else ins.opcode.split(".shared")[0]


def _fmt(k) -> str:
    if k[0] == "r":
        reg = k[1].split("#")[0]
        return f"{reg}+{k[2]}" if k[2] else reg
    return fmt_addr(k)


class RelaxedWait(Property):
    RULES = ("MB9",)

    def initial(self):
        return False

    def relevant(self, ins):
        return is_mbar_wait(ins) or ins.parts[0] in ("fence", "membar") or is_smem_read(ins) \
            or (ins.parts[0] == "ld" and len(ins.parts) > 1 and ins.parts[1] == "global")

    def transfer(self, i, ins, fact, report):
        if is_mbar_wait(ins):
            return "relaxed" in ins.parts
        if ins.parts[0] == "membar" or (ins.parts[0] == "fence" and any(
                x in ins.parts for x in ("acquire", "acq_rel", "sc")) and "proxy" not in ins.parts):
            return False
        if fact:
            report("MB9", f"'{ins.opcode}' reads data published through a '.relaxed' mbarrier "
                          "wait with no acquire fence in between")
        return fact

    def describe(self, i, ins, old, new):
        return "relaxed wait" if new else None


def mbar_relaxed_wait(ctx: Context) -> list[Finding]:
    """Data read after a ``.relaxed`` mbarrier wait without an acquire fence (MB9).

    What it checks:
        After ``mbarrier.try_wait``/``test_wait`` with ``.relaxed``, a ``fence.acquire`` (e.g.
        ``fence.acquire.sync_restrict::shared::cluster.cluster``), ``fence.acq_rel``/``sc`` or
        ``membar`` precedes the next generic load.

    Why it is bad:
        A relaxed wait gives no memory ordering: the load may see stale data.

    Example:
        ``mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 %p, [bar], 0; ld.shared...``

    Use instead:
        drop ``.relaxed`` (default acquire) or add the acquire fence.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.15.16, §9.7.13.4; docs/ptx_rules.md MB9.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_mbar_wait(x) and "relaxed" in x.parts):
        out += event_findings(ctx, fi, fa, RelaxedWait, "MB9",
                              "insert 'fence.acquire.sync_restrict::shared::cluster.cluster;' "
                              "after the wait, or use the default acquire semantics")
    return out


def mbar_try_wait_no_retry(ctx: Context) -> list[Finding]:
    """``mbarrier.try_wait`` result not retried in a loop (MB10).

    What it checks:
        The predicate written by ``try_wait`` guards a branch that lies on a cycle through the
        ``try_wait`` (the retry loop).

    Why it is bad:
        ``try_wait`` may return false after a time-out; without a retry the thread proceeds
        unsynchronized.

    Example:
        ``mbarrier.try_wait.parity.shared::cta.b64 %p1, [bar], 0;`` and nothing uses ``%p1``.

    Use instead:
        ``L: mbarrier.try_wait...; @!%p1 bra L;``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.15.16; docs/ptx_rules.md MB10.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: is_mbar_wait(x) and x.parts[1] == "try_wait"):
        cfg, v = fa.cfg, fa.values
        # a .func's return registers: a result returned goes to the caller, which may retry
        rets = {p.name for p in fi.fn.rets}
        for i, ins in enumerate(cfg.instrs):
            if not (is_mbar_wait(ins) and ins.parts[1] == "try_wait") or not v.defs[i]:
                continue
            bi = cfg.block_of[i]
            ok = unsure = False
            # the predicate and what register arithmetic derives from it (CCCL's
            # 'selp r, 1, 0, p; setp.eq r, 0', 'not.pred', 'and.pred' ...)
            keys, work = {v.defs[i][0]}, [v.defs[i][0]]
            while work:
                for u in v.use_sites.get(work.pop(), ()):
                    un = cfg.instrs[u]
                    if un.parts[0] == "bra":
                        bu = cfg.block_of[u]
                        if bu in cfg.in_cycle and bi in cfg.in_cycle and _reaches(cfg, bu, bi):
                            ok = True
                    elif un.parts[0] in _DERIVING and v.defs[u]:
                        for k in v.defs[u]:
                            if k.split("#")[0] in rets:
                                unsure = True  # returned: the retry loop is the caller's
                            if k not in keys:
                                keys.add(k)
                                work.append(k)
                    else:
                        unsure = True  # stored, passed on: the retry may be elsewhere
            if not ok:
                msg = ("'mbarrier.try_wait' result is not retried in a loop; it may return false "
                       "after a time-out")
                if unsure:
                    out.append(note_finding(ctx, "MB10", ins, msg + " (its predicate flows into "
                                            "an instruction the rule does not follow)"))
                else:
                    out.append(ctx.finding("MB10", ins.line, ins.col, msg,
                                           notes=[Note(message="branch back to the try_wait "
                                                       "while its predicate is false")]))
    return out


#: register-only instructions a try_wait predicate is followed through (MB10)
_DERIVING = frozenset({"selp", "setp", "not", "and", "or", "xor", "mov", "cvt", "set"})


def _in_order(cfg, i: int, j: int) -> bool:
    """Instruction ``j`` can execute after instruction ``i`` (same block and later, or a block
    reached from ``i``'s block)."""
    bi, bj = cfg.block_of[i], cfg.block_of[j]
    return (bi == bj and i < j) or _reaches(cfg, bi, bj)


def _reaches(cfg, a: int, b: int) -> bool:
    seen = {a}
    work = [a]
    while work:
        x = work.pop()
        for d in cfg.succ_ids(x):
            if d == b:
                return True
            if d != cfg.exit_id and d not in seen:
                seen.add(d)
                work.append(d)
    return False
