"""A tiny, safe evaluator for the integer/float expressions in a KernelSpec.

Shapes (``"M * K"``), grids (``"cdiv(N, BLOCK)"``), derived constexprs (``"next_power_of_2(N)"``),
scalar argument values and the FLOP / byte formulas of a spec are strings. They are parsed once with
:mod:`ast` into a closure over a whitelist of node types; nothing is ever handed to ``eval``.

Grammar: integer and float literals, names, ``+ - * / // % **``, unary ``+``/``-``, comparisons
(``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``, chained), ``and``/``or``/``not`` (these give 1 or 0),
parentheses, and calls of the functions in :data:`FUNCTIONS`; string literals (``'none'``) and
tuple literals (``(16, 32)``) for string and tuple constexpr values: comparisons take them
(``BIAS_TYPE == 'none'``), arithmetic does not, and only :func:`evaluate_value` returns them
(:func:`evaluate` raises for a non-number result). Anything else (attributes, subscripts, lambdas, keyword arguments) raises
:class:`ExprError`. Every intermediate
value must stay within +-2**256 (a size or FLOP count beyond that is a mistake, and unbounded
integer powers could hang the process).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from functools import lru_cache

__all__ = ["ExprError", "Expr", "FUNCTIONS", "compile_expr", "evaluate", "evaluate_value"]

Number = int | float


def _cdiv(a: int, b: int) -> int:
    """Ceiling division, as ``triton.cdiv``."""
    return -(-a // b)


def _next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1), as ``triton.next_power_of_2``."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


FUNCTIONS: dict[str, Callable[..., Number]] = {
    "cdiv": _cdiv,
    "next_power_of_2": _next_power_of_2,
    "min": min,
    "max": max,
    "abs": abs,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "int": int,
}
"""Functions an expression may call."""

_BINOPS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_MAX_LEN = 512
_MAX_POW = 64
_MAX_BITS = 256
_CMPOPS: dict[type[ast.cmpop], Callable[[Number, Number], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}


def _bounded(v: Number) -> Number:
    """``v`` if its magnitude is at most 2**256 (and finite), else ``ValueError``."""
    if isinstance(v, int):
        if v.bit_length() > _MAX_BITS:
            raise ValueError(f"intermediate value exceeds 2**{_MAX_BITS}")
    elif not math.isfinite(v) or abs(v) > 2.0 ** _MAX_BITS:
        raise ValueError(f"intermediate value {v} is not finite or exceeds 2**{_MAX_BITS}")
    return v


def _number(v: object) -> Number:
    """``v`` if it is a number, else ``TypeError`` (checked *before* an operator runs, so
    ``'a' * 2**60`` or ``(1,) * 2**60`` never allocates)."""
    if not isinstance(v, int | float):  # bools are ints, as in Python (``HAS_BIAS * 4``)
        raise TypeError(f"{v!r} is not a number")
    return v


class ExprError(ValueError):
    """An expression is malformed, uses something outside the grammar, or names an unknown value.

    Attributes:
        expr: the expression text.
        col: 1-based column of the offending token, when known.
        reason: what is wrong, in a few words.
    """

    def __init__(self, expr: str, reason: str, col: int | None = None):
        self.expr, self.reason, self.col = expr, reason, col
        where = f" at column {col}" if col else ""
        super().__init__(f"expression {expr!r}{where}: {reason}")

    def __reduce__(self):  # pickle across process boundaries
        return (ExprError, (self.expr, self.reason, self.col))


Env = Mapping[str, Number]
_Fn = Callable[[Env], Number]


class Expr:
    """A parsed expression: call it with a mapping of names to numbers.

    Attributes:
        text: the source text.
        names: the free names it reads (function names excluded).
    """

    __slots__ = ("text", "names", "_fn")

    def __init__(self, text: str, fn: _Fn, names: frozenset[str]):
        self.text, self._fn, self.names = text, fn, names

    def __call__(self, env: Env) -> Number:
        """Evaluate with ``env``; raises :class:`ExprError` for a missing name or arithmetic error."""
        missing = self.names - env.keys()
        if missing:
            raise ExprError(self.text, f"unknown name(s) {', '.join(sorted(missing))}; "
                                       f"known: {', '.join(sorted(env)) or 'none'}")
        try:
            return self._fn(env)
        except (ZeroDivisionError, OverflowError, ValueError, TypeError) as exc:
            raise ExprError(self.text, f"cannot evaluate: {exc}") from None

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


def _build(node: ast.AST, text: str, names: set[str]) -> _Fn:
    col = getattr(node, "col_offset", None)
    col = None if col is None else col + 1
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float | str):
            raise ExprError(text, f"only numeric and string literals are allowed, got "
                                  f"{node.value!r}", col)
        value = node.value
        return lambda env: value
    if isinstance(node, ast.Tuple):
        items = [_build(e, text, names) for e in node.elts]
        return lambda env: tuple(f(env) for f in items)
    if isinstance(node, ast.Name):
        if node.id.startswith("_"):
            raise ExprError(text, f"name {node.id!r} is not allowed", col)
        names.add(node.id)
        name = node.id
        return lambda env: env[name]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        op = _BINOPS[type(node.op)]
        left, right = _build(node.left, text, names), _build(node.right, text, names)
        if isinstance(node.op, ast.Pow):
            def power(env: Env) -> Number:
                b, e = _number(left(env)), _number(right(env))
                if abs(e) > _MAX_POW:
                    raise ValueError(f"exponent {e} exceeds {_MAX_POW}")
                if abs(b) > 1 and e > 0 and e * math.log2(abs(b)) > _MAX_BITS:
                    raise ValueError(f"{b} ** {e} exceeds 2**{_MAX_BITS}")
                return _bounded(op(b, e))
            return power
        return lambda env: _bounded(op(_number(left(env)), _number(right(env))))
    if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
        first = _build(node.left, text, names)
        rest = [(_CMPOPS[type(o)], _build(c, text, names)) for o, c in zip(node.ops, node.comparators)]

        def compare(env: Env) -> Number:
            a = first(env)
            for cmp, fn in rest:
                b = fn(env)
                if not cmp(a, b):
                    return 0
                a = b
            return 1
        return compare
    if isinstance(node, ast.BoolOp):
        parts = [_build(v, text, names) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda env: int(all(f(env) for f in parts))
        return lambda env: int(any(f(env) for f in parts))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner_not = _build(node.operand, text, names)
        return lambda env: int(not inner_not(env))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        op1 = _UNARY[type(node.op)]
        inner = _build(node.operand, text, names)
        return lambda env: op1(_number(inner(env)))
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            if isinstance(node.func, ast.Name):
                what = f"unknown function {node.func.id!r}"
            else:  # an attribute or computed callee: name its source text, never its AST
                callee = ast.unparse(node.func)
                what = (f"{callee[:60] + ('...' if len(callee) > 60 else '')!r} is not a "
                        "function name")
            raise ExprError(text, f"{what}; only these functions may be called: "
                                  f"{', '.join(sorted(FUNCTIONS))}", col)
        if node.keywords:
            raise ExprError(text, "keyword arguments are not allowed", col)
        fn = FUNCTIONS[node.func.id]
        args = [_build(a, text, names) for a in node.args]
        return lambda env: _bounded(fn(*(_number(a(env)) for a in args)))
    raise ExprError(text, f"{type(node).__name__} is not allowed in an expression", col)


@lru_cache(maxsize=4096)
def compile_expr(text: str) -> Expr:
    """Parse ``text`` into an :class:`Expr`.

    Raises:
        ExprError: the text is empty, too long (> 512 characters), not valid Python expression
            syntax, or uses a construct outside the grammar.
    """
    if not isinstance(text, str) or not text.strip():
        raise ExprError(str(text), "empty expression")
    if len(text) > _MAX_LEN:
        raise ExprError(text[:40] + "...", f"longer than {_MAX_LEN} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(text, f"syntax error: {exc.msg}", exc.offset) from None
    names: set[str] = set()
    fn = _build(tree.body, text, names)
    return Expr(text, fn, frozenset(names))


def evaluate(text: str | int | float, env: Env) -> Number:
    """Evaluate an expression (or pass a number through) against ``env``; the result must be a
    number.

    Raises:
        ExprError: see :func:`compile_expr` and :meth:`Expr.__call__`; or the value is a string or
            a tuple (a constexpr value: see :func:`evaluate_value`).
    """
    if isinstance(text, bool):
        raise ExprError(str(text), "booleans are not numbers here")
    if isinstance(text, int | float):
        return text
    v = compile_expr(text)(env)
    if not isinstance(v, int | float):
        raise ExprError(text, f"gives {v!r}, not a number")
    return v


def evaluate_value(text: str | int | float | tuple, env: Env) -> Number | str | tuple:
    """Evaluate a constexpr value: like :func:`evaluate`, but the result may also be a string
    (``"'none'"`` -> ``'none'``) or a tuple (``"(16, BLOCK)"`` -> ``(16, 64)``); a tuple passes
    through.

    Raises:
        ExprError: as :func:`evaluate`.
    """
    if isinstance(text, tuple):
        return text
    if isinstance(text, bool):
        raise ExprError(str(text), "booleans are not numbers here")
    if isinstance(text, int | float):
        return text
    return compile_expr(text)(env)
