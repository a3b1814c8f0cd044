"""W: wgmma (Hopper warpgroup MMA) rules. W5 lives in :mod:`verifier.rules.async_proxy`.

Sources: PTX ISA 9.1 §9.7.15 (wgmma) and ``docs/ptx_rules.md`` §4. W6 (stage WAR) and W7
(results shared without a barrier) live in :mod:`verifier.rules.hazards`.
"""

from __future__ import annotations

import re

from verifier.analysis import DIVERGENT, Property
from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.rules._flow import each_function, event_findings

__all__ = [
    "wgmma_acc_in_flight",
    "wgmma_divergent",
    "wgmma_fence_missing",
    "wgmma_shape_invalid",
    "wgmma_uncommitted",
]


def _wg(ins, op: str | None = None) -> bool:
    return ins.parts[0] == "wgmma" and (op is None or (len(ins.parts) > 1 and ins.parts[1] == op))


def wgmma_divergent(ctx: Context) -> list[Finding]:
    """``wgmma.*`` in lane-divergent code (W1).

    What it checks:
        Every wgmma instruction's guard and enclosing branches are at least warp-uniform.

    Why it is bad:
        ``.sync.aligned`` over the 128 threads of a warpgroup: undefined behaviour; ptxas
        serializes a lane-predicated wgmma (C7520).

    Example:
        ``@%p_lane wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 ...``

    Use instead:
        issue it from all 128 threads, unguarded.

    ptxas:
        no; INFO C7520 for a lane-predicated wgmma.

    References:
        PTX ISA 9.1 §9.7.15.1, §9.7.15.7; docs/ptx_rules.md W1.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _wg):
        v = fa.values
        for i, ins in enumerate(fa.cfg.instrs):
            if _wg(ins) and (v.context_class(i) == DIVERGENT or v.guard_single_lane(i)):
                out.append(ctx.finding("W1", ins.line, ins.col,
                                       f"warpgroup-collective '{ins.opcode.split('.sync')[0]}' is "
                                       "executed by only part of a warp",
                                       notes=[Note(message="its guard or an enclosing branch "
                                                   "depends on the lane")]))
    return out


def _acc_keys(fa) -> set[str]:
    keys: set[str] = set()
    for i, ins in enumerate(fa.cfg.instrs):
        if _wg(ins, "mma_async"):
            keys.update(fa.values.defs[i])
            for o in ins.operands[1:2]:
                if o.kind == "vector":     # register A fragment
                    keys.update(fa.cfg.reg_key(e.name, i) for e in o.elems if e.kind == "reg")
    return keys


class WgmmaState(Property):
    """Fact: ((phase, written), uncommitted mma sites, committed groups).

    ``phase``: False before any ``wgmma.fence`` on the path, True after a fence and before the
    next ``mma_async`` (the fence window), ``(shape, accumulator registers)`` after an
    ``mma_async`` (only an mma_async of the same shape may reuse that accumulator without a new
    fence, PTX ISA 9.1 §9.7.15.7.1). ``written``: ``(register, in_window)`` pairs, the
    accumulator / A-fragment registers written by non-wgmma instructions since the last fence,
    ``in_window`` True when the write sat inside the fence window. An ``mma_async`` is checked
    against its own registers only: a write of a register it does not use does not matter."""

    RULES = ("W2", "W3", "W4")
    CONFIRM = ("W3",)

    def __init__(self, cfg, values, fa=None):
        super().__init__(cfg, values, fa)
        self.acc = _acc_keys(fa)
        self.site_regs = {i: frozenset(values.defs[i]) | frozenset(
            cfg.reg_key(e.name, i) for o in ins.operands[1:2] if o.kind == "vector"
            for e in o.elems if e.kind == "reg")
            for i, ins in enumerate(cfg.instrs) if _wg(ins, "mma_async")}

    def initial(self):
        return ((False, frozenset()), frozenset(), ())

    def relevant_index(self, i):
        ins = self.cfg.instrs[i]
        if ins.parts[0] == "wgmma":
            return True
        v = self.values
        return any(k in self.acc for k in v.defs[i]) or any(k in self.acc for k in v.uses[i])

    def transfer(self, i, ins, fact, report):
        fenced, unc, groups = fact
        if ins.parts[0] == "wgmma":
            op = ins.parts[1]
            if op == "fence":
                return ((True, frozenset()), unc, groups)
            if op == "mma_async":
                shape = next((x for x in ins.parts if x.startswith("m") and "n" in x
                              and "k" in x), None)
                acc = frozenset(self.values.defs[i])
                phase, written = fenced
                mine = self.site_regs[i]
                late = sorted(k for k, w in written if k in mine and not w)
                early = sorted(k for k, w in written if k in mine and w)
                if phase is False:
                    report("W2", "'wgmma.mma_async' is not preceded by 'wgmma.fence' on this "
                                 "path")
                elif late:
                    report("W2", f"'wgmma.mma_async' uses '{late[0]}' as accumulator or A "
                                 "fragment, written after an earlier 'wgmma.mma_async' with no "
                                 "'wgmma.fence' in between")
                elif isinstance(phase, tuple) and phase[0] != shape and phase[1] & acc:
                    report("W2", f"'wgmma.mma_async' ({shape}) reuses the accumulator of the "
                                 f"previous 'wgmma.mma_async' of a different shape ({phase[0]}) "
                                 "without 'wgmma.fence' (the no-fence exception covers the same "
                                 "shape only)")
                elif early:
                    report("W2", f"'{early[0]}', an accumulator / A-fragment register of this "
                                 "'wgmma.mma_async', is written between 'wgmma.fence' and it: "
                                 "PTX ISA 9.1 §9.7.15.7.1 asks for the fence after the write "
                                 "(ptxas repairs it: moves the write before its "
                                 "warpgroup.arrive or injects one, C7519; LLVM emits such a copy "
                                 "for a repeated accumulator value)", severity="warning")
                # each written register is reported once, at the first mma_async that uses it
                written = frozenset(x for x in written if x[0] not in mine)
                return (((shape, acc), written), unc | {i}, groups)
            if op == "commit_group":
                return (fenced, frozenset(), (groups + (unc,))[-4:])
            if op == "wait_group":
                if unc:
                    report("W4", "'wgmma.wait_group' does not cover 'wgmma.mma_async' issued "
                                 "after the last 'wgmma.commit_group'")
                n = self.values.const(ins.operands[0], i) if ins.operands else None
                if n is None:
                    return fact
                return (fenced, unc, groups[len(groups) - n:] if n else ())
            return fact
        # a non-wgmma instruction touching accumulator / A-fragment registers
        v = self.values
        touched = set(v.defs[i]) | set(v.uses[i])
        live = set()
        for s in unc:
            live |= self.site_regs[s]
        for g in groups:
            for s in g:
                live |= self.site_regs[s]
        hit = touched & live
        if hit:
            r = sorted(hit)[0]
            report("W3", f"'{ins.opcode}' accesses '{r}', a register of an in-flight "
                         "'wgmma.mma_async' (no 'wgmma.wait_group' covering it)")
        phase, written = fenced
        new = [k for k in v.defs[i] if k in self.acc]
        if new and phase is not False:
            return ((phase, written | {(k, phase is True) for k in new}), unc, groups)
        return fact

    def at_exit(self, i, fact, report):
        if fact[1]:
            report("W4", "the kernel exits with 'wgmma.mma_async' never committed")

    def describe(self, i, ins, old, new):
        if old == new:
            return None
        return ins.opcode.split(".sync")[0]


def wgmma_fence_missing(ctx: Context) -> list[Finding]:
    """``wgmma.mma_async`` without a preceding ``wgmma.fence`` (W2).

    What it checks:
        On every path, a ``wgmma.fence`` executes between the function entry and an
        ``mma_async``, and between a non-wgmma write of one of *its* accumulator / A-fragment
        registers that follows an earlier ``mma_async`` and it (error; writes of registers it
        does not use do not matter). Back-to-back ``mma_async`` of the same shape need none; one
        of a different shape reusing the previous accumulator does (PTX ISA 9.1 §9.7.15.7.1).
        A write of its register between the fence and the ``mma_async`` breaks the ISA's letter
        too, but it is what LLVM emits for Triton's own code (Triton 3.9 flash attention:
        ``wgmma.fence; mov.b32 %r353, %r347; wgmma.mma_async {..%r353..}``, a copy for a repeated
        accumulator value) and ptxas repairs it (CUDA 13.0: the write scheduled before
        ``WARPGROUP.ARRIVE`` in SASS, or an arrive injected with C7519): a warning.

    Why it is bad:
        Undefined behaviour; ptxas silently injects ``warpgroup.arrive`` (C7519) instead of
        rejecting.

    Example:
        ``mov.f32 %f1, 0f00000000; wgmma.mma_async... {%f1, ...}``

    Use instead:
        ``...; wgmma.fence.sync.aligned; wgmma.mma_async...``

    ptxas:
        INFO C7519 (silent repair) for the errors; nothing for the warning.

    References:
        PTX ISA 9.1 §9.7.15.7.1; docs/ptx_rules.md W2.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: _wg(x, "mma_async")):
        out += event_findings(ctx, fi, fa, WgmmaState, "W2",
                              "insert 'wgmma.fence.sync.aligned;' before the first mma_async")
    return out


