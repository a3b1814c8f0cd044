"""W5 / TM8 compare the bytes: generic shared writes provably outside the tiles an MMA reads
through its descriptors are not reported (verifier.analysis.ranges, 2026-12-04).

Before, any generic shared write since the last ``fence.proxy.async`` made the next wgmma /
tcgen05.mma a W5 / TM8 finding: 32 warnings on the expert flash attention's epilogue scratch
tile, 12 on Triton 3.9's block-scaled GEMMs' scale-layout scratch. Each case here is checked
both ways: a scratch write beside the pipelined tiles gets nothing, the same write inside a
tile (or anywhere, when the stage counter cannot be bounded) still does."""

from __future__ import annotations

import pytest

from verifier import verify

# a 2-stage ring (stage = 0, 1, 0, ... through selp, as Triton writes it): A at smem + stage *
# 16384, B at smem + 32768 + stage * 16384, K-major 128-byte swizzle, SBO 1024
_WGMMA = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k()
.reqntid 128, 1, 1
{{
  .reg .b32 %r<40>;
  .reg .b64 %rd<16>;
  .reg .pred %p<8>;
  .reg .f32 %f<40>;
  .shared .align 1024 .b8 smem[131072];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  and.b32 %r3, %r1, 127;
  shl.b32 %r4, %r3, 2;
  add.s32 %r5, %r2, %r4;
  mov.b32 %r10, -1;
  mov.b32 %r11, 0;
LOOP:
  {stage}
  {write}
  {sync}
  shl.b32 %r13, %r10, 14;
  add.s32 %r14, %r2, %r13;
  add.s32 %r15, %r14, 32768;
  bfe.u32 %r16, %r14, 4, 14;
  bfe.u32 %r17, %r15, 4, 14;
  cvt.u64.u32 %rd1, %r16;
  cvt.u64.u32 %rd2, %r17;
  or.b64 %rd3, %rd1, 4611686293305294848;
  or.b64 %rd4, %rd2, 4611686293305294848;
  wgmma.fence.sync.aligned;
  wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{acc}}}, %rd3, %rd4, 1, 1, 1, 0, 0;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
  add.s32 %r11, %r11, 1;
  setp.lt.s32 %p2, %r11, 8;
  @%p2 bra LOOP;
  ret;
}}
"""
_ACC = ", ".join(f"%f{j}" for j in range(32))
_WRAP = "add.s32 %r12, %r10, 1;\n  setp.gt.s32 %p1, %r12, 1;\n  selp.b32 %r10, 0, %r12, %p1;"
_NOWRAP = "add.s32 %r10, %r10, 1;"  # a stage counter with no bound: any offset
_SCRATCH = "st.shared.b32 [%r5+{off}], %r1;"


def _w5(off: int, stage: str = _WRAP, sync: str = "bar.sync 0;") -> list[str]:
    ptx = _WGMMA.format(stage=stage, write=_SCRATCH.format(off=off), sync=sync, acc=_ACC)
    rep = verify(ptx, arch="sm_90a", threads=128, select={"W5"})
    return [f.severity for f in rep.findings if f.rule == "W5"]


def test_scratch_beside_the_tiles_is_not_w5():
    # A reads [0, 24576), B [32768, 57344) in either stage; the scratch is [65536, 66048)
    assert _w5(65536) == []


@pytest.mark.parametrize("off", [20480, 40960, 57344 - 512 + 4])
def test_scratch_inside_a_tile_is_still_w5(off):
    # inside stage 1 of A, inside B, and the last bytes of B's reach
    assert _w5(off) == ["warning"]


def test_an_unbounded_stage_counter_keeps_w5():
    # without the wrap the descriptors' start addresses are not bounded: not provably apart
    assert _w5(65536, stage=_NOWRAP) == ["warning"]


def test_no_barrier_and_no_fence_is_an_error_only_inside_a_tile():
    assert _w5(65536, sync="") == []
    assert _w5(20480, sync="") == ["error"]


def test_a_fence_clears_the_writes():
    assert _w5(20480, sync="fence.proxy.async.shared::cta;\n  bar.sync 0;") == []


def test_selp_refinement_needs_the_compared_register():
    # the compare bounds %r13, not the selected %r12: nothing is known about the stage
    stage = ("add.s32 %r12, %r10, 1;\n  add.s32 %r19, %r12, 0;\n  setp.gt.s32 %p1, %r19, 1;\n"
             "  selp.b32 %r10, 0, %r12, %p1;")
    assert _w5(65536, stage=stage) == ["warning"]


# the same ring for tcgen05.mma (sm_100a): descriptors built from two 32-bit halves, M = N = 128
_TC = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k()
.reqntid 128, 1, 1
{{
  .reg .b32 %r<40>;
  .reg .b64 %rd<16>;
  .reg .pred %p<8>;
  .shared .align 1024 .b8 smem[131072];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, smem;
  and.b32 %r3, %r1, 127;
  shl.b32 %r4, %r3, 2;
  add.s32 %r5, %r2, %r4;
  mov.b32 %r10, -1;
  mov.b32 %r11, 0;
  mov.u32 %r22, 0;
LOOP:
  add.s32 %r12, %r10, 1;
  setp.gt.s32 %p1, %r12, 1;
  selp.b32 %r10, 0, %r12, %p1;
  st.shared.b32 [%r5+{off}], %r1;
  bar.sync 0;
  shl.b32 %r13, %r10, 14;
  add.s32 %r14, %r2, %r13;
  add.s32 %r15, %r14, 32768;
  bfe.u32 %r16, %r14, 4, 14;
  bfe.u32 %r17, %r15, 4, 14;
  mov.b32 %r20, 1073758272;
  mov.b64 %rd3, {{%r16, %r20}};
  mov.b64 %rd4, {{%r17, %r20}};
  mov.b32 %r21, 136314896;
  setp.eq.u32 %p3, %r1, 0;
  @%p3 tcgen05.mma.cta_group::1.kind::f16 [%r22], %rd3, %rd4, %r21, 1;
  add.s32 %r11, %r11, 1;
  setp.lt.s32 %p2, %r11, 8;
  @%p2 bra LOOP;
  ret;
}}
"""


