"""The ``mcp`` provider: the model is an MCP client (a coding agent) that calls the loop's tools.

With ``ailower mcp`` a coding agent (Claude Code, Codex CLI, Cursor, ...) drives a lowering run
itself: it calls ``show`` / ``patch`` / ``compile`` / ``verify`` / ``evaluate`` as a chat model
would, and ``submit`` hands in the turn's candidate (or up to ``K`` variants with a plan). The
run is an ordinary :func:`agent.loop.lower` run in a thread of its own, with this provider
(``provider = "mcp"``, ``model`` = the client's name): the same gates, iteration and per-turn
tool budgets, K, transcript and run record as any provider, and it can be replayed with the
``replay`` provider because every tool call is recorded in the transcript exactly as a chat
provider records it (``tool_call`` events with the full arguments, a ``submit`` event with the
candidate's digest and the variants').

Two queues connect the threads: :meth:`McpProvider.propose` (loop thread) opens a turn (hands the
previous outcome to the waiting ``submit``) and blocks until the client submits, finishes, or
stays idle past ``idle_timeout_s`` (the run then ends with ``exhausted``, never hangs).
:class:`McpSession` is the client's side: it starts the run, answers the tools and turns
``submit`` into the outcome text (the feedback of the loop), and after the last iteration into the
run's summary.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from agent.providers.base import Proposal, ProposalContext, Provider, ToolExecutor, clip
from agent.tools import candidates_from_submit, submit_defaults, validate_tool_args
from agent.workspace import Workspace, show_text

__all__ = ["McpProvider", "McpSession", "SessionError"]

_LOOP_TOOLS = ("compile", "verify", "evaluate")


class SessionError(ValueError):
    """A tool call the session cannot serve now or with these arguments; the message says why
    (it becomes the MCP tool error the client sees)."""


class McpProvider(Provider):
    """The provider side of an MCP session (see the module docstring).

    Args:
        client: the MCP client's name (recorded as the model).
        idle_timeout_s: how long a turn waits for the client before the run ends.
    """

    name = "mcp"

    def __init__(self, client: str, *, idle_timeout_s: float = 3600.0):
        self.model = client or "unknown-client"
        self.idle_timeout_s = idle_timeout_s
        self._inbox: queue.Queue[tuple[str, Any]] = queue.Queue()   # session -> loop
        self.outbox: queue.Queue[tuple[str, Any]] = queue.Queue()   # loop -> session
        self.lock = threading.RLock()
        self.ctx: ProposalContext | None = None
        self.tools: ToolExecutor | None = None
        self.ws: Workspace | None = None
        self._seed: str | None = None
        self.events: list[dict[str, Any]] = []
        self.calls = 0
        self.turn = 0
        self.open = False

    def seed(self, ptx: str) -> None:
        """The loop's best valid candidate: the base of variant edits and ``patch base=best``."""
        with self.lock:
            self._seed = ptx
            if self.ws is not None:
                self.ws.best = ptx

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """Open a turn for the client and wait for its ``submit`` (or ``finish`` / idleness).

        Returns:
            The submitted candidate(s) with the turn's recorded events, or ``exhausted`` when the
            client finished the session, went away or stayed idle past ``idle_timeout_s``.
        """
        with self.lock:
            self.ctx, self.tools = ctx, tools
            if self.ws is None:
                self.ws = Workspace(ctx.reference_ptx)
                if self._seed is not None:
                    self.ws.best = self._seed
            self.events, self.calls, self.open = [], 0, True
            self.turn += 1
        self.outbox.put(("turn", feedback))
        try:
            kind, payload = self._inbox.get(timeout=self.idle_timeout_s)
        except queue.Empty:
            kind, payload = "stop", f"no submit within {self.idle_timeout_s:g} s"
        with self.lock:
            events, self.events, self.open = self.events, [], False
        if kind == "stop":
            events.append({"type": "error", "kind": "exhausted", "message": f"mcp: {payload}"})
            return Proposal(error=f"mcp: {payload}", error_kind="exhausted", events=events)
        made = payload
        return Proposal(candidate=made.candidates[0],
                        variants=made.candidates if made.described else [], plan=made.plan,
                        events=events)

    def put(self, kind: str, payload: Any) -> None:
        """Hand the loop thread a ``submit`` (``SubmitVariants``) or a ``stop`` (reason)."""
        self._inbox.put((kind, payload))


