"""The ``ailower`` command line, driven as a user would (console script via ``main``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.store import RunStore


_SCRATCH: str | None = None


def ailower(*args: str, env_extra: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    """Run ``python -m ailower ARGS`` in ``cwd`` (default: a fresh scratch folder, never the
    repository: a command without ``--out`` writes ``./ailower-out``)."""
    import os
    import tempfile
    from pathlib import Path

    env = {**os.environ, **(env_extra or {}), "COLUMNS": "200"}
    # the repository must stay importable from the scratch folder (pytest's pythonpath=["."])
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH")) if x)
    global _SCRATCH
    if cwd is None and _SCRATCH is None:
        import atexit
        import shutil

        _SCRATCH = tempfile.mkdtemp(prefix="ailower-cli-")
        atexit.register(shutil.rmtree, _SCRATCH, True)
    cwd = cwd or _SCRATCH
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
    (("lower", "relu[0]", "--spec", str(Path(__file__).parents[1] / "kernels" / "data" /
                                       "research_spec.yaml")),
     "KERNEL 'relu[0]' is not the kernel of --spec"),
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


def test_verify_refuses_bad_files_clearly(data_dir, tmp_path):
    binf = tmp_path / "bin.ptx"
    binf.write_bytes(b"\x00\xff\xfe garbage")
    for args, msg in [((str(binf),), "not UTF-8 text"), (("/dev/zero",), "not a regular file"),
                      ((str(tmp_path),), "not a regular file")]:
        r = ailower("verify", *args)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_verify_with_kernel_checks_the_abi(data_dir, tmp_path):
    out = tmp_path / "o"
    assert ailower("lower", "vector_add", "--iterations", "1", "--out", str(out)).returncode == 0
    good = (out / "vector_add.ptx").read_text()
    renamed = tmp_path / "renamed.ptx"
    renamed.write_text(good.replace(".entry vector_add_kernel", ".entry other_kernel"))
    r = ailower("verify", str(renamed))
    assert r.returncode == 0 and "were not checked against a reference ABI" in r.stdout
    r = ailower("verify", str(renamed), "--kernel", "vector_add")
    assert r.returncode == 1 and "error[E1]" in r.stdout
    r = ailower("verify", str(out / "vector_add.ptx"), "--kernel", "vector_add", "--assemble")
    assert r.returncode == 0 and "ptxas" in r.stdout and "ok;" in r.stdout
    bogus = tmp_path / "bogus.ptx"
    bogus.write_text(good.replace("ret;", "shlx.b32 %r1, %r1, 1;\n\tret;"))
    r = ailower("verify", str(bogus), "--assemble")
    assert r.returncode == 1 and "FAILED" in r.stdout
    r = ailower("verify", str(bogus), "--arch", "bogus")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_environment_and_output_problems_are_clear(data_dir, tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    cases = [
        (("lower", "vector_add", "--out", str(f)), {}, "cannot create the folder"),
        (("lower", "vector_add"), {"AILOWER_ITERATIONS": "abc"}, "invalid setting"),
        (("lower", "vector_add", "--out", str(tmp_path / "o1")), {"AILOWER_DB_URL": "garbage"},
         "cannot open the database"),
        (("lower", "vector_add", "--out", str(tmp_path / "o2")),
         {"AILOWER_DB_URL": "postgresql://u:secret@127.0.0.1/x"}, "driver is not installed"),
        (("lower", "matmul", "--out", str(tmp_path / "o3")), {"AILOWER_MAX_PTX_VERSION": "70"},
         "older than PTX 8.0"),
        (("lower", "softmax", "--provider", "foo"), {}, "choose one of triton, anthropic, openai"),
    ]
    for args, env, msg in cases:
        r = ailower(*args, env_extra=env)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and "secret" not in r.stderr
    assert not (tmp_path / "o1" / "report.json").exists()  # failed before doing any work


def test_unreachable_provider_is_exit_2_with_the_cause(data_dir):
    r = ailower("lower", "softmax", "--provider", "openai", "--model", "m", "--iterations", "2",
                "--base-url", "http://127.0.0.1:9/v1", env_extra={"OPENAI_API_KEY": "x"})
    assert r.returncode == 2 and "produced no candidate" in r.stderr and "connection" in r.stderr


def test_spec_must_match_the_function(data_dir, tmp_path):
    import yaml

    from kernels.suite import vector_add
    src = tmp_path / "k.py"
    src.write_text(open(vector_add.__file__).read())
    d = json.loads(vector_add.SPEC.model_dump_json())
    d["source"] = {"path": str(src), "function": "vector_add_kernel"}
    d["reference"] = None
    d["params"][0], d["params"][2] = d["params"][2], d["params"][0]  # out and x swapped
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(d))
    r = ailower("lower", str(spec), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "differ from the parameters of vector_add_kernel()" in r.stderr
    d["params"][0], d["params"][2] = d["params"][2], d["params"][0]
    d["sizes"]["bench"] = {"N": 2**31 + 16}
    spec.write_text(yaml.safe_dump(d))
    r = ailower("lower", str(spec), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "does not fit i32" in r.stderr


def test_failed_rerun_into_the_same_out_keeps_the_earlier_result(data_dir, tmp_path):
    out = tmp_path / "o"
    assert ailower("lower", "softmax", "--iterations", "1", "--out", str(out)).returncode == 0
    first_ptx = (out / "softmax.ptx").read_text()
    first_report = (out / "report.json").read_text()
    fake = tmp_path / "fake-ptxas"
    fake.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Cuda compilation tools, "
                    "release 13.0, V13.0.88'; exit 0; fi\necho 'ptxas fatal : nope' >&2\nexit 1\n")
    fake.chmod(0o755)
    r = ailower("lower", "softmax", "--iterations", "1", "--out", str(out),
                env_extra={"AILOWER_PTXAS": str(fake)})
    assert r.returncode == 1 and "is unchanged" in r.stdout, r.stdout + r.stderr
    # the earlier result is intact, byte for byte
    assert (out / "softmax.ptx").read_text() == first_ptx
    assert (out / "report.json").read_text() == first_report
    assert (out / "softmax.cubin").read_bytes()[:4] == b"\x7fELF"
    # the failed run's own files are kept beside it
    failed = tmp_path / "o.failed"
    assert json.loads((failed / "report.json").read_text())["candidate"] is None
    assert (failed / "transcript.jsonl").read_text().count("\n") >= 2
    runs = RunStore(f"sqlite:///{data_dir / 'ailower.db'}").runs()
    assert len(runs) == 2 and runs[1].best_ptx == first_ptx and runs[0].best_ptx is None
    assert runs[0].out_dir == str(failed)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ailower-data", "fake-ptxas", "o", "o.failed"]
