"""Shared fixtures: GPU gating for ``@pytest.mark.gpu`` tests and an isolated data directory."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from harness.gpu.driver import probe_gpu
from tests import _cwd_guard

_GPU, _WHY = probe_gpu()

# The loop, CLI, service and campaign tests run the fast, deterministic `triton` provider; the
# default provider (`search`) has its own tests (tests/search, tests/cli/test_default_provider.py).
os.environ.setdefault("AILOWER_PROVIDER", "triton")

# Never the user's data directory (~/.ailower: caches, extracted sources, the run database), in
# this process or the CLI/server subprocesses the tests start (issue 21 defect 9); tests that need
# an empty one use the ``data_dir`` fixture.
_SESSION_DATA = tempfile.mkdtemp(prefix="ailower-test-data-")
os.environ["AILOWER_DATA_DIR"] = _SESSION_DATA
atexit.register(shutil.rmtree, _SESSION_DATA, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``gpu`` tests cleanly when there is no driver or device (the reason is shown)."""
    if _GPU:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {_WHY}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """An empty ``AILOWER_DATA_DIR`` (and default database) for one test."""
    d = tmp_path / "ailower-data"
    monkeypatch.setenv("AILOWER_DATA_DIR", str(d))
    monkeypatch.delenv("AILOWER_DB_URL", raising=False)
    monkeypatch.delenv("AILOWER_PTXAS", raising=False)
    return d


@pytest.fixture(scope="session")
def ref_cache(tmp_path_factory):
    """A reference-compile cache shared by the whole session (compiles are the slow part)."""
    return tmp_path_factory.mktemp("ref-cache")


_CWD = Path.cwd()


@pytest.fixture(autouse=True)
def _no_writes_into_the_working_directory():
    """Fail any test that creates, changes or deletes files in the folder pytest runs in
    (``tests/_cwd_guard.py``; issue 13: a test wrote ``./ailower-out``)."""
    before = _cwd_guard.snapshot(_CWD)
    yield
    diff = _cwd_guard.changes(before, _cwd_guard.snapshot(_CWD))
    if diff:
        pytest.fail(f"this test wrote into the working directory {_CWD}: " + "; ".join(diff[:10]),
                    pytrace=False)
