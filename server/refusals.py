"""Refused submissions count against a key's rate limit (issue 17, item 3).

The per-key limit ``rate_per_minute`` counted the jobs a key created in the last 60 s, so a
request refused with a 4xx (a spec that fails the policy or a bound, a malformed body, a conflict)
cost nothing against it and a key could make the server check specs without end. Every refused
``POST /v1/lowerings`` of an authenticated key is recorded here, and the rate check counts
``jobs created + submissions refused`` in the rolling minute (:func:`window`). A 429 is not
recorded (a client waiting on ``Retry-After`` is not kept out longer), nor a 401 (no key).

The log lives in the API process (a bounded deque per key): with several API processes in front
of one database each counts its own refusals, so a key gets up to ``processes x rate_per_minute``
refused attempts a minute.
"""

from __future__ import annotations

import threading
from collections import deque
from datetime import datetime, timedelta

from server.db import utcnow

__all__ = ["RefusalLog", "REFUSALS", "WINDOW"]

WINDOW = timedelta(seconds=60)
"""The rolling window of ``rate_per_minute``."""


class RefusalLog:
    """Times (aware UTC) of refused submissions per key id, kept for :data:`WINDOW`.

    Args:
        cap: refusals kept per key (a key past its rate is refused with a 429 before more are
            recorded, so this only bounds memory).
    """

    def __init__(self, cap: int = 10_000):
        self._cap = cap
        self._log: dict[str, deque[datetime]] = {}
        self._lock = threading.Lock()

    def record(self, key_id: str, at: datetime | None = None) -> None:
        """Note one refused submission of ``key_id`` (now, or at ``at``)."""
        with self._lock:
            self._log.setdefault(key_id, deque(maxlen=self._cap)).append(at or utcnow())

    def since(self, key_id: str, start: datetime) -> list[datetime]:
        """The key's refusal times after ``start``, oldest first (older ones are dropped)."""
        with self._lock:
            q = self._log.get(key_id)
            if q is None:
                return []
            while q and q[0] <= start:
                q.popleft()
            if not q:
                del self._log[key_id]
                return []
            return list(q)


REFUSALS = RefusalLog()
"""The API process's log."""
