"""Flattening a parsed PTX ``.entry`` into a linear instruction list the emulator executes.

The verifier's front end (:func:`verifier.parse_ptx`) gives a tree of scopes; this module walks it
once and produces:

* ``insts``: every :class:`verifier.ptx.Instruction` in program order (index = program counter),
* ``labels``: label name -> program counter of the next instruction,
* per instruction, the register environment of its scope (Triton's inline-asm ``{ .reg ... }``
  blocks may redeclare names such as ``%tmp``; each declaration gets its own storage key),
* register storage widths (PTX ISA 9.1 §5.2.2 fundamental types; ``pred`` is a bool).

Calls: ``call{.uni} (rets), f, (args);`` of a ``.func`` of the module is inlined at the call
site (each site its own copy: registers and labels scoped per copy, the callee's formal
``.param`` parameters renamed to the caller's argument / return variables, ``ret`` a branch to
the instruction after the copy); body ``.param`` variables are per-thread storage accessed as
``.local``. Recursion, indirect and predicated calls are refused.

Errors: :class:`EmulationUnsupported` for an instruction or construct the emulator cannot run,
with ``file:line:col``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from verifier.ptx import (Directive, Function, Instruction, Label, Module, Operand, RegDecl,
                          Scope, VarDecl, type_size)

__all__ = ["EmulationUnsupported", "Program", "RegInfo", "build_program"]


class EmulationUnsupported(Exception):
    """The PTX uses an instruction or construct the emulator does not model.

    ``str(err)`` is ``emulation unsupported: <what> at file:line:col``.
    """

    def __init__(self, what: str, filename: str, line: int, col: int):
        self.what, self.filename, self.line, self.col = what, filename, line, col
        super().__init__(f"emulation unsupported: {what} at {filename}:{line}:{col}")

    def __reduce__(self):
        return (EmulationUnsupported, (self.what, self.filename, self.line, self.col))


@dataclass(slots=True)
class RegInfo:
    """Storage of one register: unique ``key``, declared PTX ``type``, numpy storage dtype."""

    key: str
    type: str
    storage: np.dtype


def storage_dtype(ptx_type: str) -> np.dtype:
    """Register storage for a declared type: ``pred`` -> bool, else an unsigned int of its width."""
    if ptx_type == "pred":
        return np.dtype(np.bool_)
    size = type_size(ptx_type)
    if size is None or size > 8:
        return np.dtype(np.uint64) if size is None else np.dtype(np.uint64)
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size])


@dataclass
class _InlineCtx:
    """An inlined ``.func`` body: formal parameter -> caller variable key, the label its
    ``ret`` branches to, the call chain (to refuse recursion)."""

    alias: dict[str, str]
    ret_label: str
    stack: tuple[str, ...]
    #: register parameters: the callee's registers (formal name -> its own register) and the
    #: caller's registers the copies read / write under synthetic names
    regs: dict[str, RegInfo] = field(default_factory=dict)
    #: ``mov`` instructions that copy the arguments into the formal registers
    copy_in: list[Instruction] = field(default_factory=list)


def _rename(op: Operand, alias: dict[str, str]) -> Operand:
    """``op`` with symbol names renamed through ``alias`` (addresses' bases included)."""
    if op.kind == "symbol" and (op.name or op.text) in alias:
        n = alias[op.name or op.text]
        return dataclasses.replace(op, name=n, text=n)
    if op.kind == "address" and op.base is not None:
        b = _rename(op.base, alias)
        if b is not op.base:
            return dataclasses.replace(op, base=b, name=b.name)
    if op.kind == "list" and op.elems:
        el = tuple(_rename(e, alias) for e in op.elems)
        if any(a is not b for a, b in zip(el, op.elems)):
            return dataclasses.replace(op, elems=el)
    return op


def _rewrite(ins: Instruction, alias: dict[str, str], local_vars: dict) -> Instruction:
    """Rename aliased symbols; ``ld/st.param`` on a body (call-site) ``.param`` variable become
    ``ld/st.local`` (its per-thread storage)."""
    ops = tuple(_rename(o, alias) for o in ins.operands) if alias else ins.operands
    if ops != ins.operands:
        ins = dataclasses.replace(ins, operands=ops)
    if ins.base in ("ld", "st") and len(ins.parts) > 1 and ins.parts[1] == "param":
        a = next((o for o in ins.operands if o.kind == "address"), None)
        if a is not None and a.base is not None and a.base.kind == "symbol" and \
                (a.base.name or a.base.text) in local_vars:
            parts = (ins.parts[0], "local") + ins.parts[2:]
            ins = dataclasses.replace(ins, parts=parts, opcode=".".join(parts))
    return ins


class _Env:
    """Register names visible in one scope (parent chain flattened into one dict)."""

    def __init__(self, parent: _Env | None):
        self.parent = parent
        self.labels: dict[str, int] = {}
        self.singles: dict[str, RegInfo] = dict(parent.singles) if parent else {}
        self.ranges: dict[str, tuple[int, RegInfo]] = dict(parent.ranges) if parent else {}
        self.cache: dict[str, RegInfo | None] = {}
        # symbol renames (a .param/.local variable stored under a unique key, an inlined
        # callee's formal parameters -> the caller's variables) and the inline context
        self.alias: dict[str, str] = dict(parent.alias) if parent else {}
        self.ctx: _InlineCtx | None = parent.ctx if parent else None

    def label(self, name: str) -> int | None:
        """Program counter of label ``name`` visible from this scope (innermost first)."""
        env: _Env | None = self
        while env is not None:
            if name in env.labels:
                return env.labels[name]
            env = env.parent
        return None

    def lookup(self, name: str) -> RegInfo | None:
        if name in self.cache:
            return self.cache[name]
        info = self.singles.get(name)
        if info is None:
            # %r<305> declares %r0..%r304: split the trailing digits
            i = len(name)
            while i > 0 and name[i - 1].isdigit():
                i -= 1
            if i < len(name):
                rng = self.ranges.get(name[:i])
                if rng is not None and int(name[i:]) < rng[0]:
                    base = rng[1]
                    info = RegInfo(key=base.key + name[i:], type=base.type, storage=base.storage)
        self.cache[name] = info
        return info


@dataclass
class Program:
    """One entry, flattened.

    Attributes:
        module, entry: the parsed module and the ``.entry`` function.
        filename: name used in findings and errors.
        insts: instructions in program order.
        envs: per instruction, the register environment of its scope.
        labels: label -> index of the instruction that follows it (first definition; branches
            resolve labels through their scope, :meth:`_Env.label`, since Triton's inline-asm
            scopes reuse names such as ``waitLoop``).
        shared_vars: shared variable name -> (byte offset in the CTA's shared window, size or None
            for an unsized ``extern`` array).
        static_shared: bytes of sized shared variables.
        local_vars: ``.local`` variable name -> (offset, size) in per-thread local memory.
        local_bytes: per-thread local memory size.
        branch_targets: ``lbl: .branchtargets L0, L1, ...;`` label -> its target labels (for
            ``brx.idx``).
    """

    module: Module
    entry: Function
    filename: str
    insts: list[Instruction] = field(default_factory=list)
    envs: list[_Env] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    #: ``lbl: .branchtargets L0, L1, ...`` -> the target labels (``brx.idx`` tables)
    branch_targets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    shared_vars: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    static_shared: int = 0
    local_vars: dict[str, tuple[int, int]] = field(default_factory=dict)
    local_bytes: int = 0

    def where(self, pc: int) -> str:
        """``file:line:col`` of instruction ``pc``."""
        ins = self.insts[pc]
        return f"{self.filename}:{ins.line}:{ins.col}"

    def unsupported(self, pc: int, what: str | None = None) -> EmulationUnsupported:
        """The error for instruction ``pc`` (default ``what``: its opcode in quotes)."""
        ins = self.insts[pc]
        return EmulationUnsupported(what or f"'{ins.opcode}'", self.filename, ins.line, ins.col)


def _var_size(v: VarDecl) -> int | None:
    es = type_size(v.type) or 1
    es *= v.vec or 1
    n = 1
    for d in v.dims:
        if d is None:
            return None
        n *= d
    return es * n


def build_program(module: Module, entry: str | None = None) -> Program:
    """Flatten ``entry`` (default: the only ``.entry`` with a body) of ``module``.

    Raises:
        EmulationUnsupported: no entry with a body, several entries and none named, or a
            ``call`` the emulator cannot inline (indirect or predicated, a callee without a
            body, recursion, arguments that are not ``.param`` variables).
    """
    fname = module.filename
    bodies = [f for f in module.entries if f.body is not None]
    if entry is not None:
        bodies = [f for f in bodies if f.name == entry]
    if len(bodies) != 1:
        raise EmulationUnsupported(
            f"{len(bodies)} matching '.entry' definitions (need exactly one)", fname, 1, 1)
    fn = bodies[0]
    prog = Program(module=module, entry=fn, filename=fname)
    off = 0
    externs: list[VarDecl] = []
    for v in module.variables:
        if v.space == "shared":
            size = _var_size(v)
            if size is None:
                externs.append(v)
                continue
            al = v.align or (type_size(v.type) or 1)
            off = (off + al - 1) // al * al
            prog.shared_vars[v.name] = (off, size)
            off += size
    ext_off = (off + 127) // 128 * 128 if externs else off
    for v in externs:  # every unsized extern array aliases the dynamic shared memory
        prog.shared_vars[v.name] = (ext_off, None)
    prog.static_shared = off
    counter = [0]

    def local_var(name: str, size: int, align: int | None) -> str:
        """Allocate per-thread local storage for ``name``; a name already taken (a ``.param``
        redeclared per call site, an inlined callee's variable) gets a unique key."""
        key = name if name not in prog.local_vars else f"{name}@{counter[0]}"
        al = align or 8
        o = (prog.local_bytes + al - 1) // al * al
        prog.local_vars[key] = (o, size)
        prog.local_bytes = o + size
        return key

    def walk(scope: Scope, parent: _Env | None, top: _InlineCtx | None = None) -> _Env:
        env = _Env(parent)
        counter[0] += 1
        tag = "" if parent is None and top is None else f"@{counter[0]}"
        ctx = top if top is not None else (parent.ctx if parent is not None else None)
        env.ctx = ctx
        if top is not None:
            env.alias.update(top.alias)
            env.singles.update(top.regs)
            # the inlined body starts with the copies of its register arguments (before any
            # label of the body: a loop back to the callee's first label does not redo them)
            for cp in top.copy_in:
                prog.insts.append(cp)
                prog.envs.append(env)
        for st in scope.stmts:
            if isinstance(st, RegDecl):
                info = RegInfo(key=st.name + tag, type=st.type, storage=storage_dtype(st.type))
                if st.count is not None:
                    env.ranges[st.name] = (st.count, info)
                else:
                    env.singles[st.name] = info
                env.cache.clear()
            elif isinstance(st, VarDecl):
                size = _var_size(st) or 0
                if st.space == "shared":
                    al = st.align or 8
                    o = (prog.static_shared + al - 1) // al * al
                    prog.shared_vars[st.name] = (o, size)
                    prog.static_shared = o + size
                elif st.space in ("local", "param"):
                    # a body .param variable is a call argument or return slot: per-thread
                    # storage like .local (PTX ISA 9.1 §5.1.6.4); ld/st.param on it become
                    # local accesses below
                    key = local_var(st.name, size, st.align)
                    if key != st.name or st.space == "param":
                        env.alias[st.name] = key
                else:
                    raise EmulationUnsupported(f"'.{st.space}' variable in a function body",
                                               fname, st.line, st.col)
            elif isinstance(st, Directive) and st.name == "branchtargets" and st.label:
                prog.branch_targets[st.label] = tuple(st.args)
            elif isinstance(st, Label):
                env.labels[st.name] = len(prog.insts)
                prog.labels.setdefault(st.name, len(prog.insts))
            elif isinstance(st, Scope):
                walk(st, env)
            elif isinstance(st, Instruction):
                ins = _rewrite(st, env.alias, prog.local_vars)
                if ins.base == "call":
                    inline_call(ins, env)
                    continue
                if ins.base == "ret" and ctx is not None:
                    # return from an inlined .func: continue after its body
                    ins = Instruction(opcode="bra.uni", parts=("bra", "uni"),
                                      operands=(Operand(kind="label", text=ctx.ret_label,
                                                        line=ins.line, col=ins.col,
                                                        name=ctx.ret_label),),
                                      line=ins.line, col=ins.col, predicate=ins.predicate,
                                      negated=ins.negated, loc=ins.loc)
                prog.insts.append(ins)
                prog.envs.append(env)
        return env

    def inline_call(ins: Instruction, env: _Env) -> None:
        """Inline ``call{.uni} (rets), f, (args);`` of a ``.func`` with a body: its formal
        ``.param`` parameters alias the caller's argument / return variables."""
        ops = list(ins.operands)
        fi = next((i for i, o in enumerate(ops) if o.kind == "symbol"), None)
        if fi is None or ins.predicate is not None:
            raise EmulationUnsupported("'call' (indirect, or guarded by a predicate)", fname,
                                       ins.line, ins.col)
        rets = ops[fi - 1].elems if fi > 0 and ops[fi - 1].kind == "list" else ()
        args = ops[fi + 1].elems if fi + 1 < len(ops) and ops[fi + 1].kind == "list" else ()
        name = ops[fi].name or ops[fi].text
        callee = module.function(name)
        if callee is None or callee.body is None:
            raise EmulationUnsupported(f"'call' of '{name}', which has no body in this module",
                                       fname, ins.line, ins.col)
        stack = env.ctx.stack if env.ctx is not None else (fn.name,)
        if name in stack:
            raise EmulationUnsupported(f"recursive 'call' of '{name}' (call chain "
                                       f"{' -> '.join(stack + (name,))}): recursion is not "
                                       f"modelled", fname, ins.line, ins.col)
        if len(rets) != len(callee.rets) or len(args) != len(callee.params):
            raise EmulationUnsupported(
                f"'call' of '{name}' with {len(rets)} return and {len(args)} argument operands; "
                f"'{name}' declares {len(callee.rets)} and {len(callee.params)}", fname,
                ins.line, ins.col)
        alias: dict[str, str] = {}
        regs: dict[str, RegInfo] = {}
        copy_in: list[Instruction] = []
        copy_out: list[tuple[str, str, str]] = []  # (caller's synthetic name, formal, type)
        counter[0] += 1
        k = counter[0]

        def mov(dst: str, src: Operand, typ: str) -> Instruction:
            t = "pred" if typ == "pred" else f"b{8 * (type_size(typ) or 4)}"
            return Instruction(
                opcode=f"mov.{t}", parts=("mov", t),
                operands=(Operand(kind="reg", text=dst, line=ins.line, col=ins.col, name=dst),
                          src), line=ins.line, col=ins.col, loc=ins.loc)

        n_rets = len(callee.rets)
        for j, (formal, actual) in enumerate(zip(list(callee.rets) + list(callee.params),
                                                 list(rets) + list(args))):
            if formal.space == "reg" and formal.type is not None:
                # a register parameter is passed by value (PTX ISA 9.1 §5.1.6.4): the callee
                # gets its own register; an argument is copied in at the call, a return
                # register out at the return
                own = RegInfo(key=f"{formal.name}@arg{k}", type=formal.type,
                              storage=storage_dtype(formal.type))
                regs[formal.name] = own
                if actual.kind == "reg":
                    info = env.lookup(actual.name or actual.text)
                    if info is None:
                        raise EmulationUnsupported(
                            f"'call' of '{name}': argument '{actual.text}' is not a declared "
                            f"register", fname, ins.line, ins.col)
                    syn = f"__caller_{j}@{k}"
                    regs[syn] = info
                    if j < n_rets:
                        copy_out.append((syn, formal.name, formal.type))
                    else:
                        copy_in.append(mov(formal.name, Operand(
                            kind="reg", text=syn, line=ins.line, col=ins.col, name=syn),
                            formal.type))
                    continue
                if actual.kind == "imm" and j >= n_rets:
                    copy_in.append(mov(formal.name, actual, formal.type))
                    continue
            if (formal.space or "param") != "param" or actual.kind != "symbol":
                raise EmulationUnsupported(
                    f"'call' of '{name}': parameter '{formal.name}' is passed as "
                    f"'{actual.text}' (only .param variables are modelled)", fname, ins.line,
                    ins.col)
            key = env.alias.get(actual.name or actual.text, actual.name or actual.text)
            if key not in prog.local_vars:
                raise EmulationUnsupported(f"'call' argument '{actual.text}' is not a .param "
                                           f"variable of the caller", fname, ins.line, ins.col)
            alias[formal.name] = key
        ctx = _InlineCtx(alias=alias, ret_label=f"$__ret_{name}_{k}",
                         stack=stack + (name,), regs=regs, copy_in=copy_in)
        top_env = walk(callee.body, None, ctx)
        # the callee's top scope resolves its return label: the instruction after the body,
        # where the return registers are copied out to the caller's
        top_env.labels[ctx.ret_label] = len(prog.insts)
        prog.labels.setdefault(ctx.ret_label, len(prog.insts))
        for syn, formal_name, typ in copy_out:
            prog.insts.append(mov(syn, Operand(kind="reg", text=formal_name, line=ins.line,
                                               col=ins.col, name=formal_name), typ))
            prog.envs.append(top_env)

    assert fn.body is not None
    walk(fn.body, None)
    return prog
