"""The Anthropic provider: Claude through the official ``anthropic`` SDK (Messages API, tool use).

One :meth:`AnthropicProvider.propose` call is one *turn*: the provider sends the new user content
(the initial prompt, or the outcome of the previous candidate), runs every ``compile`` /
``verify`` / ``evaluate`` call the model makes through the loop's :data:`ToolExecutor` and sends
the results back as ``tool_result`` blocks, until the model calls ``submit`` (a candidate), ends
its turn without one (``bad_output``), or spends ``ctx.max_tool_calls`` tool calls.

The conversation is kept across turns. Tool calls that were not answered inside a turn (the
``submit`` call itself, calls after it, calls after the budget ran out) are answered at the
start of the next turn, before the feedback text, so the history always satisfies the API's
tool_use / tool_result pairing.

SDK exceptions are mapped once, in :func:`_map_error`, to :mod:`agent.providers.base` errors
(``from None``); :meth:`~AnthropicProvider.propose` turns those into ``Proposal(error=...)`` and
never raises for provider errors.
"""

from __future__ import annotations

import os
from typing import Any

import anthropic

from agent.prompts import NO_SUBMIT_NOTE, feedback_prompt, initial_prompt, system_prompt
from agent.providers.base import (
    clip,
    safe_url,
    ProposalContext,
    ProviderAuthError,
    ProviderBadOutput,
    ProviderError,
    ProviderRateLimited,
    ProviderRefused,
    ProviderTimeout,
    ToolExecutor,
    retry_after_seconds,
)
from agent.providers._chat import ToolChatProvider, check_client_args
from agent.tools import SubmitVariants, anthropic_tools

__all__ = ["AnthropicProvider"]

_RUN_TOOLS = ("compile", "verify", "evaluate", "patch", "show")
_SUBMITTED = "Submitted. Its outcome follows."
_SKIPPED_AFTER_SUBMIT = "Not run: submit ends the turn."
_EXTRA_SUBMIT = "Ignored: only one submit per turn is used."


def _map_error(exc: anthropic.AnthropicError) -> ProviderError:
    """Map an ``anthropic`` SDK exception to ailower's provider error (the one boundary).

    Args:
        exc: what the SDK raised (after its own retries).

    Returns:
        :class:`ProviderRateLimited` (429, and 529 "overloaded"; ``retry_after`` from the
        ``retry-after-ms`` / ``retry-after`` headers), :class:`ProviderTimeout` (timeouts and
        connection failures), :class:`ProviderAuthError` (401, 403, missing credentials) or
        :class:`ProviderBadOutput` (any other HTTP status, or a response the SDK could not read).
    """
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderTimeout("anthropic: the request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderTimeout(f"anthropic: connection error ({clip(str(exc), 200)})")
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        detail = clip(str(getattr(exc, "api_message", None) or exc.message))
        if isinstance(exc, anthropic.RateLimitError) or status in (429, 529):
            ra = retry_after_seconds(exc.response.headers)
            what = "rate limited" if status == 429 else "overloaded"
            hint = f"; retry after {ra:g} s" if ra is not None else ""
            return ProviderRateLimited(f"anthropic: {what} (HTTP {status}){hint}: {detail}", ra)
        if isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError)) \
                or status in (401, 403):
            return ProviderAuthError(f"anthropic: credentials rejected (HTTP {status}): {detail}")
        return ProviderBadOutput(f"anthropic: HTTP {status}: {detail}")
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderBadOutput(f"anthropic: malformed response: {clip(str(exc))}")
    if isinstance(exc, getattr(anthropic, "CredentialsError", ())):
        return ProviderAuthError(f"anthropic: credentials: {clip(str(exc))}")
    return ProviderBadOutput(f"anthropic: {type(exc).__name__}: {clip(str(exc))}")


