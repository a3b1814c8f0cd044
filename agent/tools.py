"""The tools a model may call, as JSON schemas, and the validation of their arguments.

Six tools (names in :data:`agent.providers.base.TOOL_NAMES`). ``ptx`` may be omitted from
``compile`` / ``verify`` / ``evaluate`` / ``submit``: the provider then fills in the conversation's
current candidate (:mod:`agent.workspace`), so a model edits a large module with ``patch``
instead of resending it.

``compile``
    ``{ptx?}``: assemble with ``ptxas`` for the target; returns ptxas' result text (errors,
    warnings, registers, spills, shared memory).
``verify``
    ``{ptx, threads?}``: run the static PTX verifier (entry signature, launch contract, rules);
    returns its findings.
``evaluate``
    ``{ptx, threads, meta, dynamic_smem?}``: run the candidate on the GPU against the reference
    and time it; returns correctness and timings.
``submit``
    ``{ptx?, threads, meta?, dynamic_smem?, cluster_dims?, global_scratch_size?, notes?}``: ends
    the model's turn with a :class:`~harness.candidate.Candidate`.
``patch``
    ``{edits: [{search, replace}], base?}``: exact search/replace edits on the current candidate
    (or on the reference PTX); each search must match exactly once.
``show``
    ``{what, start_line?, max_lines?}``: numbered lines of the reference's TTGIR / LLVM IR / PTX /
    SASS, the kernel source, or the current candidate.

The schemas are written once (:data:`TOOL_SCHEMAS`) and rendered for each wire format by
:func:`anthropic_tools` and :func:`openai_tools`. :func:`validate_tool_args` checks arguments
by hand (no ``jsonschema`` dependency) so that every error names the offending field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from harness.candidate import Candidate

__all__ = [
    "TOOL_SCHEMAS",
    "tool_names",
    "anthropic_tools",
    "openai_tools",
    "validate_tool_args",
    "candidate_from_submit",
    "submit_defaults",
    "MAX_THREADS",
    "MAX_DYNAMIC_SMEM",
    "MAX_PATCH_EDITS",
    "MAX_VARIANTS",
    "submit_schema",
    "candidates_from_submit",
    "SubmitVariants",
]

MAX_THREADS = 1024
"""Threads per CTA allowed by every supported target."""

MAX_PATCH_EDITS = 64
"""Edits one ``patch`` call may carry."""

MAX_VARIANTS = 8
"""Variants one ``submit`` may carry at most, whatever ``K`` the run allows (each costs a
ptxas run, a verifier run and a slot in the turn's GPU job)."""

_NEEDS_PTX = ("compile", "verify", "evaluate", "submit")
"""Tools whose ``ptx`` the provider fills from the current candidate before validation."""

MAX_DYNAMIC_SMEM = 1 << 20
"""Upper bound on dynamic shared memory accepted from a model (bytes); the GPU's own limit is
lower and is reported by the harness."""

_PTX = {
    "type": "string",
    "minLength": 1,
    "description": "A complete PTX module: .version, .target, .address_size, then the .entry "
                   "with exactly the required signature. Omit it to use the current candidate "
                   "(Triton's PTX at first, then the last PTX you passed or patched).",
}
_THREADS = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_THREADS,
    "description": "Threads per CTA (block x). Must equal the entry's .reqntid if it declares one.",
}
_META = {
    "type": "object",
    "additionalProperties": {"type": "integer"},
    "description": "Meta-parameter values (name -> integer) that feed the grid expression, "
                   "e.g. {\"BLOCK_SIZE\": 1024}.",
}
_DYNAMIC_SMEM = {
    "type": "integer",
    "minimum": 0,
    "maximum": MAX_DYNAMIC_SMEM,
    "description": "Dynamic shared memory per CTA in bytes (extern .shared arrays).",
}
_CLUSTER_DIMS = {
    "type": "array",
    "items": {"type": "integer", "minimum": 1},
    "minItems": 3,
    "maxItems": 3,
    "description": "CTAs per cluster [x, y, z]; [1, 1, 1] without clusters.",
}
_SCRATCH = {
    "type": "integer",
    "minimum": 0,
    "description": "Bytes of global scratch per CTA the kernel expects through the global_scratch "
                   "pointer (0: the pointer is NULL).",
}

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "compile": {
        "description": "Assemble a PTX module with ptxas for the target architecture. Returns "
                       "ptxas' result: errors and warnings with line numbers, or registers, "
                       "spills and shared memory per kernel on success.",
        "parameters": {
            "type": "object",
            "properties": {"ptx": _PTX},
            "required": [],
            "additionalProperties": False,
        },
    },
    "verify": {
        "description": "Run ailower's static PTX verifier: checks the entry signature and launch "
                       "contract and the PTX rules (memory safety, synchronisation, ...). Returns "
                       "the findings, one per line, or a clean report.",
        "parameters": {
            "type": "object",
            "properties": {"ptx": _PTX, "threads": _THREADS},
            "required": [],
            "additionalProperties": False,
        },
    },
    "evaluate": {
        "description": "Run the candidate on the GPU: assemble, launch at the verify size and "
                       "compare against the float64 reference, then time it at the bench size "
                       "next to Triton. Returns correctness (max error, mismatches) and timings.",
        "parameters": {
            "type": "object",
            "properties": {"ptx": _PTX, "threads": _THREADS, "meta": _META,
                           "dynamic_smem": _DYNAMIC_SMEM},
            "required": ["threads", "meta"],
            "additionalProperties": False,
        },
    },
    "submit": {
        "description": "Submit your candidate for this turn; the turn ends here. Call it exactly "
                       "once per turn. Omitted launch settings take the reference contract's "
                       "values.",
        "parameters": {
            "type": "object",
            "properties": {
                "ptx": _PTX,
                "threads": _THREADS,
                "meta": _META,
                "dynamic_smem": _DYNAMIC_SMEM,
                "cluster_dims": _CLUSTER_DIMS,
                "global_scratch_size": _SCRATCH,
                "notes": {"type": "string",
                          "description": "What changed and why (short; kept in the transcript)."},
            },
            "required": ["threads"],
            "additionalProperties": False,
        },
    },
    "patch": {
        "description": "Edit the current candidate with exact search/replace pairs instead of "
                       "resending the whole module. Each search text must occur exactly once "
                       "(copy it from show, whitespace included); edits apply in order and all "
                       "or none. Returns the changed lines, or why an edit did not apply (not "
                       "found / ambiguous, with line numbers).",
        "parameters": {
            "type": "object",
            "properties": {
                "edits": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_PATCH_EDITS,
                    "items": {
                        "type": "object",
                        "properties": {"search": {"type": "string", "minLength": 1},
                                       "replace": {"type": "string"}},
                        "required": ["search", "replace"],
                        "additionalProperties": False,
                    },
                },
                "base": {"type": "string", "enum": ["current", "reference", "best"],
                         "description": "Patch the current candidate (default), start again "
                                        "from Triton's PTX, or from the best valid candidate "
                                        "so far."},
            },
            "required": ["edits"],
            "additionalProperties": False,
        },
    },
    "show": {
        "description": "Show numbered lines of Triton's artifacts for this kernel (ttgir, llir, "
                       "ptx, sass where cuobjdump exists), the kernel source, or the current "
                       "candidate; at most 400 lines per call, page with start_line.",
        "parameters": {
            "type": "object",
            "properties": {
                "what": {"type": "string",
                         "enum": ["ttgir", "llir", "ptx", "sass", "source", "candidate"]},
                "start_line": {"type": "integer", "minimum": 1},
                "max_lines": {"type": "integer", "minimum": 1, "maximum": 400},
            },
            "required": ["what"],
            "additionalProperties": False,
        },
    },
}
"""Tool name -> ``{"description", "parameters"}`` (a JSON schema object)."""


