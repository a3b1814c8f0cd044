"""The mutation gate on the fast corpus (issue 18, item 4), for the classes the static rules
settle: every mutant of them, derived from Triton 3.6 fast-family PTX (``fixtures/fast36/``),
is rejected (an error), and the originals are not. The full table over all classes and files is
``bench/mutant_table.py --fast``; the classes that need the concrete execution (removed mbarrier
waits, wrong ``expect_tx``, removed proxy fences) are the emulator's. Parity flips are gated on
the sm_90a files only: Triton 3.6's sm_100a first waits are on ``tcgen05.commit`` barriers at
addresses the static analysis does not resolve (they appear as misses in the table)."""

from __future__ import annotations

import pytest
from fast_mutants import CLASSES, mutants
from verifier_testlib import FIXTURES

from kernels.fast.hand_ptx import HAND_PTX
from verifier import parse_ptx, verify

STATIC = ("parity_xor", "parity_sub", "parity_selp", "no_wgmma_fence", "no_tcgen05_wait",
          "bar_count", "early_dealloc", "no_cluster_barrier")
#: one Hopper and one Blackwell file per construct: warp-specialized GEMM, cluster GEMM, TMA GEMM
FILES = ("fast.gemm_tma_persistent_sm_90a", "fast.gemm_tma_persistent_sm_100a",
         "fast.gemm_cluster_sm_90a", "fast.gemm_cluster_sm_100a", "fast.attention_tma_sm_90a")


#: the hand-written PTX entries (kernels/fast/ptx/) and the classes the static rules settle on
#: them; their other classes (loop-carried phases updated under a predicate, removed waits and
#: fences) are the emulator's (docs/fast.md, the mutant table)
HAND = sorted(h.path for h in HAND_PTX.values())
HAND_STATIC = ("no_wgmma_fence", "early_dealloc", "no_cluster_barrier")


def _cases():
    out = []
    for path in HAND:
        for m in mutants(path.name, path.read_text(), HAND_STATIC, max_sites=2):
            out.append(pytest.param(m, id=f"{path.stem}:{m.cls}:{m.line}"))
    for stem in FILES:
        text = (FIXTURES / "fast36" / f"{stem}.ptx").read_text()
        classes = [c for c in STATIC if not (c.startswith("parity") and stem.endswith("100a"))]
        for m in mutants(stem, text, classes, max_sites=1):
            out.append(pytest.param(m, id=f"{stem}:{m.cls}:{m.line}"))
    return out


def test_the_classes_exist():
    assert set(STATIC) <= set(CLASSES)


@pytest.mark.parametrize("stem", FILES)
def test_originals_are_accepted(stem):
    text = (FIXTURES / "fast36" / f"{stem}.ptx").read_text()
    assert verify(text, arch=parse_ptx(text).arch).ok


@pytest.mark.parametrize("path", HAND, ids=lambda p: p.stem)
def test_hand_written_originals_are_accepted(path):
    text = path.read_text()
    assert verify(text, arch=parse_ptx(text).arch).ok


@pytest.mark.parametrize("m", _cases())
def test_static_mutant_is_rejected(m):
    rep = verify(m.text, arch=parse_ptx(m.text).arch, filename=m.base)
    assert not rep.ok, f"{m.what} at line {m.line} not rejected"