@pytest.mark.parametrize("off,want", [(65536, []), (24576, ["warning"]), (65536 - 512, ["warning"])])
def test_tm8_compares_the_tiles_of_the_descriptors(off, want):
    # M = N = 128, A and B K-major (idesc 136314896): A reaches [0, 32768), B [32768, 65536)
    rep = verify(_TC.format(off=off), arch="sm_100a", threads=128, select={"TM8"})
    assert [f.severity for f in rep.findings if f.rule == "TM8"] == want, rep.render()


def test_an_mn_major_b_reaches_its_lbo_and_sbo_steps():
    # idesc 136380432 has B MN-major (bit 16): its 128 f16 rows span 2 swizzle widths along N
    # (LBO apart, 0 here) and its 16 K a second 8-row group (SBO 1024 apart): B ends by
    # 49152 + 3072; a write just after it is apart, one at its start is not
    ptx = _TC.replace("136314896", "136380432")
    for off, want in ((52224, []), (49152, ["warning"])):
        rep = verify(ptx.format(off=off), arch="sm_100a", threads=128, select={"TM8"})
        assert [f.severity for f in rep.findings if f.rule == "TM8"] == want, (off, rep.render())


# --- soundness of the byte ranges (a red-team round on ranges.py, 2026-12-04): each of these
# was silent before although the scratch write does reach a tile the wgmma reads

def test_an_unsigned_compare_with_a_negative_immediate_bounds_nothing():
    # u32 compare against -1 (0xffffffff): never greater, so the stage is never reset
    stage = "add.s32 %r12, %r10, 1;\n  setp.gt.u32 %p1, %r12, -1;\n  selp.b32 %r10, 0, %r12, %p1;"
    assert _w5(65536, stage=stage) == ["warning"]


