"""The race check's two backends (emulator/_hbkern.py): the numba one (fused check-and-record
pass) and the pure-numpy one give the same findings and outputs; the backend is chosen
explicitly and reported, and a missing numba is an error that names the alternative."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import emulator
from emulator import _hbkern

FIXTURES = Path(__file__).parent.parent / "verifier" / "fixtures"

# every happens-before test of test_emulator_hb.py, run again with the numpy backend (the
# numba backend runs them there): same races, deadlocks and clean twins
_spec = importlib.util.spec_from_file_location(
    "_hb_tests_on_numpy", Path(__file__).with_name("test_emulator_hb.py"))
_hb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_hb)
for _name, _fn in vars(_hb).items():
    if _name.startswith("test_"):
        globals()[_name + "_numpy"] = _fn


@pytest.fixture(autouse=True)
def _backend(request):
    """Tests whose name ends in ``_numpy`` run with the numpy backend; the others restore the
    default afterwards."""
    emulator.set_hb_backend("numpy" if request.node.name.split("[")[0].endswith("_numpy")
                            else None)
    yield
    emulator.set_hb_backend(None)


def _emulate(name: str, arch: str, text: str, backend: str, family: str = "triton36"):
    import kernels

    emulator.set_hb_backend(backend)
    extra = {"global_scratch_size": 4096} if family == "fast36" else {}
    return emulator.run_kernel(text, kernels.get(name), arch, filename=f"{name}_{arch}.ptx",
                               **extra)


def _remove_barriers(text: str, which: str) -> str:
    """``text`` with its first (``which`` = "first") or every ("all") CTA barrier removed."""
    lines = text.split("\n")
    bars = [i for i, ln in enumerate(lines) if "bar.sync" in ln or "barrier.sync" in ln]
    drop = set(bars[:1] if which == "first" else bars)
    return "\n".join("" if i in drop else ln for i, ln in enumerate(lines))


@pytest.mark.parametrize("name,arch,family,mutate", [
    ("flash_attention.causal", "sm_90a", "triton36", None),
    ("matmul", "sm_100a", "triton36", None),
    ("gemm.fp16", "sm_80", "triton36", None),
    ("gemm.fp16", "sm_80", "triton36", "all"),
    ("softmax", "sm_90a", "triton36", "first"),
    ("fast.attention_ws", "sm_100a", "fast36", None),
    ("fast.gemm_cluster", "sm_90a", "fast36", None),
])
def test_numba_and_numpy_backends_agree_on_suite_kernels(name, arch, family, mutate):
    text = (FIXTURES / family / f"{name}_{arch}.ptx").read_text()
    if mutate:  # removed barriers: races for both backends to find
        text = _remove_barriers(text, mutate)
    a = _emulate(name, arch, text, "numba", family)
    b = _emulate(name, arch, text, "numpy", family)
    assert (a.hb_backend, b.hb_backend) == ("numba", "numpy")
    assert a.status == b.status and a.message == b.message
    assert [(f.rule, f.severity, f.line, f.message) for f in a.findings] == \
        [(f.rule, f.severity, f.line, f.message) for f in b.findings]
    assert {k: c.max_abs_err for k, c in a.outputs.items()} == \
        {k: c.max_abs_err for k, c in b.outputs.items()}
    if mutate:
        assert any(f.rule == "HB1" for f in a.findings), a.summary()
    else:
        assert a.status == "ok" and not any(f.severity == "error" for f in a.findings)


def test_race_off_reports_no_backend():
    import kernels

    text = (FIXTURES / "triton36" / "softmax_sm_90a.ptx").read_text()
    res = emulator.run_kernel(text, kernels.get("softmax"), "sm_90a", race=False)
    assert res.status == "ok" and res.hb_backend == ""


def test_unknown_backend_is_refused(monkeypatch):
    with pytest.raises(emulator.HBBackendError, match="unknown race-check backend 'cuda'"):
        emulator.set_hb_backend("cuda")
    monkeypatch.setenv(_hbkern.ENV, "fortran")
    with pytest.raises(emulator.HBBackendError, match="AILOWER_EMU_HB_BACKEND='fortran'"):
        emulator.hb_backend()
    monkeypatch.setenv(_hbkern.ENV, "numpy")
    assert emulator.hb_backend() == "numpy"


def test_missing_numba_is_an_error_naming_the_numpy_backend(monkeypatch):
    # no silent fallback: without numba the default backend fails and says how to choose numpy
    monkeypatch.setitem(sys.modules, "numba", None)  # makes `import numba` raise ImportError
    monkeypatch.setattr(_hbkern, "_built", {})
    monkeypatch.delenv(_hbkern.ENV, raising=False)
    with pytest.raises(emulator.HBBackendError, match="AILOWER_EMU_HB_BACKEND=numpy"):
        _hbkern.kernels()
    emulator.set_hb_backend("numpy")
    assert _hbkern.kernels().name == "numpy"
