"""A starter KernelSpec inferred from a kernel's source, read with :mod:`ast` (never executed).

``ailower spec init FILE.py::fn`` writes the YAML this module builds. What it infers, from the
kernel's body rather than from names alone:

* **Pointers**: a parameter is a pointer when it is the base of an address that ``tl.load``,
  ``tl.store`` or a ``tl.atomic_*`` reads or writes (``tl.load(X + cols)``, ``X += row * stride``
  then ``tl.load(X + cols)``, ``ptrs = x_ptr + offs`` then ``tl.load(ptrs)``), or of
  ``tl.make_block_ptr`` / ``tl.make_tensor_descriptor``. An address is ``base + offset``; a
  parameter that is multiplied, divided, compared or given to ``range`` / ``tl.arange`` /
  ``cdiv`` is an integer, never a base.
* **Roles**: loaded only -> ``in``; stored only -> ``out``; loaded and stored -> ``inout``;
  written only by atomics -> ``out`` with ``init: zeros`` (the kernel accumulates into it).
* **Dtypes**: a pointer whose stored value is cast (``y.to(tl.float16)``) gets that dtype; a
  scalar is ``fp32`` when it first meets float arithmetic (``var + eps``, ``x * scale``, a float
  literal, ``tl.sqrt``/``tl.exp``...) and ``i32`` otherwise (sizes, strides, offsets).
* **Autotune space**: ``@triton.autotune(configs=[triton.Config({...}, num_warps=..), ...])``
  (a literal list, a module-level list, or a list comprehension over literal lists) becomes
  ``autotune.configs``; ``@triton.heuristics({'EVEN_K': lambda args: ...})`` becomes the
  constexpr's ``value`` expression where the spec's expression language can say it.
* **meta**: only block-size-like constexprs (``BLOCK*``, ``TILE*``, ``GROUP*``, ``CHUNK*``,
  ``SPLIT*``) that the autotune configs do not give; other constexprs get a fixed ``value``
  (their default, ``false`` for flag-like names, a size name for size-like names).

Every guess is marked ``# TODO`` and every line is valid YAML (comments only after complete
values). Source of the Triton rules: ``triton/runtime/autotuner.py`` (``Config`` fields
``kwargs``, ``num_warps``, ``num_stages``, ``num_ctas``, ``maxnreg``; ``heuristics`` values are
``lambda args: ...`` over the launch arguments).
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels.source import _decorator_name, find_function, signature_of

__all__ = ["KernelUse", "infer_use", "autotune_configs", "starter_spec"]

_BLOCK_LIKE = re.compile(r"(^|_)(BLOCK|TILE|GROUP|CHUNK|SPLIT)", re.I)
_FLAG_LIKE = re.compile(r"^(HAS|IS|USE|EVEN|ENABLE|DO|WITH|NO|APPLY|SAVE|RETURN)_", re.I)
_SIZE_LIKE = re.compile(r"^(HEAD_DIM|HEAD_SIZE|D|DIM|D_MODEL|N_CTX|SEQ_LEN|K|N|M|HIDDEN"
                        r"|[A-Z]+_DIM|DIM_[A-Z]+|NUM_[A-Z]+|N_[A-Z]+)$")
_FLOAT_NAMES = re.compile(r"(eps|scale|alpha|beta|gamma|lr|temp|temperature|momentum|decay"
                          r"|theta|sigma|softcap|sm_scale|dropout|p_drop|weight_decay)", re.I)
_OUT_NAMES = re.compile(r"(^|_)(out|output|y|o|dst|res|result|c|z)(_|$)", re.I)
_FLOAT_FUNCS = {"sqrt", "sqrt_rn", "rsqrt", "exp", "exp2", "log", "log2", "sin", "cos", "sigmoid",
                "erf", "tanh", "fdiv", "div_rn", "softmax", "fma"}
_INT_FUNCS = {"arange", "cdiv", "range", "static_range", "multiple_of", "max_contiguous",
              "program_id", "num_programs", "swizzle2d"}
_DTYPES = {"float16": "fp16", "float32": "fp32", "bfloat16": "bf16", "float64": "fp64",
           "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
           "float8e4nv": "fp8e4nv", "float8e5": "fp8e5", "int1": "i1"}
_ITEMSIZE = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
             "u8": 1, "fp8e4nv": 1, "fp8e5": 1, "i1": 1}
MAX_STARTER_CONFIGS = 256
"""Most autotune configs a starter imports (a comprehension may expand to more; the rest are
left out with a note)."""


@dataclass
class KernelUse:
    """What the kernel's body says about its parameters (see the module docstring).

    Attributes:
        pointers: parameters used as the base of a load/store/atomic address, in order.
        read / written / atomic: pointers loaded from, stored to, updated by atomics.
        stored_dtype: pointer -> spec dtype of a value cast before it is stored, or ``i64`` for
            a pointer whose loaded values offset another address (indices, labels, token ids).
        float_scalars / int_scalars: non-pointer parameters with float / integer evidence.
    """

    pointers: list[str] = field(default_factory=list)
    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    atomic: set[str] = field(default_factory=set)
    stored_dtype: dict[str, str] = field(default_factory=dict)
    float_scalars: set[str] = field(default_factory=set)
    int_scalars: set[str] = field(default_factory=set)


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return ""


def _cast_dtype(e: ast.AST | None) -> str | None:
    """``v.to(tl.float16)`` -> ``fp16``; None for anything else."""
    if isinstance(e, ast.Call) and _call_name(e) == "to" and e.args and isinstance(
            e.args[0], ast.Attribute) and e.args[0].attr in _DTYPES:
        return _DTYPES[e.args[0].attr]
    return None


class _Use(ast.NodeVisitor):
    """One pass over a function body collecting address roots and scalar evidence."""

    def __init__(self, params: list[str]):
        self.params = set(params)
        self.order = params
        self.local_roots: dict[str, set[str]] = {}
        self.accesses: list[tuple[set[str], str, ast.AST | None]] = []  # roots, kind, value
        self.int_ev: set[str] = set()
        self.strong_int: set[str] = set()  # compared, a range bound, an arange/cdiv argument
        self.stored_locals: dict[str, str] = {}  # local -> dtype of its `.to(tl.X)` value
        self.loaded_from: dict[str, set[str]] = {}  # local -> pointers its tl.load reads
        self.index_ptrs: set[str] = set()  # pointers whose loaded values offset an address
        self.float_ev: set[str] = set()
        self.first_float: dict[str, int] = {}
        self._float_locals: set[str] = set()

    # -- address roots: parameters an address expression is based on --------------------------
    def roots(self, e: ast.AST) -> set[str]:
        if isinstance(e, ast.Name):
            if e.id in self.local_roots:
                return set(self.local_roots[e.id])
            return {e.id} if e.id in self.params else set()
        if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            left, right = self.roots(e.left), self.roots(e.right)
            for side, other in ((e.left, right), (e.right, left)):
                if other:  # an address plus a loaded value: that value is an index
                    for n in ast.walk(side):
                        if isinstance(n, ast.Name) and n.id in self.loaded_from:
                            self.index_ptrs |= self.loaded_from[n.id]
            return left | (right if isinstance(e.op, ast.Add) else set())
        if isinstance(e, ast.Subscript):  # ptrs[:, None]
            return self.roots(e.value)
        if isinstance(e, ast.Call) and _call_name(e) in ("make_block_ptr", "advance",
                                                           "make_tensor_descriptor"):
            if e.args:
                return self.roots(e.args[0])
            base = next((k.value for k in e.keywords if k.arg in ("base", "pointer")), None)
            return self.roots(base) if base is not None else set()
        if isinstance(e, ast.Call) and _call_name(e) in ("multiple_of", "max_contiguous"):
            return self.roots(e.args[0]) if e.args else set()
        if isinstance(e, ast.IfExp):
            return self.roots(e.body) | self.roots(e.orelse)
        return set()

    def _assign(self, target: ast.AST, value: ast.AST, aug: bool) -> None:
        if isinstance(target, ast.Name):
            r = self.roots(value)
            if aug:
                r |= self.roots(target)
                self.local_roots[target.id] = r
            elif target.id not in self.params:
                self.local_roots[target.id] = r
            if target.id in self.params and aug:
                self.local_roots[target.id] = r | {target.id}

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(
                node.value, ast.Call) and _call_name(node.value) == "load" and node.value.args:
            self.loaded_from[node.targets[0].id] = self.roots(node.value.args[0])
        for t in node.targets:
            self._assign(t, node.value, False)
            dt = _cast_dtype(node.value)
            if isinstance(t, ast.Name) and dt:
                self.stored_locals[t.id] = dt

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.generic_visit(node)
        if isinstance(node.op, ast.Add):
            self._assign(node.target, node.value, True)
        elif isinstance(node.target, ast.Name) and node.target.id in self.params:
            self.int_ev.add(node.target.id)

    # -- scalar evidence ------------------------------------------------------------------------
    def _names(self, e: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(e) if isinstance(n, ast.Name) and n.id in self.params}

    def visit_BinOp(self, node: ast.BinOp) -> None:
        self.generic_visit(node)
        for side, other in ((node.left, node.right), (node.right, node.left)):
            if not (isinstance(side, ast.Name) and side.id in self.params):
                continue
            if self._is_float(other) or (isinstance(node.op, ast.Div) and side is node.right
                                         and self._is_float(other)):
                self.float_ev.add(side.id)
            elif isinstance(node.op, (ast.Mult, ast.FloorDiv, ast.Mod, ast.LShift, ast.RShift,
                                      ast.BitAnd, ast.BitOr, ast.Pow)):
                self.int_ev.add(side.id)  # weak: an index product (pid * stride)

    def _is_float(self, e: ast.AST) -> bool:
        """A value that is certainly floating point: a float literal, a float math call, a loaded
        value converted to a float type, or arithmetic over one."""
        if isinstance(e, ast.Constant):
            return isinstance(e.value, float)
        if isinstance(e, ast.Call):
            n = _call_name(e)
            if n in _FLOAT_FUNCS:
                return True
            if n == "to" and e.args and isinstance(e.args[0], ast.Attribute):
                return e.args[0].attr.startswith(("float", "bfloat"))
            return False
        if isinstance(e, ast.BinOp):
            return self._is_float(e.left) or self._is_float(e.right)
        if isinstance(e, ast.Name):
            return e.id in self._float_locals
        return False

    def visit_Compare(self, node: ast.Compare) -> None:
        self.generic_visit(node)
        for side in [node.left, *node.comparators]:
            if isinstance(side, ast.Name) and side.id in self.params:
                self.int_ev.add(side.id)
                self.strong_int.add(side.id)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        name = _call_name(node)
        if name in _INT_FUNCS:
            for a in node.args:
                got = {n for n in self._names(a)} - self._addr_names(a)
                self.int_ev |= got
                self.strong_int |= {n for n in got if isinstance(a, ast.Name)}
        if name in _FLOAT_FUNCS:
            for a in node.args:
                if isinstance(a, ast.BinOp):
                    for side in (a.left, a.right):
                        if isinstance(side, ast.Name) and side.id in self.params:
                            self.float_ev.add(side.id)
        recv = node.func.value if isinstance(node.func, ast.Attribute) else None
        if name in ("load", "store") and isinstance(recv, ast.Name) and recv.id not in (
                "tl", "triton", "language") and self.roots(recv):
            # a tensor descriptor's method: desc.load([...]) / desc.store([...], value)
            val = node.args[1] if name == "store" and len(node.args) > 1 else None
            self.accesses.append((self.roots(recv), name, val))
        elif name == "load" and node.args:
            self.accesses.append((self.roots(node.args[0]), "load", None))
        elif name == "store" and node.args:
            val = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "value"), None)
            self.accesses.append((self.roots(node.args[0]), "store", val))
        elif name.startswith("atomic_") and node.args:
            self.accesses.append((self.roots(node.args[0]), "atomic", None))

    def _addr_names(self, e: ast.AST) -> set[str]:
        return self.roots(e)


def _local_float_names(fn: ast.FunctionDef) -> set[str]:
    """Locals assigned a value that is certainly floating point (``x = tl.load(..).to(tl.float32)``,
    ``acc = tl.zeros(.., dtype=tl.float32)``, ``mean = tl.sum(x) / N``)."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            v = node.value
            text = ast.unparse(v)
            if re.search(r"\.to\(tl\.(b?float)|dtype=tl\.(b?float)|tl\.(sqrt|exp|exp2|log|rsqrt|"
                         r"sigmoid|sum|max|dot)\(|\bload\(", text) or (
                    isinstance(v, ast.BinOp) and isinstance(v.op, ast.Div)):
                out.add(node.targets[0].id)
    return out


