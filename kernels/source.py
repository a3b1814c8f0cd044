"""Finding a Triton kernel in a file as people write it, without executing the file.

Real kernels live in modules that import ``torch`` (or a project's own packages), are
``@staticmethod``\\ s of a class, call other ``@triton.jit`` helpers and read module-level
``tl.constexpr`` globals. Importing such a module runs arbitrary code and needs every dependency
installed; ailower never does that for a ``path`` or ``text`` source. Instead :func:`extract_kernel`
parses the module with :mod:`ast` and writes a small, self-contained module holding only:

* the ``import`` lines of ``triton`` (and its submodules) and ``math``;
* the module-level assignments the kernel reads (constexpr globals such as
  ``BLOCK: tl.constexpr = 128`` or ``EPS = tl.constexpr(1e-6)``), with the assignments they read;
  these run when the extracted module is imported, so only constant expressions over
  triton/math names and a few pure builtins are accepted (no other calls, no dunder names);
* the kernel and every function it calls, transitively (``helper(...)``, ``Class.helper(...)``),
  each with a plain ``@triton.jit`` (``@triton.autotune`` / ``@triton.heuristics`` dropped:
  ailower's spec carries the autotune space), copied verbatim and kept on the lines it has in the
  user's file (see :func:`_layout`: Triton's kernel hash, and so ``ailower export``, depends on
  the source text and the first line). Functions of a class stay in a ``class`` block of that
  name, which is then turned into a plain module object, because Triton >= 3.7 refuses to read a
  class object from a jit function (only constexpr globals, jit functions and modules);
* an undecorated kernel function is wrapped with ``triton.jit`` the same way.

The kernel is named ``function`` (``my_kernel``) or ``Class.function`` (``Ops.fwd_kernel``).
A name the kernel reads that comes from an import of another module (``from .utils import
helper``) cannot be reproduced without running that module: :class:`SourceExtractError` names it
with ``file:line:col``.

Triton's rule this relies on: a ``@jit`` function may read globals only when they are
``tl.constexpr`` values, other jit functions or modules (``triton/runtime/jit.py``,
``JITFunction`` dependency finder), so the extracted module keeps every global the kernel may read.
"""

from __future__ import annotations

import ast
import builtins
import re
import unicodedata
from dataclasses import dataclass, field

__all__ = ["SourceExtractError", "ExtractedKernel", "extract_kernel", "find_function",
           "KernelSignature", "compact", "split_lines", "unsafe_characters"]

_ALLOWED_IMPORT_ROOTS = ("triton", "math")
_DROP_DECORATORS = ("autotune", "heuristics", "jit", "staticmethod", "must_use_result")
_BUILTINS = set(dir(builtins))


