"""MS: module-scope state (issue 9; harness_threats.md #5 and §11)."""

from __future__ import annotations

import re

from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.ptx.ast import Instruction, Operand, VarDecl

__all__ = ["module_global_write"]

#: Base mnemonics whose first operand is a destination address (PTX ISA 9.1 §9.7.9: st, red,
#: cp.* copies; multimem.st / multimem.red likewise; ``tensormap.replace`` rewrites a field of
#: the 128-byte tensor map at its address, PTX ISA 9.1 §9.7.9.28).
_DST_FIRST = frozenset({"st", "red", "cp", "multimem", "stmatrix", "tensormap"})
#: Base mnemonics whose second operand is the address (``atom d, [a], b``).
_DST_SECOND = frozenset({"atom"})
#: Instructions that only read their operands' addresses.
_READS = frozenset({"ld", "ldu", "prefetch", "prefetchu", "applypriority", "discard"})
#: Callees that only read what their pointer arguments point to (CUDA's device printf and
#: assert: Triton passes its format strings, module-scope .global constants, to them).
_READ_ONLY_CALLEES = frozenset({"vprintf", "__assertfail", "__assert_fail"})


def _global_vars(ctx: Context) -> dict[str, VarDecl]:
    return {n: v for n, v in ctx.module_vars.items() if v.space == "global"}


def _base_name(op: Operand) -> str | None:
    """Name of the register or symbol an address operand is based on."""
    if op.kind == "address" and op.base is not None:
        return op.base.name
    return None


def _names(op: Operand) -> list[str]:
    """Register and symbol names inside an operand (its address base, vector elements ...)."""
    out: list[str] = []
    if op.kind in ("reg", "symbol") and op.name:
        out.append(op.name)
    if op.base is not None:
        out.extend(_names(op.base))
    for e in op.elems:
        out.extend(_names(e))
    return out


