"""wgmma in a CTA whose size is not a multiple of 128 threads (warpgroups plus a producer warp,
the warp-specialized layout of many hand-written Hopper kernels): the full warpgroups' wgmma is
emulated; a wgmma by the partial last warpgroup is unsupported (PTX ISA 9.1 §9.7.15.1: a
warpgroup is four consecutive warps). Found by a red-team helper (2026-12-03): every wgmma in
such a CTA was "unsupported", so `ailower lower` could not emulate a correct kernel."""

from __future__ import annotations

import numpy as np
import pytest

from emulator import EmulationUnsupported, GlobalMemory, Launch, run_launch

# the last warp (the producer) writes the 8x16 f16 B tile into buf (B[n][k] = n + 1, K-major,
# no swizzle: 16-byte chunk j holds row j % 8), fences it for the async proxy and meets the
# warpgroups at bar.sync 0; each warpgroup multiplies A = ones (registers) by B into a m64n8
# f32 accumulator and stores its 4 registers per thread to out[CTA][thread][q]
PTX = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 128 .b8 buf[256];
.visible .entry k(.param .u64 out)
.reqntid {nt}
{{
.reg .pred %p<8>;
.reg .b16 %rs<4>;
.reg .b32 %r<40>;
.reg .f32 %f<4>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r3, buf;
setp.lt.u32 %p1, %r1, {wg_threads};
@%p1 bra $L_sync;
sub.u32 %r4, %r1, {wg_threads};
shr.u32 %r5, %r4, 1;
and.b32 %r5, %r5, 7;
add.u32 %r5, %r5, 1;
cvt.rn.f32.u32 %f1, %r5;
cvt.rn.f16.f32 %rs1, %f1;
mov.b32 %r6, {{%rs1, %rs1}};
shl.b32 %r7, %r4, 3;
add.u32 %r8, %r3, %r7;
st.shared.v2.u32 [%r8], {{%r6, %r6}};
fence.proxy.async.shared::cta;
$L_sync:
bar.sync 0;
@!%p1 bra $L_end;
mov.u32 %r20, 1006648320;
shr.u32 %r24, %r3, 4;
cvt.u64.u32 %rd2, %r24;
or.b64 %rd2, %rd2, 4294967296;
or.b64 %rd2, %rd2, 524288;
mov.u32 %r10, 0;
mov.u32 %r11, 0;
mov.u32 %r12, 0;
mov.u32 %r13, 0;
wgmma.fence.sync.aligned;
wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {{%r10, %r11, %r12, %r13}}, {{%r20, %r20, %r20, %r20}}, %rd2, 1, 1, 1, 0;
wgmma.commit_group.sync.aligned;
wgmma.wait_group.sync.aligned 0;
mov.u32 %r30, %ctaid.x;
mad.lo.u32 %r31, %r30, {wg_threads}, %r1;
mul.wide.u32 %rd3, %r31, 16;
add.s64 %rd4, %rd1, %rd3;
st.global.v4.u32 [%rd4], {{%r10, %r11, %r12, %r13}};
$L_end:
ret;
}}
"""


def _run(n_wg: int, grid: int = 1, all_issue: bool = False, removed: str = "", edit=None):
    """(outcome, out as f32) of ``grid`` CTAs of ``n_wg`` warpgroups + a producer warp;
    ``all_issue``: the producer warp issues the wgmma too; ``removed``: a line taken out;
    ``edit``: a function applied to the PTX."""
    nt = 128 * n_wg + 32
    ptx = PTX.format(nt=nt, wg_threads=128 * n_wg)
    if edit is not None:
        ptx = edit(ptx)
    if removed:
        assert removed in ptx
        ptx = ptx.replace(removed, "")
    if all_issue:  # the wgmma path taken by every thread, the producer warp too
        ptx = ptx.replace("@!%p1 bra $L_end;", "").replace(
            f"mad.lo.u32 %r31, %r30, {128 * n_wg}, %r1;", f"mad.lo.u32 %r31, %r30, {nt}, %r1;")
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(grid * nt * 4, np.float32))
    res = run_launch(ptx, Launch(grid=(grid, 1, 1), threads=nt,
                                 params={"out": out.to_bytes(8, "little")}), gmem,
                     filename="wg.ptx")
    return res, gmem.buffer("out").view(np.float32)


def _want(n_wg: int, grid: int) -> np.ndarray:
    # D[m][n] = sum_k 1 * (n + 1) = 16 (n + 1); register q of lane L holds column
    # 2 (L % 4) + (q & 1) (PTX ISA 9.1 §9.7.15.5.1)
    lane = np.arange(128 * n_wg) % 32
    q = np.arange(4)
    col = 2 * (lane[:, None] % 4) + (q[None, :] & 1)
    return np.tile((16.0 * (col + 1)).reshape(-1), grid)


@pytest.mark.parametrize("n_wg,grid", [(1, 1), (2, 1), (1, 3), (2, 2)])
def test_warpgroups_plus_a_producer_warp_emulate_their_wgmma(n_wg, grid):
    res, out = _run(n_wg, grid)
    assert res.status == "ok", res.message
    assert [str(f) for f in res.findings] == []
    assert out[:grid * 128 * n_wg * 4].tolist() == _want(n_wg, grid).tolist()


def test_a_wgmma_by_the_partial_warpgroup_is_unsupported():
    with pytest.raises(EmulationUnsupported, match="partial warpgroup of threads 128-159 of a "
                                                   "160-thread CTA"):
        _run(1, all_issue=True)


@pytest.mark.parametrize("removed,rule", [("fence.proxy.async.shared::cta;", "HB4"),
                                          ("bar.sync 0;", "HB1"),
                                          ("wgmma.wait_group.sync.aligned 0;", "HB6")])
def test_the_bugs_of_the_producer_warp_layout_are_found(removed, rule):
    # the same kernel without the producer's proxy fence, the barrier or the wait: the async
    # operand reads and in-flight registers of each warpgroup are tracked with the warp beside it
    res, _ = _run(1, 2, removed=removed)
    assert rule in {f.rule for f in res.findings if f.severity == "error"}, \
        [str(f) for f in res.findings]


# HB10 (PTX ISA 9.1 §9.7.15.7.1): wgmma.fence before the first wgmma.mma_async and between a
# register access and the wgmma.mma_async that uses the register
_FENCE = "wgmma.fence.sync.aligned;\n"


def _after_fence(ptx: str, line: str) -> str:
    """``ptx`` with ``line`` moved from before its wgmma.fence to just after it."""
    assert ptx.count(_FENCE) == 1 and ptx.count(line + "\n") == 1
    return ptx.replace(line + "\n", "").replace(_FENCE, _FENCE + line + "\n")


@pytest.mark.parametrize("line,reg", [
    ("mov.u32 %r20, 1006648320;", "'%r20'"),   # register A written after the fence
    ("mov.u32 %r12, 0;", "'%r12'"),            # an accumulator register written after it
])
def test_an_operand_register_written_after_the_wgmma_fence_is_hb10(line, reg):
    res, out = _run(1, 1, edit=lambda ptx: _after_fence(ptx, line))
    (f,) = [f for f in res.findings if f.rule == "HB10"]
    assert f.severity == "error" and reg in f.message, f.message
    assert "after its last wgmma.fence" in f.message
    assert out[:512].tolist() == _want(1, 1).tolist()  # the values alone do not show it


def test_no_wgmma_fence_before_the_first_wgmma_is_hb10():
    res, _ = _run(1, 1, removed=_FENCE)
    (f,) = [f for f in res.findings if f.rule == "HB10"]
    assert "executed no wgmma.fence before it" in f.message and "(128 threads)" in f.message