def _variant_item() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "ptx": {**_PTX, "description": "A complete PTX module for this variant (instead of "
                                          "edits)."},
            "edits": {"type": "array", "minItems": 1, "maxItems": MAX_PATCH_EDITS,
                      "items": TOOL_SCHEMAS["patch"]["parameters"]["properties"]["edits"]["items"],
                      "description": "Exact search/replace edits applied to `base` (each search "
                                     "must match once)."},
            "base": {"type": "string", "enum": ["best", "current", "reference"],
                     "description": "What the edits apply to: the best valid candidate so far "
                                    "(default; Triton's PTX until there is one), the current "
                                    "candidate, or Triton's PTX."},
            "threads": _THREADS,
            "meta": _META,
            "dynamic_smem": _DYNAMIC_SMEM,
            "notes": {"type": "string", "description": "What this variant tries (short)."},
        },
        "required": [],
        "additionalProperties": False,
    }


def submit_schema(max_variants: int = 1) -> dict[str, Any]:
    """The ``submit`` tool's schema for a run that allows ``max_variants`` variants per turn.

    With ``max_variants`` > 1 it gains ``plan`` (one line: the diagnosis and the change) and
    ``variants`` (1..K items, each a full module or edits on a base, with its own launch
    settings; the submit's own fields are their defaults). With 1 it is :data:`TOOL_SCHEMAS`'s.

    Raises:
        ValueError: ``max_variants`` outside 1..:data:`MAX_VARIANTS`.
    """
    if not 1 <= max_variants <= MAX_VARIANTS:
        raise ValueError(f"max_variants: 1..{MAX_VARIANTS}, got {max_variants}")
    sch = _copy(TOOL_SCHEMAS["submit"])
    if max_variants == 1:
        return sch
    sch["description"] += (f" To try several ideas at once, give `plan` and up to {max_variants} "
                           "`variants`: each is assembled and verified, the survivors are "
                           "evaluated together and the best valid one seeds your next turn.")
    props = sch["parameters"]["properties"]
    props["plan"] = {"type": "string", "description": "One line: the bottleneck you diagnosed "
                                                      "and the change the variants try."}
    props["variants"] = {"type": "array", "minItems": 1, "maxItems": max_variants,
                         "items": _variant_item(),
                         "description": "Candidates to try this turn (a variant without ptx or "
                                        "edits is the current candidate)."}
    return sch


