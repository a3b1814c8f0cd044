"""Errors of the verifier, split by who must act.

::

    VerifierError                 base
    ├── PTXSyntaxError            the PTX text is malformed (raised by ``parse_ptx``; ``verify`` turns
    │                             it into a P1 finding, since a bad candidate is a diagnostic)
    └── VerifierUsageError        the caller passed something invalid (unknown arch, unknown rule id)

Every error carries its fields and pickles (``__reduce__``) so it can cross process boundaries.
"""

from __future__ import annotations

__all__ = ["PTXSyntaxError", "VerifierError", "VerifierUsageError"]


class VerifierError(Exception):
    """Base class of the verifier's errors; ``code`` is a stable kebab-case id."""

    code = "verifier-error"


class PTXSyntaxError(VerifierError, ValueError):
    """Malformed PTX.

    Attributes:
        filename: the file name given to the parser.
        line, col: 1-based position of the offending token.
        message: Clang-style text (lowercase, no final period), e.g. ``expected ';', found '}'``.

    ``str(err)`` is ``file:line:col: error: message``.
    """

    code = "ptx-syntax-error"

    def __init__(self, filename: str, line: int, col: int, message: str):
        self.filename, self.line, self.col, self.message = filename, line, col, message
        super().__init__(f"{filename}:{line}:{col}: error: {message}")

    def __reduce__(self):
        return (PTXSyntaxError, (self.filename, self.line, self.col, self.message))


class VerifierUsageError(VerifierError, ValueError):
    """The caller passed an invalid argument (``arch`` not like ``sm_90a``, an unknown rule id)."""

    code = "verifier-usage-error"

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)

    def __reduce__(self):
        return (VerifierUsageError, (self.message,))
