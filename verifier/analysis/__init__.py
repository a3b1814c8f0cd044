"""Analyses shared by the rules: CFG, dominators, def-use, values, thread-uniformity and a
path-sensitive dataflow framework. They run once per function (lazily, on first use) and are
cached in the :class:`~verifier.context.Context`; rules only read them.

Public API::

    FunctionAnalysis(info, threads)   # .cfg, .values, .solve(PropertyClass)
    CFG, build_cfg, Values, UNIFORM, WARP, DIVERGENT, Property, Event, solve
"""

from __future__ import annotations

from verifier.analysis.cfg import CFG, Block, Edge, build_cfg
from verifier.analysis.dataflow import Event, Property, solve
from verifier.analysis.values import DIVERGENT, UNIFORM, WARP, Values
from verifier.tables import FunctionInfo

__all__ = [
    "CFG",
    "DIVERGENT",
    "UNIFORM",
    "WARP",
    "Block",
    "Edge",
    "Event",
    "FunctionAnalysis",
    "Property",
    "Values",
    "build_cfg",
    "solve",
]


class FunctionAnalysis:
    """Every analysis of one function with a body, computed on first access.

    Attributes:
        info: the function's name tables.
        threads: threads per CTA (``.reqntid`` product, else the launch's), or None.
        cfg: the :class:`CFG` (built eagerly).
    """

    def __init__(self, info: FunctionInfo, threads: int | None):
        self.info = info
        self.threads = threads
        self.cfg = build_cfg(info)
        self._values: Values | None = None
        self._solved: dict[type, tuple[list[Event], bool]] = {}
        self.cache: dict[str, object] = {}

    @property
    def values(self) -> Values:
        """Def-use, values and uniformity (:class:`Values`)."""
        if self._values is None:
            self._values = Values(self.cfg)
        return self._values

    @property
    def nwarps(self) -> int | None:
        """Warps per CTA, when the thread count is known."""
        return None if self.threads is None else (self.threads + 31) // 32

    def solve(self, prop_cls: type[Property]) -> tuple[list[Event], bool]:
        """Events of the property (solved once per function), and whether it converged."""
        r = self._solved.get(prop_cls)
        if r is None:
            r = solve(prop_cls(self.cfg, self.values, self))
            self._solved[prop_cls] = r
        return r
