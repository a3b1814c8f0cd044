"""The runner's boxed work on a source job (run only by :func:`server.sandbox.lower_in_box`, inside
a bubblewrap box, as a top-level module: it imports nothing from :mod:`server`).

Everything the agent loop does with the tenant-derived artifacts -- reading the compiled reference
cache (which the compile box wrote, so it may hold anything), ptxas, the verifier, the emulator,
the GPU harness -- runs here, under the box's limits. The protocol is JSON lines:

* in, first line: ``{"spec", "arch", "cache_dir", "transcript", "iterations", "gpu", "ptxas",
  "max_ptx_version", "provider", "hang_timeout_s", "job_timeout_s"}``;
* out: ``{"op": "event", "kind", "data"}`` progress events; for a provider other than ``triton``,
  ``{"op": "propose", "ctx" (first call only), "feedback"}`` answered by ``{"op": "tool", "name",
  "args"}`` requests this child runs and answers with ``{"op": "tool_result", "text"}`` (or
  ``"error"``) until the parent sends ``{"op": "proposal", "proposal"}``; finally ``{"op":
  "result", "result", "cubin"}`` or ``{"op": "error", "type", "message"}``.

Model calls stay outside (the box has no network and no credentials): the parent calls the
provider and relays its tool calls here.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any


def _send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(msg, default=str) + "\n")
    sys.stdout.flush()


def _recv() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        raise SystemExit("the parent closed the protocol pipe")
    return json.loads(line)


def _forbid_text_source() -> None:
    """This box never imports a submitted source (only the compile box does)."""
    from kernels.spec import SourceRef, SpecError

    original = SourceRef.load

    def load(self, cache_dir=None):
        if self.text is not None:
            raise SpecError("source", "a submitted kernel source is compiled only in the compile "
                            "box; its compiled artifacts are missing from that box's output")
        return original(self, cache_dir)

    SourceRef.load = load


def main() -> None:
    """Entry point; see the module docstring."""
    req = _recv()
    home = os.environ.get("HOME", "/sandbox")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(home, "triton-cache")
    from pathlib import Path

    from agent.loop import LoopOptions, Transcript, lower
    from agent.providers.base import Proposal, ProposalContext, Provider
    from kernels import KernelSpec

    _forbid_text_source()

    class PipeProvider(Provider):
        """The parent's provider, over the protocol pipe."""

        def __init__(self, name: str):
            self.name = name
            self.sent_ctx = False

        def propose(self, ctx: ProposalContext, feedback, tools) -> Proposal:
            msg: dict[str, Any] = {"op": "propose", "feedback": feedback}
            if not self.sent_ctx:
                msg["ctx"] = ctx.model_dump(mode="json", exclude={"reference_cubin"})
                msg["ctx_cubin"] = base64.b64encode(ctx.reference_cubin).decode()
                self.sent_ctx = True
            _send(msg)
            while True:
                m = _recv()
                if m.get("op") == "tool":
                    try:
                        _send({"op": "tool_result", "text": tools(str(m["name"]),
                                                                  dict(m.get("args") or {}))})
                    except ValueError as exc:
                        _send({"op": "tool_result", "error": str(exc)})
                elif m.get("op") == "proposal":
                    return Proposal.model_validate(m["proposal"])
                else:
                    raise SystemExit(f"unexpected message from the parent: {m.get('op')!r}")

    try:
        spec = KernelSpec.model_validate(req["spec"])
        if req["provider"] == "triton":
            from agent.providers.triton import TritonProvider

            provider: Provider = TritonProvider(cache_dir=Path(req["cache_dir"]),
                                                max_ptx_version=req["max_ptx_version"])
        else:
            provider = PipeProvider(req["provider"])
        evaluator = None
        if req["gpu"]:
            from harness import GPUEvaluator

            evaluator = GPUEvaluator(hang_timeout_s=req["hang_timeout_s"],
                                     job_timeout_s=req["job_timeout_s"])
        opts = LoopOptions(iterations=req["iterations"], gpu=evaluator is not None,
                           ptxas=req["ptxas"], cache_dir=Path(req["cache_dir"]),
                           max_ptx_version=req["max_ptx_version"])
        result = lower(spec, req["arch"], provider, opts, evaluator=evaluator,
                       transcript=Transcript(Path(req["transcript"])),
                       on_event=lambda kind, data: _send({"op": "event", "kind": kind,
                                                          "data": data}))
        _send({"op": "result", "result": result.model_dump(mode="json"),
               "cubin": base64.b64encode(result.best_cubin or b"").decode()})
    except Exception as exc:  # the loop's documented failures and ailower bugs: reported as data
        import traceback

        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        _send({"op": "error", "type": type(exc).__name__, "message": detail[:4000]})
