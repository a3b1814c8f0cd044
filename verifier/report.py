"""The verifier's result and its renderers (one per format, all reading the same sorted findings).

``full`` is compiler style::

    k.ptx:14:2: error[E2]: parameter 3 of entry 'k' is declared '.param .u64 k_param_3', ...
       14 |     .param .u64 k_param_3,
          |     ^
          = note: it occupies 8 bytes, the ABI expects 4
          = fix: .param .u32 k_param_3
    1 error generated.

``concise`` is one line per finding (``file:line:col: error[E2]: message``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verifier.findings import Finding

__all__ = ["VerifierReport"]

_MAX_SHOWN = 120


@dataclass
class VerifierReport:
    """Findings of one ``verify`` call.

    Attributes:
        findings: every finding, sorted by position.
        file: the file name.
        arch: the requested architecture.
        rules: ids of the rules that ran.
        source: the PTX text (for rendering source lines; not serialised).
    """

    findings: list[Finding]
    file: str = "<ptx>"
    arch: str = ""
    rules: tuple[str, ...] = ()
    source: str = field(default="", repr=False)

    @property
    def errors(self) -> list[Finding]:
        """The error-severity findings."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        """The warning-severity findings."""
        return [f for f in self.findings if f.severity == "warning"]

    @property
    def ok(self) -> bool:
        """True when there is no error-severity finding."""
        return not any(f.severity == "error" for f in self.findings)

    def rule_ids(self) -> set[str]:
        """Ids of the rules that produced findings (any severity)."""
        return {f.rule for f in self.findings}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary: file, arch, ok, counts per severity, rules run, findings."""
        counts = {"error": 0, "warning": 0, "note": 0}
        for f in self.findings:
            counts[f.severity] += 1
        return {"file": self.file, "arch": self.arch, "ok": self.ok, "counts": counts,
                "rules": list(self.rules),
                "findings": [f.model_dump(mode="json") for f in self.findings]}

    def render(self, fmt: str = "full") -> str:
        """Compiler-style text.

        Args:
            fmt: ``full`` (source line, caret, notes, fix-its, summary) or ``concise`` (one line
                per finding).

        Raises:
            ValueError: an unknown format.
        """
        if fmt == "concise":
            return "".join(f"{f.file}:{f.line}:{f.col}: {f.severity}[{f.rule}]: {f.message}\n"
                           for f in self.findings)
        if fmt != "full":
            raise ValueError(f"unknown format {fmt!r}; use 'full' or 'concise'")
        lines = self.source.splitlines()
        out: list[str] = []
        for f in self.findings:
            out.append(f"{f.file}:{f.line}:{f.col}: {f.severity}[{f.rule}]: {f.message}\n")
            out.extend(_snippet(lines, f.line, f.col))
            for n in f.notes:
                if n.line is not None:
                    col = n.col or 1
                    out.append(f"{f.file}:{n.line}:{col}: note: {n.message}\n")
                    out.extend(_snippet(lines, n.line, col))
                else:
                    out.append(f"{'':>6}= note: {n.message}\n")
            if f.fix is not None:
                out.append(f"{'':>6}= fix: {f.fix}\n")
        ne, nw = len(self.errors), len(self.warnings)
        parts = []
        if nw:
            parts.append(f"{nw} warning{'s' if nw != 1 else ''}")
        if ne:
            parts.append(f"{ne} error{'s' if ne != 1 else ''}")
        if parts:
            out.append(" and ".join(parts) + " generated.\n")
        return "".join(out)


def _snippet(lines: list[str], line: int, col: int) -> list[str]:
    if not 0 < line <= len(lines):
        return []
    raw = lines[line - 1]
    prefix = raw[:max(col - 1, 0)].expandtabs(4)
    text = raw.expandtabs(4)
    caret = len(prefix)
    start = 0
    if len(text) > _MAX_SHOWN:
        start = max(0, caret - 40)
        shown = text[start:start + _MAX_SHOWN]
        lead = "..." if start else ""
        tail = "..." if start + _MAX_SHOWN < len(text) else ""
        text = lead + shown + tail
        caret = caret - start + len(lead)
    return [f"{line:>5} | {text.rstrip()}\n", f"{'':>5} | {' ' * caret}^\n"]
