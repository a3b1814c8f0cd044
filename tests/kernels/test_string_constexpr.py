"""String and tuple constexpr values: spec (YAML/JSON), identity, config keys, Triton."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from harness.reference import compile_reference
from kernels import Config, KernelSpec, SpecError, load_spec
from kernels.expr import ExprError, evaluate, evaluate_value

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def bias_kernel(x_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr, BIAS_TYPE: tl.constexpr,
                SCALE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if BIAS_TYPE == "vector":
        x = x + tl.load(b_ptr + offs, mask=m)
    elif BIAS_TYPE == "matrix":
        x = x * tl.load(b_ptr + offs, mask=m)
    x = x * SCALE[0] + SCALE[1]
    tl.store(out_ptr + offs, x, mask=m)
'''

SPEC = """
name: bias
source: {path: k.py, function: bias_kernel}
params:
  - {name: x_ptr, kind: pointer, dtype: fp32, shape: [N], role: in}
  - {name: b_ptr, kind: pointer, dtype: fp32, shape: [N], role: in}
  - {name: out_ptr, kind: pointer, dtype: fp32, shape: [N], role: out}
  - {name: n, kind: scalar, dtype: i32, value: N}
  - {name: BLOCK, kind: constexpr}
  - {name: BIAS_TYPE, kind: constexpr%s}
  - {name: SCALE, kind: constexpr, value: [3, 5]}
sizes: {verify: {N: 1000}, bench: {N: 4096}}
grid: ["cdiv(N, BLOCK)"]
autotune:
  meta: {BLOCK: [256]%s}
"""


def _spec(tmp_path, value: str = "", meta: str = ', BIAS_TYPE: ["none", "vector", "matrix"]'):
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "s.yaml").write_text(SPEC % (value, meta))
    return load_spec(tmp_path / "s.yaml")


def test_string_meta_values_are_configs_and_reach_triton(tmp_path):
    spec = _spec(tmp_path)
    cfgs = spec.configs()
    assert [c.meta["BIAS_TYPE"] for c in cfgs] == ["none", "vector", "matrix"]
    assert cfgs[0].key() == "BIAS_TYPE='none',BLOCK=256,w4,s3,c1"
    assert spec.constexprs(cfgs[1]) == {"BLOCK": 256, "BIAS_TYPE": "vector", "SCALE": (3, 5)}
    loads = []
    for cfg in cfgs:
        art = compile_reference(spec, "sm_90a", cfg, cache_dir=tmp_path / "cache")
        loads.append(art.ptx.count("ld.global"))
    # "none" reads x only; "vector" and "matrix" read the bias too (Triton saw the strings)
    assert loads[0] < loads[1] and loads[1] == loads[2]


def test_fixed_string_value_and_its_hint(tmp_path):
    spec = _spec(tmp_path, value=''', value: "'matrix'"''', meta="")
    assert spec.constexprs(spec.configs()[0])["BIAS_TYPE"] == "matrix"
    with pytest.raises(SpecError, match=r"""quote it inside the YAML string: value: "'matrix'\""""):
        _spec(tmp_path, value=", value: matrix", meta="")


def test_strings_and_tuples_are_in_the_identity_and_round_trip(tmp_path):
    a = _spec(tmp_path, value=''', value: "'vector'"''', meta="")
    b = _spec(tmp_path, value=''', value: "'matrix'"''', meta="")
    assert a.identity() != b.identity()
    full = _spec(tmp_path)
    again = KernelSpec.model_validate_json(full.model_dump_json())
    assert again == full and again.identity() == full.identity()
    assert again.constexprs(again.configs()[0])["SCALE"] == (3, 5)
    y = KernelSpec.model_validate(yaml.safe_load(yaml.safe_dump(full.model_dump(mode="json"), sort_keys=False)))
    assert y.identity() == full.identity()
    data = json.loads(full.model_dump_json())
    data["params"][6]["value"] = [3, 6]
    assert KernelSpec.model_validate(data).identity() != full.identity()


def test_string_one_and_int_one_are_different_configs():
    assert Config(meta={"X": "1"}).key() != Config(meta={"X": 1}).key()
    assert Config(meta={"X": "1"}).meta["X"] == "1"  # strict: never coerced


def test_expressions_keep_strings_out_of_arithmetic():
    assert evaluate_value("'none'", {}) == "none"
    assert evaluate_value("(16, B)", {"B": 4}) == (16, 4)
    assert evaluate("T == 'none'", {"T": "none"}) == 1
    with pytest.raises(ExprError, match="not a number"):
        evaluate("'none'", {})
    t0 = time.perf_counter()
    for text in ("'a' * 2 ** 60", "(1,) * 2 ** 60", "'a' + 'b'", "max('a', 'b')", "-'a'"):
        with pytest.raises(ExprError):
            evaluate_value(text, {})
    assert time.perf_counter() - t0 < 5  # checked before the operator runs: nothing allocated


def test_a_scalar_cannot_be_a_string(tmp_path):
    (tmp_path / "k.py").write_text(KERNEL)
    text = SPEC.replace("value: N}", "value: \"'N'\"}") % ("", ', BIAS_TYPE: ["none"]')
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(SpecError, match="not a number"):
        load_spec(tmp_path / "s.yaml")


def test_candidate_meta_takes_string_constexprs():
    from harness.candidate import Candidate

    c = Candidate(ptx="x", threads=32, meta={"BIAS_TYPE": "vector", "BLOCK": "128", "W": 64.0,
                                             "SHAPE": [1, 2], "HAS": True})
    assert c.meta == {"BIAS_TYPE": "vector", "BLOCK": 128, "W": 64, "SHAPE": (1, 2), "HAS": True}
    with pytest.raises(ValueError, match="meta X"):
        Candidate(ptx="x", threads=32, meta={"X": {"a": 1}})
