"""The ``ailower`` command line, driven as a user would (console script via ``main``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agent.store import RunStore


def ailower(*args: str, env_extra: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, **(env_extra or {}), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "ailower", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


def test_kernels_lists_the_suite(data_dir):
    r = ailower("kernels")
    assert r.returncode == 0, r.stderr
    for name in ("vector_add", "softmax", "matmul", "N=67108864", "M=333"):
        assert name in r.stdout


def test_lower_softmax_static_writes_outputs_and_records_the_run(data_dir, tmp_path):
    out = tmp_path / "out"
    r = ailower("lower", "softmax", "--iterations", "2", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "GPU evaluation skipped" in r.stdout
    rep = json.loads((out / "report.json").read_text())
    assert rep["kernel"] == "softmax" and rep["arch"] == "sm_90a" and rep["gpu"] is False
    assert rep["verifier"]["ok"] and rep["assembly"]["ok"]
    assert (out / "softmax.ptx").read_text().count(".entry softmax_kernel") == 1
    assert (out / "softmax.cubin").read_bytes()[:4] == b"\x7fELF"
    assert len((out / "transcript.jsonl").read_text().splitlines()) >= 4
    runs = RunStore(f"sqlite:///{data_dir / 'ailower.db'}").runs()
    assert [(x.kernel, x.arch, x.provider, x.gpu) for x in runs] == [("softmax", "sm_90a", "triton", False)]
    assert runs[0].report["candidate"]["digest"] == rep["candidate"]["digest"]
    assert runs[0].best_ptx == (out / "softmax.ptx").read_text()
    assert rep["run_id"] == runs[0].id
    r2 = ailower("runs")
    assert r2.returncode == 0 and "softmax" in r2.stdout


def test_verify_command(data_dir, tmp_path):
    out = tmp_path / "o"
    assert ailower("lower", "vector_add", "--iterations", "1", "--out", str(out)).returncode == 0
    good = out / "vector_add.ptx"
    r = ailower("verify", str(good))
    assert r.returncode == 0 and "no findings" in r.stdout
    bad = tmp_path / "bad.ptx"
    bad.write_text(good.read_text().replace(".target sm_90a", ".target sm_80"))
    r = ailower("verify", str(bad), "--arch", "sm_90a")
    assert r.returncode == 1 and "error[G4]" in r.stdout and f"{bad}:" in r.stdout
    r = ailower("verify", str(bad), "--arch", "sm_90a", "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["ok"] is False


@pytest.mark.parametrize(("args", "msg"), [
    (("lower", "nope"), "no suite kernel 'nope'"),
    (("lower", "softmax", "--arch", "sm_75"), "--arch 'sm_75'"),
    (("lower", "x.py::f"), "give its spec with --spec"),
    (("lower", "softmax", "--provider", "anthropic"), "needs a model"),
    (("verify", "/nonexistent.ptx"), "cannot read"),
])
def test_bad_input_exits_2_with_a_clear_message(data_dir, args, msg):
    r = ailower(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert msg in r.stderr and "Traceback" not in r.stderr


def test_missing_provider_key_is_a_clear_error(data_dir, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    r = ailower("lower", "softmax", "--provider", "anthropic", "--model", "m",
                env_extra={"ANTHROPIC_API_KEY": ""})
    assert r.returncode == 2 and "ANTHROPIC_API_KEY" in r.stderr
