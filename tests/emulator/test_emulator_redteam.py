"""Red-team attacks on the emulator: adversarial PTX that behaves correctly under emulation but
not on a GPU, or whose race the happens-before analysis would miss. Each test is one attack kind
(and, where it matters, a correct twin that must stay clean)."""

from __future__ import annotations

import numpy as np
import pytest
from test_emulator_hb import HEAD, _run

from emulator import GlobalMemory, Launch, run_launch

SHIFT_READ = """
add.u32 %r5, %r1, {shift};
and.b32 %r5, %r5, 127;
shl.b32 %r6, %r5, 2;
add.u32 %r7, %r3, %r6;
ld.shared.u32 %r8, [%r7];
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r8;
"""


def _errors(res):
    return [f.rule for f in res.findings if f.severity == "error"]


def test_bar_sync_count_smaller_than_arriving_threads_is_flagged():
    # all 128 threads execute `bar.sync 0, 64`: the hardware completes the barrier with the
    # first 64 arrivals (any two warps) and starts a new one for the rest, so the writes of
    # threads 0..63 are not ordered before the reads of threads 64..127
    body = "st.shared.u32 [%r4], %r1;\nbar.sync 0, 64;\n" + SHIFT_READ.format(shift=64)
    res, _ = _run(body)
    assert _errors(res), res.findings


def test_bar_sync_count_equal_to_block_is_clean():
    body = "st.shared.u32 [%r4], %r1;\nbar.sync 0, 128;\n" + SHIFT_READ.format(shift=64)
    res, out = _run(body)
    assert res.status == "ok" and res.findings == []
    assert out.tolist() == [(t + 64) % 128 for t in range(128)]


def test_plain_store_racing_an_atomic_is_a_race():
    # a plain st and an atom to the same word from different threads, no ordering: a data race
    # (PTX ISA 9.1 §8.7: a weak store is not morally strong with respect to the atomic)
    body = """
setp.eq.u32 %p1, %r1, 0;
@%p1 st.shared.u32 [buf], %r1;
setp.eq.u32 %p2, %r1, 33;
@%p2 atom.shared.add.u32 %r8, [buf], 1;
"""
    res, _ = _run(body)
    assert "HB1" in _errors(res), res.findings


def test_plain_global_load_racing_an_atomic_of_another_cta_is_a_race():
    body = """
mov.u32 %r9, %ctaid.x;
setp.eq.u32 %p1, %r9, 0;
setp.eq.u32 %p2, %r1, 0;
and.pred %p3, %p1, %p2;
@%p3 atom.global.add.u32 %r8, [%rd1], 1;
setp.eq.u32 %p1, %r9, 1;
and.pred %p3, %p1, %p2;
@%p3 ld.global.u32 %r8, [%rd1];
"""
    res, _ = _run(body, threads=32, grid=(2, 1, 1))
    assert "HB1" in _errors(res), res.findings


def test_atomics_against_atomics_and_strong_loads_are_not_races():
    body = """
atom.shared.add.u32 %r8, [buf], 1;
atom.global.add.u32 %r8, [%rd1], 1;
ld.relaxed.gpu.global.u32 %r9, [%rd1];
ld.volatile.shared.u32 %r9, [buf];
"""
    res, _ = _run(body, threads=64, grid=(2, 1, 1))
    assert res.status == "ok" and res.findings == [], res.findings


def test_reading_never_written_shared_memory_is_not_zero():
    # shared memory starts undefined on a GPU; a kernel that skips zero-initialising an
    # accumulator in shared memory must not pass emulation because the emulator zero-fills
    body = """
ld.shared.u32 %r8, [%r4+512];
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r8;
"""
    res, out = _run(body)
    assert res.status == "ok"
    assert not (out == 0).all()


@pytest.mark.parametrize("sreg", ["%smid", "%clock", "%globaltimer_lo"])
def test_hardware_dependent_special_registers_vary_between_ctas(sreg):
    # code whose result depends on which SM runs a CTA (or on timing) must not see one constant
    # value under emulation: `if (%smid == 0) do the work` would pass with %smid == 0 everywhere
    body = f"""
mov.u32 %r8, {sreg};
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
mov.u32 %r9, %ctaid.x;
mul.wide.u32 %rd4, %r9, 128;
add.s64 %rd3, %rd3, %rd4;
st.global.u32 [%rd3], %r8;
"""
    res, out = _run(body, threads=32, grid=(8, 1, 1))
    assert res.status == "ok"
    assert len(set(out.tolist())) > 1, f"{sreg} is one constant under emulation"


