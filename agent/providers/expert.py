"""The offline ``expert`` provider: proposes the expert corpus's hand-lowered PTX (kernels/expert/).

No model and no network. Iteration 1 proposes the corpus entry for (kernel, arch) byte for byte,
with the launch settings of its ``launch.yaml`` (origin ``expert:<kernel>/<arch>``); iteration 2
proposes the autotuned Triton baseline (origin ``triton:<config>``), so the baseline is always a
candidate too; then it is exhausted. Where the corpus has no entry, iteration 1 is a recorded
provider outcome ``none: no expert candidate for K on ARCH`` (verdict ``rejected-provider``) and
nothing is proposed: the expert row of that cell stays empty, never a copy of the baseline.
"""

from __future__ import annotations

from pathlib import Path

from agent.providers.base import Proposal, ProposalContext, Provider, ToolExecutor
from harness.candidate import Candidate

__all__ = ["ExpertProvider"]


class ExpertProvider(Provider):
    """Proposes the corpus entry for the kernel and arch, then the Triton baseline.

    Args:
        cache_dir: accepted for the campaign's provider factory; unused (nothing is compiled).
        corpus: the corpus root (None: ``kernels/expert/``); tests pass a temporary one.

    A malformed corpus entry (:class:`kernels.expert.ExpertError`) is reported as a provider
    error of kind ``bad_output`` naming the file and field, and nothing else is proposed.
    """

    name = "expert"

    def __init__(self, cache_dir: Path | None = None, corpus: Path | None = None):
        self.cache_dir, self.corpus = cache_dir, corpus
        self._step = 0

    def reset(self) -> None:
        """Start again from the expert candidate."""
        self._step = 0

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """Step 1: the corpus candidate (or ``none``); step 2: the baseline; then exhausted."""
        from kernels.expert import ExpertError, find

        step, self._step = self._step, self._step + 1
        where = f"{ctx.spec.name} on {ctx.arch}"
        if step == 0:
            try:
                entry = find(ctx.spec.name, ctx.arch, root=self.corpus)
            except ExpertError as exc:
                self._step = 99
                return Proposal(error=f"expert corpus entry for {where} is malformed: {exc}",
                                error_kind="bad_output",
                                events=[{"type": "propose", "expert": "malformed",
                                         "error": str(exc)[:500]}])
            if entry is None:
                self._step = 99
                return Proposal(error=f"none: no expert candidate for {where} "
                                      "(kernels/expert/ has no entry)",
                                events=[{"type": "propose", "expert": "none"}])
            lc = entry.launch
            cand = Candidate(ptx=entry.ptx, threads=lc.threads,
                             meta={**ctx.config.meta, **lc.meta}, dynamic_smem=lc.dynamic_smem,
                             cluster_dims=lc.cluster_dims,
                             global_scratch_size=lc.global_scratch_size,
                             global_scratch_align=lc.global_scratch_align,
                             origin=f"expert:{lc.kernel}/{lc.arch}")
            return Proposal(candidate=cand, events=[{"type": "propose", "expert": "corpus",
                                                     "folder": f"{lc.kernel}/{lc.arch}",
                                                     "source": lc.source}])
        if step == 1:
            cand = Candidate.with_triton_launch(ctx.reference_ptx, ctx.abi, ctx.config.meta,
                                                f"triton:{ctx.config.key()}")
            return Proposal(candidate=cand, events=[{"type": "propose", "expert": "baseline",
                                                     "config": ctx.config.key()}])
        return Proposal(error="the expert candidate and the baseline have been proposed"
                        if step < 99 else "no expert candidate to propose",
                        error_kind="exhausted")
