"""Each PTX pass on checked-in Triton 3.6 PTX: it changes what it says, the result assembles with
ptxas for sm_90a, and the verifier reports no error the input did not have; plus the legality
rules that keep a pass from applying."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

import verifier
from harness import assemble
from search.ptx_passes import (
    PASSES,
    POLICY_REG,
    PassContext,
    apply_passes,
    approx_allowed,
    input_only_address_regs,
    passes_for,
)

FIX = Path(__file__).resolve().parent.parent / "verifier" / "fixtures" / "triton36"
ARCH = "sm_90a"


@lru_cache(maxsize=None)
def ptx(name: str) -> str:
    return (FIX / f"{name}_{ARCH}.ptx").read_text()


def _params(text: str, *idx: int) -> frozenset[str]:
    entry = re.search(r"\.entry\s+([\w$]+)", text).group(1)  # type: ignore[union-attr]
    return frozenset(f"{entry}_param_{i}" for i in idx)


# fixture, its read-only pointer params (spec role "in"), threads, dynamic smem, registers
KERNELS = {
    "relu.fp16": dict(inputs=(0,), threads=128, smem=0, regs=18),
    "bitdelta": dict(inputs=(0, 1, 2, 3), threads=256, smem=98304, regs=242),
    "flash_attention.noncausal": dict(inputs=(0, 1, 2), threads=256, smem=98304, regs=170),
    "rmsnorm": dict(inputs=(0, 1), threads=128, smem=0, regs=40),
}


def ctx_for(name: str, approx: bool = True) -> PassContext:
    k = KERNELS[name]
    return PassContext(input_params=_params(ptx(name), *k["inputs"]), threads=k["threads"],
                       dynamic_smem=k["smem"], registers=k["regs"], approx_ok=approx)


@lru_cache(maxsize=None)
def errors_of(text: str) -> frozenset[str]:
    rep = verifier.verify(text, arch=ARCH, filename="t.ptx")
    return frozenset(f.rule for f in rep.findings if str(f.severity).endswith("error"))


def assert_valid(before: str, after: str) -> None:
    a = assemble(after, ARCH)
    assert a.ok, [d.message for d in a.errors]
    assert errors_of(after) <= errors_of(before)


# pass -> (fixture, a regex that must match the output more often than the input)
CASES = {
    "ld.nc": ("relu.fp16", r"ld\.global\.nc\.v4\.b32"),
    "ld.L1::no_allocate": ("relu.fp16", r"ld\.global\.L1::no_allocate\.v4"),
    "ld.L1::evict_last": ("bitdelta", r"ld\.global\.L1::evict_last\.b32"),
    "ld.L2::evict_first": ("relu.fp16", r"ld\.global\.L2::cache_hint\.v4\.b32 .*%rd_ailower_policy;"),
    "ld.L2::evict_last": ("flash_attention.noncausal", r"createpolicy\.fractional\.L2::evict_last"),
    "ld.L2::256B": ("relu.fp16", r"ld\.global\.L2::256B\.v4"),
    "ld.L2::128B": ("bitdelta", r"ld\.global\.L2::128B\.b32"),
    "cp.async.L2::256B": ("bitdelta", r"cp\.async\.cg\.shared\.global\.L2::256B"),
    "cp.async.L2::128B": ("flash_attention.noncausal", r"cp\.async\.cg\.shared\.global\.L2::128B"),
    "st.cs": ("relu.fp16", r"st\.global\.cs\.v4\.b32"),
    "st.L1::no_allocate": ("bitdelta", r"st\.global\.L1::no_allocate\.v4"),
    "approx.div": ("flash_attention.noncausal", r"div\.approx\.ftz\.f32"),
    "maxnreg=168": ("bitdelta", r"^\.maxnreg 168$"),
    "maxnreg=128": ("flash_attention.noncausal", r"^\.maxnreg 128$"),
    "minnctapersm=2": ("relu.fp16", r"^\.minnctapersm 2$"),
    "minnctapersm=1": ("bitdelta", r"^\.minnctapersm 1$"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pass_on_triton_ptx_assembles_and_verifies(name):
    fixture, pattern = CASES[name]
    src = ptx(fixture)
    out = PASSES[name].apply(src, ctx_for(fixture))
    assert out is not None, f"{name} should apply to {fixture}"
    rx = re.compile(pattern, re.M)
    assert len(rx.findall(out)) > len(rx.findall(src))
    assert_valid(src, out)
    # the entry signature is untouched
    sig = re.compile(r"\.entry[^{]*?\)", re.S)
    assert sig.search(out).group(0) == sig.search(src).group(0)  # type: ignore[union-attr]


def test_every_pass_has_a_case_or_a_documented_synthetic_test():
    synthetic = {"approx.sqrt", "approx.rcp", "vec.ld2"}  # tested below
    size_variants = {n for n in PASSES if n.startswith(("maxnreg=", "minnctapersm="))}
    missing = set(PASSES) - set(CASES) - synthetic - size_variants
    assert not missing


def test_approx_sqrt_and_rcp_on_triton_ptx_with_ieee_forms():
    # Triton 3.6 emits sqrt.approx for tl.sqrt; tl.sqrt_rn and 1/x lowered with IEEE rounding give
    # these forms: substitute them into the checked-in rmsnorm PTX and check both passes.
    src = ptx("rmsnorm").replace("sqrt.approx.ftz.f32", "sqrt.rn.f32")
    assert "sqrt.rn.f32" in src
    out = PASSES["approx.sqrt"].apply(src, ctx_for("rmsnorm"))
    assert out is not None and "sqrt.rn.f32" not in out and "sqrt.approx.ftz.f32" in out
    assert_valid(src, out)
    # x / y written as x * rcp.rn(y), the form an IEEE reciprocal takes
    line = "div.full.f32 \t%r149, %r147, %r148;"
    assert line in ptx("rmsnorm")
    src2 = ptx("rmsnorm").replace(line, "rcp.rn.f32 \t%r149, %r148;\n\tmul.f32 \t%r149, %r147, %r149;")
    out2 = PASSES["approx.rcp"].apply(src2, ctx_for("rmsnorm"))
    assert out2 is not None and "rcp.rn.f32" not in out2 and "rcp.approx.ftz.f32" in out2
    assert_valid(src2, out2)


def test_approx_passes_need_a_loose_tolerance():
    src = ptx("flash_attention.noncausal")
    assert PASSES["approx.div"].apply(src, ctx_for("flash_attention.noncausal", approx=False)) is None
    assert approx_allowed([(2e-3, 1e-3), (1.6e-2, 8e-3)])
    assert not approx_allowed([(1e-5, 1e-5)])  # fp32 outputs
    assert not approx_allowed([(2e-3, 1e-3), (1e-5, 1e-5)])
    assert not approx_allowed([])


def test_ld_nc_only_for_addresses_derived_from_input_params():
    src = ptx("relu.fp16")
    # with no read-only params, nothing may use the non-coherent path
    none = PassContext(input_params=frozenset(), threads=128)
    assert PASSES["ld.nc"].apply(src, none) is None
    # the output pointer (param 1) is not an input: declaring only it gives no .nc load either
    out_only = PassContext(input_params=_params(src, 1), threads=128)
    assert PASSES["ld.nc"].apply(src, out_only) is None
    regs = input_only_address_regs(src, _params(src, 0))
    assert regs and all(r.startswith("%rd") for r in regs)


def test_ld_nc_refuses_pointers_loaded_from_memory():
    # a load whose address was itself loaded from global memory (a pointer chase) has unknown
    # provenance and must keep the coherent path
    src = """
