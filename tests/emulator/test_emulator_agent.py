"""The agent loop on a GPU-less host reports emulated correctness instead of "skipped"."""

from __future__ import annotations

import re

import kernels
from agent.loop import LoopOptions, lower
from tests.agent.scripted import ScriptedProvider


def _wrong_math(ptx: str) -> str:
    out, n = re.subn(r"\badd\.f32\b", "sub.f32", ptx)
    assert n > 0
    return out


def _no_barrier(ptx: str) -> str:
    lines = ptx.split("\n")
    i = next(i for i, ln in enumerate(lines) if re.search(r"\b(bar|barrier)\.sync\b", ln))
    return "\n".join(lines[:i] + lines[i + 1:])


def test_reference_passes_and_wrong_math_is_rejected_by_emulation(ref_cache):
    spec = kernels.get("vector_add")
    prov = ScriptedProvider([("reference", lambda c: c.reference_ptx),
                             ("wrong-math", lambda c: _wrong_math(c.reference_ptx))])
    res = lower(spec, "sm_90a", prov, LoopOptions(iterations=2, cache_dir=ref_cache))
    ok, bad = res.iterations
    assert ok.verdict == "static-only" and ok.emulation["status"] == "ok"
    assert "emulated correctness (sm_90a, size verify): PASS" in ok.feedback
    assert bad.verdict == "rejected-evaluation" and bad.emulation["status"] == "mismatch"
    assert "FAIL (mismatch" in bad.feedback
    assert res.best_iteration == 0


def test_missing_barrier_is_rejected_with_a_race_finding(ref_cache):
    """The static verifier's B9 sees this race first; the emulator's HB1 on the same PTX is
    checked directly, so both layers are held to it."""
    from emulator import check_races

    spec = kernels.get("softmax")
    seen: list[str] = []

    def propose(c):
        seen.append(_no_barrier(c.reference_ptx))
        return seen[-1]

    prov = ScriptedProvider([("no-barrier", propose)])
    res = lower(spec, "sm_100a", prov, LoopOptions(iterations=1, cache_dir=ref_cache))
    (rec,) = res.iterations
    assert rec.verdict == "rejected-verifier", rec.feedback
    assert "error[B9]" in rec.feedback
    findings = check_races(seen[0], spec, "sm_100a")
    assert any(f.rule == "HB1" for f in findings), findings
