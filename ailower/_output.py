"""Scriptable output for the CLI: consoles, tables that never cut ids, JSON, "did you mean".

* :func:`make_console`: on a terminal, rich's usual console; when piped, a console wide enough
  that no table is squeezed (rich otherwise assumes 80 columns, or ``COLUMNS``, and cuts cells
  with an ellipsis), with colour off.
* :func:`table`: a rich table whose key columns (ids, names) are ``no_wrap`` and
  ``overflow="fold"``: on a narrow terminal they wrap by character, they are never cut.
* :func:`print_json`: plain ``json.dumps`` on stdout (no highlighting, no wrapping).
* :func:`suggest`: prefix matches first (``relu`` -> ``relu.fp16``, ``relu.fp32``), then close
  spellings (:func:`difflib.get_close_matches`).
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["PIPE_WIDTH", "make_console", "table", "print_json", "suggest", "did_you_mean"]

PIPE_WIDTH = 10_000
"""Console width when the stream is not a terminal (columns); tables take only what they need."""


def make_console(*, stderr: bool = False) -> Console:
    """A rich console for stdout (or stderr) that never cuts table cells when piped."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPE_WIDTH, no_color=True, highlight=False,
                   soft_wrap=True)


def table(title: str | None, columns: Sequence[str], *, keys: Iterable[str] = ()) -> Table:
    """A table with ``columns``; the ones named in ``keys`` (ids, names) never wrap or cut."""
    keys = set(keys)
    t = Table(title=title)
    for c in columns:
        if c in keys:
            t.add_column(c, no_wrap=True, overflow="fold")
        else:
            t.add_column(c, overflow="fold")
    return t


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout (``default=str`` for dates and paths)."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


def suggest(name: str, choices: Iterable[str], n: int = 6) -> list[str]:
    """Names in ``choices`` the user may have meant by ``name``.

    Prefix matches come first, in ``choices`` order (``relu`` -> ``relu.fp16``, ``relu.fp32``;
    ``gemm`` -> ``gemm``'s variants), then close spellings by :func:`difflib.get_close_matches`
    (ratio >= 0.6), case-insensitively. At most ``n`` names.
    """
    choices = list(dict.fromkeys(choices))
    low = name.lower()
    out = [c for c in choices if c.lower().startswith(low) and c.lower() != low]
    lowered = {c.lower(): c for c in choices}
    for m in difflib.get_close_matches(low, list(lowered), n=n, cutoff=0.6):
        if lowered[m] not in out:
            out.append(lowered[m])
    return out[:n]


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean a, b?"`` or ``""`` when nothing is close."""
    s = suggest(name, choices)
    return f"; did you mean {', '.join(s)}?" if s else ""
