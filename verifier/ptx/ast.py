"""The PTX syntax tree: plain dataclasses, one per construct, each with a 1-based ``line`` and ``col``.

The tree is deliberately shallow so analyses (CFG, dataflow over tcgen05/mbarrier/wgmma) can be built
on it without a visitor framework:

* :class:`Module` holds the module directives (``.version``, ``.target``, ``.address_size``), the
  module-scope variables and the functions in source order.
* :class:`Function` is an ``.entry`` or ``.func`` with its parameters, performance directives
  (``.reqntid`` ...) and a body :class:`Scope` (``None`` for a prototype declaration).
* A :class:`Scope` is a ``{ ... }`` block; its ``stmts`` are :class:`Instruction`, :class:`Label`,
  :class:`RegDecl`, :class:`VarDecl`, :class:`Directive` and nested :class:`Scope` nodes.
* An :class:`Instruction` keeps its guard predicate, the full dotted opcode and its parts, and its
  :class:`Operand` list.

Source of the grammar: PTX ISA 9.1, §4 (syntax), §5 (state spaces, types, variables), §7 (directives:
functions, parameters), §11 (directives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "TYPE_SIZES",
    "Directive",
    "Function",
    "Instruction",
    "Label",
    "Module",
    "Operand",
    "OperandKind",
    "Param",
    "PerfDirective",
    "RegDecl",
    "Scope",
    "Statement",
    "VarDecl",
    "type_size",
]

#: Bytes of each fundamental PTX type (PTX ISA 9.1 §5.2.2, Table 8). ``pred`` is given 1 byte
#: (it is only ever a register type); ``b128`` is the 16-byte type of PTX 8.3+.
TYPE_SIZES: dict[str, int] = {
    "b8": 1, "u8": 1, "s8": 1, "f8": 1, "e4m3": 1, "e5m2": 1,
    "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
    "b32": 4, "u32": 4, "s32": 4, "f32": 4, "tf32": 4, "f16x2": 4, "bf16x2": 4,
    "b64": 8, "u64": 8, "s64": 8, "f64": 8,
    "b128": 16,
    "pred": 1,
}


def type_size(ptx_type: str | None) -> int | None:
    """Bytes of a PTX type written without the dot (``u64`` -> 8); None when unknown."""
    if ptx_type is None:
        return None
    return TYPE_SIZES.get(ptx_type)


OperandKind = Literal["reg", "imm", "label", "symbol", "vector", "address", "list", "pair", "sink"]


@dataclass(slots=True)
class Operand:
    """One instruction operand.

    Attributes:
        kind: ``reg`` (``%r1``, ``%tid.x``), ``imm`` (``16``, ``0f3F800000``, ``-4``), ``label`` (a
            branch target), ``symbol`` (any other bare name: variable, parameter, function, or a
            register declared without ``%``), ``vector`` (``{%r1, %r2}``), ``address``
            (``[%rd1+16]``), ``list`` (a parenthesised ``call`` argument list; elsewhere
            ``(1 + 2)`` is an ``imm`` constant expression), ``pair``
            (``%p1|%p2``), ``sink`` (``_``).
        text: the operand as written (whitespace and comments removed between its tokens).
        line, col: 1-based position of the operand's first token.
        name: register / symbol / label name (for ``%tid.x``: ``%tid.x``); None otherwise.
        value: immediate value (int or float), or the constant byte offset of an address/symbol.
        elems: elements of a vector, list or pair; for an address, the operands after the base
            (texture coordinates, ``[tmap, {%r1, %r2}]``).
        base: for an address, the base register / symbol / immediate operand (None for ``[]``).
        negated: written with a leading ``!`` (predicate operand).
    """

    kind: str
    text: str
    line: int
    col: int
    name: str | None = None
    value: int | float | None = None
    elems: tuple[Operand, ...] = ()
    base: Operand | None = None
    negated: bool = False

    def registers(self) -> list[Operand]:
        """Every ``reg`` operand inside this one (itself, vector/pair/list elements, address base)."""
        if self.kind == "reg":
            return [self]
        out: list[Operand] = []
        if self.base is not None:
            out.extend(self.base.registers())
        for e in self.elems:
            out.extend(e.registers())
        return out


@dataclass(slots=True)
class Instruction:
    """``[@[!]pred] opcode operands;``.

    Attributes:
        opcode: the full dotted opcode (``wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16``).
        parts: ``opcode`` split at dots (``("tcgen05", "alloc", "cta_group::1", ...)``); ``parts[0]``
            is the base mnemonic.
        operands: the operands in order.
        predicate: guard register name (``%p1``) or None.
        negated: the guard is ``@!``.
        loc: the last ``.loc`` before it as ``(file, line, col)``, or None.
    """

    opcode: str
    parts: tuple[str, ...]
    operands: tuple[Operand, ...]
    line: int
    col: int
    predicate: str | None = None
    negated: bool = False
    loc: tuple[int, int, int] | None = None

    @property
    def base(self) -> str:
        """The base mnemonic (``ld`` for ``ld.global.v4.b32``)."""
        return self.parts[0]


@dataclass(slots=True)
class Label:
    """``name:`` inside a function body (visible in its scope and the scopes nested in it)."""

    name: str
    line: int
    col: int


@dataclass(slots=True)
class RegDecl:
    """One declarator of ``.reg``: ``%r<120>`` (``count=120``: ``%r0`` .. ``%r119``) or ``%x``.

    Attributes:
        name: the name, or for a parameterised declaration the prefix (``%r``).
        type: the PTX type without the dot (``b32``, ``pred``).
        count: number of registers of a ``<N>`` declaration, None for a single register.
        vec: 2 or 4 for ``.v2``/``.v4`` registers, else None.
        align: ``.align`` if given.
    """

    name: str
    type: str
    line: int
    col: int
    count: int | None = None
    vec: int | None = None
    align: int | None = None


@dataclass(slots=True)
class VarDecl:
    """A variable in a state space: ``.shared .align 16 .b8 smem[1024];``, ``.param .b64 p;``.

    Attributes:
        space: ``shared``, ``global``, ``local``, ``const``, ``param`` (or ``tex`` ...).
        name: the variable name.
        type: the PTX type without the dot, or None (``.texref`` style opaque types are kept here).
        dims: array dimensions, ``None`` for an unsized ``[]``; empty for a scalar.
        align: ``.align`` in bytes, if given.
        vec: 2/4/8 for ``.v2``/``.v4``/``.v8``, else None.
        linkage: ``extern``, ``visible``, ``weak``, ``common`` or None.
        init: the initializer as written (``{1, 2}``), or None.
        attrs: any other dot-modifiers (``ptr``, ``shared::cta`` ...), without the dot.
    """

    space: str
    name: str
    type: str | None
    line: int
    col: int
    dims: tuple[int | None, ...] = ()
    align: int | None = None
    vec: int | None = None
    linkage: str | None = None
    init: str | None = None
    attrs: tuple[str, ...] = ()


@dataclass(slots=True)
class Directive:
    """A directive kept as written: ``.pragma "nounroll";``, ``.branchtargets L1, L2;`` ...

    Attributes:
        name: the directive without the dot (``pragma``).
        args: argument tokens as written, commas removed.
        label: for ``lbl: .callprototype ...`` / ``.branchtargets`` / ``.calltargets``, the label.
    """

    name: str
    args: tuple[str, ...]
    line: int
    col: int
    label: str | None = None


@dataclass(slots=True)
class Scope:
    """A ``{ ... }`` block: the function body or a nested block (Triton's inline-asm scopes).

    ``line``/``col`` are those of ``{``; ``end_line``/``end_col`` those of ``}``.
    """

    stmts: list[Statement]
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0


Statement = Instruction | Label | RegDecl | VarDecl | Directive | Scope


@dataclass(slots=True)
class Param:
    """A parameter of an ``.entry`` or ``.func`` (or a ``.func`` return parameter).

    Attributes:
        name: the parameter name.
        type: the PTX type without the dot (``u64``), or None for opaque types (``texref``).
        space: ``param`` or ``reg`` (``.func`` parameters may be registers).
        align: the parameter's own ``.align`` (written before the type), or None.
        is_ptr: declared with ``.ptr``.
        ptr_space: the pointee state space after ``.ptr`` (``global``), or None.
        ptr_align: the ``.align`` after ``.ptr`` (pointee alignment), or None.
        dims: array dimensions (``.b8 name[128]`` -> ``(128,)``); empty for a scalar.
    """

    name: str
    type: str | None
    line: int
    col: int
    space: str = "param"
    align: int | None = None
    is_ptr: bool = False
    ptr_space: str | None = None
    ptr_align: int | None = None
    dims: tuple[int | None, ...] = ()

    @property
    def size(self) -> int | None:
        """Bytes the parameter occupies (element size x array count), None when unknown."""
        es = type_size(self.type)
        if es is None:
            return None
        n = 1
        for d in self.dims:
            if d is None:
                return None
            n *= d
        return es * n

    def signature(self) -> str:
        """Canonical text like :meth:`kernels.abi.ABIParam.signature` (``.align 64 .b8[128]``)."""
        parts = []
        if self.align is not None:
            parts.append(f".align {self.align}")
        base = f".{self.type}" if self.type else "?"
        base += "".join(f"[{d if d is not None else ''}]" for d in self.dims)
        parts.append(base)
        if self.is_ptr:
            parts.append(".ptr")
        return " ".join(parts)


@dataclass(slots=True)
class PerfDirective:
    """A performance-tuning directive of a function: ``.reqntid 128, 1, 1`` -> ``("reqntid", (128, 1, 1))``.

    ``.pragma`` strings are kept as ``args`` of str. Source: PTX ISA 9.1 §11.4.
    """

    name: str
    args: tuple[int | str, ...]
    line: int
    col: int


@dataclass(slots=True)
class Function:
    """An ``.entry`` (kernel) or ``.func`` (device function).

    Attributes:
        kind: ``entry`` or ``func``.
        name: the function name.
        params: the input parameters in order.
        rets: ``.func`` return parameters (empty for ``.entry``).
        directives: performance directives (``.reqntid`` ...) and attributes such as ``noreturn``.
        body: the body scope, or None for a declaration (``.extern .func foo(...);``).
        linkage: ``visible``, ``extern``, ``weak`` or None.
    """

    kind: str
    name: str
    line: int
    col: int
    params: list[Param] = field(default_factory=list)
    rets: list[Param] = field(default_factory=list)
    directives: list[PerfDirective] = field(default_factory=list)
    body: Scope | None = None
    linkage: str | None = None

    def directive(self, name: str) -> PerfDirective | None:
        """The first performance directive called ``name`` (without the dot), or None."""
        for d in self.directives:
            if d.name == name:
                return d
        return None


@dataclass(slots=True)
class Module:
    """A parsed PTX file.

    Attributes:
        filename: the name used in diagnostics.
        version: ``.version`` text (``9.4``) or None.
        targets: the ``.target`` list (``["sm_90a", "debug"]``); empty when missing. The first
            entry is the architecture.
        address_size: ``.address_size`` or None.
        directives: the module directives (``version``, ``target``, ``address_size``, ``file``,
            ``section``, ``pragma``, ``alias``) with their positions.
        variables: module-scope variables (``.extern .shared ... global_smem[]``).
        functions: the ``.entry`` and ``.func`` definitions and declarations in source order.
        files: ``.file`` index -> path.
    """

    filename: str
    version: str | None = None
    targets: list[str] = field(default_factory=list)
    address_size: int | None = None
    directives: list[Directive] = field(default_factory=list)
    variables: list[VarDecl] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    files: dict[int, str] = field(default_factory=dict)

    @property
    def arch(self) -> str | None:
        """The target architecture: the first ``.target`` entry (``sm_90a``), or None."""
        return self.targets[0] if self.targets else None

    @property
    def entries(self) -> list[Function]:
        """The ``.entry`` functions (declarations included), in source order."""
        return [f for f in self.functions if f.kind == "entry"]

    def directive(self, name: str) -> Directive | None:
        """The first module directive called ``name`` (without the dot), or None."""
        for d in self.directives:
            if d.name == name:
                return d
        return None

    def function(self, name: str) -> Function | None:
        """The function definition called ``name`` (preferring one with a body), or None."""
        found = None
        for f in self.functions:
            if f.name == name:
                if f.body is not None:
                    return f
                found = found or f
        return found
