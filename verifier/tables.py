"""Per-function name tables of a parsed PTX module: scopes, registers, variables, labels, label
directives and parameters (:class:`FunctionInfo`, :class:`ScopeInfo`), and the predefined
register names.

The bottom of the verifier's analysis stack: :mod:`verifier.analysis` (CFG, values, dataflow)
and :mod:`verifier.context` (what rules read) both build on it; it imports neither.

Scoping follows PTX ISA 9.1 §5.1 / §11.1 and ptxas behaviour: a ``{ }`` block opens a scope;
registers, variables and labels declared in it are visible in it and in the blocks nested in it, and
may shadow outer names (Triton's inline-asm blocks declare ``.reg .pred complete;`` and the label
``waitLoop`` in sibling blocks). Parameterised declarations ``.reg .b32 %r<120>;`` declare ``%r0``
.. ``%r119``; a name the inner scope's range does not cover is looked up in the outer scopes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from verifier.ptx.ast import (
    Directive,
    Function,
    Instruction,
    Label,
    Param,
    RegDecl,
    Scope,
    VarDecl,
)

__all__ = ["Decl", "FunctionInfo", "PREDEFINED_IDENTIFIERS", "ScopeInfo", "build_function",
           "is_special_register"]

Decl = RegDecl | VarDecl | Param | Label | Function

_TRAILING_NUM = re.compile(r"^(.*?)(0|[1-9][0-9]*)$")

#: Predefined (special) registers, PTX ISA 9.1 §10.
_SPECIAL = re.compile(
    r"%(?:"
    r"(?:tid|ntid|ctaid|nctaid|clusterid|nclusterid|cluster_ctaid|cluster_nctaid)(?:\.[xyzw])?"
    r"|laneid|warpid|nwarpid|smid|nsmid|gridid|clock|clock_hi|clock64"
    r"|globaltimer|globaltimer_lo|globaltimer_hi|lanemask_(?:eq|le|lt|ge|gt)"
    r"|dynamic_smem_size|total_smem_size|aggr_smem_size|cluster_ctarank|cluster_nctarank"
    r"|is_explicit_cluster|current_graph_exec|envreg(?:[0-9]|[12][0-9]|3[01])"
    r"|pm[0-7](?:_64)?|reserved_smem_offset_(?:begin|end|cap|[01])"
    r")$")

#: Predefined identifiers usable as operands (PTX ISA 9.1 §4.5, Table 3).
PREDEFINED_IDENTIFIERS = frozenset({"WARP_SZ"})


def is_special_register(name: str) -> bool:
    """True for a predefined register such as ``%tid.x``, ``%laneid``, ``%envreg3``."""
    return _SPECIAL.match(name) is not None


@dataclass(eq=False)
class ScopeInfo:
    """Name tables of one ``{ }`` block.

    Attributes:
        scope: the syntax node.
        parent: the enclosing block's info (None for the function body).
        regs: single registers by name (``%x``, ``complete``).
        ranges: parameterised registers by prefix (``%r`` -> the ``%r<120>`` declaration).
        vars: variables declared in the block.
        labels: labels defined directly in the block.
        duplicates: ``(kind, new, previous)`` for each redefinition within the block.
    """

    scope: Scope
    parent: ScopeInfo | None
    regs: dict[str, RegDecl] = field(default_factory=dict)
    ranges: dict[str, RegDecl] = field(default_factory=dict)
    vars: dict[str, VarDecl] = field(default_factory=dict)
    labels: dict[str, Label] = field(default_factory=dict)
    duplicates: list[tuple[str, Decl, Decl]] = field(default_factory=list)
    _cache: dict[str, RegDecl | None] = field(default_factory=dict, repr=False)

    def lookup_reg(self, name: str) -> RegDecl | None:
        """The register declaration ``name`` resolves to from this block, or None."""
        try:
            return self._cache[name]
        except KeyError:
            pass
        base = name.split(".", 1)[0] if "." in name else name
        m = _TRAILING_NUM.match(base)
        found = None
        s: ScopeInfo | None = self
        while s is not None:
            d = s.regs.get(base)
            if d is not None:
                found = d
                break
            if m is not None:
                r = s.ranges.get(m.group(1))
                if r is not None and r.count is not None and int(m.group(2)) < r.count:
                    found = r
                    break
            s = s.parent
        self._cache[name] = found
        return found

    def lookup_var(self, name: str) -> VarDecl | None:
        """The variable declared as ``name`` in this block or an enclosing one, or None."""
        s: ScopeInfo | None = self
        while s is not None:
            d = s.vars.get(name)
            if d is not None:
                return d
            s = s.parent
        return None

    def lookup_label(self, name: str) -> Label | None:
        """The label ``name`` visible from this block (this block or an enclosing one), or None."""
        s: ScopeInfo | None = self
        while s is not None:
            d = s.labels.get(name)
            if d is not None:
                return d
            s = s.parent
        return None

    def range_with_prefix(self, prefix: str) -> RegDecl | None:
        """The nearest parameterised declaration with this prefix (for 'declared with N' notes)."""
        s: ScopeInfo | None = self
        while s is not None:
            r = s.ranges.get(prefix)
            if r is not None:
                return r
            s = s.parent
        return None


@dataclass(eq=False)
class FunctionInfo:
    """Per-function analysis results.

    Attributes:
        fn: the function node.
        root: the body's scope info (None for a declaration without body).
        scopes: every block's info, outermost first.
        instructions: ``(instruction, block)`` in source order, nested blocks flattened.
        label_directives: ``.callprototype`` / ``.branchtargets`` / ``.calltargets`` by label.
        params: parameters (inputs and returns) by name.
        param_duplicates: ``(new, previous)`` for repeated parameter names.
    """

    fn: Function
    root: ScopeInfo | None
    scopes: list[ScopeInfo] = field(default_factory=list)
    instructions: list[tuple[Instruction, ScopeInfo]] = field(default_factory=list)
    label_directives: dict[str, Directive] = field(default_factory=dict)
    params: dict[str, Param] = field(default_factory=dict)
    param_duplicates: list[tuple[Param, Param]] = field(default_factory=list)

    def all_labels(self) -> dict[str, Label]:
        """Every label of the function, any block (first definition wins)."""
        out: dict[str, Label] = {}
        for s in self.scopes:
            for k, v in s.labels.items():
                out.setdefault(k, v)
        return out


def build_function(fn: Function) -> FunctionInfo:
    info = FunctionInfo(fn=fn, root=None)
    for p in list(fn.rets) + list(fn.params):
        prev = info.params.get(p.name)
        if prev is not None and p.name != "_":
            info.param_duplicates.append((p, prev))
        info.params.setdefault(p.name, p)
    if fn.body is None:
        return info
    root = ScopeInfo(scope=fn.body, parent=None)
    for p in list(fn.rets) + list(fn.params):
        if p.space == "reg":
            root.regs.setdefault(p.name, RegDecl(p.name, p.type or "b32", p.line, p.col))
    info.root = root
    _fill_scope(info, root)
    return info


def _fill_scope(info: FunctionInfo, si: ScopeInfo) -> None:
    info.scopes.append(si)
    regs, ranges, vars_, labels, dups = si.regs, si.ranges, si.vars, si.labels, si.duplicates
    instrs = info.instructions
    for st in si.scope.stmts:
        t = type(st)
        if t is Instruction:
            instrs.append((st, si))
        elif t is RegDecl:
            if st.count is not None:
                prev = ranges.get(st.name)
                if prev is not None:
                    dups.append(("register", st, prev))
                else:
                    ranges[st.name] = st
                    for name, single in regs.items():
                        m = _TRAILING_NUM.match(name)
                        if m and m.group(1) == st.name and int(m.group(2)) < st.count:
                            dups.append(("register", single, st))
            else:
                prev = regs.get(st.name) or vars_.get(st.name)  # type: ignore[assignment]
                if prev is None:
                    m = _TRAILING_NUM.match(st.name)
                    if m:
                        r = ranges.get(m.group(1))
                        if r is not None and r.count is not None and int(m.group(2)) < r.count:
                            prev = r
                if prev is not None:
                    dups.append(("register", st, prev))
                else:
                    regs[st.name] = st
        elif t is VarDecl:
            prev = vars_.get(st.name) or regs.get(st.name)  # type: ignore[assignment]
            if prev is not None:
                dups.append(("variable", st, prev))
            else:
                vars_[st.name] = st
        elif t is Label:
            prev = labels.get(st.name)
            if prev is not None:
                dups.append(("label", st, prev))
            else:
                labels[st.name] = st
        elif t is Directive:
            if st.label is not None:
                info.label_directives.setdefault(st.label, st)
        elif t is Scope:
            _fill_scope(info, ScopeInfo(scope=st, parent=si))


_build_function = build_function
