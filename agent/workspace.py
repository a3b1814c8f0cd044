"""The model's current candidate, and the ``patch`` and ``show`` tools that work on it.

A large kernel's PTX runs to thousands of lines; a model that had to resend the whole module on
every ``compile`` / ``verify`` / ``submit`` would spend most of its tokens copying. So every
conversation keeps a :class:`Workspace` holding the *current candidate*: it starts as Triton's
reference PTX, a tool call that passes ``ptx`` replaces it, ``patch`` edits it with exact
search/replace pairs, and a tool call that omits ``ptx`` uses it.

``show`` returns numbered lines of the reference's TTGIR, LLVM IR, PTX or SASS, or of the
current candidate, so the model can quote exact text for its patches. SASS comes from
``cuobjdump -sass`` (else ``nvdisasm``) on the reference cubin, found through
``TRITON_CUOBJDUMP_PATH`` / ``TRITON_NVDISASM_PATH``, Triton's bundled ``backends/nvidia/bin``,
then ``PATH`` (``../shared/reference/triton_toolchain.md`` section 1); without either the tool
says so.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["Workspace", "PatchError", "show_text", "find_cuobjdump", "find_nvdisasm",
           "MAX_SHOW_LINES", "MAX_CANDIDATE_BYTES"]

MAX_SHOW_LINES = 400
"""Lines ``show`` returns per call (the model pages with ``start_line``)."""

MAX_CANDIDATE_BYTES = 16 << 20
"""Largest candidate a patch may produce (16 MiB: far above any Triton PTX, e.g. the suite's
largest is well under 1 MiB); a patch that grows the candidate past it is refused, so repeated
edits cannot make ptxas and the verifier chew on an unbounded module."""


class PatchError(ValueError):
    """A patch did not apply; the message names the edit and why (not found / ambiguous, with
    line numbers). Nothing is changed when any edit fails."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _closest_line(text: str, search: str) -> str:
    """A hint for a search text that is not found: where its first line occurs, if anywhere."""
    first = next((ln.strip() for ln in search.splitlines() if ln.strip()), "")
    if not first:
        return ""
    hits = [i + 1 for i, ln in enumerate(text.splitlines()) if first in ln]
    if hits:
        return (f"; its first line {first[:60]!r} occurs at line(s) "
                f"{', '.join(map(str, hits[:8]))}{' ...' if len(hits) > 8 else ''} (check the "
                "following lines, whitespace included)")
    return f"; not even its first line {first[:60]!r} occurs"


class Workspace:
    """The current candidate of one conversation.

    Args:
        reference_ptx: Triton's PTX; the starting candidate.
    """

    def __init__(self, reference_ptx: str):
        self.reference = reference_ptx
        self.current = reference_ptx
        self.best = reference_ptx
        """The best valid candidate so far (set by the loop through ``Provider.seed``); the
        default base of a variant's edits."""

    def use(self, args: Any) -> Any:
        """Tool arguments with ``ptx`` filled from the current candidate when omitted; when given,
        it becomes the current candidate. Non-mapping arguments are returned unchanged (the
        validator reports them)."""
        if not isinstance(args, Mapping):
            return args
        ptx = args.get("ptx")
        if ptx is None:
            return {**args, "ptx": self.current}
        if isinstance(ptx, str) and ptx.strip():
            self.current = ptx
        return dict(args)  # a malformed ptx is left for the validator to report

    def patch(self, edits: list[dict[str, str]], base: str = "current") -> str:
        """Apply ``edits`` (``[{"search", "replace"}, ...]``) in order to the current candidate
        (or to the reference PTX when ``base`` is ``reference``, to the best valid candidate so
        far when it is ``best``); the result becomes the current candidate.

        Each ``search`` must occur exactly once in the text as edited so far.

        Returns:
            A summary: edits applied, the changed line ranges, the new line count and sha256.

        Raises:
            PatchError: an edit's search text is empty, not found, or occurs more than once
                (with the line numbers of every occurrence); the candidate is left unchanged.
        """
        if base not in ("current", "reference", "best"):
            raise PatchError(f"patch.base: 'current', 'reference' or 'best', got {base!r}")
        text = {"current": self.current, "reference": self.reference, "best": self.best}[base]
        changed: list[str] = []
        for i, e in enumerate(edits, 1):
            search, replace = e["search"], e["replace"]
            if not search:
                raise PatchError(f"patch.edits[{i}]: empty search text")
            n = text.count(search)
            if n == 0:
                raise PatchError(f"patch.edits[{i}]: search text not found in the {base} "
                                 f"candidate{_closest_line(text, search)}; no edit was applied")
            if n > 1:
                lines, start = [], 0
                while (pos := text.find(search, start)) != -1:
                    lines.append(_line_of(text, pos))
                    start = pos + 1
                raise PatchError(f"patch.edits[{i}]: search text is ambiguous: it occurs {n} "
                                 f"times, at lines {', '.join(map(str, lines[:20]))}"
                                 f"{' ...' if len(lines) > 20 else ''}; include neighbouring "
                                 "lines to make it unique; no edit was applied")
            pos = text.find(search)
            first = _line_of(text, pos)
            text = text[:pos] + replace + text[pos + len(search):]
            last = first + max(replace.count("\n"), 0)
            changed.append(f"{first}-{last}" if last != first else str(first))
        if len(text.encode()) > MAX_CANDIDATE_BYTES:
            raise PatchError(f"patch: the result would be {len(text.encode())} bytes, over the "
                             f"{MAX_CANDIDATE_BYTES}-byte limit for a candidate; no edit was "
                             "applied")
        self.current = text
        return (f"patched: {len(edits)} edit(s) applied at line(s) {', '.join(changed)}; the "
                f"current candidate has {text.count(chr(10)) + 1} lines, sha256 {_sha(text)}. "
                "compile / verify / evaluate / submit without 'ptx' use it.")


