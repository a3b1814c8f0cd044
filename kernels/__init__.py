"""Kernel specifications and the suite.

Public API: :class:`KernelSpec` and its parts, :func:`load_spec`, the ABI model, dtypes, the safe
expression evaluator and the suite registry.

Names are resolved lazily (PEP 562), so ``import kernels.abi`` (the verifier's only need) does not
pull in NumPy, ml_dtypes and the spec machinery: the ``ailower verify`` command stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ABIParam": "kernels.abi", "KernelABI": "kernels.abi",
    "DTYPES": "kernels.dtypes", "DType": "kernels.dtypes", "dtype": "kernels.dtypes",
    "ExprError": "kernels.expr", "compile_expr": "kernels.expr", "evaluate": "kernels.expr",
    "all_specs": "kernels.registry", "get": "kernels.registry", "names": "kernels.registry",
    "SPACES": "kernels.registry", "default_space": "kernels.registry",
    "space_of": "kernels.registry",
    "DEFAULT_TOLERANCES": "kernels.spec", "AutotuneSpace": "kernels.spec", "Config": "kernels.spec",
    "Distribution": "kernels.spec", "KernelSpec": "kernels.spec", "Param": "kernels.spec",
    "SourceRef": "kernels.spec", "SpecError": "kernels.spec", "Tolerance": "kernels.spec",
    "load_spec": "kernels.spec",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'kernels' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
