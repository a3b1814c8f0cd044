"""Rules added in verifier v2 across families: AP8 (tensor-copy CTA mapping), AP9 (tensormap
proxy fences), W6 (wgmma stage write-after-read), W7 (wgmma results shared without a barrier),
MB6 (mbarrier phase run-ahead), TC4 (multicast commit), TL6 (tcgen05.wait covers only the
executing thread), TM2 (cta_group::2 peer running), CA5 (cp.async write-after-read), and the
documentation of the guarantee rows TC3, TF1, B6 (registry status ``semantics``; they report
nothing).

Sources: PTX ISA 9.1 §9.7.13.4 and §9.7.9.28 (tensormap proxy), §9.7.9.27 (tensor copies),
§9.7.15.7 (wgmma groups), §9.7.13.15.4 (mbarrier phases), §9.7.16.12.1 (tcgen05.commit),
§9.7.16.8.5 (tcgen05.wait), §9.7.16.5 (cta_group::2), §9.7.9.25 (cp.async) and
``docs/ptx_rules.md`` rows AP8, AP9, W6, W7, MB6, TC4, TL6, TM2, CA5, TC3, TF1, B6.
"""

from __future__ import annotations

import re

from verifier.analysis import Property
from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.rules._flow import (
    addr_val,
    ranges_of,
    each_function,
    event_findings,
    fmt_addr,
    is_cta_barrier,
    is_mbar_wait,
    is_tc,
    mbar_operand,
    note_finding,
)

__all__ = [
    "barrier_scope_semantics",
    "commit_is_fence_semantics",
    "commit_multicast_invalid",
    "cp_async_war",
    "mbar_phase_run_ahead",
    "pair_op_peer_running",
    "pipelined_pairs_semantics",
    "tensor_copy_cta_rules",
    "tensormap_proxy_fence",
    "tmem_wait_other_threads",
    "wgmma_results_unsynced",
    "wgmma_stage_war",
]


# --------------------------------------------------------------------------------------- AP9

def _is_tmap_write(ins) -> bool:
    return ins.parts[0] == "tensormap" and len(ins.parts) > 1 and ins.parts[1] in (
        "replace", "cp_fenceproxy")


def _is_tmap_fence(ins, kind: str) -> bool:
    p = ins.parts
    return (p[0] == "fence" and len(p) > 3 and p[1] == "proxy" and p[2] == "tensormap::generic"
            and p[3] == kind)


def _tmap_use(ins):
    """The tensormap address operand of a tensor bulk copy / prefetch, or None."""
    p = ins.parts
    if "tensor" not in p or p[0] not in ("cp", "prefetch"):
        return None
    for o in ins.operands:
        if o.kind == "address" and o.elems:
            return o
    return None


class TensormapState(Property):
    """Fact: (site of a tensormap write not yet released, -1 if none; acquire still needed)."""

    RULES = ("AP9",)

    def initial(self):
        return (-1, False)

    def relevant(self, ins):
        return ins.parts[0] in ("tensormap", "fence", "cp", "prefetch")

    def transfer(self, i, ins, fact, report):
        dirty, need_acq = fact
        if ins.parts[0] == "tensormap" and len(ins.parts) > 1:
            if ins.parts[1] == "replace":
                return (i, True)
            if ins.parts[1] == "cp_fenceproxy":     # copy + release fence in one instruction
                return (-1, True)
            return fact
        if _is_tmap_fence(ins, "release"):
            return (-1, need_acq)
        if _is_tmap_fence(ins, "acquire"):
            return (dirty, False)
        if _tmap_use(ins) is not None:
            if dirty >= 0:
                w = self.cfg.instrs[dirty]
                report("AP9", f"tensor copy reads a tensormap modified by 'tensormap.replace' "
                              f"(line {w.line}) without 'fence.proxy.tensormap::generic.release'")
            elif need_acq:
                report("AP9", "tensor copy reads a modified tensormap without "
                              "'fence.proxy.tensormap::generic.acquire' [tmap], 128 before it")
        return fact


