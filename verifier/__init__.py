"""ailower's static PTX verifier (v0).

Public API::

    parse_ptx(text, filename="<ptx>") -> Module          # raises PTXSyntaxError
    verify(text, *, arch, abi=None, threads=None, filename="<ptx>", select=None) -> VerifierReport
    rule_doc(rule_id) -> str

Rules (ids assigned in :mod:`verifier.registry`): P1 syntax; G1 tcgen05 target, G2 wgmma target,
G4 ``.target``; E1 entry, E2 entry parameters vs ABI, E3 ``.reqntid``/``.maxntid`` vs launch; D1
undeclared register/identifier, D2 undefined branch/call target, D3 duplicate definition.

Sources: PTX ISA 9.1 (§4 syntax, §5 state spaces and types, §7 functions, §9.7 instructions, §10
special registers, §11 directives) and ``shared/reference/ptx_rules.md``.
"""

from verifier._api import verify
from verifier.errors import PTXSyntaxError, VerifierError, VerifierUsageError
from verifier.findings import Finding, Note, Severity
from verifier.ptx import Module
from verifier.ptx.parser import parse_ptx
from verifier.registry import RULES, RuleInfo, rule_doc
from verifier.report import VerifierReport

__all__ = [
    "parse_ptx",
    "verify",
    "rule_doc",
    "VerifierReport",
    "Finding",
    "Note",
    "Severity",
    "Module",
    "RULES",
    "RuleInfo",
    "PTXSyntaxError",
    "VerifierError",
    "VerifierUsageError",
]
