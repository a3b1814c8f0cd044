"""The server's tables (SQLAlchemy 2.0 typed declarative mapping) and engine set-up.

SQLite (the default, in WAL mode with a busy timeout so that the API, the job slots and the job
runner processes can write concurrently) and PostgreSQL are reached through the same SQLAlchemy
URL (``AILOWER_DB_URL``). The tables live next to :mod:`agent.store`'s ``runs`` tables, under
their own names (``api_keys``, ``jobs``, ``job_events``, ``job_artifacts``).

A job's ``version`` counter is bumped by every state change; a state change names the version it
read, so of two racing writers only one advances the job (``sqla:doc/build/orm/versioning.rst``).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from agent.store import as_utc, utcnow

__all__ = ["Base", "ApiKey", "Job", "JobEvent", "JobArtifact", "make_engine", "make_sessionmaker",
           "utcnow", "as_utc", "TERMINAL", "STATUSES"]

STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


class Base(DeclarativeBase):
    """Declarative base of the server's tables."""


class ApiKey(Base):
    """A client API key: only its argon2 hash is stored; ``key_id`` is the public prefix."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key_id: Mapped[str] = mapped_column(String(32), unique=True, index=True)
    name: Mapped[str] = mapped_column(String(200))
    hash: Mapped[str] = mapped_column(String(256))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    rate_per_minute: Mapped[int] = mapped_column(Integer)
    max_concurrent: Mapped[int] = mapped_column(Integer)
    max_body_bytes: Mapped[int] = mapped_column(Integer)
    max_ptx_bytes: Mapped[int] = mapped_column(Integer)
    max_source_bytes: Mapped[int] = mapped_column(Integer)


class Job(Base):
    """One lowering request and its state."""

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("key_id", "idempotency_key", name="uq_jobs_idempotency"),
                      Index("ix_jobs_status_created", "status", "created_at"))

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(32), ForeignKey("api_keys.key_id"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    version: Mapped[int] = mapped_column(Integer, default=1)
    kernel: Mapped[str] = mapped_column(String(200), index=True)
    arch: Mapped[str] = mapped_column(String(16))
    provider: Mapped[str] = mapped_column(String(32))
    model: Mapped[str | None] = mapped_column(String(200))
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    request_hash: Mapped[str] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    untrusted_source: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    lease_owner: Mapped[str | None] = mapped_column(String(120))
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    eval_seconds: Mapped[float | None] = mapped_column(Float)


class JobEvent(Base):
    """One entry of a job's event log; ``seq`` (1, 2, ... per job) is the SSE event id. ``id``
    is global and stays internal: as an API id it would tell a tenant how many events every other
    tenant's jobs produced meanwhile."""

    __tablename__ = "job_events"
    __table_args__ = (Index("ix_job_events_job_id_id", "job_id", "id"),
                      UniqueConstraint("job_id", "seq", name="uq_job_events_seq"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(36), ForeignKey("jobs.id"))
    seq: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    kind: Mapped[str] = mapped_column(String(40))
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class JobArtifact(Base):
    """A file a job produced, kept under the data directory; ``sha256`` guards its content."""

    __tablename__ = "job_artifacts"
    __table_args__ = (UniqueConstraint("job_id", "name", name="uq_job_artifacts_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(String(36), ForeignKey("jobs.id"), index=True)
    name: Mapped[str] = mapped_column(String(32))
    path: Mapped[str] = mapped_column(Text)
    media_type: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with the server's tables created.

    SQLite: WAL journal, ``synchronous=NORMAL``, a 30 s busy timeout and foreign keys on, for every
    connection (https://www.sqlite.org/wal.html). The parent folder of a SQLite file is created
    (mode 0700) and the file itself with mode 0600 (SQLite gives its ``-wal``/``-shm`` files the
    database file's mode).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database cannot be reached or the tables created.
    """
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if url.startswith("sqlite"):
        from pathlib import Path

        from sqlalchemy.engine import make_url

        db = make_url(url).database
        if db and db != ":memory:":
            path = Path(db).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not path.exists():
                # created 0600, never wider. Only when absent: closing any descriptor of an open
                # SQLite file drops this process's POSIX locks on it (sqlite.org/howtocorrupt.html)
                try:
                    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                except FileExistsError:
                    pass
            for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
                if p.exists():
                    os.chmod(p, 0o600)
        kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
    engine = create_engine(url, **kwargs)
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()
    Base.metadata.create_all(engine)
    _add_event_seq(engine)
    return engine


def _add_event_seq(engine: Engine) -> None:
    """Databases made before per-job event ids: add ``job_events.seq`` and set it to the old
    global id, so that a client's ``Last-Event-ID`` from before the upgrade still resumes (new
    events continue from the job's largest ``seq``)."""
    from sqlalchemy import inspect, text

    if "seq" in {c["name"] for c in inspect(engine).get_columns("job_events")}:
        return
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE job_events ADD COLUMN seq INTEGER"))
        conn.execute(text("UPDATE job_events SET seq = id"))
        conn.execute(text("CREATE UNIQUE INDEX uq_job_events_seq ON job_events (job_id, seq)"))


def make_sessionmaker(engine: Engine) -> sessionmaker:
    """Sessions that keep loaded attributes after commit (rows are read after the transaction)."""
    return sessionmaker(engine, expire_on_commit=False)
