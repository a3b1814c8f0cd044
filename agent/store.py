"""Run records in a SQL database (SQLite by default) through SQLAlchemy 2.0.

One ``runs`` row per lowering (kernel, arch, provider, baseline, best candidate and its PTX, where
its files are) and one ``iterations`` row per proposal. The whole ``report.json`` and the best PTX
are kept in the run row, so nothing depends on the output folder surviving (a later run into the
same ``--out`` overwrites the files, not the record).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    create_engine,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from agent.loop import LoweringResult

__all__ = ["Base", "RunRow", "IterationRow", "RunStore", "StoreError", "run_summary", "utcnow",
           "as_utc"]


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def as_utc(t: datetime | None) -> datetime | None:
    """``t`` as aware UTC (SQLite hands naive datetimes back)."""
    if t is None:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


class StoreError(RuntimeError):
    """The database cannot be opened or written (message names the URL, without credentials)."""


class Base(DeclarativeBase):
    """Declarative base of ailower's tables."""


def create_tables(engine: Engine) -> None:
    """``Base.metadata.create_all`` that tolerates another process creating the same tables at the
    same moment (a campaign batch, its workers and a reader opening one new SQLite file): its
    check-then-create is not atomic, so the loser's ``CREATE TABLE`` fails with "already exists";
    the next pass sees the table and skips it.

    Raises:
        sqlalchemy.exc.SQLAlchemyError: any other failure, or "already exists" three times.
    """
    for attempt in range(3):
        try:
            Base.metadata.create_all(engine)
            return
        except OperationalError as exc:
            if "already exists" not in str(exc) or attempt == 2:
                raise
            time.sleep(0.05 * (attempt + 1))