def tensormap_proxy_fence(ctx: Context) -> list[Finding]:
    """Tensormap modified in memory and used by TMA without the tensormap proxy fences (AP9).

    What it checks:
        On every path, a ``tensormap.replace`` is followed by
        ``fence.proxy.tensormap::generic.release.<scope>`` and then
        ``fence.proxy.tensormap::generic.acquire.<scope> [tmap], 128`` before a
        ``cp.async.bulk.tensor`` / ``cp.reduce.async.bulk.tensor`` / ``prefetch.tensor`` uses a
        tensormap (``tensormap.cp_fenceproxy`` counts as write + release). An acquire fence whose
        size is a constant other than 128 is an error. Which tensormap a use reads is not
        resolved: any earlier write in the function counts. A tensor copy through a tensormap
        in global memory that the kernel does not write gets no finding: host-side or
        other-CTA updates cannot be seen statically (they are reported as a note only when the
        function also contains an acquire fence of a size that cannot be read).

    Why it is bad:
        The tensormap is read through the tensormap proxy; without the release/acquire pair
        the TMA unit can read a stale or torn descriptor (DeepGEMM#343, triton#7293).

    Example:
        ``tensormap.replace.tile.global_address.global.b1024.b64 [%rd1], %rd2;``
        ``cp.async.bulk.tensor.2d... [%r3], [%rd1, {%r4, %r4}], [%r2];``

    Use instead:
        ``...; fence.proxy.tensormap::generic.release.gpu;``
        ``fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128; cp.async.bulk.tensor...``

    ptxas:
        size != 128: ERR; missing fence: no.

    References:
        PTX ISA 9.1 §9.7.13.4, §9.7.13.16, §9.7.9.28; docs/ptx_rules.md AP9.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: x.parts[0] in ("tensormap", "fence")):
        for i, ins in enumerate(fa.cfg.instrs):
            if _is_tmap_fence(ins, "acquire") and len(ins.operands) >= 2:
                n = fa.values.const(ins.operands[1], i)
                if n is None:
                    out.append(note_finding(ctx, "AP9", ins, "tensormap acquire fence size is "
                                            "not a constant; it must be 128"))
                elif n != 128:
                    out.append(ctx.finding("AP9", ins.line, ins.col,
                                           f"tensormap acquire fence covers {n} bytes; a "
                                           "tensormap is 128 bytes", fix=None,
                                           notes=[Note(message="use 'fence.proxy.tensormap::"
                                                       "generic.acquire.<scope> [tmap], 128'")]))
        if any(_is_tmap_write(ins) for ins in fa.cfg.instrs):
            out += event_findings(ctx, fi, fa, TensormapState, "AP9",
                                  "insert 'fence.proxy.tensormap::generic.release.<scope>;' after "
                                  "the write and 'fence.proxy.tensormap::generic.acquire.<scope> "
                                  "[tmap], 128;' before the first use")
    return out


# --------------------------------------------------------------------------------------- W6

_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "b1": 1}


def _wg(ins, op: str) -> bool:
    return ins.parts[0] == "wgmma" and len(ins.parts) > 1 and ins.parts[1] == op


def _single_def(fa, name: str, i: int):
    key = fa.cfg.reg_key(name, i)
    sites = fa.values.def_sites.get(key, [])
    return sites[0] if len(sites) == 1 else None


def _desc_start(fa, o, i: int, depth: int = 0):
    """Resolved smem start address (``("s", sym, off)``) encoded in a wgmma descriptor register:
    follows ``or``/``add`` with constants, ``cvt``, ``mov`` and ``bfe x, 4, 14`` (the address
    field, PTX ISA 9.1 §9.7.15.5.1.2). None when not resolvable."""
    if o is None or o.kind != "reg" or depth > 8:
        return None
    d = _single_def(fa, o.name, i)
    if d is None:
        return None
    ins = fa.cfg.instrs[d]
    op = ins.parts[0]
    ops = ins.operands
    if op == "bfe" and len(ops) == 4:
        if fa.values.const(ops[2], d) == 4:
            v = addr_val(fa, ops[1], d)
            return v if v is not None and v[0] == "s" else None
        return None
    if op in ("cvt", "mov") and len(ops) == 2 and ops[1].kind == "reg":
        return _desc_start(fa, ops[1], d, depth + 1)
    if op in ("or", "add") and len(ops) == 3:
        for a, b in ((ops[1], ops[2]), (ops[2], ops[1])):
            if a.kind == "reg" and fa.values.const(b, d) is not None:
                r = _desc_start(fa, a, d, depth + 1)
                if r is not None:
                    return r
    return None


def _wg_regions(fa, i: int, ins):
    """``[(sym, lo, hi), ...]`` smem bytes an mma_async reads (None: an operand unresolved)."""
    shape = next((m for p in ins.parts if (m := _SHAPE.fullmatch(p))), None)
    bits = [_BITS[p] for p in ins.parts if p in _BITS]
    if shape is None or not bits:
        return None
    _, n, k = map(int, shape.groups())
    out = []
    for idx, rows in ((1, 64), (2, n)):
        if idx >= len(ins.operands):
            return None
        o = ins.operands[idx]
        if o.kind == "vector":         # A from registers
            continue
        s = _desc_start(fa, o, i)
        if s is None:
            return None
        out.append((s[1], s[2], s[2] + rows * k * bits[-1] // 8))
    return tuple(out)


def _smem_overwrite(fa, i: int, ins):
    """``(operand, size or None)`` of a shared-memory write that may overwrite a wgmma operand:
    ``st.shared``, ``cp.async`` / ``cp.async.bulk`` into shared memory; else None."""
    p = ins.parts
    ops = ins.operands
    if p[0] == "st" and len(p) > 1 and p[1].startswith("shared") and ops:
        return ops[0], 4
    if p[0] == "cp" and len(p) > 2 and p[1] == "async" and ops:
        if p[2] in ("commit_group", "wait_group", "wait_all", "mbarrier"):
            return None
        if p[2] == "bulk":
            if len(p) > 3 and p[3] in ("commit_group", "wait_group", "prefetch"):
                return None
            dst = next((x for x in p[3:] if x.startswith("shared") or x == "global"), None)
            if dst is None or not dst.startswith("shared"):
                return None
            size = fa.values.const(ops[2], i) if "tensor" not in p and len(ops) > 2 else None
            return ops[0], size
        if any(x.startswith("shared") for x in p[2:]) and len(ops) > 2:
            return ops[0], fa.values.const(ops[2], i)
    return None


class WgmmaStageState(Property):
    """Fact: (uncommitted mma sites, committed groups); like W3's state, for smem operands."""

    RULES = ("W6",)

    def __init__(self, cfg, values, fa=None):
        super().__init__(cfg, values, fa)
        self.regions = {i: _wg_regions(fa, i, ins) for i, ins in enumerate(cfg.instrs)
                        if _wg(ins, "mma_async")}

    def initial(self):
        return (frozenset(), ())

    def relevant(self, ins):
        return ins.parts[0] in ("wgmma", "st", "cp")

    def transfer(self, i, ins, fact, report):
        unc, groups = fact
        if ins.parts[0] == "wgmma":
            op = ins.parts[1]
            if op == "mma_async":
                return (unc | {i}, groups)
            if op == "commit_group":
                return (frozenset(), (groups + (unc,))[-8:])
            if op == "wait_group":
                n = self.values.const(ins.operands[0], i) if ins.operands else None
                if n is None:
                    return fact
                return (unc, groups[len(groups) - n:] if n else ())
            return fact
        if not unc and not groups:
            return fact
        w = _smem_overwrite(self.fa, i, ins)
        if w is None:
            return fact
        o, size = w
        v = addr_val(self.fa, o, i)
        live = set(unc)
        for g in groups:
            live |= g
        for s in sorted(live):
            regs = self.regions.get(s)
            if regs is None or v is None or v[0] != "s":
                report("W6", f"'{ins.opcode}' writes shared memory while a 'wgmma.mma_async' "
                             f"(line {self.cfg.instrs[s].line}) may be in flight; the write "
                             "address or the wgmma descriptor is not resolvable, so stage reuse "
                             "was not checked", severity="note")
                return fact
            lo = v[2]
            hi = lo + (size or 1)
            for sym, a, b in regs:
                if sym == v[1] and lo < b and a < hi:
                    report("W6", f"'{ins.opcode}' overwrites shared memory "
                                 f"'{fmt_addr(v)}' read by an in-flight 'wgmma.mma_async' "
                                 f"(line {self.cfg.instrs[s].line}) not retired by "
                                 "'wgmma.wait_group'")
                    return fact
        return fact


