"""``ailower/cmd_verify.py``: the v1 ``verify`` command (select/ignore, formats, exit status) and
``ailower rule`` / ``rules``, driven through typer's CliRunner on a local app."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner
from verifier_testlib import FIXTURES

from ailower import cmd_verify

APP = typer.Typer()
cmd_verify.register(APP)  # verify, rule, rules
RUN = CliRunner()
GOOD = FIXTURES / "handwritten" / "tc_gemm_sm100a.ptx"


def test_clean_file_exits_0(tmp_path):
    res = RUN.invoke(APP, ["verify", str(GOOD)])
    assert res.exit_code == 0 and "no findings" in res.output


def test_error_exits_1_with_compiler_style_output_and_witness(tmp_path):
    bad = tmp_path / "leak.ptx"
    bad.write_text("\n".join(ln for ln in GOOD.read_text().splitlines()
                             if "tcgen05.dealloc" not in ln) + "\n")
    res = RUN.invoke(APP, ["verify", str(bad), "--arch", "sm_100a"])
    assert res.exit_code == 1
    assert f"{bad}:" in res.output and ": error[TA4]: tensor memory is not freed" in res.output
    assert "witness path: entry ->" in res.output
    res = RUN.invoke(APP, ["verify", str(bad), "--ignore", "TA4"])
    assert res.exit_code == 0
    res = RUN.invoke(APP, ["verify", str(bad), "--exit-zero", "--output-format", "concise"])
    assert res.exit_code == 0 and res.output.count("error[TA4]") == 1
    res = RUN.invoke(APP, ["verify", str(bad), "--json", "--select", "TA"])
    doc = json.loads(res.output)
    assert res.exit_code == 1 and doc["counts"]["error"] == 1
    assert all(r.startswith("TA") for r in doc["rules"])


def test_rule_and_rules():
    res = RUN.invoke(APP, ["rule", "MB5"])
    assert res.exit_code == 0 and "What it checks:" in res.output and "parity" in res.output
    res = RUN.invoke(APP, ["rules"])
    assert res.exit_code == 0 and "TA4" in res.output and "W3" in res.output