def test_infinite_loop_times_out_and_is_never_ok():
    ptx = HEAD.format(T=32, body="$L_spin:\nbra.uni $L_spin;\n")
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(32, np.uint32))
    res = run_launch(ptx, Launch(grid=(1, 1, 1), threads=32,
                                 params={"out": out.to_bytes(8, "little")}),
                     gmem, time_limit_s=1.0)
    assert res.status == "timeout"


FIX = __import__("pathlib").Path(__file__).parent.parent / "verifier" / "fixtures" / "triton36"


def _softmax_barrier_edit(arch: str, new: str, extra_regs: str = "") -> str:
    lines = (FIX / f"softmax_{arch}.ptx").read_text().split("\n")
    i = next(i for i, ln in enumerate(lines) if "bar.sync" in ln or "barrier.sync" in ln)
    lines[i] = new
    if extra_regs:
        d = next(j for j, ln in enumerate(lines) if ln.strip().startswith(".reg .b64"))
        lines.insert(d + 1, extra_regs)
    return "\n".join(lines)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
@pytest.mark.parametrize("edit", ["count64", "late_ctas", "arrive"])
def test_softmax_barrier_edits_are_caught_by_emulation(arch, edit):
    import kernels
    from emulator import run_kernel

    new = {"count64": "\tbar.sync 0, 64;",
           "arrive": "\tbar.arrive 0, 128;",
           # CTAs 0-2 synchronise, later CTAs skip the reduction barrier
           "late_ctas": "\tmov.u32 %rrt, %ctaid.x;\n\tsetp.lt.u32 %prt, %rrt, 3;\n"
                        "\t@%prt bar.sync 0;"}[edit]
    ptx = _softmax_barrier_edit(arch, new, "\t.reg .pred %prt;\n\t.reg .b32 %rrt;")
    res = run_kernel(ptx, kernels.get("softmax"), arch, dims={"M": 5, "N": 4000},
                     filename="s.ptx")
    assert not res.ok
    assert {"HB1", "HB5"} & set(_errors(res)), res.summary()


def test_race_only_in_ctas_beyond_the_first_race_budget_is_found():
    # 512-thread CTAs: the vector-clock budget covers 16 CTAs at a time; CTAs 16..19 skip the
    # barrier (a CTA-uniform predicate), so only they race
    body = """
mov.u32 %r9, %ctaid.x;
and.b32 %r10, %r1, 127;
shl.b32 %r11, %r10, 2;
add.u32 %r12, %r3, %r11;
setp.lt.u32 %p1, %r1, 128;
@%p1 st.shared.u32 [%r12], %r1;
setp.lt.u32 %p2, %r9, 16;
@%p2 bar.sync 0;
@!%p1 ld.shared.u32 %r8, [%r12];
"""
    res, _ = _run(body, threads=512, grid=(20, 1, 1))
    assert "HB1" in _errors(res), res.findings
    races = [f for f in res.findings if f.rule == "HB1"]
    assert any("CTA (1" in f.message for f in races), races


def test_cta_scoped_atomics_of_different_ctas_race():
    # .cta scope does not include a thread of another CTA: the pair is not morally strong
    body = """
setp.eq.u32 %p2, %r1, 0;
@%p2 atom.cta.global.add.u32 %r8, [%rd1], 1;
"""
    res, _ = _run(body, threads=32, grid=(2, 1, 1))
    assert "HB1" in _errors(res), res.findings


def test_gpu_scoped_atomics_of_different_ctas_do_not_race():
    body = """
setp.eq.u32 %p2, %r1, 0;
@%p2 atom.gpu.global.add.u32 %r8, [%rd1], 1;
@%p2 ld.relaxed.gpu.global.u32 %r9, [%rd1];
"""
    res, _ = _run(body, threads=32, grid=(2, 1, 1))
    assert res.findings == [], res.findings


def test_register_read_before_any_write_is_not_zero():
    # %r13 is never written: an accumulator "initialised" by assuming registers start at 0
    body = """
add.u32 %r8, %r13, %r1;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r8;
"""
    res, out = _run(body)
    assert res.status == "ok"
    assert out.tolist() != list(range(128))


