"""A real uvicorn server on 127.0.0.1 (``python -m server``) in a subprocess, and API keys made
with the ``ailower keys`` commands (:mod:`ailower.cmd_server`)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from ailower.cmd_server import register
from server.sandbox import isolation_status

# source submissions need the bubblewrap sandbox (root + bwrap + setpriv + the required cgroups);
# without it they are 503. In CI (CI=true or AILOWER_REQUIRE_ISOLATION=1, set by .ci/run) a host
# without isolation is an error, never a silent skip.
_ISO_OK, _ISO_WHY = isolation_status()
REQUIRE_ISOLATION = (os.environ.get("CI", "").lower() in ("1", "true")
                     or os.environ.get("AILOWER_REQUIRE_ISOLATION") == "1")
if REQUIRE_ISOLATION and not _ISO_OK:
    raise RuntimeError(f"CI requires the sandbox tests to run, but this host cannot isolate: "
                       f"{_ISO_WHY}")
needs_isolation = pytest.mark.skipif(not _ISO_OK, reason=f"no isolation on this host: {_ISO_WHY}")

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProc:
    """``python -m server`` on 127.0.0.1 with its own data directory and settings."""

    def __init__(self, data_dir: Path, **settings: object):
        self.data_dir, self.port = data_dir, free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AILOWER_")}
        self.env.update({"AILOWER_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT),
                         "PYTHONUNBUFFERED": "1"})
        self.env.update({f"AILOWER_SERVER_{k.upper()}": str(v) for k, v in settings.items()})
        self.proc: subprocess.Popen | None = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "ServerProc":
        """Start and wait (at most ``timeout`` s) until ``/healthz`` answers 200."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = (self.data_dir / "server.log").open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "server", "--host", "127.0.0.1",
                                      "--port", str(self.port), "--log-level", "warning"],
                                     cwd=str(ROOT), env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log()[-3000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server did not become healthy in {timeout} s: {self.log()[-3000:]}")

    def log(self) -> str:
        """The server's output so far."""
        p = self.data_dir / "server.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` and wait for the exit (SIGKILL after 15 s)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def keys(self, *args: str) -> typer.testing.Result:
        """Run ``ailower keys ARGS`` against this server's database."""
        app = typer.Typer()
        register(app)
        return CliRunner().invoke(app, ["keys", *args], env={"AILOWER_DATA_DIR": str(self.data_dir),
                                                            "AILOWER_DB_URL": ""})

    def new_key(self, name: str, *opts: str) -> str:
        """Create a key (``ailower keys create NAME --json OPTS``); returns the plain key."""
        r = self.keys("create", name, "--json", *opts)
        assert r.exit_code == 0, r.output
        return json.loads(r.output)["key"]

    def client(self, key: str | None = None, timeout: float = 30.0) -> httpx.Client:
        """An httpx client for this server, authenticated with ``key`` when given."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)


def wait_status(client: httpx.Client, job_id: str, statuses: set[str],
                timeout: float = 120.0) -> dict:
    """Poll ``GET /v1/lowerings/{id}`` until its status is in ``statuses`` (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/v1/lowerings/{job_id}").json()
        if body["status"] in statuses:
            return body
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not reach {statuses} in {timeout} s: {body}")


def read_sse(client: httpx.Client, job_id: str, headers: dict | None = None,
             timeout: float = 120.0) -> list[dict]:
    """Read the job's SSE stream to its end; returns ``[{"id", "event", "data"}]``."""
    events, cur = [], {}
    with client.stream("GET", f"/v1/lowerings/{job_id}/events", headers=headers or {},
                       timeout=timeout) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line == "":
                if cur:
                    events.append(cur)
                cur = {}
            elif line.startswith(":"):
                continue
            else:
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                cur[field] = json.loads(value) if field == "data" else value
    if cur:
        events.append(cur)
    return events


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server with one job slot, a 3 s lease and small global body limit (module scope)."""
    srv = ServerProc(tmp_path_factory.mktemp("srv"), cpu_workers=1, lease_s=3, heartbeat_s=0.5,
                     max_body_bytes=300_000)
    srv.start()
    yield srv
    srv.stop()
