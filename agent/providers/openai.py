"""The OpenAI provider: any model behind the Chat Completions API, through the official SDK.

Chat Completions with function tools is the wire format most OpenAI-compatible servers speak
(vLLM, SGLang, llama.cpp, Ollama, LM Studio, gateways), so ``base_url`` is first-class.

One :meth:`OpenAIProvider.propose` call is one *turn*, exactly as for
:class:`~agent.providers.anthropic.AnthropicProvider`: tool calls to ``compile`` / ``verify`` /
``evaluate`` are run through the loop's :data:`ToolExecutor` and answered with ``tool`` messages
until the model calls ``submit``, ends its turn without one (``bad_output``) or spends
``ctx.max_tool_calls`` calls. Calls left unanswered at the end of a turn are answered at the
start of the next one, so every ``tool_call_id`` gets exactly one ``tool`` message.

SDK exceptions are mapped once, in :func:`_map_error` (``from None``); ``message.refusal`` and
``finish_reason == "content_filter"`` become ``refused``; malformed JSON in function arguments is
reported back to the model (``compile``/``verify``/``evaluate``) or ends the turn as
``bad_output`` (``submit``).
"""

from __future__ import annotations

import json
import os
from typing import Any

import openai

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
from agent.tools import SubmitVariants, openai_tools

__all__ = ["OpenAIProvider"]

_RUN_TOOLS = ("compile", "verify", "evaluate", "patch", "show")
_SUBMITTED = "Submitted. Its outcome follows in the next message."
_SKIPPED_AFTER_SUBMIT = "ERROR: not run: submit ends the turn."
_EXTRA_SUBMIT = "ERROR: ignored: only one submit per turn is used."


def _map_error(exc: openai.OpenAIError) -> ProviderError:
    """Map an ``openai`` SDK exception to ailower's provider error (the one boundary).

    Args:
        exc: what the SDK raised (after its own retries).

    Returns:
        :class:`ProviderRateLimited` (429; ``retry_after`` from ``retry-after-ms`` /
        ``retry-after``), :class:`ProviderTimeout` (timeouts and connection failures),
        :class:`ProviderAuthError` (401, 403) or :class:`ProviderBadOutput` (any other HTTP
        status, or a response the SDK could not read).
    """
    if isinstance(exc, openai.APITimeoutError):
        return ProviderTimeout("openai: the request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return ProviderTimeout(f"openai: connection error ({clip(str(exc), 200)})")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = clip(str(exc.message))
        if isinstance(exc, openai.RateLimitError) or status == 429:
            ra = retry_after_seconds(exc.response.headers)
            hint = f"; retry after {ra:g} s" if ra is not None else ""
            return ProviderRateLimited(f"openai: rate limited (HTTP {status}){hint}: {detail}", ra)
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)) \
                or status in (401, 403):
            return ProviderAuthError(f"openai: credentials rejected (HTTP {status}): {detail}")
        return ProviderBadOutput(f"openai: HTTP {status}: {detail}")
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderBadOutput(f"openai: malformed response: {clip(str(exc))}")
    return ProviderBadOutput(f"openai: {type(exc).__name__}: {clip(str(exc))}")


