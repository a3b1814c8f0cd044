"""racecheck on kernels with partial named barriers (harness.racecheck_limits), on the GPU.

The race gate's handling: Triton 3.6's warp-specialized attention gets racecheck hazards that
``racecheck_unreliable`` explains, and the emulator's happens-before analysis clears it
(``agent.loop.race_verdict``). Skipped without a driver or compute-sanitizer. racecheck's false
hazards themselves are reproduced by ``python bench/racecheck_probe/probe.py --all`` (run
directly: under pytest its compute-sanitizer child did not finish on the H200, 2026-12-02, for a
reason not found yet; the probe kernels' flags are checked on the CPU in
tests/harness/test_racecheck_limits.py).
"""

from __future__ import annotations


import pytest

import kernels
from harness import GPUEvaluator, compile_reference, device_arch
from harness.candidate import Candidate
from harness.evaluate import race_gate

pytestmark = pytest.mark.gpu


def test_triton_warp_specialized_attention_is_cleared_by_happens_before(ref_cache):
    from agent.loop import _emulate, race_verdict

    arch = device_arch()
    if arch != "sm_90a":
        pytest.skip(f"fast.attention_ws is checked on sm_90a; the device is {arch}")
    spec = kernels.get("fast.attention_ws")
    cfg = spec.configs()[0]
    art = compile_reference(spec, arch, cfg, cache_dir=ref_cache)
    cand = Candidate.with_triton_launch(art.ptx, art.abi, cfg.meta, f"triton:{cfg.key()}")
    with GPUEvaluator(hang_timeout_s=10.0, job_timeout_s=600) as ev:
        g = race_gate(spec, art, cand, art.cubin, ev)
    print(f"\nracecheck attention_ws: ran={g.ran} ok={g.ok} {g.message[:200]} | {g.racecheck_unreliable}")
    if not g.ran:
        pytest.skip(g.message)
    ok, note = race_verdict(g, lambda: _emulate(spec, arch, art, cand.ptx, cand.model_dump()))
    print(f"racecheck attention_ws verdict: {ok} {note[:300]}")
    assert g.ok or g.racecheck_unreliable
    assert ok, note