def _find_tool(tool: str) -> str | None:
    """Path of ``tool``: ``TRITON_<TOOL>_PATH``, Triton's bundled one, then ``PATH``
    (``../shared/reference/triton_toolchain.md`` section 1)."""
    env = os.environ.get(f"TRITON_{tool.upper()}_PATH")
    if env and os.access(env, os.X_OK):
        return env
    try:
        import triton

        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / tool
        if os.access(bundled, os.X_OK):
            return str(bundled)
    except ImportError:
        pass
    return shutil.which(tool)


def find_cuobjdump() -> str | None:
    """Path of a ``cuobjdump`` (see :func:`_find_tool`), or None."""
    return _find_tool("cuobjdump")


def find_nvdisasm() -> str | None:
    """Path of an ``nvdisasm`` (see :func:`_find_tool`), or None."""
    return _find_tool("nvdisasm")


def _sass(cubin: bytes) -> str:
    """SASS of ``cubin`` via ``cuobjdump -sass``; raises ``ValueError`` saying why not."""
    if not cubin:
        raise ValueError("show.what: no reference cubin in this task, so no SASS")
    tool, cmd = find_cuobjdump(), ["-sass"]
    if tool is None:
        tool, cmd = find_nvdisasm(), ["-c"]  # --print-code: code sections only
    if tool is None:
        raise ValueError("show.what: SASS is unavailable on this host: no cuobjdump or nvdisasm "
                         "(looked at TRITON_CUOBJDUMP_PATH / TRITON_NVDISASM_PATH, Triton's "
                         "backends/nvidia/bin and PATH)")
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "reference.cubin"
        f.write_bytes(cubin)
        try:
            r = subprocess.run([tool, *cmd, str(f)], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ValueError(f"show.what: {Path(tool).name} failed: {exc}") from None
    if r.returncode != 0:
        raise ValueError(f"show.what: {Path(tool).name} exited {r.returncode}: {r.stderr[:300]}")
    return r.stdout


def show_text(ctx: Any, ws: Workspace, what: str, start_line: int = 1,
              max_lines: int = MAX_SHOW_LINES) -> str:
    """Numbered lines ``start_line ..`` (at most ``max_lines``) of one artifact.

    Args:
        ctx: the :class:`~agent.providers.base.ProposalContext` (``ttgir``, ``llir``,
            ``reference_ptx``, ``reference_cubin``, ``triton_source``).
        ws: the conversation's workspace (``candidate``).
        what: ``ttgir`` | ``llir`` | ``ptx`` | ``sass`` | ``source`` | ``candidate``.

    Raises:
        ValueError: unknown ``what``, an artifact this task lacks, no ``cuobjdump`` for SASS, or
            ``start_line`` past the end.
    """
    texts = {"ttgir": lambda: ctx.ttgir, "llir": lambda: getattr(ctx, "llir", ""),
             "ptx": lambda: ctx.reference_ptx, "source": lambda: ctx.triton_source,
             "candidate": lambda: ws.current,
             "sass": lambda: _sass(getattr(ctx, "reference_cubin", b""))}
    if what not in texts:
        raise ValueError(f"show.what: one of {', '.join(texts)}, got {what!r}")
    text = texts[what]()
    if not text:
        raise ValueError(f"show.what: this task has no {what} text")
    lines = text.splitlines()
    if start_line > len(lines):
        raise ValueError(f"show.start_line: {start_line} is past the end ({len(lines)} lines)")
    n = max(1, min(max_lines, MAX_SHOW_LINES))
    chunk = lines[start_line - 1:start_line - 1 + n]
    end = start_line - 1 + len(chunk)
    head = f"{what}: lines {start_line}-{end} of {len(lines)}"
    if end < len(lines):
        head += f" (more: start_line={end + 1})"
    width = len(str(end))
    return head + "\n" + "\n".join(f"{i:>{width}}| {ln}" for i, ln in
                                   enumerate(chunk, start_line))
