"""KernelSpec: the suite specs, validation errors, serialisation round trips, spec files."""

from __future__ import annotations

import json

import pytest
import yaml

import kernels
from kernels import Config, KernelSpec, SpecError, load_spec
from kernels.suite import vector_add


def test_suite_lists_the_skeleton_kernels_first():
    assert kernels.names()[:3] == ["vector_add", "softmax", "matmul"]
    assert len(kernels.names()) == 32  # + 12 common and 10 paper kernels with their variants
    with pytest.raises(SpecError, match="no suite kernel 'nope'; have: vector_add"):
        kernels.get("nope")


@pytest.mark.parametrize("name", ["vector_add", "softmax", "matmul"])
def test_suite_spec_round_trips_through_json_and_yaml(name):
    spec = kernels.get(name)
    again = KernelSpec.model_validate_json(spec.model_dump_json())
    assert again == spec and again.identity() == spec.identity()
    y = KernelSpec.model_validate(yaml.safe_load(yaml.safe_dump(spec.model_dump(mode="json"))))
    assert y == spec


def test_vector_add_derived_values():
    s = kernels.get("vector_add")
    cfg = Config(meta={"BLOCK_SIZE": 1024}, num_warps=4, num_stages=1)
    assert s.grid_dims("verify", cfg.meta) == (1025, 1, 1)  # 2^20 + 16 elements
    assert s.constexprs(cfg) == {"BLOCK_SIZE": 1024}
    assert s.signature() == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                             "n_elements": "i32", "BLOCK_SIZE": "constexpr"}
    assert s.attrs()[(3,)] == [["tt.divisibility", 16]]
    assert s.byte_count("bench") == 12 * 67_108_864
    assert len(s.configs()) == 6


def test_softmax_block_is_derived_and_size_independent():
    s = kernels.get("softmax")
    for cfg in s.configs():
        assert s.constexprs(cfg, "verify") == s.constexprs(cfg, "bench") == {"BLOCK_N": 4096}


def test_matmul_grid_uses_meta():
    s = kernels.get("matmul")
    cfg = s.configs()[0]
    bm, bn = cfg.meta["BLOCK_M"], cfg.meta["BLOCK_N"]
    assert s.grid_dims("bench", cfg.meta) == ((8192 // bm) * (8192 // bn), 1, 1)


def _base() -> dict:
    return json.loads(kernels.get("vector_add").model_dump_json())


def test_size_dependent_constexpr_is_a_variant_per_size():
    d = _base()
    d["params"][4] = {"name": "BLOCK_SIZE", "kind": "constexpr", "value": "next_power_of_2(N)"}
    d["grid"] = ["cdiv(N, BLOCK_SIZE)"]
    d["autotune"] = {}
    s = KernelSpec.model_validate(d)
    cfg = s.configs()[0]
    assert s.size_constexprs() == ["BLOCK_SIZE"]
    assert s.constexprs(cfg, "verify") != s.constexprs(cfg, "bench")
    assert (s.compile_size("verify"), s.compile_size("bench")) == ("verify", "bench")
    plain = kernels.get("vector_add")
    assert plain.size_constexprs() == [] and plain.compile_size("verify") == "bench"


def test_divisibility_violation_is_rejected():
    d = _base()
    d["sizes"]["verify"] = {"N": 1001}
    with pytest.raises(ValueError, match="not divisible by 16"):
        KernelSpec.model_validate(d)


@pytest.mark.parametrize(("mutate", "msg"), [
    (lambda d: d["sizes"].pop("bench"), "sizes must include 'bench'"),
    (lambda d: d.update(grid=["cdiv(N, BLOCK)"]), "unknown name"),
    (lambda d: d["params"][0].update(dtype="fp13"), "unknown dtype 'fp13'"),
    (lambda d: d["params"][2].update(role="in"), "no out/inout pointer"),
    (lambda d: d["params"].append(dict(d["params"][0])), "duplicate parameter"),
    (lambda d: d.update(grid=["__import__('os')"]), "unknown function '__import__'"),
])
def test_invalid_specs_name_the_problem(mutate, msg):
    d = _base()
    mutate(d)
    with pytest.raises(ValueError, match=msg):
        KernelSpec.model_validate(d)


def test_load_spec_file_with_path_function(tmp_path):
    src = tmp_path / "mykernel.py"
    src.write_text(open(vector_add.__file__).read())
    d = _base()
    d["name"] = "my_add"
    d["source"] = {"path": "mykernel.py", "function": "vector_add_kernel"}
    d["reference"] = "mykernel.py::reference"
    f = tmp_path / "spec.yaml"
    f.write_text(yaml.safe_dump(d))
    spec = load_spec(f)
    assert spec.source.path == str(src)
    fn = spec.source.load()
    assert fn.__name__ == "vector_add_kernel"
    ref = spec.load_reference()
    import numpy as np
    out = ref({"x_ptr": np.ones(3), "y_ptr": np.full(3, 2.0)}, {"N": 3})
    assert out["out_ptr"].tolist() == [3.0, 3.0, 3.0]
    # KERNEL given as path::function overrides the file's source
    spec2 = load_spec(f, source=f"{src}::vector_add_kernel")
    assert spec2.source.function == "vector_add_kernel"


def test_load_spec_errors(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(bad)
    inval = tmp_path / "inval.json"
    inval.write_text(json.dumps({"name": "x"}))
    with pytest.raises(SpecError, match="invalid spec:\n  source: Field required"):
        load_spec(inval)


def test_source_text_is_imported_from_cache(tmp_path):
    text = open(vector_add.__file__).read()
    spec = kernels.get("vector_add").model_copy(
        update={"source": kernels.SourceRef(text=text, function="vector_add_kernel")})
    fn = spec.source.load(tmp_path)
    assert fn.__name__ == "vector_add_kernel"
    assert list((tmp_path / "sources").glob("src_*.py"))
    # the module is never executed: a function reading numpy cannot be extracted, and says why
    with pytest.raises(SpecError, match=r"reads 'np', which comes from 'import numpy as np'"):
        kernels.SourceRef(text=text, function="reference").load(tmp_path)
