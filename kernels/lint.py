"""Checks of a spec against its kernel's source that the spec's schema cannot make.

:func:`out_read_before_write`: a pointer declared ``role: out`` that the kernel loads from before
it stores to it. The harness fills an ``out`` buffer with a sentinel before every launch (NaN or
an out-of-range integer, ``kernels/spec.py`` ``Param.init``), so a kernel that reads it computes
from garbage, and every candidate, Triton's own included, fails the reference; the buffer is
probably ``inout``. The check reads the kernel's ``ast`` only (nothing runs): a load is a call of
``tl.load`` (or ``triton.language.load``) whose pointer argument mentions the parameter or a local
computed from it; "before" is source order, the first load against the first store.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any

__all__ = ["OutReadBeforeWrite", "out_read_before_write"]

_LOADS = {"load"}
_STORES = {"store", "atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or",
           "atomic_xor", "atomic_xchg", "atomic_cas"}


@dataclass(frozen=True)
class OutReadBeforeWrite:
    """``param`` (declared ``out``) is loaded at ``file:line`` before any store to it."""

    param: str
    file: str
    line: int

    def message(self) -> str:
        """One line for the CLI, naming the parameter, the load and the likely fix."""
        return (f"{self.file}:{self.line}: '{self.param}' is declared 'role: out' but the kernel "
                "reads it before writing it: out buffers hold a sentinel at launch, so every "
                "candidate would compute from it; if the kernel updates it in place, declare it "
                "'role: inout'")


def _tl_call(node: ast.AST) -> str | None:
    """``load`` for ``tl.load(...)`` / ``triton.language.load(...)``, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _kernel_ast(spec: Any) -> tuple[ast.AST | None, int, str]:
    """(the kernel's ``FunctionDef``, line offset to add, file name); (None, 0, "") without source.

    A ``path``/``text`` source is parsed from its own text (line numbers are the file's); a
    ``module`` source from :func:`inspect.getsourcelines` of the loaded function."""
    src = spec.source
    name = src.function.split(".")[-1]
    if src.module is None:
        text, offset, file = src.source_text(), 0, src.path or "<inline text>"
    else:
        fn = src.load()
        try:
            lines, start = inspect.getsourcelines(getattr(fn, "fn", fn))
            file = inspect.getsourcefile(getattr(fn, "fn", fn)) or src.module
        except (OSError, TypeError):
            return None, 0, ""
        text, offset = textwrap.dedent("".join(lines)), start - 1
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None, 0, ""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node, offset, str(file)
    return None, 0, ""


def out_read_before_write(spec: Any) -> list[OutReadBeforeWrite]:
    """Every ``out`` pointer of ``spec`` (without ``init: zeros``) loaded before it is stored.

    Args:
        spec: a :class:`kernels.spec.KernelSpec` (a ``path``/``text`` source is parsed, never
            run; a ``module`` source is the user's imported code).

    Returns:
        One finding per such parameter (empty when the source cannot be read: a kernel built
        at run time has no source to check).

    Raises:
        SpecError: a ``module`` source cannot be imported, or a ``path`` source cannot be read.
    """
    outs = [p.name for p in spec.params
            if p.kind == "pointer" and p.role == "out" and getattr(p, "init", "sentinel") != "zeros"]
    if not outs:
        return []
    tree, first, file = _kernel_ast(spec)
    if tree is None:
        return []
    derived: dict[str, set[str]] = {p: {p} for p in outs}
    nodes = sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")),
                   key=lambda n: (n.lineno, n.col_offset))
    loaded: dict[str, int] = {}
    stored: set[str] = set()
    for n in nodes:
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None:
            used = _names(n.value)
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for p, names in derived.items():
                if used & names:
                    for t in targets:
                        names |= _names(t)
        kind = _tl_call(n)
        if kind in _LOADS | _STORES and n.args:  # type: ignore[union-attr]
            used = _names(n.args[0])  # type: ignore[union-attr]
            for p, names in derived.items():
                if not used & names:
                    continue
                if kind in _STORES:
                    stored.add(p)
                elif p not in stored and p not in loaded:
                    loaded[p] = n.lineno + first
    return [OutReadBeforeWrite(p, str(file), line) for p, line in loaded.items()]
