"""Connection guard for uvicorn: request-header and body deadlines, and a cap on open connections.

uvicorn (0.54, h11 protocol) arms a timer only *after* a response (``timeout_keep_alive``): a
connection that never finishes its request headers stays open forever, and the bytes of a request
body may trickle in without end. With one file descriptor per connection, 1,100 such half-open
connections (slowloris) used up a default ``RLIMIT_NOFILE`` of 1,024 and every other client's
``connect`` failed. ``limit_concurrency`` does not help: it answers 503 to the bystander, not to
the idle attacker.

:func:`guarded_h11` returns a subclass of uvicorn's ``H11Protocol`` that

* closes a connection whose request headers are not complete ``header_timeout_s`` after the
  connection opened (or after its previous response ended) — an absolute deadline, so sending a
  byte now and then does not extend it (Apache ``mod_reqtimeout``'s ``header=`` without
  ``MinRate``; nginx ``client_header_timeout``);
* closes a connection whose request body is not complete ``body_timeout_s`` after its headers
  (nginx ``client_body_timeout``, but absolute);
* aborts a connection whose response has not drained for ``send_timeout_s`` (the transport's
  write buffer stayed above its high-water mark that long: the client stopped reading; nginx
  ``send_timeout``). A request being served is never evicted and has no header/body deadline, so
  without this a client that sends ``GET /leaderboard`` (4.8 MB) and never reads held the
  connection, and the unsent response in server memory, for as long as it liked;
* holds at most ``max_connections`` open connections: a new connection beyond the cap evicts the
  connection that has waited longest for its request headers (or sits idle between requests); if
  every open connection is serving a request, the new one is closed at once. Eviction, not refusal,
  so that a flood of idle connections cannot lock out a client that sends its request promptly.

:func:`raise_nofile_limit` lifts the soft ``RLIMIT_NOFILE`` to the hard limit, and
:func:`connection_cap` derives the cap from it, keeping ``FD_RESERVE`` descriptors for the
database, the job runners' pipes and log files.

:class:`GuardedServer` separates the kernel's listen queue (long: a prompt client's SYN is queued,
not dropped, while an attacker's reconnects churn) from the connections asyncio accepts per loop
tick (:data:`ACCEPT_BURST`, counted in the descriptor budget).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import socket
from collections import OrderedDict

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["guarded_h11", "raise_nofile_limit", "connection_cap", "GuardedServer", "FD_RESERVE",
           "ACCEPT_BURST"]

log = logging.getLogger("ailower.server.netguard")

FD_RESERVE = 256
"""Descriptors kept free of client connections: SQLite (a file and its ``-wal``/``-shm`` per pooled
connection), the job slots' runner pipes and log files, /v1/verify children, the listening socket."""

ACCEPT_BURST = 128
"""uvicorn's ``backlog``: asyncio accepts up to this many connections per loop tick (and listens with
it); :class:`GuardedServer` then re-listens with the real, longer queue."""


