"""The provider interface: what the agent loop asks of a model (or of the offline Triton provider).

Each iteration the loop calls :meth:`Provider.propose` once. A provider may call tools through the
:class:`ToolExecutor` the loop hands it (``compile`` = ptxas, ``verify`` = the PTX verifier,
``evaluate`` = the GPU harness) any number of times within ``max_tool_calls``, and returns a
:class:`Proposal`: a :class:`~harness.candidate.Candidate` (what the model submitted) or an error.
The loop then assembles, verifies and evaluates the candidate itself and passes the outcome back
as ``feedback`` on the next call: a provider keeps its own conversation history.

Errors raised by an SDK are mapped once, at the provider boundary, to :class:`ProviderError`
subclasses (``from None``): the loop records them and goes on, or stops on a fatal one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from harness.candidate import Candidate
from kernels.abi import KernelABI
from kernels.spec import Config, KernelSpec

__all__ = [
    "ProposalContext",
    "Proposal",
    "ToolExecutor",
    "Provider",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderTimeout",
    "ProviderRefused",
    "ProviderBadOutput",
    "ProviderAuthError",
    "ProviderBudgetExceeded",
    "TOOL_NAMES",
    "retry_after_seconds",
    "redact",
    "safe_url",
    "clip",
]

TOOL_NAMES = ("compile", "verify", "evaluate", "submit", "patch", "show")
"""Tools a model may call; ``submit`` ends the turn with a candidate; ``patch`` and ``show`` are
answered by the provider itself (:mod:`agent.workspace`)."""

ToolExecutor = Callable[[str, dict[str, Any]], str]
"""``(tool_name, arguments) -> result text``. Arguments follow the JSON schemas in
:mod:`agent.tools`; the result is the concise rendering of the tool's structured report. Raises
nothing for bad candidates (those are reported in the text); raises ``ValueError`` for arguments
that do not match the schema."""


class ProposalContext(BaseModel):
    """Everything a provider needs to write a candidate for one kernel on one target.

    Attributes:
        spec: the kernel spec (shapes, dtypes, sizes, grid, autotune space).
        arch: target, ``sm_89`` | ``sm_90a`` | ``sm_100a``.
        config: the reference configuration the contract is written for (the autotuned baseline
            when known, else the first config); its constexpr values are fixed.
        constexprs: constexpr name -> value for ``config``.
        abi: the exact entry signature and launch contract the candidate must keep.
        triton_source: the kernel's Python source.
        ttgir: Triton's TTGIR for ``config``.
        llir: Triton's LLVM IR for ``config`` ('' when not given).
        reference_ptx: Triton's PTX for ``config`` (a valid starting point).
        reference_cubin: Triton's cubin for ``config`` (for SASS; empty when not given).
        configs: every config of the autotune space (the offline provider walks them).
        gpu_available: whether ``evaluate`` can run on a GPU.
        max_tool_calls: tool calls allowed per :meth:`Provider.propose`.
        max_variants: ``K``, candidates one turn may hand in (``submit`` with ``variants``).
        knowledge: the knowledge-base section of the prompt (:mod:`agent.knowledge`), '' for
            none.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    spec: KernelSpec
    arch: str
    config: Config
    constexprs: dict[str, Any]  # kernels.spec.MetaValue: also strings and tuples
    abi: KernelABI
    triton_source: str
    ttgir: str
    reference_ptx: str
    llir: str = ""
    reference_cubin: bytes = b""
    configs: tuple[Config, ...] = ()
    gpu_available: bool = False
    max_tool_calls: int = 16
    max_variants: int = 1
    knowledge: str = ""


class Proposal(BaseModel):
    """A provider's answer for one iteration.

    Attributes:
        candidate: the submitted candidate (the first variant of a multi-variant turn), or None
            when the provider produced none.
        variants: every candidate of a multi-variant turn, in order ([] for one candidate).
        plan: the turn's one-line plan, when the model gave one.
        error: why there is no candidate (or a warning), already mapped to ailower's terms.
        error_kind: ``rate_limited`` | ``timeout`` | ``refused`` | ``bad_output`` | ``auth`` |
            ``exhausted`` (no more proposals: the loop stops) | ``budget`` (a token or cost
            budget is spent: the loop stops, with ``error`` as the reason) | None.
        events: transcript events (dicts with ``type``: ``request``, ``response``, ``tool_call``,
            ``tool_result``, ...) for the JSONL transcript; never contain API keys.
        usage: token counts, ``{"input_tokens": n, "output_tokens": n}`` where known.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    candidate: Candidate | None = None
    variants: list[Candidate] = Field(default_factory=list)
    plan: str | None = None
    error: str | None = None
    error_kind: Literal["rate_limited", "timeout", "refused", "bad_output", "auth", "exhausted",
                        "budget"] | None = None
    events: list[dict[str, Any]] = Field(default_factory=list)
    usage: dict[str, int] = Field(default_factory=dict)
    retry_after: float | None = None
    """Seconds the server asked to wait before the next request (``rate_limited`` only), or None."""

    @classmethod
    def from_error(cls, exc: "ProviderError", *, events: list[dict[str, Any]] | None = None,
                   usage: dict[str, int] | None = None) -> "Proposal":
        """A candidate-less proposal carrying a mapped provider error.

        Args:
            exc: the mapped error; its ``kind`` becomes :attr:`error_kind` and, for
                :class:`ProviderRateLimited`, its ``retry_after`` is copied.
            events: transcript events gathered so far (kept).
            usage: token counts gathered so far.

        Returns:
            ``Proposal(candidate=None, error=str(exc), error_kind=exc.kind, ...)``.
        """
        return cls(error=str(exc), error_kind=exc.kind, events=list(events or []),
                   usage=dict(usage or {}), retry_after=getattr(exc, "retry_after", None))


class ProviderError(Exception):
    """Base of the provider errors (mapped from SDK exceptions at the boundary).

    Attributes:
        kind: the :attr:`Proposal.error_kind` this maps to.
        fatal: the loop should stop (e.g. bad credentials).
    """

    kind = "bad_output"
    fatal = False

    def __init__(self, message: str):
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (str(self),))


class ProviderRateLimited(ProviderError):
    """HTTP 429 after the SDK's own retries; ``retry_after`` seconds when the server said."""

    kind = "rate_limited"

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after

    def __reduce__(self):
        return (type(self), (str(self), self.retry_after))


