"""``ailower baseline``: roofline arithmetic, the table, the CLI surface (GPU run: gpu marker)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from ailower import cmd_baseline
from ailower.cmd_baseline import BaselineRow, SuiteBaselineReport, _roofline, render_table


def test_roofline_memory_and_compute_bounds():
    mem = BaselineRow(kernel="relu.fp16", median_ms=0.25, correct=True)
    _roofline(mem, flops=1e8, nbytes=1e9, copy_gbps=4000.0, rates={"fp16": 700.0}, sources={})
    assert mem.bound == "memory" and mem.roofline == pytest.approx(1e9 / 4e12 * 1e3 / 0.25)
    assert not mem.flagged and mem.reason == ""
    slow = BaselineRow(kernel="flash_sinkhorn", median_ms=2.0, flop_dtype="fp16", correct=True)
    _roofline(slow, flops=7e11, nbytes=1e7, copy_gbps=4000.0, rates={"fp16": 700.0},
              sources={"fp16": "torch matmul"})
    assert slow.bound == "compute" and slow.roofline == pytest.approx(0.5 * 1.0 / 1.0 * 1.0)
    assert not slow.flagged  # exactly 50% is not under it
    slower = BaselineRow(kernel="flash_sinkhorn", median_ms=4.0, flop_dtype="fp16", correct=True)
    _roofline(slower, flops=7e11, nbytes=1e7, copy_gbps=4000.0, rates={"fp16": 700.0},
              sources={"fp16": "torch matmul"})
    assert slower.flagged and "MUFU" in slower.reason and "torch matmul" in slower.ceiling
    nodtype = BaselineRow(kernel="x.y", median_ms=1.0, correct=True)
    _roofline(nodtype, flops=1e15, nbytes=1e9, copy_gbps=4000.0, rates={"fp16": 700.0}, sources={})
    assert nodtype.bound == "memory"  # no flop dtype: no compute roofline
    assert nodtype.flagged and "no known cause" in nodtype.reason


def test_table_lists_every_row_and_the_flags():
    rep = SuiteBaselineReport(arch="sm_90a", device="NVIDIA H200", copy_gbps=4100.0,
                              matmul_tflops={"fp16": 700.0}, matmul_source={"fp16": "torch"})
    rep.rows = [BaselineRow(kernel="relu.fp16", best_config="BLOCK_SIZE=4096,w8,s1,c1",
                            median_ms=0.13, gbps=4000.0, bound="memory", roofline=0.97,
                            correct=True),
                BaselineRow(kernel="gemm.fp8", reason="autotune found no correct config")]
    text = render_table(rep)
    assert "relu.fp16" in text and "0.97" in text and "BLOCK_SIZE=4096" in text
    assert "gemm.fp8" in text and "NO" in text and "no correct config" in text
    assert json.loads(rep.model_dump_json())["rows"][0]["kernel"] == "relu.fp16"


def test_cli_needs_suite_or_kernels_and_a_gpu(monkeypatch):
    app = typer.Typer()
    cmd_baseline.register(app)

    @app.command()
    def _other() -> None:  # a second command keeps typer in sub-command mode
        pass

    r = CliRunner().invoke(app, ["baseline"])
    assert r.exit_code == 2 and "--suite" in r.output
    r = CliRunner().invoke(app, ["baseline", "--suite", "--space", "huge"])
    assert r.exit_code == 2 and "--space 'huge': have wide, narrow" in r.output
    monkeypatch.setattr("harness.gpu_available", lambda: (False, "no CUDA driver"))
    r = CliRunner().invoke(app, ["baseline", "--suite"])
    assert r.exit_code == 2 and "needs a GPU" in r.output


@pytest.mark.gpu
def test_two_kernels_on_the_gpu(tmp_path):
    rep = cmd_baseline.suite_baseline(["relu.fp16", "gemm.fp16"], cache_dir=tmp_path, seeds=(0,),
                                      timing_budget_s=0.2, log=lambda s: None)
    assert [r.kernel for r in rep.rows] == ["relu.fp16", "gemm.fp16"]
    for r in rep.rows:
        assert r.correct, r.reason
        assert r.median_ms and r.median_ms > 0 and r.roofline and 0.05 < r.roofline < 1.3
    assert rep.copy_gbps > 1000
