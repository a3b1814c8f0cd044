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

from kernels.abi import KernelABI
from verifier.analysis import FunctionAnalysis
from verifier.findings import Finding, Note, Severity
from verifier.ptx.ast import Function, Module, VarDecl
from verifier.tables import (
    PREDEFINED_IDENTIFIERS,
    Decl,
    FunctionInfo,
    ScopeInfo,
    build_function,
    is_special_register,
)

__all__ = ["Context", "Decl", "FunctionInfo", "PREDEFINED_IDENTIFIERS", "ScopeInfo",
           "is_special_register"]


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
        self.functions: list[FunctionInfo] = [build_function(f) for f in module.functions]
        self._analyses: dict[int, object] = {}

    def analysis(self, fi: FunctionInfo):
        """The :class:`~verifier.analysis.FunctionAnalysis` of a function with a body (built on
        first use and cached: CFG, dominators, def-use, values, uniformity, solved properties).

        Threads per CTA come from the function's ``.reqntid`` (product), else the launch.
        """
        a = self._analyses.get(id(fi))
        if a is None:
            threads = self.threads
            d = fi.fn.directive("reqntid")
            if d is not None and all(isinstance(x, int) for x in d.args):
                threads = 1
                for x in d.args:
                    threads *= int(x)
            a = FunctionAnalysis(fi, threads)
            # what each called function does to mbarrier / TMEM lifecycles (its callees
            # included): the caller's properties account a call for it (MB3, TA4/TA5)
            a.cache["callee_effects"] = self.callee_effects()
            self._analyses[id(fi)] = a
        return a

    def callee_effects(self) -> dict[str, frozenset[str]]:
        """Per function name with a body: the lifecycle operations it executes, itself or
        through the functions it calls (``mbar_init``, ``tmem_alloc``, ``tmem_dealloc``;
        ``sync`` for a CTA barrier or an mbarrier wait: the CuTe-style ``cluster_sync`` /
        ``__syncthreads`` helper a kernel calls)."""
        eff = getattr(self, "_callee_effects", None)
        if eff is not None:
            return eff
        own: dict[str, set[str]] = {}
        calls: dict[str, set[str]] = {}
        for fi in self.bodies():
            mine = own.setdefault(fi.fn.name, set())
            for ins, _ in fi.instructions:
                p = ins.parts
                if p[0] == "mbarrier" and len(p) > 1 and p[1] == "init":
                    mine.add("mbar_init")
                elif p[0] == "tcgen05" and len(p) > 1 and p[1] in ("alloc", "dealloc"):
                    mine.add("tmem_" + p[1])
                elif (p[0] in ("bar", "barrier") and "arrive" not in p and "warp" not in p) \
                        or (p[0] == "mbarrier" and len(p) > 1
                            and p[1] in ("try_wait", "test_wait")):
                    mine.add("sync")
                elif p[0] == "call":
                    calls.setdefault(fi.fn.name, set()).update(
                        o.name for o in ins.operands if o.kind == "symbol" and o.name)
        changed = True
        while changed:  # transitive closure over the call graph
            changed = False
            for f, cs in calls.items():
                for c in cs:
                    add = own.get(c, set()) - own[f]
                    if add:
                        own[f] |= add
                        changed = True
        self._callee_effects = {f: frozenset(e) for f, e in own.items()}
        return self._callee_effects

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