def wgmma_stage_war(ctx: Context) -> list[Finding]:
    """Shared-memory stage overwritten while a wgmma still reads it (W6).

    What it checks:
        Per path, the ``wgmma.mma_async`` not yet retired by a ``wgmma.wait_group`` (groups
        counted like W3) and the shared-memory bytes each reads (descriptor start address,
        resolved through ``bfe x, 4, 14``; extent 64 x K (A) and N x K (B) elements). An
        ``st.shared``, ``cp.async`` or ``cp.async.bulk`` into shared memory that overlaps them is
        an error. When the write address or a descriptor cannot be resolved (pipelined stages
        indexed by the loop) the site gets a note.

    Why it is bad:
        The async proxy reads the stage while it is overwritten: silently wrong tiles
        (tilelang#2613, NVIDIA/Fuser#3561).

    Example:
        ``wgmma.commit_group.sync.aligned; st.shared.b32 [smem], %r1;
        wgmma.wait_group.sync.aligned 0;``

    Use instead:
        retire the wgmma first (``wgmma.wait_group.sync.aligned N``), then signal the stage free
        (mbarrier arrive / bar.sync) before refilling it.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.15.7.3; docs/ptx_rules.md W6.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: _wg(x, "mma_async")):
        found = event_findings(ctx, fi, fa, WgmmaStageState, "W6",
                               "insert 'wgmma.wait_group.sync.aligned 0;' before the overwrite")
        out += _collapse_notes(fi, found)
    return out


# --------------------------------------------------------------------------------------- MB6

def _is_arrive(ins) -> bool:
    p = ins.parts
    if p[0] == "mbarrier" and len(p) > 1 and p[1].startswith("arrive"):
        return True
    if is_tc(ins, "commit"):
        return True
    return p[0] == "cp" and len(p) > 2 and p[1] == "async" and p[2] == "mbarrier"


class MbarRunAheadState(Property):
    """Fact: frozenset of (barrier address, guard) arrived on since this thread last waited."""

    RULES = ("MB6",)

    def initial(self):
        return frozenset()

    def relevant(self, ins):
        return _is_arrive(ins) or is_mbar_wait(ins) or is_cta_barrier(ins)

    def transfer(self, i, ins, fact, report):
        if is_mbar_wait(ins) or is_cta_barrier(ins):
            return frozenset()
        o = ins.operands[0] if ins.parts[0] == "cp" and ins.operands else mbar_operand(ins)
        v = addr_val(self.fa, o, i)
        if v is None:
            return fact
        key = (v, ins.predicate or "")
        if key in fact:
            report("MB6", f"second arrive on mbarrier '{fmt_addr(v)}' by the same thread with no "
                          "wait in between: it may complete the next phase before this thread "
                          "observed the current one")
            return fact
        return fact | {key}


def mbar_phase_run_ahead(ctx: Context) -> list[Finding]:
    """A thread arrives on one mbarrier twice without waiting in between (MB6).

    What it checks:
        On every path, two arrivals (``mbarrier.arrive*``, ``tcgen05.commit``,
        ``cp.async.mbarrier.arrive``) by the same thread, under the same guard, on the same
        resolved mbarrier address are separated by an mbarrier wait (any barrier: a producer
        waiting on the "empty" barrier is enough) or a CTA barrier. Arrivals whose address is
        not resolved are not compared. The second half of the row (an elected thread arriving
        for a warp group after a partition ``bar.sync``) is not checked.

    Why it is bad:
        A participant that arrives for phase k+1 before phase k completed is counted in phase
        k: the phase completes early or aliases, and a consumer waits forever (triton#10035).

    Example:
        ``mbarrier.arrive.expect_tx... [%r2], 8192; mbarrier.arrive.expect_tx... [%r2], 8192;``

    Use instead:
        wait for the phase (``mbarrier.try_wait.parity``) before the next arrival.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.15.4; docs/ptx_rules.md MB6.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _is_arrive):
        out += event_findings(ctx, fi, fa, MbarRunAheadState, "MB6",
                              "wait on the barrier's phase (or on the consumer's release "
                              "barrier) before arriving again")
    return out