.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(
	.param .u64 .ptr .global .align 1 k_param_0,
	.param .u64 .ptr .global .align 1 k_param_1
)
.reqntid 32
{
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<6>;
	ld.param.b64 	%rd1, [k_param_0];
	ld.param.b64 	%rd2, [k_param_1];
	ld.global.b64 	%rd3, [%rd1];
	ld.global.b32 	%r1, [%rd3];
	ld.global.b32 	%r2, [%rd1+8];
	st.global.b32 	[%rd2], %r1;
	st.global.b32 	[%rd2+4], %r2;
	ret;
}
"""
    out = PASSES["ld.nc"].apply(src, PassContext(input_params=frozenset({"k_param_0"}), threads=32))
    assert out is not None
    assert "ld.global.nc.b64 \t%rd3, [%rd1]" in out or "ld.global.nc.b64 %rd3" in out.replace("\t", " ")
    assert "ld.global.b32 \t%r1, [%rd3]" in out  # unchanged: %rd3 came from memory
    assert "ld.global.nc.b32 \t%r2, [%rd1+8]" in out
    assert_valid(src, out)


def test_directive_legality():
    src = ptx("bitdelta")
    c = ctx_for("bitdelta")
    # 256 threads x 255 registers fits the 64 K register file; minnctapersm=3 with 96 KiB of
    # shared memory per CTA cannot fit one SM (3 x 97 KiB > 228 KiB)
    assert PASSES["minnctapersm=3"].apply(src, c) is None
    assert PASSES["minnctapersm=2"].apply(src, c) is not None
    big = PassContext(threads=1024, registers=100)
    assert PASSES["maxnreg=128"].apply(src, big) is None  # 128 x 1024 > 65536
    # a cap at or above the current allocation changes nothing: not offered
    assert PASSES["maxnreg=255"].apply(src, c) is None
    # setting a directive twice replaces it
    once = PASSES["maxnreg=168"].apply(src, c)
    twice = PASSES["maxnreg=128"].apply(once, c)
    assert twice.count(".maxnreg") == 1 and ".maxnreg 128" in twice


def test_policy_passes_do_not_stack():
    src = ptx("relu.fp16")
    c = ctx_for("relu.fp16")
    once = PASSES["ld.L2::evict_first"].apply(src, c)
    assert once.count(POLICY_REG) >= 3
    assert PASSES["ld.L2::evict_last"].apply(once, c) is None
    # the cp.async form crashed on the H200 (ILLEGAL_INSTRUCTION): it must not be offered
    assert not any(n.startswith("cp.async.L2::evict") for n in PASSES)


VEC_SRC = """
.version 8.7
.target sm_90a
.address_size 64
.visible .entry v(
	.param .u64 .ptr .global .align 1 v_param_0,
	.param .u64 .ptr .global .align 1 v_param_1
)
.reqntid 128
{
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<8>;
	ld.param.b64 	%rd1, [v_param_0];
	ld.param.b64 	%rd2, [v_param_1];
	mov.u32 	%r1, %tid.x;
	mul.wide.u32 	%rd3, %r1, 8;
	add.s64 	%rd4, %rd1, %rd3;
	add.s64 	%rd5, %rd2, %rd3;
	ld.global.b32 	%r2, [%rd4];
	ld.global.b32 	%r3, [%rd4+4];
	add.s64 	%rd6, %rd1, 4;
	ld.global.b32 	%r4, [%rd6];
	ld.global.b32 	%r5, [%rd6+4];
	add.s32 	%r6, %r2, %r3;
	add.s32 	%r7, %r4, %r5;
	add.s32 	%r6, %r6, %r7;
	st.global.b32 	[%rd5], %r6;
	ret;
}
"""


def test_vec_ld2_widens_only_provably_aligned_pairs():
    out = PASSES["vec.ld2"].apply(VEC_SRC, PassContext(threads=128))
    assert out is not None
    # base %rd4 = param + 8 * tid is 8-byte aligned: widened
    assert "ld.global.v2.b32 { %r2, %r3 }, [ %rd4 + 0 ];" in out
    # base %rd6 = param + 4 is only 4-byte aligned: left alone
    assert "ld.global.b32 \t%r4, [%rd6];" in out and "ld.global.b32 \t%r5, [%rd6+4];" in out
    assert_valid(VEC_SRC, out)


def test_vec_ld2_finds_nothing_to_widen_in_triton_ptx():
    # Triton already vectorises what its divisibility hints allow: no false positives here
    for name in ("relu.fp16", "bitdelta"):
        assert PASSES["vec.ld2"].apply(ptx(name), ctx_for(name)) is None


def test_passes_for_and_apply_passes():
    src = ptx("relu.fp16")
    c = ctx_for("relu.fp16")
    names = [p.name for p, _ in passes_for(src, c)]
    assert "ld.nc" in names and "st.cs" in names
    assert "cp.async.L2::256B" not in names  # relu has no cp.async
    both = apply_passes(src, ["ld.nc", "st.cs"], c)
    assert "ld.global.nc.v4" in both and "st.global.cs.v4" in both
    assert_valid(src, both)
    assert apply_passes(src, ["cp.async.L2::256B"], c) is None
    with pytest.raises(KeyError, match="unknown PTX pass"):
        apply_passes(src, ["nope"], c)
