"""A scripted provider for loop tests: returns pre-made candidates (or errors) in order."""

from __future__ import annotations

from collections.abc import Callable

from agent.providers.base import Proposal, ProposalContext, Provider, ToolExecutor
from harness.candidate import Candidate


class ScriptedProvider(Provider):
    """Each step is ``(label, fn(ctx) -> ptx)`` or ``(label, error_kind)``; feedback is recorded."""

    name = "scripted"

    def __init__(self, steps: list[tuple[str, Callable[[ProposalContext], str] | str]]):
        self.steps, self.feedback = list(steps), []

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        self.feedback.append(feedback)
        if not self.steps:
            return Proposal(error="script exhausted", error_kind="exhausted")
        label, step = self.steps.pop(0)
        if isinstance(step, str):
            return Proposal(error=f"{label}: scripted {step}", error_kind=step)
        cand = Candidate(ptx=step(ctx), threads=ctx.abi.threads, meta=dict(ctx.config.meta),
                         dynamic_smem=ctx.abi.dynamic_smem, origin=f"scripted:{label}")
        return Proposal(candidate=cand)
