"""The part that the tool-using chat providers (Anthropic, OpenAI) share.

A :class:`ToolChatProvider` keeps one conversation per task (kernel, arch, config). Each
:meth:`~ToolChatProvider.propose` is one *turn*, run by the subclass's ``_turn``: it sends the new
user content, answers the model's ``compile`` / ``verify`` / ``evaluate`` calls through the loop's
tool executor and its ``patch`` / ``show`` calls itself (:meth:`ToolChatProvider._tool`, on the
conversation's :class:`~agent.workspace.Workspace`), and ends at a ``submit``. Provider errors raised inside the turn become a
:class:`Proposal` with ``error_kind`` here, with the API key redacted from the transcript events.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from agent.providers.base import (
    Proposal,
    ProposalContext,
    Provider,
    ProviderBudgetExceeded,
    ProviderError,
    ToolExecutor,
    redact,
)
from agent.tools import SubmitVariants, candidates_from_submit, submit_defaults, validate_tool_args
from agent.workspace import Workspace, show_text

__all__ = ["ToolChatProvider", "check_client_args", "LOOP_TOOLS", "LOCAL_TOOLS"]

LOOP_TOOLS = ("compile", "verify", "evaluate")
"""Tools the loop's executor runs."""
LOCAL_TOOLS = ("patch", "show")
"""Tools the provider answers itself, on the conversation's workspace."""


def check_client_args(model: str, timeout: float, max_retries: int, max_turns: int | None,
                      max_tokens: int | None) -> None:
    """Validate the constructor arguments common to the chat providers.

    Raises:
        ValueError: an empty model id, a non-positive ``timeout`` (seconds), ``max_turns`` or
            ``max_tokens``, or a negative ``max_retries``.
    """
    if not model:
        raise ValueError("model must be a non-empty model id")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    if timeout <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    if max_turns is not None and max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")


class ToolChatProvider(Provider):
    """Base of the chat providers: conversation state, :meth:`propose`, :meth:`reset`.

    Subclasses set ``model``, ``_base_url`` and ``_secrets`` (strings to redact) and implement
    :meth:`_turn`.
    """

    model: str
    _base_url: str | None
    _secrets: list[str]
    budget_guard: Any = None
    """Set by :class:`~agent.providers.budget.BudgetedProvider`: ``(usage so far this turn) ->
    reason or None``, consulted before every API call."""

    def _check_budget(self, usage: dict[str, int]) -> None:
        """Raise :class:`ProviderBudgetExceeded` when the run's budget is spent."""
        if self.budget_guard is not None:
            why = self.budget_guard(usage)
            if why:
                raise ProviderBudgetExceeded(why)

    def _init_conversation(self) -> None:
        self._messages: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []  # tool results owed to the model
        self._notes: list[str] = []  # told to the model at the start of the next turn
        self._task: tuple[str, str, str] | None = None
        self._workspace: Workspace | None = None
        self._seed: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self._base_url!r})"

    def reset(self) -> None:
        """Forget the conversation (the next :meth:`propose` starts with the initial prompt)."""
        self._messages, self._pending, self._notes, self._task = [], [], [], None
        self._workspace = None
        self._seed = None

    def seed(self, ptx: str) -> None:
        """The loop's best valid candidate: the default base of the next turn's variant edits
        (``patch`` with ``base: best`` too)."""
        self._seed = ptx
        if self._workspace is not None:
            self._workspace.best = ptx

    def workspace(self, ctx: ProposalContext) -> Workspace:
        """The conversation's current candidate (Triton's PTX until the model changes it)."""
        if self._workspace is None:
            self._workspace = Workspace(ctx.reference_ptx)
            if self._seed is not None:
                self._workspace.best = self._seed
        return self._workspace

    def _tool(self, ctx: ProposalContext, name: str, args: Any, tools: ToolExecutor) -> str:
        """Answer one non-submit tool call: ``patch`` / ``show`` here, the others through
        ``tools`` with ``ptx`` filled from (or recorded as) the current candidate.

        Raises:
            ValueError: unknown tool, invalid arguments, or a patch that does not apply (the
                message names the field or edit); the caller reports it to the model.
        """
        ws = self.workspace(ctx)
        if name == "patch":
            a = validate_tool_args("patch", args)
            return ws.patch(a["edits"], a.get("base", "current"))
        if name == "show":
            a = validate_tool_args("show", args)
            return show_text(ctx, ws, a["what"], a.get("start_line", 1),
                             a.get("max_lines", 400))
        if name not in LOOP_TOOLS:
            raise ValueError(f"unknown tool {name!r}; use "
                             f"{', '.join((*LOOP_TOOLS, *LOCAL_TOOLS))} or submit")
        return tools(name, validate_tool_args(name, ws.use(args)))

    def _submit_args(self, ctx: ProposalContext, args: Any) -> Any:
        """``submit`` arguments with ``ptx`` filled from the current candidate when omitted."""
        return self.workspace(ctx).use(args)

    def _candidates(self, ctx: ProposalContext, args: Any, origin: str) -> SubmitVariants:
        """The candidates of one ``submit`` (``variants`` included, at most ``ctx.max_variants``).

        Raises:
            ValueError: invalid arguments (the message names the field or variant).
        """
        return candidates_from_submit(args, self.workspace(ctx), origin,
                                      defaults=submit_defaults(ctx),
                                      max_variants=ctx.max_variants)

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """Run one turn of the conversation and return the submitted candidate or an error.

        Args:
            ctx: the task; a different kernel/arch/config than the previous call resets the
                conversation.
            feedback: the outcome of the previous candidate (None on the first call).
            tools: runs ``compile`` / ``verify`` / ``evaluate``.

        Returns:
            ``Proposal(candidate=...)`` after a valid ``submit``; otherwise ``Proposal(error=...,
            error_kind=...)``: ``bad_output`` (no submit, malformed or invalid submit arguments,
            truncated output, tool budget spent), ``refused``, ``rate_limited`` (with
            ``retry_after``), ``timeout`` or ``auth``. ``events`` hold the turn's transcript (no
            API key) and ``usage`` its token counts.

        Raises:
            Only what ``tools`` raises other than ``ValueError`` (ailower bugs).
        """
        events: list[dict[str, Any]] = []
        usage: dict[str, int] = {}
        try:
            sub = self._turn(ctx, feedback, tools, events, usage)
        except ProviderError as exc:
            events.append({"type": "error", "kind": exc.kind, "message": str(exc)})
            return Proposal.from_error(exc, events=redact(events, self._secrets), usage=usage)
        return Proposal(candidate=sub.candidates[0],
                        variants=sub.candidates if len(sub.candidates) > 1 or sub.described
                        else [], plan=sub.plan, events=redact(events, self._secrets),
                        usage=usage)

    @abstractmethod
    def _turn(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor,
              events: list[dict[str, Any]], usage: dict[str, int]) -> SubmitVariants:
        """One turn on the wire, ending at a submit (its candidates); raises
        :class:`ProviderError` subclasses for provider failures."""
