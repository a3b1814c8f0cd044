"""No false alarms on fast code (issue 18): the ``fast`` family compiled by the installed Triton
(live) and by Triton 3.6 (``fixtures/fast36/``, regenerate with ``fast_fixtures.py``) verifies
with 0 errors on sm_90a and sm_100a; and the mechanisms behind it, each on a small PTX program
that shows both sides (the correct idiom passes, the broken one is still an error)."""

from __future__ import annotations

from pathlib import Path

import pytest
from verifier_testlib import FIXTURES

from kernels.fast._common import ARCH_CC, compile_fast
from kernels.fast.hand_ptx import hand_ptx
from kernels.registry import get, names
from verifier import parse_ptx, verify

#: the Triton entries (the hand-written PTX ones are checked by tests/kernels/test_fast_hand_ptx.py)
FAST = [n for n in names("fast") if hand_ptx(n) is None]
FAST36 = sorted((FIXTURES / "fast36").glob("*.ptx"))
#: the warnings each (Triton, arch) may still carry, the real divergences from the PTX ISA
#: (docs/verifier-fast.md, "Warnings on correct code"): TF3 / TF5 (tcgen05 fences around thread
#: synchronization, PTX ISA 9.1 §9.7.16.6.3-4), TM8 on Triton 3.6's sm_100a code and W5 on its
#: sm_90a code (its cp.async data read by tcgen05.mma / wgmma with no proxy fence; Triton 3.9's
#: block-scaled GEMMs' scratch writes are apart from the MMA tiles by address since 2026-12-04)
#: and MB3 (Triton 3.6 re-initialises a live mbarrier, undefined per §9.7.13.15.9); a warning
#: of any other rule fails
ALLOWED = {("installed", "sm_90a"): set(), ("installed", "sm_100a"): {"TF3", "TF5"},
           ("3.6", "sm_90a"): {"W5", "MB3"}, ("3.6", "sm_100a"): {"TF3", "TF5", "TM8"}}


def _check(report, triton: str, arch: str):
    assert report.ok, report.render()
    bad = [f for f in report.warnings if f.rule not in ALLOWED[(triton, arch)]]
    assert not bad, report.render()


def test_fast36_fixtures_cover_the_family():
    have = {p.stem for p in FAST36}
    assert have == {f"{n}_{a}" for n in FAST for a in ARCH_CC}


@pytest.mark.parametrize("path", FAST36, ids=lambda p: p.stem)
def test_fast36_ptx_has_no_false_alarm(path: Path):
    text = path.read_text()
    arch = parse_ptx(text).arch
    _check(verify(text, arch=arch, filename=path.name), "3.6", arch)


@pytest.mark.parametrize("arch", sorted(ARCH_CC))
@pytest.mark.parametrize("name", FAST)
def test_fast_ptx_of_installed_triton_has_no_false_alarm(name, arch):
    pytest.importorskip("triton")
    ptx, threads = compile_fast(get(name), arch)
    _check(verify(ptx, arch=arch, threads=threads, filename=f"{name}_{arch}.ptx"),
           "installed", arch)


# ---- the mechanisms, on small programs -------------------------------------------------------

_HEAD = """.version 8.7
.target {arch}
.address_size 64
.visible .entry k(.param .u64 p)
{{
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  .reg .pred %p<8>;
  .shared .align 128 .b8 smem[4096];
"""


def _run(body: str, rules: set[str], arch: str = "sm_90a"):
    return verify(_HEAD.format(arch=arch) + body + "\n  ret;\n}\n", arch=arch, select=rules)


def _rules(report, severity: str) -> list[str]:
    return [f.rule for f in report.findings if f.severity == severity]


_PARTITIONS = """
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 5;
  setp.lt.u32 %p1, %r2, 4;
  @%p1 bra DEFAULT;
  {worker}
  bra.uni DONE;
DEFAULT:
  barrier.sync 1;
DONE:
"""


def test_b4_nonaligned_rendezvous_of_partitions_is_not_an_error():
    ok = _run(_PARTITIONS.format(worker="barrier.sync 1;"), {"B4"})
    assert "B4" not in _rules(ok, "error") and "B4" in _rules(ok, "note")
    # the aligned form must be the same instruction for every thread: still an error
    bad_aligned = _run(_PARTITIONS.format(worker="bar.sync 1;").replace(
        "DEFAULT:\n  barrier.sync 1;", "DEFAULT:\n  bar.sync 1;"), {"B4"})
    assert "B4" in _rules(bad_aligned, "error")
    # one partition only: the other warps never arrive
    alone = _run(_PARTITIONS.format(worker="add.u32 %r3, %r1, 1;"), {"B4"})
    assert "B4" in _rules(alone, "error")


_MMA = """
  mov.b64 %rd1, 0;
  mov.b64 %rd2, 0;
  mov.b32 %r1, 0;
  mov.b32 %r2, {idesc};
  mov.b32 %r3, 0;
  mov.b32 %r4, 0;
  setp.ne.b32 %p1, %r1, 0;
  tcgen05.mma.cta_group::1.kind::{kind}.block_scale.block32 [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
"""


