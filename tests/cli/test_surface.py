"""Issue 21 defect 8: the CLI's rough edges (help text, rule ids, messages, piped output)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

COMMANDS = ["lower", "kernels", "verify", "rule", "rules", "serve", "baseline", "eval", "export",
            "leaderboard", "keys", "runs", "cache", "spec", "suite"]
"""``ailower --help``'s commands, in order (as before the CLI's modules were split)."""


def _ailower(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100", "AILOWER_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run([sys.executable, "-m", "ailower", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)


def test_help_lists_the_same_commands_reads_as_prose_and_shows_no_flag_types(tmp_path):
    r = _ailower("--help", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    listed = [ln.split()[1] for ln in r.stdout.splitlines()
              if ln.startswith("│ ") and len(ln.split()) > 2 and ln.split()[1].isalpha()
              and ln.split()[1].islower() and not ln.split()[1].startswith("-")]
    assert [c for c in listed if c in COMMANDS] == COMMANDS
    assert "<bool>" not in r.stdout
    # the docstring broke after "exit 1 on" at the source's width; now it is one sentence
    assert "exit 1 on an error" in " ".join(r.stdout.replace("│", " ").split())
    assert "exit 1 on  " not in r.stdout
    r = _ailower("verify", "--help", tmp_path=tmp_path)
    assert r.returncode == 0 and "<bool>" not in r.stdout and "<str>" in r.stdout
    assert "--exit-zero" in r.stdout and "--assemble" in r.stdout


def test_rule_ids_are_case_insensitive(tmp_path):
    upper, lower = _ailower("rule", "TA4", tmp_path=tmp_path), _ailower("rule", "ta4", tmp_path=tmp_path)
    assert upper.returncode == 0 and lower.returncode == 0, lower.stderr
    assert lower.stdout == upper.stdout and upper.stdout.startswith("TA4 ")
    bad = _ailower("rule", "zz9", tmp_path=tmp_path)
    assert bad.returncode == 2 and "unknown rule id 'zz9'" in bad.stderr


def test_a_rejected_call_in_an_expression_names_its_source_not_its_ast():
    from kernels.expr import ExprError, compile_expr

    with pytest.raises(ExprError) as e:
        compile_expr("__import__('os').system('id')")
    msg = str(e.value)
    assert "Attribute(" not in msg and "Call(func" not in msg
    assert "__import__('os').system" in msg and "cdiv" in msg


def test_the_campaign_start_line_joins_lists():
    from ailower.cmd_suite import start_line

    line = start_line({"campaign": "c1", "cells": 6, "added": 6, "already_done": 0,
                       "archs": ["sm_89", "sm_100a"], "providers": ["search", "openai:m"],
                       "iterations": 2, "backend": "local"}, 3)
    assert "3 kernels x sm_89, sm_100a x search, openai:m, 2 iterations" in line
    assert "[" + "'" not in line


def test_every_cli_module_prints_through_the_shared_consoles():
    """A module-level ``Console()`` of its own hard-wraps piped text at 80 columns."""
    offenders = []
    for path in sorted((ROOT / "ailower").glob("*.py")):
        if path.name in ("_output.py",):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Console":
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


ADD = '''import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)
'''

REF = '''def wrong(inputs, dims):
    return {"output_ptr": inputs["x_ptr"] - inputs["y_ptr"]}
'''


def _add_spec(y_role: str, reference: str | None) -> str:
    return ("name: add\nsource: {path: add.py, function: add_kernel}\nparams:\n"
            "  - {name: x_ptr, kind: pointer, dtype: fp32, shape: [N], role: in}\n"
            f"  - {{name: y_ptr, kind: pointer, dtype: fp32, shape: [N], role: {y_role}}}\n"
            "  - {name: output_ptr, kind: pointer, dtype: fp32, shape: [N], role: out}\n"
            "  - {name: n_elements, kind: scalar, dtype: i32, value: N}\n"
            "  - {name: BLOCK_SIZE, kind: constexpr}\n"
            "sizes: {verify: {N: 1000}, bench: {N: 4096}}\ngrid: ['cdiv(N, BLOCK_SIZE)']\n"
            "autotune: {meta: {BLOCK_SIZE: [256]}, num_warps: [4]}\n"
            + (f"reference: {reference}\n" if reference else ""))


def test_lower_warns_when_an_out_buffer_is_read_before_it_is_written(tmp_path):
    """Issue 21 defect 5: `spec init` guessed `y_ptr` as out; nothing flagged the wrong spec."""
    (tmp_path / "add.py").write_text(ADD)
    (tmp_path / "bad.yaml").write_text(_add_spec("out", None))
    (tmp_path / "good.yaml").write_text(_add_spec("in", None))
    r = _ailower("lower", "add.py::add_kernel", "--spec", "bad.yaml", "--provider", "triton",
                 "--iterations", "1", "--arch", "sm_90a", "--out", "o1", tmp_path=tmp_path)
    assert f"{tmp_path / 'add.py'}:11: 'y_ptr' is declared 'role: out'" in " ".join(r.stderr.split())
    assert "'role: inout'" in r.stderr
    r = _ailower("lower", "add.py::add_kernel", "--spec", "good.yaml", "--provider", "triton",
                 "--iterations", "1", "--arch", "sm_90a", "--out", "o2", tmp_path=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "declared 'role: out'" not in r.stderr


def test_lower_says_the_spec_is_probably_wrong_when_tritons_own_ptx_fails_it(tmp_path):
    (tmp_path / "add.py").write_text(ADD)
    (tmp_path / "ref.py").write_text(REF)
    (tmp_path / "spec.yaml").write_text(_add_spec("in", "ref.py::wrong"))
    r = _ailower("lower", "add.py::add_kernel", "--spec", "spec.yaml", "--provider", "triton",
                 "--iterations", "1", "--arch", "sm_90a", "--out", "o", tmp_path=tmp_path)
    out = " ".join(r.stdout.split())
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no valid candidate" in out and "rejected-evaluation" in out
    assert "the spec or its reference is probably wrong" in out
