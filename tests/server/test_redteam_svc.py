"""Red-team regressions for the hardened service (issue 17, round 2), against a real
``python -m server`` on 127.0.0.1 with bounded loops.

* Slow reader ("reverse slowloris"): a client that sends a complete request for a large response
  and never reads it. The request is being served, so neither the header nor the body deadline
  applies and the connection cap cannot evict it; before the send deadline the server held the
  connection, and the unsent part of the response in its own memory (the public ``/leaderboard``
  page is ~4.8 MB uncompressed), for as long as the client liked, one per leaderboard token
  (2 per second per address by default).
"""

from __future__ import annotations

import socket
import time

from .conftest import ServerProc

SEND_TIMEOUT_S = 2.0


def _drain(sock: socket.socket, limit: float) -> tuple[int, bool]:
    """Read ``sock`` until EOF/reset or ``limit`` s; returns (bytes read, closed by server)."""
    sock.settimeout(1.0)
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            b = sock.recv(1 << 20)
        except TimeoutError:
            return n, False
        except ConnectionResetError:
            return n, True
        if not b:
            return n, True
        n += len(b)
    return n, False


def test_slow_reader_is_dropped_after_send_deadline(tmp_path):
    """Three clients GET ``/leaderboard`` (identity encoding) with a 1 KiB receive buffer and
    read nothing for 3 x the send deadline: the server must have dropped each connection by then
    (what the client can read afterwards is a truncated response, not the whole page)."""
    srv = ServerProc(tmp_path / "srv", cpu_workers=0, header_timeout_s=30, body_timeout_s=30,
                     send_timeout_s=SEND_TIMEOUT_S).start()
    socks: list[socket.socket] = []
    try:
        import httpx

        full = len(httpx.get(srv.url + "/leaderboard", headers={"Accept-Encoding": "identity"},
                             timeout=30).content)
        assert full > 1 << 20, full  # the attack needs a response larger than socket buffers
        for _ in range(3):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.connect(("127.0.0.1", srv.port))
            s.sendall(b"GET /leaderboard HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\n\r\n")
            socks.append(s)
        time.sleep(3 * SEND_TIMEOUT_S)
        for s in socks:
            n, closed = _drain(s, 20)
            assert closed and n < full, (f"a client that read nothing for {3 * SEND_TIMEOUT_S} s "
                                         f"still got {n} of {full} bytes (closed={closed})")
    finally:
        for s in socks:
            s.close()
        srv.stop()
