"""P: the PTX must parse."""

from __future__ import annotations

from verifier.context import Context
from verifier.findings import Finding

__all__ = ["syntax_error"]


def syntax_error(ctx: Context) -> list[Finding]:
    """PTX syntax error (P1).

    What it checks:
        The candidate is well-formed PTX for the verifier's parser: module directives, function
        headers, declarations, labels and instructions with their operands. The parser reports the
        first error as ``file:line:col: error[P1]: expected ...``; no other rule runs on a file
        that does not parse.

    Why it is bad:
        ptxas rejects the module, so the candidate cannot be assembled or evaluated.

    Example:
        ``add.s32 %r1, %r2 %r3;`` (missing comma)

    Use instead:
        ``add.s32 %r1, %r2, %r3;``

    ptxas:
        ERR (syntax error).

    References:
        PTX ISA 9.1 §4 (syntax), §5 (state spaces, types, variables), §11 (directives).
    """
    return []  # reported by the driver from PTXSyntaxError