class RunRow(Base):
    """One lowering run."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    kernel: Mapped[str] = mapped_column(String(200), index=True)
    spec_id: Mapped[str] = mapped_column(String(32))
    arch: Mapped[str] = mapped_column(String(16))
    provider: Mapped[str] = mapped_column(String(64))
    model: Mapped[str | None] = mapped_column(String(200))
    triton_version: Mapped[str] = mapped_column(String(32))
    device: Mapped[str | None] = mapped_column(String(128))
    gpu: Mapped[bool]
    baseline_config: Mapped[str] = mapped_column(String(200))
    baseline_ms: Mapped[float | None] = mapped_column(Float)
    best_iteration: Mapped[int | None]
    best_origin: Mapped[str | None] = mapped_column(String(200))
    best_speedup: Mapped[float | None] = mapped_column(Float)
    best_verdict: Mapped[str | None] = mapped_column(String(32))
    stop_reason: Mapped[str] = mapped_column(String(500))
    out_dir: Mapped[str | None] = mapped_column(Text)
    best_ptx: Mapped[str | None] = mapped_column(Text)
    report: Mapped[dict[str, Any]] = mapped_column(JSON)
    iterations: Mapped[list["IterationRow"]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="IterationRow.iteration")


class IterationRow(Base):
    """One proposal of a run."""

    __tablename__ = "iterations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    iteration: Mapped[int]
    origin: Mapped[str] = mapped_column(String(200))
    verdict: Mapped[str] = mapped_column(String(32))
    candidate_digest: Mapped[str | None] = mapped_column(String(32))
    speedup: Mapped[float | None] = mapped_column(Float)
    run: Mapped[RunRow] = relationship(back_populates="iterations")


class RunStore:
    """Open (and create) the database at ``url``.

    Raises:
        StoreError: the URL is invalid or the database cannot be created.
    """

    def __init__(self, url: str):
        self.url = url
        try:
            if url.startswith("sqlite:///"):
                Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = create_engine(url)
            create_tables(self.engine)
            self._add_missing_columns()
        except (SQLAlchemyError, OSError, ValueError) as exc:
            raise StoreError(f"cannot open the database {self._safe_url()}: {exc}") from None
        except ImportError as exc:  # e.g. postgresql:// without a driver such as psycopg
            raise StoreError(f"cannot open the database {self._safe_url()}: its driver is not "
                             f"installed ({exc.name or exc})") from None

    def _add_missing_columns(self) -> None:
        """Bring a database made by an older ailower up to date: add new nullable columns
        (``ALTER TABLE ... ADD COLUMN``); existing rows keep their data."""
        insp = inspect(self.engine)
        with self.engine.begin() as conn:
            for table in Base.metadata.sorted_tables:
                have = {c["name"] for c in insp.get_columns(table.name)}
                for col in table.columns:
                    if col.name in have:
                        continue
                    if not col.nullable:
                        raise StoreError(f"{self._safe_url()}: table {table.name!r} lacks the "
                                         f"required column {col.name!r}; use a new AILOWER_DB_URL")
                    ctype = col.type.compile(dialect=self.engine.dialect)
                    conn.execute(text(f'ALTER TABLE {table.name} ADD COLUMN {col.name} {ctype}'))

    def _safe_url(self) -> str:
        from sqlalchemy.engine import make_url

        try:
            return make_url(self.url).render_as_string(hide_password=True)
        except (SQLAlchemyError, ValueError):
            return "<invalid url>"

    def record(self, result: LoweringResult, report: dict[str, Any], *, model: str | None = None,
               out_dir: Path | None = None, session: Session | None = None) -> int:
        """Insert a run and its iterations; returns the run id.

        With ``session`` the row is added and flushed in the caller's transaction (the caller
        commits, e.g. together with the campaign cell that links to the run).

        Raises:
            StoreError: the write failed (the transaction is rolled back; nothing partial stays).
        """
        best = result.best
        base = report.get("reference", {})
        device = (base.get("device") or {}).get("name") if base.get("device") else None
        baseline_ms = None
        for row in base.get("autotune", []) or []:
            if row.get("config", "").endswith(f"[{base['baseline']['config']}]"):
                baseline_ms = row.get("median_ms")
        run = RunRow(
            created_at=utcnow(), kernel=result.kernel, spec_id=result.spec_id,
            arch=result.arch, provider=result.provider, model=model,
            triton_version=str(base.get("triton_version", "")), device=device, gpu=result.gpu,
            baseline_config=base.get("baseline", {}).get("config", ""), baseline_ms=baseline_ms,
            best_iteration=best.iteration if best else None, best_origin=best.origin if best else None,
            best_speedup=best.speedup if best else None, best_verdict=best.verdict if best else None,
            stop_reason=result.stop_reason,
            out_dir=str(Path(out_dir).absolute()) if out_dir else None,  # cwd-independent
            best_ptx=result.best_candidate.ptx if result.best_candidate else None,
            report=json.loads(json.dumps(report, default=str)),
            iterations=[IterationRow(iteration=r.iteration, origin=r.origin, verdict=r.verdict,
                                     candidate_digest=r.candidate_digest, speedup=r.speedup)
                        for r in result.iterations])
        if session is not None:
            session.add(run)
            session.flush()
            return run.id
        try:
            with Session(self.engine) as s, s.begin():
                s.add(run)
                s.flush()
                return run.id
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot record the run in {self._safe_url()}: {exc}") from None

    def runs(self, kernel: str | None = None, limit: int = 50) -> list[RunRow]:
        """Most recent runs first, optionally of one kernel."""
        q = select(RunRow).order_by(RunRow.id.desc()).limit(limit)
        if kernel:
            q = q.where(RunRow.kernel == kernel)
        with Session(self.engine, expire_on_commit=False) as s:
            return list(s.scalars(q))

    def latest_id(self) -> int | None:
        """The newest run's id, or None when no run is recorded."""
        with Session(self.engine) as s:
            return s.scalars(select(RunRow.id).order_by(RunRow.id.desc()).limit(1)).first()

    def get(self, run_id: int) -> RunRow | None:
        """One run with its iterations loaded, or None."""
        with Session(self.engine, expire_on_commit=False) as s:
            row = s.get(RunRow, run_id)
            if row is not None:
                _ = list(row.iterations)
            return row


def run_summary(row: RunRow, *, iterations: bool = False) -> dict[str, Any]:
    """A run as plain JSON-able data (what ``ailower runs --json`` and ``runs show`` print).

    Args:
        row: a run (with its iterations loaded when ``iterations`` is true: :meth:`RunStore.get`).
        iterations: include one entry per iteration.

    Returns:
        ``{id, created_at (ISO 8601, UTC), kernel, spec_id, arch, provider, model, triton_version,
        device, gpu, baseline_config, baseline_ms, best_iteration, best_origin, best_verdict,
        best_speedup, stop_reason, out_dir, has_ptx[, iterations]}``; times in ms.
    """
    out: dict[str, Any] = {
        "id": row.id, "created_at": row.created_at.isoformat(), "kernel": row.kernel,
        "spec_id": row.spec_id, "arch": row.arch, "provider": row.provider, "model": row.model,
        "triton_version": row.triton_version, "device": row.device, "gpu": row.gpu,
        "baseline_config": row.baseline_config, "baseline_ms": row.baseline_ms,
        "best_iteration": row.best_iteration, "best_origin": row.best_origin,
        "best_verdict": row.best_verdict, "best_speedup": row.best_speedup,
        "stop_reason": row.stop_reason, "out_dir": row.out_dir, "has_ptx": row.best_ptx is not None}
    if iterations:
        out["iterations"] = [{"iteration": it.iteration, "origin": it.origin, "verdict": it.verdict,
                              "candidate_digest": it.candidate_digest, "speedup": it.speedup}
                             for it in row.iterations]
    return out