# --------------------------------------------------------------------------------------- TC4

def commit_multicast_invalid(ctx: Context) -> list[Finding]:
    """``tcgen05.commit.multicast::cluster`` operands and initialisation (TC4).

    What it checks:
        For a multicast commit: ``ctaMask`` is a register declared ``.b16`` (an immediate is
        rejected by ptxas); the mbarrier is addressed in ``.shared::cluster``; and, when the
        function initialises mbarriers, a ``barrier.cluster.wait`` follows the last
        ``mbarrier.init`` before the commit (in source order) so that every masked CTA's barrier
        is initialised and visible.

    Why it is bad:
        The arrive goes to the same offset in every masked CTA; arriving on a barrier that a
        peer has not yet initialised corrupts it (TLX #652).

    Example:
        ``mbarrier.init...; tcgen05.commit...multicast::cluster.b64 [%r5], %rs1;``

    Use instead:
        ``mbarrier.init...; barrier.cluster.arrive.release.aligned;
        barrier.cluster.wait.acquire.aligned; ...; tcgen05.commit...multicast::cluster``

    ptxas:
        immediate mask: ERR; the rest: no.

    References:
        PTX ISA 9.1 §9.7.16.12.1; docs/ptx_rules.md TC4.
    """
    out: list[Finding] = []
    for fi in ctx.bodies():
        last_init = None
        cluster_sync_after_init = False
        for ins, scope in fi.instructions:
            p = ins.parts
            if p[0] == "mbarrier" and len(p) > 1 and p[1] == "init":
                last_init, cluster_sync_after_init = ins, False
                continue
            if p[0] == "barrier" and len(p) > 2 and p[1] == "cluster" and p[2] == "wait":
                cluster_sync_after_init = True
                continue
            if not (is_tc(ins, "commit") and "multicast::cluster" in p):
                continue
            mask = ins.operands[1] if len(ins.operands) > 1 else None
            if mask is None or mask.kind != "reg":
                out.append(ctx.finding("TC4", ins.line, ins.col,
                                       "multicast commit needs a '.b16' register 'ctaMask' "
                                       f"operand, not '{mask.text if mask else ''}'"))
            else:
                d = scope.lookup_reg(mask.name)
                if d is not None and d.type != "b16":
                    out.append(ctx.finding("TC4", ins.line, ins.col,
                                           f"multicast commit mask '{mask.name}' is declared "
                                           f"'.{d.type}'; 'ctaMask' is a 16-bit register",
                                           notes=[Note(message="declared here", line=d.line,
                                                       col=d.col)]))
            if "shared::cluster" not in p:
                out.append(ctx.finding("TC4", ins.line, ins.col,
                                       "multicast commit mbarrier must be addressed in the "
                                       "'.shared::cluster' window"))
            if last_init is not None and not cluster_sync_after_init:
                out.append(ctx.finding(
                    "TC4", ins.line, ins.col,
                    "multicast commit may arrive on a peer CTA's mbarrier before its "
                    "'mbarrier.init' is visible (no 'barrier.cluster.wait' after the init)",
                    notes=[Note(message="mbarrier initialised here", line=last_init.line,
                                col=last_init.col),
                           Note(message="insert 'barrier.cluster.arrive.release.aligned; "
                                        "barrier.cluster.wait.acquire.aligned;' after the init")]))
    return out


# --------------------------------------------------------------------------------------- TL6

def tmem_wait_other_threads(ctx: Context) -> list[Finding]:
    """``tcgen05.wait::ld`` / ``wait::st`` executed by fewer threads than the ld/st (TL6).

    What it checks:
        A ``tcgen05.wait::ld`` (``wait::st``) guarded by a predicate while a ``tcgen05.ld``
        (``tcgen05.st``) of the function has a different guard: the threads outside the wait's
        guard have nothing waiting for their loads (stores). A wait inside a branch (not a
        guard) is compared only through the guard; such cases get no finding.

    Why it is bad:
        ``wait::ld``/``wait::st`` only wait for the executing thread's own ops; another warp's
        wait never covers them: the registers (TMEM) race.

    Example:
        ``tcgen05.ld.sync.aligned...; @%p_warp0 tcgen05.wait::ld.sync.aligned;``

    Use instead:
        every warp that issued the ld/st executes its own wait.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.8.5; docs/ptx_rules.md TL6.
    """
    out: list[Finding] = []
    for fi in ctx.bodies():
        ops = {"ld": [], "st": []}
        waits = []
        for ins, _ in fi.instructions:
            if is_tc(ins, "ld"):
                ops["ld"].append(ins)
            elif is_tc(ins, "st"):
                ops["st"].append(ins)
            elif is_tc(ins, "wait") and ins.predicate is not None:
                waits.append(ins)
        for w in waits:
            kind = "ld" if "wait::ld" in w.parts else "st"
            other = [x for x in ops[kind] if x.predicate != w.predicate]
            if other:
                x = other[0]
                out.append(ctx.finding(
                    "TL6", w.line, w.col,
                    f"'tcgen05.wait::{kind}' guarded by '{w.predicate}' does not wait for the "
                    f"'tcgen05.{kind}' of threads outside that guard",
                    notes=[Note(message=f"'tcgen05.{kind}' executed "
                                + (f"under '{x.predicate}'" if x.predicate else "unguarded")
                                + " here", line=x.line, col=x.col),
                           Note(message="tcgen05.wait only waits for ops of the executing "
                                        "thread; run the wait under the same guard as the "
                                        f"'tcgen05.{kind}'")]))
    return out


