"""The emulation verdict agrees everywhere: an emulated run whose outputs match but which has an
HB error is a FAIL in the agent's feedback, not ``emulated: ok`` in the table, and every rejected
iteration's reason is printed by ``ailower lower`` (not only kept in transcript.jsonl)."""

from __future__ import annotations

from rich.console import Console

from agent.loop import IterationRecord, LoweringResult
from emulator import EmulationResult
from verifier.findings import Finding


def _racy() -> EmulationResult:
    f = Finding(rule="HB1", severity="error", file="candidate.ptx", line=12, col=3,
                message="data race on shared memory")
    return EmulationResult(kernel="k", arch="sm_90a", size="verify", status="ok",
                           message="outputs match the float64 reference", findings=[f])


def test_ok_run_with_hb_error_is_not_a_pass():
    emu = _racy()
    assert not emu.ok and emu.verdict == "HB1"
    head = emu.summary().splitlines()[0]
    assert "FAIL" in head and "PASS" not in head and "HB1" in head
    assert emu.model_dump(mode="json")["verdict"] == "HB1"
    clean = EmulationResult(kernel="k", arch="sm_90a", size="verify", status="ok")
    assert clean.ok and clean.verdict == "ok" and "PASS" in clean.summary()


def test_lower_table_and_reasons_agree_with_feedback():
    from ailower._common import _print_result

    emu = _racy()
    recs = [
        IterationRecord(iteration=1, origin="llm", verdict="rejected-evaluation",
                        emulation=emu.model_dump(mode="json"),
                        feedback="ptxas ok\nverifier: no errors\nGPU evaluation skipped: no GPU "
                                 "on this host; " + emu.summary()),
        IterationRecord(iteration=2, origin="llm", verdict="rejected-verifier",
                        verifier={"findings": [{"severity": "error", "rule": "W3",
                                                "file": "candidate.ptx", "line": 40, "col": 5,
                                                "message": "reads a wgmma accumulator"}]}),
    ]
    res = LoweringResult(kernel="k", arch="sm_90a", provider="p", spec_id="x", started_at="now",
                         reference={}, gpu=False, iterations=recs)
    con = Console(record=True, width=200)
    _print_result(res, console=con)
    text = con.export_text()
    assert "emulated: HB1" in text and "emulated: ok" not in text
    assert "iteration 1 rejected-evaluation: " in text and "FAIL" in text
    assert "iteration 2 rejected-verifier: candidate.ptx:40:5: [W3]" in text
