"""E: the entry and its launch ABI (kernels/abi.py; PTX ISA 9.1 §7.1, §11.4)."""

from __future__ import annotations

import math

from kernels.abi import ABIParam
from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.ptx.ast import Param, type_size

__all__ = ["entry_missing", "entry_params_mismatch", "launch_threads_mismatch"]


def entry_missing(ctx: Context) -> list[Finding]:
    """Expected ``.entry`` missing, or not exactly one ``.entry`` (E1).

    What it checks:
        The module defines exactly one ``.entry`` (with a body), and when an ABI is given its name
        is ``abi.entry``.

    Why it is bad:
        The launcher looks the kernel up by name (``cuModuleGetFunction``); a renamed or missing
        entry fails to load, and extra entries are dead weight or a way to smuggle another kernel.

    Example:
        ``.visible .entry my_kernel(...)`` when the ABI names ``matmul_kernel``.

    Use instead:
        ``.visible .entry matmul_kernel(...)``

    ptxas:
        no (any entry name and any number of entries assemble).

    References:
        PTX ISA 9.1 §11.3 (``.entry``); kernels/abi.py (``KernelABI.entry``).
    """
    out: list[Finding] = []
    entries = [f for f in ctx.module.functions if f.kind == "entry" and f.body is not None]
    abi = ctx.abi
    if abi is not None and not any(f.name == abi.entry for f in entries):
        notes = [Note(message=f"found entry '{f.name}' here", line=f.line, col=f.col)
                 for f in entries]
        if len(entries) == 1:
            f = entries[0]
            out.append(ctx.finding("E1", f.line, f.col,
                                   f"expected entry '{abi.entry}' is missing",
                                   notes=notes, fix=abi.entry))
        else:
            line, col = _module_anchor(ctx)
            out.append(ctx.finding("E1", line, col,
                                   f"expected entry '{abi.entry}' is missing",
                                   notes=notes or [Note(message="the module defines no '.entry'")]))
    if not entries:
        if abi is None:
            line, col = _module_anchor(ctx)
            funcs = [f for f in ctx.module.functions if f.kind == "func"]
            notes = [Note(message=f"'{f.name}' is a '.func', not an '.entry'", line=f.line,
                          col=f.col) for f in funcs[:3]] or [
                Note(message="the module defines no function at all")]
            out.append(ctx.finding("E1", line, col, "module defines no '.entry' function",
                                   notes=notes))
        return out
    if len(entries) > 1:
        keep = next((f for f in entries if abi is not None and f.name == abi.entry), entries[0])
        for f in entries:
            if f is keep:
                continue
            out.append(ctx.finding(
                "E1", f.line, f.col,
                f"module defines {len(entries)} '.entry' functions, expected exactly one",
                notes=[Note(message=f"entry '{keep.name}' is defined here", line=keep.line,
                            col=keep.col)]))
    return out


def _module_anchor(ctx: Context) -> tuple[int, int]:
    d = ctx.module.directive("target") or ctx.module.directive("version")
    return (d.line, d.col) if d else (1, 1)


def _abi_is_array(p: ABIParam) -> bool:
    es = type_size(p.ptx_type)
    return es is not None and p.size != es


def _abi_decl(p: ABIParam, name: str) -> str:
    """PTX text declaring ``p`` (used as the fix-it)."""
    parts = [".param"]
    array = _abi_is_array(p)
    if p.align is not None and not p.is_pointer:
        parts.append(f".align {p.align}")
    parts.append(f".{p.ptx_type}")
    if p.is_pointer:
        parts += [".ptr", ".global"]
        if p.align is not None:
            parts.append(f".align {p.align}")
    es = type_size(p.ptx_type) or 1
    parts.append(f"{name}[{p.size // es}]" if array else name)
    return " ".join(parts)


def _ptx_decl(p: Param) -> str:
    parts = [f".{p.space}"]
    if p.align is not None:
        parts.append(f".align {p.align}")
    parts.append(f".{p.type}" if p.type else "?")
    if p.is_ptr:
        parts.append(".ptr")
        if p.ptr_space:
            parts.append(f".{p.ptr_space}")
        if p.ptr_align is not None:
            parts.append(f".align {p.ptr_align}")
    dims = "".join(f"[{d if d is not None else ''}]" for d in p.dims)
    return " ".join(parts) + f" {p.name}{dims}"


