"""D: declarations and names (PTX ISA 9.1 §4.4 identifiers, §5.1 state spaces, §10 special
registers, §11.1 scoping). Tables come from :mod:`verifier.context`."""

from __future__ import annotations

from verifier.context import (
    PREDEFINED_IDENTIFIERS,
    Context,
    FunctionInfo,
    ScopeInfo,
    is_special_register,
)
from verifier.findings import Finding, Note
from verifier.ptx.ast import Instruction, Label, Operand, RegDecl

__all__ = ["duplicate_definition", "undeclared_name", "undefined_target"]


def _decl_text(d: object) -> str:
    if isinstance(d, RegDecl) and d.count is not None:
        return f"{d.name}<{d.count}>"
    return getattr(d, "name", "?")


class _Uses:
    """First use and use count per (message, name) within one function."""

    def __init__(self) -> None:
        self.first: dict[tuple[str, str], tuple[int, int, list[Note]]] = {}
        self.count: dict[tuple[str, str], int] = {}

    def add(self, kind: str, name: str, line: int, col: int, notes: list[Note]) -> None:
        key = (kind, name)
        if key not in self.first:
            self.first[key] = (line, col, notes)
            self.count[key] = 1
        else:
            self.count[key] += 1


def undeclared_name(ctx: Context) -> list[Finding]:
    """Use of an undeclared register or identifier (D1).

    What it checks:
        Every register operand (and guard predicate) names a register declared with ``.reg`` in
        the current block or an enclosing one, before the use; ``%r<120>`` declares ``%r0`` ..
        ``%r119`` only. Predefined registers (``%tid.x``, ``%laneid``, ``%clock64``,
        ``%envreg3``, ``%cluster_ctarank`` ...) need no declaration. Bare identifiers must name a
        register, variable, parameter, function or label of the module (or ``WARP_SZ``).
        Each name is reported once per function, at its first use.

    Why it is bad:
        ptxas rejects the module ("Unknown symbol"). Typical LLM slip: one register past the
        declared range after adding an instruction.

    Example:
        ``.reg .b32 %r<10>;`` then ``mov.b32 %r10, 1;``

    Use instead:
        ``.reg .b32 %r<11>;``

    ptxas:
        ERR.

    References:
        PTX ISA 9.1 §5.1.1 (registers, parameterised names), §10 (special registers), §11.1
        (scoping).
    """
    out: list[Finding] = []
    for fi in ctx.functions:
        if fi.root is None:
            continue
        uses = _Uses()
        labels = fi.all_labels()
        # names already resolved in a block stay resolved for later uses there (declarations do
        # not move), so most operands cost one set lookup
        resolved: dict[ScopeInfo, set[str]] = {}
        for ins, si in fi.instructions:
            ok = resolved.get(si)
            if ok is None:
                ok = resolved[si] = set()
            pred = ins.predicate
            if (pred is not None and pred not in ok
                    and _check_name(ctx, fi, si, labels, pred, ins.line, ins.col, uses)):
                ok.add(pred)
            ops = ins.operands
            if ins.parts[0] == "call":
                ops = tuple(o for o in ops if o.kind != "symbol")  # the callee is D2's
            for op in ops:
                if op.kind == "reg":
                    name = op.name
                    if name not in ok and _check_name(ctx, fi, si, labels, name, op.line, op.col,
                                                      uses):
                        ok.add(name)  # type: ignore[arg-type]
                else:
                    _check_operand(ctx, fi, si, labels, op, uses, ok)
        for (kind, name), (line, col, notes) in uses.first.items():
            n = uses.count[(kind, name)]
            notes = list(notes)
            if n > 1:
                notes.append(Note(message=f"'{name}' is used {n - 1} more time"
                                          f"{'s' if n > 2 else ''} in '{fi.fn.name}'"))
            out.append(ctx.finding("D1", line, col, kind.format(name=name), notes=notes))
    return out


def _check_operand(ctx: Context, fi: FunctionInfo, si: ScopeInfo, labels: dict[str, Label],
                   op: Operand, uses: _Uses, ok: set[str]) -> None:
    k = op.kind
    if k == "reg" or k == "symbol":
        name = op.name or op.text
        if name not in ok and _check_name(ctx, fi, si, labels, name, op.line, op.col, uses):
            ok.add(name)
    elif k == "address":
        if op.base is not None and op.base.kind in ("reg", "symbol"):
            _check_operand(ctx, fi, si, labels, op.base, uses, ok)
        for e in op.elems:
            _check_operand(ctx, fi, si, labels, e, uses, ok)
    elif k in ("vector", "list", "pair"):
        for e in op.elems:
            _check_operand(ctx, fi, si, labels, e, uses, ok)


def _check_name(ctx: Context, fi: FunctionInfo, si: ScopeInfo, labels: dict[str, Label],
                name: str, line: int, col: int, uses: _Uses) -> bool:
    """Record a bad use of ``name``; True when it resolves (and is declared before this use)."""
    is_pct = name[:1] == "%"
    if is_pct and is_special_register(name):
        return True
    d = si.lookup_reg(name)
    if d is not None:
        if (d.line, d.col) > (line, col):
            uses.add("register '{name}' is used before its declaration", name, line, col,
                     [Note(message=f"'{_decl_text(d)}' is declared here", line=d.line,
                           col=d.col)])
            return False
        return True
    if (si.lookup_var(name) is not None or name in fi.params or name in ctx.module_vars
            or name in ctx.functions_by_name or name in labels
            or name in PREDEFINED_IDENTIFIERS):
        return True
    if is_pct:
        notes = []
        base = name.split(".", 1)[0]
        prefix = base.rstrip("0123456789")
        r = si.range_with_prefix(prefix) if prefix != base else None
        if r is not None and r.count is not None:
            notes.append(Note(message=f"'{_decl_text(r)}' declared here covers '{prefix}0' .. "
                                      f"'{prefix}{r.count - 1}'", line=r.line, col=r.col))
        if not notes:
            notes.append(Note(message=f"no '.reg' declaration of '{name}' is visible in "
                                      f"'{fi.fn.name}'"))
        uses.add("use of undeclared register '{name}'", name, line, col, notes)
        return False
    else:
        uses.add("use of undeclared identifier '{name}'", name, line, col,
                 [Note(message=f"no register, variable, parameter, function or label named "
                               f"'{name}' is visible in '{fi.fn.name}'")])
    return False


