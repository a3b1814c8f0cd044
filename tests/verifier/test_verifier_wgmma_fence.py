"""W2 (``wgmma.fence`` before ``wgmma.mma_async``), both directions, on one small TMA + wgmma
kernel whose mma block is swapped per case.

Per PTX ISA 9.1 §9.7.15.7.1 the fence orders earlier accesses of an mma_async's accumulator /
A-fragment registers before it. The verifier errs where the fence is missing (none on the path;
a register of the mma written after an earlier mma with no new fence: ptxas 13.0 injects
``warpgroup.arrive``, INFO C7519) and only warns for a write between the fence and the mma
(Triton 3.9's flash attention emits ``mov.b32 %r353, %r347`` there; ptxas repairs it). A write
of a register the mma does not use does not matter (ISA: "accesses the same registers").
"""

from __future__ import annotations

import pytest

from verifier import verify

_ACC1 = "{" + ", ".join(f"%f{i}" for i in range(1, 33)) + "}"
_ACC2 = "{" + ", ".join(f"%f{i}" for i in range(33, 65)) + "}"
M1 = f"\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {_ACC1}, %rd4, %rd6, 1, 1, 1, 0, 0;"
M2 = f"\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {_ACC2}, %rd4, %rd6, 1, 1, 1, 0, 0;"
# A from registers: {%r10..%r13} (four .b32 holding f16 pairs), B from shared memory
MA = (f"\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {_ACC1}, {{%r10, %r11, %r12, %r13}}, "
      "%rd6, 1, 1, 1, 0;")
FENCE = "\twgmma.fence.sync.aligned;"
DONE = "\twgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;"

_KERNEL = """.version 8.7
.target sm_90a
.address_size 64

.visible .entry wg(
	.param .u64 .ptr .global .align 16 wg_param_0,
	.param .u64 .ptr .global .align 16 wg_param_1
)
.reqntid 128
{
	.reg .pred 	%p<8>;
	.reg .b32 	%r<32>;
	.reg .f32 	%f<80>;
	.reg .b64 	%rd<16>;
	.shared .align 1024 .b8 smem[16384];
	.shared .align 128 .b8 obuf[512];
	.shared .align 8 .b64 bar;

	ld.param.u64 	%rd1, [wg_param_0];
	ld.param.u64 	%rd2, [wg_param_1];
	mov.u32 	%r1, %tid.x;
	setp.eq.u32 	%p1, %r1, 0;
	mov.u32 	%r2, bar;
	@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
	bar.sync 	0;
	mov.u32 	%r3, smem;
	@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 8192;
	@%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1], 8192, [%r2];
$L_wait:
	mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
	@!%p2 bra 	$L_wait;
	bfe.u32 	%r4, %r3, 4, 14;
	cvt.u64.u32 	%rd3, %r4;
	or.b64 	%rd4, %rd3, 4611686293305294848;
	add.u32 	%r5, %r3, 4096;
	bfe.u32 	%r6, %r5, 4, 14;
	cvt.u64.u32 	%rd5, %r6;
	or.b64 	%rd6, %rd5, 4611686293305294848;
	mov.b32 	%r10, 1006648320;
	mov.b32 	%r11, %r10;
	mov.b32 	%r12, %r10;
	mov.b32 	%r13, %r10;
{init}
{body}
	mov.u32 	%r7, obuf;
	shl.b32 	%r8, %r1, 2;
	add.u32 	%r9, %r7, %r8;
	add.f32 	%f70, %f1, %f33;
	st.shared.f32 	[%r9], %f70;
	fence.proxy.async.shared::cta;
	bar.sync 	0;
	@%p1 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [obuf], 512;
	@%p1 cp.async.bulk.commit_group;
	@%p1 cp.async.bulk.wait_group.read 0;
	@%p1 mbarrier.inval.shared::cta.b64 [%r2];
	ret;
}
"""
_INIT = "\n".join(f"\tmov.f32 \t%f{i}, 0f00000000;" for i in range(1, 65))


def _kernel(*lines: str) -> tuple[str, dict[str, int]]:
    """The kernel with ``lines`` as its mma block; returns (text, {marker: line number}) where a
    marker is the text after ``// @`` on a line."""
    text = _KERNEL.replace("{init}", _INIT).replace("{body}", "\n".join(lines))
    marks = {}
    for n, line in enumerate(text.splitlines(), 1):
        if "// @" in line:
            marks[line.split("// @")[1].strip()] = n
    return text.replace("// @", "// "), marks


def _w2(text: str):
    report = verify(text, arch="sm_90a", filename="wg.ptx")
    others = [f for f in report.errors if f.rule != "W2"]
    assert not others, report.render()
    return ({f.line for f in report.errors if f.rule == "W2"},
            {f.line for f in report.findings if f.rule == "W2" and f.severity == "warning"})


def test_fence_then_mma_is_clean():
    text, _ = _kernel(FENCE, M1, M2, DONE)
    assert _w2(text) == (set(), set())


def test_no_fence_at_all_is_an_error():
    text, m = _kernel(M1 + " // @m1", M2, DONE)
    errors, _ = _w2(text)
    assert m["m1"] in errors


def test_write_before_the_fence_is_clean():
    text, _ = _kernel("\tmov.b32 \t%f7, %f1;", FENCE, M1, M2, DONE)
    assert _w2(text) == (set(), set())


def test_write_of_own_accumulator_inside_the_fence_window_warns_only():
    """Triton 3.9 / LLVM's shape: ``wgmma.fence; mov.b32 %acc_j, %acc_i; wgmma.mma_async``."""
    text, m = _kernel(FENCE, "\tmov.b32 \t%f7, %f1;", M1 + " // @m1", M1, M2, DONE)
    errors, warnings = _w2(text)
    assert errors == set()
    assert warnings == {m["m1"]}       # once, at the first mma_async using %f7


def test_write_of_the_next_mmas_accumulator_after_an_mma_is_an_error():
    text, m = _kernel(FENCE, M1, "\tmov.f32 \t%f33, 0f3F800000;", M2 + " // @m2", DONE)
    errors, _ = _w2(text)
    assert errors == {m["m2"]}


def test_write_of_a_register_the_following_mma_does_not_use_does_not_matter():
    """%f33 belongs to M2 only: the same-shape M1 after the write needs no fence; M2 does."""
    text, _ = _kernel(FENCE, M1, "\tmov.f32 \t%f33, 0f3F800000;", M1, FENCE, M2, DONE)
    assert _w2(text) == (set(), set())
    text, m = _kernel(FENCE, M1, "\tmov.f32 \t%f33, 0f3F800000;", M1 + " // @m1b",
                      M2 + " // @m2", DONE)
    errors, _ = _w2(text)
    assert errors == {m["m2"]}


@pytest.mark.parametrize("refence", [False, True])
def test_a_fragment_register_written_between_mmas(refence):
    text, m = _kernel(FENCE, MA, DONE, "\tmov.b32 \t%r11, 0;", *([FENCE] if refence else []),
                      MA + " // @second", DONE)
    errors, _ = _w2(text)
    assert errors == (set() if refence else {m["second"]})


def test_different_shape_reusing_the_accumulator_still_needs_a_fence():
    m32 = ("\twgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {"
           + ", ".join(f"%f{i}" for i in range(1, 17)) + "}, %rd4, %rd6, 1, 1, 1, 0, 0;")
    text, m = _kernel(FENCE, M1, m32 + " // @m32", DONE)
    errors, _ = _w2(text)
    assert errors == {m["m32"]}
