"""Allow-list policy for untrusted Triton source, checked with :mod:`ast` only (nothing is run).

Why an allow-list: Triton's code generator interprets a ``@triton.jit`` body at compile time and
calls any Python callable it can reach through the names in scope (Triton
``python/triton/compiler/code_generator.py``: ``visit_Attribute`` is a plain ``getattr`` on the
object, ``visit_Call`` calls non-JIT callables directly). A deny-list of dunder names is bypassed by
``tl.core.knobs.os.system(...)`` or ``tl.core.builtins.exec(...)``. So every name and attribute in a
kernel must be on a list of the documented ``triton.language`` API (https://triton-lang.org/main/
python-api/triton.language.html) or be a local value of the kernel.

A submitted module may contain only:

* a module docstring;
* ``import triton``, ``import triton.language [as NAME]``, ``from triton import jit``,
  ``from triton import language [as NAME]``, ``import math`` and
  ``from triton.language import NAME [as ALIAS]`` for a ``NAME`` in :data:`TL_API`;
* ``@triton.jit`` functions (bare, or called with keyword arguments from :data:`JIT_KWARGS` whose
  values are constants). Parameters may be annotated ``tl.constexpr`` (or the string
  ``"tl.constexpr"``) only; default values are constants.

Inside a ``@triton.jit`` body:

* an attribute chain rooted at a module (``tl.X.Y``, ``triton.X``, ``math.X``) must be, exactly, an
  entry of :data:`ALLOWED_CHAINS` (``tl.core``, ``tl.core.knobs``, ``tl.math`` alone ... are
  refused); a module name may appear only as the root of such a chain, never as a value;
* an attribute of any other value (a tensor, a dtype, a call's result) must be one of
  :data:`VALUE_ATTRS` (``x.to``, ``x.dtype``, ``x.shape`` ...) and may not be taken on a literal
  (``"id".value``);
* a bare name must be a parameter, a local variable, another ``@triton.jit`` function of the
  module, an imported ``triton.language`` name, or one of :data:`BUILTINS`; locals may not shadow
  those nor take any Python builtin's name (:data:`RESERVED_LOCALS`: Triton looks a name that is
  not bound *yet* up in its own builtins, ``getattr`` among them);
* statements: assignment, augmented assignment, expression, ``if``, ``for``, ``while``,
  ``return``, ``pass``, ``break``, ``continue``, ``assert``; expressions: arithmetic, comparisons,
  boolean operators, calls, subscripts, slices, tuples, lists, conditional expressions and
  constants (strings at most :data:`MAX_STR` characters, never an operand of arithmetic;
  no ``**`` with an exponent above 64); no f-strings, comprehensions, lambdas, dicts, sets,
  starred arguments, ``with``, ``try``, ``del``, ``global``, imports, nested definitions;
* no recursion among the module's ``@triton.jit`` functions (Triton inlines calls, so a cycle only
  burns compile time);
* ``tl.inline_asm_elementwise`` only when the operator allows it (``allow_inline_asm``).

The text checked is the text compiled: lines end only at ``\\n``, ``\\r\\n`` and ``\\r`` (as for
Python's tokenizer; :func:`kernels.source.split_lines`, which the extractor that builds the
compiled module uses too), and a line terminator other than those or any control or format
character (Unicode categories Cc except tab/LF/CR, Cf, Zl, Zp) outside a string literal is refused
(:func:`kernels.source.unsafe_characters`): ``# note<U+2028>    tl.core.builtins.exec(...)`` is
one comment to the parser and was two lines to a ``str.splitlines()`` rebuild (issue 17).

This is the first of two layers: the compile itself runs in the OS sandbox of
:mod:`server.sandbox` whatever this check says. Every rejection names the offending expression and
its ``source:LINE:COL``.
"""

from __future__ import annotations

import ast
import builtins
import unicodedata
from dataclasses import dataclass

from kernels.source import split_lines, unsafe_characters