class AnthropicProvider(ToolChatProvider):
    """Claude via the Anthropic Messages API with tool use.

    Args:
        model: the model id (``claude-...``).
        api_key: the API key; default ``ANTHROPIC_API_KEY`` (or ``ANTHROPIC_AUTH_TOKEN``, sent
            as a bearer token).
        base_url: API root without ``/v1`` (default: ``ANTHROPIC_BASE_URL``, else Anthropic's).
        max_tokens: output tokens per API call.
        timeout: seconds per HTTP request.
        max_retries: the SDK's own retries (429, 5xx, timeouts) before an error is reported.
        max_turns: API calls allowed per :meth:`propose` (default ``ctx.max_tool_calls + 4``).
        prompt_cache: mark the system prompt and the newest message as cache breakpoints
            (``cache_control: ephemeral``) so the growing conversation is read from the cache.

    Raises:
        ProviderAuthError: no key given and none in the environment.
        ValueError: a non-positive ``max_tokens`` / ``timeout`` / ``max_turns`` or negative
            ``max_retries``.
    """

    name = "anthropic"

    def __init__(self, model: str, api_key: str | None = None, base_url: str | None = None,
                 max_tokens: int = 16384, timeout: float = 600.0, max_retries: int = 2,
                 max_turns: int | None = None, prompt_cache: bool = True):
        check_client_args(model, timeout, max_retries, max_turns, max_tokens)
        key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        token = None if key else (os.environ.get("ANTHROPIC_AUTH_TOKEN") or None)
        if not key and not token:
            raise ProviderAuthError(
                "anthropic: no API key; pass api_key or set the ANTHROPIC_API_KEY environment "
                "variable")
        self.model = model
        self.max_tokens = max_tokens
        self.max_turns = max_turns
        self.prompt_cache = prompt_cache
        self._secrets = [s for s in (key, token) if s]
        creds: dict[str, Any] = {"api_key": key} if key else {"auth_token": token}
        self._client = anthropic.Anthropic(**creds, base_url=base_url, timeout=timeout,
                                           max_retries=max_retries)
        self._base_url = safe_url(str(self._client.base_url))
        self._init_conversation()

    # ---- the turn -------------------------------------------------------------------------------
    def _start(self, ctx: ProposalContext, feedback: str | None,
               events: list[dict[str, Any]]) -> None:
        """Append the turn's user content (owed tool results, notes, prompt or feedback)."""
        task = (ctx.spec.name, ctx.arch, ctx.config.key())
        if self._task != task:
            self.reset()
            self._task = task
        texts: list[str] = []
        if not self._messages:
            system = system_prompt(ctx)
            events.append({"type": "system", "text": system})
            texts.append(initial_prompt(ctx))
        texts += self._notes
        if feedback:
            texts.append(feedback_prompt(feedback))
        if not texts and not self._pending:
            texts.append("Continue with the task; end the turn with exactly one submit call.")
        self._notes = []
        text = "\n\n".join(texts)
        for r in self._pending:
            events.append({"type": "tool_result", "id": r["tool_use_id"], "text": r["content"],
                           "is_error": r.get("is_error", False), "deferred": True})
        if text:
            events.append({"type": "prompt", "text": text})
        blocks: list[dict[str, Any]] = list(self._pending)
        self._pending = []
        if text:
            blocks.append({"type": "text", "text": text})
        if self._messages and self._messages[-1]["role"] == "user":
            # The previous turn died before the model answered: extend that message.
            self._messages[-1]["content"].extend(blocks)
        else:
            self._messages.append({"role": "user", "content": blocks})

    def _turn(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor,
              events: list[dict[str, Any]], usage: dict[str, int]) -> SubmitVariants:
        self._start(ctx, feedback, events)
        calls = 0
        budget = ctx.max_tool_calls
        max_turns = self.max_turns or budget + 4
        for _ in range(max_turns):
            self._check_budget(usage)
            msg = self._create(ctx, events)
            blocks, stop, text = self._read(msg, events, usage)
            if stop == "refusal":
                raise ProviderRefused("anthropic: the model refused"
                                      + (f": {clip(text)}" if text else ""))
            if blocks:
                self._messages.append({"role": "assistant", "content": blocks})
            uses = [b for b in blocks if b["type"] == "tool_use"]
            if stop == "pause_turn" and not uses:
                continue
            if stop == "max_tokens":
                self._owe(uses, "Not run: your output was cut off at max_tokens.", True)
                self._notes.append(NO_SUBMIT_NOTE + " Your output was cut off at the token limit; "
                                   "be more concise.")
                raise ProviderBadOutput(
                    f"anthropic: output truncated at max_tokens={self.max_tokens}")
            if not uses:
                self._notes.append(NO_SUBMIT_NOTE)
                raise ProviderBadOutput(
                    "anthropic: the model ended its turn without calling submit")
            submits = [u for u in uses if u["name"] == "submit"]
            if submits:
                return self._submit(ctx, uses, submits[0], events)
            results: list[dict[str, Any]] = []
            for u in uses:
                if calls >= budget:
                    results.append(_result(u["id"], f"Not run: the budget of {budget} tool calls "
                                                    "per turn is spent.", True))
                    continue
                calls += 1
                results.append(self._run_tool(ctx, u, tools, events))
            if calls >= budget:
                self._pending = results
                self._notes.append(f"Your previous turn used all {budget} tool calls without "
                                   "submitting. " + NO_SUBMIT_NOTE)
                raise ProviderBadOutput(f"anthropic: the tool-call budget ({budget}) was spent "
                                        "without a submit")
            self._messages.append({"role": "user", "content": results})
        self._notes.append(NO_SUBMIT_NOTE)
        raise ProviderBadOutput(f"anthropic: no submit after {max_turns} API calls")

    def _owe(self, uses: list[dict[str, Any]], text: str, is_error: bool) -> None:
        self._pending += [_result(u["id"], text, is_error) for u in uses]

    def _submit(self, ctx: ProposalContext, uses: list[dict[str, Any]], sub: dict[str, Any],
                events: list[dict[str, Any]]) -> SubmitVariants:
        events.append({"type": "tool_call", "id": sub["id"], "name": "submit",
                       "args": sub["input"]})
        others = [u for u in uses if u is not sub]
        try:
            made = self._candidates(ctx, sub["input"], f"anthropic:{self.model}")
            cand = made.candidates[0]
        except ValueError as exc:
            self._pending.append(_result(sub["id"], f"Invalid submit: {exc}", True))
            self._owe(others, _SKIPPED_AFTER_SUBMIT, True)
            self._notes.append(NO_SUBMIT_NOTE)
            raise ProviderBadOutput(f"anthropic: invalid submit arguments: {exc}") from None
        self._pending.append(_result(sub["id"], _SUBMITTED, False))
        for u in others:
            self._pending.append(_result(u["id"], _EXTRA_SUBMIT if u["name"] == "submit"
                                         else _SKIPPED_AFTER_SUBMIT, True))
        notes = sub["input"].get("notes") if isinstance(sub["input"], dict) else None
        events.append({"type": "submit", "id": sub["id"], "digest": cand.digest(),
                       "threads": cand.threads, "meta": cand.meta, "notes": notes,
                       **({"plan": made.plan} if made.plan else {}),
                       **({"variants": made.described} if made.described else {})})
        return made

    def _run_tool(self, ctx: ProposalContext, use: dict[str, Any], tools: ToolExecutor,
                  events: list[dict[str, Any]]) -> dict[str, Any]:
        name, args = use["name"], use["input"]
        events.append({"type": "tool_call", "id": use["id"], "name": name, "args": args})
        if name not in _RUN_TOOLS:
            text, err = (f"Unknown tool {name!r}; use {', '.join(_RUN_TOOLS)} or submit.",
                         True)
        else:
            try:
                text, err = self._tool(ctx, name, args, tools), False
            except ValueError as exc:
                text, err = f"Invalid arguments: {exc}", True
        events.append({"type": "tool_result", "id": use["id"], "name": name, "text": text,
                       "is_error": err})
        return _result(use["id"], text, err)

    # ---- the wire -------------------------------------------------------------------------------
    def _create(self, ctx: ProposalContext, events: list[dict[str, Any]]) -> Any:
        """One Messages API call; SDK errors leave here mapped (``from None``)."""
        system: list[dict[str, Any]] = [{"type": "text", "text": system_prompt(ctx)}]
        messages = self._messages
        if self.prompt_cache:
            system[0]["cache_control"] = {"type": "ephemeral"}
            last = self._messages[-1]
            if last["role"] == "user" and last["content"] \
                    and last["content"][-1].get("type") in ("text", "tool_result"):
                content = [dict(b) for b in last["content"]]
                content[-1]["cache_control"] = {"type": "ephemeral"}
                messages = [*self._messages[:-1], {"role": "user", "content": content}]
        tool_defs = anthropic_tools(ctx.gpu_available, ctx.max_variants)
        events.append({"type": "request", "provider": self.name, "model": self.model,
                       "base_url": self._base_url, "messages": len(messages),
                       "tools": [t["name"] for t in tool_defs], "max_tokens": self.max_tokens})
        try:
            return self._client.messages.create(model=self.model, max_tokens=self.max_tokens,
                                                system=system, messages=messages, tools=tool_defs)
        except anthropic.AnthropicError as exc:
            raise _map_error(exc) from None
        except ValueError as exc:  # e.g. a 200 whose body is not JSON (json.JSONDecodeError)
            raise ProviderBadOutput(f"anthropic: unreadable response: "
                                    f"{type(exc).__name__}: {clip(str(exc))}") from None

    def _read(self, msg: Any, events: list[dict[str, Any]],
              usage: dict[str, int]) -> tuple[list[dict[str, Any]], str | None, str]:
        """Turn a response into message-param blocks, the stop reason and its text.

        Raises:
            ProviderBadOutput: the response is not a readable message.
        """
        content = getattr(msg, "content", None)
        if not isinstance(content, list):
            raise ProviderBadOutput("anthropic: malformed response (no content list)")
        blocks: list[dict[str, Any]] = []
        texts: list[str] = []
        try:
            for b in content:
                kind = getattr(b, "type", None)
                if kind == "text":
                    if b.text:
                        blocks.append({"type": "text", "text": b.text})
                        texts.append(b.text)
                elif kind == "tool_use":
                    if not isinstance(b.id, str) or not isinstance(b.name, str):
                        raise ProviderBadOutput("anthropic: malformed tool_use block")
                    blocks.append({"type": "tool_use", "id": b.id, "name": b.name,
                                   "input": b.input})
                elif kind == "thinking":
                    blocks.append({"type": "thinking", "thinking": b.thinking,
                                   "signature": b.signature})
                elif kind == "redacted_thinking":
                    blocks.append({"type": "redacted_thinking", "data": b.data})
            stop = getattr(msg, "stop_reason", None)
            u = getattr(msg, "usage", None)
            counts = {}
            for field, key in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                               ("cache_read_input_tokens", "cache_read_input_tokens"),
                               ("cache_creation_input_tokens", "cache_creation_input_tokens")):
                v = getattr(u, field, None) if u is not None else None
                if isinstance(v, int) and not isinstance(v, bool):
                    counts[key] = v
                    usage[key] = usage.get(key, 0) + v
        except AttributeError as exc:
            raise ProviderBadOutput(f"anthropic: malformed content block ({exc})") from None
        text = "\n".join(texts)
        events.append({"type": "response", "id": getattr(msg, "id", None), "stop_reason": stop,
                       "text": text,
                       "tool_calls": [b["name"] for b in blocks if b["type"] == "tool_use"]})
        if counts:
            events.append({"type": "usage", **counts})
        return blocks, stop, text


def _result(tool_use_id: str, text: str, is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
    if is_error:
        block["is_error"] = True
    return block