def undefined_target(ctx: Context) -> list[Finding]:
    """Branch or call target not defined (D2).

    What it checks:
        ``bra``/``brx.idx`` targets are labels visible from the branch (defined in the same block
        or an enclosing one: a label inside a nested ``{ }`` is invisible outside it); ``call``
        targets are functions declared or defined in the module before the call; a call's
        prototype / target-list label exists.

    Why it is bad:
        ptxas rejects the module ("Unknown symbol", "Call to 'f' requires call prototype").

    Example:
        ``bra $L__BB0_9;`` with no ``$L__BB0_9:`` in the function.

    Use instead:
        Define the label (or branch to an existing one).

    ptxas:
        ERR.

    References:
        PTX ISA 9.1 §9.7.13.4 (bra), §9.7.13.6 (call), §11.1 (scoping).
    """
    out: list[Finding] = []
    for fi in ctx.functions:
        if fi.root is None:
            continue
        labels = fi.all_labels()
        for ins, si in fi.instructions:
            base = ins.parts[0]
            if base in ("bra", "brx", "call"):
                for op in ins.operands:
                    if op.kind == "label":
                        out.extend(_check_label(ctx, si, labels, op))
            if base == "call":
                out.extend(_check_callee(ctx, ins))
    return out


def _check_label(ctx: Context, si: ScopeInfo, labels: dict[str, Label], op: Operand) -> list[Finding]:
    name = op.name or op.text
    if si.lookup_label(name) is not None:
        return []
    other = labels.get(name)
    if other is not None:
        return [ctx.finding("D2", op.line, op.col, f"label '{name}' is not visible here",
                            notes=[Note(message="it is defined inside a nested block here",
                                        line=other.line, col=other.col)])]
    return [ctx.finding("D2", op.line, op.col, f"use of undeclared label '{name}'",
                        notes=[Note(message=f"no label '{name}' is defined in this function")])]


def _check_callee(ctx: Context, ins: Instruction) -> list[Finding]:
    target = next((o for o in ins.operands if o.kind != "list"), None)
    if target is None or target.kind != "symbol":
        return []  # indirect call through a register: no static target
    name = target.name or target.text
    fns = ctx.functions_by_name.get(name)
    if not fns:
        known = sorted(n for n, fs in ctx.functions_by_name.items() if fs[0].kind == "func")
        hint = (f"the module declares {', '.join(repr(k) for k in known[:5])}" if known
                else "the module declares no '.func'")
        return [ctx.finding("D2", target.line, target.col,
                            f"call to undeclared function '{name}'",
                            notes=[Note(message=hint)])]
    first = min(fns, key=lambda f: (f.line, f.col))
    if (first.line, first.col) > (ins.line, ins.col):
        return [ctx.finding("D2", target.line, target.col,
                            f"function '{name}' is called before it is declared",
                            notes=[Note(message=f"'{name}' is declared here; add a prototype "
                                                "before the first call", line=first.line,
                                        col=first.col)])]
    return []


def duplicate_definition(ctx: Context) -> list[Finding]:
    """Duplicate label, register, variable, parameter or function in one scope (D3).

    What it checks:
        Within one block no label, register or variable name is defined twice (a single register
        inside a parameterised range such as ``%r5`` vs ``%r<10>`` counts, and so does a second
        ``%r<N>``); an entry has no two parameters of the same name; the module has no two
        function bodies or variables of the same name. Shadowing a name of an enclosing block is
        allowed (Triton's inline-asm blocks rely on it).

    Why it is bad:
        ptxas rejects the module ("Duplicate definition"); duplicated labels usually mean a
        copy-pasted loop whose branches go to the wrong copy.

    Example:
        ``$L__BB0_1:`` twice in the function body.

    Use instead:
        Rename one label and its branches.

    ptxas:
        ERR.

    References:
        PTX ISA 9.1 §4.4 (identifiers), §11.1 (scoping).
    """
    out: list[Finding] = []
    for kind, new, prev in ctx.module_duplicates:
        out.append(_dup(ctx, kind, new, prev))
    for fi in ctx.functions:
        for new, prev in fi.param_duplicates:
            out.append(_dup(ctx, "parameter", new, prev))
        for si in fi.scopes:
            for kind, new, prev in si.duplicates:
                out.append(_dup(ctx, kind, new, prev))
    return out


def _dup(ctx: Context, kind: str, new: object, prev: object) -> Finding:
    name = _decl_text(new)
    pname = _decl_text(prev)
    note = ("previous definition is here" if pname == name
            else f"'{pname}' already declares it here")
    return ctx.finding("D3", getattr(new, "line", 1), getattr(new, "col", 1),
                       f"redefinition of {kind} '{name}'",
                       notes=[Note(message=note, line=getattr(prev, "line", None),
                                   col=getattr(prev, "col", None))])
