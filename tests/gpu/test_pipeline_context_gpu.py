"""Pipeline-context timing on a real GPU (``pytest -m gpu``; issue 22 item 5): Triton's own PTX
timed after a producer that writes its inputs and before a consumer that reads its outputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kernels
from harness import GPUEvaluator, compile_reference, device_arch, evaluate_candidate
from harness.candidate import Candidate

pytestmark = pytest.mark.gpu


def test_triton_own_ptx_in_context_matches_the_reference(ref_cache):
    arch = device_arch()
    spec = kernels.get("softmax", "narrow")
    art = compile_reference(spec, arch, spec.configs()[0], cache_dir=ref_cache)
    cand = Candidate(ptx=art.ptx, threads=art.abi.threads, dynamic_smem=art.abi.dynamic_smem)
    with GPUEvaluator(input_cache=ref_cache) as ev:
        res = evaluate_candidate(spec, art, cand, art.cubin, ev, pipeline=True)
    assert res.status == "ok" and res.candidate.status == "ok", res.message
    p = res.pipeline
    assert p is not None and p.pairs >= 16
    assert p.producer.startswith("device-to-device copy writing")
    for kern, step in ((p.reference_kernel, p.reference_step), (p.candidate_kernel, p.candidate_step)):
        assert 0 < kern.median_ms < step.median_ms  # the producer and the consumer take time
    assert 0.9 < p.speedup < 1.1 and 0.95 < p.step_speedup < 1.05  # the same kernel
    assert p.isolated_speedup == pytest.approx(res.speedup)
    assert p.survives == (p.step_speedup_ci[0] > 1.0)


def test_lower_pipeline_records_it_in_the_report(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "ailower", "lower", "vector_add", "--iterations", "1",
                        "--pipeline", "--out", str(out)], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["pipeline"]["pairs"] >= 16 and "step_speedup" in rep["pipeline"]
    assert "pipeline context" in r.stdout
    assert rep["reference"]["autotune_space"]["space"] in ("wide", "narrow")