__all__ = ["SourceRejected", "check_triton_source", "TL_API", "ALLOWED_CHAINS", "VALUE_ATTRS",
           "BUILTINS", "RESERVED_LOCALS", "JIT_KWARGS", "MAX_STR", "MAX_NODES", "MAX_DEPTH"]

# The documented triton.language functions, dtypes and constexpr helpers (triton-lang.org
# python-api/triton.language: "Programming Model", "Creation Ops", "Shape Manipulation Ops",
# "Linear Algebra Ops", "Memory/Pointer Ops", "Indexing Ops", "Math Ops", "Reduction Ops",
# "Scan/Sort Ops", "Atomic Ops", "Random Number Generation", "Iterators", "Compiler Hint Ops",
# "Debug Ops"). Module objects (core, math, extra, ...) and classes are deliberately absent.
_TL_FUNCTIONS = """
program_id num_programs arange cat full zeros zeros_like cast broadcast broadcast_to expand_dims
interleave join permute ravel reshape split squeeze trans unsqueeze view dot dot_scaled load store
make_block_ptr advance make_tensor_descriptor load_tensor_descriptor store_tensor_descriptor
flip where swizzle2d abs cdiv ceil clamp cos div_rn erf exp exp2 fdiv floor fma log log2 maximum
minimum rsqrt sigmoid sin softmax sqrt sqrt_rn umulhi argmax argmin max min reduce sum xor_sum
reduce_or associative_scan cumprod cumsum histogram sort topk gather atomic_add atomic_and
atomic_cas atomic_max atomic_min atomic_or atomic_xchg atomic_xor randint randint4x rand randn
uint_to_uniform_float pair_uniform_to_normal philox range static_range multiple_of max_contiguous
max_constancy assume debug_barrier static_print static_assert device_print device_assert
constexpr inline_asm_elementwise
""".split()
_TL_DTYPES = """
int1 int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64
float8e4nv float8e5 float8e4b15 float8e4b8 float8e5b16
""".split()
TL_API = frozenset(_TL_FUNCTIONS + _TL_DTYPES)
# tl.math.<fn>: the documented math functions re-exported under triton.language.math
_TL_MATH = frozenset("""
abs ceil cos div_rn erf exp exp2 fdiv floor fma log log2 rsqrt sin sqrt sqrt_rn umulhi
""".split())
ALLOWED_CHAINS = frozenset(
    {f"triton.language.{n}" for n in TL_API}
    | {f"triton.language.math.{n}" for n in _TL_MATH}
    | {"triton.jit", "triton.cdiv", "triton.next_power_of_2"}
    | {"math.pi", "math.e", "math.inf", "math.nan", "math.tau"})
# Attributes and methods of tensors, dtypes and shapes (triton.language.tensor / dtype documented
# members). Not here: ``value`` (unwraps a constexpr to its Python object), ``type``, ``handle``,
# ``fn``, and everything private.
VALUE_ATTRS = frozenset("""
to dtype shape T element_ty numel reshape trans permute broadcast_to expand_dims view ravel split
sum max min argmax argmin cumsum cumprod sort flip reduce associative_scan histogram xor_sum abs
exp exp2 log log2 sqrt rsqrt sigmoid sin cos floor ceil erf softmax logical_and logical_or
primitive_bitwidth is_floating is_int is_int_signed is_int_unsigned is_ptr is_fp8 is_fp16 is_bf16
is_fp32 is_fp64 is_bool is_block scalar advance
""".split())
# Python builtins the Triton code generator handles itself (code_generator.py ``builtin_namespace``
# and the ones it folds at compile time); nothing that reaches the interpreter.
BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "abs"})
# Names a local may never take. Triton binds a local only when its assignment runs, and resolves a
# name not bound *yet* (used before the assignment, or assigned only in a branch it folds away)
# through the module globals and then ``CodeGenerator.builtin_namespace`` (Triton 3.9:
# ``len list range float int isinstance getattr hasattr print min max``): the policy's "it is a
# local" would otherwise let ``getattr(tl.load, '__globals__')`` through. Every Python builtin is
# reserved, so a Triton that adds one to that namespace is covered too.
RESERVED_LOCALS = frozenset(n for n in dir(builtins) if not n.startswith("__")) | BUILTINS
JIT_KWARGS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "noinline",
                        "debug"})
