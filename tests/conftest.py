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

# The suite entries' narrow autotune spaces (issue 22 item 6 widened them to 24-224 configs):
# every lowering compiles its whole space, so the widened ones would multiply the compile time
# of the loop, CLI and campaign tests; the widened spaces have their own tests
# (tests/kernels/test_spaces.py) and their compile is measured by bench/compile_spaces.py.
os.environ.setdefault("AILOWER_AUTOTUNE_SPACE", "narrow")

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


LOAD_FACTOR = 10
"""How much longer than the product's the CPU budgets are in tests (issue 21 defect 10)."""


@pytest.fixture(autouse=True)
def _analysis_budgets_independent_of_load(monkeypatch):
    """Findings that must not depend on how busy the machine is.

    The verifier bounds its path-sensitive dataflow (``TIME_BUDGET_S``, 1 s) and B9's per-thread
    barrier evaluation (``BUDGET_S``, 0.5 s) by CPU time: past the budget a finding degrades to a
    note. On a loaded 2-core CI machine a test's PTX can cross that line (the B9 barrier tests
    failed once and passed on rerun), so tests run with budgets :data:`LOAD_FACTOR` times longer;
    the degradation itself is tested with budgets forced to zero
    (``tests/verifier/test_verifier_budget.py``) and speed is measured in ``bench/``. The loop's
    emulation wall limit (60 s) gets the same factor."""
    import agent.loop
    import verifier.analysis.dataflow as dataflow
    import verifier.rules.races as races

    monkeypatch.setattr(dataflow, "TIME_BUDGET_S", dataflow.TIME_BUDGET_S * LOAD_FACTOR)
    monkeypatch.setattr(races, "BUDGET_S", races.BUDGET_S * LOAD_FACTOR)
    monkeypatch.setattr(agent.loop, "EMULATION_TIME_LIMIT_S",
                        agent.loop.EMULATION_TIME_LIMIT_S * LOAD_FACTOR)


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
