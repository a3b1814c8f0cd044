"""Static false alarms found by red team round 8 (2026-12-04, sm_90a kernels written the way
CUTLASS / DeepGEMM / ThunderKittens write them; fixtures in fixtures/redteam8, each assembled
by ptxas 12.9 for sm_90a and emulated with no HB finding when correct):

* MB5 on the ring-slot / phase update ``setp.eq %p, %stage, 2; selp %t, 1, 0, %p; xor %phase,
  %phase, %t; add %stage, %stage, 1; selp %stage, 0, %stage, %p`` (and the form incrementing
  first, comparing with 3): the loop-carried registers were updated one by one from the
  iteration's start values, so the compare read the slot after its increment (or before);
  now the update block runs instruction by instruction;
* MB5 on ``mbarrier.try_wait.parity ... %p, [bar], %phase, %hint`` (CUTLASS's
  ``ClusterBarrier::wait`` with a suspend-time hint): the hint, the last operand, was read as
  the parity (PTX ISA 9.1 §9.7.13.15.16: the hint is optional, after the parity).

A parity really flipped in the same kernel is still MB5."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifier import verify

FIX = Path(__file__).resolve().parent / "fixtures" / "redteam8"


def _errors(name: str) -> list[str]:
    text = (FIX / name).read_text()
    rep = verify(text, arch="sm_90a", filename=name)
    return [f"{f.rule}:{f.line}" for f in rep.findings if f.severity == "error"]


@pytest.mark.parametrize("name", ["k7_persistent.ptx", "k7_persistent_alt_update.ptx",
                                  "k3_mcast2x1.ptx", "k3_mcast2x1_suspend_hint.ptx",
                                  "k3_mcast2x1_suspend_hint_odd.ptx",
                                  "k3_mcast2x1_cutlass_syntax.ptx"])
def test_correct_kernel_has_no_error(name):
    assert _errors(name) == []


def test_flipped_consumer_parity_is_still_mb5():
    assert any(e.startswith("MB5:") for e in _errors("k7_persistent_bug_cons_parity.ptx"))