def test_predicated_write_to_fresh_register_keeps_other_lanes_undefined():
    body = """
setp.lt.u32 %p1, %r1, 64;
@%p1 mov.u32 %r13, 7;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r13;
"""
    res, out = _run(body)
    assert res.status == "ok"
    assert (out[:64] == 7).all() and not (out[64:] == 7).all()


def _gemm_edit(arch: str, pattern: str) -> str:
    import re
    lines = (FIX / f"gemm.fp16_{arch}.ptx").read_text().split("\n")
    return "\n".join("" if re.search(pattern, ln) else ln for ln in lines)


def test_wgmma_accumulator_read_without_final_wait_group_is_flagged():
    # Triton's sm_90a gemm with its final `wgmma.wait_group 0` removed: the epilogue converts
    # accumulator registers of an mma_async still in flight. The emulator computes wgmma at
    # issue, so the outputs match; the in-flight register access must still be reported.
    import kernels
    from emulator import run_kernel

    ptx = _gemm_edit("sm_90a", r"wgmma\.wait_group\.sync\.aligned 0")
    res = run_kernel(ptx, kernels.get("gemm.fp16"), "sm_90a", dims={"M": 130, "N": 48, "K": 80},
                     filename="g.ptx")
    assert not res.ok
    assert "HB6" in _errors(res), res.summary()


def test_wgmma_gemm_intact_has_no_in_flight_access():
    import kernels
    from emulator import run_kernel

    ptx = (FIX / "gemm.fp16_sm_90a.ptx").read_text()
    res = run_kernel(ptx, kernels.get("gemm.fp16"), "sm_90a", dims={"M": 130, "N": 48, "K": 80},
                     filename="g.ptx")
    assert res.ok and "HB6" not in [f.rule for f in res.findings], res.summary()


def test_globaltimer_looks_like_a_real_gpu_timer():
    # %globaltimer counts nanoseconds since the Unix epoch on a GPU (~1.7e18 in 2025); a kernel
    # that tests for a small value can tell it runs under emulation and take a correct path only
    # there
    import time

    body = """
mov.u64 %rd5, %globaltimer;
mul.wide.u32 %rd2, %r1, 8;
add.s64 %rd3, %rd1, %rd2;
st.global.u64 [%rd3], %rd5;
"""
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(32, np.uint64))
    res = run_launch(HEAD.format(T=32, body=body),
                     Launch(grid=(1, 1, 1), threads=32, params={"out": out.to_bytes(8, "little")}),
                     gmem)
    assert res.status == "ok"
    got = gmem.buffer("out").view(np.uint64)
    assert abs(int(got[0]) - time.time_ns()) < 3600 * 10**9


def test_global_read_of_another_ctas_write_in_a_later_batch_is_a_race():
    # CTA 0 writes a word, CTA 300 (a later batch of the emulation, which runs it after CTA 0
    # completed so the value is "right") reads it: no grid-wide ordering exists
    body = """
mov.u32 %r9, %ctaid.x;
setp.eq.u32 %p2, %r1, 0;
setp.eq.u32 %p1, %r9, 0;
and.pred %p3, %p1, %p2;
@%p3 st.global.u32 [%rd1+4], %r9;
setp.eq.u32 %p1, %r9, 300;
and.pred %p3, %p1, %p2;
@%p3 ld.global.u32 %r8, [%rd1+4];
"""
    res, _ = _run(body, threads=128, grid=(301, 1, 1))
    races = [f for f in res.findings if f.rule == "HB1"]
    assert races and "CTA (300,0,0)" in races[0].message, res.findings


def test_b128_load_is_reported_unsupported_not_a_crash():
    from emulator import EmulationUnsupported

    with pytest.raises(EmulationUnsupported, match="ld.global.b128"):
        _run(".reg .b128 %q;\nld.global.b128 %q, [%rd1];\n", threads=32)


@pytest.mark.parametrize("ins", ["ex2.approx %r8, %r1;", "atom.global.add [%rd1], 1;",
                                 "wgmma.mma_async.sync.aligned.m64n8k16 {%r8}, %rd1, %rd1, 1, 1, "
                                 "1, 0, 0;"])
def test_instruction_without_a_type_is_unsupported_not_a_crash(ins):
    from emulator import EmulationUnsupported

    with pytest.raises(EmulationUnsupported, match="without"):
        _run(ins + "\n", threads=128)
