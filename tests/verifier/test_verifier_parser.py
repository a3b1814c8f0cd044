"""The PTX front end: structure of the tree, positions, and syntax errors with exact line:col."""

from __future__ import annotations

import pickle

import pytest
from verifier_testlib import FIXTURES

from verifier import PTXSyntaxError, parse_ptx
from verifier.ptx import Instruction, Label, RegDecl, Scope, VarDecl

HEADER = ".version 8.4\n.target sm_90a\n.address_size 64\n"


def body(src: str) -> str:
    return HEADER + ".visible .entry k()\n{\n" + src + "\n}\n"


def instrs(mod) -> list[Instruction]:
    out = []

    def walk(sc: Scope) -> None:
        for s in sc.stmts:
            if isinstance(s, Scope):
                walk(s)
            elif isinstance(s, Instruction):
                out.append(s)

    for f in mod.functions:
        if f.body is not None:
            walk(f.body)
    return out


def test_module_directives_and_multi_target():
    m = parse_ptx(".version 9.4\n.target sm_90a, debug\n.address_size 64\n")
    assert (m.version, m.targets, m.arch, m.address_size) == ("9.4", ["sm_90a", "debug"],
                                                               "sm_90a", 64)
    assert m.directive("target").line == 2


def test_entry_params_and_performance_directives():
    m = parse_ptx(HEADER + """
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,
\t.param .align 64 .b8 k_param_1[128],
\t.param .u32 k_param_2
)
.maxntid 128, 1, 1
.minnctapersm 2
.explicitcluster
.reqnctapercluster 2, 1, 1
.maxclusterrank 8
.maxnreg 168
{
\tret;
}
""")
    fn = m.entries[0]
    p0, p1, p2 = fn.params
    assert (p0.type, p0.is_ptr, p0.ptr_space, p0.ptr_align, p0.align, p0.size) == (
        "u64", True, "global", 1, None, 8)
    assert (p1.type, p1.align, p1.dims, p1.size) == ("b8", 64, (128,), 128)
    assert (p2.name, p2.line, p2.col) == ("k_param_2", 8, 14)
    assert [(d.name, d.args) for d in fn.directives] == [
        ("maxntid", (128, 1, 1)), ("minnctapersm", (2,)), ("explicitcluster", ()),
        ("reqnctapercluster", (2, 1, 1)), ("maxclusterrank", (8,)), ("maxnreg", (168,))]


def test_func_with_return_param_and_call():
    m = parse_ptx(HEADER + """
.func (.param .b32 r) f(.param .b32 x) { ret; }
.extern .func g(.param .b64 a);
.visible .entry k() {
\t{ .param .b32 p0; .param .b32 rv;
\tcall.uni (rv), f, (p0);
\t}
\tret;
}
""")
    f, g, _k = m.functions
    assert (f.kind, [p.name for p in f.rets], [p.name for p in f.params]) == ("func", ["r"], ["x"])
    assert g.body is None and g.linkage == "extern"
    call = instrs(m)[1]
    assert call.opcode == "call.uni"
    assert [o.kind for o in call.operands] == ["list", "symbol", "list"]
    assert call.operands[1].name == "f"


def test_declarations():
    m = parse_ptx(HEADER + """
.global .align 4 .b32 lut[4] = {1, 2, 3, 4};
.extern .shared .align 16 .b8 global_smem[];
.visible .entry k() {
\t.reg .b32 %r<120>, %x;
\t.reg .pred complete;
\t.shared .align 8 .b64 mbar[2];
\tret;
}
""")
    lut, smem = m.variables
    assert (lut.space, lut.type, lut.align, lut.dims, lut.init) == ("global", "b32", 4, (4,),
                                                                     "{1, 2, 3, 4}")
    assert (smem.linkage, smem.dims) == ("extern", (None,))
    stmts = m.entries[0].body.stmts
    regs = [s for s in stmts if isinstance(s, RegDecl)]
    assert [(r.name, r.type, r.count) for r in regs] == [("%r", "b32", 120), ("%x", "b32", None),
                                                        ("complete", "pred", None)]
    var = next(s for s in stmts if isinstance(s, VarDecl))
    assert (var.space, var.name, var.dims, var.align) == ("shared", "mbar", (2,), 8)