def wgmma_acc_in_flight(ctx: Context) -> list[Finding]:
    """Accumulator / A registers touched while their ``mma_async`` is in flight (W3).

    What it checks:
        A non-wgmma instruction reading or writing a register of an ``mma_async`` is preceded by
        a ``wgmma.wait_group N`` that retires that mma's group (groups counted per path).

    Why it is bad:
        Undefined behaviour / nondeterministic results (DeepGEMM#449, ThunderKittens#33); ptxas
        injects a wait (C7517) and serializes (C7514).

    Example:
        ``wgmma.mma_async...; wgmma.commit_group...; cvt.rn.f16.f32 %h1, %f1;``

    Use instead:
        ``wgmma.wait_group.sync.aligned 0;`` before reading the accumulator.

    ptxas:
        INFO C7517 + C7514 (silent repair).

    References:
        PTX ISA 9.1 §9.7.15.7.3; docs/ptx_rules.md W3.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: _wg(x, "mma_async")):
        out += event_findings(ctx, fi, fa, WgmmaState, "W3",
                              "insert 'wgmma.wait_group.sync.aligned 0;' before this access")
    return out


def wgmma_uncommitted(ctx: Context) -> list[Finding]:
    """``mma_async`` never committed before a wait or the exit (W4).

    What it checks:
        Every ``mma_async`` is followed by ``wgmma.commit_group`` before the next
        ``wgmma.wait_group`` and before the kernel exits.

    Why it is bad:
        An uncommitted ``mma_async`` is covered by no wait: its results are unsynchronized
        (NVIDIA/Fuser#3561).

    Example:
        ``wgmma.mma_async...; wgmma.wait_group.sync.aligned 0;``

    Use instead:
        ``wgmma.mma_async...; wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned 0;``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.15.7.2-3; docs/ptx_rules.md W4.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: _wg(x, "mma_async")):
        out += event_findings(ctx, fi, fa, WgmmaState, "W4",
                              "insert 'wgmma.commit_group.sync.aligned;' after the mma_async")
    return out


