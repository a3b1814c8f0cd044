"""The shared analyses: CFG and (post-)dominators, def-use and values, thread-uniformity, the
path-sensitive dataflow framework (correlated branches, fixed point on loops) — and hypothesis
fuzzing of all of them over random structured PTX programs (no crash, results consistent)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifier import parse_ptx, verify
from verifier.analysis import DIVERGENT, UNIFORM, WARP, FunctionAnalysis, Property, solve
from verifier.context import Context

HEAD = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u32 k_param_0)
.reqntid 128
{
\t.reg .pred %p<16>;
\t.reg .b32 %r<64>;
\t.reg .b64 %rd<8>;
\t.shared .align 8 .b64 bar;
\t.shared .align 4 .b32 tslot;
"""


def analyse(body: str) -> FunctionAnalysis:
    text = HEAD + body + "}\n"
    ctx = Context(parse_ptx(text), text, arch="sm_100a")
    return ctx.analysis(ctx.bodies()[0])


def line_of(fa, opcode_prefix: str, nth: int = 0) -> int:
    hits = [i for i, ins in enumerate(fa.cfg.instrs) if ins.opcode.startswith(opcode_prefix)]
    return hits[nth]


def test_cfg_blocks_edges_dominators_and_loops():
    fa = analyse("""\tld.param.u32 %r1, [k_param_0];
\tsetp.lt.s32 %p1, %r1, 4;
\t@%p1 bra L_else;
\tadd.s32 %r2, %r1, 1;
\tbra.uni L_join;
L_else:
\tadd.s32 %r2, %r1, 2;
L_join:
L_loop:
\tadd.s32 %r2, %r2, -1;
\tsetp.gt.s32 %p2, %r2, 0;
\t@%p2 bra L_loop;
\tret;
""")
    cfg = fa.cfg
    assert len(cfg.blocks) == 5 and not cfg.unresolved
    b_entry, b_then, b_else, b_loop = 0, 1, 2, 3
    assert sorted(cfg.succ_ids(b_entry)) == [b_then, b_else]
    cond = {e.dst: e.cond for e in cfg.blocks[b_entry].succs}
    assert cond[b_else] == ("%p1", True) and cond[b_then] == ("%p1", False)
    assert cfg.idom[b_loop] == b_entry and cfg.ipdom[b_entry] == b_loop
    assert cfg.dominates(b_entry, 4) and not cfg.dominates(b_then, b_loop)
    assert cfg.in_cycle == {b_loop}
    assert cfg.region(b_entry) == {b_then, b_else}


def test_def_use_and_values():
    fa = analyse("""\tmov.u32 %r1, bar;
\tadd.s32 %r2, %r1, 8;
\tmov.b32 %r3, 0x40004040;
\tmov.b32 %r4, %tid.x;
\tmov.b64 %rd1, {%r4, %r3};
\tbfe.u32 %r5, %r4, 4, 14;
\tcvt.u64.u32 %rd2, %r5;
\tor.b64 %rd3, %rd2, 4611686293305294848;
\tret;
""")
    v = fa.values
    assert v.val("%r2") == ("s", "bar", 8)
    assert v.def_sites["%r2"] == [1] and 1 in v.use_sites["%r1"]
    mask, bits = v.val("%rd1")[1:]
    assert mask == 0xFFFFFFFF00000000 and bits >> 32 == 0x40004040
    mask, bits = v.val("%rd3")[1:]
    assert mask >> 32 == 0xFFFFFFFF and bits >> 32 == 0x40000040   # high word fully known


def test_uniformity_classes_and_branch_regions():
    fa = analyse("""\tld.param.u32 %r1, [k_param_0];
\tmov.u32 %r2, %tid.x;
\tshr.u32 %r3, %r2, 5;
\tsetp.lt.u32 %p1, %r2, 32;
\tand.b32 %r4, %r2, 31;
\tsetp.eq.u32 %p2, %r4, 0;
\telect.sync %r5|%p3, -1;
\tsetp.eq.u32 %p4, %r2, 0;
\t@%p2 bra L_lane;
\tbar.sync 0;
L_lane:
\t@%p1 bra L_warp;
\tbar.sync 0;
L_warp:
\tret;
""")
    v = fa.values
    assert v.cls["%r1"] == UNIFORM and v.cls["%r3"] == WARP and v.cls["%p1"] == WARP
    assert v.cls["%r2"] == DIVERGENT and v.cls["%p2"] == DIVERGENT and v.cls["%r5"] == WARP
    assert {"%p3", "%p4"} <= v.single_lane and "%p1" not in v.single_lane
    first_bar = line_of(fa, "bar.sync", 0)
    second_bar = line_of(fa, "bar.sync", 1)
    assert v.context_class(first_bar) == DIVERGENT and v.context_class(second_bar) == WARP


def test_register_reuse_after_a_loop_does_not_taint_the_loop_counter():
    # Triton/LLVM reuse a register for an unrelated divergent value after the loop
    fa = analyse("""\tmov.b32 %r1, 0;
L_loop:
\tadd.s32 %r1, %r1, 1;
\tsetp.ne.s32 %p1, %r1, 8;
\t@%p1 bra L_loop;
\tmov.u32 %r1, %tid.x;
\tret;
""")
    v = fa.values
    assert fa.values.branch_class == {1: UNIFORM}
    assert v.use_class("%r1", line_of(fa, "ret")) == DIVERGENT


