"""``GET /leaderboard`` (the self-contained HTML page) and ``GET /v1/leaderboard`` (JSON).

Both are public, like ``/v1/kernels``: the leaderboard holds campaign results (kernel, arch,
provider/model, times, verifier verdicts), never sources, PTX or API keys, and a browser must be
able to open the page without a bearer token. Built from the campaign cells in the service's
database (:mod:`campaign.leaderboard`).

Public routes must be cheap (issue 17): the page inlines plotly (4.8 MB even for an empty
database), and rendering it per request let 8 fetchers move a bystander from 5 ms to 410 ms. So:

* a response is rendered once per change of the campaigns: :func:`fingerprint` (one aggregate
  query over ``campaigns`` and ``campaign_cells``) keys a small in-process cache, and concurrent
  misses share one rendering;
* each cached response carries a strong ``ETag`` (SHA-256 of the body); ``If-None-Match`` with
  it gets ``304`` (RFC 9110 section 13.1.2) and ``Cache-Control: no-cache`` makes browsers ask;
* the gzip form is made once with the body and sent to clients that accept it
  (``Content-Encoding: gzip``, ``Vary: Accept-Encoding``);
* requests are rate-limited per client address (a token bucket of ``leaderboard_burst`` requests
  refilled at ``leaderboard_rate_per_s``; 429 ``rate-limited`` with ``Retry-After``, sent after a
  :data:`server.deps.TARPIT_S` wait that holds no thread), checked on the event loop before any
  database work.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from server.deps import TARPIT_S, client_address
from server.errors import ApiError, error_responses

__all__ = ["leaderboard_router", "fingerprint", "TokenBuckets"]

leaderboard_router = APIRouter(tags=["leaderboard"])

_ARCH = Query(pattern=r"^sm_(89|90a|100a)$", description="only this arch")
_CACHE_ENTRIES = 32


@dataclass(frozen=True)
class _Rendered:
    """One cached response: body, its gzip form, media type, ETag (quoted)."""

    body: bytes
    gz: bytes
    media_type: str
    etag: str


class TokenBuckets:
    """Per-key token buckets (process-local): ``burst`` tokens, refilled at ``rate_per_s``.

    At most ``max_keys`` buckets are kept; full ones are dropped first when over.
    """

    def __init__(self, rate_per_s: float, burst: int, max_keys: int = 50_000):
        self.rate, self.burst, self.max_keys = rate_per_s, float(burst), max_keys
        self._b: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """Take a token for ``key``: 0.0 if granted, else the seconds until one is free."""
        now = time.monotonic()
        with self._lock:
            tokens, t = self._b.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - t) * self.rate)
            if tokens >= 1.0:
                self._b[key] = (tokens - 1.0, now)
                if len(self._b) > self.max_keys:
                    self._prune(now)
                return 0.0
            self._b[key] = (tokens, now)
            return (1.0 - tokens) / self.rate

    def _prune(self, now: float) -> None:
        full = [k for k, (tok, t) in self._b.items()
                if tok + (now - t) * self.rate >= self.burst]
        for k in full or list(self._b)[: len(self._b) // 2]:
            del self._b[k]


def fingerprint(store: Any) -> tuple:
    """A value that changes whenever the leaderboard's input may have: per cell status the count,
    largest id and latest ``finished_at``/``claimed_at``, plus the campaigns' count and largest id.

    ``store`` is a :class:`campaign.store.CampaignStore`.
    """
    from sqlalchemy import func, select

    from campaign.store import CampaignRow, CellRow

    with store.Session() as s:
        camps = tuple(s.execute(select(func.count(CampaignRow.id), func.max(CampaignRow.id))).one())
        cells = tuple(tuple(r) for r in s.execute(
            select(CellRow.status, func.count(CellRow.id), func.max(CellRow.id),
                   func.max(CellRow.finished_at), func.max(CellRow.claimed_at),
                   func.sum(CellRow.attempts))
            .group_by(CellRow.status).order_by(CellRow.status)))
    return camps, cells


def _store(request: Request) -> Any:
    from campaign.store import CampaignStore

    store = getattr(request.app.state, "campaign_store", None)
    if store is None:
        store = CampaignStore(request.app.state.settings.database_url)
        request.app.state.campaign_store = store
    return store


def _board(store: Any, campaign: str | None, arch: str | None) -> Any:
    from campaign.leaderboard import LeaderboardError, build_leaderboard

    try:
        return build_leaderboard(store, campaign=campaign, archs=[arch] if arch else None)
    except LeaderboardError as exc:
        raise ApiError(404, "not-found", str(exc), loc=["query", "campaign"]) from None


def _render(kind: str, store: Any, campaign: str | None, arch: str | None) -> _Rendered:
    board = _board(store, campaign, arch)
    if kind == "html":
        from campaign.html import render_html

        body, media = render_html(board).encode(), "text/html; charset=utf-8"
    else:
        import json

        body = json.dumps(board.model_dump(mode="json"), ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode()
        media = "application/json"
    return _Rendered(body, gzip.compress(body, 6, mtime=0), media,
                     '"' + hashlib.sha256(body).hexdigest()[:32] + '"')


class _Cache:
    """Rendered responses keyed by (kind, campaign, arch), each valid for one fingerprint."""

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple, tuple[tuple, _Rendered]] = OrderedDict()
        self.locks: dict[tuple, threading.Lock] = {}
        self.guard = threading.Lock()

    def get(self, key: tuple, store: Any, campaign: str | None, arch: str | None) -> _Rendered:
        fp = fingerprint(store)
        hit = self.entries.get(key)
        if hit is not None and hit[0] == fp:
            return hit[1]
        with self.guard:
            lock = self.locks.setdefault(key, threading.Lock())
        with lock:  # single flight: concurrent misses wait for one rendering
            hit = self.entries.get(key)
            if hit is not None and hit[0] == fp:
                return hit[1]
            out = _render(key[0], store, campaign, arch)
            with self.guard:
                self.entries[key] = (fp, out)
                self.entries.move_to_end(key)
                while len(self.entries) > _CACHE_ENTRIES:
                    old, _ = self.entries.popitem(last=False)
                    self.locks.pop(old, None)
            return out


def _limits(request: Request) -> tuple[_Cache, TokenBuckets]:
    st = request.app.state
    if getattr(st, "leaderboard_cache", None) is None:
        ss = st.server_settings
        st.leaderboard_cache = _Cache()
        st.leaderboard_buckets = TokenBuckets(ss.leaderboard_rate_per_s, ss.leaderboard_burst)
    return st.leaderboard_cache, st.leaderboard_buckets


async def _serve(kind: str, request: Request, campaign: str | None, arch: str | None) -> Response:
    cache, buckets = _limits(request)
    wait = buckets.take(client_address(request) or "-")
    if wait > 0:
        await asyncio.sleep(min(TARPIT_S, wait))  # a client retrying at once slows to 1/s
        raise ApiError(429, "rate-limited", "too many leaderboard requests from this address; "
                       f"retry in {math.ceil(wait)} s", headers={"Retry-After": str(math.ceil(wait))})
    store = _store(request)
    out = await run_in_threadpool(cache.get, (kind, campaign, arch), store, campaign, arch)
    headers = {"ETag": out.etag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
    inm = request.headers.get("if-none-match", "")
    if inm.strip() == "*" or out.etag in [t.strip().removeprefix("W/") for t in inm.split(",")]:
        return Response(status_code=304, headers=headers)
    if "gzip" in request.headers.get("accept-encoding", "").lower():
        return Response(out.gz, media_type=out.media_type,
                        headers={**headers, "Content-Encoding": "gzip"})
    return Response(out.body, media_type=out.media_type, headers=headers)


@leaderboard_router.get("/v1/leaderboard", responses=error_responses(404, 422, 429),
                        summary="The leaderboard (JSON)")
async def leaderboard_json(request: Request,
                           campaign: Annotated[str | None, Query(max_length=200)] = None,
                           arch: Annotated[str | None, _ARCH] = None) -> Response:
    """Per kernel x arch: autotuned Triton vs the best verified candidate, the summary rows
    (geometric-mean speedup, win/tie/loss per provider/model and arch) and every cell.
    Cached per change of the campaigns; ``ETag``/``If-None-Match`` (304), gzip, rate-limited per
    client address (429)."""
    return await _serve("json", request, campaign, arch)


@leaderboard_router.get("/leaderboard", response_class=HTMLResponse,
                        responses=error_responses(404, 422, 429), summary="The leaderboard page")
async def leaderboard_html(request: Request,
                           campaign: Annotated[str | None, Query(max_length=200)] = None,
                           arch: Annotated[str | None, _ARCH] = None) -> Response:
    """One self-contained HTML page (tables sortable by a click, plotly plots inlined). Cached,
    ``ETag``/304, gzip and rate-limited as ``/v1/leaderboard``."""
    return await _serve("html", request, campaign, arch)
