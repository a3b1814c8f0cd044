"""``ailower suite run --backend ray`` on a local Ray instance (``ray start --head``, 2 CPUs, no GPU):
static cells run as Ray tasks in Ray worker processes and land in the same database; a rerun
runs nothing again. Bounded: two small cells, one iteration each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from .conftest import ROOT, cli_env, db_url

ray = pytest.importorskip("ray")  # the test extra installs it

pytestmark = pytest.mark.timeout(420)

ARGS = ["suite", "run", "vector_add", "relu.fp16", "--arch", "sm_89", "--iterations", "1",
        "--campaign", "ray1", "--backend", "ray", "--json"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_head(tmp_path):
    """A local Ray head in its own process group (stopped by signalling that group only)."""
    port = _free_port()
    temp = Path(tempfile.mkdtemp(prefix="ailray-", dir="/tmp"))  # short: unix socket paths
    log = (tmp_path / "ray-head.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block",
         "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false", f"--port={port}",
         "--disable-usage-stats", "--object-store-memory=80000000", f"--temp-dir={temp}",
         # fixed defaults (52365, ...) would collide with another Ray on this host
         f"--dashboard-agent-listen-port={_free_port()}",
         f"--dashboard-agent-grpc-port={_free_port()}", f"--node-manager-port={_free_port()}",
         f"--object-manager-port={_free_port()}"],
        env=cli_env(tmp_path, RAY_USAGE_STATS_ENABLED="0"), stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while b"Ray runtime started" not in (tmp_path / "ray-head.log").read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ray head did not start: "
                            + (tmp_path / "ray-head.log").read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                time.sleep(1)
            except subprocess.TimeoutExpired:
                continue
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the head's children (gcs, raylet, workers)
        except ProcessLookupError:
            pass
        log.close()


def test_static_cells_as_ray_tasks(tmp_path, ray_head):
    from sqlalchemy import func, select

    from agent.store import RunRow
    from campaign.store import CampaignStore

    proc = subprocess.Popen([sys.executable, "-c", "from ailower.cli import main; main()", *ARGS,
                             "--ray-address", ray_head], cwd=str(ROOT), env=cli_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    assert any("2 CPU, 0 GPU" in x.get("message", "") for x in lines)
    store = CampaignStore(db_url(tmp_path))
    cells = store.cells()
    assert len(cells) == 2 and all(c.status == "done" and c.mode == "static" for c in cells)
    assert all("Ray cluster has no sm_89 GPU" in c.static_reason for c in cells)
    runs = store.runs_for([c.run_id for c in cells])
    for c in cells:
        rep = runs[c.run_id].report
        assert rep["campaign"]["cell_id"] == c.id
        assert rep["verifier"]["counts"]["error"] == 0
        pid = int(rep["campaign"]["owner"].rsplit(":", 2)[1])
        assert pid != proc.pid  # not the driver: a Ray worker process ran the cell
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes() if Path(f"/proc/{pid}").exists() else b""
        assert not cmd or b"ray" in cmd.lower(), cmd

    again = subprocess.run([sys.executable, "-c", "from ailower.cli import main; main()", *ARGS,
                            "--ray-address", ray_head], cwd=str(ROOT), env=cli_env(tmp_path),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not [x for x in again.stdout.splitlines() if '"event": "cell"' in x]
    with store.Session() as s:
        assert s.scalar(select(func.count()).select_from(RunRow)) == 2  # nothing ran twice
