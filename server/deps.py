"""Request dependencies as ``Annotated`` aliases: ``SessionDep``, ``ApiKeyDep``, ``BodyLimitDep``.

Tests may swap them via ``app.dependency_overrides`` (``style.md`` section 5).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from server.db import ApiKey
from server.errors import ApiError
from server.keys import KEY_RE, AuthBackoff, AuthLimiter, KeyCheckBusy, authenticate, recently_verified

__all__ = ["SessionDep", "ApiKeyDep", "get_session", "get_api_key", "auth_gate", "check_body_size",
           "bearer", "client_address"]

bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer ail_<id>_<secret>")


def get_session(request: Request) -> Iterator[Session]:
    """A database session for the request (closed afterwards)."""
    with request.app.state.sessionmaker() as s:
        yield s


SessionDep = Annotated[Session, Depends(get_session)]


def client_address(request: Request) -> str | None:
    """The peer address of the connection (uvicorn runs with ``proxy_headers=False``, so a client
    cannot choose it with ``X-Forwarded-For``)."""
    return request.client.host if request.client else None


TARPIT_S = 1.0
"""Seconds a request refused by the failure backoff waits before its 429: a client that retries at
once then sends one request per second per connection, and the wait holds no thread."""


async def auth_gate(request: Request,
                    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
    """Refuse, on the event loop and before any database or argon2 work, a request whose client
    address or key id is backing off (429 ``auth-backoff`` after :data:`TARPIT_S`); wait (at most
    :data:`TARPIT_S`) while one of them has a verification running; a key that verified recently
    passes at once.

    Raises:
        ApiError: 429 ``auth-backoff`` with ``Retry-After``.
    """
    limiter: AuthLimiter | None = getattr(request.app.state, "auth_limiter", None)
    if limiter is None or creds is None:
        return
    m = KEY_RE.match(creds.credentials)
    buckets = AuthLimiter.buckets(client_address(request), m.group(1) if m else "-")
    if m and recently_verified(creds.credentials):
        return
    loop = asyncio.get_running_loop()
    t_end = loop.time() + TARPIT_S
    while limiter.busy(buckets) and loop.time() < t_end:  # wait in line, holding no thread
        await asyncio.sleep(0.05)
    wait = limiter.wait_s(buckets) or (1.0 if limiter.busy(buckets) else 0.0)
    if wait > 0:
        await asyncio.sleep(min(TARPIT_S, wait))
        raise ApiError(429, "auth-backoff", "too many failed authentications from this address "
                       f"or for this key id; retry in {math.ceil(wait)} s",
                       loc=["header", "Authorization"],
                       headers={"Retry-After": str(max(1, math.ceil(wait - TARPIT_S)))})


def get_api_key(request: Request, session: SessionDep, _gate: Annotated[None, Depends(auth_gate)],
                creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> ApiKey:
    """The caller's live API key.

    Raises:
        ApiError: 401 ``unauthorized`` when the header is missing, not a Bearer key, or the key is
            unknown, revoked or wrong; 429 ``auth-backoff`` (``Retry-After``) after too many failed
            authentications from this address or for this key id (:class:`server.keys.AuthLimiter`).
    """
    if creds is None or creds.scheme.lower() != "bearer":
        raise ApiError(401, "unauthorized", "missing 'Authorization: Bearer <API key>' header",
                       loc=["header", "Authorization"], headers={"WWW-Authenticate": "Bearer"})
    try:
        row = authenticate(session, creds.credentials, client=client_address(request),
                           limiter=getattr(request.app.state, "auth_limiter", None))
    except AuthBackoff as exc:
        raise ApiError(429, "auth-backoff", str(exc), loc=["header", "Authorization"],
                       headers={"Retry-After": str(exc.retry_after)}) from None
    except KeyCheckBusy as exc:
        raise ApiError(503, "auth-busy", f"{exc}; retry shortly", loc=["header", "Authorization"],
                       headers={"Retry-After": "2"}) from None
    if row is None:
        raise ApiError(401, "unauthorized", "unknown, revoked or malformed API key",
                       loc=["header", "Authorization"], headers={"WWW-Authenticate": "Bearer"})
    return row


ApiKeyDep = Annotated[ApiKey, Depends(get_api_key)]


async def check_body_size(request: Request, key: ApiKeyDep) -> ApiKey:
    """Enforce the key's ``max_body_bytes`` on the request body (413 ``body-too-large``).

    The server-wide cap (``max_body_bytes``) is enforced earlier by the body-limit middleware,
    before authentication, so this reads at most that many bytes.
    """
    body = await request.body()
    if len(body) > key.max_body_bytes:
        raise ApiError(413, "body-too-large", f"request body is {len(body)} bytes; this key's "
                       f"limit is {key.max_body_bytes}", loc=["body"])
    return key


BodyLimitedKeyDep = Annotated[ApiKey, Depends(check_body_size)]
