"""Helpers shared by the synchronization rule families: instruction classes, address values,
and turning dataflow events into findings with witness notes.

Sources: PTX ISA 9.1 §9.7.13 (barriers, mbarrier, fences), §9.7.9.25 (cp.async, bulk copies),
§9.7.15 (wgmma), §9.7.16 (tcgen05).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from verifier.analysis import FunctionAnalysis, Property
from verifier.analysis.dataflow import Event
from verifier.context import Context, FunctionInfo
from verifier.findings import Finding, Note
from verifier.ptx.ast import Instruction

__all__ = [
    "addr_val",
    "each_function",
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
    return None


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
