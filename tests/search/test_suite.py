"""The suite driver's pure parts: entry classes, geometric mean, --part and --merge."""

from __future__ import annotations

import json
import math

from search.suite import entry_class, geomean, main


def test_entry_classes():
    assert entry_class("bitdelta") == "paper"
    assert entry_class("lion") == "paper"
    assert entry_class("gemm.fp16") == "compute"
    assert entry_class("relu.fp16") == "memory"
    assert entry_class("softmax") == "memory"


def test_geomean():
    assert math.isclose(geomean([1.0, 4.0]), 2.0)
    assert geomean([]) is None
    assert math.isclose(geomean([2.0, None, 0.0, 8.0]), 4.0)  # type: ignore[list-item]


def test_merge_prints_the_table_and_geomeans(tmp_path, capsys):
    a = {"rows": [{"kernel": "bitdelta", "class": "paper", "speedup": 1.9,
                   "winner": "search:triton[BLOCK_M=256]", "rejected": {"rejected-evaluation": 1}}]}
    b = {"rows": [{"kernel": "relu.fp16", "class": "memory", "speedup": 0.995,
                   "winner": "search:baseline", "rejected": {}},
                  {"kernel": "gemm.fp16", "class": "compute", "error": "no report"}]}
    fa, fb = tmp_path / "a.json", tmp_path / "b.json"
    fa.write_text(json.dumps(a))
    fb.write_text(json.dumps(b))
    rc = main(["--merge", str(fa), str(fb)])
    out = capsys.readouterr().out
    assert rc == 1  # gemm.fp16 has no candidate
    assert "triton[BLOCK_M=256]" in out and "compute-bound + paper 1.900 (1 entries)" in out
    assert "under 1.000: relu.fp16" in out and "beyond 1% noise: none" in out


def test_bad_part_and_missing_merge_file(tmp_path, capsys):
    assert main(["--merge", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err
    assert main(["--part", "3/2", "--out", str(tmp_path / "o")]) == 2
    assert "--part '3/2'" in capsys.readouterr().err


def test_table_from_a_leaderboard_takes_the_search_cells_of_the_arch(tmp_path, capsys):
    def entry(kernel, provider, arch, speedup, origin, valid=True):
        return {"kernel": kernel, "provider": provider, "arch": arch, "speedup": speedup,
                "origin": origin, "valid": valid, "outcome": "win", "baseline_config": "x",
                "baseline_ms": 2.0, "candidate_ms": 2.0 / (speedup or 1.0),
                "finished_at": "2026-12-01T06:00:00+00:00", "campaign": "c"}
    lb = {"entries": [
        entry("bitdelta", "search", "sm_90a", 2.5, "search:triton[BLOCK_M=512]"),
        entry("gemm.fp16", "search", "sm_90a", 1.04, "search:triton[w4,s3]"),
        entry("relu.fp16", "search", "sm_90a", 1.0, "search:baseline"),
        entry("bitdelta", "triton", "sm_90a", 1.0, "triton:..."),      # another provider
        entry("gemm.fp16", "search", "sm_100a", None, None, valid=True),  # another arch
    ]}
    f = tmp_path / "lb.json"
    f.write_text(json.dumps(lb))
    assert main(["--leaderboard", str(f)]) == 0
    out = capsys.readouterr().out
    assert "search provider over 3 suite entries" in out
    g = math.sqrt(2.5 * 1.04)
    assert f"compute-bound + paper {g:.3f} (2 entries)" in out
    assert "triton[BLOCK_M=512]" in out and "triton:..." not in out
    # the triton cell timed bitdelta's baseline at 2.0 ms; the search candidate took 0.8 ms
    assert "x-check" in out and " 2.500 " in out
    # no triton cell for the kernel: no cross-check for it
    assert "geomean compute-bound + paper 2.500, all 2.500 (1 entries)" in out
    f.write_text("{}")
    assert main(["--leaderboard", str(f)]) == 2
