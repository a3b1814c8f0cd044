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


TMA = (Path(__file__).parent.parent / "verifier" / "fixtures" / "fast36" /
       "fast.gemm_tma_persistent_sm_90a.ptx")
# Triton's host-TensorDescriptor ABI: each descriptor is the 128-byte tensor map, then the
# tensor's shape (2 x u32) and strides (2 x u64, scalars here, not pointers); then M, N, K
_TMA_LAUNCH = """grid: [2]
scalars: {1: 256, 2: 256, 3: 256, 4: 1, 6: 256, 7: 256, 8: 256, 9: 1, 11: 256, 12: 256,
          13: 256, 14: 1, 15: 256, 16: 256, 17: 256}
tensor_maps:
  0: {dtype: fp16, shape: [256, 256], block: [128, 64], swizzle: 128}
  5: {dtype: fp16, shape: [256, 256], block: [128, 64], swizzle: 128}
  10: {dtype: fp16, shape: [256, 256], block: [128, 64], swizzle: 128}
"""


def test_tensor_map_parameters_from_the_launch_file(tmp_path):
    lf = tmp_path / "launch.yaml"
    lf.write_text(_TMA_LAUNCH)
    cfg = emulator.load_launch(lf)
    (c,) = emulator.check_default_launch(TMA.read_text(), arch="sm_90a", launch=cfg,
                                         filename="t.ptx")
    assert c.status == "ok" and c.findings == [], c.render()
    assert c.params["gemm_tma_persistent_kernel_param_0"] == (
        "tensor map of a zero-filled fp16 256x256 tensor, block 128x64, swizzle 128 B")
    # the consumer's wait on the stage's mbarrier removed: the wgmma reads the TMA-loaded tile
    # before its complete_tx released it
    wait = "\tmbarrier.try_wait.parity.shared.b64 complete, [%r91], %r226;\n\t@!complete bra.uni waitLoop;"
    assert TMA.read_text().count(wait) == 1
    (c,) = emulator.check_default_launch(TMA.read_text().replace(wait, ""), arch="sm_90a",
                                         launch=cfg, filename="t.ptx")
    assert c.status == "ok" and "HB1" in {f.rule for f in c.findings}, c.render()


def test_a_tensor_map_parameter_without_a_description_is_inferred():
    # no launch file: the maps come from the kernel's expect_tx counts and coordinates
    # (emulator.tmap_infer); the same missing wait is found as with the launch file
    (c,) = emulator.check_default_launch(TMA.read_text(), arch="sm_90a", filename="t.ptx")
    assert c.status == "ok" and c.findings == [], c.render()
    assert c.inferred == ["gemm_tma_persistent_kernel_param_0",
                          "gemm_tma_persistent_kernel_param_5",
                          "gemm_tma_persistent_kernel_param_10"]
    assert "16384 B per copy" in c.params["gemm_tma_persistent_kernel_param_0"]
    assert "is not race-checked" in c.render()
    wait = "\tmbarrier.try_wait.parity.shared.b64 complete, [%r91], %r226;\n\t@!complete bra.uni waitLoop;"
    (c,) = emulator.check_default_launch(TMA.read_text().replace(wait, ""), arch="sm_90a",
                                         filename="t.ptx")
    assert c.status == "ok" and "HB1" in {f.rule for f in c.findings}, c.render()


def test_expect_tx_counts_no_box_fits_are_reported_by_the_checked_run():
    # every expect_tx of the kernel announces 24 bytes more than the stage buffers hold: the
    # maps get the distance between their stage buffers and the checked run reports the phase
    # that never completes
    text = TMA.read_text()
    assert text.count("], 32768;") == 3
    (c,) = emulator.check_default_launch(text.replace("], 32768;", "], 32792;"),
                                         arch="sm_90a", filename="t.ptx")
    assert "the expect_tx counts imply more" in c.params["gemm_tma_persistent_kernel_param_0"]
    assert c.status == "deadlock" and {f.rule for f in c.findings} == {"HB2"}, c.render()


def test_a_tensor_map_that_cannot_be_inferred_says_what_to_give():
    # the loads' phases never complete (no expect_tx announces their bytes, and the arrivals
    # complete the phase at once): no byte count to infer the maps from
    text = TMA.read_text()
    assert text.count(" mbarrier.arrive.expect_tx.shared.b64 _, [%r44], 32768;") == 1
    for r in ("%r44", "%r67", "%r96"):
        text = text.replace(f" mbarrier.arrive.expect_tx.shared.b64 _, [{r}], 32768;",
                            f" mbarrier.arrive.shared.b64 _, [{r}];")
    (c,) = emulator.check_default_launch(text, arch="sm_90a", filename="t.ptx")
    assert c.status == "error" and not c.ran, c.render()
    assert "'gemm_tma_persistent_kernel_param_0' (.b8 [128]) at t.ptx:13:23" in c.reason
    assert "could not be inferred from the kernel" in c.reason
    assert "tensor_maps: {gemm_tma_persistent_kernel_param_0: {dtype: fp16" in c.reason


