"""The offline ``triton`` provider: proposes Triton's own PTX across the autotune space.

It needs no network and no model, so the whole loop (assemble, verify, evaluate, feedback, keep
the best) does real work anywhere. Iteration 1 proposes the reference config's PTX (the autotuned
baseline when a GPU chose one); later iterations walk the rest of the autotune space in order.
When every config has been proposed it reports ``exhausted`` and the loop stops.
"""

from __future__ import annotations

from pathlib import Path

from agent.providers.base import Proposal, ProposalContext, Provider, ToolExecutor
from harness.candidate import Candidate
from harness.errors import ReferenceCompileError
from harness.reference import compile_reference

__all__ = ["TritonProvider"]


class TritonProvider(Provider):
    """Proposes the PTX Triton generates for each config of the autotune space.

    Args:
        cache_dir: reference-compile cache (the loop's); None compiles without caching.
        max_ptx_version: passed to the reference compile.
    """

    name = "triton"

    def __init__(self, cache_dir: Path | None = None, max_ptx_version: int = 90):
        self.cache_dir, self.max_ptx_version = cache_dir, max_ptx_version
        self._next = 0

    def reset(self) -> None:
        """Start again from the first config."""
        self._next = 0

    def _order(self, ctx: ProposalContext) -> list:
        first = ctx.config
        rest = [c for c in ctx.configs if c.key() != first.key()]
        return [first, *rest]

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """Return the next config's PTX as a candidate (Triton's launch contract for it)."""
        order = self._order(ctx)
        while self._next < len(order):
            cfg = order[self._next]
            self._next += 1
            if cfg.key() == ctx.config.key():
                ptx, abi = ctx.reference_ptx, ctx.abi
            else:
                try:
                    art = compile_reference(ctx.spec, ctx.arch, cfg, cache_dir=self.cache_dir,
                                            max_ptx_version=self.max_ptx_version)
                except ReferenceCompileError as exc:
                    return Proposal(error=f"Triton could not compile config {cfg.key()}: {exc}",
                                    error_kind="bad_output",
                                    events=[{"type": "skip", "config": cfg.key()}])
                ptx, abi = art.ptx, art.abi
            cand = Candidate.with_triton_launch(ptx, abi, cfg.meta, f"triton:{cfg.key()}")
            return Proposal(candidate=cand, events=[{"type": "propose", "config": cfg.key()}])
        return Proposal(error="every config of the autotune space has been proposed",
                        error_kind="exhausted")
