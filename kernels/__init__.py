"""Kernel specifications and the suite.

Public API: :class:`KernelSpec` and its parts, :func:`load_spec`, the ABI model, dtypes, the safe
expression evaluator and the suite registry.
"""

from kernels.abi import ABIParam, KernelABI
from kernels.dtypes import DTYPES, DType, dtype
from kernels.expr import ExprError, compile_expr, evaluate
from kernels.registry import all_specs, get, names
from kernels.spec import (
    DEFAULT_TOLERANCES,
    AutotuneSpace,
    Config,
    Distribution,
    KernelSpec,
    Param,
    SourceRef,
    SpecError,
    Tolerance,
    load_spec,
)

__all__ = [
    "ABIParam", "KernelABI", "DTYPES", "DType", "dtype", "ExprError", "compile_expr", "evaluate",
    "all_specs", "get", "names", "DEFAULT_TOLERANCES", "AutotuneSpace", "Config", "Distribution",
    "KernelSpec", "Param", "SourceRef", "SpecError", "Tolerance", "load_spec",
]
