"""``ailower spec init``: a commented starter spec from a kernel's signature (file not executed)."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from ailower.cli import app
from harness.reference import compile_reference
from kernels import load_spec

DATA = Path(__file__).parent / "data"

KERNEL = '''
import torch  # not installed here: the file is never executed
import triton
import triton.language as tl


@triton.jit
def rms_kernel(x_ptr, out_ptr, w_ptr, n, eps, stride_x, BLOCK: tl.constexpr,
               HAS_W: tl.constexpr = True, bias=None):
    """Scale each element (a starter-spec test kernel)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs * stride_x, mask=m)
    if HAS_W:
        x = x * tl.load(w_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x + eps, mask=m)
'''


def test_spec_init_writes_a_spec_that_loads_and_compiles(tmp_path, monkeypatch):
    (tmp_path / "k.py").write_text(KERNEL)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["spec", "init", "k.py::rms_kernel", "--out", "specs/rms.yaml"])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "specs" / "rms.yaml").read_text()
    assert "# TODO" in text and "never executed" in text
    data = yaml.safe_load(text)
    kinds = {p["name"]: p for p in data["params"]}
    assert kinds["out_ptr"]["role"] == "out" and kinds["x_ptr"]["role"] == "in"
    assert kinds["HAS_W"]["value"] is True  # a YAML bool, not 1.0
    assert kinds["bias"]["kind"] == "none" and kinds["eps"]["dtype"] == "fp32"
    assert data["source"]["path"] == "../k.py"
    spec = load_spec(tmp_path / "specs" / "rms.yaml")
    cfg = spec.configs()[0]
    assert spec.constexprs(cfg)["HAS_W"] is True
    art = compile_reference(spec, "sm_90a", cfg, cache_dir=tmp_path / "cache")
    assert art.abi.entry == "rms_kernel"
    # an existing file is kept unless --force
    r2 = CliRunner().invoke(app, ["spec", "init", "k.py::rms_kernel", "--out", "specs/rms.yaml"])
    assert isinstance(r2.exception, Exception) and "the file exists; pass --force" in str(r2.exception)


def test_spec_init_errors_name_the_problem(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["spec", "init", str(DATA / "research_kernels.py") + "::nope"])
    assert r.exit_code != 0
    assert "no function 'nope'; the file defines:" in str(r.exception)
    r = CliRunner().invoke(app, ["spec", "init", "k.py"])
    assert r.exit_code != 0 and "use FILE.py::function" in str(r.exception)
