"""The run store: records, listing, and opening a database made by an older ailower."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import kernels
from agent.loop import LoopOptions, build_report, lower
from agent.providers.triton import TritonProvider
from agent.store import RunStore, StoreError


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    cache = tmp_path_factory.mktemp("c")
    return lower(kernels.get("vector_add"), "sm_90a", TritonProvider(cache_dir=cache),
                 LoopOptions(iterations=2, cache_dir=cache))


def test_record_and_read_back(tmp_path, result):
    store = RunStore(f"sqlite:///{tmp_path / 'db' / 'runs.db'}")
    rid = store.record(result, build_report(result), out_dir=tmp_path)
    row = store.get(rid)
    assert (row.kernel, row.arch, row.provider, row.gpu) == ("vector_add", "sm_90a", "triton", False)
    assert [i.verdict for i in row.iterations] == ["static-only", "static-only"]
    assert row.best_ptx == result.best_candidate.ptx and row.best_iteration == 1
    assert row.report["verifier"]["ok"] is True
    assert [r.id for r in store.runs(kernel="vector_add")] == [rid]
    assert store.runs(kernel="softmax") == []


def test_out_dir_is_recorded_absolute(tmp_path, result, monkeypatch):
    """Issue 21 defect 8: a relative --out was stored as given, meaningless from another cwd."""
    monkeypatch.chdir(tmp_path)
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    rid = store.record(result, build_report(result), out_dir=Path("ailower-out/x"))
    assert store.get(rid).out_dir == str(tmp_path / "ailower-out" / "x")


def test_old_database_gains_new_columns_and_keeps_rows(tmp_path, result):
    path = tmp_path / "old.db"
    store = RunStore(f"sqlite:///{path}")
    rid = store.record(result, build_report(result))
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE runs DROP COLUMN best_ptx")
    con.commit()
    con.close()
    again = RunStore(f"sqlite:///{path}")
    assert again.get(rid).kernel == "vector_add" and again.get(rid).best_ptx is None
    assert again.get(again.record(result, build_report(result))).best_ptx


def test_bad_url_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="cannot open the database"):
        RunStore("nosuchdialect://x")


def test_concurrent_creators_of_one_new_database_all_succeed(tmp_path):
    """Several processes (a campaign batch, its workers, a reader) may open one new SQLite file at
    once; create_all's check-then-create races ("table ... already exists") unless retried."""
    import threading

    from sqlalchemy import create_engine

    import campaign.store  # noqa: F401  (its tables are on the same metadata)
    from agent.store import create_tables

    errors: list[BaseException] = []
    for trial in range(10):
        url = f"sqlite:///{tmp_path}/race{trial}.db"

        def create(url: str = url) -> None:
            try:
                create_tables(create_engine(url))
            except Exception as exc:  # collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=create) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