def tool_names(gpu_available: bool = True) -> list[str]:
    """The tools offered to a model.

    Args:
        gpu_available: offer ``evaluate`` only when a GPU can run it.

    Returns:
        Tool names in a fixed order (``compile``, ``verify``, [``evaluate``], ``submit``,
        ``patch``, ``show``).
    """
    return [n for n in TOOL_SCHEMAS if gpu_available or n != "evaluate"]


def _schema(name: str, max_variants: int) -> dict[str, Any]:
    return submit_schema(max_variants) if name == "submit" else _copy(TOOL_SCHEMAS[name])


def anthropic_tools(gpu_available: bool = True, max_variants: int = 1) -> list[dict[str, Any]]:
    """The tools in the Anthropic Messages API format.

    Args:
        gpu_available: include ``evaluate``.
        max_variants: ``K``; above 1 ``submit`` takes ``plan`` and ``variants``.

    Returns:
        ``[{"name", "description", "input_schema"}, ...]`` (fresh copies).
    """
    return [{"name": n, "description": _schema(n, max_variants)["description"],
             "input_schema": _schema(n, max_variants)["parameters"]}
            for n in tool_names(gpu_available)]


def openai_tools(gpu_available: bool = True, max_variants: int = 1) -> list[dict[str, Any]]:
    """The tools in the OpenAI Chat Completions format (function tools).

    Args:
        gpu_available: include ``evaluate``.
        max_variants: ``K``; above 1 ``submit`` takes ``plan`` and ``variants``.

    Returns:
        ``[{"type": "function", "function": {"name", "description", "parameters"}}, ...]``.
    """
    return [{"type": "function",
             "function": {"name": n, "description": _schema(n, max_variants)["description"],
                          "parameters": _schema(n, max_variants)["parameters"]}}
            for n in tool_names(gpu_available)]


def _copy(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _copy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_copy(v) for v in obj]
    return obj