# --------------------------------------------------------------------------------------- W7

def _is_smem_read_generic(ins) -> bool:
    p = ins.parts
    return (p[0] == "ld" and len(p) > 1 and p[1].startswith("shared")) or p[0] == "ldmatrix"


def _is_smem_store(ins) -> bool:
    p = ins.parts
    return (p[0] == "st" and len(p) > 1 and p[1].startswith("shared")) or p[0] == "stmatrix"


def _smem_span(fa, ins, i: int) -> tuple | None:
    """``(sym, lo, hi)``: the bytes a shared-memory ``ld`` / ``st`` / ``ldmatrix`` /
    ``stmatrix`` may touch (``sym + lo .. sym + hi - 1``: its address interval plus its width),
    or None when unknown."""
    o = next((x for x in ins.operands if x.kind == "address"), None)
    if o is None:
        return None
    a = ranges_of(fa).address(o, i)
    if a is None:
        return None
    p = ins.parts
    if p[0] in ("ldmatrix", "stmatrix"):
        n = next((int(t[1:]) for t in p if t in ("x1", "x2", "x4")), 4)
        size = 16 * n * 32  # a warp's matrices, from any lane's address: generous
        return (a[0], a[1] - size, a[2] + size)
    size = _read_size(ins)
    # the access is naturally aligned (PTX ISA 9.1 §5.4.5; a misaligned one faults): its start
    # lies on a multiple of its size within the interval (the symbol is at least that aligned)
    lo, hi = -(-a[1] // size) * size, a[2] // size * size
    return (a[0], lo, hi + size)


def _may_overlap(x: tuple | None, y: tuple | None) -> bool:
    return x is None or y is None or x[0] != y[0] or (x[1] < y[2] and y[1] < x[2])


class WgmmaResultShareState(Property):
    """Fact: (a wgmma.wait_group has retired results, the first shared-memory store since then
    not yet ordered by a barrier (-1: none), the bytes those stores may touch: per shared
    symbol the hull ``(sym, lo, hi)`` of their address intervals, None once one is unknown)."""

    RULES = ("W7",)

    def initial(self):
        return (False, -1, ())

    def relevant(self, ins):
        return (_wg(ins, "wait_group") or _is_smem_store(ins) or _is_smem_read_generic(ins)
                or is_cta_barrier(ins) or is_mbar_wait(ins)
                or (ins.parts[0] == "bar" and len(ins.parts) > 1 and ins.parts[1] == "warp"))

    def transfer(self, i, ins, fact, report):
        done, first, spans = fact
        if _wg(ins, "wait_group"):
            return (True, first, spans)
        if is_cta_barrier(ins) or is_mbar_wait(ins):
            return (done, -1, ())
        if not done:
            return fact
        if _is_smem_store(ins):
            sp = _smem_span(self.fa, ins, i)
            if spans is not None:
                if sp is None:
                    spans = None
                else:
                    old = next((x for x in spans if x[0] == sp[0]), None)
                    hull = sp if old is None else (sp[0], min(old[1], sp[1]), max(old[2], sp[2]))
                    spans = tuple(sorted({x for x in spans if x[0] != sp[0]} | {hull}))
            return (done, i if first < 0 else first, spans)
        if _is_smem_read_generic(ins) and first >= 0:
            # stores whose bytes the read cannot touch (address intervals known, disjoint from
            # the hull of the stores' in one shared symbol) exchange nothing with it
            mine = _smem_span(self.fa, ins, i)
            if spans is not None and mine is not None and not any(
                    _may_overlap(x, mine) for x in spans if x[0] == mine[0]):
                return fact
            w = self.cfg.instrs[first]
            report("W7", f"'{ins.opcode}' reads shared memory that threads store after "
                         f"'wgmma.wait_group' (line {w.line}) with no barrier in between: "
                         "wait_group synchronizes only the executing warpgroup's own wgmma, "
                         "not other threads")
            return (done, -1, ())
        return fact


def wgmma_results_unsynced(ctx: Context) -> list[Finding]:
    """wgmma results exchanged through shared memory without a barrier (W7).

    What it checks:
        On every path after a ``wgmma.wait_group``, a shared-memory store (``st.shared``,
        ``stmatrix``: typically the accumulator going to the epilogue buffer) followed by a
        shared-memory read (``ld.shared``, ``ldmatrix``) has a CTA / named barrier
        (``bar.sync``, ``barrier.sync``, ``bar.red``) or an mbarrier wait in between, unless
        the interval analysis shows the read and the stores touch disjoint bytes of one shared
        symbol. Whether the read addresses only the thread's own bytes is not resolved.

    Why it is bad:
        ``wgmma.wait_group`` only waits for the executing warpgroup's own ``mma_async``: it is
        not a barrier. Another warp or warpgroup reading the stored results races with the store
        (triton#11047).

    Example:
        ``wgmma.wait_group.sync.aligned 0; st.shared.f32 [%r9], %f33; ld.shared.f32 %f34,
        [obuf];``

    Use instead:
        ``st.shared...; bar.sync 0; ld.shared...`` (a named barrier over the consuming
        warpgroups suffices).

    ptxas:
        no.

    References:
        PTX ISA 9.1 §8.9.1.1, §9.7.15.7.3; docs/ptx_rules.md W7.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: _wg(x, "wait_group")):
        out += event_findings(ctx, fi, fa, WgmmaResultShareState, "W7",
                              "insert a barrier ('bar.sync 0;' or a named barrier over the "
                              "consuming warps) between the store and the read")
    return out


# ----------------------------------------------------------------------------------- CA5 WAR

_TYPE_BITS = re.compile(r"[bsuf](8|16|32|64|128)$")


def _read_size(ins) -> int:
    """Bytes an ``ld.shared`` / ``st.shared`` accesses per thread (vector x element width; 16
    when unknown)."""
    bits = next((int(m.group(1)) for p in reversed(ins.parts) if (m := _TYPE_BITS.match(p))), None)
    vec = next((int(p[1:]) for p in ins.parts if p in ("v2", "v4", "v8")), 1)
    return bits * vec // 8 if bits else 16


def _is_cp_async_smem(ins) -> bool:
    p = ins.parts
    return (p[0] == "cp" and len(p) > 2 and p[1] == "async" and p[2] in ("ca", "cg")
            and any(x.startswith("shared") for x in p))


class CpAsyncWarState(Property):
    """Fact: shared-memory read sites (``ld.shared``/``ldmatrix``) since the last CTA barrier."""

    RULES = ("CA5",)

    def initial(self):
        return ()

    def relevant(self, ins):
        return _is_smem_read_generic(ins) or is_cta_barrier(ins) or _is_cp_async_smem(ins)

    def transfer(self, i, ins, fact, report):
        if is_cta_barrier(ins):
            return ()
        if _is_smem_read_generic(ins):
            return fact if i in fact else (fact + (i,))[-8:]
        if not fact:
            return fact
        v = addr_val(self.fa, ins.operands[0], i) if ins.operands else None
        size = self.values.const(ins.operands[2], i) if len(ins.operands) > 2 else None
        for r in fact:
            rd = self.cfg.instrs[r]
            rv = addr_val(self.fa, rd.operands[1], r) if len(rd.operands) > 1 else None
            if v is None or rv is None or v[0] != "s" or rv[0] != "s" or size is None:
                report("CA5", f"'{ins.opcode}' writes shared memory after the shared-memory read "
                              f"at line {rd.line} with no barrier in between; the addresses are "
                              "not resolvable, so the write-after-read was not checked",
                       severity="note")
                return fact
            if v[1] == rv[1] and v[2] < rv[2] + _read_size(rd) and rv[2] < v[2] + size:
                report("CA5", f"'{ins.opcode}' overwrites '{fmt_addr(v)}' that other threads "
                              f"read at line {rd.line} with no barrier after that read")
                return fact
        return fact


def cp_async_war(ctx: Context) -> list[Finding]:
    """cp.async into shared memory other threads may still be reading (CA5, write-after-read).

    What it checks:
        On every path, between an ``ld.shared`` / ``ldmatrix`` and a later ``cp.async`` whose
        destination overlaps the bytes read, a CTA barrier (``bar.sync``, ``barrier.sync``,
        ``bar.red``) executes. Addresses are compared when both resolve to a shared variable +
        constant offset; otherwise the site gets one note per function. The other half of the
        docs/ptx_rules.md row (cp.async results feeding wgmma / TMA need ``fence.proxy.async``) is
        enforced by W5, TM8 and AP1.

    Why it is bad:
        ``cp.async`` is issued by one thread and lands asynchronously; another thread still
        reading the old contents sees the new data (flash-attention#1880).

    Example:
        ``ld.shared.f32 %f1, [scale]; @%p1 cp.async.ca.shared.global [scale], [%rd1+16], 16;``

    Use instead:
        ``ld.shared.f32 %f1, [scale]; bar.sync 0; @%p1 cp.async.ca.shared.global [scale], ...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.9.25.2, §9.7.9.25.3; docs/ptx_rules.md CA5.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _is_cp_async_smem):
        found = event_findings(ctx, fi, fa, CpAsyncWarState, "CA5",
                               "insert 'bar.sync 0;' between the last read and the cp.async")
        out += _collapse_notes(fi, found)
    return out


def _collapse_notes(fi, found: list[Finding]) -> list[Finding]:
    """Errors as they are; the undecided notes of one rule folded into one note per function."""
    notes = [f for f in found if f.severity == "note"]
    out = [f for f in found if f.severity != "note"]
    if notes:
        f = notes[0]
        out.append(f.model_copy(update={
            "message": f.message + (f" ({len(notes)} such sites in '{fi.fn.name}')"
                                    if len(notes) > 1 else ""),
            "notes": list(f.notes) + [Note(message="the rule could not be decided statically; "
                                                   "check this site by hand")]}))
    return out


# --------------------------------------------------------------------------------------- AP8

def _cluster_size(fn) -> int | None:
    """CTAs per cluster from ``.reqnctapercluster`` (product) or ``.maxclusterrank``, else None."""
    d = fn.directive("reqnctapercluster")
    if d is not None and d.args and all(isinstance(x, int) for x in d.args):
        n = 1
        for x in d.args:
            n *= int(x)
        return n
    d = fn.directive("maxclusterrank")
    if d is not None and d.args and isinstance(d.args[0], int):
        return int(d.args[0])
    return None


def tensor_copy_cta_rules(ctx: Context) -> list[Finding]:
    """Bulk tensor copy CTA-mapping rules: multicast window, ctaMask and cta_group (AP8).

    What it checks:
        For ``cp.async.bulk.tensor`` (and ``cp.async.bulk``) loads into shared memory:
        ``.multicast::cluster`` needs the ``.shared::cluster`` destination window; a constant
        ``ctaMask`` may only name CTAs of the cluster (``.reqnctapercluster`` /
        ``.maxclusterrank``); ``.cta_group::2`` needs a cluster of at least 2 CTAs. When the
        kernel declares no cluster shape, a multicast or ``::2`` copy gets a note (the launch
        decides). Per-CTA ``expect_tx`` of multicast copies and the box/alignment restrictions
        of §9.7.9.27.1.1 are not checked (the box lives in the tensormap).

    Why it is bad:
        The data and the mbarrier signal go to the same offset in every masked CTA: a bit for a
        CTA outside the cluster, or a peer mbarrier with ``::1``, hangs the consumers or writes
        tiles into the wrong CTA (cutlass#851).

    Example:
        ``.reqnctapercluster 2, 1, 1 ... mov.b16 %rs1, 5;
        cp.async.bulk.tensor...multicast::cluster [smem], [tmap, {...}], [bar], %rs1;``

    Use instead:
        a mask within the cluster (``3`` for 2 CTAs), ``.shared::cluster`` destination.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.9.27.1.2, §9.7.9.25.4; docs/ptx_rules.md AP8.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: x.parts[0] == "cp" and "bulk" in x.parts):
        csize = _cluster_size(fi.fn)
        for i, ins in enumerate(fa.cfg.instrs):
            p = ins.parts
            if not (p[0] == "cp" and len(p) > 3 and p[1] == "async" and p[2] == "bulk"):
                continue
            dst = next((x for x in p[3:] if x.startswith("shared") or x == "global"), None)
            if dst is None or dst == "global":
                continue
            mc = "multicast::cluster" in p
            pair = "cta_group::2" in p
            if mc and dst != "shared::cluster":
                out.append(ctx.finding("AP8", ins.line, ins.col,
                                       f"multicast bulk copy into '.{dst}'; multicast needs the "
                                       "'.shared::cluster' destination window"))
            if (mc or pair) and csize is None:
                out.append(note_finding(ctx, "AP8", ins,
                                        "the kernel declares no cluster shape; whether the "
                                        + ("ctaMask" if mc else "'.cta_group::2' peer")
                                        + " is inside the cluster depends on the launch"))
                continue
            if pair and csize is not None and csize < 2:
                out.append(ctx.finding("AP8", ins.line, ins.col,
                                       f"'.cta_group::2' bulk copy in a cluster of {csize} CTA"))
            if mc and csize is not None and ins.operands:
                # the ctaMask is last, or before the cache policy of .L2::cache_hint
                k = -2 if "L2::cache_hint" in ins.parts and len(ins.operands) > 1 else -1
                m = fa.values.const(ins.operands[k], i)
                if m is None:
                    continue
                if m & ~((1 << csize) - 1) & 0xFFFF:
                    bad = [b for b in range(16) if m >> b & 1 and b >= csize]
                    out.append(ctx.finding(
                        "AP8", ins.line, ins.col,
                        f"multicast ctaMask {m:#x} names CTA rank(s) "
                        f"{', '.join(map(str, bad))} outside the cluster of {csize} CTAs",
                        notes=[Note(message=f"cluster shape: {csize} CTAs",
                                    line=fi.fn.line, col=fi.fn.col),
                               Note(message="the data and the complete_tx signal go to every "
                                            "masked CTA; use a mask below "
                                            f"{1 << csize:#x}")]))
    return out


# --------------------------------------------------------------------------------------- TM2

def _is_pair_op(ins) -> bool:
    return is_tc(ins, "mma", "cp", "shift", "commit") and "cta_group::2" in ins.parts


def _is_cluster_wait(ins) -> bool:
    p = ins.parts
    return p[0] == "barrier" and len(p) > 2 and p[1] == "cluster" and p[2] == "wait"


class PairPeerState(Property):
    """Fact: (a cluster barrier has completed, site of a cta_group::2 op since the last one)."""

    RULES = ("TM2",)

    def initial(self):
        return (False, -1)

    def relevant(self, ins):
        return _is_pair_op(ins) or _is_cluster_wait(ins)

    def transfer(self, i, ins, fact, report):
        started, pending = fact
        if _is_cluster_wait(ins):
            return (True, -1)
        if not started:
            report("TM2", f"'{ins.opcode.split('.cta_group')[0]}.cta_group::2' issued before any "
                          "cluster barrier: the peer CTA may not be running yet")
            started = True
        return (started, i if pending < 0 else pending)

    def at_exit(self, i, fact, report):
        if fact[1] >= 0:
            w = self.cfg.instrs[fact[1]]
            report("TM2", f"the CTA exits after '{w.opcode.split('.cta_group')[0]}.cta_group::2' "
                          f"(line {w.line}) with no cluster barrier after it: the peer CTA may "
                          "exit while the op still targets its tensor memory")


def pair_op_peer_running(ctx: Context) -> list[Finding]:
    """cta_group::2 tcgen05 op while the peer CTA may not be running (TM2).

    What it checks:
        On every path: a ``tcgen05.mma`` / ``cp`` / ``shift`` / ``commit`` with
        ``.cta_group::2`` is preceded by a ``barrier.cluster.wait`` (the peer has started), and
        between the last such op and the exit a ``barrier.cluster.wait`` executes (the peer has
        not exited while the op reads/writes its TMEM and shared memory).

    Why it is bad:
        The operands and accumulator span both CTAs' TMEM; touching an exited (or not yet
        started) peer is undefined behaviour (fault / corrupted results).

    Example:
        ``barrier.cluster.wait...; ...; tcgen05.shift.cta_group::2.down [%r3]; ret;``

    Use instead:
        ``...; tcgen05.shift.cta_group::2...; <completion>; barrier.cluster.arrive.release;
        barrier.cluster.wait.acquire; ret;``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.5; docs/ptx_rules.md TM2.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _is_pair_op):
        out += event_findings(ctx, fi, fa, PairPeerState, "TM2",
                              "synchronize the cluster ('barrier.cluster.arrive.release.aligned; "
                              "barrier.cluster.wait.acquire.aligned;') around cta_group::2 work")
    return out


