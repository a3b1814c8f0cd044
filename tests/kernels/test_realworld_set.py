"""The real-world kernel set (``tests/kernels/realworld``): kernels written in the styles of
public ML repositories, with specs at their authors' sizes. Every spec loads; ``spec init``
writes a starter that parses as YAML for every jit function of the set (inherited ones
included) and infers the pointer roles the hand-written specs declare. The static lowering table
is ``bench/realworld_table.py`` (minutes; not a unit test)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from harness.errors import ReferenceCompileError
from harness.reference import compile_reference
from kernels import KernelSpec, load_spec
from kernels.source import _class_bases, _mro
from kernels.starter import starter_spec

SET = Path(__file__).parent / "realworld"
SPECS = sorted((SET / "specs").glob("*.yaml"))


def _jit_functions(path: Path) -> list[str]:
    """Every ``@triton.jit`` function of a file as ``fn`` or ``Class.fn``, inherited included."""
    tree = ast.parse(path.read_text())
    out = []
    classes = _class_bases(tree)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d)
                                                     for d in node.decorator_list):
            out.append(node.name)
        elif isinstance(node, ast.ClassDef):
            for c in _mro(node.name, classes):
                for sub in classes[c][0].body:
                    if isinstance(sub, ast.FunctionDef) and any(
                            "jit" in ast.unparse(d) for d in sub.decorator_list):
                        out.append(f"{node.name}.{sub.name}")
    return out


def test_the_set_has_twenty_kernels_in_the_styles_asked_for():
    specs = [load_spec(p) for p in SPECS]
    functions = {(s.source.path, s.source.function) for s in specs}
    assert len(functions) >= 20, sorted(functions)
    text = "".join(p.read_text() for p in SET.glob("*.py"))
    for style in ("import torch", "@staticmethod", "class ReLUFloat8Kernel(ReLUKernel)",
                  "@triton.autotune", "@triton.heuristics", "tl.make_block_ptr",
                  "TILE = tl.constexpr(32)", 'BIAS_TYPE == "vector"'):
        assert style in text, style
    assert any(isinstance(v, str) for s in specs for c in s.configs()
               for v in s.constexprs(c).values())  # string constexprs in the specs


@pytest.mark.parametrize("path", [p for p in sorted(SET.glob("*.py"))
                                  if p.name not in ("__init__.py", "refs.py")],
                         ids=lambda p: p.name)
def test_spec_init_writes_valid_yaml_for_every_kernel_of_the_set(path, tmp_path):
    fns = _jit_functions(path)
    assert fns
    kernels = 0
    for fn in fns:
        data = yaml.safe_load(starter_spec(path, fn, tmp_path))
        assert isinstance(data, dict) and data["source"]["function"] == fn
        assert isinstance(data["grid"], list) and data["params"]
        if any(p.get("role") in ("out", "inout") for p in data["params"]):  # a kernel, no helper
            kernels += 1
            KernelSpec.model_validate({**data, "source": {"path": str(path), "function": fn}})
    assert kernels


@pytest.mark.parametrize("spec_file", SPECS, ids=lambda p: p.stem)
def test_inferred_roles_match_the_hand_written_spec(spec_file, tmp_path):
    spec = load_spec(spec_file)
    data = yaml.safe_load(starter_spec(Path(spec.source.path), spec.source.function, tmp_path))
    got = {p["name"]: (p["kind"], p.get("role")) for p in data["params"]}
    want = {p.name: (p.kind, p.role) for p in spec.params if p.kind == "pointer"}
    assert {n: got[n] for n in want} == want


@pytest.mark.slow
@pytest.mark.parametrize("spec_file", SPECS, ids=lambda p: p.stem)
def test_every_spec_compiles_or_names_the_triton_version(spec_file, tmp_path):
    spec = load_spec(spec_file)
    try:
        art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path)
    except ReferenceCompileError as exc:
        assert "make_block_ptr" in spec.source.source_text()
        assert "ailower supports Triton 3.6" in str(exc)
        return
    assert art.ptx