CONSTEXPR_ANNOTATIONS = frozenset({"triton.language.constexpr"})
MAX_STR = 256
MAX_NODES = 20_000
MAX_DEPTH = 60
_MAX_POW = 64

_OK_STMTS = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.If, ast.For, ast.While,
             ast.Return, ast.Pass, ast.Break, ast.Continue, ast.Assert)
_OK_EXPRS = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.Attribute,
             ast.Subscript, ast.Slice, ast.Name, ast.Constant, ast.Tuple, ast.List, ast.IfExp,
             ast.keyword, ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)


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
        return not isinstance(node.value, str | bytes) or len(node.value) <= MAX_STR
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


def _expr(node: ast.AST) -> str:
    try:
        s = ast.unparse(node)
    except (ValueError, RecursionError):
        s = type(node).__name__
    return s if len(s) <= 80 else s[:77] + "..."


class _Module:
    """What the module-level statements bind: module aliases and imported tl names."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}   # local name -> "triton" | "triton.language" | "math"
        self.names: dict[str, str] = {}     # local name -> full chain ("triton.language.load")
        self.jit: dict[str, ast.FunctionDef] = {}


def check_triton_source(source: str, function: str, *, allow_inline_asm: bool = False) -> list[str]:
    """Validate ``source`` (a Python module text) against the allow-list policy above.

    Args:
        source: the module text.
        function: the kernel's name; it must be one of the module's ``@triton.jit`` functions.
        allow_inline_asm: accept ``tl.inline_asm_elementwise`` (operator setting
            ``AILOWER_SERVER_ALLOW_INLINE_ASM``; off by default).

    Returns:
        The names of the module's ``@triton.jit`` functions.

    Raises:
        SourceRejected: a syntax error, a node past the limits (``MAX_NODES`` nodes, nesting depth
            ``MAX_DEPTH``), or a rule broken; the message names the expression and carries
            ``source:LINE:COL``.
    """
    lines = split_lines(source)  # the parser's lines (never str.splitlines: see split_lines)

    def fail(reason: str, node: ast.AST | None = None) -> SourceRejected:
        ln = getattr(node, "lineno", 0) or 0
        col = (getattr(node, "col_offset", 0) or 0) + 1 if ln else 0
        return SourceRejected(reason, ln, col, lines[ln - 1] if 0 < ln <= len(lines) else "")

    if "\x00" in source:
        raise SourceRejected("the source contains a NUL character")
    bad = unsafe_characters(source)
    if bad:
        ln, col, ch = bad[0]
        raise SourceRejected(
            f"character U+{ord(ch):04X} ({unicodedata.name(ch, 'control character').lower()}) "
            "outside a string literal is not allowed: lines end only at \\n, \\r\\n or \\r, and "
            f"control and format characters may appear only inside strings ({len(bad)} found)",
            ln, col, (lines[ln - 1] if 0 < ln <= len(lines) else "").translate(
                {ord(c): f"\\u{ord(c):04x}" for _, _, c in bad}))
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

    mod = _Module()

    def bind(name: str, node: ast.AST) -> None:
        if name.startswith("__"):
            raise fail(f"dunder name {name!r} is not allowed", node)
        if name in mod.modules or name in mod.names or name in mod.jit:
            raise fail(f"name {name!r} is bound twice at module level", node)

    for i, stmt in enumerate(tree.body):
        if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str):
            continue  # module docstring
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name not in ("triton", "triton.language", "math"):
                    raise fail(f"import of {a.name!r} is not allowed (only triton, "
                               "triton.language, math)", stmt)
                local = a.asname or a.name.split(".")[0]
                target = a.name if a.asname else a.name.split(".")[0]
                if local in mod.modules and mod.modules[local] == target:
                    continue
                bind(local, stmt)
                mod.modules[local] = target
            continue
        if isinstance(stmt, ast.ImportFrom):
            if stmt.level or stmt.module not in ("triton", "triton.language"):
                raise fail(f"import from {'.' * stmt.level}{stmt.module or ''} is not allowed "
                           "(only from triton or triton.language)", stmt)
            for a in stmt.names:
                local = a.asname or a.name
                if stmt.module == "triton" and a.name in ("jit", "language"):
                    bind(local, stmt)
                    if a.name == "jit":
                        mod.names[local] = "triton.jit"
                    else:
                        mod.modules[local] = "triton.language"
                elif stmt.module == "triton.language" and a.name in TL_API:
                    bind(local, stmt)
                    mod.names[local] = f"triton.language.{a.name}"
                else:
                    raise fail(f"'from {stmt.module} import {a.name}' is not allowed: "
                               f"{a.name!r} is not in the documented triton.language API", stmt)
            continue
        if isinstance(stmt, ast.FunctionDef):
            bind(stmt.name, stmt)
            mod.jit[stmt.name] = stmt
            continue
        raise fail(f"only imports and @triton.jit functions may appear at module level, "
                   f"not {type(stmt).__name__} ({_expr(stmt).splitlines()[0][:60]})", stmt)
    calls: dict[str, set[str]] = {}
    for fn in mod.jit.values():
        calls[fn.name] = _check_function(fn, mod, fail, allow_inline_asm)
    _check_no_recursion(calls, mod, fail)
    if function not in mod.jit:
        raise SourceRejected(f"no @triton.jit function named {function!r} in the source (have: "
                             f"{', '.join(mod.jit) or 'none'})")
    return list(mod.jit)


def _chain(node: ast.AST, mod: _Module) -> str | None:
    """The full dotted chain of ``node`` when its root is a module alias or an imported tl name."""
    d = _dotted(node)
    if d is None:
        return None
    root, _, rest = d.partition(".")
    if root in mod.modules:
        return mod.modules[root] + ("." + rest if rest else "")
    if root in mod.names:
        return mod.names[root] + ("." + rest if rest else "")
    return None


def _check_no_recursion(calls: dict[str, set[str]], mod: _Module, fail) -> None:
    """Refuse a cycle in the call graph. Iterative (an explicit stack): a chain of thousands of
    ``@triton.jit`` functions must be a clean answer, not a ``RecursionError`` in the API."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in calls:
        if root in state:
            continue
        path: list[str] = [root]
        state[root] = 1
        stack = [iter(sorted(calls.get(root, ())))]
        while stack:
            callee = next(stack[-1], None)
            if callee is None:
                stack.pop()
                state[path.pop()] = 2
                continue
            if state.get(callee) == 1:
                cycle = " -> ".join([*path[path.index(callee):], callee])
                raise fail(f"recursive @triton.jit call {cycle} is not allowed", mod.jit[path[-1]])
            if callee not in state:
                state[callee] = 1
                path.append(callee)
                stack.append(iter(sorted(calls.get(callee, ()))))


