"""The agent loop rejects a candidate that only v1 catches (matmul sm_100a PTX with its
``tcgen05.dealloc`` removed: it assembles, has the right ABI, but leaks TMEM: TA4) and feeds the
diagnostic, with its witness, back to the provider."""

from __future__ import annotations

import re

import kernels
from agent.loop import LoopOptions, lower
from tests.agent.scripted import ScriptedProvider


def _drop_dealloc(ptx: str) -> str:
    out, n = re.subn(r"\n[^\n]*tcgen05\.dealloc[^\n]*", "\n", ptx, count=1)
    assert n == 1
    return out


def test_loop_rejects_tmem_leak_and_feeds_back_ta4(ref_cache):
    spec = kernels.get("matmul")
    prov = ScriptedProvider([
        ("no-dealloc", lambda c: _drop_dealloc(c.reference_ptx)),
        ("good", lambda c: c.reference_ptx),
    ])
    res = lower(spec, "sm_100a", prov, LoopOptions(iterations=2, cache_dir=ref_cache))
    assert [r.verdict for r in res.iterations] == ["rejected-verifier", "static-only"]
    bad = res.iterations[0]
    rules = {f["rule"] for f in bad.verifier["findings"] if f["severity"] == "error"}
    assert rules == {"TA4"}
    fb = prov.feedback[1]
    assert "error[TA4]" in fb and "tensor memory is not freed on this exit path" in fb
    assert "witness path" in fb and "columns allocated here" in fb
    assert res.best_iteration == 1
