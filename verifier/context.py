"""The shared analysis context every rule reads: the parsed module plus per-function name tables.

Analyses run once here (scope tree, register/variable/label tables, duplicate detection, the flat
instruction list); rules are pure ``(ctx) -> list[Finding]`` functions that only read them.

Scoping follows PTX ISA 9.1 §5.1 / §11.1 and ptxas behaviour: a ``{ }`` block opens a scope;
registers, variables and labels declared in it are visible in it and in the blocks nested in it, and
may shadow outer names (Triton's inline-asm blocks declare ``.reg .pred complete;`` and the label
``waitLoop`` in sibling blocks). Parameterised declarations ``.reg .b32 %r<120>;`` declare ``%r0``
.. ``%r119``; a name the inner scope's range does not cover is looked up in the outer scopes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernels.abi import KernelABI
from verifier.findings import Finding, Note, Severity
from verifier.ptx.ast import (
    Directive,
    Function,
    Instruction,
    Label,
    Module,
    Param,
    RegDecl,
    Scope,
    VarDecl,
)

__all__ = ["Context", "Decl", "FunctionInfo", "ScopeInfo", "is_special_register"]

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


class Context:
    """What rules read: the module, the request (arch, ABI, threads) and the analyses.

    Attributes:
        module: the parsed PTX.
        text: the PTX source.
        filename: the name used in findings.
        arch: the requested architecture (``sm_90a``).
        abi: the expected kernel ABI, or None.
        threads: threads per CTA of the launch (explicit, else ``abi.threads``), or None.
        functions: per-function info in source order.
        module_vars: module-scope variables by name.
        module_duplicates: ``(kind, new, previous)`` for module-scope redefinitions.
    """

    def __init__(self, module: Module, text: str, *, arch: str, abi: KernelABI | None = None,
                 threads: int | None = None, severities: dict[str, Severity] | None = None,
                 summaries: dict[str, str] | None = None):
        self.module = module
        self.text = text
        self.filename = module.filename
        self.arch = arch
        self.abi = abi
        self.threads = threads if threads is not None else (abi.threads if abi else None)
        self._severities = severities or {}
        self._summaries = summaries or {}
        self._lines: list[str] | None = None
        self.module_vars: dict[str, VarDecl] = {}
        self.module_duplicates: list[tuple[str, Decl, Decl]] = []
        self.functions_by_name: dict[str, list[Function]] = {}
        for v in module.variables:
            prev = self.module_vars.get(v.name)
            if prev is not None and not (prev.linkage == "extern" or v.linkage == "extern"):
                self.module_duplicates.append(("variable", v, prev))
            self.module_vars.setdefault(v.name, v)
        for f in module.functions:
            same = self.functions_by_name.setdefault(f.name, [])
            if f.body is not None:
                prev_def = next((g for g in same if g.body is not None), None)
                if prev_def is not None:
                    self.module_duplicates.append(("function", f, prev_def))
            if f.name in self.module_vars:
                self.module_duplicates.append(("symbol", f, self.module_vars[f.name]))
            same.append(f)
        self.functions: list[FunctionInfo] = [_build_function(f) for f in module.functions]
        self._analyses: dict[int, object] = {}

    def analysis(self, fi: FunctionInfo):
        """The :class:`~verifier.analysis.FunctionAnalysis` of a function with a body (built on
        first use and cached: CFG, dominators, def-use, values, uniformity, solved properties).

        Threads per CTA come from the function's ``.reqntid`` (product), else the launch.
        """
        a = self._analyses.get(id(fi))
        if a is None:
            from verifier.analysis import FunctionAnalysis

            threads = self.threads
            d = fi.fn.directive("reqntid")
            if d is not None and all(isinstance(x, int) for x in d.args):
                threads = 1
                for x in d.args:
                    threads *= int(x)
            a = FunctionAnalysis(fi, threads)
            self._analyses[id(fi)] = a
        return a

    def bodies(self) -> list[FunctionInfo]:
        """Functions with a body, in source order."""
        return [fi for fi in self.functions if fi.root is not None]

    def finding(self, rule: str, line: int, col: int, message: str, *,
                notes: list[Note] | None = None, fix: str | None = None,
                severity: Severity | None = None) -> Finding:
        """Build a :class:`Finding` for this file with the rule's default severity.

        A finding without notes gets one: the rule's summary (what is required), so every
        diagnostic explains itself to the reader (and to the LLM fed the rendering).
        """
        if not notes and rule in self._summaries:
            notes = [Note(message=f"{rule}: {self._summaries[rule]}")]
        return Finding(rule=rule, severity=severity or self._severities.get(rule, "error"),
                       file=self.filename, line=max(1, line), col=max(1, col), message=message,
                       notes=notes or [], fix=fix)

    def entry_function(self) -> FunctionInfo | None:
        """The entry the ABI names (or, without an ABI, the only defined ``.entry``), or None."""
        entries = [fi for fi in self.functions if fi.fn.kind == "entry" and fi.fn.body is not None]
        if self.abi is not None:
            for fi in entries:
                if fi.fn.name == self.abi.entry:
                    return fi
            return None
        return entries[0] if len(entries) == 1 else None

    def source_line(self, line: int) -> str:
        """Text of 1-based ``line`` (empty when out of range)."""
        if self._lines is None:
            self._lines = self.text.splitlines()
        lines = self._lines
        return lines[line - 1] if 0 < line <= len(lines) else ""


def _build_function(fn: Function) -> FunctionInfo:
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