# ----------------------------------------------------------------- guarantees (status semantics)

def commit_is_fence_semantics(ctx: Context) -> list[Finding]:
    """Guarantee modeled by the analysis, not a defect check: tcgen05.commit fences (TC3).

    What it checks:
        Nothing by itself (it reports no finding). ``tcgen05.commit`` implicitly acts as
        ``tcgen05.fence::before_thread_sync`` for the ops it tracks, so no explicit fence is
        needed before it. The rules that rely on this: TF3 (signal without fence) accepts a
        commit as the fence; TF2 / TC2 treat the commit's mbarrier arrive as completing the MMA.

    Why it is bad:
        Not applicable: this row states a guarantee. Requiring a fence before every commit would
        be a false alarm on correct CUTLASS / Triton code.

    Example:
        ``@%p5 tcgen05.mma...; @%p5 tcgen05.commit...mbarrier::arrive::one... [%r5];``

    Use instead:
        nothing to change.

    ptxas:
        not applicable.

    References:
        PTX ISA 9.1 §9.7.16.6.4.2; docs/ptx_rules.md TC3.
    """
    return []


def pipelined_pairs_semantics(ctx: Context) -> list[Finding]:
    """Guarantee modeled by the analysis, not a defect check: tcgen05 pipelined pairs (TF1).

    What it checks:
        Nothing by itself (it reports no finding). Pairs issued by one thread execute in issue
        order without synchronization: mma->mma (same cta_group, accumulator and shape),
        cp->mma, shift->mma, shift->cp.4x256b, mma->shift, and implicitly mma/cp/shift->commit,
        ld->wait::ld, st->wait::st. The rules that rely on this: TF2 does not flag a second MMA
        into an accumulator still being written by the first; TL4 / TL5 accept the wait as
        completing the thread's own ld / st; TC1 / TC2 accept the commit as tracking the MMAs.

    Why it is bad:
        Not applicable: this row states a guarantee.

    Example:
        ``tcgen05.mma... [%r6], ...; tcgen05.mma... [%r6], ...;`` (K loop, no wait between)

    Use instead:
        nothing to change.

    ptxas:
        not applicable.

    References:
        PTX ISA 9.1 §9.7.16.6.2, §9.7.16.6.2.1; docs/ptx_rules.md TF1.
    """
    return []


