"""A source job's work in boxes, against a real ``ailower serve`` on 127.0.0.1 and through the
sandbox API: a crash-retried source job succeeds (a fresh folder per attempt), no box or ptxas
process outlives a SIGKILLed server, box output is gone after the job, and the runner's work on a
replaced (hostile) reference cache runs boxed, under the box's limits."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from server.db import Job, JobEvent, make_engine, make_sessionmaker
from server.sandbox import SandboxError, SandboxLimits, compile_untrusted, lower_in_box

from .conftest import ServerProc, needs_isolation, wait_status
from .sandbox_payloads import softmax_with

pytestmark = needs_isolation

UID0 = 100_000  # the server's default sandbox_uid: slot i runs as UID0 + i


def _uid_pids(uids: set[int]) -> set[int]:
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = Path(f"/proc/{d}/status").read_text()
            except OSError:
                continue
            uid = next((ln.split()[1] for ln in st.splitlines() if ln.startswith("Uid:")), "")
            if uid.isdigit() and int(uid) in uids:
                out.add(int(d))
    return out


def _cmd_pids(word: str) -> set[int]:
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes()
            except OSError:
                continue
            if word.encode() in cmd:
                out.add(int(d))
    return out


def _env_pids(data_dir: Path) -> set[int]:
    """Processes whose environment names ``data_dir`` (the server's, its runners', ptxas...)."""
    needle = f"AILOWER_DATA_DIR={data_dir}".encode()
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                env = Path(f"/proc/{d}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if needle in env:
                out.add(int(d))
    return out


def test_crash_retried_source_job_succeeds_and_leaves_nothing(tmp_path):
    """SIGKILL the server while a source job's loop runs on its compile box's output; nothing of
    the boxes or the runner survives; after the restart the retry (a fresh folder) succeeds, and
    the job folder holds only its artifacts."""
    srv = ServerProc(tmp_path / "data", cpu_workers=1, lease_s=3, heartbeat_s=0.5)
    srv.start()
    c = srv.client(srv.new_key("crash-src"))
    spec = softmax_with([])
    r = c.post("/v1/lowerings", json={"spec": spec, "budget": {"iterations": 4}})
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    Session = make_sessionmaker(make_engine(f"sqlite:///{srv.data_dir / 'ailower.db'}"))

    def kinds() -> list[str]:
        with Session() as s:
            return [e.kind for e in s.scalars(select(JobEvent).where(
                JobEvent.job_id == job_id).order_by(JobEvent.id))]

    # kill once the compile box is done and the loop works on its output (the case that made
    # every retry fail: the first attempt's folder was handed back to root)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "sandbox_compiled" not in kinds():
        time.sleep(0.05)
    assert "sandbox_compiled" in kinds() and "succeeded" not in kinds()
    job_dir = next((tmp_path / "data").rglob(job_id))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _uid_pids({UID0}) and "succeeded" not in kinds():
        time.sleep(0.05)
    assert _uid_pids({UID0}), "the loop is not running in a box of the slot's uid"
    srv.stop(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_uid_pids({UID0}) or _cmd_pids(job_id)
                                           or _env_pids(srv.data_dir)):
        time.sleep(0.1)
    assert _uid_pids({UID0}) == set()  # the box died with the server
    assert _cmd_pids(job_id) == set()  # and so did the runner
    assert _env_pids(srv.data_dir) == set()  # and every process it started
    srv.start()
    try:
        body = wait_status(c, job_id, {"succeeded", "failed", "cancelled"}, timeout=240)
        assert body["status"] == "succeeded", body
        assert body["attempts"] == 2
        with Session() as s:
            assert s.get(Job, job_id).status == "succeeded"
        k = kinds()
        assert k.count("sandbox_compiled") == 2 and k[-1] == "succeeded", k
        # box output is gone after the job: only the job's own artifacts and logs stay
        left = sorted(p.name for p in job_dir.iterdir())
        assert not (job_dir / "box").exists(), left
        assert set(left) <= {"best.ptx", "best.cubin", "report.json", "transcript.jsonl",
                             "runner-1.log", "runner-2.log"}, left
        assert "report.json" in left and "best.ptx" in left
    finally:
        srv.stop()


def _replace_reference_ptx(cache: Path, n: int = 200_000) -> None:
    """What a compile-time payload could do: replace every cached reference PTX (the
    ``artifacts.json`` field the loop reads) with a 5 MB one, a long straight-line entry body
    that ptxas and the verifier grind on (with 1.5 MB the loop once finished inside the 25 s wall
    during a full test run on the 2-core dev host, and the test did not see the limit)."""
    import json

    entries = list(cache.rglob("artifacts.json"))
    assert entries
    for p in entries:
        data = json.loads(p.read_text())
        head, _, tail = data["artifacts"]["ptx"].rpartition("ret;")
        body = "".join(f"\tadd.s32 \t%r{1 + i % 8}, %r{1 + i % 8}, {i};\n" for i in range(n))
        data["artifacts"]["ptx"] = head + body + "ret;" + tail
        assert len(data["artifacts"]["ptx"]) > 4_000_000
        os.chmod(p, 0o644)
        p.write_text(json.dumps(data))


def test_runner_work_on_a_replaced_reference_runs_boxed_with_limits(tmp_path):
    """The compile box wrote the reference cache, so it may hold anything: a 1.5 MB reference PTX
    in place of Triton's. The loop's ptxas/verifier/emulator work on it runs in the runner's box,
    as the box uid, and the box's wall limit stops it (before: the runner did this outside any
    box, as root, without limits). Measured here: 122 s in the box with no tight limit, against
    7.7 s on the intact cache."""
    spec = softmax_with([])
    sb = compile_untrusted(spec, "sm_90a", work=tmp_path / "compile", max_ptx_version=90,
                           limits=SandboxLimits(wall_s=120))
    assert sb.complete, sb
    _replace_reference_ptx(tmp_path / "compile" / "cache")
    seen: set[int] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.update(_uid_pids({65534}))
            time.sleep(0.05)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(SandboxError, match="wall-clock limit"):
            lower_in_box({"spec": spec, "arch": "sm_90a", "iterations": 1, "gpu": False,
                          "max_ptx_version": 90, "provider": "triton", "hang_timeout_s": 10,
                          "job_timeout_s": 60},
                         cache=tmp_path / "compile" / "cache", work=tmp_path / "loop",
                         limits=SandboxLimits(wall_s=25), ptxas=None)
    finally:
        stop.set()
        w.join(5)
    assert time.monotonic() - t0 < 60
    assert seen  # the work ran as the box's unprivileged uid
    assert _uid_pids({65534}) == set()  # and nothing of it is left


def test_runner_box_runs_the_loop_on_the_compiled_reference(tmp_path):
    """The same box on an intact cache: the loop's result comes back as data."""
    spec = softmax_with([])
    sb = compile_untrusted(spec, "sm_90a", work=tmp_path / "compile", max_ptx_version=90,
                           limits=SandboxLimits(wall_s=120))
    events: list[str] = []
    data, cubin, run = lower_in_box(
        {"spec": spec, "arch": "sm_90a", "iterations": 1, "gpu": False, "max_ptx_version": 90,
         "provider": "triton", "hang_timeout_s": 10, "job_timeout_s": 60},
        cache=tmp_path / "compile" / "cache", work=tmp_path / "loop",
        limits=SandboxLimits(wall_s=120), on_event=lambda k, d: events.append(k))
    assert sb.complete and run.returncode == 0, run.stderr[-2000:]
    assert data["best_candidate"] is not None and len(cubin) > 1000
    assert "reference_compiled" in events and "iteration" in events
    assert {"memory", "pids", "cpu"} <= run.cgroups
    assert [p.name for p in (tmp_path / "loop").iterdir()] == ["transcript.jsonl"]


