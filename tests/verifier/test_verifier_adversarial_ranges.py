"""Adversarial findings (a fresh red-team helper, 2026-12-01) against the path solver's alignment
and contradiction pruning (verifier/analysis/dataflow.py): each program has a real, feasible path
that leaks a TMEM allocation, and each test asserts the leak IS reported."""
from __future__ import annotations

from tests.verifier.test_verifier_analyses import _Alloc, analyse
from verifier.analysis import solve

ALLOC = ("\tmov.u32 %r9, tslot;\n"
         "\ttcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r9], 32;\n")
DEALLOC = ("\tld.shared.b32 %r4, [tslot];\n"
           "\ttcgen05.dealloc.cta_group::1.sync.aligned.b32 %r4, 32;\n")


def _leaks(body):
    fa = analyse(body)
    events, _ = solve(_Alloc(fa.cfg, fa.values, fa))
    return [e.message for e in events]


# 1. add.sat is not "r = s + c mod 2^32": it saturates, so r is NOT a multiple of s's alignment
#    and the unshifted range of s is wrong. r1 = 0x1FFFFFFF: r2 = 0x7FFFFFFC, r3 = sat(2^31) =
#    0x7FFFFFFF, p1 true, the dealloc is skipped: a leak.
SAT = ("\tld.param.u32 %r1, [k_param_0];\n"
       "\tshl.b32 %r2, %r1, 2;\n"
       "\tadd.sat.s32 %r3, %r2, 4;\n"
       "\tsetp.eq.s32 %p1, %r3, 2147483647;\n"
       + ALLOC +
       "\t@%p1 bra L2;\n"
       + DEALLOC +
       "L2:\n\tret;\n")


def test_add_sat_does_not_inherit_alignment():
    assert _leaks(SAT) == ["leak 1"]


# 2. A range learnt from a setp that read r1's PREVIOUS value (r1 is single-def, redefined by the
#    loop between the setp and the branch on its predicate) is attached to the NEW r1; the new
#    contradicts() then intersects it with a range unshifted from r2 = r1 + 4 and prunes.
#    Run: first load returns 8 (S: p1 = true), second load returns 16 (r2 = 20, p2 true):
#    dealloc skipped, a leak.
STALE = ("\tld.param.u64 %rd1, [k_param_0];\n"
         + ALLOC +
         "\tmov.u32 %r7, 0;\n"
         "LD:\n"
         "\tld.volatile.global.u32 %r1, [%rd1];\n"
         "\tadd.s32 %r7, %r7, 1;\n"
         "\tsetp.eq.s32 %p5, %r7, 1;\n"
         "\t@%p5 bra S;\n"
         "\t@!%p1 bra FREE;\n"
         "\tadd.s32 %r2, %r1, 4;\n"
         "\tsetp.eq.s32 %p2, %r2, 20;\n"
         "\t@%p2 bra L2;\n"
         "FREE:\n"
         + DEALLOC +
         "L2:\n\tret;\n"
         "S:\n"
         "\tsetp.eq.s32 %p1, %r1, 8;\n"
         "\tbra.uni LD;\n")


def test_stale_range_on_redefined_register_does_not_prune():
    assert _leaks(STALE) == ["leak 1"]


# 3. bar.red.popc defines its first operand, but Values lists "bar" as NO_DEF: %r2 looks
#    single-def (the shl) and 4-aligned, so "%r2 == 5" is pruned. A CTA of 5 threads with
#    %p0 true in all gives %r2 = 5: dealloc skipped, a leak.
BARRED = ("\tld.param.u32 %r1, [k_param_0];\n"
          "\tshl.b32 %r2, %r1, 2;\n"
          "\tsetp.ne.s32 %p0, %r2, 12345;\n"
          "\tbar.red.popc.u32 %r2, 0, %p0;\n"
          "\tsetp.eq.s32 %p1, %r2, 5;\n"
          + ALLOC +
          "\t@%p1 bra L2;\n"
          + DEALLOC +
          "L2:\n\tret;\n")


def test_bar_red_result_is_not_aligned_by_an_earlier_shl():
    assert _leaks(BARRED) == ["leak 1"]
