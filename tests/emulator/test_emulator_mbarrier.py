"""mbarrier phases in the emulator: producer/consumer ordering, missing waits, phases that never
complete (HB2 with the mbarrier state), and tcgen05 suite kernels against the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kernels
from emulator import GlobalMemory, Launch, run_kernel, run_launch

PTX = """.version 8.7
.target sm_90a
.address_size 64
.shared .align 16 .b8 buf[1024];
.shared .align 8 .b64 bar;
.visible .entry k(.param .u64 out)
.reqntid 64
{{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r3, buf;
mov.u32 %r9, bar;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [%r9], {count};
bar.sync 0;
setp.lt.u32 %p2, %r1, 32;
@!%p2 bra $L_cons;
shl.b32 %r2, %r1, 2;
add.u32 %r4, %r3, %r2;
st.shared.u32 [%r4], %r1;
{arrive}
bra.uni $L_end;
$L_cons:
{wait}
sub.u32 %r5, %r1, 32;
shl.b32 %r6, %r5, 2;
add.u32 %r7, %r3, %r6;
ld.shared.u32 %r8, [%r7];
mul.wide.u32 %rd2, %r5, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r8;
$L_end:
ret;
}}
"""
ARRIVE = "mbarrier.arrive.shared::cta.b64 %rd5, [%r9];"
WAIT = """{{
.reg .pred done;
$L_wait:
mbarrier.try_wait.parity.shared::cta.b64 done, [%r9], {parity};
@!done bra.uni $L_wait;
}}"""


def _run(count=32, arrive=ARRIVE, wait=WAIT.format(parity=0)):
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(32, np.uint32))
    ptx = PTX.format(count=count, arrive=arrive, wait=wait)
    launch = Launch(grid=(1, 1, 1), threads=64, params={"out": out.to_bytes(8, "little")})
    res = run_launch(ptx, launch, gmem, filename="mb.ptx")
    return res, gmem.buffer("out").view(np.uint32)


def test_mbarrier_producer_consumer_is_ordered_and_correct():
    res, out = _run()
    assert res.status == "ok" and res.findings == []
    assert out.tolist() == list(range(32))


def test_wrong_parity_is_caught():
    # parity 1 names the phase before the first one: a consumer running before the producers
    # passes at once (race); in the emulator's schedule the producers complete phase 0 first, so
    # the consumers wait for phase 1, which never completes (HB2)
    res, _ = _run(wait=WAIT.format(parity=1))
    assert res.status == "deadlock"
    (f,) = [f for f in res.findings if f.rule == "HB2"]
    assert "phase 1, 32 of 32 arrivals pending" in f.notes[0].message


def test_missing_wait_is_a_race():
    res, _ = _run(wait="")
    assert [f.rule for f in res.findings] == ["HB1"]


def test_phase_that_never_completes_is_a_deadlock():
    res, _ = _run(count=33)  # 32 producers arrive, the barrier expects 33
    assert res.status == "deadlock"
    (f,) = [f for f in res.findings if f.rule == "HB2"]
    assert "try_wait" in open_line(f.line)
    assert "1 of 33 arrivals pending" in f.notes[0].message
    assert "threads 32-63" in f.notes[0].message


def open_line(n: int) -> str:
    return PTX.format(count=33, arrive=ARRIVE, wait=WAIT.format(parity=0)).split("\n")[n - 1]


def test_uninitialised_mbarrier_is_a_fault():
    res, _ = _run(arrive=ARRIVE.replace("[%r9]", "[%r9+8]"))
    assert res.status == "fault" and "no initialised mbarrier" in res.message


FIX = Path(__file__).parent.parent / "verifier" / "fixtures" / "triton36"


@pytest.mark.parametrize("name", ["gemm.fp16", "matmul"])
def test_tcgen05_sm_100a_matches_reference(name):
    path = FIX / f"{name}_sm_100a.ptx"
    res = run_kernel(path.read_text(), kernels.get(name), "sm_100a",
                     dims={"M": 130, "N": 48, "K": 80}, filename=path.name)
    assert res.ok, res.summary()
    assert {(f.rule, f.severity) for f in res.findings} <= {("HB4", "warning")}
    assert res.outputs["c_ptr"].ok


def test_tcgen05_commit_removed_deadlocks():
    path = FIX / "gemm.fp16_sm_100a.ptx"
    src = "\n".join(ln for ln in path.read_text().split("\n") if "tcgen05.commit" not in ln)
    res = run_kernel(src, kernels.get("gemm.fp16"), "sm_100a", dims={"M": 130, "N": 48, "K": 80},
                     filename=path.name)
    assert res.status == "deadlock"
    assert any(f.rule == "HB2" and "mbarrier" in f.notes[0].message for f in res.findings)


@pytest.mark.parametrize("arch,pattern", [
    ("sm_100a", r"^\s*mbarrier\.try_wait[^\n]*\n\s*@!complete bra[^\n]*$"),
    ("sm_90a", r"^\s*wgmma\.wait_group[^\n]*$"),
])
def test_stage_reuse_without_async_completion_is_a_race(arch, pattern):
    # the next cp.async into a pipeline stage must wait until the tensor core has read it:
    # tcgen05.commit -> mbarrier wait (sm_100a) or wgmma.wait_group (sm_90a)
    import re

    path = FIX / f"gemm.fp16_{arch}.ptx"
    src = path.read_text()
    bad = re.sub(pattern, "", src, flags=re.M)
    assert bad != src
    res = run_kernel(bad, kernels.get("gemm.fp16"), arch, dims={"M": 130, "N": 48, "K": 80},
                     filename=path.name)
    races = [f for f in res.findings if f.rule == "HB1"]
    assert races, res.summary()
    assert ("async proxy (tensor core)" if arch == "sm_100a" else
            "async proxy (wgmma of warpgroup 0)") in races[0].message
    assert "cp.async" in races[0].message


# ---- .relaxed waits and state-token waits (red team round 8, 2026-12-04) ----------------

RELAXED_WAIT = """{{
.reg .pred done;
$L_wait:
mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 done, [%r9], 0;
@!done bra.uni $L_wait;
{fence}
}}"""


def test_a_relaxed_wait_does_not_acquire():
    # PTX ISA 9.1 §9.7.13.15.16 .sem: .relaxed has no acquire; the consumer's read of the
    # producer's shared writes is unordered (it was taken as an acquire: no finding)
    res, _ = _run(wait=RELAXED_WAIT.format(fence=""))
    assert [f.rule for f in res.findings] == ["HB1"], (res.message, res.findings)


@pytest.mark.parametrize("fence", ["fence.acquire.cta;", "fence.acq_rel.cta;", "membar.cta;"])
def test_a_relaxed_wait_then_an_acquire_fence_is_ordered(fence):
    res, out = _run(wait=RELAXED_WAIT.format(fence=fence))
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert out.tolist() == list(range(32))


def test_a_wait_on_the_state_token_of_an_arrive():
    # mbarrier.arrive's state operand, then try_wait on it (cuda::barrier::arrive_and_wait):
    # was "unsupported"; every thread reads its neighbour's write after the phase completes
    ptx = """.version 8.4
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
.reqntid 128, 1, 1
{
.reg .pred %p<4>;
.reg .b32 %r<20>;
.reg .b64 %rd<8>, %state;
.shared .align 8 .b64 bar;
.shared .align 4 .b32 buf[128];
mov.u32 %r1, %tid.x;
mov.u32 %r2, bar;
setp.eq.u32 %p1, %r1, 0;
@%p1 mbarrier.init.shared::cta.b64 [%r2], 128;
bar.sync 0;
mov.u32 %r3, buf;
shl.b32 %r4, %r1, 2;
add.u32 %r5, %r3, %r4;
st.shared.u32 [%r5], %r1;
mbarrier.arrive.shared::cta.b64 %state, [%r2];
$L_wait:
mbarrier.try_wait.shared::cta.b64 %p2, [%r2], %state;
@!%p2 bra $L_wait;
add.u32 %r6, %r1, 1;
and.b32 %r6, %r6, 127;
shl.b32 %r7, %r6, 2;
add.u32 %r8, %r3, %r7;
ld.shared.u32 %r9, [%r8];
ld.param.u64 %rd1, [out];
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r9;
ret;
}
"""
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(128, np.uint32))
    res = run_launch(ptx, Launch(grid=(1, 1, 1), threads=128,
                                 params={"out": out.to_bytes(8, "little")}), gmem,
                     filename="state.ptx")
    assert res.status == "ok" and res.findings == [], (res.message, res.findings)
    assert gmem.buffer("out").view(np.uint32).tolist() == [(t + 1) % 128 for t in range(128)]
    # without the wait, the neighbour's write is unordered
    res2 = run_launch(ptx.replace("@!%p2 bra $L_wait;", "").replace(
        "mbarrier.try_wait.shared::cta.b64 %p2, [%r2], %state;", ""),
        Launch(grid=(1, 1, 1), threads=128, params={"out": out.to_bytes(8, "little")}), gmem,
        filename="state.ptx")
    assert "HB1" in [f.rule for f in res2.findings]
