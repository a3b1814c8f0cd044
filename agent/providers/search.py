"""The offline ``search`` provider: systematic search over Triton configs and PTX passes.

No model and no network. On its first call it runs :class:`search.engine.SearchEngine` for the
kernel: legal Triton configs beyond the autotune space and named PTX transformations of the best
Triton PTX, each assembled by ptxas and checked by the verifier; with a GPU it selects among them
by successive halving within a wall-time budget (``AILOWER_SEARCH_BUDGET_S``, default 30 s per
kernel with tensor-core dots; ``AILOWER_SEARCH_MEMORY_BUDGET_S``, default 8 s, for memory-bound
kernels, whose space is small: block size and warps only). It then proposes, one per iteration: the search's winner, the autotuned baseline (always
a candidate, so the loop's pick is never slower than the baseline as measured by the loop), and
the runners-up. Every proposal still goes through the loop's own ptxas, verifier and 3-seed GPU
evaluation. A candidate's ``origin`` is ``search:<transformation>`` (``search:baseline``,
``search:triton[BLOCK_M=256,...,w8,s3,c1]``, ``search:triton[...]+ld.nc``), so the report and the
transcript say which transformation produced the winner.

Without a GPU it proposes the baseline and then the statically checked candidates, and says that
selection needs a GPU.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent.providers.base import Proposal, ProposalContext, Provider, ToolExecutor
from harness.errors import HarnessError

__all__ = ["SearchProvider", "DEFAULT_BUDGET_S", "DEFAULT_MEMORY_BUDGET_S"]

DEFAULT_BUDGET_S = 30.0
"""Default wall-time budget of one kernel's search, seconds (compiles and GPU rounds)."""
DEFAULT_MEMORY_BUDGET_S = 8.0
"""Default budget for a kernel without tensor-core dots (its spec has no ``flop_dtype``): its
space is block size and warps (one or two halving rounds), seconds."""


