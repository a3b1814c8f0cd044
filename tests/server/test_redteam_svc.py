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

import secrets
import socket
import sys
import time

import pytest

from . import net_attacks as A
from server.sandbox import SandboxLimits, run_isolated

from .conftest import ServerProc, needs_isolation

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


@pytest.mark.xfail(strict=True, reason="open hole: the per-key-id failure backoff refuses the "
                   "key's holder too (only a secret verified in the last 60 s is exempt); not "
                   "fixed here, see the round-2 red-team report")
def test_wrong_secret_flood_does_not_lock_out_the_keys_holder(tmp_path):
    """An attacker at 127.0.0.2 who knows a key's public id sends 12 wrong secrets for it (one at
    a time); the holder at 127.0.0.1, whose key has not been used in the last minute, must still
    get in with the right secret (secrets are 256 bits: the holder's success cannot be guessed,
    so refusing it protects nothing)."""
    srv = ServerProc(tmp_path / "srv", cpu_workers=0).start()
    try:
        key = srv.new_key("holder")
        key_id = key.split("_")[1]
        with A.client(srv.url, A.ATTACKER, timeout=30) as att:
            codes = [att.get("/v1/lowerings", headers={
                "Authorization": f"Bearer ail_{key_id}_{secrets.token_urlsafe(32)}"}).status_code
                for _ in range(12)]
        assert set(codes) <= {401, 429}, codes
        with A.client(srv.url, "127.0.0.1", timeout=30) as me:
            r = me.get("/v1/lowerings", headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, (r.status_code, r.text[:300], codes)
    finally:
        srv.stop()


@needs_isolation
def test_many_empty_files_in_the_output_folder_kill_the_box(tmp_path):
    """A box that fills ``/sandbox/out`` with empty files (no bytes: under ``disk_mb``) made the
    server walk them every 0.5 s outside the box for the whole wall clock (190,000 files: 15.8 s
    of server CPU in 21 s). Over ``max_entries`` the box is killed as ``disk`` and its output
    discarded."""
    payload = ("import os, time\n"
               "for i in range(1200):\n"
               "    open(f'/sandbox/out/{i}', 'w').close()\n"
               "time.sleep(30)\n")
    t0 = time.monotonic()
    run = run_isolated([sys.executable, "-I", "-c", payload], work=tmp_path / "w",
                       limits=SandboxLimits(wall_s=40, max_entries=1000), keep=("result.json",))
    assert run.killed == "disk", (run.killed, run.returncode, run.stderr[-500:])
    assert time.monotonic() - t0 < 20
    assert list((tmp_path / "w").iterdir()) == []


@needs_isolation
def test_output_nested_past_path_max_is_discarded_with_a_sandbox_error(tmp_path):
    """A box that nests folders in ``/sandbox/out`` past ``PATH_MAX`` (relative ``mkdir``, 40 x
    200 characters) and leaves a FIFO and a symlink to ``/etc/shadow`` at the bottom: the
    server's clean-up raised a raw ``OSError`` (ENAMETOOLONG, naming the host path) and left the
    box's tree in place. Now the run is marked killed, everything is discarded."""
    payload = ("import os\n"
               "os.chdir('/sandbox/out')\n"
               "for i in range(40):\n"
               "    os.mkdir('d' * 200); os.chdir('d' * 200)\n"
               "os.mkfifo('fifo'); os.symlink('/etc/shadow', 'link')\n")
    run = run_isolated([sys.executable, "-I", "-c", payload], work=tmp_path / "w",
                       limits=SandboxLimits(wall_s=30), keep=("result.json",))
    assert run.killed and run.killed.startswith("output tree"), run.killed
    assert list((tmp_path / "w").iterdir()) == []