class McpSession:
    """One lowering run driven by an MCP client.

    Args:
        provider: the :class:`McpProvider` the run uses.
        run: ``(provider) -> dict`` runs the loop to its end and records the run; returns a
            summary (``run_id``, ``stop_reason``, ``best``...). Called in a thread of its own.
        kernel, arch: what is lowered (for messages).
        wait_s: how long a tool call waits for the loop (reference compile, an evaluation).

    Raises:
        SessionError: (from :meth:`start`) the run failed before its first turn.
    """

    def __init__(self, provider: McpProvider, run: Callable[[McpProvider], dict[str, Any]], *,
                 kernel: str, arch: str, wait_s: float = 1800.0):
        self.provider, self._run, self.kernel, self.arch = provider, run, kernel, arch
        self.wait_s = wait_s
        self.done: dict[str, Any] | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> str | None:
        """Start the run and wait for its first turn.

        Returns:
            None (the first turn is open; :meth:`task` has the prompt).

        Raises:
            SessionError: the run ended or failed before its first turn.
        """
        def body() -> None:
            try:
                summary = self._run(self.provider)
            except Exception as exc:  # reported to the client, the server goes on
                self.provider.outbox.put(("error", f"{type(exc).__name__}: {exc}"))
                return
            self.provider.outbox.put(("done", summary))

        self._thread = threading.Thread(target=body, name=f"mcp-run-{self.kernel}", daemon=True)
        self._thread.start()
        kind, payload = self._wait()
        if kind != "turn":
            raise SessionError(self._ended(kind, payload))
        return None

    def _wait(self) -> tuple[str, Any]:
        try:
            kind, payload = self.provider.outbox.get(timeout=self.wait_s)
        except queue.Empty:
            return "error", f"the run did not answer within {self.wait_s:g} s"
        if kind in ("done", "error"):
            self.done = payload if kind == "done" else {"error": payload}
        return kind, payload

    def _ended(self, kind: str, payload: Any) -> str:
        if kind == "error":
            return f"the run of {self.kernel} for {self.arch} failed: {payload}"
        return f"the run of {self.kernel} for {self.arch} ended: {payload}"

    def finish(self, reason: str = "finished by the client") -> dict[str, Any]:
        """End the run now (it is recorded with what it has); returns its summary.

        Raises:
            SessionError: the run is already over.
        """
        if self.done is not None:
            raise SessionError("the session is already over")
        self.provider.put("stop", reason)
        while True:
            kind, payload = self._wait()
            if kind in ("done", "error"):
                return self.done or {}

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the run (the client went away) and wait up to ``timeout_s`` for it."""
        if self.done is None:
            self.provider.put("stop", "the MCP client disconnected")
        if self._thread is not None:
            self._thread.join(timeout_s)

    # ---- tools ----------------------------------------------------------------------------------
    def _check_open(self) -> tuple[ProposalContext, Workspace]:
        p = self.provider
        if self.done is not None:
            raise SessionError("the session is over; start_lowering starts a new one")
        if not p.open or p.ctx is None or p.ws is None:
            raise SessionError("no turn is open (the previous submit is still being evaluated)")
        return p.ctx, p.ws

    def _record(self, name: str, args: Any) -> str:
        self._ids += 1
        cid = f"mcp-{self.provider.turn}-{self._ids}"
        self.provider.events.append({"type": "tool_call", "id": cid, "name": name, "args": args})
        return cid

    def tool(self, name: str, args: dict[str, Any]) -> str:
        """Run ``show`` / ``patch`` / ``compile`` / ``verify`` / ``evaluate`` in the open turn.

        Raises:
            SessionError: no open turn, the per-turn tool budget is spent, or invalid arguments
                (``patch.edits[1]: search text not found ...``); recorded in the transcript
                like any call.
        """
        p = self.provider
        with p.lock:
            ctx, ws = self._check_open()
            if p.calls >= ctx.max_tool_calls:
                raise SessionError(f"the budget of {ctx.max_tool_calls} tool calls per turn is "
                                   "spent: submit")
            p.calls += 1
            cid = self._record(name, args)
            try:
                if name == "patch":
                    a = validate_tool_args("patch", args)
                    text = ws.patch(a["edits"], a.get("base", "current"))
                elif name == "show":
                    a = validate_tool_args("show", args)
                    text = show_text(ctx, ws, a["what"], a.get("start_line", 1),
                                     a.get("max_lines", 400))
                elif name in _LOOP_TOOLS:
                    assert p.tools is not None
                    text = p.tools(name, validate_tool_args(name, ws.use(args)))
                else:
                    raise ValueError(f"unknown tool {name!r}")
            except ValueError as exc:
                p.events.append({"type": "tool_result", "id": cid, "text": str(exc),
                                 "is_error": True})
                raise SessionError(str(exc)) from None
            p.events.append({"type": "tool_result", "id": cid, "text": clip(text, 2000),
                             "is_error": False})
            return text

    def submit(self, args: dict[str, Any]) -> str:
        """Hand in the turn's candidate (or variants); returns the outcome the loop computed
        (its feedback) and, after the last iteration, the run's summary.

        Raises:
            SessionError: no open turn, or invalid submit arguments (the turn stays open).
        """
        p = self.provider
        with p.lock:
            ctx, ws = self._check_open()
            try:
                made = candidates_from_submit(args, ws, f"mcp:{p.model}",
                                              defaults=submit_defaults(ctx),
                                              max_variants=ctx.max_variants)
            except ValueError as exc:
                raise SessionError(f"invalid submit: {exc}") from None
            cid = self._record("submit", args)
            cand = made.candidates[0]
            p.events.append({"type": "submit", "id": cid, "digest": cand.digest(),
                             "threads": cand.threads, "meta": cand.meta,
                             "notes": args.get("notes"),
                             **({"plan": made.plan} if made.plan else {}),
                             **({"variants": made.described} if made.described else {})})
            turn = p.turn
            p.put("submit", made)
        kind, payload = self._wait()
        if kind == "turn":
            return (f"{payload or ''}\n\nTurn {turn + 1} is open: improve on it, then submit "
                    "again.").lstrip()
        if kind == "done":
            return self._final(payload)
        raise SessionError(self._ended(kind, payload))

    @staticmethod
    def _final(summary: dict[str, Any]) -> str:
        fb = summary.get("last_feedback") or ""
        return (f"{fb}\n\nThe run is over ({summary.get('stop_reason')}); recorded as run "
                f"#{summary.get('run_id')}: best {summary.get('best_verdict') or 'none'}"
                + (f", speedup {summary['best_speedup']:.3f}x" if summary.get("best_speedup")
                   else "") + ".").lstrip()
