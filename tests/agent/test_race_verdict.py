"""agent.loop.race_verdict: racecheck's report, or the emulator's where racecheck misjudges."""

from __future__ import annotations

from types import SimpleNamespace

from agent.loop import race_verdict
from harness.evaluate import RaceGateResult


def _emu(status: str, ok: bool, text: str = "PASS"):
    return SimpleNamespace(status=status, ok=ok, summary=lambda: text)


def _never():
    raise AssertionError("emulation must not run")


def test_a_clean_gate_passes_without_emulation():
    assert race_verdict(RaceGateResult(ran=True, ok=True), _never) == (True, "")


def test_a_hazard_in_a_kernel_racecheck_judges_rejects_without_emulation():
    g = RaceGateResult(ran=True, ok=False, tool="racecheck", message="reports a hazard")
    assert race_verdict(g, _never) == (False, "")


def test_a_synccheck_error_is_never_overruled():
    g = RaceGateResult(ran=True, ok=False, tool="synccheck", message="reports a hazard")
    assert race_verdict(g, _never)[0] is False


def test_unreliable_racecheck_defers_to_happens_before():
    g = RaceGateResult(ran=True, ok=False, tool="racecheck", message="reports a hazard",
                       racecheck_unreliable="1 barrier instruction(s) with a thread count below")
    ok, note = race_verdict(g, lambda: _emu("ok", True))
    assert ok and "overruled" in note
    for emu in (_emu("ok", False, "FAIL (outputs match, but 1 happens-before error(s): HB1)"),
                _emu("unsupported", False), _emu("timeout", False), _emu("fault", False)):
        ok, note = race_verdict(g, lambda emu=emu: emu)
        assert not ok and "stand" in note and emu.status in note
