"""Durable job operations shared by the API, the job slots and the job runner.

Every state change is a conditional ``UPDATE`` naming the version (and, for a running job, the
lease owner) it read: of two racing writers exactly one advances the job. Events are appended to
``job_events`` and committed at once, so a crash loses none; their per-job numbers are the SSE ids.

State machine: ``queued -> running -> succeeded | failed | cancelled``; ``queued -> cancelled``;
``running -> queued`` when the lease lapses (the worker died), at most ``max_attempts`` times.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.db import TERMINAL, ApiKey, Job, JobArtifact, JobEvent, as_utc, utcnow

__all__ = ["request_hash", "add_event", "cancel_key_jobs", "claim_next", "renew_lease", "finish", "requeue_expired",
           "cancel_queued", "request_cancel", "add_artifact", "events_after", "job_dir"]


def request_hash(body: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a request body (idempotency check)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def job_dir(data_dir: Path, job_id: str) -> Path:
    """The job's folder under the server data directory (artifacts, transcript, sandbox)."""
    return data_dir / "server" / "jobs" / job_id


def add_event(session: Session, job_id: str, kind: str, data: dict[str, Any],
              attempt: int = 0) -> int:
    """Append one event and commit; returns its per-job sequence number (the SSE id: 1, 2, ...).

    Writers of one job's events (the API, its slot, its runner) may race for a number: the
    unique ``(job_id, seq)`` constraint lets one win, and the other takes the next.

    Raises:
        IntegrityError: 20 races lost in a row.
    """
    for attempt_no in range(20):
        seq = (session.scalar(select(func.max(JobEvent.seq)).where(JobEvent.job_id == job_id))
               or 0) + 1
        session.add(JobEvent(job_id=job_id, seq=seq, kind=kind, data=data, attempt=attempt))
        try:
            session.commit()
            return seq
        except IntegrityError:
            session.rollback()
            if attempt_no == 19:
                raise
    raise AssertionError("unreachable")


def events_after(session: Session, job_id: str, after: int, limit: int = 500) -> list[JobEvent]:
    """The job's events with ``seq`` > ``after``, oldest first."""
    return list(session.scalars(select(JobEvent).where(JobEvent.job_id == job_id,
                                                       JobEvent.seq > after)
                                .order_by(JobEvent.seq).limit(limit)))


def claim_next(session: Session, owner: str, lease_s: float) -> Job | None:
    """Claim a queued job for ``owner`` with a lease of ``lease_s`` seconds, fairly across keys.

    Round-robin by key: of the keys with queued jobs (revoked keys excluded), the one with the
    fewest running jobs, then the one whose latest job started longest ago, then the one whose
    oldest queued job is oldest; and of that key's jobs, the oldest. So one tenant's four jobs do
    not hold every slot ahead of another tenant's one (a FIFO queue let a 4 s job wait 62 s).

    Returns the claimed job (status ``running``, ``attempts`` + 1), or None when nothing is queued
    or another worker won every race.
    """
    for _ in range(5):
        queued = session.execute(
            select(Job.key_id, func.min(Job.created_at)).join(ApiKey, ApiKey.key_id == Job.key_id)
            .where(Job.status == "queued", ApiKey.revoked_at.is_(None))
            .group_by(Job.key_id)).all()
        if not queued:
            return None
        keys = [k for k, _ in queued]
        running = dict(session.execute(
            select(Job.key_id, func.count()).where(Job.status == "running", Job.key_id.in_(keys))
            .group_by(Job.key_id)).all())
        started = dict(session.execute(
            select(Job.key_id, func.max(Job.started_at)).where(Job.key_id.in_(keys))
            .group_by(Job.key_id)).all())
        epoch = datetime(1970, 1, 1)

        def rank(q):
            last = started.get(q[0])
            return (running.get(q[0], 0), as_utc(last) if last else as_utc(epoch), as_utc(q[1]))

        key_id = min(queued, key=rank)[0]
        row = session.execute(select(Job.id, Job.version).where(
            Job.status == "queued", Job.key_id == key_id).order_by(Job.created_at).limit(1)).first()
        if row is None:
            continue
        now = utcnow()
        res = session.execute(
            update(Job).where(Job.id == row.id, Job.version == row.version, Job.status == "queued")
            .values(status="running", version=Job.version + 1, lease_owner=owner,
                    lease_expires_at=now + timedelta(seconds=lease_s), heartbeat_at=now,
                    attempts=Job.attempts + 1, started_at=func.coalesce(Job.started_at, now))
            .execution_options(synchronize_session=False))
        session.commit()
        if res.rowcount == 1:
            job = session.get(Job, row.id, populate_existing=True)
            assert job is not None
            add_event(session, job.id, "claimed", {"attempt": job.attempts, "worker": owner},
                      job.attempts)
            return job
    return None


