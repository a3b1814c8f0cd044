"""API keys: creation, listing, revocation and authentication.

A key reads ``ail_<key_id>_<secret>``: ``key_id`` (12 hex digits) is public and indexes the row;
only the argon2id hash of the whole key is stored (argon2-cffi's ``PasswordHasher`` defaults,
RFC 9106 recommendation 2). The plain key is shown once, at creation.

Verification costs an argon2 hash (~tens of ms, 64 MiB); a process-local cache remembers for
``CACHE_S`` seconds which exact keys verified and for ``NEGATIVE_CACHE_S`` which failed (keyed by
their SHA-256), at most ``MAX_CONCURRENT_VERIFY`` verifications run at once (a caller waits at
most ``VERIFY_WAIT_S`` for a slot, then gets 401), while revocation is read from the database on
every request, so a revoked key stops working at once. Concurrent requests with the same key share
one verification (single flight).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.db import ApiKey, utcnow
from server.settings import ServerSettings

__all__ = ["KeyCheckBusy", "KeyLimits", "create_key", "list_keys", "revoke_key", "authenticate",
           "KEY_RE"]

KEY_RE = re.compile(r"^ail_([0-9a-f]{12})_([A-Za-z0-9_-]{32,64})$")
CACHE_S = 60.0
NEGATIVE_CACHE_S = 300.0
MAX_CONCURRENT_VERIFY = 2
VERIFY_WAIT_S = 10.0
_hasher = PasswordHasher()
_verified: dict[str, tuple[str, float]] = {}
_rejected: dict[str, tuple[str, float]] = {}
_inflight: dict[str, threading.Event] = {}
_lock = threading.Lock()
# argon2id with the library defaults needs 64 MiB per verification (RFC 9106 recommendation 2):
# at most MAX_CONCURRENT_VERIFY run at once, so wrong secrets cannot grow the server's memory
_verify_slots = threading.BoundedSemaphore(MAX_CONCURRENT_VERIFY)


class KeyCheckBusy(RuntimeError):
    """Every argon2 verification slot stayed busy for ``VERIFY_WAIT_S`` (a flood of new keys)."""


@dataclass(frozen=True)
class KeyLimits:
    """A key's limits (see :class:`server.settings.ServerSettings` for the defaults)."""

    rate_per_minute: int
    max_concurrent: int
    max_body_bytes: int
    max_ptx_bytes: int
    max_source_bytes: int

    @classmethod
    def defaults(cls, s: ServerSettings) -> "KeyLimits":
        """The server's default limits."""
        return cls(s.default_rate_per_minute, s.default_max_concurrent, s.default_max_body_bytes,
                   s.default_max_ptx_bytes, s.default_max_source_bytes)


def create_key(session: Session, name: str, limits: KeyLimits) -> tuple[str, ApiKey]:
    """Create a key named ``name``; returns ``(plain key, row)``. The plain key is not stored.

    Raises:
        ValueError: ``name`` is empty or longer than 200 characters.
    """
    if not name or len(name) > 200:
        raise ValueError(f"key name must be 1-200 characters, got {len(name)}")
    key_id = secrets.token_hex(6)
    plain = f"ail_{key_id}_{secrets.token_urlsafe(32)}"
    row = ApiKey(key_id=key_id, name=name, hash=_hasher.hash(plain),
                 rate_per_minute=limits.rate_per_minute, max_concurrent=limits.max_concurrent,
                 max_body_bytes=limits.max_body_bytes, max_ptx_bytes=limits.max_ptx_bytes,
                 max_source_bytes=limits.max_source_bytes)
    session.add(row)
    session.commit()
    return plain, row


def list_keys(session: Session) -> list[ApiKey]:
    """Every key row (hashes included; callers must not print them), oldest first."""
    return list(session.scalars(select(ApiKey).order_by(ApiKey.id)))


def revoke_key(session: Session, key_id: str) -> ApiKey:
    """Revoke the key whose public id is ``key_id`` (idempotent).

    Raises:
        LookupError: no key has that id.
    """
    row = session.scalar(select(ApiKey).where(ApiKey.key_id == key_id))
    if row is None:
        raise LookupError(f"no API key with id {key_id!r}")
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        session.commit()
    return row


def authenticate(session: Session, presented: str) -> ApiKey | None:
    """The live key row matching ``presented`` (the full ``ail_...`` string), or None.

    None for a malformed, unknown, revoked or mismatching key; never raises for bad input.

    Raises:
        KeyCheckBusy: no verification slot freed up within ``VERIFY_WAIT_S``.
    """
    m = KEY_RE.match(presented)
    if m is None:
        return None
    row = session.scalar(select(ApiKey).where(ApiKey.key_id == m.group(1)))
    if row is None or row.revoked_at is not None:
        return None
    digest = hashlib.sha256(presented.encode()).hexdigest()
    now = time.monotonic()
    deadline = now + VERIFY_WAIT_S
    while True:
        with _lock:
            bad = _rejected.get(digest)
            hit = _verified.get(digest)
            if hit is not None and hit[0] == row.hash and now - hit[1] < CACHE_S:
                return row
            if bad is not None and bad[0] == row.hash and now - bad[1] < NEGATIVE_CACHE_S:
                return None  # this exact wrong key failed recently: no second argon2 run
            waiting = _inflight.get(digest)
            if waiting is None:
                mine = _inflight[digest] = threading.Event()
                break
        # the same key is being verified by another request: share its answer (single flight)
        if not waiting.wait(max(0.0, deadline - time.monotonic())):
            raise KeyCheckBusy("API key verification is saturated")
    try:
        if not _verify_slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise KeyCheckBusy(f"API key verification is saturated ({MAX_CONCURRENT_VERIFY} "
                               "running)")
        try:
            _hasher.verify(row.hash, presented)
            ok = True
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            ok = False
        finally:
            _verify_slots.release()
        with _lock:
            cache = _verified if ok else _rejected
            if len(cache) > 10_000:
                cache.clear()
            cache[digest] = (row.hash, time.monotonic())
        return row if ok else None
    finally:
        with _lock:
            _inflight.pop(digest, None)
        mine.set()