_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32, "b1": 256}
_INT_N = {8, 16, 24} | set(range(32, 257, 16))


def wgmma_shape_invalid(ctx: Context) -> list[Finding]:
    """wgmma shape or constant descriptor field invalid (W8).

    What it checks:
        ``m64nNkK``: M = 64; N in 8..256 step 8 (s8/u8/b1: 8, 16, 24, 32, 48, ..., 256); K = 16
        (f16/bf16), 8 (tf32), 32 (fp8/int8), 256 (b1), doubled when sparse. Shared-memory
        descriptors with known high bits: reserved bits 46-48 and 52-61 of the sm_90 descriptor
        are 0.

    Why it is bad:
        Undefined behaviour / garbage operands.

    Example:
        descriptor ``%rd1 | 0x4000404000000000`` (bit 46 set).

    Use instead:
        ``%rd1 | 0x4000004000000000`` (128B swizzle, SBO 1024 B).

    ptxas:
        shape: syntax only; descriptor: no.

    References:
        PTX ISA 9.1 §9.7.15.2, §9.7.15.5.1.2; docs/ptx_rules.md W8.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, lambda x: _wg(x, "mma_async")):
        for i, ins in enumerate(fa.cfg.instrs):
            if not _wg(ins, "mma_async"):
                continue
            shape = next((m for p in ins.parts if (m := _SHAPE.fullmatch(p))), None)
            types = [p for p in ins.parts if p in _K]
            if shape and types:
                m, n, k = map(int, shape.groups())
                t = types[-1]
                want_k = _K[t] * (2 if "sp" in ins.parts else 1)
                okn = (n in _INT_N) if t in ("s8", "u8", "b1") else (8 <= n <= 256 and n % 8 == 0)
                if m != 64 or not okn or k != want_k:
                    out.append(ctx.finding("W8", ins.line, ins.col,
                                           f"wgmma shape m{m}n{n}k{k} is not legal for '.{t}' "
                                           f"(M=64, K={want_k})"))
            for o in ins.operands[1:3]:
                if o.kind != "reg":
                    continue
                v = fa.values.op_val(o, i)
                if v is None or v[0] != "k":
                    continue
                rsv = (0b111 << 46) | (0x3FF << 52)
                bad = v[1] & rsv & v[2]
                if bad:
                    out.append(ctx.finding("W8", ins.line, ins.col,
                                           f"wgmma descriptor '{o.text}' sets reserved bit(s) "
                                           f"{', '.join(str(b) for b in range(64) if bad >> b & 1)}",
                                           notes=[Note(message="sm_90 descriptor: start 0-13, LBO "
                                                       "16-29, SBO 32-45, base offset 49-51, "
                                                       "swizzle 62-63")]))
    return out