_LINE_END = re.compile(r"\r\n|\r|\n")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """``text`` split into lines exactly where Python's tokenizer ends a line: at ``\\n``,
    ``\\r\\n`` and ``\\r`` only (the tokenizer translates both to ``\\n``; CPython
    ``Parser/tokenizer.c``, ``translate_newlines``), so line ``i`` of the result is line ``i`` of
    :func:`ast.parse`'s line numbers.

    Not :meth:`str.splitlines`, which also splits at ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``,
    U+0085, U+2028 and U+2029: a comment holding one of those is a comment to the parser but two
    lines to a tool that rebuilds the module from ``splitlines()``, and its second half becomes a
    statement (issue 17, item 2). Every line-based rebuilding of a kernel's source in ailower goes
    through this function.

    Args:
        text: any text.
        keepends: keep each line's terminator.

    Returns:
        The lines; like :meth:`str.splitlines`, a final terminator gives no empty last line.
    """
    out: list[str] = []
    start = 0
    for m in _LINE_END.finditer(text):
        out.append(text[start:m.end() if keepends else m.start()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


_ASCII_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def _is_unsafe(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch) in _UNSAFE_CATEGORIES


def unsafe_characters(text: str) -> list[tuple[int, int, str]]:
    """Line terminators other than ``\\n`` / ``\\r\\n`` / ``\\r`` and control or format
    characters (Unicode categories Cc except tab, LF and CR; Cf; Zl; Zp) that lie outside string
    literals.

    Such a character is either a syntax error to Python or sits in a comment or in whitespace,
    where no legitimate kernel needs it, while tools that split lines their own way (or editors
    that render it) disagree with the parser about what the code is. String literals may hold
    them (the parser gives them to the string).

    String literals are found with :mod:`tokenize`; when the text cannot be tokenized, every such
    character counts as outside a string (the answer errs towards reporting).

    Args:
        text: a Python module's source.

    Returns:
        ``(line, col, char)`` for each such character, in order; ``line`` and ``col`` are 1-based
        (lines as :func:`split_lines` gives them, columns in characters).
    """
    if text.isascii():
        if not _ASCII_UNSAFE.search(text):
            return []
        rx = _ASCII_UNSAFE
    else:
        bad = sorted({ch for ch in set(text) if _is_unsafe(ch)})
        if not bad:
            return []
        rx = re.compile("[" + "".join(re.escape(c) for c in bad) + "]")
    lines = split_lines(text, keepends=True)
    found = [(ln, m.start(), m.group()) for ln, line in enumerate(lines, 1)
             for m in rx.finditer(line)]
    # tokenize reads "\n"-terminated lines (a lone "\r" end is not one to it): same lines,
    # same columns
    spans = _string_spans([ln.rstrip("\r\n") + "\n" for ln in lines])
    return [(ln, col + 1, ch) for ln, col, ch in found
            if not any(a <= (ln, col) < b for a, b in spans)]


def _string_spans(lines: list[str]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """``((row, col), (end_row, end_col))`` of each string literal part (``tokenize`` positions:
    rows 1-based, columns 0-based); ``[]`` when the lines cannot be tokenized."""
    import tokenize

    kinds = {tokenize.STRING} | {getattr(tokenize, k) for k in ("FSTRING_MIDDLE", "TSTRING_MIDDLE")
                                  if hasattr(tokenize, k)}
    try:
        return [(t.start, t.end) for t in tokenize.generate_tokens(iter(lines).__next__)
                if t.type in kinds]
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return []


class SourceExtractError(ValueError):
    """The kernel cannot be extracted; ``where`` is ``file:line:col`` (or the file), ``reason``
    what is wrong."""

    def __init__(self, where: str, reason: str):
        self.where, self.reason = where, reason
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):
        return (SourceExtractError, (self.where, self.reason))


@dataclass
class ExtractedKernel:
    """The result of :func:`extract_kernel`.

    Attributes:
        text: the self-contained module source (imports, constexpr globals, class namespaces, jit
            functions), every copied line at its line number in the user's file (so it has many
            blank lines; :func:`compact` shortens them for display).
        qualname: where the kernel sits in ``text`` (``kernel`` or ``Class.kernel``).
        functions: qualified names of every function copied (the kernel first).
        globals: module-level names copied.
        wrapped: functions that had no ``@triton.jit`` and were wrapped.
    """

    text: str
    qualname: str
    functions: list[str] = field(default_factory=list)
    globals: list[str] = field(default_factory=list)
    wrapped: list[str] = field(default_factory=list)


@dataclass
class KernelSignature:
    """A kernel's parameters, read from its ``def`` (for ``ailower spec init``).

    Attributes:
        names: parameter names in order.
        constexpr: the names annotated ``tl.constexpr`` / ``constexpr``.
        annotations: name -> annotation source text ('' when none).
        defaults: name -> default value source text (only those with a default).
        docstring: the function's docstring or ''.
        lineno: the ``def`` line (1-based).
    """

    names: list[str]
    constexpr: set[str]
    annotations: dict[str, str]
    defaults: dict[str, str]
    docstring: str
    lineno: int


def _parse(text: str, filename: str) -> ast.Module:
    try:
        return ast.parse(text, filename=filename)
    except SyntaxError as exc:
        raise SourceExtractError(f"{filename}:{exc.lineno}:{exc.offset}",
                                 f"syntax error: {exc.msg}") from None


def find_function(text: str, qualname: str, filename: str = "<source>"
                  ) -> tuple[ast.FunctionDef, ast.ClassDef | None]:
    """The ``def`` of ``qualname`` (``fn`` or ``Class.fn``) at module level or in a class.

    Raises:
        SourceExtractError: no such function (the message lists the functions that exist).
    """
    tree = _parse(text, filename)
    return _find(tree, qualname, filename)


def _class_bases(tree: ast.Module) -> dict[str, tuple[ast.ClassDef, list[str]]]:
    """Module-level classes: name -> (its ``class`` node, the names of its bases, in order)."""
    out: dict[str, tuple[ast.ClassDef, list[str]]] = {}
    for node in _module_statements(tree.body):
        if isinstance(node, ast.ClassDef):
            out[node.name] = (node, [b.id for b in node.bases if isinstance(b, ast.Name)])
    return out


def _mro(name: str, classes: dict[str, tuple[ast.ClassDef, list[str]]]) -> list[str]:
    """The method resolution order of class ``name`` over the classes of the same file (C3
    linearisation, as Python computes ``__mro__``; bases from other modules are left out: their
    methods cannot be read without running those modules).

    Raises:
        ValueError: the bases admit no consistent order (Python refuses such a class too), or
            a class inherits from itself.
    """
    def lin(n: str, seen: tuple[str, ...]) -> list[str]:
        if n in seen:
            raise ValueError(f"class {n} inherits from itself")
        bases = [b for b in classes[n][1] if b in classes]
        seqs = [lin(b, seen + (n,)) for b in bases] + [list(bases)]
        out = [n]
        while any(seqs):
            for seq in seqs:
                if seq and not any(seq[0] in other[1:] for other in seqs):
                    head = seq[0]
                    break
            else:
                raise ValueError(f"the bases of class {n} have no consistent order (MRO)")
            out.append(head)
            seqs = [s[1:] if s and s[0] == head else s for s in seqs]
        return out

    return lin(name, ())


def _lookup(cls: str, attr: str, classes: dict[str, tuple[ast.ClassDef, list[str]]]
            ) -> tuple[ast.FunctionDef, str] | None:
    """The ``def`` that ``cls.attr`` names, searched along :func:`_mro` (a method inherited from a
    base class of the same file), with the class that defines it; None when no class in the
    chain defines ``attr`` as a function, or a class of the chain assigns it otherwise (then
    ``cls.attr`` is that value, not an inherited function)."""
    for c in _mro(cls, classes):
        for sub in classes[c][0].body:
            if isinstance(sub, ast.FunctionDef) and sub.name == attr:
                return sub, c
            if isinstance(sub, (ast.Assign, ast.AnnAssign)) and attr in _assigned_names(sub):
                return None
    return None


def _find(tree: ast.Module, qualname: str, filename: str
          ) -> tuple[ast.FunctionDef, ast.ClassDef | None]:
    """The ``def`` of ``qualname`` and the class that *defines* it (for ``Derived.fn`` inherited
    from ``Base``: ``Base``'s ``class`` node)."""
    parts = qualname.split(".")
    if len(parts) > 2 or not all(parts):
        raise SourceExtractError(filename, f"function {qualname!r}: use NAME or CLASS.NAME")
    classes = _class_bases(tree)
    have: list[str] = []
    for node in _module_statements(tree.body):
        if isinstance(node, ast.FunctionDef):
            have.append(node.name)
            if len(parts) == 1 and node.name == parts[0]:
                return node, None
        elif isinstance(node, ast.ClassDef):
            try:
                found = _lookup(node.name, parts[1], classes) if (
                    len(parts) == 2 and node.name == parts[0]) else None
            except ValueError as exc:
                raise SourceExtractError(f"{filename}:{node.lineno}:{node.col_offset + 1}",
                                         str(exc)) from None
            if found is not None:
                return found[0], classes[found[1]][0]
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    have.append(f"{node.name}.{sub.name}")
        elif isinstance(node, ast.AsyncFunctionDef):
            have.append(node.name)
    raise SourceExtractError(filename, f"no function {qualname!r}; the file defines: "
                                       f"{', '.join(have) or 'no functions'}")


def signature_of(text: str, qualname: str, filename: str = "<source>") -> KernelSignature:
    """Read the parameters of ``qualname`` without executing the file.

    Raises:
        SourceExtractError: no such function, or it takes ``*args`` / ``**kwargs`` (a kernel's
            parameters must be named).
    """
    fn, _ = find_function(text, qualname, filename)
    a = fn.args
    if a.vararg or a.kwarg:
        raise SourceExtractError(f"{filename}:{fn.lineno}:{fn.col_offset + 1}",
                                 f"{qualname}() takes *args/**kwargs; a kernel needs named "
                                 "parameters")
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    defaults = dict(zip([p.arg for p in [*a.posonlyargs, *a.args]][len(params) - len(a.kwonlyargs)
                                                                      - len(a.defaults):],
                        a.defaults))
    defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
    ann = {p.arg: (ast.unparse(p.annotation) if p.annotation is not None else "") for p in params}
    return KernelSignature(
        names=[p.arg for p in params],
        constexpr={n for n, t in ann.items() if t.split(".")[-1] == "constexpr"},
        annotations=ann, defaults={k: ast.unparse(v) for k, v in defaults.items()},
        docstring=ast.get_docstring(fn) or "", lineno=fn.lineno)


def _module_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements, looking inside ``try`` / ``if`` / ``with`` blocks (guarded imports
    such as ``try: import triton ... except ImportError: ...``), not inside functions/classes."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.Try):
            out += _module_statements(node.body + node.orelse + node.finalbody)
            for h in node.handlers:
                out += _module_statements(h.body)
        elif isinstance(node, ast.If):
            out += _module_statements(node.body + node.orelse)
        elif isinstance(node, ast.With):
            out += _module_statements(node.body)
        else:
            out.append(node)
    return out


def _decorator_name(d: ast.expr) -> str:
    node = d.func if isinstance(d, ast.Call) else d
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any(_decorator_name(d) == "jit" for d in fn.decorator_list)


class _Reads(ast.NodeVisitor):
    """Names a function reads (loads), and ``Name.attr`` pairs, ignoring its own locals."""

    def __init__(self) -> None:
        self.names: dict[str, ast.AST] = {}
        self.attrs: dict[tuple[str, str], ast.AST] = {}

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.names.setdefault(node.id, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load):
            self.attrs.setdefault((node.value.id, node.attr), node)
        self.generic_visit(node)


def _reads(node: ast.AST, skip_decorators: bool = True) -> _Reads:
    r = _Reads()
    if isinstance(node, ast.FunctionDef):
        for child in [*node.body, *node.args.defaults,
                      *(d for d in node.args.kw_defaults if d is not None)]:
            r.visit(child)
        for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            if a.annotation is not None:
                r.visit(a.annotation)
        if not skip_decorators:
            for d in node.decorator_list:
                r.visit(d)
    else:
        r.visit(node)
    return r


_SAFE_BUILTINS = {"int", "float", "bool", "min", "max", "abs", "round", "len", "True", "False",
                  "None"}
_BUILTIN_TYPES = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)}
"""Builtin types (``dict``, ``str``, ...): an expression may name them (annotations such as
``dict[str, int]``) but call only those in ``_SAFE_BUILTINS``."""
_SAFE_NODES = (ast.Constant, ast.Name, ast.Attribute, ast.Call, ast.BinOp, ast.UnaryOp,
               ast.BoolOp, ast.Compare, ast.Tuple, ast.List, ast.IfExp, ast.keyword,
               ast.Load, ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.Subscript,
               ast.Slice)


