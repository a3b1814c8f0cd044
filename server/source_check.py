"""Static validation of untrusted Triton source, with :mod:`ast` only (nothing is imported or run).

A submitted module may contain only:

* a module docstring;
* ``import triton``, ``import triton.language [as tl]``, ``import math`` and ``from triton[.language]
  import NAME [as ALIAS]`` / ``from math import NAME``;
* ``@triton.jit`` functions (decorator ``triton.jit``, or ``jit`` imported from ``triton``, bare or
  called with constant keyword arguments), whose default values are constants and whose
  annotations are dotted names or strings.

Inside a function body, dunder names and attributes (``__class__``, ``__globals__`` ...), the
builtins that reach the interpreter (``exec``, ``eval``, ``getattr``, ``open``, ``__import__`` ...),
nested functions, classes, lambdas, imports and ``global``/``nonlocal`` are rejected. Importing such
a module runs only the imports and the ``triton.jit`` decorator, which parses the function without
running it; Triton's code generator then interprets the body, so the body rules close the ways it
could call back into Python (``triton_toolchain.md``; Triton ``python/triton/compiler/code_generator.py``
resolves names in the function's globals and a small builtin namespace that includes ``getattr``).

Every rejection names the line and column of the offending node.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["SourceRejected", "check_triton_source", "ALLOWED_MODULES", "FORBIDDEN_NAMES"]

ALLOWED_MODULES = frozenset({"triton", "triton.language", "math"})
FORBIDDEN_NAMES = frozenset({
    "exec", "eval", "compile", "open", "getattr", "setattr", "delattr", "hasattr", "globals",
    "locals", "vars", "dir", "input", "breakpoint", "help", "memoryview", "object", "type",
    "super", "classmethod", "staticmethod", "property", "exit", "quit", "copyright", "credits",
    "license", "print", "os", "sys", "subprocess", "importlib", "builtins", "id", "callable",
})
MAX_NODES = 20_000
MAX_DEPTH = 60


@dataclass
class SourceRejected(ValueError):
    """The source breaks a rule; ``line``/``col`` (1-based) locate the offending node."""

    reason: str
    line: int = 0
    col: int = 0
    text: str = ""

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"source:{self.line}:{self.col}: " if self.line else "source: "
        return where + self.reason + (f" | {self.text.strip()[:120]}" if self.text else "")

    def __reduce__(self):
        return (SourceRejected, (self.reason, self.line, self.col, self.text))


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _is_const(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _is_const(node.operand)
    if isinstance(node, ast.Tuple | ast.List):
        return all(_is_const(e) for e in node.elts)
    return False


def _depth(node: ast.AST, limit: int) -> int:
    best, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        if best > limit:
            return best
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return best


def check_triton_source(source: str, function: str) -> list[str]:
    """Validate ``source`` (a Python module text) for the rules above.

    Args:
        source: the module text.
        function: the kernel's name; it must be one of the module's ``@triton.jit`` functions.

    Returns:
        The names of the module's ``@triton.jit`` functions.

    Raises:
        SourceRejected: a syntax error, a node past the limits (``MAX_NODES`` nodes, nesting depth
            ``MAX_DEPTH``), or a rule broken; the message carries ``source:LINE:COL``.
    """
    lines = source.splitlines()

    def fail(reason: str, node: ast.AST | None = None) -> SourceRejected:
        ln = getattr(node, "lineno", 0) or 0
        col = (getattr(node, "col_offset", 0) or 0) + 1 if ln else 0
        return SourceRejected(reason, ln, col, lines[ln - 1] if 0 < ln <= len(lines) else "")

    if "\x00" in source:
        raise SourceRejected("the source contains a NUL character")
    try:
        tree = ast.parse(source, filename="source", mode="exec")
    except SyntaxError as exc:
        raise SourceRejected(f"syntax error: {exc.msg}", exc.lineno or 0, exc.offset or 0,
                             exc.text or "") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise SourceRejected(f"the source cannot be parsed: {type(exc).__name__}") from None
    n_nodes = sum(1 for _ in ast.walk(tree))
    if n_nodes > MAX_NODES:
        raise SourceRejected(f"the source has {n_nodes} syntax nodes; the limit is {MAX_NODES}")
    if _depth(tree, MAX_DEPTH) > MAX_DEPTH:
        raise SourceRejected(f"the source nests deeper than {MAX_DEPTH} levels")

    jit_aliases: set[str] = set()   # names bound to triton.jit
    triton_aliases: set[str] = set()  # names bound to the triton module
    jit_functions: list[str] = []
    for i, stmt in enumerate(tree.body):
        if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str):
            continue  # module docstring
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name not in ALLOWED_MODULES:
                    raise fail(f"import of {a.name!r} is not allowed (only triton, "
                               "triton.language, math)", stmt)
                if a.asname is None and a.name.startswith("triton"):
                    triton_aliases.add("triton")  # `import triton.language` binds `triton`
                elif a.name == "triton":
                    triton_aliases.add(a.asname)  # type: ignore[arg-type]
                if a.asname and a.asname.startswith("__"):
                    raise fail(f"dunder alias {a.asname!r} is not allowed", stmt)
            continue
        if isinstance(stmt, ast.ImportFrom):
            if stmt.level or stmt.module not in ALLOWED_MODULES:
                raise fail(f"import from {'.' * stmt.level}{stmt.module or ''!s} is not allowed "
                           "(only triton, triton.language, math)", stmt)
            for a in stmt.names:
                if a.name == "*" or a.name.startswith("_") or (a.asname or "").startswith("_"):
                    raise fail(f"import of {a.name!r} is not allowed (no star or private names)",
                               stmt)
                if stmt.module == "triton" and a.name == "jit":
                    jit_aliases.add(a.asname or "jit")
            continue
        if isinstance(stmt, ast.FunctionDef):
            _check_function(stmt, triton_aliases, jit_aliases, fail)
            jit_functions.append(stmt.name)
            continue
        raise fail(f"only imports and @triton.jit functions may appear at module level, "
                   f"not {type(stmt).__name__}", stmt)
    if function not in jit_functions:
        raise SourceRejected(f"no @triton.jit function named {function!r} in the source (have: "
                             f"{', '.join(jit_functions) or 'none'})")
    return jit_functions


def _check_function(fn: ast.FunctionDef, triton_aliases: set[str], jit_aliases: set[str],
                    fail) -> None:
    if fn.name.startswith("__"):
        raise fail(f"function name {fn.name!r} is a dunder name", fn)
    if len(fn.decorator_list) != 1:
        raise fail(f"function {fn.name!r} must have exactly one decorator, @triton.jit", fn)
    dec = fn.decorator_list[0]
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = _dotted(target)
    ok = name in jit_aliases or (name is not None and "." in name
                                 and name.rsplit(".", 1) == [name.rsplit(".", 1)[0], "jit"]
                                 and name.rsplit(".", 1)[0] in triton_aliases)
    if not ok:
        raise fail(f"function {fn.name!r}: the decorator must be @triton.jit, not @{name or '...'}",
                   dec)
    if isinstance(dec, ast.Call):
        if dec.args or not all(k.arg and _is_const(k.value) for k in dec.keywords):
            raise fail("@triton.jit(...) takes only constant keyword arguments", dec)
    args = fn.args
    for d in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
        if not _is_const(d):
            raise fail(f"function {fn.name!r}: default values must be constants", d)
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
              *(x for x in (args.vararg, args.kwarg) if x is not None)]:
        if a.arg.startswith("__"):
            raise fail(f"parameter name {a.arg!r} is a dunder name", a)
        if a.annotation is not None and _dotted(a.annotation) is None and not (
                isinstance(a.annotation, ast.Constant) and isinstance(a.annotation.value, str)):
            raise fail(f"parameter {a.arg!r}: annotations must be dotted names "
                       "(tl.constexpr) or strings", a.annotation)
    if fn.returns is not None and _dotted(fn.returns) is None:
        raise fail(f"function {fn.name!r}: the return annotation must be a dotted name", fn.returns)
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda
                          | ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal | ast.Await
                          | ast.Yield | ast.YieldFrom | ast.AsyncFor | ast.AsyncWith | ast.Try
                          | ast.Raise | ast.Delete | ast.NamedExpr):
                raise fail(f"{type(node).__name__} is not allowed in a @triton.jit function", node)
            if isinstance(node, ast.Name):
                if node.id.startswith("__"):
                    raise fail(f"dunder name {node.id!r} is not allowed", node)
                if node.id in FORBIDDEN_NAMES:
                    raise fail(f"name {node.id!r} is not allowed in a @triton.jit function", node)
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                raise fail(f"private or dunder attribute {node.attr!r} is not allowed", node)
            elif isinstance(node, ast.keyword) and node.arg and node.arg.startswith("__"):
                raise fail(f"dunder keyword {node.arg!r} is not allowed", node)
