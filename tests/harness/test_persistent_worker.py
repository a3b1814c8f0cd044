"""The persistent worker's parent side without a GPU (stand-in worker programs): one process
serves many jobs, a crash or a hang restarts it transparently, a memory fault is diagnosed by a
re-run with writable inputs, and the race gate reads compute-sanitizer's verdict. Also the paired
speedup statistics."""

from __future__ import annotations

import stat
import sys
import textwrap

import numpy as np
import pytest

import kernels
from harness import compile_reference
from harness.evaluate import GPUEvaluator, reference_under_test
from harness.timing import paired_speedup

SERVE = """
import json, os, sys
n = 0
for line in sys.stdin:
    req = json.loads(line)
    n += 1
    {body}
"""


def _script(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(f"#!{sys.executable}\n" + textwrap.dedent(text))
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def _worker(tmp_path, body: str) -> str:
    return _script(tmp_path, "fake-python", SERVE.format(body=textwrap.dedent(body).strip()
                                                         .replace("\n", "\n    ")))


@pytest.fixture(scope="module")
def req(tmp_path_factory):
    spec = kernels.get("vector_add")
    art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path_factory.mktemp("c"))
    return GPUEvaluator().request(spec, "evaluate", [reference_under_test(spec, art)])


def _ok(msg: str) -> str:
    return ('print(json.dumps({"event": "result", "result": {"status": "ok", "message": '
            + msg + "}}), flush=True)")


def test_one_process_serves_many_jobs(tmp_path, req):
    py = _worker(tmp_path, _ok('f"{os.getpid()}:{n}"'))
    with GPUEvaluator(python=py) as ev:
        a, b, c = (ev.run(req).message for _ in range(3))
    pids = {m.split(":")[0] for m in (a, b, c)}
    assert len(pids) == 1 and [m.split(":")[1] for m in (a, b, c)] == ["1", "2", "3"]
    assert ev.restarts == 0


def test_crash_restarts_the_worker_for_the_next_job(tmp_path, req):
    flag = tmp_path / "crashed"
    py = _worker(tmp_path, f"""
        if not os.path.exists({str(flag)!r}):
            open({str(flag)!r}, "w").close()
            print(json.dumps({{"event": "crash", "label": "candidate", "stage": "timing",
                              "message": "CUDA_ERROR_LAUNCH_FAILED while running candidate",
                              "partial": []}}), flush=True)
            os._exit(4)
        {_ok('f"{os.getpid()}"')}
    """)
    with GPUEvaluator(python=py) as ev:
        first = ev.run(req)
        second = ev.run(req)
    assert first.status == "crash" and "LAUNCH_FAILED" in first.message
    assert second.status == "ok" and ev.restarts == 1


def _fault_then(tmp_path, diag_result: str) -> str:
    return _worker(tmp_path, f"""
        if req["inputs_read_only"]:
            print(json.dumps({{"event": "crash", "label": "candidate", "stage": "correctness",
                  "message": "CUDA_ERROR_ILLEGAL_ADDRESS while running candidate: a memory fault",
                  "partial": [{{"label": "candidate", "role": "candidate", "status": "ok"}}]}}),
                  flush=True)
            os._exit(4)
        assert req["time"] is False  # the fault was in correctness
        print(json.dumps({{"event": "result", "result": json.loads({diag_result!r})}}), flush=True)
    """)


@pytest.mark.parametrize("diag, cause", [
    ('{"status": "ok", "kernels": [{"label": "candidate", "role": "candidate", "status": "ok", '
     '"checks": [{"seed": 0, "sentinel": 255, "inputs_unchanged": true}]}]}',
     "undoes before exiting"),
    ('{"status": "ok", "kernels": [{"label": "candidate", "role": "candidate", "status": "incorrect",'
     ' "checks": [{"seed": 0, "sentinel": 255, "inputs_unchanged": false}]}]}',
     "a store into an input tensor (inputs"),
])
def test_memory_fault_is_diagnosed_with_writable_inputs(tmp_path, req, diag, cause):
    with GPUEvaluator(python=_fault_then(tmp_path, diag)) as ev:
        res = ev.run(req)
    assert res.status == "crash" and cause in res.message
    assert res.candidate.status == "crash" and cause in res.candidate.message


def test_fault_that_persists_with_writable_inputs_is_out_of_bounds(tmp_path, req):
    py = _worker(tmp_path, """
        print(json.dumps({"event": "crash", "label": "candidate", "stage": "correctness",
              "message": "CUDA_ERROR_ILLEGAL_ADDRESS while running candidate: a memory fault",
              "partial": []}), flush=True)
        os._exit(4)
    """)
    with GPUEvaluator(python=py) as ev:
        res = ev.run(req)
    assert "outside the kernel's buffers" in res.message and ev.restarts == 1


def _sanitizer(tmp_path, report: str, rc: int) -> str:
    return _script(tmp_path, "compute-sanitizer", f"""
        import sys
        sys.stdin.read()
        print('{{"event": "result", "result": {{"status": "ok"}}}}')
        print({report!r})
        sys.exit({rc})
    """)


def test_race_gate_reports_a_hazard(tmp_path, req):
    tool = _sanitizer(tmp_path, "========= Error: Race reported between Write access at "
                                "k+0x90 and Read access at k+0x60 [16 hazards]\n"
                                "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)", 86)
    g = GPUEvaluator(sanitizer=tool).race_gate(req)
    assert g.ran and not g.ok and g.tool == "racecheck" and "Race reported" in g.message


def test_race_gate_passes_a_clean_run(tmp_path, req):
    tool = _sanitizer(tmp_path, "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)", 0)
    g = GPUEvaluator(sanitizer=tool).race_gate(req)
    assert g.ran and g.ok, g.message


def test_race_gate_without_the_toolkit_says_so(tmp_path, req, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("AILOWER_COMPUTE_SANITIZER", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    ev = GPUEvaluator()
    monkeypatch.setattr("glob.glob", lambda pattern: [])
    monkeypatch.setattr("os.access", lambda p, m: False)
    g = ev.race_gate(req)
    assert not g.ran and g.ok and "not found" in g.message


def test_paired_speedup_interval_covers_the_truth_and_shrinks():
    rng = np.random.default_rng(1)
    widths = []
    for n in (20, 80, 320):
        ref = 1.0 + 0.01 * rng.standard_normal(n)
        cand = (1.0 + 0.01 * rng.standard_normal(n)) / 1.2
        med, lo, hi = paired_speedup(ref, cand)
        assert lo <= 1.2 <= hi and lo <= med <= hi
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]
    # an outlier pair does not move the median
    med, _, _ = paired_speedup([1.0] * 30 + [100.0], [1.0] * 31)
    assert med == 1.0


def test_paired_speedup_rejects_bad_samples():
    with pytest.raises(ValueError):
        paired_speedup([1.0], [])
    with pytest.raises(ValueError):
        paired_speedup([1.0, 0.0], [1.0, 1.0])