class _Alloc(Property):
    RULES = ("X",)

    def initial(self):
        return 0

    def relevant(self, ins):
        return ins.parts[0] == "tcgen05"

    def transfer(self, i, ins, fact, report):
        return fact + 1 if ins.parts[1] == "alloc" else fact - 1

    def at_exit(self, i, fact, report):
        if fact:
            report("X", f"leak {fact}")


def test_path_sensitivity_correlated_branches_and_loop_fixed_point():
    body = """\tld.param.u32 %r1, [k_param_0];
\tsetp.gt.s32 %p1, %r1, 64;
\tsetp.lt.s32 %p2, %r1, 10;
\tmov.u32 %r9, tslot;
\t@!%p1 bra L1;
\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 32;
L1:
\tmov.b32 %r3, 0;
L_loop:
\tadd.s32 %r3, %r3, 1;
\tsetp.lt.s32 %p3, %r3, %r1;
\t@%p3 bra L_loop;
\t@%p2 bra L2;
\tld.shared.b32 %r4, [tslot];
\t@!%p1 bra L2;
\ttcgen05.dealloc.cta_group::1.sync.aligned.b32 %r4, 32;
L2:
\tret;
"""
    fa = analyse(body)
    events, converged = solve(_Alloc(fa.cfg, fa.values, fa))
    # %p1 (r1 > 64) false skips both; %p2 (r1 < 10) true implies %p1 false: no leaking path
    assert converged and events == []
    fa2 = analyse(body.replace("setp.lt.s32 %p2, %r1, 10", "setp.lt.s32 %p2, %r1, 100"))
    events, _ = solve(_Alloc(fa2.cfg, fa2.values, fa2))
    assert [e.message for e in events] == ["leak 1"]
    assert any("branch taken" in d for _, d in events[0].witness)


# ------------------------------------------------------------------------- fuzzing

OPS = [
    "\tmov.u32 %r{a}, %tid.x;", "\tadd.s32 %r{a}, %r{b}, {c};", "\tshr.u32 %r{a}, %r{b}, 5;",
    "\tsetp.lt.u32 %p{pa}, %r{b}, {c};", "\telect.sync %r{a}|%p{pa}, -1;",
    "\t@%p{pb} bra L{l};", "\tbra.uni L{l};", "\tbar.sync 0;", "\t@%p{pb} ret;",
    "\tmbarrier.init.shared::cta.b64 [bar], 1;",
    "\tmbarrier.try_wait.parity.shared::cta.b64 %p{pa}, [bar], {par};",
    "\tmov.u32 %r{a}, tslot;",
    "\t@%p{pb} tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r{b}], 32;",
    "\ttcgen05.dealloc.cta_group::1.sync.aligned.b32 %r{b}, 32;",
    "\ttcgen05.ld.sync.aligned.32x32b.x1.b32 {{%r{a}}}, [%r{b}];",
    "\ttcgen05.wait::ld.sync.aligned;", "\ttcgen05.commit.cta_group::1.mbarrier::arrive::one"
    ".shared::cluster.b64 [bar];", "\tcp.async.commit_group;", "\tcp.async.wait_group 0;",
    "\twgmma.fence.sync.aligned;", "\tfence.proxy.async.shared::cta;", "\tst.shared.b32 [tslot], %r{b};",
]

stmt = st.builds(lambda k, a, b, c, pa, pb, lab, par: OPS[k].format(a=a, b=b, c=c, pa=pa, pb=pb,
                                                                    l=lab, par=par),
                 st.integers(0, len(OPS) - 1), st.integers(0, 15), st.integers(0, 15),
                 st.sampled_from([0, 1, 31, 32, 64]), st.integers(0, 7), st.integers(0, 7),
                 st.integers(0, 5), st.integers(0, 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(stmt, st.integers(0, 5).map(lambda n: f"L{n}:")), max_size=40))
def test_fuzz_analyses_on_random_programs(lines):
    seen, body = set(), []
    for ln in lines:
        if ln.endswith(":"):
            if ln in seen:
                continue
            seen.add(ln)
        body.append(ln)
    for n in range(6):          # every branch target exists
        if f"L{n}:" not in seen:
            body.append(f"L{n}:")
    body.append("\tret;")
    text = HEAD + "\n".join(body) + "\n}\n"
    fa = analyse("\n".join(body) + "\n")
    cfg, v = fa.cfg, fa.values
    n = len(cfg.blocks)
    assert sum(b.end - b.start for b in cfg.blocks) == len(cfg.instrs)
    for b in cfg.rpo:                       # every reachable block is dominated by the entry
        assert cfg.dominates(0, b)
    assert all(c in (UNIFORM, WARP, DIVERGENT) for c in v.cls.values())
    assert set(v.divergent_blocks) <= set(range(n))
    report = verify(text, arch="sm_100a", filename="fuzz.ptx")
    report.render()
    assert all(f.line >= 1 for f in report.findings)