def _check_function(fn: ast.FunctionDef, mod: _Module, fail, allow_inline_asm: bool) -> set[str]:
    if len(fn.decorator_list) != 1:
        raise fail(f"function {fn.name!r} must have exactly one decorator, @triton.jit", fn)
    dec = fn.decorator_list[0]
    target = dec.func if isinstance(dec, ast.Call) else dec
    if _chain(target, mod) != "triton.jit":
        raise fail(f"function {fn.name!r}: the decorator must be @triton.jit, not "
                   f"@{_expr(target)}", dec)
    if isinstance(dec, ast.Call):
        if dec.args:
            raise fail("@triton.jit(...) takes keyword arguments only", dec)
        for k in dec.keywords:
            if k.arg not in JIT_KWARGS or not _is_const(k.value):
                raise fail(f"@triton.jit keyword {k.arg!r} is not allowed (allowed, with constant "
                           f"values: {', '.join(sorted(JIT_KWARGS))})", k.value)
    args = fn.args
    if args.vararg or args.kwarg:
        raise fail(f"function {fn.name!r}: *args/**kwargs are not allowed", fn)
    for d in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
        if not _is_const(d):
            raise fail(f"function {fn.name!r}: default value {_expr(d)!r} is not a constant", d)
    params: set[str] = set()
    for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        if a.arg.startswith("__") or a.arg in mod.modules or a.arg in mod.names \
                or a.arg in mod.jit or a.arg in BUILTINS:
            raise fail(f"parameter name {a.arg!r} is a dunder name or shadows a module, builtin or "
                       "kernel name", a)
        params.add(a.arg)
        ann = a.annotation
        if ann is not None:
            ok = _chain(ann, mod) in CONSTEXPR_ANNOTATIONS or (
                isinstance(ann, ast.Constant) and ann.value in ("tl.constexpr", "constexpr"))
            if not ok:
                raise fail(f"parameter {a.arg!r}: annotation {_expr(ann)!r} is not allowed "
                           "(only tl.constexpr)", ann)
    if fn.returns is not None:
        raise fail(f"function {fn.name!r}: return annotations are not allowed", fn.returns)

    locals_: set[str] = set(params)
    for node in ast.walk(ast.Module(body=fn.body, type_ignores=[])):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.For):
            targets = [node.target]
        elif isinstance(node, ast.AnnAssign):
            if not isinstance(node.target, ast.Name) or node.value is None \
                    or _chain(node.annotation, mod) not in CONSTEXPR_ANNOTATIONS:
                raise fail(f"annotated assignment {_expr(node)!r}: only 'NAME: tl.constexpr = "
                           "VALUE' is allowed", node)
            targets = [node.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    if n.id.startswith("__") or n.id in mod.modules or n.id in mod.names \
                            or n.id in mod.jit or n.id in RESERVED_LOCALS:
                        raise fail(f"assignment to {n.id!r} is not allowed (dunder, or shadows a "
                                   "module, Python/Triton builtin or kernel name)", n)
                    locals_.add(n.id)
                elif not isinstance(n, ast.Tuple | ast.List | ast.Subscript | ast.expr_context
                                    | ast.Attribute):
                    pass
    calls: set[str] = set()
    for stmt in fn.body:
        _check_node(stmt, mod, locals_, calls, fail, allow_inline_asm)
    return calls


def _check_node(node: ast.AST, mod: _Module, locals_: set[str], calls: set[str], fail,
                allow_inline_asm: bool) -> None:
    """Walk ``node`` (a statement or expression of a jit body) top-down."""
    if isinstance(node, ast.stmt):
        if not isinstance(node, _OK_STMTS):
            raise fail(f"{type(node).__name__} statements are not allowed in a @triton.jit "
                       "function", node)
        if isinstance(node, ast.For | ast.While) and node.orelse:
            raise fail("'else' on a loop is not allowed", node)
        for t in (node.targets if isinstance(node, ast.Assign) else
                  [node.target] if isinstance(node, ast.AugAssign | ast.For) else []):
            for n in ast.walk(t):
                if isinstance(n, ast.Attribute):
                    raise fail(f"assignment to the attribute {_expr(n)!r} is not allowed", n)
                if isinstance(n, ast.Starred):
                    raise fail("starred assignment is not allowed", n)
        children = ([node.target, node.value] if isinstance(node, ast.AnnAssign)
                    else list(ast.iter_child_nodes(node)))  # the annotation was checked above
        for child in children:
            _check_node(child, mod, locals_, calls, fail, allow_inline_asm)
        return
    if not isinstance(node, _OK_EXPRS):
        raise fail(f"{type(node).__name__} ({_expr(node)!r}) is not allowed in a @triton.jit "
                   "function", node)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bytes):
            raise fail("bytes literals are not allowed", node)
        if isinstance(node.value, str) and len(node.value) > MAX_STR:
            raise fail(f"string literal of {len(node.value)} characters (limit {MAX_STR})", node)
        return
    if isinstance(node, ast.BinOp):
        for side in (node.left, node.right):
            if isinstance(side, ast.Constant) and isinstance(side.value, str):
                raise fail(f"string arithmetic {_expr(node)!r} is not allowed", node)
        if isinstance(node.op, ast.Pow) and not (
                isinstance(node.right, ast.Constant) and isinstance(node.right.value, int)
                and not isinstance(node.right.value, bool) and 0 <= node.right.value <= _MAX_POW):
            raise fail(f"'**' needs a constant integer exponent in [0, {_MAX_POW}]: "
                       f"{_expr(node)!r}", node)
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            raise fail(f"private or dunder attribute in {_expr(node)!r} is not allowed", node)
        chain = _chain(node, mod)
        if chain is not None:
            if chain not in ALLOWED_CHAINS:
                raise fail(f"{_expr(node)!r} is not in the documented triton.language API "
                           "(allowed: tl.<function or dtype>, tl.math.<function>, triton.jit, "
                           "triton.cdiv, triton.next_power_of_2)", node)
            if chain == "triton.jit":
                raise fail("triton.jit is a decorator only: in a body it would compile a library "
                           "function's source with that module's globals", node)
            if chain == "triton.language.inline_asm_elementwise" and not allow_inline_asm:
                raise fail("tl.inline_asm_elementwise is disabled on this server "
                           "(AILOWER_SERVER_ALLOW_INLINE_ASM)", node)
            return  # the whole chain is checked; do not visit its prefix on its own
        if isinstance(node.value, ast.Constant):
            raise fail(f"attribute of a literal {_expr(node)!r} is not allowed", node)
        _check_node(node.value, mod, locals_, calls, fail, allow_inline_asm)
        if node.attr not in VALUE_ATTRS:
            raise fail(f"attribute {node.attr!r} in {_expr(node)!r} is not an allowed tensor or "
                       "dtype member", node)
        return
    if isinstance(node, ast.Name):
        n = node.id
        if n.startswith("__"):
            raise fail(f"dunder name {n!r} is not allowed", node)
        if n in mod.modules:
            raise fail(f"the module {n!r} may only be used as 'tl.<documented name>', not as a "
                       "value", node)
        if n in mod.names:
            if mod.names[n] == "triton.jit":
                raise fail("triton.jit is a decorator only: in a body it would compile a library "
                           "function's source with that module's globals", node)
            if mod.names[n] == "triton.language.inline_asm_elementwise" and not allow_inline_asm:
                raise fail("tl.inline_asm_elementwise is disabled on this server "
                           "(AILOWER_SERVER_ALLOW_INLINE_ASM)", node)
            return
        if n in mod.jit:
            calls.add(n)
            return
        if n in locals_ or n in BUILTINS:
            return
        raise fail(f"name {n!r} is not a parameter, local, kernel, imported triton.language name "
                   f"or allowed builtin ({', '.join(sorted(BUILTINS))})", node)
    if isinstance(node, ast.Call):
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise fail("starred arguments are not allowed", a)
        for k in node.keywords:
            if k.arg is None:
                raise fail("'**' keyword arguments are not allowed", k)
            if k.arg.startswith("_"):
                raise fail(f"private keyword {k.arg!r} is not allowed", k)
    for child in ast.iter_child_nodes(node):
        _check_node(child, mod, locals_, calls, fail, allow_inline_asm)