class ProviderTimeout(ProviderError):
    """The request timed out (after the SDK's retries)."""

    kind = "timeout"


class ProviderRefused(ProviderError):
    """The model refused the task (Anthropic ``stop_reason == "refusal"``, OpenAI ``refusal``)."""

    kind = "refused"


class ProviderBadOutput(ProviderError):
    """The reply could not be used: no submit call, invalid tool arguments, truncated output."""

    kind = "bad_output"


class ProviderBudgetExceeded(ProviderError):
    """A token or cost budget is spent (:mod:`agent.providers.budget`): the loop stops."""

    kind = "budget"
    fatal = True


class ProviderAuthError(ProviderError):
    """Missing or rejected credentials (HTTP 401/403): fatal."""

    kind = "auth"
    fatal = True


class Provider(ABC):
    """A source of candidates. Subclasses set :attr:`name` and implement :meth:`propose`."""

    name: str = "provider"

    @abstractmethod
    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """Produce the next candidate.

        Args:
            ctx: the task (same object every iteration of one run).
            feedback: None on the first call; afterwards the precise outcome of the previous
                candidate (ptxas diagnostics, verifier findings, evaluation results).
            tools: executes ``compile`` / ``verify`` / ``evaluate`` for the model.

        Returns:
            A :class:`Proposal`. Provider errors are returned in it (``error_kind``), not raised;
            only ailower bugs propagate.
        """

    def seed(self, ptx: str) -> None:
        """The loop's best valid candidate after a turn (the base of the next turn's variant
        edits). The default keeps nothing."""
        return None


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a rate-limited server asked for, from response headers.

    Reads ``retry-after-ms`` (milliseconds), then ``retry-after`` (seconds, or an HTTP date).

    Args:
        headers: a case-insensitive mapping with ``.get`` (httpx headers), or None.

    Returns:
        Seconds (>= 0), or None when absent or unparsable. Never raises.
    """
    if headers is None:
        return None
    import email.utils
    import math
    import time

    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            v = float(ms) / 1000.0
            if math.isfinite(v):
                return max(v, 0.0)
        sec = headers.get("retry-after")
        if sec is None:
            return None
        try:
            v = float(sec)
            return max(v, 0.0) if math.isfinite(v) else None
        except ValueError:
            date = email.utils.parsedate_tz(sec)
            if date is None:
                return None
            return max(float(email.utils.mktime_tz(date) - time.time()), 0.0)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None


def redact(obj: Any, secrets: "list[str] | tuple[str, ...]") -> Any:
    """A copy of ``obj`` (nested dicts, lists, tuples, strings) with every secret string replaced.

    Used on transcript events before they leave a provider, so an API key echoed back in an error
    body never reaches a transcript.

    Args:
        obj: JSON-like data.
        secrets: strings to replace with ``***`` (empty strings and strings shorter than 8
            characters are ignored, so that short words are not mangled).

    Returns:
        The redacted copy (other leaf types are returned as is). Never raises.
    """
    keys = [s for s in secrets if isinstance(s, str) and len(s) >= 8]
    if not keys:
        return obj

    def walk(o: Any) -> Any:
        if isinstance(o, str):
            for k in keys:
                if k in o:
                    o = o.replace(k, "***")
            return o
        if isinstance(o, dict):
            return {walk(k): walk(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return type(o)(walk(v) for v in o)
        return o

    return walk(obj)


def safe_url(url: str | None) -> str | None:
    """``url`` without user info, query or fragment, for transcripts (never logs credentials)."""
    if not url:
        return url
    try:
        parts = urlsplit(str(url))
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "<unparsable url>"


def clip(text: str, n: int = 500) -> str:
    """``text`` cut to ``n`` characters (with ``...``) for messages and transcripts."""
    return text if len(text) <= n else text[: n - 3] + "..."
