"""Kernels as people write them: class members, undecorated functions, modules that import torch
or packages that do not exist (never executed), and the spec fields real kernels need."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

import kernels
from harness.reference import compile_space
from kernels import Config, KernelSpec, load_spec
from kernels.source import SourceExtractError, extract_kernel, signature_of
from kernels.spec import MAX_AUTOTUNE_CONFIGS, Distribution

DATA = Path(__file__).parent / "data"
RESEARCH = DATA / "research_kernels.py"


def test_extraction_never_runs_the_module_and_keeps_only_what_the_kernel_needs():
    ext = extract_kernel(RESEARCH.read_text(), "FusedOps.scale_kernel", str(RESEARCH))
    assert ext.qualname == "FusedOps.scale_kernel"
    assert "torch" not in ext.text and "research_lib" not in ext.text
    assert "RuntimeError" not in ext.text and "WORKSPACE" not in ext.text
    assert ext.globals == ["SCALE"]
    assert set(ext.functions) == {"FusedOps.scale_kernel", "FusedOps._inner", "_scaled", "_twice"}
    assert ext.wrapped == ["_twice"]  # the undecorated helper is wrapped
    assert "_twice = triton.jit(_twice)" in ext.text
    assert "y = FusedOps._inner(x)" in ext.text  # copied verbatim, not rewritten
    assert "autotune" not in ext.text
    assert [ln.strip() for ln in ext.text.splitlines()].count("@triton.jit") == 3
    # every copied line keeps its line number in the user's file
    user = RESEARCH.read_text().splitlines()
    got = ext.text.splitlines()
    for probe in ("def _scaled(x):", "def scale_kernel(", "def _inner(x):", "return x + x",
                  "SCALE: tl.constexpr = tl.constexpr(2.0)"):
        i = next(n for n, line in enumerate(user) if probe in line)
        assert probe in got[i], (probe, i, got[i])
    compile(ext.text, "extracted", "exec")  # valid Python


def test_a_name_from_another_module_is_reported_with_its_position():
    with pytest.raises(SourceExtractError, match=r"research_kernels.py:\d+:\d+: the kernel reads "
                       r"'launch_helper', which comes from 'from research_lib.utils import"):
        extract_kernel(RESEARCH.read_text(), "uses_import", str(RESEARCH))
    with pytest.raises(SourceExtractError, match="no function 'Nope.k'; the file defines: .*"
                       "FusedOps.scale_kernel"):
        extract_kernel(RESEARCH.read_text(), "Nope.k", str(RESEARCH))
    with pytest.raises(SourceExtractError, match=r"x.py:1:\d+: syntax error"):
        extract_kernel("def (:\n", "k", "x.py")


def test_yaml_spec_of_a_class_kernel_compiles_every_config(tmp_path):
    spec = load_spec(DATA / "research_spec.yaml")
    cfgs = spec.configs()
    assert [c.key() for c in cfgs] == ["BLOCK=128,w4,s1,c1", "BLOCK=128,w4,s1,c1,r64",
                                      "BLOCK=128,w4,s2,c1", "BLOCK=128,w4,s2,c1,r64"]
    ce = spec.constexprs(cfgs[2])
    # YAML true stays a bool; None parameter; constexpr derived from num_stages
    assert ce == {"bias_ptr": None, "BLOCK": 128, "DOUBLE": True, "STAGES": 2}
    assert type(ce["DOUBLE"]) is bool
    assert spec.signature()["bias_ptr"] == "constexpr"
    ok, bad = compile_space(spec, "sm_90a", cache_dir=tmp_path, workers=2)
    assert not bad and [a.config for a in ok] == cfgs
    assert all(a.abi.entry == "scale_kernel" for a in ok)
    # bias_ptr (None) vanishes: x, y, n + the two scratch pointers
    assert [p.source for p in ok[0].abi.params] == ["pointer", "pointer", "scalar",
                                                    "global_scratch", "profile_scratch"]
    assert ".maxnreg 64" in ok[1].ptx and ".maxnreg" not in ok[0].ptx
    # STAGES differs between s1 and s2: the constant 1.0 / 2.0 is added in the PTX
    assert ok[0].ptx != ok[2].ptx
    # the module-level extraction was written to the source cache, not the user's module
    files = list((tmp_path / "sources").glob("research_kernels_*.py"))
    assert files and "torch" not in files[0].read_text()
    # serial and parallel compiles agree (and the second run is served from the cache)
    ok1, _ = compile_space(spec, "sm_90a", cache_dir=tmp_path, workers=1)
    assert [a.ptx for a in ok1] == [a.ptx for a in ok] and all(a.cache_hit for a in ok1)


def test_bool_constexpr_changes_the_code(tmp_path):
    data = yaml.safe_load((DATA / "research_spec.yaml").read_text())
    data["source"]["path"] = str(RESEARCH)
    data["params"][5] = {"name": "DOUBLE", "kind": "constexpr"}
    data["autotune"] = {"meta": {"BLOCK": [128], "DOUBLE": [True, False]}}
    spec = KernelSpec.model_validate(data)
    vals = [spec.constexprs(c)["DOUBLE"] for c in spec.configs()]
    assert vals == [True, False] and all(type(v) is bool for v in vals)
    again = KernelSpec.model_validate(yaml.safe_load(yaml.safe_dump(spec.model_dump(mode="json"))))
    assert again == spec
    ok, bad = compile_space(spec, "sm_90a", cache_dir=tmp_path, workers=1)
    assert not bad
    # DOUBLE adds y + y: one more fp32 add in the True variant
    adds = [len(re.findall(r"\badd(?:\.rn)?\.f32\b", a.ptx)) for a in ok]
    assert adds[0] > adds[1]


def test_undecorated_kernel_is_wrapped(tmp_path):
    src = kernels.SourceRef(path=str(RESEARCH), function="plain_copy")
    fn = src.load(tmp_path)
    assert type(fn).__name__ == "JITFunction" and fn.arg_names == ["x_ptr", "y_ptr", "n", "BLOCK"]


def test_module_source_class_member_is_found():
    fn = kernels.SourceRef(module="tests.kernels.data.mod_kernels", function="Ops.copy").load()
    assert type(fn).__name__ == "JITFunction" and fn.arg_names[0] == "x_ptr"


def _vector_add(**changes) -> dict:
    data = json.loads(kernels.get("vector_add").model_dump_json())
    data.update(changes)
    return data


def test_huge_autotune_space_fails_at_once_with_the_sizes():
    space = {"meta": {"BLOCK_SIZE": list(range(1, 65))}, "num_warps": [1, 2, 4, 8, 16, 32],
             "num_stages": list(range(1, 16))}
    n = 64 * 6 * 15
    assert n > MAX_AUTOTUNE_CONFIGS
    with pytest.raises(ValueError, match=f"the autotune space has {n} configs \\(64 BLOCK_SIZE x 6 "
                       "num_warps x 15 num_stages x 1 num_ctas x 1 maxnreg\\); the limit is 4096"):
        KernelSpec.model_validate(_vector_add(autotune=space))


def test_meta_key_the_kernel_lacks_is_named():
    space = {"meta": {"BLOCK_SIZE": [1024], "BLOCKSIZE": [64]}}
    with pytest.raises(ValueError, match=r"autotune meta key\(s\) 'BLOCKSIZE' are not constexpr "
                       r"parameters of vector_add_kernel\(\) \(its constexprs: BLOCK_SIZE\)"):
        KernelSpec.model_validate(_vector_add(autotune=space))
    with pytest.raises(ValueError, match="meta key 'n_elements' names a scalar parameter"):
        KernelSpec.model_validate(_vector_add(autotune={"meta": {"BLOCK_SIZE": [1024],
                                                                 "n_elements": [1]}}))


def test_bool_is_rejected_where_it_would_become_a_number():
    data = _vector_add()
    data["params"][3]["value"] = True
    with pytest.raises(ValueError, match="a scalar value must be a number or an expression, not a "
                                         "boolean"):
        KernelSpec.model_validate(data)


def test_zero_init_and_written_region():
    data = _vector_add()
    data["params"][2]["init"] = "zeros"
    data["params"][2]["written"] = [["0", "N - 16"]]
    spec = KernelSpec.model_validate(data)
    out = spec.params[2]
    assert spec.written_region(out, "verify") == (slice(0, 1_048_576),)
    arr = np.arange(1_048_592)
    assert spec.checked(out, "verify", arr).shape == (1_048_576,)
    assert spec.checked(spec.params[0], "verify", arr) is arr
    data["params"][2]["written"] = [["0", "N + 1"]]
    with pytest.raises(ValueError, match=r"written\[0\].*need 0 <= start <= stop <= 1048592"):
        KernelSpec.model_validate(data)
    data["params"][2]["written"] = [["0", "N"], ["0", "1"]]
    with pytest.raises(ValueError, match="written has 2 ranges for a 1-dimensional shape"):
        KernelSpec.model_validate(data)
    data = _vector_add()
    data["params"][0]["init"] = "zeros"
    with pytest.raises(ValueError, match="init and written apply to out/inout pointers only"):
        KernelSpec.model_validate(data)


def test_arange_and_permutation_distributions():
    rng = np.random.default_rng(0)
    a = Distribution(kind="arange", low=5).sample(rng, (2, 3), np.dtype(np.int32))
    assert a.tolist() == [[5, 6, 7], [8, 9, 10]]
    p = Distribution(kind="permutation").sample(rng, (4, 100), np.dtype(np.int64))
    assert all(sorted(row) == list(range(100)) for row in p.tolist())
    assert p[0].tolist() != list(range(100)) and p[0].tolist() != p[1].tolist()
    with pytest.raises(ValueError, match="arange from 0 over 300 elements overflows int8"):
        Distribution(kind="arange").sample(rng, (300,), np.dtype(np.int8))
    z = Distribution(kind="zeros").sample(rng, (3,), np.dtype(np.float32))
    assert z.tolist() == [0.0, 0.0, 0.0]


def test_config_over_the_shared_memory_limit_is_rejected(tmp_path):
    """A 256x256x64 fp16 tile with 3 stages needs ~192 KiB: fits sm_90a (227 KiB), not sm_89."""
    spec = kernels.get("matmul")
    cfg = Config(meta={**spec.configs()[0].meta, "BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 64},
                 num_warps=8, num_stages=3)
    ok, bad = compile_space(spec, "sm_89", cache_dir=tmp_path, configs=[cfg], workers=1)
    assert not ok and len(bad) == 1
    assert re.search(r"needs \d+ B of shared memory per CTA, over the 101376 B \(99 KiB\)",
                     str(bad[0]))


def test_signature_for_spec_init():
    sig = signature_of(RESEARCH.read_text(), "FusedOps.scale_kernel")
    assert sig.names == ["x_ptr", "y_ptr", "bias_ptr", "n", "BLOCK", "DOUBLE", "STAGES"]
    assert sig.constexpr == {"BLOCK", "DOUBLE", "STAGES"}


README_KERNEL = '''
import torch
import triton
import triton.language as tl


class FusedOps:
    @staticmethod
    @triton.jit
    def scale_kernel(x_ptr, idx_ptr, y_ptr, acc_ptr, bias_ptr, n, BLOCK: tl.constexpr,
                     DOUBLE: tl.constexpr, STAGES: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        y = tl.load(x_ptr + offs, mask=m)
        if DOUBLE:
            y = y * 2.0
        if bias_ptr is not None:
            y = y + tl.load(bias_ptr + offs, mask=m)
        tl.store(y_ptr + offs, y, mask=m)
        tl.atomic_add(acc_ptr, tl.sum(tl.where(m, y, 0.0), axis=0) * STAGES)
'''


def test_the_readme_spec_example_loads_and_compiles(tmp_path):
    """Docs are tests: the user guide's full YAML example is a valid spec for a class kernel."""
    readme = (Path(__file__).parents[2] / "docs" / "user-guide.md").read_text()
    block = readme.split("# mykernels.yaml: every field of a KernelSpec\n", 1)[1].split("```", 1)[0]
    (tmp_path / "research").mkdir()
    (tmp_path / "research" / "ops.py").write_text(README_KERNEL)
    (tmp_path / "mykernels.yaml").write_text(block)
    spec = load_spec(tmp_path / "mykernels.yaml")
    keys = [c.key() for c in spec.configs()]
    assert len(keys) == 2 * 2 * 2 * 2 + 1 and "BLOCK=512,w4,s2,c1" in keys
    p = {x.name: x for x in spec.params}
    assert p["acc_ptr"].init == "zeros" and spec.written_region(p["y_ptr"], "verify") == (
        slice(0, 1008),)
    cfg = next(c for c in spec.configs() if c.maxnreg == 128)
    assert spec.constexprs(cfg) == {"bias_ptr": None, "BLOCK": cfg.meta["BLOCK"],
                                    "DOUBLE": True, "STAGES": cfg.num_stages}
    ok, bad = compile_space(spec, "sm_90a", cache_dir=tmp_path / "c", configs=[cfg], workers=1)
    assert not bad and ".maxnreg 128" in ok[0].ptx


