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

Timing tells nothing about a key id: an unknown id is verified against a dummy argon2 hash made
with the same parameters, and a revoked key against its own hash, so known, unknown and revoked ids
cost one argon2 verification each (OWASP Authentication Cheat Sheet, "Authentication and Error
Messages"). Failed authentications are limited per client address and per presented key id by an
:class:`AuthLimiter` (at most one argon2 verification in flight per address and per key id, and an
exponential backoff after ``free`` failures in a window), so a flood of wrong secrets costs the
server at most one verification at a time per address, and other keys keep their slots. A key
whose exact secret verified in the last ``CACHE_S`` seconds passes without argon2 and without the
backoff, so a flood aimed at a key id does not lock out its holder while it is in use.
"""

from __future__ import annotations

import hashlib
import math
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

__all__ = ["KeyCheckBusy", "AuthBackoff", "AuthLimiter", "KeyLimits", "create_key", "list_keys",
           "revoke_key", "authenticate", "recently_verified", "dummy_key_hash", "KEY_RE"]

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


_dummy_hash: str | None = None


def dummy_key_hash() -> str:
    """An argon2 hash of a random secret with the same parameters as real keys' hashes."""
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = _hasher.hash("ail_000000000000_" + secrets.token_urlsafe(32))
    return _dummy_hash


class KeyCheckBusy(RuntimeError):
    """Every argon2 verification slot stayed busy for ``VERIFY_WAIT_S`` (a flood of new keys)."""


class AuthBackoff(RuntimeError):
    """Too many failed authentications from this client address or for this key id (or one of
    their verifications is still running): retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class AuthLimiter:
    """Per-client-address and per-key-id limits on failed authentications (process-local).

    A bucket (``"addr:<ip>"`` or ``"id:<key id>"``; the id as presented, known or not) records
    the times of its failures in the last ``window_s`` seconds. With ``n >= free`` of them, the
    bucket is closed for ``min(max_backoff_s, base_backoff_s * 2 ** (n - free))`` seconds after its
    latest failure. While one of a bucket's argon2 verifications runs, a second is refused at once
    (no thread waits on it). Buckets are dropped once their window has passed; at most
    ``max_buckets`` are kept (the oldest are dropped first).

    Args:
        free: failures per bucket and window before the backoff starts.
        window_s, base_backoff_s, max_backoff_s: seconds.
        max_buckets: memory bound.
    """

    def __init__(self, free: int = 5, window_s: float = 300.0, base_backoff_s: float = 1.0,
                 max_backoff_s: float = 60.0, max_buckets: int = 100_000):
        self.free, self.window_s = free, window_s
        self.base_backoff_s, self.max_backoff_s = base_backoff_s, max_backoff_s
        self.max_buckets = max_buckets
        self._fails: dict[str, list[float]] = {}
        self._busy: set[str] = set()
        self._lock = threading.Lock()

    @staticmethod
    def buckets(client: str | None, key_id: str) -> tuple[str, ...]:
        """The buckets a request from ``client`` for ``key_id`` counts against."""
        return ((f"addr:{client}",) if client else ()) + (f"id:{key_id}",)

    def _wait(self, bucket: str, now: float) -> float:
        ts = self._fails.get(bucket)
        if not ts:
            return 0.0
        while ts and now - ts[0] > self.window_s:
            ts.pop(0)
        if not ts:
            self._fails.pop(bucket, None)
            return 0.0
        if len(ts) < self.free:
            return 0.0
        back = min(self.max_backoff_s, self.base_backoff_s * 2.0 ** (len(ts) - self.free))
        return max(0.0, ts[-1] + back - now)

    def wait_s(self, buckets: tuple[str, ...]) -> float:
        """Seconds until every one of ``buckets`` accepts a verification again (0: now)."""
        now = time.monotonic()
        with self._lock:
            return max((self._wait(b, now) for b in buckets), default=0.0)

    def busy(self, buckets: tuple[str, ...]) -> bool:
        """One of ``buckets`` has a verification running."""
        with self._lock:
            return any(b in self._busy for b in buckets)

    def begin(self, buckets: tuple[str, ...]) -> None:
        """Reserve one verification for ``buckets``.

        Raises:
            AuthBackoff: a bucket is backing off or already has a verification running.
        """
        now = time.monotonic()
        with self._lock:
            for b in buckets:
                wait = self._wait(b, now)
                if wait > 0:
                    raise AuthBackoff(f"too many failed authentications ({b.split(':')[0]}); "
                                      f"retry in {math.ceil(wait)} s", math.ceil(wait))
                if b in self._busy:
                    raise AuthBackoff(f"an authentication for this {b.split(':')[0]} is being "
                                      "checked; retry in 1 s", 1)
            self._busy.update(buckets)

    def end(self, buckets: tuple[str, ...], ok: bool) -> None:
        """Release the verification of :meth:`begin`; count a failure unless ``ok``."""
        with self._lock:
            self._busy.difference_update(buckets)
            if not ok:
                self._record(buckets)

    def fail(self, buckets: tuple[str, ...]) -> None:
        """Count a failure that needed no verification (a malformed key, a cached rejection)."""
        with self._lock:
            self._record(buckets)

    def _record(self, buckets: tuple[str, ...]) -> None:
        now = time.monotonic()
        if len(self._fails) > self.max_buckets:
            for b in sorted(self._fails, key=lambda b: self._fails[b][-1] if self._fails[b]
                            else 0.0)[: len(self._fails) // 2]:
                del self._fails[b]
        for b in buckets:
            ts = self._fails.setdefault(b, [])
            ts.append(now)
            if len(ts) > self.free + 64:  # the backoff is capped long before this
                del ts[: len(ts) - self.free - 64]


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
    """Revoke the key whose public id is ``key_id`` (idempotent): requests with it get 401 from
    now on, its queued jobs are cancelled, its running jobs are stopped by their workers within
    about a second, and its open event streams close within a second (they re-read the key).

    Raises:
        LookupError: no key has that id.
    """
    row = session.scalar(select(ApiKey).where(ApiKey.key_id == key_id))
    if row is None:
        raise LookupError(f"no API key with id {key_id!r}")
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        session.commit()
    from server.jobs import cancel_key_jobs

    cancel_key_jobs(session, key_id)  # also on a repeated revoke: a job admitted in a race
    return row


def recently_verified(presented: str) -> bool:
    """``presented`` verified within ``CACHE_S`` seconds (its holder skips the failure backoff;
    whether it is still live is checked by :func:`authenticate`)."""
    hit = _verified.get(hashlib.sha256(presented.encode()).hexdigest())
    return hit is not None and time.monotonic() - hit[1] < CACHE_S


def authenticate(session: Session, presented: str, *, client: str | None = None,
                 limiter: AuthLimiter | None = None) -> ApiKey | None:
    """The live key row matching ``presented`` (the full ``ail_...`` string), or None.

    None for a malformed, unknown, revoked or mismatching key; never raises for bad input. An
    unknown or revoked id costs the same argon2 verification as a known one (a dummy hash).

    Args:
        client: the client's address (for ``limiter``'s per-address bucket).
        limiter: failure limits; None: none.

    Raises:
        KeyCheckBusy: no verification slot freed up within ``VERIFY_WAIT_S``.
        AuthBackoff: ``limiter`` refuses: too many failures from ``client`` or for this key id.
    """
    m = KEY_RE.match(presented)
    if m is None:
        if limiter is not None and client:
            limiter.fail((f"addr:{client}",))
        return None
    row = session.scalar(select(ApiKey).where(ApiKey.key_id == m.group(1)))
    live = row is not None and row.revoked_at is None
    target = row.hash if row is not None else dummy_key_hash()
    buckets = AuthLimiter.buckets(client, m.group(1))
    digest = hashlib.sha256(presented.encode()).hexdigest()
    now = time.monotonic()
    deadline = now + VERIFY_WAIT_S
    while True:
        with _lock:
            bad = _rejected.get(digest)
            hit = _verified.get(digest)
            if hit is not None and hit[0] == target and now - hit[1] < CACHE_S:
                return row if live else None
            if bad is not None and bad[0] == target and now - bad[1] < NEGATIVE_CACHE_S:
                if limiter is not None:
                    limiter.fail(buckets)
                return None  # this exact wrong key failed recently: no second argon2 run
            waiting = _inflight.get(digest)
            if waiting is None:
                if limiter is not None:
                    limiter.begin(buckets)  # raises AuthBackoff
                mine = _inflight[digest] = threading.Event()
                break
        # the same key is being verified by another request: share its answer (single flight)
        if not waiting.wait(max(0.0, deadline - time.monotonic())):
            raise KeyCheckBusy("API key verification is saturated")
    ok = False
    try:
        if not _verify_slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise KeyCheckBusy(f"API key verification is saturated ({MAX_CONCURRENT_VERIFY} "
                               "running)")
        try:
            _hasher.verify(target, presented)
            ok = row is not None
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            ok = False
        finally:
            _verify_slots.release()
        with _lock:
            cache = _verified if ok else _rejected
            if len(cache) > 10_000:
                cache.clear()
            cache[digest] = (target, time.monotonic())
        return row if ok and live else None
    finally:
        with _lock:
            _inflight.pop(digest, None)
        if limiter is not None:
            limiter.end(buckets, ok and live)
        mine.set()
