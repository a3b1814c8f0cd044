"""harness.racecheck_view: barrier 0 renumbered for racecheck only where that is an isomorphism."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.racecheck_view import racecheck_view

ROOT = Path(__file__).resolve().parents[2]
WS = ROOT / "tests" / "verifier" / "fixtures" / "fast36" / "fast.attention_ws_sm_90a.ptx"
_IDS = re.compile(r"(?<![\w.$])(?:bar|barrier)(?:\.(?:cta|sync|arrive|aligned))+\s+(\w+)")


def _kernel(body: str) -> str:
    return (".version 8.0\n.target sm_90a\n.address_size 64\n"
            ".visible .entry k()\n{\n\t.reg .b32 %r<4>;\n" + body + "\n\tret;\n}\n")


def test_triton_ws_kernel_gets_a_free_barrier():
    text = WS.read_text()
    before = _IDS.findall(text)
    view, note = racecheck_view(text)
    after = _IDS.findall(view)
    assert "0" in before and "0" not in after
    free = int(re.search(r"renumbered to (\d+)", note).group(1))
    assert str(free) not in before and 1 <= free <= 15
    # every barrier-0 use, and only those, changed; the rest of the text is the same
    assert [("0" if a == str(free) else a) for a in after] == before
    assert view.replace(f"bar.sync \t{free}, 128", "bar.sync \t0, 128") == text
    assert "23 uses, each with thread count 128" in note


def test_renumbered_copy_assembles():
    from harness.ptxas import assemble
    view, note = racecheck_view(WS.read_text())
    assert note
    asm = assemble(view, "sm_90a")
    assert asm.ok, asm.diagnostics


@pytest.mark.parametrize("body, why", [
    ("\tbar.sync 0, 128;\n\tbar.sync 0;", "a use of barrier 0 without a count (all threads)"),
    ("\tbar.sync 0, 128;\n\tbar.sync %r1, 128;", "a register barrier id"),
    ("\tbar.sync 0, 128;\n\tbar.arrive 0, 256;", "two different counts"),
    ("\tbar.sync 0, %r2;", "a register count"),
    ("\tbar.sync 1, 128;\n\tbarrier.sync 2;", "no barrier 0"),
    ("".join(f"\tbar.sync {i}, 128;\n" for i in range(16)), "no free barrier id"),
    ("\tbar.red.popc.u32 %r1, 0, %r2;\n\tbar.sync 0, 128;", "bar.red on barrier 0 without a count"),
])
def test_left_alone(body, why):
    text = _kernel(body)
    assert racecheck_view(text) == (text, ""), why


def test_other_synchronisation_untouched():
    body = ("\tbar.warp.sync -1;\n\tbarrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;\n"
            "\tbar.sync 0, 64;\n\tbarrier.sync.aligned 0, 64;\n\tbar.arrive 0, 64;\n"
            "\tbar.red.popc.u32 %r1, 0, 64, %p1;\n")
    view, note = racecheck_view(_kernel(body))
    assert note and "4 uses" in note
    assert "bar.warp.sync -1;" in view and "barrier.cluster.arrive.aligned;" in view
    assert "bar.sync 1, 64;" in view and "barrier.sync.aligned 1, 64;" in view
    assert "bar.arrive 1, 64;" in view and "bar.red.popc.u32 %r1, 1, 64, %p1;" in view


def test_mbarrier_and_labels_are_not_barriers():
    body = "$L__bar0:\n\tmbarrier.init.shared::cta.b64 [%r1], 1;\n\tbar.sync 0, 32;"
    view, note = racecheck_view(_kernel(body))
    assert "$L__bar0:" in view and "mbarrier.init.shared::cta.b64 [%r1], 1;" in view
    assert "bar.sync 1, 32;" in view and note