def test_identity_ignores_new_fields_at_their_defaults():
    """Specs stored before init/written/maxnreg existed keep their ids; using them changes it."""
    base = kernels.get("vector_add")
    data = _vector_add()
    assert "init" in json.dumps(data)  # the dump carries the new defaults...
    assert KernelSpec.model_validate(data).identity() == base.identity()  # ...the id does not
    data["params"][2]["init"] = "zeros"
    assert KernelSpec.model_validate(data).identity() != base.identity()
    data = _vector_add()
    data["autotune"]["maxnreg"] = [None, 64]
    assert KernelSpec.model_validate(data).identity() != base.identity()


def test_guarded_imports_and_an_unknown_package_in_an_except_branch(tmp_path):
    text = '''
try:
    import triton
    import triton.language as tl
    HAVE_TRITON = True
except ImportError:
    import mock_triton as tl

if True:
    LIMIT = tl.constexpr(7)


@triton.jit
def k(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + LIMIT)
'''
    ext = extract_kernel(text, "k")
    # the triton alias wins over the except-branch fallback (it comes first and is allowed)
    assert "import triton.language as tl" in ext.text and "LIMIT = tl.constexpr(7)" in ext.text
    fn = kernels.SourceRef(text=text, function="k").load(tmp_path)
    assert fn.arg_names == ["x_ptr", "BLOCK"]


