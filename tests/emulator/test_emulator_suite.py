"""The emulator runs the checked-in Triton 3.6 PTX of suite kernels and matches the float64
reference through the harness's own comparison; broken variants are caught."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kernels
from emulator import run_kernel

FIX = Path(__file__).parent.parent / "verifier" / "fixtures" / "triton36"

# small problem sizes (the constexprs baked into the PTX are those of the bench size)
CASES = {
    "vector_add": {"N": 5000},
    "relu.fp16": {"N": 3000},
    "sigmoid.fp32": {"N": 3000},
    "silu.fp16": {"N": 3000},
    "swiglu.fp32": {"N": 3000},
    "lion": {"N": 3000},
    "gemv": {"M": 40, "K": 1040},
    "reduction_sum": {"B": 2, "N": 5000},
    "rmsnorm": {"M": 3, "N": 4000},
    "rope": None,
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_suite_ptx_matches_reference(name, arch):
    path = FIX / f"{name}_{arch}.ptx"
    res = run_kernel(path.read_text(), kernels.get(name), arch, dims=CASES[name],
                     filename=path.name)
    assert res.status == "ok", res.summary()
    assert res.findings == [], res.summary()
    assert res.outputs and all(c.ok for c in res.outputs.values())
    assert all(res.inputs_unchanged.values())


def test_matmul_sm_80_mma_ldmatrix_cp_async_match_reference():
    path = FIX / "matmul_sm_80.ptx"
    res = run_kernel(path.read_text(), kernels.get("matmul"), "sm_80",
                     dims={"M": 130, "N": 48, "K": 80}, filename=path.name)
    assert res.status == "ok" and res.findings == [], res.summary()
    assert res.outputs["c_ptr"].ok and res.outputs["c_ptr"].max_abs_err > 0


def test_matmul_sm_80_without_cp_async_waits_is_caught():
    path = FIX / "matmul_sm_80.ptx"
    src = re.sub(r"^\s*cp\.async\.wait_group[^\n]*$", "", path.read_text(), flags=re.M)
    res = run_kernel(src, kernels.get("matmul"), "sm_80", dims={"M": 130, "N": 48, "K": 80},
                     filename=path.name)
    assert not res.ok
    races = [f for f in res.findings if f.rule == "HB1"]
    assert races and "cp.async" in races[0].message


def test_wrong_transcendental_is_a_mismatch():
    path = FIX / "silu.fp16_sm_90a.ptx"
    src = path.read_text()
    bad = re.sub(r"ex2\.approx(\.ftz)?\.f32", "lg2.approx.f32", src)
    assert bad != src
    res = run_kernel(bad, kernels.get("silu.fp16"), "sm_90a", dims={"N": 3000}, filename="x")
    assert res.status == "mismatch", res.summary()


def test_unsupported_instruction_names_file_line_col():
    path = FIX / "softmax_sm_100a.ptx"
    lines = path.read_text().split("\n")
    i = next(i for i, ln in enumerate(lines) if "bar.sync" in ln or "barrier.sync" in ln)
    lines[i] = "\ttcgen05.shift.cta_group::2.down [%r1];"  # 2-CTA tcgen05: not modelled
    res = run_kernel("\n".join(lines), kernels.get("softmax"), "sm_100a", dims={"M": 2, "N": 4000},
                     filename="sm.ptx")
    assert res.status == "unsupported"
    assert res.message == (f"emulation unsupported: 'tcgen05.shift.cta_group::2.down' (2-CTA) "
                           f"at sm.ptx:{i + 1}:2")


def test_out_of_bounds_grid_is_a_fault_not_a_crash():
    # the PTX of a larger problem size: run it with a grid that overruns the buffers
    path = FIX / "vector_add_sm_90a.ptx"
    src = path.read_text()
    src2 = re.sub(r"setp\.lt\.s32\s+(%p\d+), (%r\d+), (%r\d+);", r"setp.lt.s32 \1, \2, 1000000;",
                  src)
    assert src2 != src
    res = run_kernel(src2, kernels.get("vector_add"), "sm_90a", dims={"N": 5000}, filename="va")
    assert res.status == "fault" and "illegal global address" in res.message


@pytest.mark.parametrize("name", ["gemm.fp16", "matmul"])
def test_wgmma_sm_90a_matches_reference(name):
    # gemm.fp16: both operands K-major; matmul: B MN-major (trans-b = 1), 128B swizzle
    path = FIX / f"{name}_sm_90a.ptx"
    res = run_kernel(path.read_text(), kernels.get(name), "sm_90a",
                     dims={"M": 130, "N": 48, "K": 80}, filename=path.name)
    assert res.ok, res.summary()
    # Triton 3.6 feeds cp.async data to wgmma without fence.proxy.async (the verifier's W5
    # policy warning): only HB4 warnings
    assert {(f.rule, f.severity) for f in res.findings} == {("HB4", "warning")}
    assert res.outputs["c_ptr"].ok


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_proxy_fence_after_cp_async_wait_silences_hb4(arch):
    path = FIX / f"gemm.fp16_{arch}.ptx"
    fixed = re.sub(r"^(\s*cp\.async\.wait_group[^\n]*)$", r"\1\n\tfence.proxy.async.shared::cta;",
                   path.read_text(), flags=re.M)
    res = run_kernel(fixed, kernels.get("gemm.fp16"), arch, dims={"M": 130, "N": 48, "K": 80},
                     filename=path.name)
    assert res.ok and res.findings == [], res.summary()


@pytest.mark.parametrize("name,arch", [("gemm.fp8", "sm_89"), ("softmax", "sm_89"),
                                       ("flash_attention.causal", "sm_100a")])
def test_installed_triton_ptx_matches_reference(name, arch, ref_cache):
    # the newest Triton's PTX (sm_89 fp8 mma.sync e4m3; sm_100a three-input max.f32, TMEM P@V)
    from harness import compile_reference

    spec = kernels.get(name)
    art = compile_reference(spec, arch, spec.configs()[0], cache_dir=ref_cache)
    res = run_kernel(art.ptx, spec, arch, config=art.config, dynamic_smem=art.abi.dynamic_smem,
                     global_scratch_size=art.abi.global_scratch_size, filename=f"{name}.ptx")
    assert res.ok, res.summary()
    assert all(c.ok for c in res.outputs.values())


def test_grid_the_candidate_meta_cannot_evaluate_is_an_error_result():
    path = FIX / "vector_add_sm_90a.ptx"
    res = run_kernel(path.read_text(), kernels.get("vector_add"), "sm_90a", dims={"N": 5000},
                     meta={"BLOCK_SIZE": 0}, filename=path.name)
    assert res.status == "error" and "launch grid" in res.message and not res.ok