def test_the_second_predicate_of_a_pair_is_the_negation():
    # %p3 is true when %r12 <= 1: the selp keeps %r12 above 1, unbounded
    stage = ("add.s32 %r12, %r10, 1;\n  setp.gt.s32 %p1|%p3, %r12, 1;\n"
             "  selp.b32 %r10, 0, %r12, %p3;")
    assert _w5(65536, stage=stage) == ["warning"]


def test_a_descriptor_start_past_2p18_wraps_onto_the_write():
    # smem + 2^18 + stage * 16384 has the 14-bit start field of smem + stage * 16384
    ptx = _WGMMA.replace("add.s32 %r14, %r2, %r13;",
                         "add.s32 %r14, %r2, %r13;\n  add.s32 %r14, %r14, 262144;")
    ptx = ptx.format(stage=_WRAP, write=_SCRATCH.format(off=20480), sync="bar.sync 0;", acc=_ACC)
    rep = verify(ptx, arch="sm_90a", threads=128, select={"W5"})
    assert [f.severity for f in rep.findings if f.rule == "W5"] == ["warning"], rep.render()


def test_a_32_bit_address_that_wraps_onto_a_tile():
    # smem + tid * 4 + (2^32 - 4096) + 24576 is smem + 20480 + tid * 4 in a 32-bit register
    ptx = _WGMMA.replace("add.s32 %r5, %r2, %r4;",
                         "add.s32 %r5, %r2, %r4;\n  add.u32 %r5, %r5, 4294963200;")
    ptx = ptx.format(stage=_WRAP, write=_SCRATCH.format(off=24576), sync="bar.sync 0;", acc=_ACC)
    rep = verify(ptx, arch="sm_90a", threads=128, select={"W5"})
    assert [f.severity for f in rep.findings if f.rule == "W5"] == ["warning"], rep.render()


def test_two_extern_shared_arrays_alias():
    # ptxas places every .extern .shared array at the start of dynamic shared memory: the
    # scratch array is smem, and its first bytes are the stage-0 A tile
    ptx = _WGMMA.replace("  .shared .align 1024 .b8 smem[131072];\n", "")
    ptx = ptx.replace(".visible .entry", ".extern .shared .align 1024 .b8 smem[];\n"
                      ".extern .shared .align 16 .b8 scratch[];\n.visible .entry")
    ptx = ptx.replace("add.s32 %r5, %r2, %r4;", "mov.u32 %r6, scratch;\n  add.s32 %r5, %r6, %r4;")
    ptx = ptx.format(stage=_WRAP, write=_SCRATCH.format(off=0), sync="bar.sync 0;", acc=_ACC)
    rep = verify(ptx, arch="sm_90a", threads=128, select={"W5"})
    assert [f.severity for f in rep.findings if f.rule == "W5"] == ["warning"], rep.render()


def test_a_predicate_scale_d_keeps_the_transposes_in_place():
    # scale-d as a predicate: the transposes are still the last two operands. A's descriptor
    # has LBO 32768: K-major it reaches [0, 24576), MN-major (imm-trans-a 1) its 64 rows
    # span an LBO step, to 50176; a write at 28672 is beside B and beside a K-major A only
    def w5(trans_a: int) -> list[str]:
        src = _WGMMA.replace("or.b64 %rd3, %rd1, 4611686293305294848;",
                             "or.b64 %rd3, %rd1, 4611686293439512576;")
        src = src.replace("%rd3, %rd4, 1, 1, 1, 0, 0;", f"%rd3, %rd4, %p5, 1, 1, {trans_a}, 0;")
        src = src.replace("wgmma.fence.sync.aligned;",
                          "setp.ne.s32 %p5, %r11, 0;\n  wgmma.fence.sync.aligned;")
        src = src.format(stage=_WRAP, write=_SCRATCH.format(off=28672), sync="bar.sync 0;",
                         acc=_ACC)
        rep = verify(src, arch="sm_90a", threads=128, select={"W5"})
        return [f.severity for f in rep.findings if f.rule == "W5"]
    assert w5(0) == []
    assert w5(1) == ["warning"]
