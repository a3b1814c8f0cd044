"""HB10 / HB6 on the kernel of test_emulator_wgmma_partial (red team, round 5, 2026-12-04):
accesses of an operand register by another wgmma.mma_async (a different shape's accumulator,
register A of one the accumulator of the next) need the fence too (PTX ISA 9.1 §9.7.15.7.1:
only accumulator accesses across wgmma of the same shape are ordered by default); a register
named without '%' is a register; an instruction whose guard is false accesses nothing; a .f16
accumulator is unsupported (it crashed with an IndexError)."""

from __future__ import annotations

import pytest
from test_emulator_wgmma_partial import _FENCE, _run, _want

from emulator import EmulationUnsupported

_MMA = ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%r10, %r11, %r12, %r13}, "
        "{%r20, %r20, %r20, %r20}, %rd2, 1, 1, 1, 0;\n")
_WAIT = "wgmma.wait_group.sync.aligned 0;\n"


def _hb10(res) -> list[str]:
    return [f.message for f in res.findings if f.rule == "HB10"]


def test_a_predicated_off_read_after_the_fence_is_no_access():
    # '@%p mov' with %p false in every thread reads no register: not HB10 (it was)
    res, out = _run(1, 1, edit=lambda p: p.replace(
        _FENCE, "setp.ne.u32 %p6, %r1, %r1;\n" + _FENCE + "@%p6 mov.u32 %r31, %r12;\n"))
    assert res.status == "ok" and _hb10(res) == [], [str(f) for f in res.findings]
    assert out[:512].tolist() == _want(1, 1).tolist()


def _no_percent(p: str) -> str:
    # the accumulator registers renamed acc0..acc3 (a PTX identifier needs no '%', §4.4)
    p = p.replace(".reg .f32 %f<4>;", ".reg .f32 %f<4>;\n.reg .b32 acc<4>;")
    for i in range(4):
        p = p.replace(f"%r1{i}", f"acc{i}")
    return p


def test_registers_named_without_percent_are_operand_registers():
    res, out = _run(1, 1, edit=_no_percent)
    assert res.status == "ok" and res.findings == [], [str(f) for f in res.findings]
    assert out[:512].tolist() == _want(1, 1).tolist()
    # an accumulator written after the fence: HB10 (it was missed)
    res, _ = _run(1, 1, edit=lambda p: _no_percent(p).replace(
        "mov.u32 acc2, 0;\n", "").replace(_FENCE, _FENCE + "mov.u32 acc2, 0;\n"))
    assert any("'acc2'" in m for m in _hb10(res)), [str(f) for f in res.findings]
    # an accumulator read before the wait: HB6 (it was missed)
    res, _ = _run(1, 1, edit=lambda p: _no_percent(p).replace(
        "wgmma.commit_group.sync.aligned;\n",
        "wgmma.commit_group.sync.aligned;\nmov.u32 %r31, acc1;\n"))
    assert "HB6" in {f.rule for f in res.findings}, [str(f) for f in res.findings]


_N16 = ("wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%r10, %r11, %r12, %r13, %r14, "
        "%r15, %r16, %r17}, {%r20, %r20, %r20, %r20}, %rd2, 1, 1, 1, 0;\n")


@pytest.mark.parametrize("fenced", [False, True])
def test_a_different_shape_reusing_the_accumulator_needs_the_fence(fenced):
    # m64n16 then m64n8 on {%r10..%r13}: not the same shape, so not ordered by default
    def edit(p):
        # (an n16 B operand is 512 bytes: buf grows; its rows 8-15 are never written, their
        # values do not matter here)
        p = p.replace("buf[256]", "buf[512]").replace(
            _FENCE, "mov.u32 %r14, 0;\nmov.u32 %r15, 0;\nmov.u32 %r16, 0;\nmov.u32 %r17, 0;\n"
            + _FENCE + _N16 + "wgmma.commit_group.sync.aligned;\n" + _WAIT
            + (_FENCE if fenced else ""), 1)
        return p
    res, _ = _run(1, 1, edit=edit)
    got = _hb10(res)
    if fenced:
        assert got == [], got
    else:
        assert len(got) == 1 and "'%r10'" in got[0] and "another wgmma" in got[0], got


def test_register_a_of_one_wgmma_the_accumulator_of_the_next_needs_the_fence():
    # the second mma_async (same commit group) writes %r20..%r23, which the first reads as A
    second = ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%r20, %r21, %r22, %r23}, "
              "{%r20, %r20, %r20, %r20}, %rd2, 1, 1, 1, 0;\n")
    res, _ = _run(1, 1, edit=lambda p: p.replace(
        "wgmma.commit_group.sync.aligned;\n", second + "wgmma.commit_group.sync.aligned;\n", 1))
    assert any("'%r20'" in m for m in _hb10(res)), [str(f) for f in res.findings]


def test_a_f16_accumulator_is_unsupported_not_a_crash():
    def edit(p):
        return p.replace("m64n8k16.f32.f16.f16 {%r10, %r11, %r12, %r13}",
                         "m64n8k16.f16.f16.f16 {%r10, %r11}")
    with pytest.raises(EmulationUnsupported, match="f16 accumulator"):
        _run(1, 1, edit=edit)


def test_an_operand_register_used_as_an_address_base_is_an_access():
    # red team round 5 (left open, fixed after): 'ld.shared [%r12+4]' reads accumulator %r12
    # as its address base after the fence: HB10; and while the wgmma is in flight: HB6
    res, _ = _run(1, 1, edit=lambda p: p.replace(_FENCE, _FENCE + "ld.shared.u32 %r31, [%r12+4];\n"))
    assert any("'%r12'" in m for m in _hb10(res)), [str(f) for f in res.findings]
    res, _ = _run(1, 1, edit=lambda p: p.replace(
        "wgmma.commit_group.sync.aligned;\n",
        "wgmma.commit_group.sync.aligned;\nld.shared.u32 %r31, [%r12+4];\n"))
    assert "HB6" in {f.rule for f in res.findings if f.severity == "error"}, \
        [str(f) for f in res.findings]