def test_a_small_space_compiles_in_process_and_a_broken_pool_is_reported(tmp_path, monkeypatch):
    import concurrent.futures
    from concurrent.futures.process import BrokenProcessPool

    from harness.errors import ReferenceCompileError
    from harness.reference import PARALLEL_MIN_CONFIGS

    spec = load_spec(DATA / "research_spec.yaml")
    assert len(spec.configs()) < PARALLEL_MIN_CONFIGS

    class NoPool:
        def __init__(self, *a, **k):
            raise AssertionError("a pool was started for a small space")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", NoPool)
    ok, bad = compile_space(spec, "sm_90a", cache_dir=tmp_path / "a")
    assert len(ok) == 4 and not bad

    class BrokenPool:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def submit(self, *a, **k):
            f = concurrent.futures.Future()
            f.set_exception(BrokenProcessPool("worker died"))
            return f

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", BrokenPool)
    with pytest.raises(ReferenceCompileError, match="a reference-compile worker process died"):
        compile_space(spec, "sm_90a", cache_dir=tmp_path / "b", workers=2)


@pytest.mark.parametrize("value,bad", [
    ('__import__("os").system("echo pwned")', "the name '__import__'"),
    ('open("/etc/passwd").read()', "the name 'open'"),
    ("tl.constexpr((lambda: 3)())", "a Lambda expression"),
    ("tl.__class__", "the attribute '__class__'"),
])
def test_a_global_with_code_in_it_is_refused_not_run(value, bad):
    text = f'''
import triton
import triton.language as tl
G = {value}


@triton.jit
def k(x_ptr):
    tl.store(x_ptr, G)
'''
    with pytest.raises(SourceExtractError, match=r"<source>:4:\d+: the kernel reads the global G, "
                       r"whose value uses " + re.escape(bad)):
        extract_kernel(text, "k")