class SearchProvider(Provider):
    """Proposes the winners of a systematic search.

    Args:
        cache_dir: reference-compile cache (the loop's) and bench-input cache.
        max_ptx_version: passed to Triton compiles.
        ptxas: the ``AILOWER_PTXAS`` setting.
        budget_s: wall-time budget of the search, seconds (None: ``AILOWER_SEARCH_BUDGET_S`` or
            :data:`DEFAULT_BUDGET_S`).
        memory_budget_s: the budget for kernels without tensor-core dots, seconds (None:
            ``AILOWER_SEARCH_MEMORY_BUDGET_S`` or :data:`DEFAULT_MEMORY_BUDGET_S`, at most
            ``budget_s``).
        max_configs: Triton configs beyond the autotune space to build (``AILOWER_SEARCH_MAX_CONFIGS``,
            default 12).
        workers: compile processes (None: CPU count - 1).

    Raises:
        ValueError: a budget or config count that is not a positive number (naming the variable).
    """

    name = "search"

    def __init__(self, cache_dir: Path | None = None, max_ptx_version: int = 90,
                 ptxas: str | None = None, budget_s: float | None = None,
                 max_configs: int | None = None, workers: int | None = None,
                 memory_budget_s: float | None = None):
        self.cache_dir, self.max_ptx_version, self.ptxas = cache_dir, max_ptx_version, ptxas
        self.budget_s = budget_s if budget_s is not None else _env_float(
            "AILOWER_SEARCH_BUDGET_S", DEFAULT_BUDGET_S)
        self.max_configs = max_configs if max_configs is not None else int(_env_float(
            "AILOWER_SEARCH_MAX_CONFIGS", 12))
        self.memory_budget_s = min(self.budget_s, memory_budget_s if memory_budget_s is not None
                                   else _env_float("AILOWER_SEARCH_MEMORY_BUDGET_S",
                                                   DEFAULT_MEMORY_BUDGET_S))
        if self.budget_s <= 0 or self.memory_budget_s <= 0 or self.max_configs < 0:
            raise ValueError(f"search budgets must be > 0 s and max configs >= 0 (got "
                             f"{self.budget_s}, {self.memory_budget_s}, {self.max_configs})")
        self.workers = workers if workers is not None else max(1, (os.cpu_count() or 2) - 1)
        self._queue: list[tuple[Any, float | None]] | None = None
        self._outcome: Any = None

    def budget_for(self, spec: Any) -> float:
        """The search budget for ``spec``, seconds: ``budget_s`` when it has tensor-core dots
        (``flop_dtype`` set), else ``memory_budget_s``."""
        return self.budget_s if spec.flop_dtype else self.memory_budget_s

    def reset(self) -> None:
        """Forget the search (the next call searches again)."""
        self._queue, self._outcome = None, None

    def _search(self, ctx: ProposalContext) -> list[dict[str, Any]]:
        from harness import GPUEvaluator, compile_reference
        from search.engine import SearchEngine

        base = compile_reference(ctx.spec, ctx.arch, ctx.config, cache_dir=self.cache_dir,
                                 max_ptx_version=self.max_ptx_version)
        ev = None
        if ctx.gpu_available:
            ev = GPUEvaluator(timing_budget_s=0.3, hang_timeout_s=10.0, job_timeout_s=180.0,
                              input_cache=self.cache_dir)
        eng = SearchEngine(ctx.spec, ctx.arch, base, evaluator=ev, cache_dir=self.cache_dir,
                           max_ptx_version=self.max_ptx_version, ptxas=self.ptxas,
                           workers=self.workers)
        budget = self.budget_for(ctx.spec)
        out = eng.run(budget_s=budget, max_configs=self.max_configs)
        self._outcome = out
        ranked = list(out.ranking)
        if out.gpu:
            base_i = next((i for i, (a, _) in enumerate(ranked) if a.id == "base"), None)
            if base_i is None:
                why = "; ".join(f"{name}: {h.failed['base']}" for name, h in out.stages.items()
                                if h is not None and "base" in h.failed) or "no measurement"
                raise RuntimeError(f"search on the GPU: the baseline ({ctx.config.key()}) was not "
                                   f"measured, so no arm can be ranked against it: {why[:1500]}")
            # winner(s) faster than the baseline first, then the baseline, then the rest
            order = ranked[:base_i][:1] + [ranked[base_i]] + ranked[:base_i][1:] + ranked[base_i + 1:]
        else:
            order = ranked
        self._queue = order
        stages = {}
        for name, h in out.stages.items():
            if h is None:
                continue
            stages[name] = [{"round": r.round, "reps": r.reps, "kept": r.kept,
                             "measured": {a: {"ok": m.ok, "ratio": m.ratio, "message": m.message[:200]}
                                          for a, m in r.measured.items()}} for r in h.rounds]
        return [{"type": "search", "gpu": out.gpu, "note": out.note, "budget_s": budget,
                 "arms": len(out.arms), "table": out.table(), "seconds": out.seconds,
                 "rejected": {k: v[:200] for k, v in out.rejected.items()}, "rounds": stages}]

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """Search on the first call; then return the next ranked candidate."""
        events: list[dict[str, Any]] = []
        if self._queue is None:
            try:
                events = self._search(ctx)
            except HarnessError as exc:
                self._queue = []
                return Proposal(error=f"search failed: {exc}", error_kind="exhausted",
                                events=[{"type": "search", "error": str(exc)[:500]}])
        if not self._queue:
            return Proposal(error="every search candidate has been proposed",
                            error_kind="exhausted", events=events)
        arm, ratio = self._queue.pop(0)
        events.append({"type": "propose", "arm": arm.id, "transform": arm.transform,
                       "search_ratio": ratio,
                       "search_speedup": (1.0 / ratio) if ratio else None})
        note = self._outcome.note if self._outcome is not None and self._outcome.note else None
        return Proposal(candidate=arm.candidate, events=events, error=note)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
