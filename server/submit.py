"""Checks a ``POST /v1/lowerings`` body must pass before a job is queued (no code runs here).

A submitted spec's ``source`` must be ``{"function", "text"}``; the text is checked with
:func:`server.source_check.check_triton_source` (``ast`` only); a NumPy ``reference`` (a module to
import) is refused. Counts and lengths (parameters, sizes, expressions, the autotune space with
its ``maxnreg`` values, constraints) are bounded before anything is parsed, then the buffer bytes
at each size (:mod:`server.spec_limits`); problem dims must be in ``[1, 2**31)``; expressions may
use ``**`` at most once each. Only then is the spec built with :class:`kernels.KernelSpec` (its
expressions go through the safe evaluator, in time the first checks bounded), and its grid and
emulation size are checked.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from kernels import KernelSpec, SpecError, get, names
from kernels.expr import ExprError
from server.errors import ApiError
from server.schemas import LoweringCreate
from server.settings import ServerSettings
from server.source_check import SourceRejected, check_triton_source
from server.spec_limits import SpecLimits, check_buffers, check_launch, check_raw

__all__ = ["validate_submission", "MAX_CONFIGS"]

MAX_CONFIGS = SpecLimits.max_configs
"""The default bound on a submitted autotune space (``AILOWER_SERVER_SPEC_MAX_CONFIGS``)."""
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,99}$")


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list | tuple):
        return [s for v in obj for s in _strings(v)]
    return []


def _check_spec(spec: dict[str, Any], max_source_bytes: int, *,
                allow_inline_asm: bool = False, limits: SpecLimits | None = None) -> KernelSpec:
    lim = limits or SpecLimits()
    name = spec.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ApiError(422, "invalid-spec", "spec.name must be 1-100 characters of letters, "
                       "digits, '_', '.', '-', starting with a letter or '_'",
                       loc=["body", "spec", "name"])
    src = spec.get("source")
    if not isinstance(src, dict) or set(src) != {"function", "text"} \
            or not isinstance(src.get("text"), str) or not isinstance(src.get("function"), str):
        raise ApiError(422, "source-not-allowed", "a submitted spec's 'source' must be exactly "
                       "{'function': NAME, 'text': MODULE SOURCE}; module and path sources are "
                       "refused", loc=["body", "spec", "source"])
    size = len(src["text"].encode())
    if size > max_source_bytes:
        raise ApiError(413, "source-too-large", f"the kernel source is {size} bytes; this key's "
                       f"limit is {max_source_bytes}", loc=["body", "spec", "source", "text"])
    if spec.get("reference") is not None:
        raise ApiError(422, "reference-not-allowed", "a submitted spec may not name a NumPy "
                       "reference (it would be imported); omit 'reference'",
                       loc=["body", "spec", "reference"])
    check_raw(spec, lim)  # counts and lengths: before anything is parsed or evaluated
    try:
        check_triton_source(src["text"], src["function"], allow_inline_asm=allow_inline_asm)
    except SourceRejected as exc:
        raise ApiError(422, "source-rejected", str(exc),
                       loc=["body", "spec", "source", "text", exc.line, exc.col]) from None
    for s in _strings({k: v for k, v in spec.items() if k not in ("source", "description")}):
        if s.count("**") > 1:
            raise ApiError(422, "expression-rejected", f"expression {s[:80]!r} uses '**' more "
                           "than once", loc=["body", "spec"])
    sizes = spec.get("sizes")
    if isinstance(sizes, dict):
        for sname, dims in sizes.items():
            for d, v in (dims.items() if isinstance(dims, dict) else ()):
                if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v < 2**31:
                    raise ApiError(422, "validation-error", f"sizes.{sname}.{d} must be an "
                                   "integer in [1, 2**31)", loc=["body", "spec", "sizes", sname, d])
    check_buffers(spec, lim)
    try:
        ks = KernelSpec.model_validate(spec)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise ApiError(422, "invalid-spec", f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}",
                       loc=["body", "spec", *[str(x) for x in e["loc"]]]) from None
    except (SpecError, ExprError, ValueError, ArithmeticError, RecursionError) as exc:
        raise ApiError(422, "invalid-spec", str(exc)[:1000], loc=["body", "spec"]) from None
    try:
        check_launch(ks, lim)
    except (SpecError, ExprError, ValueError, ArithmeticError) as exc:
        raise ApiError(422, "invalid-spec", str(exc)[:1000], loc=["body", "spec"]) from None
    return ks


def validate_submission(body: LoweringCreate, ss: ServerSettings,
                        max_source_bytes: int) -> tuple[str, bool]:
    """Check ``body`` against the server's rules; returns ``(kernel name, untrusted source)``.

    Raises:
        ApiError: 422 (unknown kernel, unconfigured provider, budget over the server's caps,
            rejected source or spec), 413 (source too large), 503 ``isolation-unavailable``
            (a spec with source on a host that cannot sandbox it: :mod:`server.sandbox`).
    """
    b = body.budget
    if b.iterations > ss.max_iterations:
        raise ApiError(422, "budget-too-large", f"budget.iterations {b.iterations} exceeds the "
                       f"server's limit {ss.max_iterations}", loc=["body", "budget", "iterations"])
    if b.wall_time_s > ss.max_wall_time_s:
        raise ApiError(422, "budget-too-large", f"budget.wall_time_s {b.wall_time_s:g} exceeds "
                       f"the server's limit {ss.max_wall_time_s:g}",
                       loc=["body", "budget", "wall_time_s"])
    if body.provider == "search" and body.spec is not None:
        # the search compiles configs beyond the autotune space in the runner, outside the
        # sandbox that compiles submitted source: only suite kernels may be searched
        raise ApiError(422, "provider-not-allowed", "provider 'search' compiles new configs "
                       "outside the sandbox, so it takes suite kernels only ('kernel'), not a "
                       "submitted 'spec'; use 'triton' for a spec", loc=["body", "provider"])
    if body.provider == "expert" and body.spec is not None:
        # the expert corpus is keyed by suite entry name: a submitted spec that reuses a name
        # would be handed a candidate written for another kernel
        raise ApiError(422, "provider-not-allowed", "provider 'expert' proposes the expert "
                       "corpus of suite kernels, so it takes suite kernels only ('kernel'), not "
                       "a submitted 'spec'", loc=["body", "provider"])
    if body.provider in ("anthropic", "openai"):
        if body.model is None:
            raise ApiError(422, "model-required", f"provider {body.provider!r} needs 'model'",
                           loc=["body", "model"])
        key = ss.anthropic_api_key if body.provider == "anthropic" else ss.openai_api_key
        if key is None:
            raise ApiError(422, "provider-not-configured", f"provider {body.provider!r} has no "
                           "credentials on this server", loc=["body", "provider"])
        if b.max_cost_usd is not None and body.model not in ss.price_per_mtok:
            raise ApiError(422, "no-price", f"no price is configured for model {body.model!r}, "
                           "so budget.max_cost_usd cannot be enforced",
                           loc=["body", "budget", "max_cost_usd"])
    if body.kernel is not None:
        if body.kernel not in names():
            raise ApiError(422, "unknown-kernel", f"no suite kernel {body.kernel!r}; have: "
                           f"{', '.join(names())}", loc=["body", "kernel"])
        get(body.kernel)
        return body.kernel, False
    from server.sandbox import isolation_status

    ks = _check_spec(body.spec or {}, max_source_bytes, allow_inline_asm=ss.allow_inline_asm,
                     limits=ss.spec_limits())
    ok, why = isolation_status()
    if not ok:
        raise ApiError(503, "isolation-unavailable", "this server does not accept kernel source: "
                       f"untrusted code cannot be isolated here ({why}); submit a suite kernel "
                       "by name instead", loc=["body", "spec"])
    return ks.name, True