class OpenAIProvider(ToolChatProvider):
    """A model behind the OpenAI Chat Completions API (OpenAI or a compatible server).

    Args:
        model: the model id.
        api_key: the API key; default ``OPENAI_API_KEY``. Local servers that ignore keys still
            need a non-empty value.
        base_url: API root including ``/v1`` (default: ``OPENAI_BASE_URL``, else OpenAI's).
        timeout: seconds per HTTP request.
        max_retries: the SDK's own retries (429, 5xx, timeouts) before an error is reported.
        max_turns: API calls allowed per :meth:`propose` (default ``ctx.max_tool_calls + 4``).
        max_tokens: sent as ``max_completion_tokens`` when given (else the server's default).

    Raises:
        ProviderAuthError: no key given and ``OPENAI_API_KEY`` unset.
        ValueError: a non-positive ``timeout`` / ``max_turns`` / ``max_tokens`` or negative
            ``max_retries``.
    """

    name = "openai"

    def __init__(self, model: str, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 600.0, max_retries: int = 2, max_turns: int | None = None,
                 max_tokens: int | None = None):
        check_client_args(model, timeout, max_retries, max_turns, max_tokens)
        key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if not key:
            raise ProviderAuthError(
                "openai: no API key; pass api_key or set the OPENAI_API_KEY environment variable "
                "(any non-empty value for a local server that does not check keys)")
        self.model = model
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self._secrets = [key]
        self._client = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout,
                                     max_retries=max_retries)
        self._base_url = safe_url(str(self._client.base_url))
        self._init_conversation()
        self._n_ids = 0

    # ---- the turn -------------------------------------------------------------------------------
    def _start(self, ctx: ProposalContext, feedback: str | None,
               events: list[dict[str, Any]]) -> None:
        """Append the turn's messages (owed tool results, then notes and prompt or feedback)."""
        task = (ctx.spec.name, ctx.arch, ctx.config.key())
        if self._task != task:
            self.reset()
            self._task = task
        texts: list[str] = []
        if not self._messages:
            system = system_prompt(ctx)
            events.append({"type": "system", "text": system})
            self._messages.append({"role": "system", "content": system})
            texts.append(initial_prompt(ctx))
        texts += self._notes
        if feedback:
            texts.append(feedback_prompt(feedback))
        if not texts and not self._pending:
            texts.append("Continue with the task; end the turn with exactly one submit call.")
        self._notes = []
        for m in self._pending:
            events.append({"type": "tool_result", "id": m["tool_call_id"], "text": m["content"],
                           "deferred": True})
        self._messages += self._pending
        self._pending = []
        text = "\n\n".join(texts)
        if text:
            events.append({"type": "prompt", "text": text})
            last = self._messages[-1]
            if last["role"] == "user":
                # The previous turn died before the model answered: extend that message.
                last["content"] = f"{last['content']}\n\n{text}"
            else:
                self._messages.append({"role": "user", "content": text})

    def _turn(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor,
              events: list[dict[str, Any]], usage: dict[str, int]) -> SubmitVariants:
        self._start(ctx, feedback, events)
        calls = 0
        budget = ctx.max_tool_calls
        max_turns = self.max_turns or budget + 4
        for _ in range(max_turns):
            self._check_budget(usage)
            completion = self._create(ctx, events)
            finish, text, calls_raw = self._read(completion, events, usage)
            uses = [self._use(c) for c in calls_raw]
            assistant: dict[str, Any] = {"role": "assistant", "content": text or None}
            if uses:
                assistant["tool_calls"] = [
                    {"id": u["id"], "type": "function",
                     "function": {"name": u["name"], "arguments": u["raw"]}} for u in uses]
            if text or uses:
                self._messages.append(assistant)
            if finish == "length":
                self._owe(uses, "ERROR: not run: your output was cut off at the token limit.")
                self._notes.append(NO_SUBMIT_NOTE + " Your output was cut off at the token limit; "
                                   "be more concise.")
                raise ProviderBadOutput("openai: output truncated (finish_reason=length)")
            if not uses:
                self._notes.append(NO_SUBMIT_NOTE)
                raise ProviderBadOutput("openai: the model ended its turn without calling submit")
            submits = [u for u in uses if u["name"] == "submit"]
            if submits:
                return self._submit(ctx, uses, submits[0], events)
            results: list[dict[str, Any]] = []
            for u in uses:
                if calls >= budget:
                    results.append(_tool_msg(u["id"], f"ERROR: not run: the budget of {budget} "
                                                      "tool calls per turn is spent."))
                    continue
                calls += 1
                results.append(self._run_tool(ctx, u, tools, events))
            if calls >= budget:
                self._pending = results
                self._notes.append(f"Your previous turn used all {budget} tool calls without "
                                   "submitting. " + NO_SUBMIT_NOTE)
                raise ProviderBadOutput(f"openai: the tool-call budget ({budget}) was spent "
                                        "without a submit")
            self._messages += results
        self._notes.append(NO_SUBMIT_NOTE)
        raise ProviderBadOutput(f"openai: no submit after {max_turns} API calls")

    def _use(self, call: Any) -> dict[str, Any]:
        """A tool call as ``{id, name, raw, args, error}``; ``error`` says why args are unusable."""
        self._n_ids += 1
        cid = getattr(call, "id", None)
        if not isinstance(cid, str) or not cid:
            cid = f"call_ailower_{self._n_ids}"
        fn = getattr(call, "function", None)
        name = getattr(fn, "name", None)
        raw = getattr(fn, "arguments", None)
        use: dict[str, Any] = {"id": cid, "name": name if isinstance(name, str) else "",
                               "raw": raw if isinstance(raw, str) else json.dumps(raw),
                               "args": None, "error": None}
        if getattr(call, "type", "function") != "function" or fn is None:
            use["error"] = "only function tool calls are supported"
        elif isinstance(raw, dict):  # some compatible servers send decoded arguments
            use["args"] = raw
        elif not isinstance(raw, str):
            use["error"] = f"arguments must be a JSON string, got {type(raw).__name__}"
        else:
            try:
                use["args"] = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError as exc:
                use["error"] = f"arguments are not valid JSON ({exc.msg} at char {exc.pos})"
        return use

    def _owe(self, uses: list[dict[str, Any]], text: str) -> None:
        self._pending += [_tool_msg(u["id"], text) for u in uses]

    def _submit(self, ctx: ProposalContext, uses: list[dict[str, Any]], sub: dict[str, Any],
                events: list[dict[str, Any]]) -> SubmitVariants:
        events.append({"type": "tool_call", "id": sub["id"], "name": "submit",
                       "args": sub["args"] if sub["error"] is None else sub["raw"]})
        others = [u for u in uses if u is not sub]
        try:
            if sub["error"] is not None:
                raise ValueError(f"submit: {sub['error']}")
            made = self._candidates(ctx, sub["args"], f"openai:{self.model}")
            cand = made.candidates[0]
        except ValueError as exc:
            self._pending.append(_tool_msg(sub["id"], f"ERROR: invalid submit: {exc}"))
            self._owe(others, _SKIPPED_AFTER_SUBMIT)
            self._notes.append(NO_SUBMIT_NOTE)
            raise ProviderBadOutput(f"openai: invalid submit arguments: {exc}") from None
        self._pending.append(_tool_msg(sub["id"], _SUBMITTED))
        for u in others:
            self._pending.append(_tool_msg(u["id"], _EXTRA_SUBMIT if u["name"] == "submit"
                                           else _SKIPPED_AFTER_SUBMIT))
        notes = sub["args"].get("notes") if isinstance(sub["args"], dict) else None
        events.append({"type": "submit", "id": sub["id"], "digest": cand.digest(),
                       "threads": cand.threads, "meta": cand.meta, "notes": notes,
                       **({"plan": made.plan} if made.plan else {}),
                       **({"variants": made.described} if made.described else {})})
        return made

    def _run_tool(self, ctx: ProposalContext, use: dict[str, Any], tools: ToolExecutor,
                  events: list[dict[str, Any]]) -> dict[str, Any]:
        name = use["name"]
        events.append({"type": "tool_call", "id": use["id"], "name": name,
                       "args": use["args"] if use["error"] is None else use["raw"]})
        err = True
        if use["error"] is not None:
            text = f"ERROR: {name}: {use['error']}"
        elif name not in _RUN_TOOLS:
            text = f"ERROR: unknown tool {name!r}; use {', '.join(_RUN_TOOLS)} or submit."
        else:
            try:
                text, err = self._tool(ctx, name, use["args"], tools), False
            except ValueError as exc:
                text = f"ERROR: invalid arguments: {exc}"
        events.append({"type": "tool_result", "id": use["id"], "name": name, "text": text,
                       "is_error": err})
        return _tool_msg(use["id"], text)

    # ---- the wire -------------------------------------------------------------------------------
    def _create(self, ctx: ProposalContext, events: list[dict[str, Any]]) -> Any:
        """One Chat Completions call; SDK errors leave here mapped (``from None``)."""
        tool_defs = openai_tools(ctx.gpu_available, ctx.max_variants)
        extra: dict[str, Any] = {}
        if self.max_tokens is not None:
            extra["max_completion_tokens"] = self.max_tokens
        events.append({"type": "request", "provider": self.name, "model": self.model,
                       "base_url": self._base_url, "messages": len(self._messages),
                       "tools": [t["function"]["name"] for t in tool_defs], **extra})
        try:
            return self._client.chat.completions.create(model=self.model, messages=self._messages,
                                                        tools=tool_defs, **extra)
        except openai.OpenAIError as exc:
            raise _map_error(exc) from None
        except ValueError as exc:  # e.g. a 200 whose body is not JSON (json.JSONDecodeError)
            raise ProviderBadOutput(f"openai: unreadable response: "
                                    f"{type(exc).__name__}: {clip(str(exc))}") from None

    def _read(self, completion: Any, events: list[dict[str, Any]],
              usage: dict[str, int]) -> tuple[str | None, str, list[Any]]:
        """The finish reason, text and tool calls of the first choice.

        Raises:
            ProviderRefused: ``message.refusal`` is set or ``finish_reason == "content_filter"``.
            ProviderBadOutput: the response has no readable choice.
        """
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise ProviderBadOutput("openai: malformed response (no choices)")
        choice = choices[0]
        msg = getattr(choice, "message", None)
        if msg is None:
            raise ProviderBadOutput("openai: malformed response (choice without a message)")
        finish = getattr(choice, "finish_reason", None)
        text = getattr(msg, "content", None)
        text = text if isinstance(text, str) else ""
        refusal = getattr(msg, "refusal", None)
        calls = getattr(msg, "tool_calls", None) or []
        if not isinstance(calls, list):
            raise ProviderBadOutput("openai: malformed response (tool_calls is not a list)")
        u = getattr(completion, "usage", None)
        counts = {}
        for field, key in (("prompt_tokens", "input_tokens"),
                           ("completion_tokens", "output_tokens")):
            v = getattr(u, field, None) if u is not None else None
            if isinstance(v, int) and not isinstance(v, bool):
                counts[key] = v
                usage[key] = usage.get(key, 0) + v
        events.append({"type": "response", "id": getattr(completion, "id", None),
                       "finish_reason": finish, "text": text, "refusal": refusal,
                       "tool_calls": [getattr(getattr(c, "function", None), "name", None)
                                      for c in calls]})
        if counts:
            events.append({"type": "usage", **counts})
        if refusal:
            raise ProviderRefused(f"openai: the model refused: {clip(str(refusal))}")
        if finish == "content_filter":
            raise ProviderRefused("openai: the reply was withheld by the content filter")
        return finish, text, calls


def _tool_msg(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}
