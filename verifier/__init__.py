"""ailower's static PTX verifier (v1).

Public API::

    parse_ptx(text, filename="<ptx>") -> Module          # raises PTXSyntaxError
    verify(text, *, arch, abi=None, threads=None, filename="<ptx>", select=None, ignore=None)
        -> VerifierReport
    rule_doc(rule_id) -> str

Rules (ids assigned in :mod:`verifier.registry`): P1 syntax; G target gating; E entry ABI and
launch; D declarations; and the synchronization families built on the shared analyses of
:mod:`verifier.analysis` (CFG, dominators, def-use, values, thread-uniformity, path-sensitive
dataflow): TA TMEM allocation, TL tcgen05.ld/st/wait, TM mma/cp/shift and descriptors, TC commit,
TF tcgen05 ordering, MB mbarrier, AP async proxy and bulk copies, W wgmma, CA cp.async, B
barriers. Flow findings carry a witness path; undecidable checks give a note.

Sources: PTX ISA 9.1 (§4 syntax, §5 state spaces and types, §7 functions, §9.7 instructions, §10
special registers, §11 directives) and ``docs/ptx_rules.md``.
"""

from verifier._api import verify
from verifier.errors import PTXSyntaxError, VerifierError, VerifierUsageError
from verifier.findings import Finding, Note, Severity
from verifier.ptx import Module
from verifier.ptx.parser import parse_ptx
from verifier.registry import RULES, RuleInfo, rule_doc
from verifier.report import VerifierReport

__all__ = [
    "RULES",
    "Finding",
    "Module",
    "Note",
    "PTXSyntaxError",
    "RuleInfo",
    "Severity",
    "VerifierError",
    "VerifierReport",
    "VerifierUsageError",
    "parse_ptx",
    "rule_doc",
    "verify",
]
