"""The red-team candidates of ``tests/gpu/redteam.py`` without a GPU: every edit applies to this
Triton's PTX, assembles with ptxas (the device-launch attack must not), and passes or fails the
static verifier exactly as the GPU tests expect; together they cover every threat class."""

from __future__ import annotations

import re

import pytest

import kernels
import verifier
from harness import assemble, compile_reference
from harness.gpu.helpers import HELPER_PTX
from tests.gpu import redteam


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    cache = tmp_path_factory.mktemp("rt")
    return {n: compile_reference(kernels.get(n), "sm_90a", kernels.get(n).configs()[0],
                                 cache_dir=cache)
            for n in ("vector_add", "softmax", "matmul")}


@pytest.mark.parametrize("attack", redteam.ATTACKS, ids=lambda a: a.name)
def test_attack_assembles_and_meets_the_verifier_as_expected(arts, attack):
    art = arts[attack.kernel]
    ptx = attack.make(art.ptx)
    assert ptx != art.ptx or attack.dynamic_smem is not None
    asm = assemble(ptx, "sm_90a")
    if attack.name == "va_device_launch":
        assert not asm.ok and "cudaLaunchDeviceV2" in asm.summary(ptx)
        return
    assert asm.ok, asm.summary(ptx)
    rep = verifier.verify(ptx, arch="sm_90a", abi=art.abi, threads=art.abi.threads,
                          filename="candidate.ptx")
    if attack.verifier and re.match(r"(MS1|B9)\b", attack.cause):  # a static rule catches it
        assert not rep.ok and re.search(attack.cause, rep.render("full"), re.S), rep.render()
    elif attack.verifier and not attack.cause.startswith("E1"):
        assert rep.ok, rep.render()  # the harness, not the verifier, must catch it


def test_neutralised_l2_attack_assembles(arts):
    ptx = redteam.evict_last_loads(arts["vector_add"].ptx)
    assert "L2::cache_hint" in ptx and assemble(ptx, "sm_90a").ok


def test_at_least_25_attacks_cover_every_class():
    attacks = redteam.ATTACKS
    assert len(attacks) >= 25 and len({a.name for a in attacks}) == len(attacks)
    tags = " ".join(a.classes for a in attacks)
    assert {"K1", "K2", "K3", "K4"} <= set(re.findall(r"K\d", tags))
    covered = {int(n) for n in re.findall(r"#(\d+)", tags)}
    every = set(range(1, 27))
    assert every <= covered | set(redteam.STRUCTURAL) | set(redteam.NEUTRALISED), \
        sorted(every - covered - set(redteam.STRUCTURAL) - set(redteam.NEUTRALISED))
    assert {a.kernel for a in attacks} == {"vector_add", "softmax", "matmul"}


def test_helper_kernels_assemble_for_sm80_and_sm90a():
    """The driver JIT-compiles the sm_80 module for the device; ptxas does the same here."""
    for arch in ("sm_80", "sm_90a"):
        asm = assemble(HELPER_PTX, arch)
        assert asm.ok, asm.summary(HELPER_PTX)