def test_opcodes_with_double_colon_and_operand_kinds():
    m = parse_ptx(body("""
\t.reg .b32 %r<8>;
\t.reg .b64 %rd<4>;
\t.reg .pred %p<3>;
\t@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r1], 256;
\t@!%p2 bra.uni $L__BB0_1;
$L__BB0_1:
\tst.shared.v2.b32 [%r1+-4], {%r2, %r3};
\tmov.b32 %r4, 0f3F800000;
\tmov.b64 %rd1, 0d3FF0000000000000;
\tmov.b32 %r5, 0xFF;
\tadd.s32 %r6, %r5, -16;
\telect.sync %r7|%p0, -1;
\tmbarrier.arrive.shared::cta.b64 _, [%r1];
\tsetp.eq.and.s32 %p0, %r1, 0, !%p1;
\tld.param.u64 %rd2, [k_param_0+8];
\tshl.b32 %r1, %r2, (1 << 2) + 1;
"""))
    ins = instrs(m)
    alloc = ins[0]
    assert alloc.parts == ("tcgen05", "alloc", "cta_group::1", "sync", "aligned", "shared::cta",
                           "b32")
    assert (alloc.predicate, alloc.negated, alloc.base) == ("%p1", False, "tcgen05")
    assert alloc.operands[0].kind == "address" and alloc.operands[0].base.name == "%r1"
    bra = ins[1]
    assert (bra.predicate, bra.negated, bra.operands[0].kind) == ("%p2", True, "label")
    st = ins[2]
    assert st.operands[0].value == -4
    assert st.operands[1].kind == "vector" and [e.name for e in st.operands[1].elems] == ["%r2",
                                                                                          "%r3"]
    assert ins[3].operands[1].value == 1.0 and ins[4].operands[1].value == 1.0
    assert ins[5].operands[1].value == 255 and ins[6].operands[2].value == -16
    assert ins[7].operands[0].kind == "pair"
    assert ins[8].operands[0].kind == "sink"
    assert ins[9].operands[3].negated
    addr = ins[10].operands[1]
    assert (addr.kind, addr.name, addr.value, addr.base.kind) == ("address", "k_param_0", 8,
                                                                  "symbol")
    shl = ins[11].operands[2]
    assert (shl.kind, shl.value) == ("imm", 5)
    assert any(isinstance(s, Label) and s.name == "$L__BB0_1" for s in m.entries[0].body.stmts)


def test_positions_are_one_based_line_and_column():
    m = parse_ptx(body("\t.reg .b32 %r<2>;\n\tmov.b32   %r1, 7;"))
    mov = instrs(m)[0]
    assert (mov.line, mov.col) == (7, 2)
    assert [(o.line, o.col) for o in mov.operands] == [(7, 12), (7, 17)]


def test_nested_inline_asm_scope_loc_and_debug_sections_are_handled():
    m = parse_ptx(body("""
\t.reg .b32 %r<4>;
\t.loc 1 40 15
\t// begin inline asm
{
\t.reg .pred complete;
\t.loc\t1 41 15                         // matmul.py:41:15
\twaitLoop:
\tmbarrier.try_wait.parity.shared::cta.b64 complete, [%r1], %r2;
\t@!complete bra.uni waitLoop;
}
""") + """
\t.file\t1 "/tmp/k.py"
\t.section\t.debug_abbrev
\t{
.b8 1 // Abbrev { with braces in comments }
.b64 $L__func_begin0
\t}
\t.section\t.debug_macinfo\t{\t}
""")
    inner = next(s for s in m.entries[0].body.stmts if isinstance(s, Scope))
    assert isinstance(inner.stmts[0], RegDecl) and inner.stmts[0].name == "complete"
    wait = next(s for s in inner.stmts if isinstance(s, Instruction))
    assert wait.loc == (1, 41, 15)
    assert m.files == {1: "/tmp/k.py"}
    assert [d.args[0] for d in m.directives if d.name == "section"] == [".debug_abbrev",
                                                                       ".debug_macinfo"]


def test_handwritten_fixtures_parse():
    for name in ("hopper_style.ptx", "blackwell_style.ptx"):
        m = parse_ptx((FIXTURES / name).read_text(), name)
        assert m.entries


# ------------------------------------------------------------------------- syntax errors


