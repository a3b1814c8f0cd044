"""Campaigns and their cells in the run database (SQLAlchemy 2.0), with atomic, resumable claims.

Tables (next to :mod:`agent.store`'s ``runs``/``iterations``, in the same metadata so that a cell
can reference its run): ``campaigns`` (one row per ``--campaign NAME``) and ``campaign_cells`` (one
row per (kernel, arch, provider, model); unique within a campaign).

Cell life cycle: ``pending -> running -> done | failed``. Every state change is one conditional
``UPDATE`` naming the state (and, for a running cell, the owner) it read, so of two racing workers
exactly one wins (compare-and-set; works the same on SQLite and PostgreSQL). A cell becomes
``done`` in the *same* transaction that inserts its run row, so a ``kill -9`` at any instant
leaves either both or neither: no finished cell is lost, and a finished cell is never claimed
again.

Dead claims. A claim records its owner as ``host:pid:start`` (``start``: the process start time in
clock ticks since boot, ``/proc/<pid>/stat`` field 22, so a recycled pid is not mistaken for the
owner) and a lease (``lease_until``) that the owner renews while it works. A running cell is
claimable again when its lease has lapsed, or at once when its owner ran on this host and that
process no longer exists (checked with :func:`owner_alive`); a claim whose lease lapsed is
claimable whoever holds it (its owner stopped renewing). After ``max_attempts`` claims a cell
is failed (``worker-lost``) instead of being retried forever.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
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
    UniqueConstraint,
    create_engine,
    event,
    func,
    select,
    update,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Mapped, mapped_column, sessionmaker

from agent.store import Base, RunRow, RunStore, StoreError, as_utc, create_tables, utcnow

__all__ = ["CampaignRow", "CellRow", "CampaignStore", "CellKey", "owner_id", "owner_alive",
           "utcnow", "CELL_STATUSES"]

CELL_STATUSES = ("pending", "running", "done", "failed")
"""Cell states (see the module docstring)."""


class CampaignRow(Base):
    """One campaign: its name and what it was asked to cover."""

    __tablename__ = "campaigns"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    iterations: Mapped[int] = mapped_column(Integer)
    plan: Mapped[dict[str, Any]] = mapped_column(JSON)


class CellRow(Base):
    """One (kernel, arch, provider, model) cell of a campaign.

    Attributes:
        kernel: suite name or the spec's name for a user spec file; ``spec_ref`` says how to load
            it (``suite:NAME`` or ``file:/abs/path.yaml``) and ``spec_id`` pins its identity.
        model: ``""`` for providers without a model (the offline ``triton`` provider).
        status: ``pending`` | ``running`` | ``done`` | ``failed``.
        mode: ``gpu`` or ``static`` (set when claimed); ``static_reason`` says why no GPU.
        owner, lease_until: the live claim (``host:pid:start``) while running.
        attempts: times the cell was claimed.
        run_id: the recorded run (``runs.id``) of a done cell.
        summary: the leaderboard's view of the run (see :mod:`campaign.summary`).
        error: ``{"type", "message"}`` of a failed cell.
        seconds: wall time of the finished attempt.
    """

    __tablename__ = "campaign_cells"
    __table_args__ = (UniqueConstraint("campaign_id", "kernel", "arch", "provider", "model",
                                       name="uq_campaign_cell"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), index=True)
    kernel: Mapped[str] = mapped_column(String(200))
    spec_ref: Mapped[str] = mapped_column(Text)
    spec_id: Mapped[str] = mapped_column(String(32))
    arch: Mapped[str] = mapped_column(String(16))
    provider: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(200), default="")
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    mode: Mapped[str | None] = mapped_column(String(8))
    static_reason: Mapped[str | None] = mapped_column(Text)
    owner: Mapped[str | None] = mapped_column(String(300))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    seconds: Mapped[float | None] = mapped_column(Float)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON)


@dataclass(frozen=True)
class CellKey:
    """What a cell covers (the unique key within a campaign, plus how to load the spec)."""

    kernel: str
    spec_ref: str
    spec_id: str
    arch: str
    provider: str
    model: str = ""


def _proc_start(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None
    when there is no such process (or no ``/proc``), or it has exited and is only a zombie
    waiting to be reaped (state ``Z``/``X``: in a container whose init does not reap, a worker
    killed with its batch stays one, and its claim must still count as dead; proc(5))."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may contain spaces: split after it
    rest = raw.rsplit(")", 1)[1].split()
    if rest[0] in ("Z", "X"):
        return None
    return rest[19]  # field 22 overall = index 19 after the state field (field 3)


def owner_id(pid: int | None = None) -> str:
    """``host:pid:start`` of this process (or of ``pid`` on this host)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_proc_start(pid) or '?'}"


