"""Precision of the path-sensitive analyses on what Triton emits: power-of-two alignment of
shifted registers and contradictory range assumptions prune infeasible paths; ranges stay sound
across signed/unsigned compares and wraparound; a TMEM store before ``tcgen05.wait::ld`` stays
reported. Each pruning case has a control that must still be reported.

Found by the static sm_100a campaign of 2026-12-01: mamba2_chunk_scan's BLOCK_M=128 configs got
MB3 errors (Triton 3.6 and 3.9: an ``inval`` after a prefetch commit on a zero-trip path that needs
``pid * 128`` in [-63, -1]). The review of that fix found the signedness and wraparound holes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.verifier.test_verifier_analyses import _Alloc, analyse
from verifier import verify
from verifier.analysis import solve

ZERO_TRIP = """\tld.param.u32 %r1, [k_param_0];
\tshl.b32 %r2, %r1, 7;
\tadd.s32 %r5, %r2, 128;
\tsetp.lt.s32 %p1, %r5, 65;
\tmov.u32 %r9, tslot;
\t@%p1 bra L1;
\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 32;
L1:
\tsetp.lt.s32 %p2, %r2, 0;
\t@%p2 bra L2;
\tld.shared.b32 %r4, [tslot];
\t@!%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r4, 32;
L2:
\tret;
"""


def test_a_shifted_register_is_a_multiple_of_its_power_of_two():
    # alloc when r2 >= -63, dealloc skipped when r2 < 0: a leak needs r2 in [-63, -1], which a
    # multiple of 128 (r1 << 7) never is
    fa = analyse(ZERO_TRIP)
    events, converged = solve(_Alloc(fa.cfg, fa.values, fa))
    assert converged and events == []
    # control: without the shift the leak path exists
    fa = analyse(ZERO_TRIP.replace("shl.b32 %r2, %r1, 7", "add.s32 %r2, %r1, 0"))
    events, _ = solve(_Alloc(fa.cfg, fa.values, fa))
    assert [e.message for e in events] == ["leak 1"]


CONTRADICTION = """\tld.param.u32 %r1, [k_param_0];
\tsetp.lt.s32 %p1, %r1, {alloc_below};
\tmov.u32 %r9, tslot;
\t@%p1 bra L1;
\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 32;
L1:
\tadd.s32 %r6, %r1, -64;
\tsetp.lt.s32 %p2, %r6, 1;
\t@%p2 bra L2;
\tld.shared.b32 %r4, [tslot];
\t@!%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r4, 32;
L2:
\tret;
"""


def test_contradictory_ranges_on_related_registers_prune_the_path():
    # alloc needs r1 >= 65; skipping the dealloc needs r1 - 64 < 1, i.e. r1 < 65: no such run
    fa = analyse(CONTRADICTION.format(alloc_below=65))
    events, converged = solve(_Alloc(fa.cfg, fa.values, fa))
    assert converged and events == []
    # control: alloc from r1 >= 60 on, so r1 in [60, 64] leaks
    fa = analyse(CONTRADICTION.format(alloc_below=60))
    events, _ = solve(_Alloc(fa.cfg, fa.values, fa))
    assert [e.message for e in events] == ["leak 1"]


SIGN_MIX = """\tld.param.u32 %r1, [k_param_0];
\tshl.b32 %r2, %r1, 4;
\tsetp.gt.s32 %p1, %r2, 15;
\tmov.u32 %r9, tslot;
\t@%p1 bra L1;
\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 32;
L1:
\tsetp.gt.u32 %p2, %r2, 0;
\t@%p2 bra L2;
\tld.shared.b32 %r4, [tslot];
\t@!%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r4, 32;
L2:
\tret;
"""

WRAP = """\tld.param.u32 %r1, [k_param_0];
\tsetp.lt.s32 %p1, %r1, 65;
\tmov.u32 %r9, tslot;
\t@%p1 bra L1;
\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 32;
L1:
\tadd.s32 %r6, %r1, 64;
\tsetp.lt.s32 %p2, %r6, 129;
\t@%p2 bra L2;
\tld.shared.b32 %r4, [tslot];
\ttcgen05.dealloc.cta_group::1.sync.aligned.b32 %r4, 32;
L2:
\tret;
"""


@pytest.mark.parametrize("body", [SIGN_MIX, WRAP], ids=["signed-and-unsigned", "wraparound"])
def test_ranges_stay_sound_across_signedness_and_wraparound(body):
    # SIGN_MIX: r2 <=s 15 and r2 >u 0 both hold for r2 = -16 (r1 = 0x0FFFFFFF): a real leak.
    # WRAP: r1 >= 65 and r1 + 64 <s 129 both hold for r1 = INT_MAX (the add wraps): a real leak.
    fa = analyse(body)
    events, _ = solve(_Alloc(fa.cfg, fa.values, fa))
    assert [e.message for e in events] == ["leak 1"]


GEMM = Path(__file__).parent / "fixtures" / "handwritten" / "tc_gemm_sm100a.ptx"
LD = "\ttcgen05.ld.sync.aligned.32x32b.x4.b32 {%r20, %r21, %r22, %r23}, [%r16];\n" \
     "\ttcgen05.wait::ld.sync.aligned;\n"
SCALE = "".join(f"\tmul.f32 \t%r{26 + k}, %r{20 + k}, 0f3F000000;\n" for k in range(4))


@pytest.mark.parametrize("where", ["after", "before", "one-register"])
def test_tmem_store_before_wait_ld_is_reported_whatever_its_data(where):
    # NVIDIA's tcgen05 documentation asks for tcgen05.wait::ld before the loaded registers are
    # used; a store to the TMEM the ld reads stays a TL4 error even when its data is computed
    # from the loaded registers (after), from an earlier load's (before) or from one of them
    src = GEMM.read_text()
    assert LD in src
    ld = LD.splitlines(keepends=True)[0]
    data = "{%r26, %r26, %r26, %r26}" if where == "one-register" else "{%r26, %r27, %r28, %r29}"
    st = (f"\ttcgen05.st.sync.aligned.32x32b.x4.b32 [%r16], {data};\n"
          "\ttcgen05.wait::ld.sync.aligned;\n\ttcgen05.wait::st.sync.aligned;\n")
    body = (SCALE + ld + st) if where == "before" else (ld + SCALE + st)
    rep = verify(src.replace(LD, body), arch="sm_100a", filename="k.ptx")
    tl4 = [f for f in rep.findings if f.rule == "TL4"]
    assert tl4 and str(tl4[0].severity).endswith("error"), rep.render()


@pytest.mark.parametrize("arch", ["sm_100a", "sm_90a"])
def test_mamba2_chunk_scan_block_m_128_has_no_false_mb3(arch, tmp_path):
    from harness import compile_reference
    from kernels import get

    spec = get("mamba2_chunk_scan")
    cfg = next(c for c in spec.configs() if c.meta["BLOCK_M"] == 128 and c.num_warps == 8)
    art = compile_reference(spec, arch, cfg, cache_dir=tmp_path)
    rep = verify(art.ptx, arch=arch, abi=art.abi, threads=art.abi.threads, filename="m.ptx")
    # Triton 3.9 (not 3.6) stores P = f16(S) to TMEM before 'tcgen05.wait::ld' of S on sm_100a:
    # TL4 reports that, as NVIDIA's documentation asks for the wait before the registers are used
    import triton

    allowed = {"TL4"} if arch == "sm_100a" and triton.__version__ >= "3.7" else set()
    errors = [f for f in rep.findings if str(f.severity).endswith("error")
              and f.rule not in allowed]
    assert not errors, rep.render()
    assert re.search(r"tcgen05|wgmma|mma", art.ptx)
