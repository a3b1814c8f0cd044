"""Unauthenticated attacks on a server at 127.0.0.1 and a bystander's latency under them.

Every attack runs in threads for a bounded ``duration`` and stops by itself. Attackers connect
from another loopback address (``127.0.0.2``: Linux routes all of 127/8 to ``lo``), so per-address
limits see them apart from the bystander at ``127.0.0.1``.

``python -m tests.server.net_attacks`` prints the bystander latency table (idle and under each
attack) against a fresh server.
"""

from __future__ import annotations

import contextlib
import secrets
import selectors
import socket
import statistics
import threading
import time
from collections.abc import Iterator

import httpx

ATTACKER = "127.0.0.2"


def client(url: str, source: str = "127.0.0.1", **kw) -> httpx.Client:
    """An httpx client bound to the local address ``source``."""
    return httpx.Client(base_url=url, transport=httpx.HTTPTransport(local_address=source), **kw)


def bystander(url: str, n: int = 20, path: str = "/healthz", *, timeout: float = 5.0,
              pause_s: float = 0.05, headers: dict | None = None) -> list[float]:
    """``n`` GETs of ``path``, each on a new connection from 127.0.0.1; seconds each (a failed
    or non-2xx request counts as ``timeout``)."""
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        try:
            with client(url, timeout=timeout) as c:
                ok = c.get(path, headers=headers or {}).status_code < 300
        except httpx.HTTPError:
            ok = False
        out.append(time.monotonic() - t0 if ok else timeout)
        time.sleep(pause_s)
    return out


def p(xs: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``xs`` (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s) + 0.5) - 1))]


@contextlib.contextmanager
def running(target, *args) -> Iterator[threading.Event]:
    """Run ``target(stop_event, *args)`` in a thread for the ``with`` body; stop and join it."""
    stop = threading.Event()
    t = threading.Thread(target=target, args=(stop, *args), daemon=True)
    t.start()
    try:
        yield stop
    finally:
        stop.set()
        t.join(30)


def slowloris(stop: threading.Event, port: int, n: int, stats: dict | None = None,
              source: str = ATTACKER) -> None:
    """Hold ``n`` connections that send a request line and one header, then a header byte every
    second, never finishing; a connection the server closes is reopened at once."""
    sel = selectors.DefaultSelector()
    stats = stats if stats is not None else {}
    stats.update(opened=0, closed_by_server=0, failed=0)

    def open_one() -> None:
        s = socket.socket()
        s.setblocking(True)
        s.settimeout(2)
        try:
            s.bind((source, 0))
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-a: ")
        except OSError:
            stats["failed"] += 1
            s.close()
            return
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        stats["opened"] += 1

    try:
        while not stop.is_set() and len(sel.get_map()) < n:
            open_one()
        last_drip = time.monotonic()
        while not stop.is_set():
            for k, _ in sel.select(0.1):
                s = k.fileobj
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    s.close()
                    stats["closed_by_server"] += 1
            while not stop.is_set() and len(sel.get_map()) < n:
                open_one()
            if time.monotonic() - last_drip > 1.0:
                last_drip = time.monotonic()
                for k in list(sel.get_map().values()):
                    with contextlib.suppress(OSError):
                        k.fileobj.send(b"a")
    finally:
        for k in list(sel.get_map().values()):
            k.fileobj.close()
        sel.close()


def wrong_secret_flood(stop: threading.Event, url: str, key_id: str, threads: int = 8,
                       stats: dict | None = None, source: str = ATTACKER) -> None:
    """``threads`` loops sending ``Bearer ail_<key_id>_<random secret>`` (a new secret each time)."""
    stats = stats if stats is not None else {}
    lock = threading.Lock()

    def loop() -> None:
        with client(url, source, timeout=15) as c:
            while not stop.is_set():
                key = f"ail_{key_id}_{secrets.token_urlsafe(32)}"
                try:
                    code = c.get("/v1/lowerings", headers={"Authorization": f"Bearer {key}"}
                                 ).status_code
                except httpx.HTTPError:
                    code = 0
                with lock:
                    stats[code] = stats.get(code, 0) + 1

    ts = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)


