"""The ``replay`` provider: re-runs a recorded ``transcript.jsonl`` and reproduces its candidates.

The agent loop writes every provider event to ``transcript.jsonl`` (one JSON object per line,
``{"event": "provider", "iteration": i, "type": ..., ...}``): the model's tool calls with their
full arguments (``patch`` edits, PTX), the ``submit`` call and the digest of the candidate it
made, and the error of an iteration without one. :class:`ReplayProvider` reads those events and,
for iteration ``i``, does what the chat provider did: it re-applies the ``patch`` edits and the
PTX passed to ``compile`` / ``verify`` / ``evaluate`` to a fresh :class:`~agent.workspace.Workspace`
(optionally re-running those tools through the loop, so their effects and timings recur), then
builds the candidate from the recorded ``submit`` arguments. The candidate's
:meth:`~harness.candidate.Candidate.digest` must equal the recorded one, else the proposal is an
error saying so. No model is called and no network is used: the run is reproducible offline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.providers.base import Proposal, ProposalContext, Provider, ProviderError, ToolExecutor
from agent.tools import MAX_VARIANTS, candidates_from_submit, submit_defaults, validate_tool_args
from agent.workspace import PatchError, Workspace

__all__ = ["ReplayProvider", "ReplayError", "read_transcript"]

_LOOP_TOOLS = ("compile", "verify", "evaluate")


class ReplayError(ProviderError):
    """The transcript cannot be replayed: unreadable, or without provider events (message names
    ``file:line``). Raised by the constructor, before any work."""

    fatal = True


def read_transcript(path: str | Path) -> dict[int, list[dict[str, Any]]]:
    """Provider events of a ``transcript.jsonl``, by iteration (1-based), in order.

    Raises:
        ReplayError: the file cannot be read, a line is not a JSON object, or it holds no
            provider events.
    """
    p = Path(path)
    try:
        lines = p.read_text().splitlines()
    except OSError as exc:
        raise ReplayError(f"{p}: cannot read the transcript: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ReplayError(f"{p}: not a text file (UTF-8 JSON lines expected)") from None
    out: dict[int, list[dict[str, Any]]] = {}
    origins: list[str] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReplayError(f"{p}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise ReplayError(f"{p}:{n}: expected a JSON object")
        if row.get("event") == "iteration" and isinstance(row.get("origin"), str):
            origins.append(row["origin"])
        if row.get("event") != "provider":
            continue
        it = row.get("iteration")
        if not isinstance(it, int) or it < 1:
            raise ReplayError(f"{p}:{n}: provider event without a valid iteration number")
        out.setdefault(it, []).append(row)
    offline = _OFFLINE_EVENT_TYPES
    if out and all(ev.get("type") in offline for evs in out.values() for ev in evs):
        name = next((o.split(":", 1)[0] for o in origins if ":" in o), None)
        raise ReplayError(
            f"{p}: written by the {name!r} provider, which proposes without a model: only "
            "transcripts of model providers (anthropic, openai) replay; run "
            f"'ailower lower KERNEL --provider {name}' again instead" if name else
            f"{p}: its provider proposed without a model: only transcripts of model providers "
            "(anthropic, openai) replay")
    if not out:
        raise ReplayError(f"{p}: no provider events: only transcripts that 'ailower lower' "
                          "wrote with a model provider (anthropic, openai) replay")
    return out


_OFFLINE_EVENT_TYPES = frozenset({"propose", "skip", "search"})
"""Provider event types of the offline providers (``triton``: propose/skip; ``search``:
propose/search): a transcript with only these has no model turns to replay."""


class ReplayProvider(Provider):
    """Replays ``transcript`` (a path or the events of :func:`read_transcript`).

    Args:
        transcript: the ``transcript.jsonl`` of a previous run.
        rerun_tools: also re-run the recorded ``compile`` / ``verify`` / ``evaluate`` calls
            through the loop's tools (their results are not compared: GPU timings vary).

    Raises:
        ReplayError: see :func:`read_transcript`.
    """

    name = "replay"

    def __init__(self, transcript: str | Path | dict[int, list[dict[str, Any]]], *,
                 rerun_tools: bool = True):
        self.source = str(transcript) if not isinstance(transcript, dict) else "<events>"
        self.events = transcript if isinstance(transcript, dict) else read_transcript(transcript)
        self.rerun_tools = rerun_tools
        self.iteration = 0
        self._ws: Workspace | None = None
        self._task: tuple[str, str, str] | None = None
        self._seed: str | None = None

    def seed(self, ptx: str) -> None:
        """The loop's best valid candidate, as the recording provider was told (the base of
        variant edits)."""
        self._seed = ptx
        if self._ws is not None:
            self._ws.best = ptx

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """The recorded proposal of the next iteration, rebuilt from its events.

        Returns:
            ``Proposal(candidate=...)`` whose digest equals the recorded one;
            ``Proposal(error_kind="exhausted")`` after the last recorded iteration; the recorded
            error for an iteration that had none; ``bad_output`` when the rebuilt candidate
            differs from the recorded digest (the task or ailower changed since the recording).
        """
        task = (ctx.spec.name, ctx.arch, ctx.config.key())
        if self._task != task or self._ws is None:
            self._ws, self._task = Workspace(ctx.reference_ptx), task
            if self._seed is not None:
                self._ws.best = self._seed
        ws = self._ws
        self.iteration += 1
        evs = self.events.get(self.iteration)
        if evs is None:
            return Proposal(error=f"replay: the transcript has no iteration {self.iteration}",
                            error_kind="exhausted")
        out_events: list[dict[str, Any]] = [{"type": "replay", "source": self.source,
                                             "iteration": self.iteration}]
        usage: dict[str, int] = {}
        pending_submit: dict[str, Any] | None = None
        for ev in evs:
            kind = ev.get("type")
            if kind == "usage":
                for k, v in ev.items():
                    if k not in ("type", "event", "iteration", "ts") and isinstance(v, int):
                        usage[k] = usage.get(k, 0) + v
            elif kind == "tool_call":
                name, args = ev.get("name"), ev.get("args")
                out_events.append({"type": "tool_call", "id": ev.get("id"), "name": name,
                                   "args": args})
                if name == "submit":
                    pending_submit = ev
                    try:
                        made = candidates_from_submit(args, ws, f"replay:{self.source}",
                                                      defaults=submit_defaults(ctx),
                                                      # the recording enforced its K
                                                      max_variants=MAX_VARIANTS)
                    except ValueError as exc:
                        pending_submit = {"error": str(exc)}
                        continue
                    pending_submit = {"candidate": made.candidates[0], "made": made}
                elif name == "patch":
                    try:
                        a = validate_tool_args("patch", args)
                        ws.patch(a["edits"], a.get("base", "current"))
                    except (PatchError, ValueError):
                        pass  # the recorded call failed the same way; nothing changed
                elif name in _LOOP_TOOLS:
                    filled = ws.use(args)
                    if self.rerun_tools:
                        try:
                            tools(name, validate_tool_args(name, filled))
                        except ValueError:
                            pass  # recorded as an invalid call; the model was told then
            elif kind == "submit" and pending_submit and "candidate" in pending_submit:
                cand = pending_submit["candidate"]
                made = pending_submit["made"]
                want = ev.get("digest")
                if want != cand.digest():
                    return Proposal(
                        error=(f"replay: iteration {self.iteration} rebuilt candidate "
                               f"{cand.digest()} but the transcript recorded {want}; the task "
                               "(kernel, config, reference PTX) differs from the recording"),
                        error_kind="bad_output", events=out_events, usage=usage)
                rec_vars = [v.get("digest") for v in ev.get("variants") or []]
                got_vars = [d["digest"] for d in made.described]
                if rec_vars != got_vars:
                    return Proposal(
                        error=(f"replay: iteration {self.iteration} rebuilt variants "
                               f"{got_vars} but the transcript recorded {rec_vars}; the task or "
                               "the seeded best candidate differs from the recording"),
                        error_kind="bad_output", events=out_events, usage=usage)
                out_events.append({"type": "submit", "digest": cand.digest(),
                                   "threads": cand.threads, "meta": cand.meta,
                                   **({"plan": made.plan} if made.plan else {}),
                                   **({"variants": made.described} if made.described else {})})
                return Proposal(candidate=cand, variants=made.candidates if made.described else [],
                                plan=made.plan, events=out_events, usage=usage)
            elif kind == "error":
                out_events.append({"type": "error", "kind": ev.get("kind"),
                                   "message": ev.get("message")})
                k = ev.get("kind")
                if k not in ("rate_limited", "timeout", "refused", "bad_output", "auth",
                             "exhausted", "budget"):
                    k = "bad_output"
                return Proposal(error=f"replayed: {ev.get('message')}", error_kind=k,
                                events=out_events, usage=usage)
        if pending_submit and "error" in pending_submit:
            return Proposal(error=f"replayed: invalid submit arguments: {pending_submit['error']}",
                            error_kind="bad_output", events=out_events, usage=usage)
        return Proposal(error=f"replay: iteration {self.iteration} of the transcript has no "
                              "submit and no error event", error_kind="bad_output",
                        events=out_events, usage=usage)