def infer_use(fn: ast.FunctionDef) -> KernelUse:
    """Read pointers, roles, stored dtypes and scalar kinds from a kernel's body.

    ``fn`` is the kernel's ``def`` (:func:`kernels.source.find_function`); nothing is executed.
    A parameter that is both an address base and has integer evidence (an offset added to a
    pointer: ``x_ptr + start``) is a pointer only when it is the sole parameter base of some
    access, or its name says pointer.
    """
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]
    u = _Use(params)
    u._float_locals = _local_float_names(fn)
    for stmt in fn.body:
        u.visit(stmt)
    use = KernelUse()
    sole = {next(iter(r)) for r, _, _ in u.accesses if len(r) == 1}
    bases: set[str] = set()
    for roots, _, _ in u.accesses:
        cands = [r for r in roots if r not in u.int_ev] or [
            r for r in roots if r in sole or re.search(r"ptr|^[A-Z]", r)]
        if len(cands) > 1:
            named = [r for r in cands if re.search(r"ptr", r, re.I)]
            cands = named or cands
        bases |= set(cands)
    use.pointers = [p for p in params if p in bases]
    for roots, kind, val in u.accesses:
        for p in roots & bases:
            if kind == "load":
                use.read.add(p)
            elif kind == "store":
                use.written.add(p)
                dt = _cast_dtype(val) or (u.stored_locals.get(val.id) if isinstance(
                    val, ast.Name) else None)
                if dt:
                    use.stored_dtype.setdefault(p, dt)
            elif kind == "atomic":
                use.atomic.add(p)
    for p in u.index_ptrs & bases:
        use.stored_dtype.setdefault(p, "i64")
    use.float_scalars = u.float_ev - bases - u.strong_int
    use.int_scalars = (u.int_ev - bases) - use.float_scalars
    return use