def barrier_scope_semantics(ctx: Context) -> list[Finding]:
    """Guarantee modeled by the analysis, not a defect check: what bar.* orders (B6).

    What it checks:
        Nothing by itself (it reports no finding). ``bar.sync`` / ``bar.red`` / ``bar.arrive``
        order prior generic-proxy memory ops among the participants, and nothing else: not
        async-proxy (TMA, wgmma, tcgen05.mma operand) accesses and not tcgen05 work. The rules
        that enforce the consequences: AP1 / AP2 / W5 / TM8 (a barrier without
        ``fence.proxy.async`` does not publish generic smem writes to the async proxy), TF3 /
        TF4 / TF5 / TA10 (a barrier without the tcgen05 fences does not order TMEM accesses),
        CA3 and TA3 (a barrier is what publishes generic writes to other threads).

    Why it is bad:
        Not applicable: this row states a guarantee; breaking its consequence is reported by
        the rules above.

    Example:
        ``st.shared...; bar.sync 0; cp.async.bulk.global.shared::cta...`` (AP1, not B6)

    Use instead:
        nothing to change.

    ptxas:
        not applicable.

    References:
        PTX ISA 9.1 §9.7.13.1, §8.6, §9.7.16.6.3; docs/ptx_rules.md B6.
    """
    return []
