"""Guard: no test may write into the directory pytest runs in (normally the repository root).

A test that runs ``ailower lower`` without ``--out`` writes ``./ailower-out/...`` and, before the
output-safety fix, could replace a user's earlier results there (issue 13). The autouse fixture in
``tests/conftest.py`` takes a :func:`snapshot` of the working directory before each test and
fails the test if :func:`changes` finds anything created, modified or deleted afterwards.

Folders that tools (not tests) write are ignored: ``.git``, bytecode caches, pytest's and
Hypothesis' caches, egg-info, and the git-ignored device staging folders ``.dev`` / ``.whl``.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["IGNORED_DIRS", "snapshot", "changes"]

IGNORED_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache",
                          ".mypy_cache", ".dev", ".whl", "node_modules", ".venv"})
"""Folder names skipped at any depth (tool caches and staging folders, not test output)."""

Snapshot = dict[str, tuple[int, int]]


def snapshot(root: Path) -> Snapshot:
    """``{relative path: (mtime_ns, size)}`` of every file under ``root``, ``(0, 0)`` for folders.

    Folders in :data:`IGNORED_DIRS` and ``*.egg-info`` are skipped. Symlinks are recorded, not
    followed. A file that vanishes during the walk is left out (no error).
    """
    out: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames
                       if d not in IGNORED_DIRS and not d.endswith(".egg-info")]
        for name in [*dirnames, *filenames]:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            # folders count by existence only: their mtime also changes when Python writes
            # an (ignored) __pycache__ into them; new or removed entries show up by name
            isdir = os.path.isdir(p) and not os.path.islink(p)
            out[os.path.relpath(p, root)] = (0, 0) if isdir else (st.st_mtime_ns, st.st_size)
    return out


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """Human-readable differences, e.g. ``created ailower-out/softmax-sm_90a/report.json``."""
    out = [f"created {p}" for p in sorted(after.keys() - before.keys())]
    out += [f"deleted {p}" for p in sorted(before.keys() - after.keys())]
    out += [f"modified {p}" for p in sorted(before.keys() & after.keys()) if before[p] != after[p]]
    return out