@pytest.mark.parametrize("kind,idesc,problem", [
    ("mxf8f6f4", 0x08A00000, None),            # M=128 N=128 UE8M0, scale IDs 0
    ("mxf8f6f4", 0x48A00020, None),            # scale IDs 2 (one scale per word: 0-3)
    ("mxf4", 0x48A004A0, None),                # E2M1, IDs 2 (two per word: 0 or 2)
    ("mxf8f6f4", 0x08200000, "scale type UE4M3"),
    ("mxf4", 0x28A00490, "scale factor ID 1"),
    ("mxf8f6f4", 0x08A00008, "reserved bit"),
])
def test_tm4_block_scaled_descriptor_fields(kind, idesc, problem):
    r = _run(_MMA.format(kind=kind, idesc=hex(idesc)), {"TM4"}, arch="sm_100a")
    errs = [f.message for f in r.findings if f.severity == "error"]
    if problem is None:
        assert not errs, errs
    else:
        assert any(problem in m for m in errs), errs


def test_brx_jump_table_keeps_every_target():
    from verifier.context import Context
    from verifier.ptx.parser import parse_ptx as parse

    text = _HEAD.format(arch="sm_90a") + """
TABLE: .branchtargets L1, L2;
  mov.u32 %r1, %tid.x;
  brx.idx %r1, TABLE;
L1:
  ret;
L2:
  ret;
}
"""
    ctx = Context(parse(text), text, arch="sm_90a")
    fi = next(iter(ctx.bodies()))
    cfg = ctx.analysis(fi).cfg
    brx = next(b for b in cfg.blocks if cfg.instrs[b.end - 1].parts[0] == "brx")
    starts = {cfg.instrs[cfg.blocks[d].start].line for d in cfg.succ_ids(brx.id)}
    lines = text.splitlines()
    want = {n + 1 for n, s in enumerate(lines) if s.strip() == "ret;"}
    assert starts == want                   # L1 (the first target) and L2
    assert ctx.analysis(fi).values.branch_class[brx.id] != 0   # lane-dependent index


_PARITY = """
  mov.u32 %r1, %tid.x;
  mov.b32 %r2, smem;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
  bar.sync 0;
  {arrivals}
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 1;
  @!%p2 bra.uni WAIT;
"""


def test_mb5_first_wait_passing_at_once_is_an_error_only_on_a_data_barrier():
    credit = _run(_PARITY.format(arrivals="@%p1 mbarrier.arrive.shared::cta.b64 %rd1, [%r2];"),
                  {"MB5"})
    assert "MB5" not in _rules(credit, "error") and "MB5" in _rules(credit, "note")
    data = _run(_PARITY.format(arrivals=(
        "ld.param.u64 %rd2, [p];\n"
        "  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd1, [%r2], 1024;\n"
        "  add.u32 %r3, %r2, 1024;\n"
        "  @%p1 cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%r3], [%rd2], "
        "1024, [%r2];")), {"MB5"})
    assert "MB5" in _rules(data, "error")


_TMEM_ST = """
  mov.b32 %r1, 0;
  mov.b32 %r2, 0;
  tcgen05.st.sync.aligned.32x32b.x1.b32 [%r1], {{%r2}};
  bar.sync 0;
  {between}
  bar.sync 0;
"""


def test_tl5_store_completed_before_the_next_barrier_is_not_an_error():
    ok = _run(_TMEM_ST.format(between="tcgen05.wait::st.sync.aligned;"), {"TL5"}, "sm_100a")
    assert "TL5" not in _rules(ok, "error")
    bad = _run(_TMEM_ST.format(between="add.u32 %r3, %r2, 1;"), {"TL5"}, "sm_100a")
    assert "TL5" in _rules(bad, "error")


_WAR = """
  ld.param.u64 %rd2, [p];
  mov.b32 %r2, smem;
  add.u32 %r4, %r2, 2048;
  ld.shared.b32 %r3, [%r2];
  {between}
  cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%r2], [%rd2], 1024, [%r4];
"""


def test_ap2_generic_read_then_refill_needs_a_barrier_or_a_fence():
    bad = _run(_WAR.format(between=""), {"AP2"})
    assert "AP2" in _rules(bad, "error")
    synced = _run(_WAR.format(between="bar.sync 0;"), {"AP2"})
    assert "AP2" not in _rules(synced, "error") and "AP2" in _rules(synced, "note")
    fenced = _run(_WAR.format(between="fence.proxy.async.shared::cta;"), {"AP2"})
    assert not fenced.findings


_REINIT = """
  mov.u32 %r1, %tid.x;
  mov.b32 %r2, smem;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
  {between}
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
"""


def test_mb3_reinit_of_an_unused_barrier_is_a_warning_of_a_used_one_an_error():
    unused = _run(_REINIT.format(between=""), {"MB3"})
    assert _rules(unused, "warning") == ["MB3"] and not _rules(unused, "error")
    used = _run(_REINIT.format(between="@%p1 mbarrier.arrive.shared::cta.b64 %rd1, [%r2];"),
                {"MB3"})
    assert "MB3" in _rules(used, "error")
