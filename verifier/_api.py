"""The verifier driver: parse once, build the shared context, run the selected rules."""

from __future__ import annotations

import gc
import re

from kernels.abi import KernelABI
from verifier.context import Context
from verifier.errors import PTXSyntaxError, VerifierUsageError
from verifier.findings import Finding
from verifier.ptx.parser import parse_ptx
from verifier.registry import RULES, select_rules
from verifier.report import VerifierReport

__all__ = ["verify"]

_ARCH = re.compile(r"sm_\d+[af]?$")


def verify(text: str, *, arch: str, abi: KernelABI | None = None, threads: int | None = None,
           filename: str = "<ptx>", select: set[str] | None = None,
           ignore: set[str] | None = None) -> VerifierReport:
    """Check PTX statically and return every finding.

    Args:
        text: the PTX module.
        arch: the requested target (``sm_80``, ``sm_89``, ``sm_90a``, ``sm_100a`` ...).
        abi: the expected entry signature and launch contract; E1 without it checks only that
            there is exactly one ``.entry``, E2 needs it.
        threads: threads per CTA of the launch (default ``abi.threads``); E3 needs one of them.
        filename: the name used in findings.
        select: rule ids and/or family letters to run (``{"E", "D1"}``); None runs every rule.
            P1 (syntax) is always reported.
        ignore: rule ids and/or families to leave out of ``select`` (``{"TF", "MB7"}``).

    Returns:
        A :class:`VerifierReport` sorted by position; ``report.ok`` is True without errors.
        Malformed PTX never raises: it becomes one P1 finding.

    Raises:
        VerifierUsageError: ``arch`` is not like ``sm_90a``, ``threads`` is not positive, or
            ``select`` names an unknown rule or family.

    Source of the rules: PTX ISA 9.1 and ``docs/ptx_rules.md`` (see :func:`verifier.rule_doc`).
    """
    if not isinstance(arch, str) or not _ARCH.match(arch):
        raise VerifierUsageError(f"arch must look like 'sm_90a', got {arch!r}")
    if threads is not None and (not isinstance(threads, int) or threads <= 0):
        raise VerifierUsageError(f"threads must be a positive int, got {threads!r}")
    rules = select_rules(select)
    if ignore:
        drop = {r.id for r in select_rules(ignore)}
        rules = [r for r in rules if r.id not in drop]
    ids = tuple(r.id for r in rules)
    # The syntax tree is acyclic and allocation-heavy: pausing the cyclic GC for the whole call
    # avoids full collections over it (it is freed by reference counting when we return).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        try:
            module = parse_ptx(text, filename)
        except PTXSyntaxError as err:
            f = Finding(rule="P1", severity=RULES["P1"].severity, file=filename, line=err.line,
                        col=err.col, message=err.message)
            return VerifierReport(findings=[f], file=filename, arch=arch, rules=ids,
                                  source=text if isinstance(text, str) else "")
        ctx = Context(module, text, arch=arch, abi=abi, threads=threads,
                      severities={r.id: r.severity for r in RULES.values()},
                      summaries={r.id: r.summary for r in RULES.values()})
        findings: list[Finding] = []
        for r in rules:
            findings.extend(r.check(ctx))
    finally:
        if was_enabled:
            gc.enable()
    findings.sort(key=Finding.sort_key)
    return VerifierReport(findings=findings, file=filename, arch=arch, rules=ids, source=text)
