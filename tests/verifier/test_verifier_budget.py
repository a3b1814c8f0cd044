"""Analysis budgets degrade to a note instead of running away (issue 12, speed). Budgets are CPU
time (``time.process_time``); here they are set to zero so every budget check trips at once.
Timing itself is measured in ``bench/verify_speed.py``, never here."""

from __future__ import annotations

from pathlib import Path

import verifier.analysis.dataflow as dataflow
import verifier.rules.races as races
from verifier import verify

CASES = Path(__file__).parent / "fixtures" / "cases"
KINDS = Path(__file__).parent / "fixtures" / "kinds"


def test_dataflow_budget_gives_a_fixed_point_note(monkeypatch):
    text = (CASES / "br09_tmem_ld_unwaited_before_release.ptx").read_text()
    assert "TL4" in {f.rule for f in verify(text, arch="sm_100a").errors}
    monkeypatch.setattr(dataflow, "TIME_BUDGET_S", -1.0)
    report = verify(text, arch="sm_100a")
    notes = [f for f in report.findings if f.severity == "note"
             and "did not reach a fixed point" in f.message]
    assert notes, report.render()


def test_per_thread_budget_gives_a_b9_note(monkeypatch):
    text = (KINDS / "b9_exchange_overwrite_no_barrier.ptx").read_text()
    assert "B9" in {f.rule for f in verify(text, arch="sm_80").errors}
    monkeypatch.setattr(races, "BUDGET_S", -1.0)
    report = verify(text, arch="sm_80")
    assert "B9" not in {f.rule for f in report.errors}
    assert any(f.rule == "B9" and f.severity == "note" and "budget" in f.message
               for f in report.findings), report.render()


def test_long_redefinition_chain_keeps_uniformity():
    """512 chained fma on one register: every link is defined once in straight-line code, so the
    register stays uniform and nothing is reported (the reaching-definitions analysis links
    each use to the one definition before it)."""
    text = (CASES / "slow_redefinition_chain.ptx").read_text()
    report = verify(text, arch="sm_90a")
    assert report.ok and not report.findings, report.render()
