"""Output folders that never lose an earlier result (issue 13, "output safety").

``ailower lower --out DIR`` writes into a staging folder beside ``DIR`` (same file system, so the
final step is a rename). Only a run that produced a valid candidate replaces ``DIR``; the result
that was there before is kept as ``DIR.prev`` (one generation). A run that fails (no valid
candidate, a provider or tool error, Ctrl-C) leaves ``DIR`` untouched and keeps its own report and
transcript in ``DIR.failed`` for inspection. Every run is also recorded in the database, so
``ailower runs show ID`` can bring back any of them.

Layout after two successful runs and one failed run::

    DIR/          the newest successful run (softmax.ptx, softmax.cubin, report.json, transcript.jsonl)
    DIR.prev/     the successful run before it
    DIR.failed/   the last failed run (report.json, transcript.jsonl)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["StagedOutput", "OutputError", "RESULT_MARKERS"]

RESULT_MARKERS = ("report.json", "transcript.jsonl")
"""Files that mark a folder as an earlier ailower result (which a new result may move aside)."""


class OutputError(Exception):
    """``--out`` cannot be used (message names the folder and the reason)."""


class StagedOutput:
    """A staging folder for one run's files, committed to ``final`` only on success.

    Args:
        final: the ``--out`` folder. It may exist (an earlier result) or not.

    Raises:
        OutputError: ``final`` exists and is not a folder, or is a non-empty folder that is not
            an ailower result (no ``report.json``: e.g. ``--out .``), or its parent cannot be
            created or written.

    Attributes:
        final: the ``--out`` folder.
        staging: the hidden folder the run writes into (``.NAME.staging-XXXX`` beside ``final``).
        prev: where the previous successful result is kept (``NAME.prev``).
        failed: where a failed run's files go (``NAME.failed``).
    """

    def __init__(self, final: Path):
        self.final = Path(final)
        if self.final.is_symlink():
            # results go where the link points (the link itself is never replaced or followed
            # into a deletion); a dangling link names a folder that does not exist
            target = Path(os.path.realpath(self.final))
            if not target.exists():
                raise OutputError(f"--out {self.final}: a symbolic link to {target}, which does "
                                  "not exist; create it or give another folder")
            self.final = target
        if self.final.exists() and not self.final.is_dir():
            raise OutputError(f"--out {self.final}: cannot create the folder: a file of that name "
                              "exists")
        if self.final.is_dir() and any(self.final.iterdir()) and not any(
                (self.final / n).exists() for n in RESULT_MARKERS):
            # a successful run moves the folder aside: never do that to a folder of other files
            raise OutputError(f"--out {self.final}: the folder holds files that are not an ailower "
                              "result (no report.json); choose a new or empty folder")
        self.final = self.final.absolute() if self.final.name in ("", ".", "..") else self.final
        parent = self.final.absolute().parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"--out {self.final}: cannot create the folder: "
                              f"{exc.strerror or exc}") from None
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OutputError(f"--out {self.final}: the folder {parent} is not writable")
        try:
            self.staging = Path(tempfile.mkdtemp(prefix=f".{self.final.name}.staging-", dir=parent))
        except OSError as exc:
            raise OutputError(f"--out {self.final}: cannot create the folder: "
                              f"{exc.strerror or exc}") from None
        self.prev = self.final.with_name(self.final.name + ".prev")
        self.failed = self.final.with_name(self.final.name + ".failed")

    def path(self, name: str) -> Path:
        """Where ``name`` is written now (inside the staging folder)."""
        return self.staging / name

    def final_path(self, name: str) -> Path:
        """Where ``name`` will be once the run is committed."""
        return self.final / name

    def commit(self) -> Path | None:
        """Make the staged files the result: ``final`` -> ``prev`` (replacing an older ``prev``),
        staging -> ``final``.

        Returns:
            The ``prev`` folder when an earlier result was kept there, else None.

        Raises:
            OSError: a rename failed; no file is lost (the staging folder and the earlier result
                both still exist under the names given in the message).
        """
        kept = None
        try:
            if self.final.exists() and any(self.final.iterdir()):
                _discard(self.prev)
                os.replace(self.final, self.prev)
                kept = self.prev
            elif self.final.exists():
                self.final.rmdir()  # an empty folder (e.g. made by the user): nothing to keep
            os.replace(self.staging, self.final)
        except OSError as exc:
            raise OutputError(f"--out {self.final}: cannot move this run's result into place "
                              f"({exc.strerror or exc}: {exc.filename}); its files are in "
                              f"{self.staging}") from None
        return kept

    def abandon(self) -> Path | None:
        """The run failed: keep its files in ``failed`` (replacing an older one); ``final`` is not
        touched. Returns the ``failed`` folder, or None when the run wrote nothing."""
        if not self.staging.exists():
            return None
        if not any(self.staging.iterdir()):
            self.staging.rmdir()
            return None
        try:
            _discard(self.failed)
            os.replace(self.staging, self.failed)
        except OSError as exc:
            raise OutputError(f"--out {self.final}: cannot keep this run's files in "
                              f"{self.failed} ({exc.strerror or exc}); they are in "
                              f"{self.staging}") from None
        return self.failed


def _discard(path: Path) -> None:
    """Remove an old ``.prev``/``.failed``: a symbolic link (or a file) of that name is unlinked,
    never followed, so the folder it points to keeps its files."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
