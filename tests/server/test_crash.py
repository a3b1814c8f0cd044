"""Crash test: SIGKILL the server while a job runs, restart it on the same data directory; the job
is re-queued after its lease lapses and completes, and its earlier events are intact."""

from __future__ import annotations

import signal
import time

from sqlalchemy import select

from server.db import Job, JobEvent, make_engine, make_sessionmaker

from .conftest import ServerProc, read_sse, wait_status


def _db(data_dir):
    return make_sessionmaker(make_engine(f"sqlite:///{data_dir / 'ailower.db'}"))


def test_sigkill_while_running_then_restart(tmp_path):
    srv = ServerProc(tmp_path / "data", cpu_workers=1, lease_s=3, heartbeat_s=0.5)
    srv.start()
    key = srv.new_key("crash")
    c = srv.client(key)
    # matmul with a cold reference cache: several seconds of work, so it is surely running
    job_id = c.post("/v1/lowerings", json={"kernel": "matmul", "arch": "sm_100a",
                                           "budget": {"iterations": 6}}).json()["id"]
    wait_status(c, job_id, {"running"}, timeout=30)
    Session = _db(srv.data_dir)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until the runner has written its own events
        with Session() as s:
            kinds = list(s.scalars(select(JobEvent.kind).where(JobEvent.job_id == job_id)))
        if "started" in kinds:
            break
        time.sleep(0.05)
    srv.stop(signal.SIGKILL)
    from .test_box import _env_pids

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _env_pids(srv.data_dir):
        time.sleep(0.1)
    # no runner, ptxas or GPU worker outlives the server (the runner is init of its own PID
    # namespace; they all carry the server's AILOWER_DATA_DIR in their environment)
    assert _env_pids(srv.data_dir) == set()
    with Session() as s:
        job = s.get(Job, job_id)
        assert job.status == "running" and job.attempts == 1  # killed mid-run
        before = [(e.id, e.kind, e.data, e.attempt) for e in s.scalars(
            select(JobEvent).where(JobEvent.job_id == job_id).order_by(JobEvent.id))]
    assert [k for _, k, _, _ in before][:3] == ["queued", "claimed", "started"]
    time.sleep(1.0)
    with Session() as s:  # the runner died with the server (no orphan kept writing)
        n_after_kill = len(list(s.scalars(select(JobEvent.id).where(JobEvent.job_id == job_id))))
    srv.start()
    try:
        body = wait_status(c, job_id, {"succeeded", "failed", "cancelled"}, timeout=180)
        assert body["status"] == "succeeded", body
        assert body["attempts"] == 2
        events = read_sse(c, job_id)
        after = [(int(e["id"]), e["event"], e["data"]["data"], e["data"]["attempt"])
                 for e in events if "id" in e]
        assert after[:n_after_kill] == [(i, k, d, a) for i, k, d, a in before][:n_after_kill]
        assert after[: len(before)] == before  # every earlier event intact, same ids
        kinds = [k for _, k, _, _ in after]
        requeued = kinds.index("requeued")
        assert requeued >= len(before) - 1
        assert kinds[requeued + 1:requeued + 3] == ["claimed", "started"]
        assert kinds[-1] == "succeeded"
        assert {a for _, k, _, a in after if k == "iteration"} == {2}
    finally:
        srv.stop()
