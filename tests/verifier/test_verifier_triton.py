"""The verifier on real Triton PTX (compiled without a GPU): clean at every target, and each
mutation a lowering agent could make trips the intended rule."""

from __future__ import annotations

import re

import pytest
import triton
import triton.language as tl
from verifier_testlib import ARCHS, KERNELS, abi_from_ptx

from verifier import parse_ptx, verify
from verifier.ptx import Instruction, Scope

CCS = sorted(ARCHS)


def all_instructions(mod) -> list[Instruction]:
    out: list[Instruction] = []
    stack = [f.body for f in mod.functions if f.body is not None]
    while stack:
        sc = stack.pop()
        for s in sc.stmts:
            if isinstance(s, Scope):
                stack.append(s)
            elif isinstance(s, Instruction):
                out.append(s)
    return out


@pytest.fixture(scope="module")
def matmul90(triton_ptx):
    ptx, warps = triton_ptx.get("matmul", 90)
    return ptx, abi_from_ptx(ptx, "sm_90a", 32 * warps)


def ids(report) -> set[str]:
    """Rule ids of the errors and warnings, without notes (where a rule cannot decide) and
    without the documented policy warnings that real Triton output carries (POLICY_WARNINGS:
    Triton 3.6 omits the proxy fence that 3.9 emits, so its matmul gets W5 warnings)."""
    return {f.rule for f in report.findings
            if f.severity == "error" or (f.severity == "warning" and f.rule not in POLICY_WARNINGS)}


def check(ptx: str, abi, arch: str = "sm_90a"):
    return verify(ptx, arch=arch, abi=abi, filename="matmul.ptx")


#: Non-error findings real Triton output may carry, by documented policy: TF5 (no tcgen05
#: fences in Triton's sm_100a code, docs/ptx_rules.md TF5), TM8/W5/AP1 warnings (no proxy fence
#: after cp.async / behind a barrier in Triton 3.6), and notes where a rule cannot decide.
POLICY_WARNINGS = {"TF5", "TM8", "W5", "AP1"}


def assert_no_false_alarm(report):
    """No error; every warning is one of the documented real-code divergences."""
    assert report.ok, report.render()
    bad = [f for f in report.warnings if f.rule not in POLICY_WARNINGS]
    assert not bad, report.render()


@pytest.mark.parametrize("cc", CCS)
@pytest.mark.parametrize("kernel", KERNELS)
def test_triton_ptx_is_clean(triton_ptx, kernel, cc):
    ptx, warps = triton_ptx.get(kernel, cc)
    arch = ARCHS[cc]
    mod = parse_ptx(ptx, f"{kernel}.ptx")
    assert mod.arch == arch and len(mod.entries) == 1
    report = verify(ptx, arch=arch, abi=abi_from_ptx(ptx, arch, 32 * warps),
                    filename=f"{kernel}.ptx")
    assert_no_false_alarm(report)


def test_matmul_uses_wgmma_on_sm90a_and_tcgen05_on_sm100a(triton_ptx):
    hopper = {i.base for i in all_instructions(parse_ptx(triton_ptx.get("matmul", 90)[0]))}
    blackwell = all_instructions(parse_ptx(triton_ptx.get("matmul", 100)[0]))
    assert "wgmma" in hopper and "tcgen05" not in hopper
    ops = {i.opcode for i in blackwell if i.base == "tcgen05"}
    assert any(o.startswith("tcgen05.mma") for o in ops)
    assert any(o.startswith("tcgen05.alloc.cta_group::1") for o in ops)


def test_renamed_entry_is_e1(matmul90):
    ptx, abi = matmul90
    bad = ptx.replace(f".entry {abi.entry}(", ".entry my_kernel(")
    assert ids(check(bad, abi)) == {"E1"}


def test_dropped_param_is_e2(matmul90):
    ptx, abi = matmul90
    last = abi.params[-1].name
    bad = re.sub(rf",\s*\.param [^\n]*{last}\s*\n", "\n", ptx)
    assert bad != ptx
    report = check(bad, abi)
    assert ids(report) == {"E2"}
    assert "has 7 parameters, expected 8" in report.errors[0].message


def test_changed_param_type_is_e2(matmul90):
    ptx, abi = matmul90
    name = abi.params[3].name
    bad = ptx.replace(f".param .u32 {name}", f".param .u64 {name}")
    (f,) = check(bad, abi).errors
    assert f.rule == "E2" and f"parameter 3 of entry '{abi.entry}'" in f.message


def test_wrong_target_is_g4_and_wgmma_is_g2(matmul90):
    ptx, abi = matmul90
    assert ids(check(ptx.replace(".target sm_90a", ".target sm_89"), abi)) == {"G4", "G2"}
    assert ids(check(ptx.replace(".target sm_90a", ".target sm_90"), abi)) == {"G4", "G2"}
    assert ids(check(ptx, abi, arch="sm_89")) == {"G4"}