def _import_path(stmt: ast.stmt, bound: str) -> str:
    """The dotted path a name bound by an allowed import stands for (``tl`` ->
    ``triton.language``, ``constexpr`` from ``from triton.language import constexpr`` ->
    ``triton.language.constexpr``)."""
    if isinstance(stmt, ast.Import):
        alias = stmt.names[0]
        return alias.name if alias.asname else alias.name.split(".")[0]
    assert isinstance(stmt, ast.ImportFrom)
    return f"{stmt.module}.{stmt.names[0].name}"


def _dotted(node: ast.expr) -> tuple[str, list[str]] | None:
    """``a.b.c`` -> (``a``, [``b``, ``c``]); None when the chain does not start at a name."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    return (node.id, attrs) if isinstance(node, ast.Name) else None


def _allowed_path(path: str) -> bool:
    """Objects a def-time or global expression may name: ``triton``, ``triton.language``, one
    member of ``triton.language`` (``tl.constexpr``, ``tl.float16``) or of ``math``. Deeper
    chains are refused: they reach other modules (``triton.runtime.cache.os``)."""
    parts = path.split(".")
    if parts[:2] == ["triton", "language"]:
        return len(parts) <= 3
    if parts[0] == "math":
        return len(parts) <= 2
    return parts == ["triton"]


def _check_expr(value: ast.AST, imports_ok: dict[str, ast.stmt], assigns: dict[str, ast.stmt],
                where: str, filename: str, line: int, col: int) -> None:
    """``value`` runs when the extracted module is imported (a copied global's value or
    annotation, a copied function's default values and annotations): allow only constant
    expressions over other copied globals, a few pure builtins and members of
    ``triton.language`` / ``math`` (``tl.constexpr(2.0)``, ``2 ** 10``, ``math.log2(e)``), never
    a call of anything else (``__import__("os")``, ``open``, ``triton.runtime.cache.os.system``).

    Raises:
        SourceExtractError: the expression is not such an expression (``file:line:col``).
    """
    found: list[tuple[int, ast.AST, str]] = []  # the most telling first: name, attribute, call
    for sub in ast.walk(value):
        bad = None
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and where.startswith(
                "the annotation"):
            continue
        if not isinstance(sub, _SAFE_NODES):
            bad = f"a {type(sub).__name__} expression"
        elif isinstance(sub, ast.Name) and not (sub.id in imports_ok or sub.id in assigns
                                                or sub.id in _SAFE_BUILTINS
                                                or sub.id in _BUILTIN_TYPES):
            bad = f"the name {sub.id!r}"
        elif isinstance(sub, ast.Attribute):
            chain = _dotted(sub)
            if sub.attr.startswith("__"):
                bad = f"the attribute {sub.attr!r}"
            elif chain is None or chain[0] not in imports_ok:
                bad = f"the attribute {sub.attr!r} of a value"
            else:
                path = ".".join([_import_path(imports_ok[chain[0]], chain[0]), *chain[1]])
                if not _allowed_path(path):
                    bad = f"{path!r} (only members of triton.language and math)"
        elif isinstance(sub, ast.Call):
            f = sub.func
            if isinstance(f, ast.Name) and f.id in imports_ok:
                path = _import_path(imports_ok[f.id], f.id)
                if not _allowed_path(path):
                    bad = f"a call of {path!r}"
            elif isinstance(f, ast.Name) and f.id in _BUILTIN_TYPES and f.id not in _SAFE_BUILTINS:
                bad = f"a call of {f.id!r}"
            elif isinstance(f, ast.Name) and f.id in assigns and f.id not in _SAFE_BUILTINS:
                bad = f"a call of the global {f.id!r}"
            elif not isinstance(f, (ast.Name, ast.Attribute)):
                bad = "a call of a computed value"
        if bad:
            found.append((2 if isinstance(sub, ast.Call) else
                          1 if isinstance(sub, ast.Attribute) else 0, sub, bad))
    if found:
        _, sub, bad = min(found, key=lambda x: x[0])
        raise SourceExtractError(
            f"{filename}:{getattr(sub, 'lineno', line)}:{getattr(sub, 'col_offset', col) + 1}",
            f"{where} uses {bad}; ailower copies only constant expressions over "
            "triton.language/math names (such as tl.constexpr(128)) so that no code of the "
            "file runs")


def _check_global(node: ast.stmt, imports_ok: dict[str, ast.stmt], assigns: dict[str, ast.stmt],
                  filename: str) -> None:
    """A module-level assignment the kernel reads is copied and so runs when the extracted module
    is imported: its value and annotation must pass :func:`_check_expr`.

    Raises:
        SourceExtractError: they do not (``file:line:col``).
    """
    names = ", ".join(_assigned_names(node))
    if isinstance(node, ast.AnnAssign):
        _check_expr(node.annotation, imports_ok, assigns, f"the annotation of the global {names}",
                    filename, node.lineno, node.col_offset)
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if value is not None:
        _check_expr(value, imports_ok, assigns,
                    f"the kernel reads the global {names}, whose value", filename, node.lineno,
                    node.col_offset)


def _check_def_time(fn: ast.FunctionDef, imports_ok: dict[str, ast.stmt],
                    assigns: dict[str, ast.stmt], filename: str) -> None:
    """The parts of a copied ``def`` that Python evaluates when the module is imported (default
    values, annotations; decorators are replaced) must pass :func:`_check_expr`.

    Raises:
        SourceExtractError: one does not (``file:line:col``).
    """
    a = fn.args
    for d in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
        _check_expr(d, imports_ok, assigns, f"a default value of {fn.name}()", filename,
                    fn.lineno, fn.col_offset)
    for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
        if p is not None and p.annotation is not None:
            _check_expr(p.annotation, imports_ok, assigns,
                        f"the annotation of {fn.name}()'s parameter {p.arg}", filename,
                        fn.lineno, fn.col_offset)
    if fn.returns is not None:
        _check_expr(fn.returns, imports_ok, assigns, f"the annotation of {fn.name}()'s result",
                    filename, fn.lineno, fn.col_offset)


def _assigned_names(node: ast.stmt) -> list[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def extract_kernel(text: str, qualname: str, filename: str = "<source>") -> ExtractedKernel:
    """Build a self-contained module holding ``qualname`` and what it needs (see module doc).

    Args:
        text: the module's source (never executed).
        qualname: ``kernel`` or ``Class.kernel``.
        filename: for messages.

    Returns:
        An :class:`ExtractedKernel`.

    Raises:
        SourceExtractError: a syntax error, no such function, or the kernel reads a name imported
            from a module other than ``triton`` / ``math`` (``file:line:col`` of the read).
    """
    tree = _parse(text, filename)
    target, defining = _find(tree, qualname, filename)
    cbases = _class_bases(tree)
    aliases: dict[str, dict[str, str]] = {}  # class -> inherited attr -> the class defining it
    funcs: dict[str, ast.FunctionDef] = {}
    classes: dict[str, dict[str, ast.FunctionDef]] = {}
    assigns: dict[str, ast.stmt] = {}
    imports_ok: dict[str, ast.stmt] = {}
    imports_bad: dict[str, ast.stmt] = {}
    for node in _module_statements(tree.body):
        if isinstance(node, ast.FunctionDef):
            funcs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = {s.name: s for s in node.body if isinstance(s, ast.FunctionDef)}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for n in _assigned_names(node):
                assigns[n] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    ok = alias.name.split(".")[0] in _ALLOWED_IMPORT_ROOTS
                    (imports_ok if ok else imports_bad)[bound] = ast.Import(names=[alias])
            else:
                mod = node.module or ""
                ok = node.level == 0 and mod.split(".")[0] in _ALLOWED_IMPORT_ROOTS
                for alias in node.names:
                    bound = alias.asname or alias.name
                    stmt = ast.ImportFrom(module=node.module, names=[alias], level=node.level)
                    (imports_ok if ok else imports_bad)[bound] = stmt

    want_funcs: dict[str, tuple[ast.FunctionDef, str | None]] = {}  # qualname -> (def, class)
    want_globals: list[str] = []
    want_imports: list[str] = []
    queue: list[tuple[str, ast.AST, str | None]] = []
    tcls = defining.name if defining is not None else None
    if tcls is not None and tcls != qualname.split(".")[0]:  # Derived.fn inherited from Base
        aliases.setdefault(qualname.split(".")[0], {})[target.name] = tcls
    queue.append((f"{tcls}.{target.name}" if tcls else qualname, target, tcls))

    def need_name(name: str, at: ast.AST, cls: str | None) -> None:
        if name in imports_ok:
            if name not in want_imports:
                want_imports.append(name)
        elif name in funcs:
            if name not in want_funcs:
                queue.append((name, funcs[name], None))
        elif name in assigns:
            if name not in want_globals:
                want_globals.append(name)
                queue.append((name, assigns[name], None))
        elif name in classes:
            pass  # handled through Class.attr reads
        elif name in imports_bad:
            imp = imports_bad[name]
            src = ast.unparse(imp)
            raise SourceExtractError(
                f"{filename}:{getattr(at, 'lineno', '?')}:{getattr(at, 'col_offset', -1) + 1}",
                f"the kernel reads {name!r}, which comes from '{src}'; ailower does not execute "
                "other modules: copy that function or value into this file, or give the spec a "
                "source.module that can be imported")

    while queue:
        qn, node, cls = queue.pop(0)
        if not isinstance(node, ast.FunctionDef):
            _check_global(node, imports_ok, assigns, filename)
        if isinstance(node, ast.FunctionDef):
            if qn in want_funcs:
                continue
            want_funcs[qn] = (node, cls)
            params = {a.arg for a in [*node.args.posonlyargs, *node.args.args,
                                       *node.args.kwonlyargs]}
            r = _reads(node)
            local_stores = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                            and isinstance(n.ctx, ast.Store)}
        else:
            r = _reads(node)
            params, local_stores = set(), set()
        for name, at in r.names.items():
            if name in params or name in local_stores or (name in _BUILTINS
                                                          and name not in assigns):
                continue
            need_name(name, at, cls)
        for (base, attr), at in r.attrs.items():
            if base in cbases and base not in params:
                try:
                    found = _lookup(base, attr, cbases)
                except ValueError as exc:
                    raise SourceExtractError(
                        f"{filename}:{cbases[base][0].lineno}:{cbases[base][0].col_offset + 1}",
                        str(exc)) from None
                if found is None:
                    continue
                node_def, owner = found
                if owner != base:
                    aliases.setdefault(base, {})[attr] = owner
                q = f"{owner}.{attr}"
                if q not in want_funcs:
                    queue.append((q, node_def, owner))

    for node, _cls in want_funcs.values():  # after the reads: an import from elsewhere is
        _check_def_time(node, imports_ok, assigns, filename)  # reported as such first
    text_out = _layout(text, tree, want_funcs, want_globals, want_imports, imports_ok, assigns,
                       aliases)
    wrapped = [qn for qn, (node, _) in want_funcs.items() if not _is_jit(node)]
    return ExtractedKernel(text=text_out, qualname=qualname, functions=list(want_funcs),
                           globals=want_globals, wrapped=wrapped)


_NS_HELPER = "_ailower_namespace"


def _layout(text: str, tree: ast.Module, want_funcs: dict[str, tuple[ast.FunctionDef, str | None]],
            want_globals: list[str], want_imports: list[str], imports_ok: dict[str, ast.stmt],
            assigns: dict[str, ast.stmt], aliases: dict[str, dict[str, str]] | None = None) -> str:
    """The extracted module, laid out so that Triton sees each copied function exactly as in the
    user's file: its source from ``def`` on is copied verbatim (dedented, as Triton dedents it)
    and its first decorator stays on the same line (``inspect.getsourcelines``), because Triton's
    ``JITFunction.cache_key`` hashes that source *and* that first line number
    (``triton/runtime/jit.py``), and :mod:`export` writes override folders named by that hash.
    Unused lines are blank. The decorators become a single ``@triton.jit`` on the first decorator
    line; an undecorated function is wrapped after the module body (``f = triton.jit(f)``, its
    first line stays the ``def``). Functions of a class are emitted inside a ``class`` block of
    the same name, which after the module body is replaced by a plain module object holding them
    (Triton >= 3.7 reads only constexprs, jit functions and modules from a kernel's globals; the
    hash is the same: Triton does not hash a class or module it reads through). A function a class
    inherits from a base class of the same file (``aliases``: class -> attr -> defining class) is
    copied once, in the defining class, and the inheriting class's namespace gets the same object
    (as in Python, where ``Derived.fn is Base.fn``). The imports go
    on one line before the first copied statement; if the file has no free line there, they are
    put first and the line numbers shift (the export hash then differs; compiling is unaffected).
    """
    import inspect
    import textwrap

    src_lines = split_lines(text, keepends=True)
    lines: dict[int, str] = {}
    owner: dict[int, str] = {}  # line -> "fn" | "global" | "class"
    tail: list[str] = []

    def put(lineno: int, line: str, kind: str) -> bool:
        if lineno in lines:
            return False
        lines[lineno], owner[lineno] = line, kind
        return True

    classes_used: dict[str, ast.ClassDef] = {}
    cls_nodes = {n.name: n for n in _module_statements(tree.body) if isinstance(n, ast.ClassDef)}
    for qn, (node, cls) in want_funcs.items():
        first = min([d.lineno for d in node.decorator_list] + [node.lineno])
        try:
            block = inspect.getblock(src_lines[first - 1:])
        except (SyntaxError, IndentationError, tokenize_error()):
            block = src_lines[first - 1:node.end_lineno]
        # one line splitting, the parser's (split_lines): never str.splitlines(), see there
        body = split_lines(textwrap.dedent("\n".join(split_lines("".join(block))) + "\n"))
        n_dec = node.lineno - first
        pad = (body[n_dec][:len(body[n_dec]) - len(body[n_dec].lstrip(" \t"))]
               if n_dec < len(body) else "")  # indentation is spaces and tabs, as for Python
        if pad:  # a string in the body is less indented than the def: Triton's own dedent
            # leaves the def indented (and cannot load it); keep the text loadable
            body = [b[len(pad):] if b.startswith(pad) else b for b in body]
        if n_dec:
            body = ["@triton.jit"] + [""] * (n_dec - 1) + body[n_dec:]
        if cls is not None:
            body = [("    " + b) if b.strip() else "" for b in body]
            classes_used.setdefault(cls, cls_nodes[cls])
        for i, b in enumerate(body):
            put(first + i, b, "fn")
        if not n_dec:
            target = f"{cls}.{node.name}" if cls else node.name
            tail.append(f"{target} = triton.jit({target})")
    for cls, cnode in classes_used.items():
        put(cnode.lineno, f"class {cls}:", "class")  # a class line holds only the class
        tail.append(f"{cls} = {_NS_HELPER}({cls})")
    for cls, attrs in (aliases or {}).items():
        own = cls if cls in classes_used else "None"
        inherited = ", ".join(f"{a}={owner}.{a}" for a, owner in sorted(attrs.items()))
        tail.append(f"{cls} = {_NS_HELPER}({own}, {cls!r}, {inherited})")
    emitted: set[int] = set()
    for name in want_globals:
        node = assigns[name]
        if id(node) in emitted:
            continue
        emitted.add(id(node))
        stmt = ast.unparse(node)
        if node.lineno in lines and owner[node.lineno] == "global":
            lines[node.lineno] += "; " + stmt
        elif not put(node.lineno, stmt, "global"):
            tail.insert(0, stmt)
    imp: list[str] = []
    for name in ["triton", *want_imports]:
        stmt = imports_ok.get(name)
        line = ast.unparse(stmt) if stmt is not None else "import triton"
        if line not in imp:
            imp.append(line)
    first_used = min(lines) if lines else 1
    free = next((i for i in range(1, first_used) if i not in lines), None)
    shift = 0
    if free is None:
        free, shift = 1, 1
    ordered = [""] * (max(lines, default=0) + shift)
    for ln, t in lines.items():
        ordered[ln - 1 + shift] = t
    ordered[free - 1] = "; ".join(imp)
    if classes_used:
        tail[:0] = ["", "", f"def {_NS_HELPER}(cls, name=None, **inherited):",
                    "    import types",
                    "    if isinstance(cls, types.ModuleType):",
                    "        ns = cls",
                    "    else:",
                    "        ns = types.ModuleType(name or cls.__name__)",
                    "        if cls is not None:",
                    "            ns.__dict__.update({k: v for k, v in vars(cls).items()"
                    " if not k.startswith('__')})",
                    "    ns.__dict__.update(inherited)",
                    "    return ns"]
    return "\n".join(ordered + [""] + tail).rstrip() + "\n"


def tokenize_error() -> type[Exception]:
    """``tokenize.TokenError`` (raised by ``inspect.getblock`` on an unterminated block)."""
    import tokenize

    return tokenize.TokenError


def compact(text: str) -> str:
    """``text`` with runs of blank lines shortened to two (for prompts and display: the
    extracted module keeps the user's line numbers, so it has many blank lines)."""
    out: list[str] = []
    blank = 0
    for line in split_lines(text):
        blank = blank + 1 if not line.strip() else 0
        if blank <= 2:
            out.append(line)
    return "\n".join(out).strip() + "\n"
