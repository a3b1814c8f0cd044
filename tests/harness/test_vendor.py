"""The vendor-library column (issue 22 item 1): rendering, the ``n/a`` paths, the leaderboard
hook, the declared vendor paths checked against the float64 references (CPU torch when it is
installed; CI has none, so those skip) and on the GPU (``-m gpu``)."""

from __future__ import annotations

import json
import sys

import pytest

from harness.vendor import (
    VendorResult,
    VendorUnavailable,
    check_vendor,
    measure_vendor,
    measure_vendor_subprocess,
    ratio,
    vendor_cell,
    vendor_fn,
)
from kernels import get

VENDOR_KERNELS = ["gemm.fp16", "gemm.fp8", "matmul", "gemm_silu.fp16", "gemm_silu.fp8",
                  "conv2d.fp16", "flash_attention.causal", "flash_attention.noncausal", "bitdelta"]


def test_ratio_and_cell_text():
    # issue 22's H200 numbers: cuBLAS 1.573 ms, autotuned Triton 2.001 ms -> 0.79
    assert ratio(1.573, 2.001) == pytest.approx(0.7861, abs=1e-4)
    assert ratio(None, 2.0) is None and ratio(1.0, 0.0) is None
    v = VendorResult(kernel="gemm.fp16", path="torch.matmul (cuBLAS)", median_ms=1.573)
    assert vendor_cell(v, 2.001) == "1.5730 ms (0.79x)"
    assert vendor_cell(v, None) == "1.5730 ms"
    assert vendor_cell(None, 2.0) == "n/a: not measured"
    na = VendorResult(kernel="relu", reason="n/a: relu: no vendor path declared")
    assert vendor_cell(na, 1.0) == "n/a: relu: no vendor path declared"


def test_declared_vendor_paths():
    for n in VENDOR_KERNELS:
        assert vendor_fn(get(n)) is not None, n
    assert vendor_fn(get("vector_add")) is None
    with pytest.raises(VendorUnavailable, match="no vendor path declared"):
        check_vendor(get("vector_add"))


def test_without_torch_every_row_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)      # import torch -> ImportError
    res = measure_vendor(["gemm.fp16", "vector_add"])
    assert [r.kernel for r in res] == ["gemm.fp16", "vector_add"]
    for r in res:
        assert r.median_ms is None and r.reason.startswith("n/a: torch not importable")


def test_subprocess_without_gpu_is_na():
    """In a child process (the CLI's path): no torch, or torch without CUDA, gives n/a rows."""
    try:
        import torch
        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        pytest.skip("a CUDA device is present: the gpu test covers this path")
    res = measure_vendor_subprocess(["gemm.fp16", "conv2d.fp8"], timeout_s=120)
    assert [r.kernel for r in res] == ["gemm.fp16", "conv2d.fp8"]
    assert all(r.median_ms is None and r.reason.startswith("n/a:") for r in res), res


def test_baseline_table_has_the_vendor_column():
    from ailower.cmd_baseline import BaselineRow, SuiteBaselineReport, render_table

    rep = SuiteBaselineReport(arch="sm_90a", device="NVIDIA H200", rows=[
        BaselineRow(kernel="gemm.fp16", median_ms=2.001, correct=True),
        BaselineRow(kernel="relu", median_ms=0.1, correct=True)],
        vendor=[VendorResult(kernel="gemm.fp16", median_ms=1.573, path="torch.matmul"),
                VendorResult(kernel="relu", reason="n/a: relu: no vendor path declared")])
    text = render_table(rep)
    assert "vendor ms (vendor/Triton)" in text
    gemm = next(ln for ln in text.splitlines() if ln.startswith("gemm.fp16"))
    relu = next(ln for ln in text.splitlines() if ln.startswith("relu"))
    assert "1.5730 ms (0.79x)" in gemm
    assert "n/a: relu: no vendor path declared" in relu
    again = SuiteBaselineReport.model_validate_json(rep.model_dump_json())
    assert again.vendor[0].median_ms == 1.573