def owner_alive(owner: str) -> bool | None:
    """Whether the process named by ``owner`` (``host:pid:start``) still runs.

    Returns:
        True / False for an owner on this host; None when it ran on another host (then only its
        lease can tell).
    """
    parts = owner.rsplit(":", 2)
    if len(parts) != 3:
        return None
    host, pid, start = parts
    if host != socket.gethostname():
        return None
    try:
        now = _proc_start(int(pid))
    except ValueError:
        return None
    return now is not None and now == start


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with every ailower run/campaign table created.

    SQLite: WAL journal and a 30 s busy timeout on every connection, so that the batch, its
    worker processes and Ray tasks can write concurrently (https://www.sqlite.org/wal.html).

    Raises:
        StoreError: the URL is invalid, its driver is missing, or the tables cannot be created.
    """
    RunStore(url)  # creates runs/iterations and brings an older database up to date
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    try:
        if make_url(url).get_backend_name() == "sqlite":
            kwargs["connect_args"] = {"timeout": 30}
        engine = create_engine(url, **kwargs)
    except (SQLAlchemyError, ValueError) as exc:
        raise StoreError(f"cannot open the database: {exc}") from None
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()
    try:
        create_tables(engine)
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot create the campaign tables: {exc}") from None
    return engine


class CampaignStore:
    """Campaigns and cells in the database at ``url`` (``AILOWER_DB_URL``).

    Args:
        url: SQLAlchemy URL.
        lease_s: how long a claim stays valid without renewal, seconds.
        max_attempts: claims of one cell before it is failed as ``worker-lost``.

    Raises:
        StoreError: the database cannot be opened.
    """

    def __init__(self, url: str, *, lease_s: float = 60.0, max_attempts: int = 3):
        if lease_s <= 0:
            raise ValueError(f"lease_s must be > 0, got {lease_s}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.url, self.lease_s, self.max_attempts = url, lease_s, max_attempts
        self.engine = make_engine(url)
        self.runs = RunStore(url)
        self.Session = sessionmaker(self.engine, expire_on_commit=False)

    # ---- campaigns -------------------------------------------------------------------------

    def ensure_campaign(self, name: str, iterations: int, cells: Iterable[CellKey],
                        plan: dict[str, Any]) -> tuple[CampaignRow, int]:
        """Create campaign ``name`` (or open it) and add the cells it lacks.

        Returns:
            ``(campaign, cells added)``; cells already there (done or not) are kept as they are.

        Raises:
            StoreError: the campaign exists with a different iteration budget (resuming it with
                another budget would mix incomparable cells), or the database write failed.
        """
        cells = list(cells)
        with self.Session() as s:
            row = s.scalar(select(CampaignRow).where(CampaignRow.name == name))
            if row is None:
                row = CampaignRow(name=name, created_at=utcnow(), iterations=iterations, plan=plan)
                s.add(row)
                try:
                    s.commit()
                except IntegrityError:  # another batch created it a moment ago
                    s.rollback()
                    row = s.scalar(select(CampaignRow).where(CampaignRow.name == name))
                    assert row is not None
            if row.iterations != iterations:
                raise StoreError(f"campaign {name!r} runs {row.iterations} iterations per cell; "
                                 f"--iterations {iterations} differs (use another --campaign)")
            have = {(c.kernel, c.arch, c.provider, c.model): c.spec_id for c in s.scalars(
                select(CellRow).where(CellRow.campaign_id == row.id))}
            added = 0
            for k in cells:
                old = have.get((k.kernel, k.arch, k.provider, k.model))
                if old is not None:
                    if old != k.spec_id:
                        raise StoreError(
                            f"campaign {name!r}: kernel {k.kernel!r} changed since the campaign "
                            f"was planned (spec id {old} -> {k.spec_id}); use another --campaign")
                    continue
                s.add(CellRow(campaign_id=row.id, kernel=k.kernel, spec_ref=k.spec_ref,
                              spec_id=k.spec_id, arch=k.arch, provider=k.provider, model=k.model,
                              status="pending", attempts=0))
                added += 1
            try:
                s.commit()
            except IntegrityError:  # a concurrent planner added the same cells: keep theirs
                s.rollback()
                added = 0
            return row, added

    def campaign(self, name: str) -> CampaignRow | None:
        """The campaign called ``name``, or None."""
        with self.Session() as s:
            return s.scalar(select(CampaignRow).where(CampaignRow.name == name))

    def campaign_by_id(self, campaign_id: int) -> CampaignRow | None:
        """The campaign with ``campaign_id``, or None."""
        with self.Session() as s:
            return s.get(CampaignRow, campaign_id)

    def campaigns(self) -> list[CampaignRow]:
        """Every campaign, newest first."""
        with self.Session() as s:
            return list(s.scalars(select(CampaignRow).order_by(CampaignRow.id.desc())))

    def cells(self, campaign_id: int | None = None, *, status: str | None = None) -> list[CellRow]:
        """Cells of one campaign (or of all), in id order."""
        q = select(CellRow).order_by(CellRow.id)
        if campaign_id is not None:
            q = q.where(CellRow.campaign_id == campaign_id)
        if status is not None:
            q = q.where(CellRow.status == status)
        with self.Session() as s:
            return list(s.scalars(q))

    def cell(self, cell_id: int) -> CellRow | None:
        """One cell, or None."""
        with self.Session() as s:
            return s.get(CellRow, cell_id)

    # ---- claims ----------------------------------------------------------------------------

    def release_dead(self, campaign_id: int) -> list[int]:
        """Put back to ``pending`` the running cells whose owner is known dead (same host, process
        gone) or whose lease lapsed (even if the owner process lives: it stopped renewing, e.g. a
        reused Ray worker after an error); fail those out of attempts (``worker-lost``). A former
        owner that finishes later is refused by :meth:`finish` (it no longer owns the cell).

        Returns:
            the ids of the cells changed.
        """
        now = utcnow()
        changed: list[int] = []
        with self.Session() as s:
            rows = s.execute(select(CellRow.id, CellRow.owner, CellRow.lease_until,
                                    CellRow.attempts)
                             .where(CellRow.campaign_id == campaign_id,
                                    CellRow.status == "running")).all()
            for r in rows:
                lease = as_utc(r.lease_until)
                alive = owner_alive(r.owner) if r.owner else False
                # a live owner renews its lease while it works on the cell (a heartbeat thread);
                # a lapsed lease means it died elsewhere, or lives on without working on the cell
                if alive is not False and lease is not None and lease > now:
                    continue
                why = ("its worker process is gone" if alive is False
                       else "its lease lapsed")
                if r.attempts >= self.max_attempts:
                    values: dict[str, Any] = {
                        "status": "failed", "finished_at": now,
                        "error": {"type": "worker-lost",
                                  "message": f"claimed {r.attempts} times and {why} each time "
                                             f"(last owner {r.owner})"}}
                else:
                    values = {"status": "pending"}
                res = s.execute(update(CellRow).where(
                    CellRow.id == r.id, CellRow.status == "running", CellRow.owner == r.owner)
                    .values(owner=None, lease_until=None, **values)
                    .execution_options(synchronize_session=False))
                s.commit()
                if res.rowcount == 1:
                    changed.append(r.id)
        return changed

    def claim(self, campaign_id: int, owner: str, *, archs: Iterable[str] | None = None,
              exclude_archs: Iterable[str] = (), cell_id: int | None = None,
              mode: str, static_reasons: dict[str, str] | None = None) -> CellRow | None:
        """Claim one pending cell for ``owner`` (atomically: compare-and-set on its state).

        Args:
            campaign_id: the campaign.
            owner: :func:`owner_id` of the claiming process.
            archs: only cells of these archs (None: any).
            exclude_archs: never cells of these archs (the static pool leaves GPU archs alone).
            cell_id: claim exactly this cell (Ray tasks), else the lowest pending id.
            mode: ``gpu`` | ``static``: recorded on the cell.
            static_reasons: arch -> why a static cell of that arch gets no GPU (recorded).

        Returns:
            the claimed cell (``running``, ``attempts`` + 1), or None when nothing matches or
            every race was lost.
        """
        archs = None if archs is None else list(archs)
        exclude = list(exclude_archs)
        for _ in range(20):
            with self.Session() as s:
                q = select(CellRow.id, CellRow.arch).where(CellRow.campaign_id == campaign_id,
                                             CellRow.status == "pending")
                if cell_id is not None:
                    q = q.where(CellRow.id == cell_id)
                if archs is not None:
                    q = q.where(CellRow.arch.in_(archs))
                if exclude:
                    q = q.where(CellRow.arch.not_in(exclude))
                row = s.execute(q.order_by(CellRow.id).limit(1)).first()
                if row is None:
                    return None
                cid = row.id
                reason = (static_reasons or {}).get(row.arch) if mode == "static" else None
                now = utcnow()
                res = s.execute(update(CellRow).where(CellRow.id == cid,
                                                      CellRow.status == "pending")
                                .values(status="running", owner=owner, mode=mode,
                                        static_reason=reason, claimed_at=now,
                                        lease_until=now + timedelta(seconds=self.lease_s),
                                        attempts=CellRow.attempts + 1)
                                .execution_options(synchronize_session=False))
                s.commit()
                if res.rowcount == 1:
                    return s.get(CellRow, cid, populate_existing=True)
            if cell_id is not None:
                return None
        return None

    def renew(self, cell_id: int, owner: str) -> bool:
        """Extend ``owner``'s lease on a running cell; False if it no longer owns it."""
        with self.Session() as s:
            res = s.execute(update(CellRow).where(CellRow.id == cell_id, CellRow.owner == owner,
                                                  CellRow.status == "running")
                            .values(lease_until=utcnow() + timedelta(seconds=self.lease_s))
                            .execution_options(synchronize_session=False))
            s.commit()
            return res.rowcount == 1

    def finish(self, cell_id: int, owner: str, *, result: Any, report: dict[str, Any],
               summary: dict[str, Any], model: str | None, out_dir: Path | None,
               seconds: float) -> int | None:
        """Record the cell's run and mark the cell ``done``, in one transaction.

        Returns:
            the run id, or None when ``owner`` no longer holds the cell (nothing is written).

        Raises:
            StoreError: the write failed (rolled back: the cell stays claimed and will be retried).
        """
        try:
            with self.Session() as s, s.begin():
                run_id = self.runs.record(result, report, model=model, out_dir=out_dir, session=s)
                res = s.execute(update(CellRow).where(CellRow.id == cell_id,
                                                      CellRow.owner == owner,
                                                      CellRow.status == "running")
                                .values(status="done", run_id=run_id, summary=summary,
                                        finished_at=utcnow(), seconds=seconds, owner=None,
                                        lease_until=None, error=None)
                                .execution_options(synchronize_session=False))
                if res.rowcount != 1:
                    s.rollback()
                    return None
                return run_id
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot record cell {cell_id}: {exc}") from None

    def fail(self, cell_id: int, owner: str, error: dict[str, Any], seconds: float) -> bool:
        """Mark ``owner``'s running cell ``failed`` with ``error`` (``{"type", "message"}``)."""
        with self.Session() as s:
            res = s.execute(update(CellRow).where(CellRow.id == cell_id, CellRow.owner == owner,
                                                  CellRow.status == "running")
                            .values(status="failed", error=error, finished_at=utcnow(),
                                    seconds=seconds, owner=None, lease_until=None)
                            .execution_options(synchronize_session=False))
            s.commit()
            return res.rowcount == 1

    def retry_failed(self, campaign_id: int) -> int:
        """Put the campaign's failed cells back to ``pending`` (``--retry-failed``); returns how
        many, with their attempt counters reset."""
        with self.Session() as s:
            res = s.execute(update(CellRow).where(CellRow.campaign_id == campaign_id,
                                                  CellRow.status == "failed")
                            .values(status="pending", attempts=0, error=None)
                            .execution_options(synchronize_session=False))
            s.commit()
            return res.rowcount

    def counts(self, campaign_id: int) -> dict[str, int]:
        """Cells per status."""
        with self.Session() as s:
            rows = s.execute(select(CellRow.status, func.count()).where(
                CellRow.campaign_id == campaign_id).group_by(CellRow.status)).all()
        out = {k: 0 for k in CELL_STATUSES}
        out.update({st: n for st, n in rows})
        return out

    def runs_for(self, run_ids: Iterable[int]) -> dict[int, RunRow]:
        """Run rows by id."""
        ids = list(run_ids)
        if not ids:
            return {}
        with self.Session() as s:
            return {r.id: r for r in s.scalars(select(RunRow).where(RunRow.id.in_(ids)))}

    def claimable(self, campaign_id: int, exclude_archs: Iterable[str] = ()) -> int:
        """Pending cells (outside ``exclude_archs``)."""
        q = select(func.count()).select_from(CellRow).where(CellRow.campaign_id == campaign_id,
                                                            CellRow.status == "pending")
        ex = list(exclude_archs)
        if ex:
            q = q.where(CellRow.arch.not_in(ex))
        with self.Session() as s:
            return int(s.scalar(q) or 0)

