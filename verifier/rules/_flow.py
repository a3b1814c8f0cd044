"""Helpers shared by the synchronization rule families: instruction classes, address values,
and turning dataflow events into findings with witness notes.

Sources: PTX ISA 9.1 §9.7.13 (barriers, mbarrier, fences), §9.7.9.25 (cp.async, bulk copies),
§9.7.15 (wgmma), §9.7.16 (tcgen05).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from verifier.analysis import FunctionAnalysis, Property
from verifier.analysis.dataflow import Event
from verifier.analysis.ranges import Ranges
from verifier.analysis.values import mul_half
from verifier.context import Context, FunctionInfo
from verifier.findings import Finding, Note
from verifier.ptx.ast import Instruction

__all__ = [
    "local_def",
    "addr_val",
    "call_contexts",
    "called_single_lane",
    "each_function",
    "eval_concrete",
    "induction",
    "event_findings",
    "events_for",
    "fmt_addr",
    "has_op",
    "is_arrive_signal",
    "is_cta_barrier",
    "is_mbar_wait",
    "is_smem_read",
    "is_smem_write",
    "is_tc",
    "mbar_operand",
    "note_finding",
    "wait_parity_operand",
    "witness_notes",
]


def has_op(ctx: Context, pred: Callable[[Instruction], bool]) -> bool:
    """Any instruction of the module satisfies ``pred``."""
    return any(pred(ins) for fi in ctx.functions for ins, _ in fi.instructions)


def each_function(ctx: Context, pred: Callable[[Instruction], bool] | None = None
                  ) -> Iterable[tuple[FunctionInfo, FunctionAnalysis]]:
    """Functions with a body (and, with ``pred``, at least one matching instruction)."""
    for fi in ctx.bodies():
        if pred is not None and not any(pred(ins) for ins, _ in fi.instructions):
            continue
        yield fi, ctx.analysis(fi)


def _callee(ins: Instruction) -> str | None:
    """Name of the function a direct ``call`` targets, or None."""
    if ins.parts[0] != "call":
        return None
    for o in ins.operands:
        if o.kind == "symbol":
            return o.name
    return None


def call_effects(fa, ins: Instruction) -> frozenset[str]:
    """What a direct ``call`` does to mbarrier / TMEM lifecycles (its callee's
    :meth:`verifier.context.Context.callee_effects`; empty for any other instruction)."""
    name = _callee(ins)
    if name is None:
        return frozenset()
    return fa.cache.get("callee_effects", {}).get(name, frozenset())


def _call_sites(ctx: Context):
    """Every direct ``call``: ``(caller name, callee name, caller's FunctionAnalysis, instruction
    index, instruction)``, over the bodies that contain a call."""
    for fi in ctx.bodies():
        if not any(ins.parts[0] == "call" for ins, _ in fi.instructions):
            continue
        fa = ctx.analysis(fi)
        for i, ins in enumerate(fa.cfg.instrs):
            name = _callee(ins)
            if name is not None:
                yield fi.fn.name, name, fa, i, ins


def call_contexts(ctx: Context) -> dict[str, tuple[int, Instruction | None]]:
    """Per ``.func`` name: the worst warp-role context of its call sites (UNIFORM / WARP /
    DIVERGENT, the call's own context joined with its caller's, through call chains) and one
    call site of that class. So a callee's CTA-wide barrier or single-thread instruction is
    judged in the caller's warp-role context (PTX ISA 9.1 §7: a call executes the callee in the
    calling threads). Functions never called directly are absent. Cached on the context."""
    cached = getattr(ctx, "_call_contexts", None)
    if cached is not None:
        return cached
    from verifier.analysis import UNIFORM

    sites = [(caller, callee, fa.values.context_class(i), ins)    # caller, callee, class, call
             for caller, callee, fa, i, ins in _call_sites(ctx)]
    out: dict[str, tuple[int, Instruction | None]] = {}
    for _ in range(8):                      # call chains deeper than 8 keep what they have
        changed = False
        for caller, callee, c, ins in sites:
            c = max(c, out.get(caller, (UNIFORM, None))[0])
            prev = out.get(callee)
            if prev is None or c > prev[0]:
                out[callee] = (c, ins)
                changed = True
        if not changed:
            break
    ctx._call_contexts = out  # type: ignore[attr-defined]
    return out


def induction(fa, key):
    """``(init, step, increment index)`` when register ``key`` is a loop counter: exactly two
    unguarded definitions, ``mov key, c0`` and ``add key, key, c`` (c constant); else None."""
    v, cfg = fa.values, fa.cfg
    sites = v.def_sites.get(key, ())
    if len(sites) != 2:
        return None
    init = step = inc = None
    for j in sites:
        d = cfg.instrs[j]
        if d.predicate is not None:
            return None
        ops = d.operands
        if d.parts[0] == "mov" and len(ops) == 2:
            init = v.const(ops[1], j)
        elif d.parts[0] == "add" and len(ops) == 3 and ops[1].kind == "reg" \
                and cfg.reg_key(ops[1].name, j) == key:
            step, inc = v.const(ops[2], j), j
    if init is None or step is None or inc is None:
        return None
    return init, step, inc


def eval_concrete(fa, o, i, env, syms, depth=0, entry=False, local=False):
    """Concrete value of operand ``o`` at instruction ``i`` for one thread.

    Args:
        env: values of registers by key (loop counters) and of special registers by name
            (``%tid.x``, ``%laneid``).
        syms: symbol -> fake base address (filled on first use; distinct symbols get bases
            4 GiB apart, so offsets within one symbol compare exactly).
    Returns None when a register has several definitions not in ``env``, a guarded definition,
    or an opcode outside the integer subset (add, sub, mul, mad, shl, shr, and, or, xor, div,
    rem, bfe, mov, cvt, cvta; PTX ISA 9.1 §9.7.1-§9.7.3). With ``entry``, a register with
    several definitions takes the one reaching ``i`` from outside every loop (its value on
    the first entry: a phase register carried by an outer persistent loop starts there)."""
    if depth > 32 or o is None:
        return None
    if o.kind == "imm":
        return o.value if isinstance(o.value, int) else None
    if o.kind == "symbol":
        return syms.setdefault(o.name, (len(syms) + 1) << 32) + (o.value or 0)
    if o.kind == "address":
        if o.base is None:
            return None
        b = eval_concrete(fa, o.base, i, env, syms, depth + 1, local=local)
        return None if b is None else b + (o.value or 0)
    if o.kind != "reg" or not o.name:
        return None
    if o.name.startswith("%") and o.name in env:
        return env[o.name]
    cfg, v = fa.cfg, fa.values
    key = cfg.reg_key(o.name, i)
    if key in env:
        return env[key]
    sites = v.def_sites.get(key, ())
    if len(sites) != 1 and local:
        loc = local_def(fa, key, i)
        if loc is not None:   # a reused temporary: the one definition this use reads
            return eval_instr(fa, loc, env, syms, depth, entry, local=True)
    if len(sites) != 1 and entry:
        sites = tuple(j for j in v.reaching(key, i) if cfg.block_of[j] not in cfg.in_cycle)
    if len(sites) != 1:
        return None
    return eval_instr(fa, sites[0], env, syms, depth, entry, local=local)


def local_def(fa, key: str, i: int) -> int | None:
    """The definition of register ``key`` that a use at instruction ``i`` reads when it is the
    only one reaching ``i``, unguarded, and executes before ``i`` whenever ``i`` runs (its block
    dominates ``i``'s; earlier in the block when the same): a scratch register reused all over
    a hand-written kernel is then as good as a single definition there (inside a loop it is
    the value computed in the same iteration). Else None."""
    cfg, v = fa.cfg, fa.values
    r = v.reaching(key, i)
    if len(r) != 1:
        return None
    j = r[0]
    bj, bi = cfg.block_of[j], cfg.block_of[i]
    if cfg.instrs[j].predicate is not None or (bj == bi and not j < i) or \
            (bj != bi and not cfg.dominates(bj, bi)):
        return None
    return j


_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b, "hi": lambda a, b: a > b,
        "hs": lambda a, b: a >= b}


def eval_instr(fa, j, env, syms, depth=0, entry=False, guarded=False, local=False):
    """Concrete value instruction ``j`` defines, its operands evaluated as in
    :func:`eval_concrete` (None outside the integer subset or under a guard). Besides the
    arithmetic subset: ``setp`` (1 / 0, integer compares), ``selp`` and ``not`` (PTX ISA 9.1
    §9.7.3.1, §9.7.3.3, §9.7.8.1), so phases written ``p ^= (idx == S - 1)`` evaluate.
    ``guarded``: the caller has decided the instruction's guard holds (evaluate it anyway).
    ``local``: a register defined several times is evaluated through :func:`local_def` (the
    one definition reaching the use), for callers that model hand-written loops."""
    cfg = fa.cfg
    d = cfg.instrs[j]
    if (d.predicate is not None and not guarded) or depth > 32:
        return None
    b, ops = d.parts[0], d.operands
    if b == "setp" and len(ops) >= 3 and len(d.parts) > 2 and d.parts[1] in _CMP:
        x = eval_concrete(fa, ops[1], j, env, syms, depth + 1, entry, local)
        y = eval_concrete(fa, ops[2], j, env, syms, depth + 1, entry, local)
        if x is None or y is None or len(ops) > 3:
            return None
        w = next((int(t[1:]) for t in d.parts[2:] if t[1:].isdigit()), 32)
        if d.parts[-1].startswith("s"):
            x, y = [(z & ((1 << w) - 1)) - ((z >> (w - 1) & 1) << w) for z in (x, y)]
        else:
            x, y = x & ((1 << w) - 1), y & ((1 << w) - 1)
        return int(_CMP[d.parts[1]](x, y))
    if b == "selp" and len(ops) == 4:
        c = eval_concrete(fa, ops[3], j, env, syms, depth + 1, entry, local)
        if c is None:
            return None
        return eval_concrete(fa, ops[1] if c else ops[2], j, env, syms, depth + 1, entry, local)
    if b == "not" and len(ops) == 2:
        x = eval_concrete(fa, ops[1], j, env, syms, depth + 1, entry, local)
        if x is None:
            return None
        return 1 - (x & 1) if "pred" in d.parts else ~x & 0xFFFFFFFFFFFFFFFF
    if b in ("mov", "cvt", "cvta") and len(ops) == 2:
        return eval_concrete(fa, ops[1], j, env, syms, depth + 1, entry, local)
    vals = [eval_concrete(fa, x, j, env, syms, depth + 1, entry, local) for x in ops[1:]]
    if not vals or any(x is None for x in vals):
        return None
    a = vals[0]
    c = vals[1] if len(vals) > 1 else None
    try:
        if b == "add":
            return a + c
        if b == "sub":
            return a - c
        if b in ("mul", "mad") and ("hi" in d.parts or "lo" in d.parts):
            # the high / low half of the double-width product (PTX ISA 9.1 §9.7.1.5): LLVM's
            # division by a constant ('mul.hi.u32 %q, %n, 0xAAAAAAAB; shr.u32 %q, %q, 1')
            w = next((int(t[1:]) for t in d.parts[2:] if t[1:].isdigit()), 32)
            m_ = (1 << w) - 1
            r = mul_half(d, a & m_, c & m_, w) if "hi" in d.parts else (a * c) & m_
            return r + vals[2] if b == "mad" and len(vals) == 3 else r
        if b == "mul":
            return a * c
        if b == "mad" and len(vals) == 3:
            return a * c + vals[2]
        if b == "shl":
            return a << c
        if b == "shr":
            return a >> c
        if b == "and":
            return a & c
        if b == "or":
            return a | c
        if b == "xor":
            return a ^ c
        if b == "div" and c:
            return a // c
        if b == "rem" and c:
            return a % c
        if b == "bfe" and len(vals) == 3:
            return (a >> c) & ((1 << vals[2]) - 1)
    except TypeError:
        return None
    return None


def called_single_lane(ctx: Context) -> set[str]:
    """Names of the ``.func`` s every direct call of which runs in at most one lane per warp (an
    ``elect.sync`` / ``lane == 0`` guard or region at the call, or a caller that is itself
    called that way), so the callee's single-thread instructions (``tcgen05.mma``, ``commit``)
    inherit the caller's elected thread. Cached on the context."""
    cached = getattr(ctx, "_called_single", None)
    if cached is not None:
        return cached
    sites = [(caller, callee, fa.values.guard_single_lane(i))
             for caller, callee, fa, i, _ins in _call_sites(ctx)]
    called = {c for _, c, _ in sites}
    single = set(called)
    for _ in range(8):
        nxt = {c for c in called
               if all(s or caller in single for caller, cc, s in sites if cc == c)}
        if nxt == single:
            break
        single = nxt
    ctx._called_single = single  # type: ignore[attr-defined]
    return single


def is_tc(ins: Instruction, *names: str) -> bool:
    """``tcgen05.<name>`` (any of ``names``; no names: any tcgen05)."""
    p = ins.parts
    if p[0] != "tcgen05":
        return False
    if not names:
        return True
    if len(p) < 2:
        return False
    x = p[1]
    return x in names or any(x.startswith(n + "::") for n in names)


def is_cta_barrier(ins: Instruction) -> bool:
    """A waiting CTA-level barrier (``bar.sync``, ``bar.red``, ``barrier.sync``, ``barrier.red``,
    ``barrier.cluster.wait``): orders generic memory among its participants."""
    p = ins.parts
    if p[0] == "bar" and len(p) > 1 and p[1] in ("sync", "red"):
        return True
    if p[0] == "barrier":
        if len(p) > 1 and p[1] in ("sync", "red"):
            return True
        if len(p) > 2 and p[1] == "cluster" and p[2] == "wait":
            return True
    return False


def is_arrive_signal(ins: Instruction) -> bool:
    """A release-side signal without a wait: ``mbarrier.arrive*``, ``bar.arrive``,
    ``barrier.arrive``, ``barrier.cluster.arrive``."""
    p = ins.parts
    if p[0] == "mbarrier" and len(p) > 1 and p[1].startswith("arrive"):
        return True
    if p[0] in ("bar", "barrier") and len(p) > 1 and p[1] == "arrive":
        return True
    return p[0] == "barrier" and len(p) > 2 and p[1] == "cluster" and p[2] == "arrive"


def is_mbar_wait(ins: Instruction) -> bool:
    """``mbarrier.try_wait`` / ``mbarrier.test_wait``."""
    p = ins.parts
    return p[0] == "mbarrier" and len(p) > 1 and p[1] in ("try_wait", "test_wait")


def is_smem_read(ins: Instruction) -> bool:
    """Generic-proxy shared-memory read: ``ld.shared*``, ``ldmatrix``."""
    p = ins.parts
    return (p[0] == "ld" and len(p) > 1 and p[1].startswith("shared")) or p[0] == "ldmatrix"


def is_smem_write(ins: Instruction) -> bool:
    """Generic-proxy shared-memory write: ``st.shared*``, ``stmatrix``, ``atom``/``red`` on shared."""
    p = ins.parts
    if p[0] in ("st", "atom", "red") and len(p) > 1 and p[1].startswith("shared"):
        return True
    return p[0] == "stmatrix"


def wait_parity_operand(ins: Instruction):
    """The phase-parity operand of ``mbarrier.test_wait/try_wait.parity waitComplete, [addr],
    phaseParity{, suspendTimeHint}``: the operand after the address (the optional time hint
    comes last, PTX ISA 9.1 §9.7.13.15.16), or None."""
    ops = ins.operands
    k = next((j for j, o in enumerate(ops) if o.kind == "address"), None)
    return ops[k + 1] if k is not None and k + 1 < len(ops) else None


def mbar_operand(ins: Instruction):
    """The mbarrier address operand of an mbarrier / commit / bulk-copy instruction, or None."""
    p = ins.parts
    ops = ins.operands
    if p[0] == "mbarrier":
        if len(p) > 1 and p[1] in ("try_wait", "test_wait", "arrive", "arrive_drop") or \
                (len(p) > 1 and p[1].startswith("arrive")):
            for o in ops:
                if o.kind == "address":
                    return o
            return None
        return ops[0] if ops else None
    if p[0] == "tcgen05" and len(p) > 1 and p[1] == "commit":
        return ops[0] if ops else None
    if p[0] == "cp" and any(x.startswith("mbarrier::complete_tx") for x in p):
        addrs = [o for o in ops if o.kind == "address"]
        return addrs[2] if len(addrs) >= 3 else None
    if p[0] in ("st", "red") and "async" in p and any(
            x.startswith("mbarrier::complete_tx") for x in p):
        addrs = [o for o in ops if o.kind == "address"]  # st.async [a], b, [mbar]
        return addrs[1] if len(addrs) >= 2 else None
    return None


def ranges_of(fa: FunctionAnalysis) -> Ranges:
    """The function's :class:`~verifier.analysis.ranges.Ranges` (interval analysis), built
    once and cached on ``fa``."""
    r = fa.cache.get("ranges")
    if r is None:
        r = fa.cache["ranges"] = Ranges(fa.cfg, fa.values, fa.threads)
    return r


def addr_val(fa: FunctionAnalysis, o, i: int):
    """Resolved ``("s", symbol, offset)`` / constant value of an address operand, or None."""
    if o is None:
        return None
    v = fa.values.op_val(o, i)
    if v is None:
        return None
    if v[0] == "s":
        return v
    if v[0] == "k" and v[1] == (1 << 64) - 1:
        return v
    return None


def fmt_addr(v) -> str:
    """``global_smem+98304`` for a resolved address."""
    if v is None:
        return "?"
    if v[0] == "s":
        return f"{v[1]}+{v[2]}" if v[2] else str(v[1])
    return hex(v[2])


def witness_notes(cfg, ev: Event) -> list[Note]:
    """Notes for an event's witness: each step at its line, then the path summary."""
    notes: list[Note] = []
    steps = [(i, d) for i, d in ev.witness if d != "here"]
    for i, d in steps[-6:]:
        ins = cfg.instrs[i]
        notes.append(Note(message=f"{d}: '{ins.opcode}'", line=ins.line, col=ins.col))
    path = " -> ".join(f"line {cfg.instrs[i].line}" + (f" ({d})" if d.startswith("branch") else "")
                       for i, d in ev.witness)
    notes.append(Note(message=f"witness path: entry -> {path or 'exit'}"
                      + ("" if ev.index is not None else " -> end of function")))
    return notes


def event_findings(ctx: Context, fi: FunctionInfo, fa: FunctionAnalysis, prop: type[Property],
                   rule: str, hint: str | None = None) -> list[Finding]:
    """Findings of ``rule`` from a solved property (plus a note if it did not converge)."""
    evs, ok = fa.solve(prop)
    out: list[Finding] = []
    for ev in evs:
        if ev.rule != rule:
            continue
        if ev.index is not None:
            ins = fa.cfg.instrs[ev.index]
            line, col = ins.line, ins.col
        else:
            body = fi.fn.body
            line, col = (body.end_line, body.end_col) if body is not None else (fi.fn.line, 1)
        notes = witness_notes(fa.cfg, ev)
        fix = ev.fix
        if hint is not None and fix is None:
            notes.append(Note(message=hint))
        out.append(ctx.finding(rule, line, col, ev.message, notes=notes, fix=fix,
                               severity=ev.severity))  # type: ignore[arg-type]
    if not ok and rule == _first_rule(prop):
        out.append(ctx.finding(rule, fi.fn.line, fi.fn.col,
                               f"analysis of '{fi.fn.name}' did not reach a fixed point; "
                               "its synchronization was not fully checked", severity="note"))
    return out


def events_for(fa: FunctionAnalysis, prop: type[Property], rule: str) -> list[Event]:
    """Raw events of one rule."""
    return [e for e in fa.solve(prop)[0] if e.rule == rule]


def _first_rule(prop: type[Property]) -> str:
    return getattr(prop, "RULES", ("",))[0]


def note_finding(ctx: Context, rule: str, ins: Instruction, message: str) -> Finding:
    """A note-severity finding: the rule could not decide statically."""
    return ctx.finding(rule, ins.line, ins.col, message, severity="note",
                       notes=[Note(message="the rule could not be decided statically; "
                                           "check this site by hand or on the GPU")])


def unmodelled_guard(fa: FunctionAnalysis, i: int) -> bool:
    """Instruction ``i``'s guard has a CTA-uniform conjunct the path solver's assumptions cannot
    model: its ``and.pred`` tree (up to 4 levels) holds a uniform predicate that is not one
    ``setp`` of a register against a constant (a register-register compare, a multi-definition
    predicate, a loaded predicate). Lane- and warp-dependent conjuncts (``elect.sync``,
    ``%tid`` compares) are ignored: they select threads, not paths."""
    ins = fa.cfg.instrs[i]
    if ins.predicate is None:
        return False
    v = fa.values

    def walk(key: str, depth: int) -> bool:
        sites = v.def_sites.get(key, ())
        if len(sites) != 1:
            return v.cls.get(key, 2) == 0
        d = fa.cfg.instrs[sites[0]]
        if d.parts[0] == "and" and depth < 4:
            return any(walk(fa.cfg.reg_key(o.name, sites[0]), depth + 1)
                       for o in d.operands[1:] if o.kind == "reg" and o.name)
        if v.cls.get(key, 2) != 0:
            return False
        if d.parts[0] != "setp":
            return True
        srcs = [o for o in d.operands[1:3]]
        return len(srcs) < 2 or all(v.const(o, sites[0]) is None for o in srcs)

    return walk(fa.cfg.reg_key(ins.predicate, i), 0)