@pytest.mark.parametrize("entry,msg", [
    ("{dtype: fp17, shape: [64], block: [64]}", r"dtype: 'fp17' is not one of"),
    ("{dtype: fp16, shape: [64, 64], block: [64]}", r"differ in rank"),
    ("{dtype: fp16, shape: [64, 64], block: [64, 512]}", r"block: 512 is outside \[1, 256\]"),
    ("{dtype: fp16, shape: [64, 4], block: [64, 4]}", r"not multiples of 16 bytes"),
    ("{dtype: fp16, shape: [64], block: [64], swizzle: 16}", r"swizzle: 16 is not 0, 32"),
    ("{dtype: fp16, shape: [64]}", r"needs dtype, shape and block"),
])
def test_a_bad_tensor_map_description_is_named(tmp_path, entry, msg):
    lf = tmp_path / "launch.yaml"
    lf.write_text(f"tensor_maps: {{a_desc: {entry}}}\n")
    with pytest.raises(emulator.LaunchFileError, match=r"tensor_maps\.a_desc.*" + msg):
        emulator.load_launch(lf)


def test_a_tensor_map_for_a_parameter_that_is_not_one_is_an_error(tmp_path):
    lf = tmp_path / "launch.yaml"
    lf.write_text("tensor_maps: {0: {dtype: fp16, shape: [64], block: [64]}}\n")
    (c,) = emulator.check_default_launch(SYNCED.read_text(), arch="sm_90a",
                                         launch=emulator.load_launch(lf), filename="s.ptx")
    assert c.status == "error" and "is not a .b8 [128] parameter" in c.reason


@pytest.mark.parametrize("entry,msg", [
    # red team (round 5): a list where a name / number goes was a TypeError traceback, a huge
    # shape a numpy MemoryError, a box row wider than the swizzle span a map the driver refuses
    ("{dtype: [fp16], shape: [64], block: [64]}", r"dtype: \['fp16'\] is not one of"),
    ("{dtype: fp16, shape: [64, 64], block: [64, 64], swizzle: [128]}", r"swizzle: \[128\]"),
    ("{dtype: fp16, shape: [65536, 65536, 64], block: [1, 64, 64]}", r"shape: .* over the"),
    ("{dtype: fp16, shape: [64, 128], block: [64, 128], swizzle: 128}",
     r"inner dimension is 256 B, over the 128 B swizzle"),
    ("{dtype: fp16, shape: [64, 64], block: [64, 64], swizzle: 64}",
     r"inner dimension is 128 B, over the 64 B swizzle"),
])
def test_a_malformed_tensor_map_description_is_named_not_a_crash(tmp_path, entry, msg):
    lf = tmp_path / "launch.yaml"
    lf.write_text(f"tensor_maps: {{a_desc: {entry}}}\n")
    with pytest.raises(emulator.LaunchFileError, match=r"tensor_maps\.a_desc.*" + msg):
        emulator.load_launch(lf)


def test_a_parameter_given_twice_is_bad_input(tmp_path):
    # red team round 5: one parameter in tensor_maps and scalars (by name and by index) was
    # silently taken as one of them
    lf = tmp_path / "launch.yaml"
    lf.write_text("scalars: {0: 7}\ntensor_maps: {gemm_tma_persistent_kernel_param_0: "
                  "{dtype: fp16, shape: [64, 64], block: [64, 64], swizzle: 128}}\n")
    with pytest.raises(emulator.LaunchFileError, match="parameter 0 "
                       "'gemm_tma_persistent_kernel_param_0' .* is given in scalars and "
                       "tensor_maps: give it once"):
        emulator.check_default_launch(TMA.read_text(), arch="sm_90a",
                                      launch=emulator.load_launch(lf), filename="t.ptx")
    lf.write_text("scalars: {shift_racy_param_0: 7}\nbuffers: {0: 4096}\n")
    with pytest.raises(emulator.LaunchFileError, match="given in scalars and buffers"):
        emulator.check_default_launch(RACY.read_text(), arch="sm_90a",
                                      launch=emulator.load_launch(lf), filename="r.ptx")


def test_a_cluster_shape_from_the_launch_file_and_its_bad_values(tmp_path):
    lf = tmp_path / "launch.yaml"
    lf.write_text("cluster: [2]\n")
    assert emulator.load_launch(lf).cluster == (2, 1, 1)
    lf.write_text("cluster: [0, 1]\n")
    with pytest.raises(emulator.LaunchFileError, match=r"cluster: 0 is outside \[1, 16\]"):
        emulator.load_launch(lf)