def renew_lease(session: Session, job_id: str, owner: str, lease_s: float) -> tuple[bool, bool]:
    """Extend ``owner``'s lease; returns ``(still_owner, cancel_requested)``."""
    now = utcnow()
    res = session.execute(
        update(Job).where(Job.id == job_id, Job.lease_owner == owner, Job.status == "running")
        .values(lease_expires_at=now + timedelta(seconds=lease_s), heartbeat_at=now)
        .execution_options(synchronize_session=False))
    session.commit()
    cancel = session.scalar(select(Job.cancel_requested).where(Job.id == job_id))
    return res.rowcount == 1, bool(cancel)


def finish(session: Session, job_id: str, owner: str, status: str, *,
           summary: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> bool:
    """Move ``owner``'s running job to a terminal ``status``; False if it no longer owns it."""
    assert status in TERMINAL, status
    values: dict[str, Any] = {"status": status, "version": Job.version + 1,
                              "finished_at": utcnow(), "lease_owner": None,
                              "lease_expires_at": None}
    if summary is not None:
        values["summary"] = summary
    if error is not None:
        values["error"] = error
    res = session.execute(update(Job).where(Job.id == job_id, Job.lease_owner == owner,
                                            Job.status == "running").values(**values)
                          .execution_options(synchronize_session=False))
    session.commit()
    return res.rowcount == 1


def requeue_expired(session: Session, max_attempts: int) -> list[tuple[str, str]]:
    """Re-queue running jobs whose lease lapsed (their worker died); fail those out of attempts.

    Returns ``[(job id, new status)]``; each change is also an event.
    """
    now = utcnow()
    changed = []
    rows = session.execute(select(Job.id, Job.version, Job.attempts, Job.lease_owner)
                           .where(Job.status == "running", Job.lease_expires_at < now)).all()
    for r in rows:
        if r.attempts >= max_attempts:
            values: dict[str, Any] = {
                "status": "failed", "finished_at": now,
                "error": {"type": "worker-lost",
                          "message": f"the job's worker died {r.attempts} times"}}
        else:
            values = {"status": "queued"}
        res = session.execute(
            update(Job).where(Job.id == r.id, Job.version == r.version, Job.status == "running")
            .values(version=Job.version + 1, lease_owner=None, lease_expires_at=None, **values)
            .execution_options(synchronize_session=False))
        session.commit()
        if res.rowcount == 1:
            add_event(session, r.id, "requeued" if values["status"] == "queued" else "failed",
                      {"reason": f"lease of worker {r.lease_owner} expired", "attempt": r.attempts,
                       "status": values["status"]}, r.attempts)
            changed.append((r.id, values["status"]))
    return changed


def cancel_queued(session: Session, job: Job) -> bool:
    """Cancel a queued job at once (False if it was claimed meanwhile)."""
    res = session.execute(
        update(Job).where(Job.id == job.id, Job.status == "queued")
        .values(status="cancelled", version=Job.version + 1, finished_at=utcnow(),
                cancel_requested=True)
        .execution_options(synchronize_session=False))
    session.commit()
    if res.rowcount == 1:
        add_event(session, job.id, "cancelled", {"while": "queued"}, job.attempts)
        return True
    return False


def request_cancel(session: Session, job: Job) -> None:
    """Ask the worker running ``job`` to stop it (it polls the flag within a second)."""
    session.execute(update(Job).where(Job.id == job.id, Job.status == "running")
                    .values(cancel_requested=True).execution_options(synchronize_session=False))
    session.commit()


def add_artifact(session: Session, job_id: str, name: str, path: Path, media_type: str) -> None:
    """Record ``path`` as artifact ``name`` (size and SHA-256 taken now); replaces an older one."""
    data = path.read_bytes()
    old = session.scalar(select(JobArtifact).where(JobArtifact.job_id == job_id,
                                                   JobArtifact.name == name))
    if old is not None:
        session.delete(old)
        session.flush()
    session.add(JobArtifact(job_id=job_id, name=name, path=str(path), media_type=media_type,
                            size=len(data), sha256=hashlib.sha256(data).hexdigest()))
    session.commit()


def lease_expired(job: Job, now: datetime | None = None) -> bool:
    """The running job's lease has lapsed."""
    exp = as_utc(job.lease_expires_at)
    return job.status == "running" and exp is not None and exp < (now or utcnow())


def cancel_key_jobs(session: Session, key_id: str) -> tuple[int, int]:
    """Cancel every queued job of ``key_id`` at once and ask the workers running its jobs to stop
    them (they poll the flag every ``poll_s``). Returns ``(cancelled queued, stopping running)``."""
    n_q = n_r = 0
    for job in session.scalars(select(Job).where(Job.key_id == key_id,
                                                 Job.status.in_(("queued", "running")))).all():
        if job.status == "queued" and cancel_queued(session, job):
            n_q += 1
            continue
        session.refresh(job)
        if job.status == "running":
            request_cancel(session, job)
            n_r += 1
    return n_q, n_r
