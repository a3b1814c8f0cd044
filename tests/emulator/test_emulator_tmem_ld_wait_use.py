"""Which ``tcgen05.wait::ld`` executions order something (``EmulationResult.wait_effects``, the
measure behind the mutant table's "equivalent on the executed paths"): a wait acts when a later
TMEM write to cells whose loads it completed (by another thread, or by the reader itself) is not
also ordered after the reader's next ``wait::ld``, which would complete the loads as well
(PTX ISA 9.1 §9.7.16.6.4, write after read; a ``tcgen05.dealloc`` frees, i.e. writes, every
lane's cells). Triton's attention epilogue waits once for S and then writes P to other columns,
and a later wait::ld completes the load again before anything frees or overwrites S: that wait
orders no write, and removing it races with nothing (the concrete check finds no race
either)."""

from __future__ import annotations

import numpy as np

from emulator import GlobalMemory, Launch
from emulator.api import _completion_effects, _instrument
from emulator.machine import Machine
from emulator.program import build_program
from verifier.ptx.parser import parse_ptx

# warp 0 stores, then loads TMEM lane slab 0 column 0 (wait A); {between}; it hands off with a
# barrier; warp 4 (same lane slab, 32 (w % 4)) then writes column {col}
PTX = """.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 pout)
.reqntid 160, 1, 1
{{
.reg .pred %p<4>;
.reg .b32 %r<32>;
.reg .b64 %rd<8>;
.shared .align 4 .b32 tslot;
ld.param.u64 %rd1, [pout];
mov.u32 %r1, %tid.x;
shr.u32 %r2, %r1, 5;
mov.u32 %r9, tslot;
setp.eq.u32 %p1, %r2, 0;
setp.eq.u32 %p2, %r2, 4;
@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 32;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
ld.shared.b32 %r10, [%r9];
@!%p1 bra SKIP;
tcgen05.st.sync.aligned.32x32b.x2.b32 [%r10], {{%r1, %r1}};
tcgen05.wait::st.sync.aligned;
tcgen05.ld.sync.aligned.32x32b.x1.b32 {{%r13}}, [%r10];
tcgen05.wait::ld.sync.aligned; // A
{between}
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd1, %rd3;
st.global.u32 [%rd4], %r13;
SKIP:
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
@%p2 tcgen05.st.sync.aligned.32x32b.x1.b32 [%r10+{col}], {{%r2}};
@%p2 tcgen05.wait::st.sync.aligned;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r10, 32;
ret;
}}
"""

#: a second load and its own wait after A (it completes everything earlier as well)
SECOND = ("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r14}, [%r10+1];\n"
          "tcgen05.wait::ld.sync.aligned; // B")
#: the reader overwrites the cells it loaded itself
OWN_WRITE = "tcgen05.st.sync.aligned.32x32b.x1.b32 [%r10], {%r1};\ntcgen05.wait::st.sync.aligned;"


def _wait_ld_effects(between: str = "", col: int = 0) -> tuple[dict[str, int], list]:
    """(marker ("A" / "B") -> effects of that ``wait::ld`` line, the findings) of one coverage
    run of :data:`PTX` (as ``run_kernel(coverage=True)`` instruments it)."""
    ptx = PTX.format(between=between, col=col)
    prog = build_program(parse_ptx(ptx, "t.ptx"))
    gmem = GlobalMemory()
    out = gmem.add("out", np.zeros(160, np.uint32))
    mach = Machine(prog, Launch(grid=(1, 1, 1), threads=160, arch="sm_100a",
                                params={"pout": out.to_bytes(8, "little")}), gmem)
    _, effects = _instrument(mach)
    res = mach.run()
    assert res.status == "ok", res.message
    _completion_effects(mach, effects)
    lines = ptx.split("\n")
    by: dict[str, int] = {}
    for ins, e in zip(prog.insts, effects.tolist()):
        text = lines[ins.line - 1]
        if "tcgen05.wait::ld" in text:
            by[text.rsplit("// ", 1)[-1]] = by.get(text.rsplit("// ", 1)[-1], 0) + int(e)
    return by, res.findings


def test_a_wait_that_orders_another_threads_write_to_the_loaded_cells_acts():
    by, findings = _wait_ld_effects(col=0)
    assert not [f for f in findings if f.severity == "error"], findings
    assert by["A"] > 0


def test_the_last_wait_before_the_dealloc_orders_the_dealloc():
    # nobody writes column 0 again, but the dealloc frees it: the reader's last wait::ld
    # before the barrier that hands the columns to the deallocating warp acts
    by, findings = _wait_ld_effects(col=1)
    assert not [f for f in findings if f.severity == "error"], findings
    assert by["A"] > 0


def test_a_wait_covered_by_the_readers_next_wait_orders_nothing_and_that_one_orders_its_own():
    # the write to column 0 (and the dealloc) are ordered after B too, which completes the
    # first load as well: A orders nothing, B orders the dealloc of column 1's load
    by, _ = _wait_ld_effects(SECOND, col=0)
    assert by["A"] == 0 and by["B"] > 0
    # a write to column 1 depends on B (the load of column 1), still not on A
    by, _ = _wait_ld_effects(SECOND, col=1)
    assert by["A"] == 0 and by["B"] > 0


def test_the_readers_own_overwrite_of_the_cells_depends_on_its_wait():
    by, findings = _wait_ld_effects(OWN_WRITE, col=1)
    assert not [f for f in findings if f.severity == "error"], findings
    assert by["A"] > 0
