"""Bounds on the work a submitted spec asks for, checked before any of that work is done.

A spec's sizes, grid and autotune space are chosen by the tenant, and the server acts on them
outside the tenant's box: :class:`kernels.KernelSpec` evaluates every expression for every config
at every size when it is built, the runner allocates the ``verify`` buffers and emulates every
program of the ``verify`` grid on the CPU, and each config is compiled. Issue 17 measured a
policy-clean relu spec with ``sizes.verify`` N = 2**27 driving the runner's emulation past 23 GiB,
and a 27 KB spec (a ``maxnreg`` list times 64 configs, 40 long constraints) costing 10-14 s of API
CPU before its 422. So a submission passes two stages of :class:`SpecLimits` here:

1. :func:`check_raw` (before the source is parsed or any expression compiled; time linear in the
   body): counts and lengths only. Expressions (grid, flops, bytes, parameter values, shapes,
   block shapes, written regions, constraints) at most ``max_expr_chars`` characters each and
   ``max_expressions`` in all; at most ``max_params`` parameters, ``max_sizes`` named sizes of
   ``max_dims`` dims; the autotune space (cross product x ``maxnreg`` values + explicit configs,
   :meth:`kernels.spec.AutotuneSpace.size`) at most ``max_configs``, at most ``max_constraints``
   constraints, ``configs x constraints <= max_constraint_evals`` and ``configs x (constraints +
   sizes x expressions) <= max_eval_work`` (what building the :class:`~kernels.KernelSpec` costs).
2. :func:`check_buffers` (after stage 1; shape expressions only, through :mod:`kernels.expr`):
   the bytes of all tensor parameters together at each size, at most ``max_verify_bytes`` for
   ``verify`` and ``max_bench_bytes`` for every other size.
3. :func:`check_launch` (on the built spec, whose cost stage 1 bounded): programs of the grid at
   every size and config at most ``max_grid_programs``; threads the emulator runs for the
   ``verify`` size (programs x ``num_warps`` x 32 x ``num_ctas``) at most ``max_emulated_threads``.

Each refusal is a 422 :class:`server.errors.ApiError` whose ``loc`` names the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernels.dtypes import DTYPES
from kernels.expr import ExprError, evaluate
from server.errors import ApiError

__all__ = ["SpecLimits", "check_raw", "check_buffers", "check_launch", "THREADS_PER_WARP"]

THREADS_PER_WARP = 32
"""Threads per warp on every NVIDIA GPU (CUDA C++ Programming Guide, section "SIMT
Architecture")."""


@dataclass(frozen=True)
class SpecLimits:
    """The bounds, one per tenant-chosen quantity (defaults: server settings
    ``AILOWER_SERVER_SPEC_MAX_*``, see :class:`server.settings.ServerSettings`).

    The defaults leave every suite kernel far inside (largest measured 2026-12-01: 12 MiB of
    ``verify`` buffers and 262,400 emulated threads for vector_add, 768 MiB of ``bench`` buffers,
    131,072 programs, 9 configs, no constraints, 430 units of ``max_eval_work``; a spec at 3,968
    units with 250-character expressions took 0.08-0.12 s to check, 0.38 s with cold caches).

    Attributes:
        max_configs: autotune configs before constraints (``maxnreg`` values counted).
        max_constraints: autotune constraint expressions.
        max_constraint_evals: configs x constraints.
        max_expr_chars: characters of one expression.
        max_expressions: expressions in the whole spec.
        max_params: kernel parameters.
        max_sizes: named problem sizes.
        max_dims: dims of one size.
        max_eval_work: configs x (constraints + sizes x expressions): the expression evaluations
            building the spec costs.
        max_verify_bytes: bytes of all tensor parameters at the ``verify`` size (allocated and
            emulated on the host).
        max_bench_bytes: the same at every other size (allocated on the GPU).
        max_grid_programs: programs (x * y * z) of one launch, any size, any config.
        max_emulated_threads: threads of one ``verify`` launch (programs x num_warps x 32 x
            num_ctas), which the emulator runs on the CPU.
    """

    max_configs: int = 64
    max_constraints: int = 16
    max_constraint_evals: int = 512
    max_expr_chars: int = 256
    max_expressions: int = 512
    max_params: int = 64
    max_sizes: int = 8
    max_dims: int = 16
    max_eval_work: int = 4_000
    max_verify_bytes: int = 64 << 20
    max_bench_bytes: int = 4 << 30
    max_grid_programs: int = 1 << 22
    max_emulated_threads: int = 1 << 20


def _refuse(type_: str, message: str, *loc: Any) -> ApiError:
    return ApiError(422, type_, message, loc=["body", "spec", *loc])


def _n(v: Any) -> int:
    """How many values a list-valued field holds (a scalar counts as one; pydantic refuses
    it later)."""
    return len(v) if isinstance(v, list | tuple) else 1


def _expressions(spec: dict[str, Any]) -> list[tuple[tuple[Any, ...], Any]]:
    """Every expression-valued field of a raw spec as ``(loc, value)``; a value may be a string,
    a number or anything a client sent there."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    grid = spec.get("grid")
    for i, e in enumerate(grid if isinstance(grid, list) else [grid] if grid is not None else []):
        out.append((("grid", i), e))
    for k in ("flops", "bytes"):
        if k in spec:
            out.append(((k,), spec[k]))
    params = spec.get("params")
    for i, p in enumerate(params if isinstance(params, list) else []):
        if not isinstance(p, dict):
            continue
        if "value" in p:
            out.append((("params", i, "value"), p["value"]))
        for f in ("shape", "block_shape"):
            v = p.get(f)
            for j, e in enumerate(v if isinstance(v, list) else []):
                out.append((("params", i, f, j), e))
        w = p.get("written")
        for j, pair in enumerate(w if isinstance(w, list) else []):
            for m, e in enumerate(pair if isinstance(pair, list) else []):
                out.append((("params", i, "written", j, m), e))
    at = spec.get("autotune")
    cons = at.get("constraints") if isinstance(at, dict) else None
    for i, e in enumerate(cons if isinstance(cons, list) else []):
        out.append((("autotune", "constraints", i), e))
    return out


def space_size(at: Any) -> int:
    """Configs of a raw ``autotune`` mapping before constraints, counted as
    :meth:`kernels.spec.AutotuneSpace.size` counts them (``maxnreg`` values included), without
    building anything."""
    if not isinstance(at, dict):
        return 1
    meta = at.get("meta") or {}
    configs = at.get("configs") or []
    n_cfg = len(configs) if isinstance(configs, list) else 1
    if n_cfg and not meta:
        n = 0
    else:
        n = math.prod(_n(v) for v in meta.values()) if isinstance(meta, dict) else 1
    for k in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        if k in at:
            n *= _n(at[k])
    return n + n_cfg


def check_raw(spec: dict[str, Any], lim: SpecLimits) -> None:
    """Stage 1: counts and lengths of a raw (JSON) spec, in time linear in its size; nothing is
    parsed or evaluated.

    Raises:
        ApiError: 422 ``spec-too-large`` (too many params, sizes, dims or expressions),
            ``expression-too-long``, ``autotune-space-too-large`` or ``too-many-constraints``;
            ``loc`` names the field.
    """
    params = spec.get("params")
    if isinstance(params, list) and len(params) > lim.max_params:
        raise _refuse("spec-too-large", f"the spec has {len(params)} parameters; the limit is "
                      f"{lim.max_params}", "params")
    sizes = spec.get("sizes")
    if isinstance(sizes, dict):
        if len(sizes) > lim.max_sizes:
            raise _refuse("spec-too-large", f"the spec has {len(sizes)} named sizes; the limit "
                          f"is {lim.max_sizes}", "sizes")
        for name, dims in sizes.items():
            if isinstance(dims, dict) and len(dims) > lim.max_dims:
                raise _refuse("spec-too-large", f"size {str(name)[:40]!r} has {len(dims)} dims; "
                              f"the limit is {lim.max_dims}", "sizes", name)
    exprs = _expressions(spec)
    if len(exprs) > lim.max_expressions:
        raise _refuse("spec-too-large", f"the spec has {len(exprs)} expressions; the limit is "
                      f"{lim.max_expressions}", exprs[lim.max_expressions][0][0])
    for loc, e in exprs:
        if isinstance(e, str) and len(e) > lim.max_expr_chars:
            raise _refuse("expression-too-long", f"expression of {len(e)} characters "
                          f"({e[:40]!r}...); the limit is {lim.max_expr_chars}", *loc)
    at = spec.get("autotune")
    n_cfg = space_size(at)
    if n_cfg > lim.max_configs:
        raise _refuse("autotune-space-too-large", f"the autotune space has up to {n_cfg} configs "
                      "(meta x num_warps x num_stages x num_ctas x maxnreg + configs); the limit "
                      f"is {lim.max_configs}", "autotune")
    cons = at.get("constraints") if isinstance(at, dict) else None
    n_cons = _n(cons) if cons is not None else 0
    if n_cons > lim.max_constraints:
        raise _refuse("too-many-constraints", f"the autotune space has {n_cons} constraints; "
                      f"the limit is {lim.max_constraints}", "autotune", "constraints")
    if n_cfg * n_cons > lim.max_constraint_evals:
        raise _refuse("autotune-space-too-large", f"{n_cfg} configs x {n_cons} constraints = "
                      f"{n_cfg * n_cons} constraint evaluations; the limit is "
                      f"{lim.max_constraint_evals}", "autotune", "constraints")
    n_sizes = len(sizes) if isinstance(sizes, dict) else 0
    work = n_cfg * (n_cons + n_sizes * (len(exprs) - n_cons))
    if work > lim.max_eval_work:
        raise _refuse("spec-too-large", f"checking this spec takes {n_cfg} configs x ({n_cons} "
                      f"constraints + {n_sizes} sizes x {len(exprs) - n_cons} expressions) = "
                      f"{work} evaluations; the limit is {lim.max_eval_work}: fewer configs, "
                      "sizes or expressions", "autotune")


def check_buffers(spec: dict[str, Any], lim: SpecLimits) -> None:
    """Stage 2: the bytes of all tensor parameters at each size, from the shape expressions
    (evaluated over the size's dims with :func:`kernels.expr.evaluate`; call after
    :func:`check_raw`, which bounds their number and length).

    Raises:
        ApiError: 422 ``buffers-too-large`` (``loc`` the size), or ``invalid-spec`` for a shape
            that cannot be evaluated (``loc`` the shape entry).
    """
    sizes, params = spec.get("sizes"), spec.get("params")
    if not isinstance(sizes, dict) or not isinstance(params, list):
        return  # the KernelSpec validation names the malformed field
    tensors = [(i, p) for i, p in enumerate(params) if isinstance(p, dict)
               and p.get("kind") in ("pointer", "tensordesc")
               and isinstance(p.get("shape"), list) and p.get("dtype") in DTYPES]
    for sname, dims in sizes.items():
        if not isinstance(dims, dict):
            continue
        limit = lim.max_verify_bytes if sname == "verify" else lim.max_bench_bytes
        total = 0
        for i, p in tensors:
            n = DTYPES[p["dtype"]].itemsize
            for j, e in enumerate(p["shape"]):
                try:
                    v = evaluate(e, dims)
                except (ExprError, TypeError) as exc:
                    raise _refuse("invalid-spec", f"params[{i}].shape[{j}] at size "
                                  f"{str(sname)[:40]!r}: {exc}", "params", i, "shape", j) from None
                if not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                    raise _refuse("invalid-spec", f"params[{i}].shape[{j}] gave {v} at size "
                                  f"{str(sname)[:40]!r}; need an integer >= 0",
                                  "params", i, "shape", j)
                n *= int(v)
            total += n
            if total > limit:
                break
        if total > limit:
            which = "max_verify_bytes" if sname == "verify" else "max_bench_bytes"
            raise _refuse("buffers-too-large", f"the tensors at size {str(sname)[:40]!r} take "
                          f"{total} bytes or more; this server's limit is {limit} "
                          f"(AILOWER_SERVER_SPEC_{which.upper()})", "sizes", sname)


def check_launch(ks: Any, lim: SpecLimits) -> None:
    """Stage 3, on the built :class:`kernels.KernelSpec`: programs per launch at every size and
    config, and threads of the ``verify`` launch (what the emulator runs).

    Raises:
        ApiError: 422 ``grid-too-large`` (``loc`` ``grid``) or ``emulation-too-large``
            (``loc`` ``sizes.verify``).
    """
    configs = ks.configs()
    for sname in ks.sizes:
        for cfg in configs:
            programs = math.prod(ks.grid_dims(sname, cfg.meta))
            if programs > lim.max_grid_programs:
                raise _refuse("grid-too-large", f"the grid at size {sname!r} with config "
                              f"{cfg.key()} has {programs} programs; the limit is "
                              f"{lim.max_grid_programs}", "grid")
            if sname == "verify":
                threads = programs * cfg.num_warps * THREADS_PER_WARP * cfg.num_ctas
                if threads > lim.max_emulated_threads:
                    raise _refuse("emulation-too-large", f"the verify launch with config "
                                  f"{cfg.key()} runs {programs} programs x {cfg.num_warps} warps "
                                  f"x {THREADS_PER_WARP} x {cfg.num_ctas} CTAs = {threads} "
                                  "threads on the host emulator; the limit is "
                                  f"{lim.max_emulated_threads}", "sizes", "verify")
