"""The user's workflow (issue 13): evaluate any PTX, never lose output, a scriptable CLI, results
back into Triton. Driven as a user would, through ``python -m ailower`` in a scratch folder."""

from __future__ import annotations

import json
import os
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.cli.test_cli import ailower


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One data dir with a static ``lower softmax`` run (#1) shared by this module's tests."""
    root = tmp_path_factory.mktemp("workflow")
    env = {"AILOWER_DATA_DIR": str(root / "data"), "AILOWER_DB_URL": "", "AILOWER_PTXAS": ""}
    r = ailower("lower", "softmax", "--iterations", "1", "--out", str(root / "sm"), env_extra=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return root, env


def _env(world):
    return world[1]


# ---------------------------------------------------------------- output safety

def test_guard_reports_created_modified_and_deleted_files(tmp_path):
    from tests import _cwd_guard

    (tmp_path / "keep.txt").write_text("a")
    (tmp_path / "gone.txt").write_text("b")
    (tmp_path / "__pycache__").mkdir()
    before = _cwd_guard.snapshot(tmp_path)
    (tmp_path / "ailower-out" / "softmax-sm_90a").mkdir(parents=True)
    (tmp_path / "ailower-out" / "softmax-sm_90a" / "report.json").write_text("{}")
    (tmp_path / "keep.txt").write_text("changed")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "__pycache__" / "x.pyc").write_text("ignored")
    diff = _cwd_guard.changes(before, _cwd_guard.snapshot(tmp_path))
    assert "created ailower-out/softmax-sm_90a/report.json" in diff
    assert "deleted gone.txt" in diff and "modified keep.txt" in diff
    assert not any("__pycache__" in d for d in diff)
    assert _cwd_guard.changes(before, before) == []


def test_default_out_is_under_the_cwd_and_a_second_success_keeps_the_first(data_dir, tmp_path):
    for _ in range(2):
        r = ailower("lower", "vector_add", "--iterations", "1", cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "ailower-out" / "vector_add-sm_90a"
    now = json.loads((out / "report.json").read_text())
    prev = json.loads((out.with_name(out.name + ".prev") / "report.json").read_text())
    assert (now["run_id"], prev["run_id"]) == (2, 1)
    assert now["files"]["ptx"] == str(Path("ailower-out/vector_add-sm_90a/vector_add.ptx"))
    assert (out / "vector_add.ptx").read_text() == (out.with_name(out.name + ".prev") /
                                                    "vector_add.ptx").read_text()
    assert "kept in" in r.stdout
    # no staging folder is left behind
    assert sorted(p.name for p in (tmp_path / "ailower-out").iterdir()) == [
        "vector_add-sm_90a", "vector_add-sm_90a.prev"]


def test_staged_output_commit_and_abandon(tmp_path):
    from ailower._outdir import OutputError, StagedOutput

    final = tmp_path / "res"
    s1 = StagedOutput(final)
    s1.path("report.json").write_text("one")
    assert s1.commit() is None and (final / "report.json").read_text() == "one"
    s2 = StagedOutput(final)
    s2.path("report.json").write_text("two")
    assert s2.commit() == tmp_path / "res.prev"
    assert (final / "report.json").read_text() == "two"
    assert (tmp_path / "res.prev" / "report.json").read_text() == "one"
    s3 = StagedOutput(final)
    s3.path("transcript.jsonl").write_text("partial")
    assert s3.abandon() == tmp_path / "res.failed"
    assert (final / "report.json").read_text() == "two"  # untouched by the failed run
    assert StagedOutput(final).abandon() is None  # wrote nothing: leaves nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res", "res.failed", "res.prev"]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputError, match="a file of that name exists"):
        StagedOutput(tmp_path / "afile")


# ---------------------------------------------------------------- ailower eval

def _hand_edits(world) -> tuple[Path, Path]:
    root, _ = world
    ptx = (root / "sm" / "softmax.ptx").read_text()
    assert ptx.count("ld.global.v4.b32") >= 1
    ok = root / "softmax_hand.ptx"
    ok.write_text("// hand-edited: first load does not allocate in L1\n"
                  + ptx.replace("ld.global.v4.b32", "ld.global.L1::no_allocate.v4.b32", 1))
    bad = root / "softmax_broken.ptx"
    bad.write_text(ptx.replace("ret;", "mov.b32 %r9999, 0;\n\tret;", 1))
    return ok, bad


def test_eval_judges_a_hand_edited_ptx_like_lower(world):
    root, env = world
    ok, bad = _hand_edits(world)
    r = ailower("eval", str(ok), "--kernel", "softmax", "--out", str(root / "ev"), env_extra=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "file:softmax_hand.ptx" in r.stdout and "static-only" in r.stdout
    assert "GPU evaluation skipped" in r.stdout and "verifier: no errors" in r.stdout
    assert "ptxas" in r.stdout and "registers" in r.stdout
    # issue 21 defect 8: it says what it does (it emulates), not "static judgement only"
    assert "static judgement only" not in r.stdout and "emulated correctness" in r.stdout
    rep = json.loads((root / "ev" / "report.json").read_text())
    lower_rep = json.loads((root / "sm" / "report.json").read_text())
    assert set(rep) == set(lower_rep)  # the same report as lower
    assert rep["provider"] == "file" and rep["assembly"]["ok"] and rep["verifier"]["ok"]
    assert (root / "ev" / "softmax.ptx").read_text() == ok.read_text()
    assert rep["candidate"]["threads"] == 128  # from the PTX's .reqntid
    r = ailower("eval", str(bad), "--kernel", "softmax", env_extra=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "rejected-assembly" in r.stdout and "%r9999" in r.stdout
    # issue 21 defect 6: diagnostics name the user's file, not the loop's 'candidate.ptx'
    assert f"{bad}:" in r.stdout and "candidate.ptx" not in r.stdout
    r = ailower("eval", str(bad), "--kernel", "softmax", "--json", env_extra=env)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["candidate"] is None and doc["iterations"][0]["verdict"] == "rejected-assembly"
    assert "ailower eval" in r.stderr  # progress goes to stderr with --json


def test_eval_bad_input_is_exit_2(world, tmp_path):
    _, env = world
    ok, _ = _hand_edits(world)
    empty = tmp_path / "empty.ptx"
    empty.write_text("")
    for args, msg in [
        ((str(ok), "--kernel", "softmax", "--meta", "BLOCK=64"), "has no such meta-parameter"),
        ((str(ok), "--kernel", "softmax", "--meta", "oops"), "expected NAME=INTEGER"),
        ((str(ok), "--kernel", "softmax", "--meta", "BLOCK_N=99999999999999999999"),
         "is out of range"),
        ((str(empty), "--kernel", "softmax"), "the file is empty"),
        ((str(ok), "--kernel", "softmx"), "did you mean softmax"),
    ]:
        r = ailower("eval", *args, env_extra=env)
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_eval_uses_an_evaluator_plugin_when_there_is_no_gpu(monkeypatch):
    """The emulator slot: an entry point in 'ailower.evaluators' supplies the evaluator."""
    from ailower import _run
    from ailower.settings import Settings

    sentinel = object()

    class EP:
        name = "emu"

        def load(self):
            return lambda target, settings: sentinel if target == "sm_90a" else None

    monkeypatch.setattr(_run, "entry_points", lambda group: [EP()] if group == _run.EVALUATOR_GROUP else [])
    ev, note = _run.select_evaluator("sm_90a", None, no_gpu=True, settings=Settings())
    assert ev is sentinel and "'emu' evaluator plug-in" in note and "--no-gpu" in note
    ev, note = _run.select_evaluator("sm_100a", None, no_gpu=True, settings=Settings())
    assert ev is None and note == "GPU evaluation skipped: --no-gpu"


# ---------------------------------------------------------------- runs show

def test_runs_show_gives_back_any_recorded_run(world):
    root, env = world
    r = ailower("runs", "show", "1", "--ptx", env_extra=env)
    assert r.returncode == 0 and r.stdout == (root / "sm" / "softmax.ptx").read_text()
    r = ailower("runs", "show", "1", "--report", env_extra=env)
    assert r.returncode == 0
    assert json.loads(r.stdout) == json.loads((root / "sm" / "report.json").read_text())
    r = ailower("runs", "show", "1", env_extra=env)
    assert r.returncode == 0 and "softmax" in r.stdout and "triton:" in r.stdout
    r = ailower("runs", "show", "latest", "--json", env_extra=env)
    doc = json.loads(r.stdout)
    assert doc["kernel"] == "softmax" and doc["iterations"]
    r = ailower("runs", "show", "999", env_extra=env)
    assert r.returncode == 2 and "no run #999" in r.stderr and "the newest is #" in r.stderr
    r = ailower("runs", "show", "abc", env_extra=env)
    assert r.returncode == 2 and "not a number" in r.stderr


# ---------------------------------------------------------------- scriptable CLI

def test_json_on_list_commands(world):
    _, env = world
    ks = json.loads(ailower("kernels", "--json", env_extra=env).stdout)
    names = [k["name"] for k in ks]
    assert {"relu.fp16", "relu.fp32", "softmax", "flash_attention.causal"} <= set(names)
    assert all(k["configs"] for k in ks)
    runs = json.loads(ailower("runs", "--json", env_extra=env).stdout)
    assert runs and runs[-1]["id"] == 1 and runs[-1]["kernel"] == "softmax"
    rules = json.loads(ailower("rules", "--json", env_extra=env).stdout)
    assert any(r["id"] == "TA4" for r in rules) and all(r["summary"] for r in rules)
    r = ailower("keys", "create", "ci-bot", env_extra=env)
    assert r.returncode == 0, r.stderr
    keys = json.loads(ailower("keys", "list", "--json", env_extra=env).stdout)
    assert [k["name"] for k in keys] == ["ci-bot"]


def test_piped_tables_never_cut_names(world):
    _, env = world
    r = ailower("kernels", env_extra={**env, "COLUMNS": "40"})
    assert r.returncode == 0
    names = [k["name"] for k in json.loads(ailower("kernels", "--json", env_extra=env).stdout)]
    for n in names:
        assert f" {n} " in r.stdout, n
    assert "…" not in r.stdout
    assert "\x1b[" not in r.stdout  # no colour codes in a pipe
    r = ailower("runs", env_extra={**env, "COLUMNS": "30"})
    assert "triton:w4,s1,c1" in r.stdout and "…" not in r.stdout


def test_version():
    r = ailower("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"ailower {version('ailower')}"


def test_did_you_mean(world):
    _, env = world
    r = ailower("lower", "relu", env_extra=env)
    assert r.returncode == 2 and "did you mean relu.fp16, relu.fp32?" in r.stderr
    r = ailower("lower", "sofmax", env_extra=env)
    assert r.returncode == 2 and "did you mean softmax" in r.stderr
    r = ailower("rule", "TA44", env_extra=env)
    assert r.returncode == 2 and "did you mean" in r.stderr and "TA4" in r.stderr
    r = ailower("cache", "clear", "--part", "refrence", "--yes", env_extra=env)
    assert r.returncode == 2 and "did you mean reference" in r.stderr


def test_suggest_ranks_prefixes_first():
    from ailower._output import suggest

    names = ["relu.fp16", "relu.fp32", "gelu", "gemm", "gemm.fp8", "softmax"]
    assert suggest("relu", names) == ["relu.fp16", "relu.fp32", "gelu"]
    assert suggest("gemm", names)[:1] == ["gemm.fp8"]
    assert suggest("zzz", names) == []


def test_error_text_keeps_brackets(data_dir, tmp_path):
    odd = tmp_path / "[red]cand[/].ptx"
    r = ailower("verify", str(odd))
    assert r.returncode == 2 and f"{odd}: cannot read" in r.stderr, r.stderr


def test_cache_info_and_clear(world, tmp_path):
    root, env = world
    info = json.loads(ailower("cache", "info", "--json", env_extra=env).stdout)
    parts = {p["part"]: p for p in info["parts"]}
    # a lowering without a GPU compiles only the configs it uses (the first compilable one for
    # one search iteration), not the whole autotune space
    assert parts["reference"]["entries"] >= 1 and parts["reference"]["bytes"] > 10_000
    r = ailower("cache", "clear", env_extra=env)  # not a terminal and no --yes
    assert r.returncode == 2 and "--yes" in r.stderr
    assert (Path(env["AILOWER_DATA_DIR"]) / "cache" / "reference").is_dir()
    r = ailower("cache", "clear", "--part", "inputs", "--yes", env_extra=env)
    assert r.returncode == 0
    r = ailower("cache", "clear", "--part", "reference", "--yes", env_extra=env)
    assert r.returncode == 0 and "cleared reference" in r.stdout, r.stdout + r.stderr
    info = json.loads(ailower("cache", "info", "--json", env_extra=env).stdout)
    assert {p["part"]: p["entries"] for p in info["parts"]}["reference"] == 0
    assert json.loads(ailower("runs", "--json", env_extra=env).stdout)  # the database is kept


# ---------------------------------------------------------------- export

def test_export_writes_the_override_layout_and_triton_jit_uses_it(world, monkeypatch, tmp_path):
    """Triton's own JIT (behind a stand-in driver: no GPU here) compiles launches of the unmodified
    kernel with the exported PTX exactly when the specialisation matches."""
    import triton

    from export import read_manifest
    from export._jit import FakeTensor, _StandInDriver
    from kernels.suite.softmax import softmax_kernel

    root, env = world
    ov = tmp_path / "override"
    r = ailower("export", "1", "--triton-override", str(ov), env_extra=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TRITON_DEFAULT_FP_FUSION" not in r.stderr  # issue 21 defect 8: no Triton warning leaks
    assert "TRITON_KERNEL_OVERRIDE=1" in r.stdout and "num_warps=4" in r.stdout
    assert "never checked on a GPU (verdict static-only)" in r.stdout
    assert "use this folder only on sm_90a GPUs" in r.stdout
    man = read_manifest(ov)
    assert man["entry"] == "softmax_kernel" and man["constexprs"] == {"BLOCK_N": 4096}
    assert [e["divisible_by_16"] for e in man["entries"]] == [{"n_rows": True}, {"n_rows": False}]
    for e in man["entries"]:
        text = (ov / e["file"]).read_text()
        assert text.startswith(man["marker"]) and text.endswith(
            (root / "sm" / "softmax.ptx").read_text())
        assert len(e["folder"]) == 52 and e["folder"].isupper()  # base32 of a sha256
    monkeypatch.setenv("TRITON_KERNEL_OVERRIDE", "1")
    monkeypatch.setenv("TRITON_OVERRIDE_DIR", str(ov))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    from triton.runtime.driver import driver

    saved = driver._active
    driver.set_active(_StandInDriver(90))
    try:
        got = {}
        for rows, block in ((1000, 4096), (1024, 4096), (1000, 2048)):
            k = softmax_kernel.warmup(FakeTensor(1 << 40, "fp16"), FakeTensor(2 << 40, "fp16"),
                                      rows, 4000, BLOCK_N=block, grid=(1,), num_warps=4)
            got[(rows, block)] = man["marker"] in k.asm["ptx"]
            assert k.asm["cubin"][:4] == b"\x7fELF"
    finally:
        driver._active = saved
        softmax_kernel.device_caches.clear()
    # both n_rows specialisations use the export; another BLOCK_N is a different kernel
    assert got == {(1000, 4096): True, (1024, 4096): True, (1000, 2048): False}, triton.__version__
    # a second export keeps the first as .prev
    assert ailower("export", "1", "--triton-override", str(ov), env_extra=env).returncode == 0
    assert (tmp_path / "override.prev" / "ailower-export.json").exists()


def test_export_refusals(world, tmp_path):
    from export import ExportError, triton_override
    from kernels import get

    root, env = world
    _, bad = _hand_edits(world)
    ailower("eval", str(bad), "--kernel", "softmax", env_extra=env)
    runs = json.loads(ailower("runs", "--json", env_extra=env).stdout)
    failed = next(r for r in runs if not r["has_ptx"])
    r = ailower("export", str(failed["id"]), "--triton-override", str(tmp_path / "x"), env_extra=env)
    assert r.returncode == 2 and "has no PTX to export" in r.stderr
    assert not (tmp_path / "x").exists()
    ptx = (root / "sm" / "softmax.ptx").read_text()
    spec = get("softmax")
    cache = Path(env["AILOWER_DATA_DIR"]) / "cache"
    with pytest.raises(ExportError, match="dynamic shared memory"):
        triton_override(spec, ptx, tmp_path / "y", arch="sm_90a", meta={}, threads=128,
                        dynamic_smem=200_000, cache_dir=cache)
    with pytest.raises(ExportError, match="whole\\s+warps"):
        triton_override(spec, ptx, tmp_path / "y", arch="sm_90a", meta={}, threads=100,
                        cache_dir=cache)
    with pytest.raises(ExportError, match="rejects the PTX"):
        triton_override(spec, ptx.replace("ret;", "bogus.op;", 1), tmp_path / "y", arch="sm_90a",
                        meta={}, threads=128, cache_dir=cache)
    assert not (tmp_path / "y").exists()
    assert os.listdir(tmp_path) == []


def test_progress_lines_keep_brackets_and_the_status_shows_only_on_a_terminal():
    import io

    from rich.console import Console

    from ailower._run import _progress

    buf = io.StringIO()
    tty = Console(file=buf, force_terminal=True, width=120, color_system=None)
    status, on_event = _progress(tty)
    assert hasattr(status, "update")  # a live rich status on a terminal
    with status:
        on_event("reference_compiled", {"configs": 3, "seconds": 1.25})
        on_event("iteration", {"iteration": 1, "origin": "anthropic:[m]", "verdict": "accepted",
                               "speedup": 1.5, "provider_error": None})
        on_event("iteration", {"iteration": 2, "origin": "x", "verdict": "rejected-provider",
                               "speedup": None, "provider_error": "bad [bold]output[/bold]"})
    text = buf.getvalue()
    assert "Triton compiled 3 configs in 1.2 s" in text
    assert "anthropic:[m] -> accepted (1.500x)" in text
    assert "bad [bold]output[/bold]" in text
    pipe = Console(file=io.StringIO(), force_terminal=False)
    status, _ = _progress(pipe)
    assert not hasattr(status, "update")  # no live display in a pipe


def test_out_refuses_a_folder_of_other_files(data_dir, tmp_path):
    from ailower._outdir import OutputError, StagedOutput

    (tmp_path / "mine.txt").write_text("user data")
    with pytest.raises(OutputError, match="not an ailower result"):
        StagedOutput(tmp_path)
    r = ailower("lower", "vector_add", "--iterations", "1", "--out", ".", cwd=tmp_path)
    assert r.returncode == 2 and "not an ailower result" in r.stderr, r.stdout + r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ailower-data", "mine.txt"]


def test_readme_order_main_job_then_a_failing_run_keeps_the_main_jobs_files(data_dir, tmp_path):
    """The README's order: `ailower lower softmax` (default --out under the cwd), then something
    that fails in the same folder (here: an unreachable model server) must not touch it."""
    r = ailower("lower", "softmax", "--iterations", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "ailower-out" / "softmax-sm_90a"
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"softmax.ptx", "softmax.cubin", "report.json", "transcript.jsonl"} <= set(before)
    r = ailower("lower", "softmax", "--provider", "openai", "--model", "m", "--iterations", "1",
                "--base-url", "http://127.0.0.1:9/v1", env_extra={"OPENAI_API_KEY": "x"},
                cwd=tmp_path)
    assert r.returncode == 2 and "produced no candidate" in r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert (out.with_name(out.name + ".failed") / "report.json").exists()


def test_cache_clear_never_follows_a_link_out_of_the_cache(data_dir, tmp_path):
    elsewhere = tmp_path / "precious"
    elsewhere.mkdir()
    (elsewhere / "keep.npy").write_bytes(b"x" * 100)
    (data_dir / "cache").mkdir(parents=True)
    (data_dir / "cache" / "inputs").symlink_to(elsewhere)
    r = ailower("cache", "clear", "--yes")
    assert r.returncode == 0, r.stderr
    assert (elsewhere / "keep.npy").read_bytes() == b"x" * 100
    assert not (data_dir / "cache" / "inputs").exists()


_USER_PROGRAM = '''"""A research module, as people write it: the kernel sits far down the file, inside a class,
under @triton.autotune, next to torch code and an import of a package ailower never sees.
"""
import math

import torch
import triton
import triton.language as tl
from research_lib.utils import launch_helper  # noqa: F401

SCALE: tl.constexpr = tl.constexpr(2.0)
WORKSPACE = None


@triton.jit
def _twice(x):
    # a helper jit function: its source and line enter the kernel's hash too
    return x * SCALE


class FusedOps:
    """Kernels [and brackets] of a research codebase."""

    def __init__(self):
        self.cache = {}

    @staticmethod
    @triton.jit
    def _inner(x):
        return _twice(x) + 1.0

    @staticmethod
    @triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4),
                              triton.Config({"BLOCK": 256}, num_warps=4)],
                     key=["n"])
    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n,
                     BLOCK: tl.constexpr):  # odd formatting, kept as it is
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(y_ptr + offs, FusedOps._inner(x), mask=m)

    def forward(self, x):
        y = torch.empty_like(x)
        FusedOps.scale_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel())
        return y
'''

_USER_SPEC = """
name: research_scale
source: {path: my ops.py, function: FusedOps.scale_kernel}
params:
  - {name: x_ptr, kind: pointer, dtype: fp32, shape: [N], role: in}
  - {name: y_ptr, kind: pointer, dtype: fp32, shape: [N], role: out}
  - {name: n, kind: scalar, dtype: i32, value: N}
  - {name: BLOCK, kind: constexpr}
sizes: {verify: {N: 1000}, bench: {N: 1048576}}
grid: ["cdiv(N, BLOCK)"]
autotune: {meta: {BLOCK: [128]}, num_warps: [4], num_stages: [1]}
bytes: "8 * N"
"""


def test_export_of_a_kernel_from_a_user_file_matches_the_unmodified_program(monkeypatch, tmp_path):
    """Triton's override folder is named by the kernel's hash, which covers the source of the
    kernel and its jit helpers *and their first line numbers*: the export of a kernel that ailower
    extracted from a user's file (class member, autotune, helpers, imports of torch and of an
    unknown package above it) must be the folder the user's own, unmodified file asks for."""
    import importlib.util
    import sys
    import types

    from export import read_manifest
    from export._jit import FakeTensor, _StandInDriver, jit_source, override_folder_name

    user = tmp_path / "my ops.py"  # a space in the path, too
    user.write_text(_USER_PROGRAM)
    assert _USER_PROGRAM.splitlines().index("    def scale_kernel(x_ptr, y_ptr, n,") + 1 == 37
    (tmp_path / "spec.yaml").write_text(_USER_SPEC)
    env = {"AILOWER_DATA_DIR": str(tmp_path / "data"), "AILOWER_DB_URL": "", "AILOWER_PTXAS": ""}
    r = ailower("lower", str(tmp_path / "spec.yaml"), "--iterations", "1", "--out",
                str(tmp_path / "out"), env_extra=env)
    assert r.returncode == 0, r.stdout + r.stderr
    r = ailower("export", "latest", "--triton-override", str(tmp_path / "ovr"), env_extra=env)
    assert r.returncode == 2 and "not a suite kernel: give the spec" in r.stderr, r.stderr
    r = ailower("export", "latest", "--kernel", str(tmp_path / "spec.yaml"), "--triton-override",
                str(tmp_path / "ovr"), env_extra=env)
    assert r.returncode == 0, r.stdout + r.stderr
    man = read_manifest(tmp_path / "ovr")
    folders = {e["folder"] for e in man["entries"]}
    assert len(folders) == 2  # n divisible by 16 or not

    # the user's program, run as it is (its imports stood in for: no torch here)
    fake_torch = types.ModuleType("torch")
    fake_torch.Tensor = type("Tensor", (), {})
    utils = types.ModuleType("research_lib.utils")
    utils.launch_helper = None
    for name, mod in (("torch", fake_torch), ("research_lib", types.ModuleType("research_lib")),
                      ("research_lib.utils", utils)):
        monkeypatch.setitem(sys.modules, name, mod)
    ispec = importlib.util.spec_from_file_location("users_ops", user)
    ops = importlib.util.module_from_spec(ispec)
    ispec.loader.exec_module(ops)
    fn = ops.FusedOps.scale_kernel.fn  # the Autotuner's JITFunction
    assert fn.starting_line_number == 32  # Triton's first line: the @staticmethod line
    for n in (1000, 1024):
        src = jit_source(fn, [FakeTensor(1 << 40, "fp32"), FakeTensor(2 << 40, "fp32"), n],
                         {"BLOCK": 128, "num_warps": 4}, 90)
        assert override_folder_name(src) in folders, n

    # and Triton's JIT, with the override variables, compiles it with the exported PTX
    monkeypatch.setenv("TRITON_KERNEL_OVERRIDE", "1")
    monkeypatch.setenv("TRITON_OVERRIDE_DIR", str(tmp_path / "ovr"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    # Triton >= 3.7 reads no class object from a kernel (the program's FusedOps._inner); the
    # user's program needs this on such versions, ailower's extracted copy does not
    monkeypatch.setenv("TRITON_ALLOW_NON_CONSTEXPR_GLOBALS", "1")
    from triton.runtime.driver import driver

    saved = driver._active
    driver.set_active(_StandInDriver(90))
    try:
        k = fn.warmup(FakeTensor(1 << 40, "fp32"), FakeTensor(2 << 40, "fp32"), 1000, BLOCK=128,
                      grid=(1,), num_warps=4)
        assert man["marker"] in k.asm["ptx"]
    finally:
        driver._active = saved
        fn.device_caches.clear()


def test_symlinked_out_prev_and_failed_are_never_followed_into_a_deletion(tmp_path):
    from ailower._outdir import OutputError, StagedOutput

    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("mine")
    real = tmp_path / "real"
    real.mkdir()
    (real / "report.json").write_text("old")
    (tmp_path / "res").symlink_to(real)  # --out is a link: the result goes where it points
    (tmp_path / "real.prev").symlink_to(precious)  # an old .prev that is a link
    (tmp_path / "real.failed").symlink_to(precious)
    s = StagedOutput(tmp_path / "res")
    s.path("report.json").write_text("new")
    assert s.commit() == tmp_path / "real.prev"
    assert (real / "report.json").read_text() == "new"
    assert (tmp_path / "real.prev" / "report.json").read_text() == "old"
    assert (tmp_path / "res").is_symlink() and (precious / "notes.txt").read_text() == "mine"
    f = StagedOutput(tmp_path / "res")
    f.path("transcript.jsonl").write_text("partial")
    assert f.abandon() == tmp_path / "real.failed"
    assert (precious / "notes.txt").read_text() == "mine"
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputError, match="dangling: a symbolic link to .*nowhere, which does not "
                                          "exist"):
        StagedOutput(tmp_path / "dangling")
    assert not [p for p in tmp_path.iterdir() if ".staging-" in p.name]


def test_export_to_symlinks(world, tmp_path):
    _, env = world
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("mine")
    (tmp_path / "ov").mkdir()
    (tmp_path / "ov.prev").symlink_to(precious)
    r = ailower("export", "1", "--triton-override", str(tmp_path / "ov"), env_extra=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (precious / "notes.txt").read_text() == "mine" and not (tmp_path / "ov.prev").is_symlink()
    (tmp_path / "dl").symlink_to(tmp_path / "nowhere")
    r = ailower("export", "1", "--triton-override", str(tmp_path / "dl"), env_extra=env)
    assert r.returncode == 2 and "a symbolic link to" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "nowhere").exists()