def module_global_write(ctx: Context) -> list[Finding]:
    """Module-scope ``.global`` variable written by the kernel (MS1).

    What it checks:
        No instruction stores, reduces or atomically updates a module-scope variable in the
        ``.global`` state space, directly (``st.global.u32 [counter], %r1``) or through a register
        holding its address (``mov.u64 %rd1, counter; atom.global.add.u32 %r2, [%rd1], 1``),
        and its address is never stored to memory or passed to a call (where the analysis could
        not follow it). A load from a module variable whose initializer holds the address
        (``.const .u64 p = generic(counter);``) yields a pointer to it. The register analysis is flow-insensitive: any register that receives the
        variable's address, or a value computed from one, counts as a pointer to it. Variables
        that are only read (lookup tables with an initializer) are allowed.

    Why it is bad:
        Module-scope ``.global`` memory keeps its contents from one launch to the next for as
        long as the module is loaded. A kernel can count its launches there and do its work only
        on some of them, or cache a result and replay it: launch-count dependence that makes
        correctness runs and timed runs see different kernels (issue 9: a launch counter that
        stops the work after a few launches measured 3.56x). The lowered kernel must be a pure
        function of its parameters, like the Triton kernel it replaces.

    Example:
        ``.global .align 4 .u32 launches;`` then ``atom.global.add.u32 %r9, [launches], 1;``

    Use instead:
        Keep per-launch state in registers, shared memory or the harness-provided global scratch
        buffer (cleared by the harness before every launch).

    ptxas:
        Accepted.

    References:
        PTX ISA 9.1 §5.1.4 (global state space: "variables ... persist for the lifetime of the
        module"), §9.7.9.10 (st), §9.7.13.4-5 (atom, red); harness_threats.md #5, §11.
    """
    gvars = _global_vars(ctx)
    if not gvars:
        return []
    findings: list[Finding] = []
    # module variables (any state space) whose initializer holds a .global variable's address
    # (``.const .u64 p = generic(cnt);``): a load from them yields a pointer to it
    holders: dict[str, str] = {}
    for hv in ctx.module_vars.values():
        if hv.init:
            words = set(re.findall(r"[A-Za-z_$%][\w$]*", hv.init))
            hit = next((g for g in gvars if g in words), None)
            if hit is not None:
                holders[hv.name] = hit
    for fi in ctx.bodies():
        # pointer -> (variable, instruction that derived it)
        taint: dict[str, tuple[str, Instruction | None]] = {n: (n, None) for n in gvars}
        changed = True
        while changed:
            changed = False
            for ins, _ in fi.instructions:
                if ins.base in ("ld", "ldu") and holders and len(ins.operands) > 1:
                    b = _base_name(ins.operands[1])
                    held = holders.get(b) if b not in taint else holders.get(taint[b][0])
                    if held is not None:
                        for d in _names(ins.operands[0]):
                            if d not in taint:
                                taint[d] = (held, ins)
                                changed = True
                    continue
                if ins.base in _DST_FIRST or ins.base in _DST_SECOND or ins.base in _READS:
                    continue
                if not ins.operands or ins.operands[0].kind not in ("reg", "vector", "pair"):
                    continue
                # every destination register: ``mov.b64 {%r2, %r3}, %rd2`` splits a pointer
                # into halves that each carry it
                dsts = [d for d in _names(ins.operands[0]) if d not in taint]
                if not dsts:
                    continue
                for src in ins.operands[1:]:
                    hit = next((n for n in _names(src) if n in taint), None)
                    if hit is not None:
                        for dst in dsts:
                            taint[dst] = (taint[hit][0], ins)
                        changed = True
                        break
        reported: set[str] = set()
        # call arguments staged since the last call (parameter names are reused call to call)
        staged: dict[str, tuple[str, Instruction | None]] = {}
        for ins, _ in fi.instructions:
            if ins.base in _READS:
                continue
            var: str | None = None
            via: Instruction | None = None
            what = ""
            if ins.base == "st" and "param" in ins.parts:
                # staging a call argument: the parameter now carries the pointer
                b = _base_name(ins.operands[0]) if ins.operands else None
                hit = next((n for op in ins.operands[1:] for n in _names(op) if n in taint), None)
                if b is not None and hit is not None:
                    staged[b] = taint[hit][0], ins
                continue
            if ins.base in _DST_FIRST or ins.base in _DST_SECOND:
                idx = 0 if ins.base in _DST_FIRST else 1
                if len(ins.operands) > idx:
                    b = _base_name(ins.operands[idx])
                    if b in taint:
                        var, via = taint[b]
                        what = f"'{ins.opcode}' writes"
                if var is None:  # the address itself stored as a value: it escapes
                    for op in ins.operands[idx + 1:]:
                        hit = next((n for n in _names(op) if n in taint), None)
                        if hit is not None:
                            var, via = taint[hit]
                            what = f"'{ins.opcode}' stores the address of"
                            break
            elif ins.base == "call":
                callee = next((op.name for op in ins.operands if op.kind == "symbol"), None)
                args, staged = staged, {}
                if callee in _READ_ONLY_CALLEES:
                    continue
                for op in ins.operands:
                    hit = next((n for n in _names(op) if n in taint or n in args), None)
                    if hit is not None:
                        var, via = taint[hit] if hit in taint else args[hit]
                        what = "the address escapes into a call: it may write"
                        break
            if var is None or var in reported:
                continue
            reported.add(var)
            decl = gvars[var]
            notes = [Note(message=f"'{var}' declared here in the .global state space: it keeps its "
                                  "value across launches", line=decl.line, col=decl.col)]
            if via is not None:
                notes.append(Note(message=f"a pointer to '{var}' is formed here",
                                  line=via.line, col=via.col))
            notes.append(Note(message="launch-count dependence: correctness and timed launches "
                                      "can see different behaviour; keep state in registers, "
                                      "shared memory or the harness's scratch buffer"))
            findings.append(ctx.finding(
                "MS1", ins.line, ins.col,
                f"{what} module-scope .global variable '{var}' (state persists across launches)",
                notes=notes))
    return findings