def test_constant_globals_are_copied():
    text = '''
import math
import triton
import triton.language as tl
LOG2E = math.log2(math.e)
B = tl.constexpr(2 ** 7)
C: tl.constexpr = tl.constexpr(max(B, 64) if True else 1)


@triton.jit
def k(x_ptr):
    tl.store(x_ptr, C * LOG2E)
'''
    ext = extract_kernel(text, "k")
    assert set(ext.globals) == {"C", "LOG2E", "B"}
    assert "import math" in ext.text


_TL = "import triton\nimport triton.language as tl\n"
_LAYOUTS = {
    "inside_if": _TL + "if True:\n    @triton.jit\n    def k(x_ptr, B: tl.constexpr):\n"
                       "        tl.store(x_ptr + tl.arange(0, B), 1.0)\n",
    "crlf_tabs_class": (_TL + "class C:\n\t@staticmethod\n\t@triton.jit\n\tdef h(x):\n\t\treturn x\n"
                        "\t@staticmethod\n\t@triton.jit\n\tdef k(x_ptr, B: tl.constexpr):\n"
                        "\t\ttl.store(x_ptr + tl.arange(0, B), C.h(1.0))\n").replace("\n", "\r\n"),
    "one_line_def": _TL + "\n\n@triton.jit\ndef k(x_ptr, B: tl.constexpr): "
                          "tl.store(x_ptr + tl.arange(0, B), 1.0)\n",
    "globals_on_one_line": _TL + "A = tl.constexpr(1); B2 = tl.constexpr(2)\n\n\n@triton.jit\n"
                                 "def k(x_ptr, B: tl.constexpr):\n"
                                 "    tl.store(x_ptr + tl.arange(0, B), A + B2)  # [x]\n",
    "undecorated_after_autotune_helper": _TL + "\n@triton.jit\ndef h(x):\n    return x\n\n\n"
                                               "def k(x_ptr, B: tl.constexpr):\n"
                                               "    tl.store(x_ptr + tl.arange(0, B), h(1.0))\n"
                                               "\n\nk = triton.jit(k)\n",
}