def leaderboard_fetchers(stop: threading.Event, url: str, n: int = 8, stats: dict | None = None,
                         source: str = ATTACKER) -> None:
    """``n`` loops fetching ``/leaderboard`` in full."""
    stats = stats if stats is not None else {}
    lock = threading.Lock()

    def loop() -> None:
        with client(url, source, timeout=30) as c:
            while not stop.is_set():
                try:
                    r = c.get("/leaderboard")
                    code, size = r.status_code, len(r.content)
                except httpx.HTTPError:
                    code, size = 0, 0
                with lock:
                    stats[code] = stats.get(code, 0) + 1
                    stats["bytes"] = stats.get("bytes", 0) + size

    ts = [threading.Thread(target=loop, daemon=True) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)


def first_request_times(url: str, keys: list[str], pause_s: float = 0.2) -> list[float]:
    """Seconds of each key's first authenticated request (``GET /v1/lowerings``) from 127.0.0.1;
    a non-200 counts as 15 s."""
    out = []
    for k in keys:
        t0 = time.monotonic()
        try:
            with client(url, timeout=15) as c:
                ok = c.get("/v1/lowerings", headers={"Authorization": f"Bearer {k}"}
                           ).status_code == 200
        except httpx.HTTPError:
            ok = False
        out.append(time.monotonic() - t0 if ok else 15.0)
        time.sleep(pause_s)
    return out


def summary(xs: list[float]) -> str:
    """``median / p95 / max`` in ms."""
    return (f"median {statistics.median(xs) * 1e3:.0f} ms, p95 {p(xs, 0.95) * 1e3:.0f} ms, "
            f"max {max(xs) * 1e3:.0f} ms")


def main() -> None:  # pragma: no cover - a measurement tool
    """Start a server (its RLIMIT_NOFILE at 1024, as a default shell gives), print the table."""
    import resource
    import tempfile
    from pathlib import Path

    from tests.server.conftest import ServerProc

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    with tempfile.TemporaryDirectory() as d:
        srv = start_with_nofile(ServerProc(Path(d), cpu_workers=0), 1024)  # hard limit as is
        try:
            key = srv.new_key("victim")
            fresh = [srv.new_key(f"fresh{i}") for i in range(13)]
            rows = [("idle", bystander(srv.url)),
                    ("idle: fresh key 1st req", first_request_times(srv.url, fresh[10:]))]
            st: dict = {}
            with running(slowloris, srv.port, 1100, st):
                time.sleep(3)
                rows.append(("slowloris 1100", bystander(srv.url)))
            print("slowloris:", st)
            st = {}
            with running(wrong_secret_flood, srv.url, key.split("_")[1], 8, st):
                time.sleep(2)
                rows.append(("wrong-secret flood: fresh key 1st req",
                             first_request_times(srv.url, fresh[:10])))
            print("flood:", st)
            st = {}
            with running(leaderboard_fetchers, srv.url, 8, st):
                time.sleep(2)
                rows.append(("8 leaderboard fetchers", bystander(srv.url)))
            print("leaderboard:", st)
            for name, xs in rows:
                print(f"| {name} | {summary(xs)} | {sum(x >= 5 for x in xs)} failed |")
        finally:
            srv.stop()


def start_with_nofile(srv, soft: int, hard: int | None = None, timeout: float = 60.0):
    """Start ``srv`` (a :class:`tests.server.conftest.ServerProc`) with ``RLIMIT_NOFILE`` at
    ``soft`` (and ``hard``; None: the hard limit stays as it is) in the server process."""
    import resource
    import subprocess
    from functools import partial
    from unittest import mock

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (soft, hard if hard is not None else resource.getrlimit(
                               resource.RLIMIT_NOFILE)[1]))

    with mock.patch.object(subprocess, "Popen", partial(subprocess.Popen, preexec_fn=lower)):
        return srv.start(timeout)


if __name__ == "__main__":
    main()