def raise_nofile_limit(target: int = 65536) -> tuple[int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to ``min(hard, target)`` (never lower it).

    Returns the ``(soft, hard)`` limits in force afterwards.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = target if hard == resource.RLIM_INFINITY else min(hard, target)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    return soft, hard


def connection_cap(configured: int | None, backlog: int) -> int:
    """The open-connection cap: ``configured`` (when set) but never more than the soft
    ``RLIMIT_NOFILE`` minus :data:`FD_RESERVE` minus ``backlog`` (at least 16): asyncio accepts
    up to ``backlog`` connections in one loop tick before any of them reaches the cap check.

    Raises:
        ValueError: ``configured`` is below 1.
    """
    if configured is not None and configured < 1:
        raise ValueError(f"max_connections must be >= 1, got {configured}")
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = max(16, soft - FD_RESERVE - backlog)
    return min(configured, room) if configured is not None else room


def guarded_h11(header_timeout_s: float, body_timeout_s: float,
                max_connections: int, send_timeout_s: float | None = None) -> type[H11Protocol]:
    """A uvicorn ``http`` protocol class (pass as ``uvicorn.run(..., http=cls)``) with the header,
    body and send deadlines (seconds; ``send_timeout_s`` None: ``body_timeout_s``) and the
    connection cap of the module docstring.

    Raises:
        ValueError: a timeout is not positive or ``max_connections`` is below 1.
    """
    send_timeout_s = body_timeout_s if send_timeout_s is None else send_timeout_s
    if header_timeout_s <= 0 or body_timeout_s <= 0 or send_timeout_s <= 0:
        raise ValueError(f"header/body/send timeouts must be > 0 s, got {header_timeout_s}, "
                         f"{body_timeout_s}, {send_timeout_s}")
    if max_connections < 1:
        raise ValueError(f"max_connections must be >= 1, got {max_connections}")

    waiting: OrderedDict[GuardedH11Protocol, None] = OrderedDict()  # oldest wait first

    class GuardedH11Protocol(H11Protocol):
        """uvicorn's h11 protocol with request deadlines and an eviction cap (see
        :mod:`server.netguard`)."""

        _deadline: asyncio.TimerHandle | None = None
        _body_armed: bool = False
        _stall: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_headers()
            if len(self.connections) > max_connections:
                self._make_room()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._unstall()
            waiting.pop(self, None)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            state = self.conn.their_state
            if state is h11.SEND_BODY:
                waiting.pop(self, None)
                if not self._body_armed:
                    self._body_armed = True
                    self._arm(body_timeout_s, self._body_late)
            elif self._in_request():
                waiting.pop(self, None)
                self._disarm()  # the request is in; the app's own limits take over
            # otherwise: still reading headers; the deadline set when waiting began stands

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._stall is None:
                self._stall = self.loop.call_later(send_timeout_s, self._send_late)

        def resume_writing(self) -> None:
            self._unstall()
            super().resume_writing()

        def _unstall(self) -> None:
            if self._stall is not None:
                self._stall.cancel()
                self._stall = None

        def _send_late(self) -> None:
            self._stall = None
            log.info("aborting %s: response not drained within %g s", self.client, send_timeout_s)
            waiting.pop(self, None)
            self.transport.abort()  # close() would wait for the buffer to drain

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and not self._in_request():
                self._await_headers()  # the next request's headers get a fresh deadline

        # --- state -----------------------------------------------------------------------
        def _in_request(self) -> bool:
            """A request's headers have arrived and its response is not complete."""
            return self.cycle is not None and not self.cycle.response_complete

        def _await_headers(self) -> None:
            self._body_armed = False
            waiting.pop(self, None)
            waiting[self] = None
            self._arm(header_timeout_s, self._headers_late)

        def _arm(self, delay: float, fn) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(delay, fn)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _headers_late(self) -> None:
            self._deadline = None
            if self in waiting and not self._in_request():
                self._close()

        def _body_late(self) -> None:
            self._deadline = None
            if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
                log.info("closing %s: request body not complete within %g s", self.client,
                         body_timeout_s)
                self._close()  # connection_lost tells the app the client is gone

        def _close(self) -> None:
            waiting.pop(self, None)
            self.transport.close()

        def _make_room(self) -> None:
            """Over the cap: close the connection that has waited longest for request headers
            (this one, which has waited least, only when no other waits)."""
            victim = next(iter(waiting), self)
            if victim._in_request():  # defensive: never close a request being served
                waiting.pop(victim, None)
                victim = self
            victim._close()

    return GuardedH11Protocol


class GuardedServer(uvicorn.Server):
    """uvicorn's server whose listening sockets get a listen queue of ``listen_backlog`` after
    start-up (asyncio uses one number for both the queue and its per-tick accept burst)."""

    def __init__(self, config: uvicorn.Config, listen_backlog: int):
        super().__init__(config)
        self.listen_backlog = listen_backlog

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start as uvicorn does, then lengthen each listening socket's queue."""
        await super().startup(sockets)
        for srv in getattr(self, "servers", []):
            for ts in srv.sockets:
                # listen() on a duplicate descriptor changes the shared socket's queue
                with contextlib.closing(socket.socket(fileno=os.dup(ts.fileno()))) as dup:
                    dup.listen(self.listen_backlog)
