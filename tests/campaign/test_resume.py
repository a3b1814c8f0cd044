"""Kill-and-resume: ``kill -9`` of a running batch loses no finished cell and runs none twice.

The batch (``ailower suite run`` on four small static cells, one worker) is SIGKILLed while one
cell is done and another is running; its worker dies with it (PR_SET_PDEATHSIG). The rerun of the
same command releases the dead worker's claim at once (same host, process gone), finishes the
campaign, and every cell ends with exactly one run row.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from .conftest import ROOT, cli, cli_env, db_url

pytestmark = pytest.mark.timeout(600)

KERNELS = ["vector_add", "relu.fp16", "relu.fp32", "sigmoid.fp16"]
ARGS = ["suite", "run", *KERNELS, "--arch", "sm_89", "--iterations", "2", "--campaign", "kr",
        "--cpu-workers", "1", "--json"]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped) is dead for our purpose
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_kill_9_then_resume(tmp_path):
    from sqlalchemy import func, select

    from agent.store import RunRow
    from campaign.store import CampaignStore

    proc = subprocess.Popen([sys.executable, "-c", "from ailower.cli import main; main()", *ARGS],
                            cwd=str(ROOT), env=cli_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    store = None
    deadline = time.monotonic() + 300
    killed_state = None
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"the batch ended before it could be killed: {proc.stdout.read()}")
            if (tmp_path / "ailower.db").exists():
                store = store or CampaignStore(db_url(tmp_path))
                cells = store.cells()
                done = [c for c in cells if c.status == "done"]
                running = [c for c in cells if c.status == "running"]
                if done and running:
                    proc.send_signal(signal.SIGKILL)  # kill -9 of the batch
                    proc.wait(30)
                    killed_state = (done, running)
                    break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert killed_state is not None, "never saw a done and a running cell at once"
    assert proc.returncode == -signal.SIGKILL
    # the worker died with its batch (no orphan keeps working on the claimed cell)
    worker_pid = int(killed_state[1][0].owner.rsplit(":", 2)[1])
    t = time.monotonic()
    while _pid_alive(worker_pid) and time.monotonic() - t < 20:
        time.sleep(0.1)
    assert not _pid_alive(worker_pid), "the worker outlived its killed batch"
    before = {c.id: c for c in store.cells()}
    done_before = {i: c for i, c in before.items() if c.status == "done"}
    stuck = [c for c in before.values() if c.status == "running"]
    assert done_before and stuck  # a finished cell and a cell claimed by a now-dead process
    with store.Session() as s:
        runs_before = s.scalar(select(func.count()).select_from(RunRow))
    assert runs_before == len(done_before)  # a run row exists exactly for each done cell

    r = cli(ARGS, tmp_path)  # the same command again continues the campaign
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    start = next(x for x in lines if x["event"] == "start")
    assert start["added"] == 0 and start["already_done"] == len(done_before)
    assert any("released 1 cell(s) held by dead workers" in x.get("message", "")
               for x in lines if x["event"] == "note")
    ran_now = {x["cell"] for x in lines if x["event"] == "cell"}
    assert not ran_now & set(done_before), "a finished cell ran again"

    after = {c.id: c for c in store.cells()}
    assert all(c.status == "done" for c in after.values()), {i: c.status for i, c in after.items()}
    for i, c in done_before.items():  # nothing finished was lost or redone
        assert (after[i].run_id, after[i].finished_at, after[i].attempts) == \
               (c.run_id, c.finished_at, 1)
    for c in stuck:  # the interrupted cell was claimed once more, and finished once
        assert after[c.id].attempts == 2
    with store.Session() as s:
        runs = list(s.scalars(select(RunRow)))
    assert len(runs) == len(after)  # one run per cell: none recorded twice
    assert sorted(r.id for r in runs) == sorted(c.run_id for c in after.values())
    for c in after.values():
        run = next(r for r in runs if r.id == c.run_id)
        assert run.report["campaign"]["cell_id"] == c.id and run.kernel == c.kernel