# ---- @triton.autotune / @triton.heuristics ---------------------------------------------------
class _NotLiteral(ValueError):
    pass


def _literal(e: ast.AST, env: dict[str, Any], globals_: dict[str, ast.AST], depth: int = 0) -> Any:
    """A safe evaluator for config lists: literals, names bound by a comprehension or to a
    module-level literal, ``triton.Config(...)`` (returned as a dict), list comprehensions over
    literal iterables, ``range`` of literals. Anything else raises :class:`_NotLiteral`."""
    if depth > 20:
        raise _NotLiteral("too deep")
    if isinstance(e, ast.Constant):
        return e.value
    if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(x, env, globals_, depth + 1) for x in e.elts]
    if isinstance(e, ast.Dict):
        if any(k is None for k in e.keys):
            raise _NotLiteral("dict unpacking")
        return {_literal(k, env, globals_, depth + 1): _literal(v, env, globals_, depth + 1)
                for k, v in zip(e.keys, e.values)}
    if isinstance(e, ast.Name):
        if e.id in env:
            return env[e.id]
        if e.id in globals_:
            return _literal(globals_[e.id], env, globals_, depth + 1)
        raise _NotLiteral(f"name {e.id}")
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return -_literal(e.operand, env, globals_, depth + 1)
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Mult, ast.Sub, ast.Pow,
                                                       ast.FloorDiv)):
        a, b = _literal(e.left, env, globals_, depth + 1), _literal(e.right, env, globals_,
                                                                     depth + 1)
        if isinstance(e.op, ast.Add) and isinstance(a, list) and isinstance(b, list):
            return a + b
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)) or \
                abs(a) > 1 << 20 or abs(b) > 64:
            raise _NotLiteral("arithmetic")
        return {ast.Add: a + b, ast.Mult: a * b, ast.Sub: a - b, ast.Pow: a ** b,
                ast.FloorDiv: a // b if b else 0}[type(e.op)]
    if isinstance(e, ast.Compare) and len(e.ops) == 1:
        a, b = _literal(e.left, env, globals_, depth + 1), _literal(e.comparators[0], env,
                                                                     globals_, depth + 1)
        ops = {ast.Lt: lambda: a < b, ast.LtE: lambda: a <= b, ast.Gt: lambda: a > b,
               ast.GtE: lambda: a >= b, ast.Eq: lambda: a == b, ast.NotEq: lambda: a != b,
               ast.In: lambda: a in b, ast.NotIn: lambda: a not in b}
        if type(e.ops[0]) not in ops:
            raise _NotLiteral("comparison")
        return ops[type(e.ops[0])]()
    if isinstance(e, ast.BoolOp):
        vals = [_literal(v, env, globals_, depth + 1) for v in e.values]
        return all(vals) if isinstance(e.op, ast.And) else any(vals)
    if isinstance(e, ast.Call):
        name = _call_name(e)
        if name == "Config":
            args = [_literal(a, env, globals_, depth + 1) for a in e.args]
            kw = {k.arg: _literal(k.value, env, globals_, depth + 1) for k in e.keywords if k.arg}
            meta = args[0] if args else kw.pop("kwargs", {})
            if not isinstance(meta, dict):
                raise _NotLiteral("Config kwargs")
            return {"meta": meta, **{k: v for k, v in kw.items()
                                     if k in ("num_warps", "num_stages", "num_ctas", "maxnreg")}}
        if name == "range" and isinstance(e.func, ast.Name):
            args = [_literal(a, env, globals_, depth + 1) for a in e.args]
            if not all(isinstance(a, int) for a in args) or len(args) > 3:
                raise _NotLiteral("range")
            r = range(*args)
            if len(r) > 4096:
                raise _NotLiteral("range too long")
            return list(r)
        raise _NotLiteral(f"call {name}")
    if isinstance(e, ast.ListComp):
        out: list[Any] = []

        def gen(i: int, scope: dict[str, Any]) -> None:
            if len(out) > MAX_STARTER_CONFIGS * 16:
                raise _NotLiteral("too many")
            if i == len(e.generators):
                out.append(_literal(e.elt, scope, globals_, depth + 1))
                return
            g = e.generators[i]
            it = _literal(g.iter, scope, globals_, depth + 1)
            if not isinstance(it, list):
                raise _NotLiteral("iterable")
            for v in it:
                s2 = dict(scope)
                if isinstance(g.target, ast.Name):
                    s2[g.target.id] = v
                elif isinstance(g.target, ast.Tuple) and all(
                        isinstance(t, ast.Name) for t in g.target.elts) and isinstance(
                        v, list | tuple) and len(v) == len(g.target.elts):
                    s2.update({t.id: x for t, x in zip(g.target.elts, v)})  # type: ignore[union-attr]
                else:
                    raise _NotLiteral("target")
                if all(_literal(c, s2, globals_, depth + 1) for c in g.ifs):
                    gen(i + 1, s2)

        gen(0, dict(env))
        return out
    raise _NotLiteral(type(e).__name__)


def _module_literals(tree: ast.Module) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
    return out


def autotune_configs(fn: ast.FunctionDef, tree: ast.Module
                     ) -> tuple[list[dict[str, Any]] | None, dict[str, str], list[str]]:
    """The ``@triton.autotune`` configs and ``@triton.heuristics`` of ``fn``.

    Returns:
        ``(configs or None, heuristics, notes)``: configs as ``{"meta": {...}, "num_warps": ..}``
        dicts (None when there is no autotune decorator or its list is not literal); heuristics
        as constexpr name -> the lambda's body source; notes on what could not be imported.
    """
    configs: list[dict[str, Any]] | None = None
    heur: dict[str, str] = {}
    notes: list[str] = []
    globals_ = _module_literals(tree)
    for d in fn.decorator_list:
        if not isinstance(d, ast.Call):
            continue
        name = _decorator_name(d)
        if name == "autotune":
            e = next((k.value for k in d.keywords if k.arg == "configs"), d.args[0] if d.args
                     else None)
            if e is None:
                continue
            try:
                got = _literal(e, {}, globals_)
                if not isinstance(got, list) or not all(isinstance(c, dict) for c in got):
                    raise _NotLiteral("not a list of triton.Config")
                configs = got
            except (_NotLiteral, TypeError, ZeroDivisionError) as exc:
                notes.append(f"@triton.autotune configs at line {d.lineno} are computed "
                             f"({exc}); list them under autotune.configs")
        elif name == "heuristics":
            e = d.args[0] if d.args else next((k.value for k in d.keywords if k.arg == "values"),
                                              None)
            if isinstance(e, ast.Dict):
                for k, v in zip(e.keys, e.values):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(
                            v, ast.Lambda):
                        heur[k.value] = _heuristic_expr(v)
    return configs, heur, notes


class _ArgsToNames(ast.NodeTransformer):
    def __init__(self, argname: str):
        self.argname = argname

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == self.argname and isinstance(
                node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return ast.Name(id=node.slice.value, ctx=ast.Load())
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in ("triton", "tl"):
            return ast.Name(id=node.attr, ctx=ast.Load())
        return self.generic_visit(node)


def _heuristic_expr(lam: ast.Lambda) -> str:
    """``lambda args: args['N'] % args['BLOCK'] == 0`` -> ``N % BLOCK == 0``."""
    argname = lam.args.args[0].arg if lam.args.args else "args"
    body = _ArgsToNames(argname).visit(ast.parse(ast.unparse(lam.body), mode="eval").body)
    return ast.unparse(body)


# ---- the YAML writer ----------------------------------------------------------------------------
def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's escaping is valid YAML)."""
    return json.dumps(text)


def _yaml_value(text: str) -> str:
    """A Python default's source as a YAML scalar: bools lower-case, numbers as they are,
    strings (``'none'``) as a quoted string expression (a string constexpr), else quoted."""
    if text in ("True", "False"):
        return text.lower()
    if re.fullmatch(r"-?\d+", text) or re.fullmatch(r"-?\d*\.\d+(e-?\d+)?|-?\d+e-?\d+", text):
        return text
    try:
        v = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return _q(text)
    if isinstance(v, str):
        return _q(repr(v))
    if isinstance(v, tuple):
        return json.dumps(list(v))
    return _q(text)


def _flow(meta: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in meta.items()) + "}"


def starter_spec(file: Path, function: str, spec_dir: Path) -> str:
    """The starter spec's YAML text for ``function`` (``fn`` or ``Class.fn``) in ``file``.

    Args:
        file: the kernel's Python file (never executed).
        function: the kernel's name.
        spec_dir: where the spec will be written (``source.path`` is made relative to it).

    Raises:
        kernels.source.SourceExtractError: the file does not parse, has no such function, or the
            function takes ``*args`` / ``**kwargs``.
        OSError: the file cannot be read.
    """
    text = file.read_text()
    sig = signature_of(text, function, str(file))
    fn, _ = find_function(text, function, str(file))
    tree = ast.parse(text)
    use = infer_use(fn)
    configs, heur, notes = autotune_configs(fn, tree)
    tuned = {k for c in configs or [] for k in c.get("meta", {})}
    rel = os.path.relpath(Path(file).resolve(), spec_dir.resolve())
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", function.split(".")[-1].removesuffix("_kernel")
                  or function)
    block = next((n for n in sig.names if n in sig.constexpr and _BLOCK_LIKE.search(n)), None)
    lines = [
        f"# KernelSpec for {function}() in {file.name} (written by 'ailower spec init'; edit the",
        "# TODO lines, then run: ailower lower THIS_FILE.yaml). Expressions (shapes, values,",
        "# grid, flops, bytes) are evaluated by ailower's safe evaluator over the names in",
        "# 'sizes', the autotune meta values, num_warps, num_stages and num_ctas.",
        f"name: {_q(name)}",
        f"description: {_q((sig.docstring.splitlines() or [''])[0][:100])}",
        "source:",
        f"  path: {_q(rel)}          # read with ast, never executed",
        f"  function: {function}",
        "params:                # every parameter of the kernel, in order",
    ]
    def int_value(n: str) -> str:
        low = n.lower()
        if low.startswith("stride") and not (low in ("stride", "row_stride")
                                              or low.endswith(("_row", "m", "0"))):
            return "1"
        return "N"

    scalar_value = {n: int_value(n) for n in sig.names if n not in sig.constexpr}
    for k, expr in list(heur.items()):  # args['n_elements'] -> the value written for it
        try:
            tree_e = ast.parse(expr, mode="eval")
        except SyntaxError:
            continue
        for node in ast.walk(tree_e):
            if isinstance(node, ast.Name) and node.id in scalar_value:
                node.id = f"({scalar_value[node.id]})"
        heur[k] = ast.unparse(tree_e)
    meta: dict[str, str] = {}
    # a heuristic over the sizes (N % BLOCK == 0) must hold alike at both sizes (a candidate is
    # PTX for one set of constexprs): then both sizes are multiples of every power-of-two block
    dims: dict[str, int] = {"N": 4096 if heur else 1000}
    bench: dict[str, int] = {"N": 16777216}
    n_ptr_bytes: list[str] = []
    first_dtype = next((d for d in use.stored_dtype.values() if d.startswith(("fp", "bf"))),
                       "fp32")  # other pointers: the first float output's dtype
    for n in sig.names:
        default = sig.defaults.get(n)
        if n in sig.constexpr:
            if n in heur:
                lines.append(f"  - {{name: {n}, kind: constexpr, value: {_q(heur[n])}}}"
                             "   # from @triton.heuristics (TODO: check; a heuristic of the "
                             "size must hold at every size)")
            elif n in tuned:
                lines.append(f"  - {{name: {n}, kind: constexpr}}   # from the @triton.autotune "
                             "configs")
            elif default is not None and default != "None":
                lines.append(f"  - {{name: {n}, kind: constexpr, value: {_yaml_value(default)}}}"
                             "   # fixed; or drop 'value' to autotune it under autotune.meta")
            elif _BLOCK_LIKE.search(n) and configs:
                lines.append(f"  - {{name: {n}, kind: constexpr, value: 64}}   # not in the "
                             "@triton.autotune configs; TODO: its value")
            elif _BLOCK_LIKE.search(n):
                meta[n] = "[64, 128, 256]" if "GROUP" not in n.upper() else "[8]"
                lines.append(f"  - {{name: {n}, kind: constexpr}}   # from autotune.meta "
                             "(TODO: values)")
            elif _FLAG_LIKE.search(n):
                lines.append(f"  - {{name: {n}, kind: constexpr, value: false}}   # TODO: true "
                             "or false")
            elif _SIZE_LIKE.match(n) and n != "N":
                dims.setdefault(n, 64)
                bench.setdefault(n, 64)
                lines.append(f"  - {{name: {n}, kind: constexpr, value: {n}}}   # a size "
                             f"constexpr (sizes.*.{n}); TODO: its value")
            else:
                lines.append(f"  - {{name: {n}, kind: constexpr, value: 1}}   # TODO: its value "
                             "(a number, true/false, \"'a string'\" or a list)")
        elif default == "None" and n not in use.pointers:
            lines.append(f"  - {{name: {n}, kind: none}}   # passed as None (a constexpr None); "
                         "TODO: or a pointer")
        elif n in use.pointers or (not use.pointers and re.search(r"(ptr|_p)$", n, re.I)):
            r, w = n in use.read, n in use.written or n in use.atomic
            if use.pointers:
                role = "inout" if r and w else "out" if w else "in"
                why = "read and written" if r and w else "written" if w else "read"
            else:
                role = "out" if _OUT_NAMES.search(n.removesuffix("_ptr").removesuffix("ptr")) \
                    else "in"
                why = "guessed from the name"
            init = ", init: zeros" if (n in use.atomic and not r and n not in use.written) else ""
            dtype = use.stored_dtype.get(n, first_dtype)
            n_ptr_bytes.append(f"{_ITEMSIZE.get(dtype, 4)} * N")
            lines.append(f"  - {{name: {n}, kind: pointer, dtype: {dtype}, shape: [N], role: "
                         f"{role}{init}}}   # {why} by the kernel; TODO: dtype, shape")
        elif n in use.float_scalars or (n not in use.int_scalars and _FLOAT_NAMES.search(n)):
            guess = _yaml_value(default) if default else ("1.0e-5" if re.search(
                r"eps", n, re.I) else "1.0")
            lines.append(f"  - {{name: {n}, kind: scalar, dtype: fp32, value: {guess}}}"
                         "   # a float by its use; TODO: value")
        else:
            lines.append(f"  - {{name: {n}, kind: scalar, dtype: i32, value: {scalar_value[n]}}}"
                         "   # TODO: an expression over sizes (e.g. M * K)")
    grid = f'"cdiv(N, {block})"' if block else "1"
    if not any("role: out" in ln or "role: inout" in ln for ln in lines):
        lines.append("  # TODO: no parameter is written by the kernel as read here: mark the "
                     "output's role out")
    lines += [
        "sizes:                 # named problem sizes: 'verify' is checked, 'bench' is timed",
        f"  verify: {_flow(dims)}     # TODO: small" + (
            "; a @triton.heuristics value must be alike at both sizes" if heur
            else " and not a multiple of the block"),
        f"  bench: {_flow(bench)}  # TODO: large enough to fill the GPU",
        f"grid: [{grid}]   # TODO: programs along x (and y, z)",
        "autotune:",
    ]
    if configs:
        lines.append(f"  configs:              # from @triton.autotune ({len(configs)} configs)")
        for c in configs[:MAX_STARTER_CONFIGS]:
            opts = "".join(f", {k}: {json.dumps(c[k])}" for k in ("num_warps", "num_stages",
                                                                  "num_ctas", "maxnreg") if k in c)
            lines.append(f"    - {{meta: {_flow(c['meta'])}{opts}}}")
        if len(configs) > MAX_STARTER_CONFIGS:
            lines.append(f"    # {len(configs) - MAX_STARTER_CONFIGS} more configs left out")
    else:
        lines += ["  meta:" + ("" if meta else " {}"),
                  *(f"    {k}: {v}" for k, v in meta.items()),
                  "  num_warps: [4, 8]",
                  "  num_stages: [2, 3]"]
    lines += [f"# note: {n}" for n in notes]
    lines += [
        "flops: 0               # TODO: FLOPs of one launch (0 for memory-bound kernels)",
        f"bytes: {_q(' + '.join(n_ptr_bytes) or '8 * N')}   # TODO: minimum DRAM bytes one "
        "launch moves",
        "# reference: ref.py::reference   # optional float64 NumPy reference "
        "f(inputs, dims) -> {out: array}",
    ]
    return "\n".join(lines) + "\n"

