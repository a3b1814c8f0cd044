"""The provider behind ``ailower eval``: one fixed PTX candidate (imported lazily: it pulls in the
agent and harness packages, which the fast commands do not need)."""

from __future__ import annotations

import re

from agent.providers.base import Proposal, ProposalContext, Provider, ToolExecutor

__all__ = ["FileProvider"]

_REQNTID = re.compile(r"^\s*\.reqntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", re.MULTILINE)


class FileProvider(Provider):
    """Proposes one fixed PTX text once, then reports ``exhausted``.

    Launch settings default to the reference contract of the loop's config (the autotuned
    baseline with a GPU, else the first config): threads from the PTX's ``.reqntid`` when it has
    one, else the reference's; meta-parameters (grid) from the config, updated by ``meta``;
    dynamic shared memory, cluster and global scratch from the reference ABI.

    Args:
        ptx: the candidate's PTX text.
        origin: recorded as the candidate's origin (``file:softmax_edit.ptx``).
        threads: threads per CTA (overrides ``.reqntid`` and the reference).
        meta: meta-parameter overrides (names must be the kernel's meta-parameters).
        dynamic_smem: dynamic shared memory per CTA, bytes (None: the reference's).
        global_scratch: ``(bytes per CTA, alignment)`` of Triton's global scratch (None: the
            reference's), e.g. for a candidate that builds TMA descriptors on the device.
    """

    name = "file"

    def __init__(self, ptx: str, origin: str, *, threads: int | None = None,
                 meta: dict[str, int] | None = None, dynamic_smem: int | None = None,
                 global_scratch: tuple[int, int] | None = None):
        self.ptx, self.origin, self.global_scratch = ptx, origin, global_scratch
        self.threads, self.meta, self.dynamic_smem = threads, dict(meta or {}), dynamic_smem
        self._done = False

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """The file's candidate the first time; ``exhausted`` afterwards."""
        from harness.candidate import Candidate

        if self._done:
            return Proposal(error="the file's candidate has been judged", error_kind="exhausted")
        self._done = True
        threads = self.threads
        if threads is None:
            m = _REQNTID.search(self.ptx)
            threads = (int(m.group(1)) * int(m.group(2) or 1) * int(m.group(3) or 1)
                       if m else ctx.abi.threads)
        cand = Candidate(
            ptx=self.ptx, threads=threads, meta={**ctx.config.meta, **self.meta},
            dynamic_smem=ctx.abi.dynamic_smem if self.dynamic_smem is None else self.dynamic_smem,
            cluster_dims=(ctx.abi.num_ctas, 1, 1),
            global_scratch_size=(ctx.abi.global_scratch_size if self.global_scratch is None
                                 else self.global_scratch[0]),
            global_scratch_align=(ctx.abi.global_scratch_align if self.global_scratch is None
                                  else self.global_scratch[1]), origin=self.origin)
        return Proposal(candidate=cand, events=[{"type": "propose", "origin": self.origin,
                                                 "threads": threads, "meta": cand.meta}])
