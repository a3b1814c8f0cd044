"""``ailower verify FILE.ptx`` with no ``--kernel``: the happens-before check on a default launch
(emulator.launchcheck; issue 18 item 5), on hand-written PTX with and without a race."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import emulator
from ailower import cmd_verify

HERE = Path(__file__).parent / "launchptx"
RACY, SYNCED = HERE / "shift_racy.ptx", HERE / "shift_synced.ptx"
APP = typer.Typer()
cmd_verify.register(APP)
RUN = CliRunner()


def test_racy_file_reports_hb1_and_exits_1():
    res = RUN.invoke(APP, ["verify", str(RACY)])
    assert res.exit_code == 1, res.output
    assert "error: [HB1] data race on shared memory" in res.output
    assert "shift_racy.ptx:30:2" in res.output  # the ld.shared that reads the neighbour's slot
    assert "grid 2x1x1, 64 threads" in res.output  # the default grid, .reqntid threads


def test_race_free_file_has_no_hb_findings_and_exits_0():
    res = RUN.invoke(APP, ["verify", str(SYNCED)])
    assert res.exit_code == 0, res.output
    assert "no happens-before findings on this launch" in res.output
    assert "[HB" not in res.output


def test_no_emulate_skips_the_check():
    res = RUN.invoke(APP, ["verify", str(RACY), "--no-emulate"])
    assert res.exit_code == 0 and "happens-before" not in res.output


def test_launch_file_sets_grid_and_scalars_and_json_carries_the_check(tmp_path):
    lf = tmp_path / "launch.yaml"
    lf.write_text("grid: [3]\nscalars: {1: 10}\nbuffers: {shift_racy_param_0: 4096}\n")
    res = RUN.invoke(APP, ["verify", str(RACY), "--launch", str(lf), "--json"])
    doc = json.loads(res.output)
    (hb,) = doc["happens_before"]
    assert res.exit_code == 1
    assert hb["grid"] == [3, 1, 1] and hb["params"]["shift_racy_param_1"] == "10"
    assert hb["params"]["shift_racy_param_0"] == "zero-filled buffer of 4096 B"
    assert hb["defaulted"] == [] and [f["rule"] for f in hb["findings"]] == ["HB1"]


def test_bad_launch_file_is_bad_input_naming_the_parameter(tmp_path):
    lf = tmp_path / "launch.json"
    lf.write_text(json.dumps({"scalars": {"n": 1}}))
    res = RUN.invoke(APP, ["verify", str(RACY), "--launch", str(lf)])
    flat = " ".join(re.sub(r"[\u2500-\u257f]", " ", res.output).split())  # rich's error box
    assert res.exit_code == 2 and "'n' is not a parameter of 'shift_racy'" in flat
    lf.write_text(json.dumps({"grids": [1]}))
    with pytest.raises(emulator.LaunchFileError, match="unknown key.*grids"):
        emulator.load_launch(lf)


def test_says_why_when_it_cannot_run(tmp_path):
    # a buffer too small for what the kernel stores: a fault naming the parameter's buffer
    lf = tmp_path / "launch.yaml"
    lf.write_text("buffers: {0: 64}\n")
    (c,) = emulator.check_default_launch(SYNCED.read_text(), arch="sm_90a",
                                         launch=emulator.load_launch(lf), filename="s.ptx")
    assert c.status == "fault" and not c.ran
    assert "illegal global address" in c.reason and "shift_synced_param_0" in c.reason
    assert "give them in --launch" in c.reason
    # an instruction the emulator does not model: the opcode and its position
    text = SYNCED.read_text().replace("\tbar.sync \t0;",
                                      "\tbar.sync \t0;\n\tdp4a.u32.u32 \t%r6, %r2, %r2, %r2;")
    (c,) = emulator.check_default_launch(text, arch="sm_90a", filename="s.ptx")
    assert c.status == "unsupported" and "'dp4a.u32.u32' at s.ptx:30:2" in c.reason
    assert "could not complete the check (unsupported)" in c.render()