@pytest.mark.parametrize("case", sorted(_LAYOUTS))
def test_extracted_kernel_has_the_users_triton_cache_key(case, tmp_path, monkeypatch):
    """Triton's ``cache_key`` (source of the kernel and its helpers, first line numbers, constexpr
    globals) of the extracted kernel equals that of the user's own file, imported as it is: the
    hash ``ailower export`` names its override folder by."""
    import importlib.util

    # the user's file: only triton imports here, so it can be imported for the comparison
    text = _LAYOUTS[case]
    user = tmp_path / f"user_{case}.py"
    user.write_bytes(text.encode())
    ispec = importlib.util.spec_from_file_location(f"user_{case}", user)
    mod = importlib.util.module_from_spec(ispec)
    ispec.loader.exec_module(mod)
    qn = "C.k" if "class" in case else "k"
    theirs = mod.C.k if "class" in case else mod.k
    ext = extract_kernel(text, qn, str(user))
    ref = kernels.SourceRef(path=str(user), function=qn)
    ours = ref.load(tmp_path / "cache")
    assert ours.starting_line_number == theirs.starting_line_number
    assert ours.src == theirs.src
    assert ours.cache_key == theirs.cache_key, ext.text


def test_a_string_less_indented_than_the_method_still_loads(tmp_path):
    text = (_TL + "class C:\n    @staticmethod\n    @triton.jit\n    def k(x_ptr, B: tl.constexpr):\n"
            '        """doc\nat column 0"""\n        tl.store(x_ptr + tl.arange(0, B), 1.0)\n')
    fn = kernels.SourceRef(text=text, function="C.k").load(tmp_path)
    assert fn.__name__ == "k" and fn.src.startswith("def k(")


@pytest.mark.parametrize("head,bad", [
    # a global reaching another module through triton's own attributes
    ('G = tl.constexpr(triton.runtime.cache.os.system("echo pwned"))\n'
     "def k(x_ptr):\n    tl.store(x_ptr, G)", "'triton.runtime.cache.os.system'"),
    ("from triton.runtime import cache\nG = tl.constexpr(cache.os.getcwd())\n"
     "def k(x_ptr):\n    tl.store(x_ptr, G)", "'triton.runtime.cache.os.getcwd'"),
    # def-time parts of a copied function: defaults and annotations run at import
    ('def k(x_ptr, B: tl.constexpr = print("pwned") or 4):\n    tl.store(x_ptr, B)',
     "a default value of k() uses the name 'print'"),
    ('def k(x_ptr: print("pwned"), B: tl.constexpr = 4):\n    tl.store(x_ptr, B)',
     "the annotation of k()'s parameter x_ptr uses the name 'print'"),
    ('def k(x_ptr) -> open("/etc/passwd"):\n    tl.store(x_ptr, 1)', "result uses the name 'open'"),
    ('def h(x=__import__("os").getcwd()):\n    return x\n'
     "def k(x_ptr):\n    tl.store(x_ptr, h(1))", "a default value of h() uses the name '__import__'"),
    ('G: print("pwned") = tl.constexpr(1)\ndef k(x_ptr):\n    tl.store(x_ptr, G)',
     "the annotation of the global G uses the name 'print'"),
])
def test_code_in_def_time_expressions_is_refused_not_run(head, bad, tmp_path, capfd):
    text = "import triton\nimport triton.language as tl\n" + head.replace(
        "def k(", "@triton.jit\ndef k(") + "\n"
    with pytest.raises(SourceExtractError, match=re.escape(bad)):
        extract_kernel(text, "k")
    with pytest.raises(kernels.SpecError, match=re.escape(bad)):
        kernels.SourceRef(text=text, function="k").load(tmp_path)
    assert "pwned" not in capfd.readouterr().out


def test_ordinary_def_time_expressions_still_load(tmp_path):
    text = '''import math
import triton
import triton.language as tl
from triton.language import constexpr
BLOCK: tl.constexpr = tl.constexpr(2 ** 7)


@triton.jit
def k(x_ptr: tl.tensor, y_ptr: "tl.pointer_type(tl.float32)", B: constexpr = BLOCK,
      F: tl.constexpr = int(math.log2(64)), D: tl.constexpr = tl.float16) -> None:
    tl.store(y_ptr + tl.arange(0, B), tl.load(x_ptr + tl.arange(0, B)).to(D) * F)
'''
    fn = kernels.SourceRef(text=text, function="k").load(tmp_path)
    assert fn.__name__ == "k"