def _int(where: str, v: Any, lo: int | None = None, hi: int | None = None) -> int:
    """An integer argument (integral floats such as ``128.0`` are accepted; bools are not)."""
    if isinstance(v, bool):
        raise ValueError(f"{where}: expected an integer, got a boolean ({v!r})")
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise ValueError(f"{where}: expected an integer, got {v!r}")
        v = int(v)
    if not isinstance(v, int):
        raise ValueError(f"{where}: expected an integer, got {type(v).__name__} {_short(v)}")
    if lo is not None and v < lo:
        raise ValueError(f"{where}: must be >= {lo}, got {v}")
    if hi is not None and v > hi:
        raise ValueError(f"{where}: must be <= {hi}, got {v}")
    return v


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def validate_tool_args(name: str, args: Any) -> dict[str, Any]:
    """Check a tool call's arguments against its schema and normalise them.

    Args:
        name: the tool name (one of :data:`TOOL_SCHEMAS`).
        args: the decoded JSON arguments.

    Returns:
        A new dict with the same keys, integers normalised (``128.0`` -> ``128``) and
        ``cluster_dims`` as a list of three ints.

    Raises:
        ValueError: unknown tool, arguments not an object, a missing required field, an unknown
            field, or a field of the wrong type or range; the message reads
            ``<tool>.<field>: <what is wrong>``.
    """
    if name not in TOOL_SCHEMAS:
        raise ValueError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_SCHEMAS)}")
    if not isinstance(args, Mapping):
        raise ValueError(f"{name}: arguments must be a JSON object, got {type(args).__name__}")
    schema = TOOL_SCHEMAS[name]["parameters"]
    props: dict[str, Any] = schema["properties"]
    required = list(schema["required"]) + (["ptx"] if name in _NEEDS_PTX else [])
    for req in required:
        if req not in args or args[req] is None:
            raise ValueError(f"{name}.{req}: required field is missing")
    unknown = sorted(k for k in args if k not in props)
    if unknown:
        raise ValueError(f"{name}.{unknown[0]}: unknown field (allowed: {', '.join(props)})")
    out: dict[str, Any] = {}
    for key, v in args.items():
        where = f"{name}.{key}"
        if v is None:  # optional field given as null: treat as omitted
            continue
        if key == "ptx":
            if not isinstance(v, str):
                raise ValueError(f"{where}: expected a string of PTX, got {type(v).__name__}")
            if not v.strip():
                raise ValueError(f"{where}: empty PTX")
            out[key] = v
        elif key == "threads":
            out[key] = _int(where, v, 1, MAX_THREADS)
        elif key == "dynamic_smem":
            out[key] = _int(where, v, 0, MAX_DYNAMIC_SMEM)
        elif key == "global_scratch_size":
            out[key] = _int(where, v, 0)
        elif key == "meta":
            if not isinstance(v, Mapping):
                raise ValueError(f"{where}: expected an object of name -> integer, got "
                                 f"{type(v).__name__}")
            meta = {}
            for mk, mv in v.items():
                if not isinstance(mk, str) or not mk:
                    raise ValueError(f"{where}: keys must be non-empty strings, got {mk!r}")
                meta[mk] = _int(f"{where}.{mk}", mv)
            out[key] = meta
        elif key == "cluster_dims":
            if not isinstance(v, (list, tuple)) or len(v) != 3:
                raise ValueError(f"{where}: expected [x, y, z] (three integers >= 1), "
                                 f"got {_short(v)}")
            out[key] = [_int(f"{where}[{i}]", d, 1) for i, d in enumerate(v)]
        elif key == "notes":
            if not isinstance(v, str):
                raise ValueError(f"{where}: expected a string, got {type(v).__name__}")
            out[key] = v
        elif key == "edits":
            if not isinstance(v, (list, tuple)) or not v:
                raise ValueError(f"{where}: expected a non-empty list of {{search, replace}}")
            if len(v) > MAX_PATCH_EDITS:
                raise ValueError(f"{where}: at most {MAX_PATCH_EDITS} edits per call, got {len(v)}")
            edits = []
            for i, e in enumerate(v, 1):
                if not isinstance(e, Mapping) or set(e) != {"search", "replace"}:
                    raise ValueError(f"{where}[{i}]: expected {{search, replace}}, got {_short(e)}")
                if not isinstance(e["search"], str) or not isinstance(e["replace"], str):
                    raise ValueError(f"{where}[{i}]: search and replace must be strings")
                if not e["search"]:
                    raise ValueError(f"{where}[{i}].search: empty search text")
                edits.append({"search": e["search"], "replace": e["replace"]})
            out[key] = edits
        elif key in ("base", "what"):
            allowed = props[key]["enum"]
            if v not in allowed:
                raise ValueError(f"{where}: one of {', '.join(allowed)}, got {_short(v)}")
            out[key] = v
        elif key == "start_line":
            out[key] = _int(where, v, 1)
        elif key == "max_lines":
            out[key] = _int(where, v, 1, 400)
        else:  # pragma: no cover - every property is handled above
            out[key] = v
    return out