def _lb(*entries):
    from campaign.leaderboard import Entry, Leaderboard

    es = [Entry(kernel=k, base=k.split(".")[0], family="common", arch="sm_90a",
                provider="search", who="search", campaign="c", cell_id=i, status="done",
                outcome="win", candidate_ms=ms, baseline_ms=1.2 * ms, speedup=1.2, device=dev)
          for i, (k, ms, dev) in enumerate(entries)]
    return Leaderboard(generated_at="now", campaigns=["c"], archs=["sm_90a"],
                       rows=[e.kernel for e in es], entries=es, best={}, summary=[])


def test_leaderboard_vendor_column(tmp_path):
    from campaign.html import render_html
    from campaign.vendor_column import apply_vendor, load_vendor

    lb = _lb(("bitdelta", 6.1, "NVIDIA H200"), ("gemm.fp16", 1.9, "NVIDIA H100 80GB HBM3"),
             ("relu", 0.1, "NVIDIA H200"), ("softmax", 0.2, "NVIDIA H200"))
    assert all(e.vendor_note == "n/a: not measured" for e in lb.entries)
    rep = {"arch": "sm_90a", "vendor": [
        VendorResult(kernel="bitdelta", device="NVIDIA H200", median_ms=0.813).model_dump(),
        VendorResult(kernel="gemm.fp16", device="NVIDIA H200", median_ms=1.573).model_dump(),
        VendorResult(kernel="relu", device="NVIDIA H200", reason="n/a: no vendor").model_dump()]}
    f = tmp_path / "baseline.json"
    f.write_text(json.dumps(rep))
    apply_vendor(lb, load_vendor(f))
    bd, gm, relu, sm = lb.entries
    assert bd.vendor_ms == 0.813 and bd.vendor_ratio == pytest.approx(0.813 / 6.1)
    assert gm.vendor_ms is None and "measured on NVIDIA H200" in gm.vendor_note
    assert relu.vendor_note == "n/a: no vendor" and sm.vendor_note == "n/a: not measured"
    html = render_html(lb)
    assert "vendor ms (vendor/candidate)" in html and "0.8130 (0.13x)" in html
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json: no vendor results"):
        load_vendor(tmp_path / "bad.json")


@pytest.mark.parametrize("name", VENDOR_KERNELS)
def test_vendor_path_matches_reference_on_cpu_torch(name):
    torch = pytest.importorskip("torch")
    spec = get(name)
    try:
        desc, problems = check_vendor(spec, "cpu")
    except VendorUnavailable as exc:
        pytest.skip(str(exc))
    except (RuntimeError, NotImplementedError) as exc:   # fp8 / fp16 kernels torch lacks on CPU
        pytest.skip(f"torch {torch.__version__} on CPU: {exc}"[:200])
    assert problems == [], (desc, problems)


@pytest.mark.gpu
def test_vendor_paths_on_the_gpu():
    """Every declared vendor path: correct against float64 at the verify size, timed at bench."""
    pytest.importorskip("torch")
    res = measure_vendor(VENDOR_KERNELS, reps=20)
    by = {r.kernel: r for r in res}
    for n in ["gemm.fp16", "gemm.fp8", "matmul", "gemm_silu.fp16", "conv2d.fp16",
              "flash_attention.causal", "flash_attention.noncausal", "bitdelta"]:
        r = by[n]
        assert r.correct is True and r.median_ms and r.median_ms > 0, r
        assert r.q1_ms <= r.median_ms <= r.q3_ms and r.n == 20, r
    print(json.dumps([r.model_dump() for r in res], indent=1))


def test_a_wrong_vendor_path_is_caught(monkeypatch):
    """The float64 check catches a vendor path that is off by 1% (and one missing its output)."""
    pytest.importorskip("torch")
    import kernels.suite.gemm as gemm

    real = gemm.vendor

    def off(name, inputs, dims):
        desc, run = real(name, inputs, dims)
        return desc, lambda: {"c_ptr": run()["c_ptr"] * 1.01}

    monkeypatch.setattr(gemm, "vendor", off)
    _, problems = check_vendor(get("gemm.fp16"), "cpu")
    assert problems and problems[0].startswith("c_ptr:"), problems
    monkeypatch.setattr(gemm, "vendor", lambda n, i, d: ("nothing", lambda: {}))
    _, problems = check_vendor(get("gemm.fp16"), "cpu")
    assert problems == ["c_ptr: the vendor path returned no such output"]