def test_model_provider_runs_outside_and_its_tools_inside_the_job_box(tmp_path):
    """A model provider (no network or credentials in the box) is called outside; its tool calls
    (``compile`` = ptxas, ``verify``) are relayed into the box and answered there."""
    from agent.providers.base import Proposal, Provider
    from harness.candidate import Candidate

    class Scripted(Provider):
        name = "scripted"

        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []
            self.pids: list[int] = []

        def propose(self, ctx, feedback, tools):
            self.pids.append(os.getpid())
            for tool in ("compile", "verify"):
                self.calls.append((tool, tools(tool, {"ptx": ctx.reference_ptx,
                                                      "threads": ctx.abi.threads})))
            with pytest.raises(ValueError, match="unknown tool"):
                tools("no-such-tool", {})
            return Proposal(candidate=Candidate(ptx=ctx.reference_ptx, threads=ctx.abi.threads,
                                                meta=dict(ctx.config.meta), origin="scripted"))

    spec = softmax_with([])
    sb = compile_untrusted(spec, "sm_90a", work=tmp_path / "compile", max_ptx_version=90,
                           limits=SandboxLimits(wall_s=120))
    assert sb.complete
    prov = Scripted()
    data, cubin, run = lower_in_box(
        {"spec": spec, "arch": "sm_90a", "iterations": 2, "gpu": False, "max_ptx_version": 90,
         "provider": "scripted", "hang_timeout_s": 10, "job_timeout_s": 60},
        cache=tmp_path / "compile" / "cache", work=tmp_path / "loop",
        limits=SandboxLimits(wall_s=120), provider=prov)
    assert run.returncode == 0, run.stderr[-2000:]
    assert prov.pids == [os.getpid()] * 2  # called here, once per iteration
    assert [t for t, _ in prov.calls] == ["compile", "verify"] * 2
    assert prov.calls[0][1].startswith("ptxas ") and ": ok; " in prov.calls[0][1]  # ran in box
    assert data["best_candidate"]["origin"] == "scripted" and len(cubin) > 1000
    assert [r["verdict"] for r in data["iterations"]] == ["static-only"] * 2