def test_tcgen05_off_blackwell_is_g1(triton_ptx):
    ptx, _ = triton_ptx.get("matmul", 100)
    report = verify(ptx.replace(".target sm_100a", ".target sm_90a"), arch="sm_90a")
    assert {f.rule for f in report.errors} == {"G1"}


def test_register_past_the_declared_range_is_d1(matmul90):
    ptx, abi = matmul90
    count = int(re.search(r"\.reg \.b32\s+%r<(\d+)>;", ptx).group(1))
    m = re.search(r"(\n\s*add\.s32\s+)(%r\d+)(,)", ptx)
    bad = ptx[:m.start(2)] + f"%r{count}" + ptx[m.end(2):]
    report = check(bad, abi)
    assert ids(report) == {"D1"}
    (f,) = report.errors
    assert f.message == f"use of undeclared register '%r{count}'"
    assert f.line == ptx[:m.start(2)].count("\n") + 1
    assert f.notes[0].message.startswith(f"'%r<{count}>' declared here")


def test_missing_label_is_d2(matmul90):
    ptx, abi = matmul90
    target = re.search(r"\bbra(?:\.uni)?\s+(\$L__BB0_\d+);", ptx).group(1)
    bad = ptx.replace(f"\n{target}:", f"\n// {target} removed")
    report = check(bad, abi)
    assert ids(report) == {"D2"}
    assert all(f"'{target}'" in f.message for f in report.errors)


def test_duplicate_label_is_d3(matmul90):
    ptx, abi = matmul90
    label = re.search(r"\n(\$L__BB0_\d+):", ptx).group(1)
    bad = ptx.replace("\tret;", f"{label}:\n\tret;", 1)
    report = check(bad, abi)
    assert ids(report) == {"D3"}
    (f,) = report.errors
    assert f.message == f"redefinition of label '{label}'"


def test_missing_semicolon_is_p1_at_the_next_token(matmul90):
    ptx, abi = matmul90
    m = re.search(r"\n\tmov\.u32 \t%r\d+, %ctaid\.x;", ptx)
    bad = ptx[:m.end() - 1] + ptx[m.end():]
    nxt = re.compile(r"\S").search(bad, m.end() - 1).start()   # the token after the lost ';'
    line = bad.count("\n", 0, nxt) + 1
    col = nxt - (bad.rfind("\n", 0, nxt) + 1) + 1
    (f,) = check(bad, abi).errors
    assert (f.rule, f.line, f.col) == ("P1", line, col)
    assert "expected ',' or ';'" in f.message


# ------------------------------------------------------------------------- more Triton shapes
# device_print (vprintf prototype, callseq scopes, printf format globals), a noinline device
# function (a '.func' prototype, then its definition), and a tensor-descriptor parameter.

@triton.jit(noinline=True)
def _scalar_helper(a, b):
    return a * b + 1


@triton.jit
def _print_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.device_print("x", x)
    y = x * x + _scalar_helper(n, n).to(tl.float32)
    tl.atomic_add(y_ptr, tl.sum(y, 0))
    tl.store(y_ptr + offs, y, mask=m)


@triton.jit
def _desc_kernel(a_desc, out_ptr, BLOCK: tl.constexpr):
    x = a_desc.load([0, 0])
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], x)


def _compile(fn, signature, constexprs, cc):
    import warnings

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                              target=GPUTarget("cuda", cc, 32)).asm["ptx"]


def test_device_print_and_noinline_call_are_clean():
    ptx = _compile(_print_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32",
                                   "BLOCK": "constexpr"}, {"BLOCK": 128}, 90)
    mod = parse_ptx(ptx)
    funcs = [f for f in mod.functions if f.kind == "func"]
    assert any(f.name == "vprintf" and f.body is None for f in funcs)
    assert any(f.body is not None for f in funcs)
    calls = [i for i in all_instructions(mod) if i.base == "call"]
    assert {c.operands[1].name for c in calls} >= {"vprintf"}
    report = verify(ptx, arch="sm_90a")
    assert_no_false_alarm(report)
    # dropping the prototype of the helper: the call now precedes the declaration (D2)
    helper = next(f for f in funcs if f.body is not None)
    proto = re.search(r"\.func\s+\(\.param \.b32 func_retval0\) " + re.escape(helper.name)
                      + r"\s*\([^)]*\)\s*;", ptx)
    assert proto is not None
    report = verify(ptx[:proto.start()] + ptx[proto.end():], arch="sm_90a")
    assert ids(report) == {"D2"}


@pytest.mark.parametrize("cc", [90, 100])
def test_tensor_descriptor_param_is_clean(cc):
    ptx = _compile(_desc_kernel, {"a_desc": "tensordesc<fp16[64, 64]>", "out_ptr": "*fp16",
                                  "BLOCK": "constexpr"}, {"BLOCK": 64}, cc)
    fn = parse_ptx(ptx).entries[0]
    assert any(p.dims and p.align for p in fn.params)
    abi = abi_from_ptx(ptx, ARCHS[cc], 32 * 4)
    report = verify(ptx, arch=ARCHS[cc], abi=abi)
    assert_no_false_alarm(report)
