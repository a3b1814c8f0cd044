"""Hand-written recursive-descent parser for PTX modules.

Covers what Triton 3.6-3.9 emits for sm_80/sm_89/sm_90a/sm_100a and hand-written CUTLASS-style PTX:
module directives, ``.entry``/``.func`` with parameter lists and performance directives, register and
variable declarations, nested ``{}`` scopes (Triton's inline-asm blocks), labels, guarded
instructions with dotted opcodes (``::`` included), vector / address / call-list operands, constant
expressions, ``.loc``/``.file`` and the ``.section .debug_*`` blocks (skipped).

The only exception it raises is :class:`~verifier.errors.PTXSyntaxError`. Nesting (scopes, vectors,
constant expressions) is bounded so no ``RecursionError`` can escape.

Source of the grammar: PTX ISA 9.1 §4 (syntax), §5 (state spaces, types, variables), §7 (functions,
parameters), §9.7 (instruction syntax), §11 (directives).
"""

from __future__ import annotations

import gc
import struct
from bisect import bisect_right

from verifier.errors import PTXSyntaxError
from verifier.ptx.ast import (
    TYPE_SIZES,
    Directive,
    Function,
    Instruction,
    Label,
    Module,
    Operand,
    Param,
    PerfDirective,
    RegDecl,
    Scope,
    VarDecl,
)
from verifier.ptx.lexer import line_starts, tokenize

__all__ = ["parse_ptx"]

_ID_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$%")
_DIGITS = frozenset("0123456789")
_LINKAGE = frozenset({"visible", "extern", "weak", "common"})
_VAR_SPACES = frozenset({"global", "const", "shared", "local", "param", "tex"})
_OPAQUE = frozenset({"texref", "samplerref", "surfref"})
_STATE_SPACES = frozenset({"global", "shared", "const", "local", "param", "generic",
                           "shared::cta", "shared::cluster", "param::entry", "param::func"})
_VEC = {"v2": 2, "v4": 4, "v8": 8}
#: Performance directives / function attributes -> (min, max) number of integer arguments
#: (every directive that takes arguments needs at least one).
_PERF = {"reqntid": (1, 3), "maxntid": (1, 3), "reqnctapercluster": (1, 3),
         "minnctapersm": (1, 1), "maxnctapersm": (1, 1), "maxnreg": (1, 1),
         "maxclusterrank": (1, 1), "abi_preserve": (1, 1), "abi_preserve_control": (1, 1),
         "explicitcluster": (0, 0), "noreturn": (0, 0), "blocksareclusters": (0, 0)}
