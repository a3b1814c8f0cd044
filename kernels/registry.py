"""The suite registry: the only list of suite kernels (name -> spec module)."""

from __future__ import annotations

import importlib

from kernels.spec import KernelSpec, SpecError

__all__ = ["SUITE", "get", "names", "all_specs"]

SUITE: dict[str, str] = {
    "vector_add": "kernels.suite.vector_add",
    "softmax": "kernels.suite.softmax",
    "matmul": "kernels.suite.matmul",
}
"""Suite name -> module defining ``SPEC``."""


def names() -> list[str]:
    """Suite kernel names, in registry order."""
    return list(SUITE)


def get(name: str) -> KernelSpec:
    """The spec of suite kernel ``name``.

    Raises:
        SpecError: no suite kernel has that name (the message lists them).
    """
    try:
        module = SUITE[name]
    except KeyError:
        raise SpecError("KERNEL", f"no suite kernel {name!r}; have: {', '.join(SUITE)}") from None
    return importlib.import_module(module).SPEC


def all_specs() -> list[KernelSpec]:
    """Every suite spec, in registry order."""
    return [get(n) for n in SUITE]
