"""The race gate on kernels that use barrier 0 with a thread count (harness.racecheck_view).

racecheck reports false RAW hazards after a partial barrier 0 (``bench/racecheck_probe``,
reproduced on the H200 2026-12-02); the gate runs racecheck on a copy with barrier 0 renumbered.
These tests check, on the GPU: the probe's correct kernel is clean once renumbered, its bug twin
still gets hazards once renumbered (the view does not hide races), and Triton 3.6's own
warp-specialized attention passes the gate. Skipped without a driver or compute-sanitizer.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kernels
from harness import GPUEvaluator, compile_reference, device_arch
from harness.candidate import Candidate
from harness.evaluate import race_gate
from harness.racecheck_view import racecheck_view

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "bench" / "racecheck_probe" / "probe.py"


def _probe():
    spec = importlib.util.spec_from_file_location("racecheck_probe", PROBE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _hazards(tmp_path: Path, name: str, module: str) -> int:
    """racecheck's hazard count for entry ``name`` of PTX ``module`` launched once."""
    cs = GPUEvaluator().find_sanitizer()
    if cs is None:
        pytest.skip("compute-sanitizer not found")
    f = tmp_path / f"{name}.ptx"
    f.write_text(module)
    p = subprocess.run([cs, "--tool", "racecheck", sys.executable, str(PROBE), "--kernel", name,
                        "--ptx", str(f)], capture_output=True, text=True, timeout=180)
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazard", p.stdout + p.stderr)
    assert m and f"{name}: readers" in p.stdout, (p.stdout + p.stderr)[-2000:]
    return int(m.group(1))


def test_renumbered_probe_is_clean_and_its_bug_twin_is_not(tmp_path):
    probe = _probe()
    module = probe.ptx()
    view, note = racecheck_view(module)
    assert "renumbered" in note
    print(f"\nracecheck-view probe: ws_bar0 as written {_hazards(tmp_path, 'ws_bar0', module)} "
          f"hazards (racecheck's false report)")
    assert _hazards(tmp_path, "ws_bar0", view) == 0
    assert _hazards(tmp_path, "ws_dispatch", view) == 0
    assert _hazards(tmp_path, "ws_bar0_racy", view) > 0


def test_triton_warp_specialized_attention_passes_the_gate(ref_cache):
    arch = device_arch()
    if arch != "sm_90a":
        pytest.skip(f"fast.attention_ws is checked on sm_90a; the device is {arch}")
    spec = kernels.get("fast.attention_ws")
    cfg = spec.configs()[0]
    art = compile_reference(spec, arch, cfg, cache_dir=ref_cache)
    cand = Candidate.with_triton_launch(art.ptx, art.abi, cfg.meta, f"triton:{cfg.key()}")
    with GPUEvaluator(hang_timeout_s=10.0, job_timeout_s=600) as ev:
        g = race_gate(spec, art, cand, art.cubin, ev)
    print(f"\nracecheck-view attention_ws: ran={g.ran} ok={g.ok} {g.message[:300]}")
    if not g.ran:
        pytest.skip(g.message)
    assert g.ok, g.message
    assert "renumbered" in g.message
