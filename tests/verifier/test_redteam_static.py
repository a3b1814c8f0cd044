"""Red-team attacks on the static verifier: small adversarial edits that evade a rule. Each test
is one attack kind; each must be flagged (and its honest twin must stay clean)."""

from __future__ import annotations

import pytest

from verifier import verify

MODULE = """.version 8.7
.target sm_90a
.address_size 64
.global .align 128 .b8 cnt[128];
.visible .entry k(.param .u64 out)
{{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
{body}
ret;
}}
"""

MS1_EVASIONS = {
    # the pointer split into two 32-bit halves by a vector mov and put back together
    "vector_split": ("mov.u64 %rd2, cnt;\nmov.b64 {%r2, %r3}, %rd2;\nmov.b64 %rd3, {%r2, %r3};\n"
                     "atom.global.add.u32 %r1, [%rd3], 1;"),
    # same, the halves moved through warp shuffles
    "shfl_halves": ("mov.u64 %rd2, cnt;\nmov.b64 {%r2, %r3}, %rd2;\n"
                    "shfl.sync.idx.b32 %r4, %r2, 0, 31, -1;\n"
                    "shfl.sync.idx.b32 %r5, %r3, 0, 31, -1;\nmov.b64 %rd3, {%r4, %r5};\n"
                    "st.global.u32 [%rd3], %r1;"),
    # tensormap.replace writes 8 bytes of an in-global tensor map: a .global var used as one
    "tensormap_replace_reg": ("mov.u64 %rd2, cnt;\n"
                              "tensormap.replace.tile.global_address.global.b1024.b64 [%rd2], %rd1;"),
    "tensormap_replace_sym": "tensormap.replace.tile.global_address.global.b1024.b64 [cnt], %rd1;",
}


@pytest.mark.parametrize("name", sorted(MS1_EVASIONS))
def test_ms1_evasion_is_flagged(name):
    report = verify(MODULE.format(body=MS1_EVASIONS[name]), arch="sm_90a", filename="t.ptx",
                    threads=128, select={"MS1"})
    assert [f.rule for f in report.errors] == ["MS1"], report.render()


def test_ms1_read_only_global_through_vector_mov_is_clean():
    body = ("mov.u64 %rd2, cnt;\nmov.b64 {%r2, %r3}, %rd2;\nmov.b64 %rd3, {%r2, %r3};\n"
            "ld.global.u32 %r1, [%rd3];\nst.global.u32 [%rd1], %r1;")
    report = verify(MODULE.format(body=body), arch="sm_90a", filename="t.ptx", threads=128,
                    select={"MS1"})
    assert report.errors == [], report.render()


FIX = __import__("pathlib").Path(__file__).parent / "fixtures" / "triton36"


def _softmax_first_barrier(arch: str, replacement: str) -> str:
    lines = (FIX / f"softmax_{arch}.ptx").read_text().split("\n")
    i = next(i for i, ln in enumerate(lines) if "bar.sync" in ln or "barrier.sync" in ln)
    lines[i] = replacement
    return "\n".join(lines)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_cta_wide_barrier_given_a_smaller_thread_count_is_flagged(arch):
    # Triton's softmax reduction barrier rewritten as `bar.sync 0, 64` in a 128-thread CTA: all
    # threads reach it, the hardware releases the first 64 arrivals, the reduction races
    ptx = _softmax_first_barrier(arch, "\tbar.sync 0, 64;")
    report = verify(ptx, arch=arch, filename="s.ptx", threads=128)
    assert "B3" in [f.rule for f in report.errors], report.render()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_cta_wide_barrier_with_full_count_is_clean(arch):
    ptx = _softmax_first_barrier(arch, "\tbar.sync 0, 128;")
    report = verify(ptx, arch=arch, filename="s.ptx", threads=128)
    assert report.errors == [], report.render()


def test_warp_specialised_named_barrier_with_group_count_is_clean():
    body = """mov.u32 %r1, %tid.x;
setp.lt.u32 %p1, %r1, 64;
@%p1 bra $L_a;
bar.sync 1, 64;
bra.uni $L_end;
$L_a:
bar.sync 2, 64;
$L_end:"""
    ptx = MODULE.replace(".global .align 128 .b8 cnt[128];\n", "").format(body=body)
    report = verify(ptx, arch="sm_90a", filename="t.ptx", threads=128, select={"B3"})
    assert report.errors == [], report.render()


@pytest.mark.parametrize("holder", [".global .align 8 .u64 pcnt = cnt;",
                                    ".const .align 8 .u64 pcnt = generic(cnt);"])
def test_ms1_pointer_held_in_an_initialised_module_variable_is_flagged(holder):
    # the address of the .global variable sits in another module variable's initializer; the
    # kernel loads it and writes through it, never naming `cnt` in an instruction
    space = "global" if holder.startswith(".global") else "const"
    body = (f"ld.{space}.u64 %rd2, [pcnt];\n"
            "atom.add.u32 %r1, [%rd2], 1;")
    ptx = MODULE.replace(".global .align 128 .b8 cnt[128];\n",
                         ".global .align 128 .b8 cnt[128];\n" + holder + "\n").format(body=body)
    report = verify(ptx, arch="sm_90a", filename="t.ptx", threads=128, select={"MS1"})
    assert [f.rule for f in report.errors] == ["MS1"], report.render()


def test_ms1_reading_an_initialised_lookup_table_is_clean():
    body = "ld.global.u32 %r1, [tab+4];\nst.global.u32 [%rd1], %r1;"
    ptx = MODULE.replace(".global .align 128 .b8 cnt[128];\n",
                         ".global .align 4 .u32 tab[4] = {{1, 2, 3, 4}};\n").format(body=body)
    report = verify(ptx, arch="sm_90a", filename="t.ptx", threads=128, select={"MS1"})
    assert report.errors == [], report.render()


def _with_regs(ptx: str) -> str:
    lines = ptx.split("\n")
    d = next(j for j, ln in enumerate(lines) if ln.strip().startswith(".reg .b64"))
    lines.insert(d + 1, "\t.reg .pred %prt;\n\t.reg .b32 %rrt;")
    return "\n".join(lines)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_barrier_under_a_cta_uniform_predicate_does_not_order_b9(arch):
    # `@%p bar.sync 0` with %p = (ctaid.x < 3): uniform inside a CTA (B2/B4 stay silent) but
    # CTAs 3.. skip the reduction barrier: B9 must not count a predicated barrier as executed
    ptx = _with_regs(_softmax_first_barrier(
        arch, "\tmov.u32 %rrt, %ctaid.x;\n\tsetp.lt.u32 %prt, %rrt, 3;\n\t@%prt bar.sync 0;"))
    report = verify(ptx, arch=arch, filename="s.ptx", threads=128)
    assert "B9" in [f.rule for f in report.errors], report.render()


def test_barrier_under_a_redefined_cta_uniform_predicate_does_not_order_b9():
    # same edit on sm_90a, reusing Triton's own %p8/%r300, which the kernel defines again later:
    # the dataflow cannot fork on a multiply-defined guard and took the barrier as executed
    ptx = _softmax_first_barrier(
        "sm_90a", "\tmov.u32 %r300, %ctaid.x;\n\tsetp.lt.u32 %p8, %r300, 3;\n\t@%p8 bar.sync 0;")
    report = verify(ptx, arch="sm_90a", filename="s.ptx", threads=128)
    assert "B9" in [f.rule for f in report.errors], report.render()
