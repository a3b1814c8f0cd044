"""Feedback a model can act on: both roofline fractions, the closer bound, the ncu metrics table.

``data/ncu_softmax_h200_recorded.txt`` is a real ncu output (recorded on an H200). The others
under ``data/`` are written by hand in the exact layout of
``ncu --csv --page raw --print-units base`` (``==PROF==`` lines and the worker's JSON lines
interleaved, a header row of metric names, a unit row, one row per kernel; thousands separators
in numbers), one per kernel for candidate and baseline, and one of a host where the counters
are not readable (``ERR_NVGPUCTRPERM``). ``eval_softmax_h200.json`` is an ``EvalResult`` of an
H200 evaluation of softmax, written in the worker's JSON format. No GPU is needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.feedback import eval_feedback, ncu_table, roofline_fractions
from harness.profile import (
    NCU_METRICS,
    STALL_METRICS,
    NcuParseError,
    NcuReport,
    find_ncu,
    ncu_command,
    parse_ncu_csv,
    profile_once,
)
from harness.results import EvalResult

DATA = Path(__file__).parent / "data"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_parse_raw_csv_with_units_and_interleaved_lines():
    [rep] = parse_ncu_csv(_read("ncu_softmax_candidate.csv"))
    assert rep.available and rep.kernel == "softmax_kernel"
    assert set(rep.metrics) == set(NCU_METRICS) | set(STALL_METRICS)
    assert rep.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 81.37
    assert rep.metrics["gpu__time_duration.sum"] == 86912.0  # "86,912"
    assert rep.metrics["launch__registers_per_thread"] == 28
    assert rep.units["gpu__time_duration.sum"] == "ns"
    assert rep.units["launch__registers_per_thread"] == "register/thread"
    assert rep.stalls(3) == [("long_scoreboard", 9.84), ("barrier", 1.27), ("wait", 0.63)]
    [base] = parse_ncu_csv(_read("ncu_softmax_baseline.csv"))
    assert base.metrics["launch__shared_mem_per_block_dynamic"] == 32
    assert base.stalls(1) == [("long_scoreboard", 12.61)]


def test_parse_a_recorded_h200_output():
    """Recorded on an H200 (ncu 2025.3.1, in a Firecracker VM) with the metric set of
    harness.profile (the stall metrics as ``regex:smsp__average_warps_issue_stalled_.*``): one
    launch of softmax's Triton reference at the verify size; ``--page raw`` also lists every
    device attribute."""
    [rep] = parse_ncu_csv(_read("ncu_softmax_h200_recorded.txt"))
    assert rep.available and rep.kernel == "softmax_kernel"
    assert set(NCU_METRICS) | set(STALL_METRICS) <= set(rep.metrics)  # every name is real
    assert rep.metrics["launch__registers_per_thread"] == 47
    assert rep.metrics["gpu__time_duration.sum"] == 3648.0  # printed "3,648"
    assert rep.metrics["lts__t_sector_hit_rate.pct"] == 61.51
    assert rep.units["launch__shared_mem_per_block_dynamic"] == "byte/block"
    assert rep.stalls(3) == [("short_scoreboard", 1.6), ("long_scoreboard", 1.53),
                             ("wait", 1.52)]
    assert "device__attribute_display_name" not in rep.metrics  # text cells are left out


def test_counters_unavailable_gives_the_reason():
    [rep] = parse_ncu_csv(_read("ncu_errperm.txt"))
    assert not rep.available and not rep.metrics
    assert rep.reason.startswith("ERR_NVGPUCTRPERM - The user does not have permission")


def test_parser_errors_name_the_line_and_na_values_are_left_out():
    head = '"ID","Kernel Name","dram__throughput.avg.pct_of_peak_sustained_elapsed"'
    text = f'==PROF== x\n{head}\n"","","%"\n"0","k","n/a"\n"1","k2","12.5"\n'
    a, b = parse_ncu_csv(text)
    assert a.available and a.metrics == {} and b.metrics == {
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": 12.5}
    with pytest.raises(NcuParseError, match=r"out.csv:3: 2 cells, the header has 3"):
        parse_ncu_csv(f'==PROF== x\n{head}\n"0","k"\n', source="out.csv")
    with pytest.raises(NcuParseError, match="without a 'Kernel Name' column"):
        parse_ncu_csv('"a","b"\n"1","2"\n')
    [none] = parse_ncu_csv("==WARNING== Note: Running with unmodified GPU clocks.\n"
                           "==WARNING== No kernels were profiled.\n")
    assert not none.available and none.reason == "No kernels were profiled."


def test_command_and_missing_ncu(monkeypatch, tmp_path):
    cmd = ncu_command("/opt/ncu", "/usr/bin/python3", "softmax_kernel")
    assert cmd[:3] == ["/opt/ncu", "--clock-control", "none"]
    assert cmd[cmd.index("--launch-count") + 1] == "1"
    assert cmd[cmd.index("--kernel-name") + 1] == "softmax_kernel"
    assert ["--csv", "--page", "raw", "--print-units", "base"] == cmd[3:8]
    assert cmd[-4:] == ["/usr/bin/python3", "-m", "harness.gpu.worker", "--once"]
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("AILOWER_NCU", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    if find_ncu() is None:  # hosts with /usr/local/cuda*/bin/ncu still find it
        rep = profile_once("{}", "k")
        assert not rep.available and rep.reason.startswith("ncu unavailable: no ncu found")


def test_a_fake_ncu_that_exits_without_csv_says_ncu_unavailable(tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\necho '==PROF== Connected to process 1'\nexit 1\n")
    fake.chmod(0o755)
    rep = profile_once("{}", "k", ncu=str(fake), timeout_s=30)
    assert not rep.available and rep.reason.startswith("ncu unavailable: exit 1")
    assert rep.command[0] == str(fake)


def test_feedback_of_a_recorded_gpu_evaluation_shows_rooflines_and_the_table():
    res = EvalResult.model_validate_json(_read("eval_softmax_h200.json"))
    cand = parse_ncu_csv(_read("ncu_softmax_candidate.csv"))[0]
    base = parse_ncu_csv(_read("ncu_softmax_baseline.csv"))[0]
    comp, mem = roofline_fractions(res.candidate, res.device)
    # 268435456 B in 0.08691 ms over 4103.6 GB/s; 1.678e8 FLOP over 66.9 TFLOP/s
    assert mem == pytest.approx(268435456 / 0.08691e-3 / 1e9 / 4103.6)
    assert comp == pytest.approx(5 * 4096 * 8192 / 0.08691e-3 / 1e12 / 66.9)
    text = eval_feedback(res, (cand, base))
    assert "roofline candidate: compute 2.9% of peak FLOP/s, memory 75.3% of the measured " \
           "copy bandwidth; closer bound: memory" in text
    assert "roofline baseline: compute 2.2% of peak FLOP/s, memory 57.5%" in text
    assert "speedup 1.310x (95% CI 1.304-1.315)" in text
    rows = {ln.split("  ")[2].strip(): ln.split()[-2:] for ln in text.splitlines()
            if ln.startswith("    ") and "  " in ln.strip() and "top warp" not in ln}
    assert rows["DRAM throughput %"] == ["81.37", "62.08"]
    assert rows["achieved occupancy %"] == ["87.91", "71.56"]
    assert rows["registers / thread"] == ["28", "40"]
    assert rows["L2 hit rate %"] == ["3.41", "4.02"]
    assert "top warp stalls (candidate, per issued instruction): long_scoreboard 9.84, " \
           "barrier 1.27, wait 0.63" in text
    assert "top warp stalls (baseline, per issued instruction): long_scoreboard 12.61" in text
    assert eval_feedback(res, (cand, base)) == text  # deterministic


def test_feedback_without_counters_says_so_and_gives_the_rest():
    res = EvalResult.model_validate_json(_read("eval_softmax_h200.json"))
    perm = parse_ncu_csv(_read("ncu_errperm.txt"))[0]
    text = eval_feedback(res, (perm, perm))
    assert "ncu unavailable: ERR_NVGPUCTRPERM - The user does not have permission" in text
    assert "roofline candidate: compute 2.9%" in text and "Nsight Compute (" not in text
    # one side missing: the other side's numbers are still shown
    cand = parse_ncu_csv(_read("ncu_softmax_candidate.csv"))[0]
    half = ncu_table(cand, NcuReport(available=False, reason="ncu unavailable: timed out"))
    assert "ncu unavailable for the baseline: timed out" in half and "81.37" in half
    assert "ncu profiling off" in eval_feedback(res, None, "ncu profiling off")
