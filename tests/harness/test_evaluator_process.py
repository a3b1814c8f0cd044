"""The parent side of GPU evaluation, without a GPU: argument packing and the worker's process
handling (hang, crash, timeout) exercised with stand-in worker programs."""

from __future__ import annotations

import json
import stat
import sys
import textwrap
import time

import pytest

import kernels
from harness import compile_reference
from harness.evaluate import GPUEvaluator, kernel_under_test, reference_under_test
from harness.gpu.worker import WorkerRequest
from harness.results import KernelRun


@pytest.fixture(scope="module")
def mm(tmp_path_factory):
    spec = kernels.get("matmul")
    return spec, compile_reference(spec, "sm_90a", spec.configs()[0],
                                   cache_dir=tmp_path_factory.mktemp("c"))


def test_reference_packing_follows_the_abi(mm):
    spec, art = mm
    k = reference_under_test(spec, art)
    assert k.params == [("buf", "a_ptr"), ("buf", "b_ptr"), ("buf", "c_ptr"), ("scalar", "M"),
                        ("scalar", "N"), ("scalar", "K"), ("scratch", "global"),
                        ("scratch", "profile")]
    assert k.scalars["verify"] == {3: ("i32", 333), 4: ("i32", 272), 5: ("i32", 208)}
    assert k.threads == art.abi.threads and k.dynamic_smem == art.metadata["shared"]
    bm, bn = art.config.meta["BLOCK_M"], art.config.meta["BLOCK_N"]
    assert k.grid["bench"] == ((8192 // bm) * (8192 // bn), 1, 1)


def test_candidate_meta_drives_its_grid(mm):
    spec, art = mm
    k = kernel_under_test(spec, art.abi, b"\x7fELF", label="c", role="candidate",
                          config=art.config, threads=128, dynamic_smem=0,
                          meta={"BLOCK_M": 64, "BLOCK_N": 64})
    assert k.grid["verify"] == (6 * 5, 1, 1)  # cdiv(333, 64) * cdiv(272, 64)
    assert k.threads == 128


def _fake_worker(tmp_path, body: str):
    """A stand-in interpreter: ignores '-m harness.gpu.worker' and runs ``body``."""
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def _req(mm) -> WorkerRequest:
    spec, art = mm
    return GPUEvaluator().request(spec, "evaluate", [reference_under_test(spec, art)])


def test_worker_timeout_kills_the_process_group(tmp_path, mm):
    py = _fake_worker(tmp_path, """
        import json, sys, time, subprocess
        print(json.dumps({"event": "stage", "stage": "correctness", "label": "candidate"}), flush=True)
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open(sys.argv[0] + ".child", "w").write(str(child.pid))
        time.sleep(300)
    """)
    ev = GPUEvaluator(python=py, job_timeout_s=3)
    t0 = time.monotonic()
    res = ev.run(_req(mm))
    assert time.monotonic() - t0 < 30
    assert res.status == "hang" and "correctness candidate" in res.message and "killed" in res.message
    child = int(open(py + ".child").read())
    time.sleep(0.5)
    assert not _alive(child)  # the grandchild died with the process group


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for a reaper)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next(line for line in f if line.startswith("State:"))
    except FileNotFoundError:
        return False
    return "Z" not in state.split()[1]


def test_hang_event_is_reported_with_partial_results(tmp_path, mm):
    run = KernelRun(label="candidate", role="candidate", status="ok").model_dump(mode="json")
    py = _fake_worker(tmp_path, f"""
        import json, time, os
        print(json.dumps({{"event": "hang", "label": "candidate", "stage": "correctness",
                          "message": "candidate did not finish within 3 s",
                          "partial": [json.loads({json.dumps(json.dumps(run))})]}}), flush=True)
        os._exit(3)
    """)
    res = GPUEvaluator(python=py, job_timeout_s=60).run(_req(mm))
    assert res.status == "hang" and res.stage == "correctness"
    assert res.candidate.status == "hang" and "did not finish" in res.candidate.message


def test_worker_death_is_a_crash_with_stderr(tmp_path, mm):
    py = _fake_worker(tmp_path, """
        import sys, os, json
        print(json.dumps({"event": "stage", "stage": "load", "label": None}), flush=True)
        sys.stderr.write("CUDA_ERROR_ILLEGAL_ADDRESS somewhere\\n")
        sys.stderr.flush()
        os._exit(7)
    """)
    res = GPUEvaluator(python=py).run(_req(mm))
    assert res.status == "crash" and "exit status 7" in res.message
    assert "ILLEGAL_ADDRESS" in res.message and res.stage == "load"


def test_request_round_trips(mm):
    req = _req(mm)
    again = WorkerRequest.model_validate_json(req.model_dump_json())
    assert again.kernels[0].scalars == req.kernels[0].scalars
    assert again.flops == 2 * 8192 ** 3 and again.flop_dtype == "fp16"
    assert json.loads(req.model_dump_json())["job"] == "evaluate"
