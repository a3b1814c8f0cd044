"""The one place that assigns rule ids.

``RULES`` maps an id to a :class:`RuleInfo` (family, default severity, status, one-line summary, the
rule function whose docstring is the rule's documentation). Ids are never reused; a renamed id keeps
an entry in ``REDIRECTS``. New rules start in ``preview``. Families are selectable groups
(``select={"E"}`` runs E1-E3), like Clang's warning groups.

Source of the rules: PTX ISA 9.1 (sections cited in each rule's docstring) and
``shared/reference/ptx_rules.md``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from verifier.context import Context
from verifier.errors import VerifierUsageError
from verifier.findings import Finding, Severity
from verifier.rules.decls import duplicate_definition, undeclared_name, undefined_target
from verifier.rules.entry import entry_missing, entry_params_mismatch, launch_threads_mismatch
from verifier.rules.syntax import syntax_error
from verifier.rules.target import target_mismatch, tcgen05_needs_sm100a, wgmma_needs_sm90a

__all__ = ["RuleInfo", "RULES", "FAMILIES", "REDIRECTS", "get_rule", "select_rules", "rule_doc",
           "Status"]

Status = Literal["preview", "stable", "deprecated", "removed"]
RuleFn = Callable[[Context], list[Finding]]


@dataclass(frozen=True)
class RuleInfo:
    """One registered rule.

    Attributes:
        id: the rule id (``E2``); its leading letters are the family.
        name: the defect, CamelCase (``EntryParamsMismatch``).
        family: the family letter(s) (``E``).
        severity: default severity of its findings.
        status: ``preview``, ``stable``, ``deprecated`` or ``removed``.
        summary: one line.
        check: the pure rule function ``(ctx) -> list[Finding]``.
    """

    id: str
    name: str
    family: str
    severity: Severity
    status: Status
    summary: str
    check: RuleFn

    @property
    def doc(self) -> str:
        """The rule function's docstring (What it checks / Why it is bad / ... / References)."""
        return inspect.cleandoc(self.check.__doc__ or "")


#: Family letter -> description.
FAMILIES: dict[str, str] = {
    "P": "parsing",
    "G": "target and version gating",
    "E": "entry and launch ABI",
    "D": "declarations and names",
}


def _r(id: str, name: str, severity: Severity, summary: str, check: RuleFn,
       status: Status = "preview") -> tuple[str, RuleInfo]:
    family = re.match(r"[A-Z]+", id).group(0)  # type: ignore[union-attr]
    return id, RuleInfo(id, name, family, severity, status, summary, check)


RULES: dict[str, RuleInfo] = dict([
    _r("P1", "SyntaxError", "error", "the PTX does not parse", syntax_error),
    _r("G1", "Tcgen05NeedsSm100a", "error",
       "tcgen05.* used but the target is not sm_100a/sm_101a/sm_103a (or a family target)",
       tcgen05_needs_sm100a),
    _r("G2", "WgmmaNeedsSm90a", "error", "wgmma.* used but the target is not sm_90a",
       wgmma_needs_sm90a),
    _r("G4", "TargetMismatch", "error",
       "'.target' missing or its architecture differs from the requested one", target_mismatch),
    _r("E1", "EntryMissing", "error",
       "the ABI's entry is missing, or the module does not define exactly one '.entry'",
       entry_missing),
    _r("E2", "EntryParamsMismatch", "error",
       "entry parameters differ from the ABI (count, size, array-ness, alignment)",
       entry_params_mismatch),
    _r("E3", "LaunchThreadsMismatch", "error",
       "'.reqntid'/'.maxntid' inconsistent with the launch's threads per CTA",
       launch_threads_mismatch),
    _r("D1", "UndeclaredName", "error", "use of an undeclared register or identifier",
       undeclared_name),
    _r("D2", "UndefinedTarget", "error", "branch or call target label/function not defined",
       undefined_target),
    _r("D3", "DuplicateDefinition", "error",
       "label, register, variable, parameter or function defined twice in one scope",
       duplicate_definition),
])

#: Old id -> new id, for renamed rules.
REDIRECTS: dict[str, str] = {}


def get_rule(rule_id: str) -> RuleInfo:
    """The rule registered as ``rule_id`` (redirects followed).

    Raises:
        VerifierUsageError: no such rule.
    """
    rid = REDIRECTS.get(rule_id, rule_id)
    try:
        return RULES[rid]
    except KeyError:
        raise VerifierUsageError(
            f"unknown rule id '{rule_id}'; known: {', '.join(RULES)}") from None


def select_rules(select: Iterable[str] | None) -> list[RuleInfo]:
    """Rules enabled by ``select`` (rule ids or family letters; None: all), in registry order.

    Raises:
        VerifierUsageError: a selector matches no rule id or family.
    """
    if select is None:
        return [r for r in RULES.values() if r.status != "removed"]
    if isinstance(select, str):
        select = {select}
    ids: set[str] = set()
    for s in select:
        s = REDIRECTS.get(s, s)
        if s in RULES:
            ids.add(s)
        elif s in FAMILIES:
            ids.update(r.id for r in RULES.values() if r.family == s)
        else:
            raise VerifierUsageError(
                f"unknown rule or family '{s}' in select; rules: {', '.join(RULES)}; "
                f"families: {', '.join(FAMILIES)}")
    return [r for r in RULES.values() if r.id in ids and r.status != "removed"]


def rule_doc(rule_id: str) -> str:
    """Documentation of one rule: a header line, the summary and the docstring.

    Raises:
        VerifierUsageError: no such rule.
    """
    r = get_rule(rule_id)
    return (f"{r.id} {r.name} [{FAMILIES[r.family]}; {r.severity}; {r.status}]\n"
            f"{r.summary}\n\n{r.doc}\n")
