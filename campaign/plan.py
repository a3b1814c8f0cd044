"""What a campaign covers: kernel selectors, archs and provider/model pairs -> cells.

Kernel selectors (``ailower suite run KERNELS...``), resolved in order, duplicates dropped:

* ``all`` / ``suite``: every suite entry (32, variants included);
* ``common`` / ``papers``: the 12 common / 10 paper kernels of the study, all their variants
  (:data:`kernels.registry.COMMON`, :data:`kernels.registry.PAPERS`);
* ``fast``: the fast family (:data:`kernels.registry.FAST`: TMA, warp-specialized, cluster and
  block-scaled kernels; not part of ``all``);
* a suite or fast-family name (``gemm.fp8``, ``fast.gemm_ws``) or base name (``gemm``: every
  variant);
* a glob over suite and fast-family names (``flash_*``, ``*.fp8``, ``fast.gemm_*``), which must
  match at least one;
* a spec file (``.yaml``/``.yml``/``.json``), loaded with :func:`kernels.load_spec`.

Providers are ``NAME`` or ``NAME:MODEL`` (split at the first colon: ``openai:llama3:8b`` is model
``llama3:8b``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from campaign.store import CellKey

__all__ = ["ARCHS", "KernelTarget", "PlanError", "select_kernels", "parse_providers",
           "parse_archs", "cells_for", "load_target"]

ARCHS = ("sm_89", "sm_90a", "sm_100a")
"""Targets a campaign may name (the archs ailower lowers to)."""


class PlanError(ValueError):
    """A selector, arch or provider that names nothing valid (the message names the input)."""


@dataclass(frozen=True)
class KernelTarget:
    """One kernel of a campaign: display name, how to load it, and its content hash."""

    name: str
    spec_ref: str
    spec_id: str


def _suite_target(name: str) -> KernelTarget:
    from kernels.registry import get

    return KernelTarget(name=name, spec_ref=f"suite:{name}", spec_id=get(name).identity())


def select_kernels(selectors: list[str]) -> list[KernelTarget]:
    """Resolve kernel selectors (see the module docstring) to targets, in order.

    Raises:
        PlanError: a selector matches nothing (the message lists what exists).
        kernels.SpecError: a spec file is unreadable or invalid.
    """
    from kernels.registry import COMMON, PAPERS, base_name, names

    if not selectors:
        raise PlanError("KERNELS: give at least one kernel, glob, family (common, papers, fast, "
                        "all) or spec file")
    suite = names()
    fast = names("fast")
    out: dict[str, KernelTarget] = {}
    for sel in selectors:
        picked: list[str] = []
        if sel in ("all", "suite"):
            picked = suite
        elif sel in ("common", "papers"):
            fam = COMMON if sel == "common" else PAPERS
            picked = [n for n in suite if base_name(n) in fam]
        elif sel == "fast":
            picked = fast
        elif sel.endswith((".yaml", ".yml", ".json")) or (("/" in sel) and Path(sel).exists()):
            from kernels import load_spec

            path = Path(sel).resolve()
            spec = load_spec(path)
            t = KernelTarget(name=spec.name, spec_ref=f"file:{path}", spec_id=spec.identity())
            prev = out.get(t.name)
            if prev is not None and prev.spec_ref != t.spec_ref:
                raise PlanError(f"{sel}: kernel name {t.name!r} is already taken by {prev.spec_ref}")
            out[t.name] = t
            continue
        elif sel in suite or sel in fast:
            picked = [sel]
        elif any(ch in sel for ch in "*?["):
            picked = [n for n in [*suite, *fast] if fnmatch.fnmatchcase(n, sel)]
            if not picked:
                raise PlanError(f"KERNELS: the glob {sel!r} matches no suite kernel; have: "
                                f"{', '.join(suite)}")
        else:
            picked = [n for n in suite if base_name(n) == sel]
            if not picked:
                raise PlanError(f"KERNELS: {sel!r} is no suite kernel, family (common, papers, "
                                f"fast, all), glob or spec file; suite: {', '.join(suite)}; "
                                f"fast family: {', '.join(fast)}")
        for n in picked:
            if n not in out:
                out[n] = _suite_target(n)
    return list(out.values())


def load_target(spec_ref: str):  # -> kernels.KernelSpec (lazy import keeps this module light)
    """Load the spec a cell names (``suite:NAME`` or ``file:/path``).

    Raises:
        kernels.SpecError: the suite name or file is gone or invalid.
        PlanError: an unknown reference scheme.
    """
    kind, _, rest = spec_ref.partition(":")
    if kind == "suite":
        from kernels.registry import get

        return get(rest)
    if kind == "file":
        from kernels import load_spec

        return load_spec(rest)
    raise PlanError(f"unknown spec reference {spec_ref!r} (suite:NAME or file:PATH)")


def parse_archs(archs: list[str]) -> list[str]:
    """Validate ``--arch`` values (repeatable, or comma-separated).

    Raises:
        PlanError: an arch ailower does not target.
    """
    out: list[str] = []
    for a in archs:
        for x in (p.strip() for p in a.split(",")):
            if not x:
                continue
            if x not in ARCHS:
                raise PlanError(f"--arch {x!r}: choose from {', '.join(ARCHS)}")
            if x not in out:
                out.append(x)
    if not out:
        raise PlanError("--arch: give at least one arch")
    return out


MODEL_PROVIDERS = ("anthropic", "openai", "replay")
"""Providers that need a model (``replay``: the transcript path); ``triton`` and ``search`` run
offline without one."""


def parse_providers(providers: list[str], known: tuple[str, ...]) -> list[tuple[str, str]]:
    """``NAME`` / ``NAME:MODEL`` -> ``(name, model)`` (model ``""`` when none).

    Raises:
        PlanError: an unknown provider, or a model provider without a model.
    """
    out: list[tuple[str, str]] = []
    for p in providers:
        name, _, model = p.partition(":")
        if name not in known:
            raise PlanError(f"--provider {p!r}: unknown provider {name!r}; have: {', '.join(known)}")
        if name in MODEL_PROVIDERS and not model:
            raise PlanError(f"--provider {p!r}: the {name} provider needs a model "
                            f"(--provider {name}:MODEL)")
        if (name, model) not in out:
            out.append((name, model))
    if not out:
        raise PlanError("--provider: give at least one provider")
    return out


def cells_for(kernels: list[KernelTarget], archs: list[str],
              providers: list[tuple[str, str]]) -> list[CellKey]:
    """Every (kernel, arch, provider, model) cell, kernel-major."""
    return [CellKey(kernel=k.name, spec_ref=k.spec_ref, spec_id=k.spec_id, arch=a, provider=p,
                    model=m) for k in kernels for a in archs for p, m in providers]
