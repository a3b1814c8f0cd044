"""End-to-end on a real GPU (``pytest -m gpu``): lowering the suite with the offline triton
provider, and broken candidates that must be caught at run time. Skipped without a driver."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kernels
from agent.loop import LoopOptions, lower
from agent.store import RunStore
from harness import GPUEvaluator, assemble, autotune, compile_space, device_arch, evaluate_candidate
from harness.candidate import Candidate
from tests import mutants
from tests.agent.scripted import ScriptedProvider

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def arch():
    return device_arch()


@pytest.mark.parametrize("name", ["vector_add", "softmax", "matmul"])
def test_lower_with_triton_provider_matches_the_autotuned_baseline(name, data_dir, tmp_path, arch):
    """Triton's own PTX through our launcher: correct, speedup in [0.97, 1.03], run recorded."""
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "ailower", "lower", name, "--iterations", "2",
                        "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["gpu"] is True and rep["arch"] == arch
    ev = rep["evaluation"]
    cand = next(k for k in ev["kernels"] if k["role"] == "candidate")
    assert ev["status"] == "ok" and cand["status"] == "ok"
    assert len(cand["checks"]) >= 3 and all(c["ok"] for c in cand["checks"])
    assert all(c["vs_float64"] for c in cand["checks"])  # the float64 reference was used
    assert 0.97 <= rep["speedup"] <= 1.03, rep["speedup"]
    # iteration 1 is the baseline config's own PTX: same code, same launcher
    first = rep["iterations"][0]
    assert first["origin"] == "triton:" + rep["reference"]["baseline"]["config"]
    assert first["verdict"] == "accepted" and 0.97 <= first["speedup"] <= 1.03, first
    runs = RunStore(f"sqlite:///{data_dir / 'ailower.db'}").runs(kernel=name)
    assert len(runs) == 1 and runs[0].best_speedup == pytest.approx(rep["speedup"])
    assert runs[0].device and runs[0].baseline_ms > 0


def test_broken_candidates_are_caught_and_the_loop_goes_on(ref_cache, arch):
    """Wrong result, partial write, a kernel that never terminates: each diagnosed, then a good one."""
    spec = kernels.get("vector_add")
    prov = ScriptedProvider([
        ("wrong-result", lambda c: mutants.wrong_result(c.reference_ptx)),
        ("partial-write", lambda c: mutants.partial_write(c.reference_ptx)),
        ("hang", lambda c: mutants.hang(c.reference_ptx)),
        ("good", lambda c: c.reference_ptx),
    ])
    with GPUEvaluator(hang_timeout_s=3.0, job_timeout_s=300) as ev:
        res = lower(spec, arch, prov, LoopOptions(iterations=4, cache_dir=ref_cache), evaluator=ev)
    v = [r.verdict for r in res.iterations]
    assert v == ["rejected-evaluation"] * 3 + ["accepted"], v
    wrong, partial, hang, good = res.iterations
    c = next(k for k in wrong.evaluation["kernels"] if k["role"] == "candidate")
    assert c["status"] == "incorrect" and "out_ptr vs reference" in c["message"]
    c = next(k for k in partial.evaluation["kernels"] if k["role"] == "candidate")
    assert c["status"] == "incorrect"
    assert hang.evaluation["status"] == "hang" and "did not finish within 3 s" in hang.evaluation["message"]
    assert "HANG" in prov.feedback[3]
    assert 0.9 < good.speedup < 1.1
    left = subprocess.run(["pgrep", "-f", "harness.gpu.worker"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "a worker process survived"


@pytest.fixture(scope="module")
def evaluator():
    with GPUEvaluator(hang_timeout_s=3.0) as ev:
        yield ev


@pytest.fixture(scope="module")
def add_baseline(ref_cache, evaluator):
    spec = kernels.get("vector_add")
    refs, _ = compile_space(spec, device_arch(), cache_dir=ref_cache)
    return spec, autotune(spec, refs, evaluator).artifacts, evaluator


def _eval(spec, art, ev, ptx):
    asm = assemble(ptx, art.arch)
    assert asm.ok, asm.summary(ptx)
    cand = Candidate(ptx=ptx, threads=art.abi.threads, meta=art.config.meta,
                     dynamic_smem=art.abi.dynamic_smem)
    return evaluate_candidate(spec, art, cand, asm.cubin, ev, time_it=False)


def test_harness_catches_wrong_entry_at_load(add_baseline):
    spec, art, ev = add_baseline
    res = _eval(spec, art, ev, mutants.wrong_entry(art.ptx))
    assert res.candidate.status == "load_error" and "no entry named" in res.candidate.message


def test_harness_catches_input_mutation(add_baseline):
    """Inputs are mapped read-only: the store faults; a re-run with writable inputs names it."""
    spec, art, ev = add_baseline
    res = _eval(spec, art, ev, mutants.input_write(art.ptx))
    c = res.candidate
    assert res.status == "crash" and c.status == "crash", res.message
    assert "store into an input tensor" in c.message, c.message


def test_harness_catches_out_of_bounds_writes(add_baseline):
    """64 B below the output: the canary slack (end-aligned layout) or a guard page faults."""
    spec, art, ev = add_baseline
    res = _eval(spec, art, ev, mutants.oob_write(art.ptx))
    c = res.candidate
    assert c.status in ("incorrect", "crash"), res.message
    assert "guard band" in c.message or "outside the kernel's buffers" in c.message, c.message


def test_reference_ptx_is_correct_without_timing(add_baseline):
    spec, art, ev = add_baseline
    res = _eval(spec, art, ev, art.ptx)
    c = res.candidate
    assert c.status == "ok" and all(chk.ok and chk.deterministic for chk in c.checks)
    assert [chk.sentinel for chk in c.checks] == [0xFF, 0x7F, 0xFF, 0x7F]  # + the secret seed
    assert [chk.secret for chk in c.checks] == [False, False, False, True]
