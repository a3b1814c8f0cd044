"""Job slots: threads that claim jobs, run each attempt in a runner process, and hold its lease.

A slot loops: re-queue jobs whose lease lapsed, claim the oldest queued job, start
``python -m server.runner JOB OWNER`` in its own process group (it dies with the slot's process:
``PR_SET_PDEATHSIG``), then every ``poll_s`` renew the lease (every ``heartbeat_s``), check the
cancel flag and the wall-time budget, and kill the runner's process group when either says so.

On a GPU host there is one slot per visible GPU (its runner sees only that GPU through
``CUDA_VISIBLE_DEVICES``); on a GPU-less host ``cpu_workers`` slots run the static path.
A pool runs inside ``ailower serve`` by default; ``python -m server.workers`` runs one alone
(more hosts sharing one PostgreSQL database).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from common.settings import Settings
from server import jobs as J
from server.db import Job, make_engine, make_sessionmaker
from server.settings import ServerSettings

__all__ = ["WorkerPool", "visible_gpus"]

log = logging.getLogger("ailower.server.workers")


def visible_gpus() -> list[str]:
    """Device indices the slots may use: ``CUDA_VISIBLE_DEVICES`` or every device the driver
    reports (through :func:`harness.gpu_available`, which never initialises CUDA in this process);
    empty without a GPU."""
    from harness import gpu_available

    ok, why = gpu_available()
    if not ok:
        return []
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip()]
    import re

    m = re.search(r"(\d+) device", why)
    return [str(i) for i in range(int(m.group(1)) if m else 1)]


def _pid_namespace() -> list[str]:
    """The prefix that starts the runner as init of its own PID namespace (util-linux
    ``unshare --pid --fork --kill-child --mount-proc``, root only; the private ``/proc`` is
    what bwrap reads its own namespaces from): when the runner dies -- killed by its slot,
    or by ``PR_SET_PDEATHSIG`` when the server is SIGKILLed -- the kernel kills every process it
    started (ptxas, the GPU worker, a box's bwrap), so none is left as an orphan. Empty where that
    is unavailable (not root, no ``unshare``, or a probe run fails: the reason is logged once)."""
    return list(_pid_namespace_probe())


@functools.lru_cache(maxsize=1)
def _pid_namespace_probe() -> tuple[str, ...]:
    import shutil

    exe = shutil.which("unshare")
    if exe is None or os.geteuid() != 0:
        log.warning("runners start without their own PID namespace (%s): a process a runner "
                    "starts outside a box may outlive a SIGKILLed server",
                    "no unshare" if exe is None else "not root")
        return ()
    argv = (exe, "--pid", "--fork", "--kill-child", "--mount-proc")
    try:
        r = subprocess.run([*argv, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("runners start without their own PID namespace: %s", exc)
        return ()
    if r.returncode != 0:
        log.warning("runners start without their own PID namespace: unshare failed: %s",
                    r.stderr.decode(errors="replace").strip()[:300])
        return ()
    return argv


def _runner_preexec() -> None:
    os.setsid()
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)


class WorkerPool:
    """A set of job slots.

    Args:
        settings, server_settings: ailower's and the server's settings.
        slots: number of slots; None: one per visible GPU, else ``cpu_workers``.
        poll_s: how often a slot looks at its runner and the cancel flag (seconds).
    """

    def __init__(self, settings: Settings, server_settings: ServerSettings, *,
                 slots: int | None = None, poll_s: float = 0.25):
        self.settings, self.ss = settings, server_settings
        self.engine = make_engine(settings.database_url)
        self.Session = make_sessionmaker(self.engine)
        gpus = visible_gpus()
        if slots is None:
            slots = (server_settings.gpu_workers if server_settings.gpu_workers is not None
                     else len(gpus)) if gpus else server_settings.cpu_workers
        self.gpus = gpus
        self.n = slots
        self.poll_s = poll_s
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.procs: dict[int, subprocess.Popen] = {}
        self.host = f"{socket.gethostname()}:{os.getpid()}"

    def start(self) -> None:
        """Start the slot threads (daemon threads)."""
        for i in range(self.n):
            t = threading.Thread(target=self._slot, args=(i,), name=f"ailower-slot-{i}",
                                 daemon=True)
            t.start()
            self.threads.append(t)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop claiming, kill running runners (their jobs are re-queued when the lease lapses)."""
        self.stop.set()
        for p in list(self.procs.values()):
            self._kill(p)
        for t in self.threads:
            t.join(timeout)

    @staticmethod
    def _kill(p: subprocess.Popen) -> None:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()

    def _slot(self, i: int) -> None:
        while not self.stop.is_set():
            try:
                with self.Session() as s:
                    J.requeue_expired(s, self.ss.max_attempts)
                    owner = f"{self.host}/slot{i}/{uuid.uuid4().hex[:8]}"
                    job = J.claim_next(s, owner, self.ss.lease_s)
                if job is None:
                    self.stop.wait(0.5)
                    continue
                self._run(i, job, owner)
            except Exception:  # a database hiccup must not kill the slot; it retries
                log.exception("job slot %d: error; retrying in 2 s", i)
                self.stop.wait(2.0)

    def _env(self, i: int, provider: str | None = None) -> dict[str, str]:
        """The runner's environment: the server's, minus every provider credential and server
        setting holding one, plus the one credential the job's ``provider`` needs."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY",
                            "AILOWER_SERVER_ANTHROPIC_API_KEY", "AILOWER_SERVER_OPENAI_API_KEY")}
        if provider == "anthropic" and self.ss.anthropic_api_key:
            env["ANTHROPIC_API_KEY"] = self.ss.anthropic_api_key.get_secret_value()
        if provider == "openai" and self.ss.openai_api_key:
            env["OPENAI_API_KEY"] = self.ss.openai_api_key.get_secret_value()
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus[i % len(self.gpus)]
        env["AILOWER_SLOT"] = str(i)  # the runner's boxes run as this slot's own uid
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    def _run(self, i: int, job: Job, owner: str) -> None:
        wall = float((job.request.get("budget") or {}).get("wall_time_s", 900.0))
        folder = J.job_dir(self.settings.data_dir, job.id)
        folder.mkdir(parents=True, exist_ok=True)
        log_file = (folder / f"runner-{job.attempts}.log").open("ab")
        proc = subprocess.Popen([*_pid_namespace(), sys.executable, "-m", "server.runner",
                                 job.id, owner],
                                env=self._env(i, job.request.get("provider")),
                                stdin=subprocess.DEVNULL, stdout=log_file,
                                stderr=subprocess.STDOUT, preexec_fn=_runner_preexec,
                                close_fds=True)
        log_file.close()
        self.procs[i] = proc
        t0 = last_beat = time.monotonic()
        outcome: tuple[str, dict] | None = None
        try:
            while proc.poll() is None:
                if self.stop.wait(self.poll_s):
                    return  # shutting down: the lease lapses and the job is re-queued
                now = time.monotonic()
                with self.Session() as s:
                    owned, cancel = J.renew_lease(s, job.id, owner, self.ss.lease_s) \
                        if now - last_beat >= self.ss.heartbeat_s else (True, bool(
                            s.get(Job, job.id, populate_existing=True).cancel_requested))
                if now - last_beat >= self.ss.heartbeat_s:
                    last_beat = now
                if not owned:
                    outcome = ("lost", {})
                    break
                if cancel:
                    outcome = ("cancelled", {"type": "cancelled",
                                             "message": "cancelled by the client"})
                    break
                if now - t0 > wall:
                    outcome = ("failed", {"type": "budget-exceeded",
                                          "message": f"wall-time budget of {wall:g} s exceeded"})
                    break
        finally:
            self._kill(proc)
            self.procs.pop(i, None)
        with self.Session() as s:
            if outcome is None:
                j = s.get(Job, job.id, populate_existing=True)
                if j is not None and j.status == "running" and j.lease_owner == owner:
                    msg = f"the job runner exited with status {proc.returncode}"
                    J.add_event(s, job.id, "failed", {"type": "runner-crashed", "message": msg},
                                job.attempts)
                    J.finish(s, job.id, owner, "failed",
                             error={"type": "runner-crashed", "message": msg})
            elif outcome[0] in ("cancelled", "failed"):
                if J.finish(s, job.id, owner, outcome[0], error=outcome[1]):
                    J.add_event(s, job.id, outcome[0], outcome[1], job.attempts)


def main() -> None:
    """``python -m server.workers``: run a pool of slots in the foreground until SIGTERM/SIGINT."""
    from server.settings import get_server_settings

    logging.basicConfig(level=logging.INFO)
    settings, ss = get_server_settings()
    pool = WorkerPool(settings, ss)
    pool.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    pool.shutdown()


if __name__ == "__main__":
    main()
