"""Prometheus metrics read from the database at scrape time (so every process's jobs count).

* ``ailower_queue_depth``: queued jobs.
* ``ailower_jobs{state=...}``: jobs by state.
* ``ailower_stage_seconds{stage=...}``: histogram of per-iteration stage wall times (``propose``,
  ``assemble``, ``verify``, ``evaluate``: the GPU evaluation latency) over the last
  :data:`WINDOW` iteration events.
* ``ailower_job_seconds``: histogram of submit-to-finish time of finished jobs (last WINDOW).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from server.db import STATUSES, Job, JobEvent, as_utc

__all__ = ["DBCollector", "WINDOW", "BUCKETS"]

WINDOW = 5000
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
           float("inf"))


def _hist(values: list[float]) -> tuple[list[tuple[str, float]], float]:
    buckets, acc = [], 0
    for b in BUCKETS:
        acc = sum(1 for v in values if v <= b)
        buckets.append(("+Inf" if b == float("inf") else repr(b), acc))
    return buckets, float(sum(values))


class DBCollector(Collector):
    """A custom collector over the server's tables (``sessionmaker`` gives sessions)."""

    def __init__(self, sessionmaker):
        self.sessionmaker = sessionmaker

    def collect(self) -> Iterator:
        """Yield the metric families listed in the module docstring."""
        with self.sessionmaker() as s:
            counts = dict(s.execute(select(Job.status, func.count()).group_by(Job.status)).all())
            datas = s.scalars(select(JobEvent.data).where(JobEvent.kind == "iteration")
                              .order_by(JobEvent.id.desc()).limit(WINDOW)).all()
            done = s.execute(select(Job.created_at, Job.finished_at)
                             .where(Job.finished_at.is_not(None))
                             .order_by(Job.finished_at.desc()).limit(WINDOW)).all()
        g = GaugeMetricFamily("ailower_queue_depth", "Queued lowering jobs")
        g.add_metric([], counts.get("queued", 0))
        yield g
        g = GaugeMetricFamily("ailower_jobs", "Lowering jobs by state", labels=["state"])
        for st in STATUSES:
            g.add_metric([st], counts.get(st, 0))
        yield g
        h = HistogramMetricFamily("ailower_stage_seconds",
                                  "Per-iteration stage wall time (evaluate = GPU evaluation)",
                                  labels=["stage"])
        for stage in ("propose", "assemble", "verify", "evaluate"):
            vals = [float(d["seconds"][stage]) for d in datas
                    if isinstance(d, dict) and isinstance(d.get("seconds"), dict)
                    and stage in d["seconds"]]
            b, total = _hist(vals)
            h.add_metric([stage], b, total)
        yield h
        h = HistogramMetricFamily("ailower_job_seconds", "Submit-to-finish time of lowering jobs")
        vals = [(as_utc(f) - as_utc(c)).total_seconds() for c, f in done]
        b, total = _hist(vals)
        h.add_metric([], b, total)
        yield h