@pytest.mark.parametrize("src, line, col, fragment", [
    # missing ';' after an instruction: reported at the next token
    (body("\t.reg .b32 %r<3>;\n\tmov.b32 %r1, %r2\n\tret;"), 8, 2, "expected ',' or ';'"),
    # missing comma between operands
    (body("\t.reg .b32 %r<3>;\n\tadd.s32 %r1, %r2 %r0;"), 7, 19, "expected ',' or ';'"),
    # unclosed function body
    (HEADER + ".visible .entry k()\n{\n\tret;\n", 7, 1, "expected '}'"),
    # unknown directive in a body
    (body("\t.bogus 1;"), 6, 2, "unknown directive '.bogus'"),
    # stray character
    (body("\tmov.b32 %r1, #3;"), 6, 15, "expected an operand, found '#'"),
    # bad parameter
    (HEADER + ".visible .entry k(.param k_param_0)\n{\n\tret;\n}\n", 4, 26,
     "expected a parameter type"),
    # unterminated comment and string
    (body("\tret; /* never closed"), 6, 7, "unterminated '/*' comment"),
    (HEADER + '.visible .entry k()\n.pragma "nounroll;\n{\n}\n', 5, 9, "unterminated string"),
    # register range without count
    (body("\t.reg .b32 %r<>;"), 6, 15, "expected a register count"),
    # performance directive without its count, or with too many
    (HEADER + ".visible .entry k()\n.reqntid\n{\n\tret;\n}\n", 6, 1, "expected a constant"),
    (HEADER + ".visible .entry k()\n.reqntid 1, 2, 3, 4\n{\n}\n", 5, 17,
     "expected '{' or ';' after the function header"),
    # garbage at module scope
    ("mov.b32 %r1, 2;", 1, 1, "expected a directive at module scope"),
])
def test_syntax_errors_report_line_and_column(src, line, col, fragment):
    with pytest.raises(PTXSyntaxError) as ei:
        parse_ptx(src, "k.ptx")
    err = ei.value
    assert (err.line, err.col) == (line, col), str(err)
    assert fragment in err.message
    assert str(err) == f"k.ptx:{line}:{col}: error: {err.message}"
    assert err.message == err.message.rstrip(".") and err.message[0].islower()


def test_syntax_error_pickles():
    err = PTXSyntaxError("k.ptx", 3, 4, "expected ';'")
    again = pickle.loads(pickle.dumps(err))
    assert (again.filename, again.line, again.col, again.message, str(again)) == (
        "k.ptx", 3, 4, "expected ';'", str(err))


def test_deep_nesting_is_a_syntax_error_not_a_recursion_error():
    with pytest.raises(PTXSyntaxError):
        parse_ptx(body("{" * 5000))
    with pytest.raises(PTXSyntaxError):
        parse_ptx(body("\tmov.b32 %r1, " + "(" * 5000 + "1;"))
    with pytest.raises(PTXSyntaxError):
        parse_ptx(body("\tmov.b32 %r1, " + "-" * 5000 + "1;"))


# CUTLASS's ClusterBarrier::arrive(cta_id, pred) inline asm declares its scratch register
# without '%' ('.reg .b32 remAddr32;'): any identifier may name a register (red team round 13:
# it was a symbol, MB3 "mbarrier 'remAddr32' used before init" and "address of symbol" in the
# emulator)
PLAIN_REGS = """.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
.reqntid 32, 1, 1
{
.reg .b32 %r<4>;
.reg .b64 %rd<2>;
.shared .align 8 .b8 buf[64];
ld.param.u64 %rd1, [out];
mov.u32 %r1, buf;
{
.reg .pred p;
.reg .b32 remAddr32;
.reg .b32 t<3>;
setp.lt.u32 p, %r1, 1048576;
add.u32 remAddr32, %r1, 8;
mov.u32 t2, 7;
@p st.shared.u32 [remAddr32], t2;
}
ld.shared.u32 %r2, [buf+8];
st.global.u32 [%rd1], %r2;
st.shared.u32 [buf], 1;
ret;
}
"""


def test_registers_declared_without_percent_are_registers_in_their_scope():
    fn = parse_ptx(PLAIN_REGS, "k.ptx").functions[0]
    ins = [s for s in fn.body.stmts if isinstance(s, Scope)][0].stmts
    st = [s for s in ins if isinstance(s, Instruction) and s.opcode.startswith("st.")][0]
    assert st.operands[0].base.kind == "reg" and st.operands[0].base.name == "remAddr32"
    assert st.operands[1].kind == "reg" and st.operands[1].name == "t2"  # t<3>: t0 .. t2
    # outside the scope 'buf' stays a symbol
    last = [s for s in fn.body.stmts if isinstance(s, Instruction)][-2]
    assert last.operands[0].base.kind == "symbol"


def test_a_kernel_with_plain_register_names_verifies_and_emulates():
    import numpy as np

    from emulator import GlobalMemory, Launch, run_launch
    from verifier import verify
    assert verify(PLAIN_REGS, arch="sm_90a").errors == []
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(1, np.uint32))
    res = run_launch(PLAIN_REGS, Launch(grid=(1, 1, 1), threads=32,
                                        params={"out": out.to_bytes(8, "little")}), gmem)
    assert res.status == "ok", res.message
    assert gmem.buffer("out").view(np.uint32)[0] == 7
