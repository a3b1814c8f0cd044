"""Vector atomics (``atom/red.global.add.v2/.v4/.v8``, sm_90+, PTX ISA 9.1 ``atom``): each
element is added atomically on its own, ``atom`` returns the old elements. Triton 3.9 emits
``atom.global.gpu.acq_rel.add.v4.f32`` for a split-K GEMM's partial sums (the reference of
fast.ptx_gemm_splitk_sm90: "emulation unsupported" before 2026-12-04)."""

from __future__ import annotations

import numpy as np
import pytest

from emulator import EmulationUnsupported, GlobalMemory, Launch, run_launch

# every thread adds (tid + 1) * [1, 2, 3, 4] to out[0:4] (red) and, through atom, to out[4:8],
# keeping what it read in old[tid][0:4]
PTX = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 old)
.reqntid 64
{{
.reg .b32 %r<16>;
.reg .f32 %f<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
ld.param.u64 %rd2, [old];
mov.u32 %r1, %tid.x;
add.u32 %r2, %r1, 1;
cvt.rn.f32.u32 %f1, %r2;
add.f32 %f2, %f1, %f1;
add.f32 %f3, %f2, %f1;
add.f32 %f4, %f3, %f1;
red.global.gpu.add.v4.f32 [%rd1], {{%f1, %f2, %f3, %f4}};
atom.global.gpu.acq_rel.add.v4.f32 {{%f5, %f6, %f7, %f8}}, [%rd1+16], {{%f1, %f2, %f3, %f4}};
mul.wide.u32 %rd3, %r1, 16;
add.s64 %rd4, %rd2, %rd3;
st.global.v4.f32 [%rd4], {{%f5, %f6, %f7, %f8}};
{extra}
ret;
}}
"""


def _run(extra: str = ""):
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(8, np.float32))
    old = gmem.add("old", np.zeros(64 * 4, np.float32))
    res = run_launch(PTX.format(extra=extra), Launch(grid=(1, 1, 1), threads=64, params={
        "out": out.to_bytes(8, "little"), "old": old.to_bytes(8, "little")}), gmem,
        filename="av.ptx")
    return res, gmem.buffer("out").view(np.float32), gmem.buffer("old").view(np.float32)


def test_vector_red_and_atom_add_each_element():
    res, out, old = _run()
    assert res.status == "ok", res.message
    assert [str(f) for f in res.findings] == []
    total = sum(range(1, 65))
    assert out.tolist() == [total * k for k in (1, 2, 3, 4)] * 2
    # lanes are serialised in lane order: thread t read the sums of threads 0..t-1
    before = np.cumsum(np.arange(1, 65)) - np.arange(1, 65)
    assert old.reshape(64, 4).tolist() == [[float(b * k) for k in (1, 2, 3, 4)]
                                           for b in before]


def test_a_vector_atomic_through_a_generic_address_of_global_memory():
    # the .global space is optional (a generic address of global memory)
    res, out, _ = _run()
    text = PTX.format(extra="").replace("red.global.gpu.add.v4.f32", "red.gpu.add.v4.f32")
    gmem = GlobalMemory()
    o = gmem.add("out", np.zeros(8, np.float32))
    old = gmem.add("old", np.zeros(256, np.float32))
    r2 = run_launch(text, Launch(grid=(1, 1, 1), threads=64, params={
        "out": o.to_bytes(8, "little"), "old": old.to_bytes(8, "little")}), gmem)
    assert r2.status == "ok" and r2.findings == [], r2.message
    assert gmem.buffer("out").view(np.float32).tolist() == out.tolist()


def test_a_plain_load_of_the_vector_atomics_target_races_them():
    res, _, _ = _run("ld.global.v4.f32 {%f9, %f10, %f11, %f12}, [%rd1];")
    assert "HB1" in {f.rule for f in res.findings}, [str(f) for f in res.findings]


def test_a_vector_atomic_of_another_type_or_op_is_unsupported():
    text = PTX.format(extra="").replace("red.global.gpu.add.v4.f32 [%rd1], {%f1, %f2, %f3, %f4};",
                                        "red.global.gpu.max.v4.f32 [%rd1], {%f1, %f2, %f3, %f4};")
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(8, np.float32))
    old = gmem.add("old", np.zeros(256, np.float32))
    with pytest.raises(EmulationUnsupported):
        run_launch(text, Launch(grid=(1, 1, 1), threads=64, params={
            "out": out.to_bytes(8, "little"), "old": old.to_bytes(8, "little")}), gmem)
