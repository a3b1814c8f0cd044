"""Token and cost budgets for paid providers.

:class:`BudgetedProvider` wraps any provider. It adds up the token usage every proposal reports
(``Proposal.usage``) and prices it with a per-model table (USD per million input / output tokens,
the ``AILOWER_PRICE_PER_MTOK`` setting). Once the tokens or the cost reach their cap it answers
``Proposal(error_kind="budget")`` with the reason (which cap, spent vs limit), and the loop stops
with ``stop_reason = "budget: ..."``. Chat providers also consult the budget before every API
call inside a turn (:meth:`agent.providers._chat.ToolChatProvider._check_budget`), so one long
turn cannot overrun it by more than one call.

Pricing is conservative: Anthropic's cache-read and cache-creation input tokens are priced at the
full input rate (the real rates are lower), so the spend shown is an upper bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from agent.providers.base import Proposal, ProposalContext, Provider, ProviderError, ToolExecutor

__all__ = ["Budget", "BudgetError", "BudgetedProvider", "price_for", "wrap_budget"]


class BudgetError(ProviderError):
    """The budget settings cannot be applied (a cost cap without a price for the model)."""

    fatal = True

_INPUT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def price_for(model: str, table: Mapping[str, tuple[float, float] | list[float]]
              ) -> tuple[float, float] | None:
    """``(usd_per_mtok_in, usd_per_mtok_out)`` for ``model``: an exact key, else the longest key
    ending in ``*`` that prefixes it (``"claude-sonnet-*"``); None when the table has neither."""
    if model in table:
        a, b = table[model]
        return float(a), float(b)
    best = max((k for k in table if k.endswith("*") and model.startswith(k[:-1])),
               key=len, default=None)
    if best is None:
        return None
    a, b = table[best]
    return float(a), float(b)


@dataclass(frozen=True)
class Budget:
    """Caps for one run.

    Attributes:
        max_tokens: total tokens (input + output, cache reads included); None: no cap.
        max_cost_usd: total spend in USD; None: no cap.
        price_in, price_out: USD per million input / output tokens (needed with ``max_cost_usd``).
    """

    max_tokens: int | None = None
    max_cost_usd: float | None = None
    price_in: float = 0.0
    price_out: float = 0.0

    def __post_init__(self) -> None:
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.max_cost_usd is not None and not (math.isfinite(self.max_cost_usd)
                                                  and self.max_cost_usd > 0):
            raise ValueError(f"max_cost_usd must be a positive number, got {self.max_cost_usd}")
        if self.price_in < 0 or self.price_out < 0:
            raise ValueError("prices must be >= 0 USD per million tokens")


class BudgetedProvider(Provider):
    """``inner`` under a :class:`Budget`.

    Attributes:
        tokens: tokens spent so far (all proposals).
        cost_usd: USD spent so far.
    """

    def __init__(self, inner: Provider, budget: Budget):
        self.inner, self.budget = inner, budget
        self.name = inner.name
        self.tokens = 0
        self.cost_usd = 0.0
        if hasattr(inner, "budget_guard"):
            inner.budget_guard = self.exceeded  # type: ignore[attr-defined]

    def _spend(self, usage: Mapping[str, int]) -> tuple[int, float]:
        tin = sum(int(usage.get(k, 0)) for k in _INPUT_KEYS)
        tout = int(usage.get("output_tokens", 0))
        return tin + tout, (tin * self.budget.price_in + tout * self.budget.price_out) / 1e6

    def exceeded(self, pending: Mapping[str, int] | None = None) -> str | None:
        """Why the budget is spent (counting ``pending`` usage of the turn in progress), or None."""
        t, c = self._spend(pending or {})
        tokens, cost = self.tokens + t, self.cost_usd + c
        b = self.budget
        if b.max_tokens is not None and tokens >= b.max_tokens:
            return f"token budget exceeded: {tokens} tokens used of {b.max_tokens}"
        if b.max_cost_usd is not None and cost >= b.max_cost_usd:
            return (f"cost budget exceeded: ${cost:.4f} spent of ${b.max_cost_usd:.4f} "
                    f"(at ${b.price_in:g}/${b.price_out:g} per million input/output tokens)")
        return None

    def propose(self, ctx: ProposalContext, feedback: str | None, tools: ToolExecutor) -> Proposal:
        """Delegate unless the budget is spent; then add the proposal's usage to the totals."""
        why = self.exceeded()
        if why is not None:
            return Proposal(error=why, error_kind="budget")
        prop = self.inner.propose(ctx, feedback, tools)
        t, c = self._spend(prop.usage or {})
        self.tokens += t
        self.cost_usd += c
        prop.events.append({"type": "budget", "tokens_total": self.tokens,
                            "usd_total": round(self.cost_usd, 6)})
        return prop


    def seed(self, ptx: str) -> None:
        """Forwarded to the wrapped provider."""
        self.inner.seed(ptx)


def wrap_budget(provider: Provider, settings: object, model: str | None = None) -> Provider:
    """``provider`` wrapped in the budget the settings ask for (``max_tokens_total``,
    ``max_cost_usd``, ``price_per_mtok``), or unchanged when they set no cap.

    Raises:
        BudgetError: a cost cap without a price for ``model`` in ``price_per_mtok``.
    """
    max_tokens = getattr(settings, "max_tokens_total", None)
    max_cost = getattr(settings, "max_cost_usd", None)
    if max_tokens is None and max_cost is None:
        return provider
    pin = pout = 0.0
    if max_cost is not None:
        price = price_for(model or "", getattr(settings, "price_per_mtok", {}) or {})
        if price is None:
            raise BudgetError(f"AILOWER_MAX_COST_USD is set but AILOWER_PRICE_PER_MTOK has no price "
                             f"for model {model!r} (give {{\"{model}\": [usd_in, usd_out]}} per "
                             "million tokens)")
        pin, pout = price
    return BudgetedProvider(provider, Budget(max_tokens=max_tokens, max_cost_usd=max_cost,
                                             price_in=pin, price_out=pout))