_LABEL_DIRECTIVES = frozenset({".callprototype", ".branchtargets", ".calltargets"})
_BINARY_PREC = {"|": 1, "^": 2, "&": 3, "<<": 4, ">>": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_MAX_DEPTH = 64
_EOF = ""


def parse_ptx(text: str, filename: str = "<ptx>") -> Module:
    """Parse PTX source text into a :class:`~verifier.ptx.ast.Module`.

    Args:
        text: the PTX module.
        filename: the name used in positions and error messages.

    Returns:
        The syntax tree; every node has 1-based ``line``/``col``.

    Raises:
        PTXSyntaxError: the text is not well-formed PTX; ``str(err)`` is
            ``file:line:col: error: expected ...``. No other exception type escapes.

    Source: PTX ISA 9.1 §4, §5, §7, §11.
    """
    if not isinstance(text, str):
        raise PTXSyntaxError(filename, 1, 1, "expected PTX text")
    # The tree is acyclic and allocation-heavy: pausing the cyclic GC roughly halves parse time.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _Parser(text, filename).module()
    finally:
        if was_enabled:
            gc.enable()


class _Parser:
    __slots__ = ("_call", "_l0", "_l1", "_ln", "_plain", "filename", "i", "loc", "ls", "mod",
                 "starts", "text", "toks")

    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        self.toks, self.starts = tokenize(text)
        self.ls = line_starts(text)
        self.i = 0
        self.loc: tuple[int, int, int] | None = None
        self._ln, self._l0, self._l1 = 1, 0, -1
        self.mod = Module(filename=filename)
        self._call = False  # parsing a 'call': '(' opens an argument list, else an expression
        # registers declared without '%' ('.reg .b32 remAddr32;' in CUTLASS's inline asm: any
        # identifier names a register, PTX ISA 9.1 §5.3.1), per open scope: name -> count
        # of a parameterized declaration ('.reg .b32 r<4>;' names r0..r3) or None
        self._plain: list[dict[str, int | None]] = []

    # ----------------------------------------------------------------- positions and errors

    def lc(self, k: int) -> tuple[int, int]:
        """Token index -> (line, col), caching the current line."""
        s = self.starts[k]
        if self._l0 <= s < self._l1:
            return self._ln, s - self._l0 + 1
        ls = self.ls
        ln = bisect_right(ls, s)
        self._ln, self._l0 = ln, ls[ln - 1]
        self._l1 = ls[ln] if ln < len(ls) else len(self.text) + 1
        return ln, s - self._l0 + 1

    def _describe(self, k: int) -> str:
        t = self.toks[k]
        if t == _EOF:
            return "end of file"
        if not t.isprintable():
            return f"'{t.encode('unicode_escape').decode('ascii')}'"
        if len(t) > 40:
            t = t[:37] + "..."
        return f"'{t}'"

    def error(self, k: int, message: str) -> PTXSyntaxError:
        t = self.toks[k]
        if t == '"':
            message = "unterminated string literal"
        elif t == "/*" or (t == "/" and self.text.startswith("/*", self.starts[k])):
            message = "unterminated '/*' comment"
        line, col = self.lc(k)
        return PTXSyntaxError(self.filename, line, col, message)

    def expected(self, what: str, k: int | None = None) -> PTXSyntaxError:
        k = self.i if k is None else k
        return self.error(k, f"expected {what}, found {self._describe(k)}")

    def expect(self, tok: str) -> int:
        k = self.i
        if self.toks[k] != tok:
            raise self.expected(f"'{tok}'")
        self.i = k + 1
        return k

    def _plain_reg(self, t: str) -> bool:
        """Whether identifier ``t`` names a register declared without '%' in an open scope."""
        for sc in self._plain:
            if t in sc and sc[t] is None:
                return True
            i = len(t)
            while i and t[i - 1].isdigit():
                i -= 1
            if 0 < i < len(t) and (t[i] != "0" or i == len(t) - 1):
                n = sc.get(t[:i])
                if n is not None and int(t[i:]) < n:
                    return True
        return False

    def ident(self, what: str = "an identifier", allow_reg: bool = False) -> str:
        k = self.i
        t = self.toks[k]
        if not t or t[0] not in _ID_START or (t[0] == "%" and not allow_reg):
            raise self.expected(what)
        self.i = k + 1
        return t

    def int_const(self, what: str = "an integer constant") -> int:
        k = self.i
        v = self.const_expr(0)
        if not isinstance(v, int):
            raise self.error(k, f"expected {what}, found a floating-point constant")
        return v

    def skip_line(self) -> int:
        """Skip from the current token to the end of its source line; return the index after."""
        k = self.i
        eol = self.text.find("\n", self.starts[k])
        toks, starts = self.toks, self.starts
        j = k + 1
        if eol < 0:
            j = len(toks) - 1
        else:
            while toks[j] != _EOF and starts[j] < eol:
                j += 1
        self.i = j
        return j

    # ----------------------------------------------------------------- module

    def module(self) -> Module:
        toks = self.toks
        mod = self.mod
        while True:
            k = self.i
            t = toks[k]
            if t == _EOF:
                return mod
            if t[0] != ".":
                raise self.expected("a directive at module scope")
            d = t[1:]
            if d == "version":
                self.i += 1
                v = toks[self.i]
                if not v or v[0] not in _DIGITS:
                    raise self.expected("a version number such as '9.4'")
                self.i += 1
                mod.version = v
                self._mdir(k, d, (v,))
            elif d == "target":
                self.i += 1
                targets = [self.ident("a target such as 'sm_90a'")]
                while toks[self.i] == ",":
                    self.i += 1
                    targets.append(self.ident("a target such as 'sm_90a'"))
                if not mod.targets:
                    mod.targets = targets
                self._mdir(k, d, tuple(targets))
            elif d == "address_size":
                self.i += 1
                v = self.int_const("an address size")
                mod.address_size = v
                self._mdir(k, d, (str(v),))
            elif d == "file":
                j = self.skip_line()
                args = tuple(x for x in toks[k + 1:j] if x != ",")
                if len(args) >= 2 and args[0].isdigit() and args[1].startswith('"'):
                    mod.files[int(args[0])] = args[1][1:-1]
                self._mdir(k, d, args)
            elif d == "loc":
                self.skip_line()
            elif d == "section":
                self.section(k)
            elif d in _LINKAGE or d in ("entry", "func"):
                linkage = None
                if d in _LINKAGE:
                    linkage = d
                    self.i += 1
                    t = toks[self.i]
                    d = t[1:] if t[:1] == "." else ""
                if d in ("entry", "func"):
                    mod.functions.append(self.function(linkage))
                elif d in _VAR_SPACES or d in _OPAQUE:
                    mod.variables.extend(self.var_decl(linkage))
                else:
                    raise self.expected("'.entry', '.func' or a variable declaration")
            elif d in _VAR_SPACES:
                mod.variables.extend(self.var_decl(None))
            elif d == "pragma":
                self.i += 1
                mod.directives.append(self.pragma(k))
            elif d == "alias":
                self.i += 1
                a = self.ident()
                self.expect(",")
                b = self.ident()
                self.expect(";")
                self._mdir(k, d, (a, b))
            else:
                raise self.error(k, f"unknown directive '{t}' at module scope")

    def _mdir(self, k: int, name: str, args: tuple[str, ...]) -> None:
        line, col = self.lc(k)
        self.mod.directives.append(Directive(name, args, line, col))

    def section(self, k: int) -> None:
        toks = self.toks
        self.i = k + 1
        name = toks[self.i]
        if name[:1] != ".":
            raise self.expected("a section name such as '.debug_info'")
        self.i += 1
        open_k = self.expect("{")
        depth, j = 1, open_k + 1
        while depth:
            try:
                close = toks.index("}", j)
            except ValueError:
                raise self.error(open_k, f"expected '}}' to close section '{name}'") from None
            depth += toks[j:close].count("{") - 1
            j = close + 1
        self.i = j
        self._mdir(k, "section", (name,))

    def pragma(self, k: int) -> Directive:
        toks = self.toks
        args = []
        while True:
            t = toks[self.i]
            if t[:1] != '"' or len(t) < 2:
                raise self.expected("a string")
            args.append(t[1:-1])
            self.i += 1
            if toks[self.i] == ",":
                self.i += 1
                continue
            break
        self.expect(";")
        line, col = self.lc(k)
        return Directive("pragma", tuple(args), line, col)

    # ----------------------------------------------------------------- functions

    def function(self, linkage: str | None) -> Function:
        toks = self.toks
        k = self.i
        kind = toks[k][1:]
        self.i += 1
        rets: list[Param] = []
        if kind == "func" and toks[self.i] == "(":
            rets = self.param_list()
        nk = self.i
        name = self.ident("a function name")
        line, col = self.lc(nk)
        fn = Function(kind=kind, name=name, line=line, col=col, rets=rets, linkage=linkage)
        if toks[self.i] == "(":
            fn.params = self.param_list()
        while True:
            t = toks[self.i]
            if t[:1] != ".":
                break
            dk = self.i
            d = t[1:]
            self.i += 1
            if d == "pragma":
                p = self.pragma(dk)
                fn.directives.append(PerfDirective("pragma", p.args, p.line, p.col))
                continue
            if d == "attribute":
                self.skip_parens()
                continue
            if d not in _PERF:
                raise self.error(dk, f"unknown directive '{t}' in a function header")
            args: list[int | str] = []
            hi = _PERF[d][1]
            if hi:
                args.append(self.int_const())
                while toks[self.i] == "," and len(args) < hi:
                    self.i += 1
                    args.append(self.int_const())
            dl, dc = self.lc(dk)
            fn.directives.append(PerfDirective(d, tuple(args), dl, dc))
        t = toks[self.i]
        if t == "{":
            self.loc = None
            # '.reg' parameters named without '%' ('.func (.reg .b32 ok) f(.reg .b32 bar)')
            # are registers in the body, like its own plain '.reg' declarations
            fn.body = self.body({p.name: None for p in (*fn.params, *fn.rets)
                                 if p.space == "reg" and p.name[:1] != "%"})
        elif t == ";":
            self.i += 1
        else:
            raise self.expected("'{' or ';' after the function header")
        return fn

    def skip_parens(self) -> None:
        toks = self.toks
        self.expect("(")
        depth = 1
        while depth:
            t = toks[self.i]
            if t == _EOF:
                raise self.expected("')'")
            depth += (t == "(") - (t == ")")
            self.i += 1

    def param_list(self) -> list[Param]:
        toks = self.toks
        self.expect("(")
        out: list[Param] = []
        if toks[self.i] == ")":
            self.i += 1
            return out
        while True:
            out.append(self.param())
            t = toks[self.i]
            self.i += 1
            if t == ")":
                return out
            if t != ",":
                self.i -= 1
                raise self.expected("',' or ')' in the parameter list")

    def param(self) -> Param:
        toks = self.toks
        k = self.i
        t = toks[k]
        if t not in (".param", ".reg"):
            raise self.expected("'.param'")
        space = t[1:]
        self.i += 1
        align = ptr_align = None
        is_ptr = False
        ptr_space = typ = None
        while True:
            t = toks[self.i]
            if t[:1] != ".":
                break
            d = t[1:]
            self.i += 1
            if d == "align":
                v = self.int_const("an alignment")
                if is_ptr:
                    ptr_align = v
                else:
                    align = v
            elif d == "ptr":
                is_ptr = True
            elif is_ptr and d in _STATE_SPACES:
                ptr_space = d
            elif d in TYPE_SIZES or d in _OPAQUE:
                if typ is not None:
                    raise self.error(self.i - 1, f"parameter has two types ('.{typ}' and '{t}')")
                typ = d
            elif d in _VEC:
                pass
            else:
                raise self.error(self.i - 1, f"unknown parameter attribute '{t}'")
        if typ is None:
            raise self.expected("a parameter type such as '.u64'")
        nk = self.i
        name = self.ident("a parameter name", allow_reg=(space == "reg"))
        dims = self.dims()
        line, col = self.lc(nk)
        return Param(name=name, type=typ, line=line, col=col, space=space, align=align,
                     is_ptr=is_ptr, ptr_space=ptr_space, ptr_align=ptr_align, dims=dims)

    def dims(self) -> tuple[int | None, ...]:
        toks = self.toks
        out: list[int | None] = []
        while toks[self.i] == "[":
            self.i += 1
            if toks[self.i] == "]":
                out.append(None)
            else:
                k = self.i
                v = self.int_const("an array size")
                if v < 0:
                    raise self.error(k, "array size is negative")
                out.append(v)
            self.expect("]")
            if len(out) > 8:
                raise self.error(self.i, "too many array dimensions")
        return tuple(out)

    # ----------------------------------------------------------------- declarations

    def var_decl(self, linkage: str | None) -> list[VarDecl]:
        """``.space [attrs] .type name[dims] [= init] (, name ...)* ;`` -> one VarDecl per name."""
        toks = self.toks
        space = toks[self.i][1:]
        self.i += 1
        align = vec = typ = None
        attrs: list[str] = []
        while True:
            t = toks[self.i]
            if t[:1] != ".":
                break
            d = t[1:]
            self.i += 1
            if d == "align":
                align = self.int_const("an alignment")
            elif d in _VEC:
                vec = _VEC[d]
            elif d in TYPE_SIZES or d in _OPAQUE:
                typ = d
            elif d in _LINKAGE:
                linkage = d
            else:
                attrs.append(d)
        if typ is None and space != "tex":
            raise self.expected("a variable type such as '.b32'")
        out: list[VarDecl] = []
        while True:
            nk = self.i
            name = self.ident("a variable name")
            dims = self.dims()
            init = None
            if toks[self.i] == "=":
                self.i += 1
                init = self.initializer()
            line, col = self.lc(nk)
            out.append(VarDecl(space=space, name=name, type=typ, line=line, col=col, dims=dims,
                               align=align, vec=vec, linkage=linkage, init=init,
                               attrs=tuple(attrs)))
            t = toks[self.i]
            self.i += 1
            if t == ";":
                return out
            if t != ",":
                self.i -= 1
                raise self.expected("',' or ';' after the declaration")

    def initializer(self) -> str:
        toks = self.toks
        k = self.i
        depth = 0
        while True:
            t = toks[self.i]
            if t == _EOF:
                raise self.expected("';' after the initializer")
            if depth == 0 and t in (";", ","):
                break
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
                if depth < 0:
                    raise self.expected("an initializer value")
            elif t[0] in "\".@":
                raise self.expected("an initializer value")
            self.i += 1
        if self.i == k:
            raise self.expected("an initializer value")
        return self.text[self.starts[k]:self.starts[self.i - 1] + len(toks[self.i - 1])]

    def reg_decl(self, out: list) -> None:
        toks = self.toks
        self.i += 1
        vec = align = typ = None
        while True:
            t = toks[self.i]
            if t[:1] != ".":
                break
            d = t[1:]
            self.i += 1
            if d in _VEC:
                vec = _VEC[d]
            elif d == "align":
                align = self.int_const("an alignment")
            elif d in TYPE_SIZES:
                typ = d
            else:
                raise self.error(self.i - 1, f"unknown register type '{t}'")
        if typ is None:
            raise self.expected("a register type such as '.b32'")
        while True:
            nk = self.i
            name = self.ident("a register name", allow_reg=True)
            count = None
            if toks[self.i] == "<":
                self.i += 1
                ck = self.i
                c = toks[ck]
                if not c.isdigit():
                    raise self.expected("a register count")
                count = int(c)
                self.i += 1
                self.expect(">")
            line, col = self.lc(nk)
            out.append(RegDecl(name=name, type=typ, line=line, col=col, count=count, vec=vec,
                               align=align))
            if name[:1] != "%" and self._plain:
                self._plain[-1][name] = count
            t = toks[self.i]
            self.i += 1
            if t == ";":
                return
            if t != ",":
                self.i -= 1
                raise self.expected("',' or ';' after the register declaration")

    # ----------------------------------------------------------------- bodies

    def body(self, plain_regs: dict[str, int | None] | None = None) -> Scope:
        """Parse ``{ ... }`` iteratively (nested scopes use an explicit stack);
        ``plain_regs``: the function's register parameters named without '%'."""
        toks = self.toks
        line, col = self.lc(self.i)
        root = Scope([], line, col)
        open_ks = [self.i]
        self.i += 1
        stack = [root]
        self._plain = [dict(plain_regs or {})]
        cur = root.stmts
        instr = self.instruction
        while True:
            k = self.i
            t = toks[k]
            c = t[:1]
            if c in _ID_START and c != "%":
                if toks[k + 1] == ":":
                    line, col = self.lc(k)
                    cur.append(Label(t, line, col))
                    self.i = k + 2
                    nt = toks[self.i]
                    if nt in _LABEL_DIRECTIVES:
                        cur.append(self.label_directive(t))
                else:
                    cur.append(instr())
            elif c == "@":
                cur.append(instr())
            elif c == ".":
                self.body_directive(cur)
            elif t == "}":
                sc = stack.pop()
                self._plain.pop()
                open_ks.pop()
                sc.end_line, sc.end_col = self.lc(k)
                self.i = k + 1
                if not stack:
                    return root
                cur = stack[-1].stmts
            elif t == "{":
                line, col = self.lc(k)
                sc = Scope([], line, col)
                cur.append(sc)
                stack.append(sc)
                self._plain.append({})
                open_ks.append(k)
                if len(stack) > _MAX_DEPTH:
                    raise self.error(k, "scopes nested too deeply")
                cur = sc.stmts
                self.i = k + 1
            elif t == ";":
                self.i = k + 1
            elif t == _EOF:
                ol, oc = self.lc(open_ks[-1])
                raise self.error(k, f"expected '}}' to close the block opened at {ol}:{oc}, "
                                    "found end of file")
            else:
                raise self.expected("an instruction, a label or a directive")

    def label_directive(self, label: str) -> Directive:
        toks = self.toks
        k = self.i
        name = toks[k][1:]
        self.i += 1
        args: list[str] = []
        depth = 0
        while True:
            t = toks[self.i]
            if t == _EOF:
                raise self.expected("';'")
            if t == ";" and depth == 0:
                break
            if t in ("(", "{"):
                depth += 1
            elif t in (")", "}"):
                depth -= 1
                if depth < 0:
                    raise self.expected("';'")
            if t != ",":
                args.append(t)
            self.i += 1
        self.i += 1
        line, col = self.lc(k)
        return Directive(name, tuple(args), line, col, label=label)

    def body_directive(self, cur: list) -> None:
        toks = self.toks
        k = self.i
        t = toks[k]
        d = t[1:]
        if d == "reg":
            self.reg_decl(cur)
        elif d in ("shared", "local", "param", "const", "global"):
            cur.extend(self.var_decl(None))
        elif d == "loc":
            j = self.skip_line()
            a = toks[k + 1:k + 4]
            if j >= k + 4 and a[0].isdigit() and a[1].isdigit() and a[2].isdigit():
                self.loc = (int(a[0]), int(a[1]), int(a[2]))
        elif d == "file":
            self.skip_line()
        elif d == "pragma":
            self.i += 1
            cur.append(self.pragma(k))
        else:
            raise self.error(k, f"unknown directive '{t}' in a function body")

    # ----------------------------------------------------------------- instructions

    def instruction(self) -> Instruction:
        toks = self.toks
        k = self.i
        pred = None
        neg = False
        if toks[k] == "@":
            self.i += 1
            if toks[self.i] == "!":
                neg = True
                self.i += 1
            pred = self.ident("a predicate register", allow_reg=True)
        ok = self.i
        op = toks[ok]
        if not op or op[0] not in _ID_START or op[0] in "%$":
            raise self.expected("an instruction opcode")
        self.i = ok + 1
        self._call = op.startswith("call") and op[4:5] in ("", ".")
        operands: list[Operand] = []
        if toks[self.i] != ";":
            operand = self.operand
            lc = self.lc
            while True:
                j = self.i
                t = toks[j]
                if t[:1] == "%" and toks[j + 1] in (",", ";"):   # fast path: plain register
                    line, col = lc(j)
                    operands.append(Operand("reg", t, line, col, name=t))
                    self.i = j + 1
                else:
                    operands.append(operand(0))
                t = toks[self.i]
                if t == ",":
                    self.i += 1
                    continue
                if t == ";":
                    break
                raise self.expected("',' or ';' after the operand")
        self.i += 1
        parts = tuple(op.split("."))
        base = parts[0]
        if base == "bra" and operands and operands[-1].kind == "symbol":
            operands[-1].kind = "label"
        elif base == "call":
            seen_target = False
            for o in operands:
                if o.kind == "list":
                    continue
                if not seen_target:
                    seen_target = True
                elif o.kind == "symbol":
                    o.kind = "label"
        elif base == "brx" and len(operands) >= 2 and operands[1].kind == "symbol":
            operands[1].kind = "label"
        line, col = self.lc(ok if pred is None else k)
        return Instruction(op, parts, tuple(operands), line, col, pred, neg, self.loc)

    def operand(self, depth: int) -> Operand:
        if depth > _MAX_DEPTH:
            raise self.error(self.i, "operand nested too deeply")
        toks = self.toks
        k = self.i
        t = toks[k]
        c = t[:1]
        line, col = self.lc(k)
        if c in _ID_START:
            self.i = k + 1
            if t == "_":
                op = Operand("sink", t, line, col)
            elif c == "%" or (self._plain and self._plain_reg(t)):
                op = Operand("reg", t, line, col, name=t)
            else:
                op = Operand("symbol", t, line, col, name=t)
                nt = toks[self.i]
                if nt in ("+", "-") and toks[self.i + 1][:1] in _DIGITS:
                    self.i += 1
                    off = self.int_const("a constant offset")
                    op.value = off if nt == "+" else -off
                    op.text = "".join(toks[k:self.i])
            if toks[self.i] == "|":
                self.i += 1
                other = self.operand(depth + 1)
                if other.kind not in ("reg", "symbol", "sink"):
                    raise self.error(self.i - 1, "expected a register after '|'")
                return Operand("pair", "".join(toks[k:self.i]), line, col, elems=(op, other))
            return op
        if t == "!":
            self.i += 1
            inner = self.operand(depth + 1)
            if inner.kind not in ("reg", "symbol"):
                raise self.error(k + 1, "expected a predicate register after '!'")
            inner.negated = True
            inner.text = "!" + inner.text
            inner.line, inner.col = line, col
            return inner
        if t == "{":
            self.i += 1
            elems = self.operand_seq("}", depth)
            return Operand("vector", "".join(toks[k:self.i]), line, col, elems=tuple(elems))
        if t == "(" and self._call:
            self.i += 1
            elems = self.operand_seq(")", depth)
            return Operand("list", "".join(toks[k:self.i]), line, col, elems=tuple(elems))
        if t == "[":
            return self.address(depth, line, col)
        if c in _DIGITS or t in ("-", "+", "~", "("):
            v = self.const_expr(0)
            return Operand("imm", "".join(toks[k:self.i]), line, col, value=v)
        raise self.expected("an operand")

    def operand_seq(self, close: str, depth: int) -> list[Operand]:
        toks = self.toks
        out: list[Operand] = []
        if toks[self.i] == close:
            self.i += 1
            return out
        lc = self.lc
        while True:
            j = self.i
            t = toks[j]
            if t[:1] == "%" and toks[j + 1] in (",", close):   # fast path: plain register
                line, col = lc(j)
                out.append(Operand("reg", t, line, col, name=t))
                self.i = j + 1
            else:
                out.append(self.operand(depth + 1))
            t = toks[self.i]
            self.i += 1
            if t == close:
                return out
            if t != ",":
                self.i -= 1
                raise self.expected(f"',' or '{close}'")

    def address(self, depth: int, line: int, col: int) -> Operand:
        toks = self.toks
        k = self.i
        self.i += 1
        t = toks[self.i]
        c = t[:1]
        base = None
        off = 0
        bl, bc = self.lc(self.i)
        if c in _ID_START and t != "_":
            base = Operand("reg" if c == "%" or (self._plain and self._plain_reg(t))
                           else "symbol", t, bl, bc, name=t)
            self.i += 1
            while toks[self.i] in ("+", "-"):
                sign = toks[self.i]
                self.i += 1
                ok = self.i
                v = self.const_expr(0)
                if not isinstance(v, int):
                    raise self.error(ok, "expected an integer offset")
                off += v if sign == "+" else -v
        elif c in _DIGITS or t in ("-", "+", "~", "("):
            ok = self.i
            v = self.const_expr(0)
            if not isinstance(v, int):
                raise self.error(ok, "expected an integer address")
            base = Operand("imm", "".join(toks[ok:self.i]), bl, bc, value=v)
        else:
            raise self.expected("an address")
        extras: list[Operand] = []
        while toks[self.i] == ",":
            self.i += 1
            extras.append(self.operand(depth + 1))
        self.expect("]")
        return Operand("address", "".join(toks[k:self.i]), line, col,
                       name=base.name if base is not None else None, value=off,
                       elems=tuple(extras), base=base)

    # ----------------------------------------------------------------- constant expressions

    def const_expr(self, min_prec: int, depth: int = 0) -> int | float:
        """Precedence climbing over ``| ^ & << >> + - * / %`` with unary ``- + ~ !``."""
        if depth > _MAX_DEPTH:
            raise self.error(self.i, "constant expression nested too deeply")
        toks = self.toks
        lhs = self.unary(depth)
        while True:
            opk = self.i
            op = toks[opk]
            prec = _BINARY_PREC.get(op)
            if prec is None or prec < min_prec:
                return lhs
            self.i += 1
            rhs = self.const_expr(prec + 1, depth + 1)
            lhs = self.binop(op, lhs, rhs, opk)

    def binop(self, op: str, a: float, b: float, k: int) -> int | float:
        isint = isinstance(a, int) and isinstance(b, int)
        if op in ("|", "^", "&", "<<", ">>", "%") and not isint:
            raise self.error(k, f"operator '{op}' needs integer operands")
        if op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        elif op in ("/", "%"):
            if b == 0:
                raise self.error(k, "division by zero in a constant expression")
            if isint:
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # C semantics
                r = q if op == "/" else a - q * b
            else:
                r = a / b
        elif op in ("<<", ">>"):
            if not 0 <= b <= 64:
                raise self.error(k, f"shift count {b} is out of range")
            r = a << b if op == "<<" else a >> b
        elif op == "&":
            r = a & b
        elif op == "|":
            r = a | b
        else:
            r = a ^ b
        if isint and not -(1 << 64) <= r < (1 << 65):
            r = r & ((1 << 64) - 1)
        return r

    def unary(self, depth: int) -> int | float:
        toks = self.toks
        k = self.i
        t = toks[k]
        if t in ("-", "+", "~", "!"):
            self.i += 1
            v = self.unary(depth + 1) if depth < _MAX_DEPTH else self._too_deep()
            if t == "-":
                return -v
            if t == "+":
                return v
            if not isinstance(v, int):
                raise self.error(k, f"operator '{t}' needs an integer operand")
            return ~v if t == "~" else int(not v)
        if t == "(":
            self.i += 1
            v = self.const_expr(0, depth + 1)
            self.expect(")")
            return v
        if t[:1] in _DIGITS:
            if len(t) > 64:
                raise self.error(k, "numeric constant is too long")
            self.i = k + 1
            return _number(t)
        raise self.expected("a constant")

    def _too_deep(self) -> int:
        raise self.error(self.i, "constant expression nested too deeply")


def _number(t: str) -> int | float:
    """Value of a number token (the lexer guarantees its shape)."""
    c1 = t[1:2]
    if c1 in ("f", "F") and len(t) == 10:
        return struct.unpack(">f", bytes.fromhex(t[2:]))[0]
    if c1 in ("d", "D") and len(t) == 18:
        return struct.unpack(">d", bytes.fromhex(t[2:]))[0]
    if t[-1] == "U":
        t = t[:-1]
    if c1 in ("x", "X"):
        return int(t[2:], 16)
    if c1 in ("b", "B"):
        return int(t[2:], 2)
    if "." in t or "e" in t or "E" in t:
        return float(t)
    if len(t) > 1 and t[0] == "0" and t.isdigit() and all(ch in "01234567" for ch in t):
        return int(t, 8)
    return int(t)
