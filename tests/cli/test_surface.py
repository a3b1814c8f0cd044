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
