"""Emulator memory is proportional to what the kernel touches (sparse race shadow in 4 KiB
pages), and a memory budget ends in status ``memory`` with a report, never an out-of-memory
kill."""

from __future__ import annotations

import numpy as np

from emulator import GlobalMemory, Launch, run_kernel
from emulator.machine import Machine
from emulator.memory import SHADOW_BYTES_PER_BYTE, Shadow, ShadowBudgetExceeded
from emulator.program import build_program
from tests.emulator import realk
from verifier.ptx.parser import parse_ptx

PTX = """.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
.reqntid 64
{
.reg .b32 %r<4>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r1;
add.s64 %rd4, %rd3, 100000000;
st.global.u32 [%rd4], %r1;
ret;
}
"""


def _machine(budget):
    g = GlobalMemory()
    out = g.add("out", np.zeros(128 << 20, np.uint8))  # 128 MiB buffer, 512 B touched
    launch = Launch(grid=(1, 1, 1), threads=64, params={"out": out.to_bytes(8, "little")})
    return Machine(build_program(parse_ptx(PTX, "t.ptx")), launch, g, memory_budget=budget), g


def test_shadow_is_proportional_to_touched_bytes():
    m, g = _machine(1 << 30)
    res = m.run()
    assert res.status == "ok" and res.findings == []
    # two touched 256 B ranges: two 4 KiB pages of records, not 128 MiB x 40 B
    assert m._gshadow.n_pages == 2
    assert m._gshadow.state_bytes < (64 << 10) * SHADOW_BYTES_PER_BYTE
    assert g.buffer("out").view(np.uint32)[:64].tolist() == list(range(64))


def test_shadow_budget_ends_in_a_report():
    m, _ = _machine(Shadow.PAGE * SHADOW_BYTES_PER_BYTE)  # room for one page only
    res = m.run()
    assert res.status == "memory"
    assert "budget" in res.message and "global" in res.message


def test_shadow_slots_keep_records_apart():
    sh = Shadow(1 << 30)
    a = sh.slots(np.array([5, 4096 * 1000 + 5, 5, (1 << 30) - 1]))
    assert a[0] == a[2] and len({int(a[0]), int(a[1]), int(a[3])}) == 3
    sh.w_lane[a[1]] = 77
    assert sh.w_lane[sh.slots(np.array([4096 * 1000 + 5]))][0] == 77
    assert sh.w_lane[sh.slots(np.array([4096 * 1000 + 6]))][0] == -1
    try:
        Shadow(1 << 30, budget=10).slots(np.array([0]))
    except ShadowBudgetExceeded as e:
        assert "budget" in str(e)
    else:
        raise AssertionError("no budget error")


def test_run_kernel_over_budget_buffers_is_reported_before_any_work():
    spec = realk.specs()["realk_gemm"]
    text, meta = realk.fixture("realk_gemm", "sm_90a")
    res = run_kernel(text, spec, "sm_90a", size="bench", memory_budget=64 << 20)
    assert res.status == "memory" and "MiB" in res.message and not res.ok
