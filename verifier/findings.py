"""Diagnostics: a :class:`Finding` is rule id + severity + message + primary position + notes (+ fix).

Wording follows Clang: lowercase, no final period, PTX tokens in single quotes. Notes are witnesses
with their own positions (the declaration, the ``.target`` line, the other entry). A ``fix`` is a
replacement text that surely matches intent; anything less certain goes in a note.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SEVERITY_ORDER", "Finding", "Note", "Severity"]

Severity = Literal["error", "warning", "note"]

#: Sort order (errors first when equal positions).
SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "note": 2}


class Note(BaseModel):
    """A witness attached to a finding: ``message`` at ``line``:``col`` (None: no position)."""

    model_config = ConfigDict(frozen=True)

    message: str
    line: int | None = None
    col: int | None = None


class Finding(BaseModel):
    """One diagnostic.

    Attributes:
        rule: the rule id (``E2``).
        severity: ``error``, ``warning`` or ``note`` (``note``: the rule could not decide).
        file: the file name given to ``verify``.
        line, col: 1-based primary position.
        message: Clang-style text, e.g. ``use of undeclared register '%r120'``.
        notes: witnesses with their own positions.
        fix: replacement text for the primary line when it surely matches intent, else None.
    """

    model_config = ConfigDict(frozen=True)

    rule: str
    severity: Severity
    file: str
    line: int
    col: int
    message: str
    notes: list[Note] = Field(default_factory=list)
    fix: str | None = None

    def sort_key(self) -> tuple:
        """Order by position, then severity, then rule id."""
        return (self.line, self.col, SEVERITY_ORDER[self.severity], self.rule, self.message)