def submit_defaults(ctx: Any) -> dict[str, Any]:
    """Launch settings a ``submit`` call may omit, taken from the reference contract.

    Args:
        ctx: a :class:`~agent.providers.base.ProposalContext` (duck-typed: ``config.meta`` and
            ``abi``).

    Returns:
        ``{"meta", "dynamic_smem", "cluster_dims", "global_scratch_size",
        "global_scratch_align"}``.
    """
    abi = ctx.abi
    return {
        "meta": dict(ctx.config.meta),
        "dynamic_smem": abi.dynamic_smem,
        "cluster_dims": [abi.num_ctas, 1, 1],
        "global_scratch_size": abi.global_scratch_size,
        "global_scratch_align": abi.global_scratch_align,
    }


def candidate_from_submit(args: Any, origin: str, *,
                          defaults: Mapping[str, Any] | None = None) -> Candidate:
    """Build the candidate a ``submit`` call describes.

    Args:
        args: the decoded ``submit`` arguments.
        origin: recorded as :attr:`Candidate.origin` (``anthropic:<model>``).
        defaults: values for omitted fields (see :func:`submit_defaults`): ``meta``,
            ``dynamic_smem``, ``cluster_dims``, ``global_scratch_size``, ``global_scratch_align``.
            Without them the :class:`Candidate` defaults apply.

    Returns:
        The :class:`~harness.candidate.Candidate` (``notes`` is not part of it).

    Raises:
        ValueError: the arguments do not match the ``submit`` schema; the message names the
            field (``submit.threads: must be <= 1024, got 2048``).
    """
    clean = validate_tool_args("submit", args)
    fields: dict[str, Any] = {}
    for key in ("meta", "dynamic_smem", "cluster_dims", "global_scratch_size",
                "global_scratch_align"):
        if key in clean:
            fields[key] = clean[key]
        elif defaults is not None and key in defaults:
            fields[key] = defaults[key]
    if "cluster_dims" in fields:
        fields["cluster_dims"] = tuple(fields["cluster_dims"])
    try:
        return Candidate(ptx=clean["ptx"], threads=clean["threads"], origin=origin, **fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        raise ValueError(f"submit.{loc}: {err.get('msg', 'invalid')}") from None


class SubmitVariants:
    """What one ``submit`` handed in: the candidates, the plan and how each was built.

    Attributes:
        candidates: one per variant (one when the submit had no ``variants``).
        plan: the one-line plan, or None.
        described: per variant ``{"index", "source": ptx | edits | current, "base", "notes",
            "digest"}`` for the transcript.
    """

    def __init__(self, candidates: list[Candidate], plan: str | None,
                 described: list[dict[str, Any]]):
        self.candidates, self.plan, self.described = candidates, plan, described


def candidates_from_submit(args: Any, workspace: Any, origin: str, *,
                           defaults: Mapping[str, Any] | None = None,
                           max_variants: int = 1) -> SubmitVariants:
    """Build the candidates of one ``submit`` call (with or without ``variants``).

    Args:
        args: the decoded ``submit`` arguments as the model sent them (``ptx`` may be omitted).
        workspace: the conversation's :class:`~agent.workspace.Workspace` (``current``,
            ``reference``, ``best``); a submit without variants updates ``current`` as any tool
            call with ``ptx`` does; variants leave it alone.
        origin: recorded as each :attr:`Candidate.origin`.
        defaults: see :func:`candidate_from_submit`.
        max_variants: ``K``, the most variants allowed.

    Returns:
        A :class:`SubmitVariants`.

    Raises:
        ValueError: invalid arguments, more than ``K`` variants, a variant with both ``ptx`` and
            ``edits``, or edits that do not apply (``submit.variants[2].edits[1]: search text
            not found ...``).
    """
    from agent.workspace import Workspace

    if not isinstance(args, Mapping) or ("variants" not in args and "plan" not in args):
        cand = candidate_from_submit(workspace.use(args), origin, defaults=defaults)
        return SubmitVariants([cand], None, [])
    plan = args.get("plan")
    if plan is not None and not isinstance(plan, str):
        raise ValueError(f"submit.plan: expected a string, got {type(plan).__name__}")
    plan = " ".join(plan.split())[:500] if plan else None
    variants = args.get("variants")
    rest = {k: v for k, v in args.items() if k not in ("variants", "plan")}
    if variants is None:
        cand = candidate_from_submit(workspace.use(rest), origin, defaults=defaults)
        return SubmitVariants([cand], plan, [])
    if max_variants <= 1:
        raise ValueError("submit.variants: this run takes one candidate per turn (K=1); submit "
                         "without variants")
    if not isinstance(variants, (list, tuple)) or not variants:
        raise ValueError("submit.variants: expected a non-empty list of variants")
    if len(variants) > max_variants:
        raise ValueError(f"submit.variants: at most {max_variants} variants per turn, got "
                         f"{len(variants)}")
    shared = dict(rest)
    if "ptx" not in shared or shared["ptx"] is None:
        shared["ptx"] = workspace.current
    cands: list[Candidate] = []
    described: list[dict[str, Any]] = []
    allowed = set(_variant_item()["properties"])
    for i, v in enumerate(variants, 1):
        where = f"submit.variants[{i}]"
        if not isinstance(v, Mapping):
            raise ValueError(f"{where}: expected an object, got {type(v).__name__}")
        unknown = sorted(k for k in v if k not in allowed)
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: unknown field (allowed: "
                             f"{', '.join(sorted(allowed))})")
        if v.get("ptx") is not None and v.get("edits") is not None:
            raise ValueError(f"{where}: give ptx or edits, not both")
        base = v.get("base", "best")
        if base not in ("best", "current", "reference"):
            raise ValueError(f"{where}.base: one of best, current, reference, got {_short(base)}")
        if v.get("ptx") is not None:
            if not isinstance(v["ptx"], str) or not v["ptx"].strip():
                raise ValueError(f"{where}.ptx: expected a non-empty string of PTX")
            ptx, source = v["ptx"], "ptx"
        elif v.get("edits") is not None:
            edits = validate_tool_args("patch", {"edits": v["edits"]})["edits"]
            start = {"best": workspace.best, "current": workspace.current,
                     "reference": workspace.reference}[base]
            scratch = Workspace(workspace.reference)
            scratch.current = start
            try:
                scratch.patch(edits, "current")
            except ValueError as exc:
                raise ValueError(f"{where}: {str(exc).replace('patch.', '', 1)}") from None
            ptx, source = scratch.current, "edits"
        else:
            ptx, source = shared["ptx"], "current"
        one = {**shared, "ptx": ptx}
        for key in ("threads", "meta", "dynamic_smem", "notes"):
            if v.get(key) is not None:
                one[key] = v[key]
        try:
            cand = candidate_from_submit(one, origin, defaults=defaults)
        except ValueError as exc:
            raise ValueError(str(exc).replace("submit.", f"{where}.", 1)) from None
        cands.append(cand)
        described.append({"index": i, "source": source,
                          "base": base if source == "edits" else None,
                          "notes": v.get("notes") if isinstance(v.get("notes"), str) else None,
                          "digest": cand.digest()})
    return SubmitVariants(cands, plan, described)