def entry_params_mismatch(ctx: Context) -> list[Finding]:
    """Entry parameter list differs from the ABI (E2).

    What it checks:
        The entry has as many parameters as ``abi.params`` and, position by position, each has the
        same size in bytes (``.b64``/``.u64``/``.s64``/``.f64`` are interchangeable, ``.u32`` and
        ``.u64`` are not), the same array-ness (``.b8 name[128]`` vs a scalar), and at least the
        ABI's alignment when the ABI declares one (an undeclared ``.align`` counts as the natural
        alignment of the element type). Each mismatching parameter is reported with its 0-based
        index and both signatures.

    Why it is bad:
        The launcher packs arguments by position and size (including the two scratch pointers
        Triton appends); a shifted, resized or under-aligned parameter reads garbage or faults.

    Example:
        ``.param .u32 matmul_kernel_param_3`` where the ABI expects ``.u64 .ptr``.

    Use instead:
        The ABI's declaration (given as the fix-it).

    ptxas:
        no (any parameter list assembles).

    References:
        PTX ISA 9.1 §5.1.6 (parameter state space), §7.1 (kernel parameters); kernels/abi.py;
        triton/backends/nvidia/driver.py (``make_launcher``).
    """
    abi = ctx.abi
    if abi is None:
        return []
    fi = ctx.entry_function()
    if fi is None:
        return []
    fn = fi.fn
    out: list[Finding] = []
    got, want = fn.params, abi.params
    if len(got) != len(want):
        notes = []
        if len(got) < len(want):
            for j in range(len(got), len(want)):
                w = want[j]
                notes.append(Note(message=f"missing parameter {j}: '{_abi_decl(w, w.name)}'"))
        else:
            for j in range(len(want), len(got)):
                notes.append(Note(message=f"extra parameter {j} '{got[j].name}' declared here",
                                  line=got[j].line, col=got[j].col))
        out.append(ctx.finding("E2", fn.line, fn.col,
                               f"entry '{fn.name}' has {len(got)} parameters, expected "
                               f"{len(want)}", notes=notes))
    for idx, (p, w) in enumerate(zip(got, want)):
        size = p.size
        if size is None:
            out.append(ctx.finding("E2", p.line, p.col,
                                   f"cannot check parameter {idx} '{p.name}': its size is unknown",
                                   severity="note"))
            continue
        reasons = []
        if size != w.size:
            reasons.append(f"it occupies {size} bytes, the ABI expects {w.size}")
        if bool(p.dims) != _abi_is_array(w):
            reasons.append("it is an array, the ABI expects a scalar" if p.dims
                           else "it is a scalar, the ABI expects an array")
        if w.align is not None:
            eff = p.align if p.align is not None else (type_size(p.type) or 1)
            if eff < w.align:
                reasons.append(f"its alignment is {eff}, the ABI requires at least {w.align}")
        if reasons:
            out.append(ctx.finding(
                "E2", p.line, p.col,
                f"parameter {idx} of entry '{fn.name}' is declared '{_ptx_decl(p)}', expected "
                f"'{_abi_decl(w, w.name)}'",
                notes=[Note(message=r) for r in reasons],
                fix=_abi_decl(w, p.name)))
    return out


def launch_threads_mismatch(ctx: Context) -> list[Finding]:
    """``.reqntid`` / ``.maxntid`` inconsistent with the launch (E3).

    What it checks:
        When the launch's threads per CTA are known (``threads=`` or ``abi.threads``), the entry's
        ``.reqntid x[, y[, z]]`` product equals it and the ``.maxntid`` product is at least it.
        Independently of the launch, an entry may not carry both ``.reqntid`` and ``.maxntid``.

    Why it is bad:
        A launch that violates ``.reqntid``/``.maxntid`` fails with
        ``CUDA_ERROR_INVALID_VALUE``; a candidate that silently assumes another block size computes
        wrong tiles.

    Example:
        ``.reqntid 128`` for a kernel launched with ``num_warps=8`` (256 threads).

    Use instead:
        ``.reqntid 256``

    ptxas:
        no (the launch size is unknown to ptxas); ERR for ``.reqntid`` together with ``.maxntid``.

    References:
        PTX ISA 9.1 §11.4.2 (``.maxntid``), §11.4.3 (``.reqntid``).
    """
    out: list[Finding] = []
    for fi in ctx.functions:
        if fi.fn.kind != "entry":
            continue
        req, mx = fi.fn.directive("reqntid"), fi.fn.directive("maxntid")
        if req is not None and mx is not None:
            out.append(ctx.finding("E3", mx.line, mx.col,
                                   "'.maxntid' and '.reqntid' cannot both be specified",
                                   notes=[Note(message="'.reqntid' is specified here",
                                               line=req.line, col=req.col)]))
    threads = ctx.threads
    if threads is None:
        return out
    fi = ctx.entry_function()
    if fi is None:
        return out
    origin = "the 'threads' argument" if ctx.abi is None or ctx.threads != ctx.abi.threads \
        else "the ABI"
    launch = Note(message=f"the launch uses {threads} threads per CTA ({origin})")
    for d in fi.fn.directives:
        if d.name not in ("reqntid", "maxntid"):
            continue
        dims = [a for a in d.args if isinstance(a, int)]
        if not dims:
            out.append(ctx.finding("E3", d.line, d.col,
                                   f"cannot check '.{d.name}': it has no thread counts",
                                   severity="note"))
            continue
        n = math.prod(dims)
        written = f".{d.name} " + ", ".join(str(a) for a in dims)
        if d.name == "reqntid" and n != threads:
            out.append(ctx.finding("E3", d.line, d.col,
                                   f"'{written}' requires {n} threads per CTA, but the launch "
                                   f"uses {threads}", notes=[launch], fix=f".reqntid {threads}"))
        elif d.name == "maxntid" and n < threads:
            out.append(ctx.finding("E3", d.line, d.col,
                                   f"'{written}' allows at most {n} threads per CTA, but the "
                                   f"launch uses {threads}", notes=[launch],
                                   fix=f".maxntid {threads}"))
    return out
