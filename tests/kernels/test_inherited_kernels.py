"""Kernels found through class inheritance (``Derived.fn`` with ``fn`` on a base class of the same
file), in ``spec init``, the reference compile that ``lower`` runs, and ``export``."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from ailower.cli import app
from harness.reference import compile_reference
from kernels import load_spec
from kernels.source import SourceExtractError, extract_kernel, signature_of

KERNEL = '''
import torch  # never imported: the file is read with ast
import triton
import triton.language as tl


class ReLUKernel:
    """fp16 ReLU; the fp8 variant inherits the kernel."""

    @staticmethod
    @triton.jit
    def act(x):
        return tl.maximum(x, 0.0)

    @staticmethod
    @triton.jit
    def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        tl.store(y_ptr + offs, ReLUFloat8Kernel.act(x), mask=m)


class ReLUFloat8Kernel(ReLUKernel):
    @staticmethod
    @triton.jit
    def scale(x):
        return x * 2


class LeakyReLUKernel(ReLUKernel):
    @staticmethod
    @triton.jit
    def act(x):
        return tl.where(x > 0, x, x * 0.01)


class Left(ReLUKernel):
    pass


class Right(LeakyReLUKernel):
    pass


class Diamond(Left, Right):
    pass
'''

SPEC = """
name: relu_fp8
source: {path: k.py, function: %s}
params:
  - {name: x_ptr, kind: pointer, dtype: fp16, shape: [N], role: in}
  - {name: y_ptr, kind: pointer, dtype: fp16, shape: [N], role: out}
  - {name: n, kind: scalar, dtype: i32, value: N}
  - {name: BLOCK, kind: constexpr}
sizes: {verify: {N: 1000}, bench: {N: 65536}}
grid: ["cdiv(N, BLOCK)"]
autotune: {meta: {BLOCK: [1024]}}
"""


def test_an_inherited_kernel_is_found_and_copied_once():
    ext = extract_kernel(KERNEL, "ReLUFloat8Kernel.kernel", "k.py")
    assert ext.qualname == "ReLUFloat8Kernel.kernel"
    assert ext.functions == ["ReLUKernel.kernel", "ReLUKernel.act"]  # defined on the base
    assert ext.text.count("def kernel(") == 1
    assert signature_of(KERNEL, "ReLUFloat8Kernel.kernel", "k.py").names == [
        "x_ptr", "y_ptr", "n", "BLOCK"]


def test_python_method_resolution_order_decides_which_def():
    # Diamond(Left, Right): Left -> Right -> LeakyReLUKernel -> ReLUKernel (C3, as Python)
    ext = extract_kernel(KERNEL.replace("ReLUFloat8Kernel.act(x)", "Diamond.act(x)"),
                         "Diamond.kernel", "k.py")
    assert "LeakyReLUKernel.act" in ext.functions and "ReLUKernel.act" not in ext.functions
    ns: dict = {}
    exec(compile("class A: pass\nclass B: pass\nclass L(A, B): pass\nclass R(B, A): pass\n",
                 "x", "exec"), ns)  # Python refuses class D(L, R); so do we
    bad = KERNEL + "\nclass A:\n    pass\nclass B:\n    pass\nclass L(A, B):\n    pass\n" \
        "class R(B, A):\n    pass\nclass D(L, R):\n    pass\n"
    with pytest.raises(SourceExtractError, match="no consistent order"):
        extract_kernel(bad, "D.kernel", "k.py")
    with pytest.raises(SourceExtractError, match="no function 'Left.nope'"):
        extract_kernel(KERNEL, "Left.nope", "k.py")


@pytest.mark.parametrize("fn,call,leaky", [
    ("ReLUFloat8Kernel.kernel", "ReLUFloat8Kernel.act", False),
    # the body names the class whose act it calls: as in Python, not the override
    ("LeakyReLUKernel.kernel", "ReLUFloat8Kernel.act", False),
    ("Diamond.kernel", "Diamond.act", True),  # Diamond.act is LeakyReLUKernel.act (C3)
])
def test_inherited_kernel_compiles_and_exports(tmp_path, fn, call, leaky):
    from export import read_manifest, triton_override

    (tmp_path / "k.py").write_text(KERNEL.replace("ReLUFloat8Kernel.act(x)", f"{call}(x)"))
    (tmp_path / "s.yaml").write_text(SPEC % fn)
    spec = load_spec(tmp_path / "s.yaml")
    cfg = spec.configs()[0]
    art = compile_reference(spec, "sm_90a", cfg, cache_dir=tmp_path / "cache")
    assert art.abi.entry == "kernel"
    # ReLU is a max; the leaky override multiplies by 0.01 (0f3C23D70A / 0x211F in f16)
    import re

    ops = set(re.findall(r"^\s*((?:mul|max|fma)[.\w]*\.f(?:16|32)\w*)", art.ptx, re.M))
    assert any(o.startswith(("mul", "fma")) for o in ops) == leaky, ops
    assert any(o.startswith("max") for o in ops) != leaky, ops
    out = triton_override(spec, art.ptx, tmp_path / "ovr", arch="sm_90a", meta=dict(cfg.meta),
                          threads=art.abi.threads, cache_dir=tmp_path / "cache")
    assert out is not None and read_manifest(tmp_path / "ovr")


def test_spec_init_on_an_inherited_kernel(tmp_path, monkeypatch):
    (tmp_path / "k.py").write_text(KERNEL)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["spec", "init", "k.py::ReLUFloat8Kernel.kernel",
                                 "--out", "relu.yaml"])
    assert r.exit_code == 0, r.output
    data = yaml.safe_load((tmp_path / "relu.yaml").read_text())
    assert data["source"]["function"] == "ReLUFloat8Kernel.kernel"
    assert [p["name"] for p in data["params"]] == ["x_ptr", "y_ptr", "n", "BLOCK"]
