"""The hand-written PTX entries of the ``fast`` family (``kernels/fast/hand_ptx.py``,
``kernels/fast/ptx/``): each is listed, has a spec whose Triton kernel keeps the PTX's ABI,
assembles with ptxas for its arch, verifies with 0 errors and 0 warnings against the spec's
reference ABI with its launch threads, and emulates correctly (strict xfail for the entries
the emulator cannot run yet: TMA multicast, ``tcgen05.cp`` from swizzled shared memory).

On the GPU: ``tests/gpu/test_fast_ptx.py``."""

from __future__ import annotations

import re

import pytest

import verifier
from harness import assemble, compile_reference
from kernels import registry
from kernels.fast.hand_ptx import HAND_PTX, hand_ptx

NAMES = sorted(HAND_PTX)


def test_acceptance_counts():
    """Issue 18: >= 12 fast entries, >= 4 of them hand-written PTX; each hand-written one is in
    the registry and no Triton entry claims a PTX file."""
    fast = registry.names("fast")
    assert len(fast) >= 12
    assert len(NAMES) >= 4 and set(NAMES) <= set(fast)
    assert [n for n in fast if hand_ptx(n) is not None] == [n for n in fast if n in HAND_PTX]


@pytest.mark.parametrize("name", NAMES)
def test_file_declares_its_launch(name):
    h = HAND_PTX[name]
    text = h.text()
    assert re.search(rf"^\.target\s+{h.arch}\s*$", text, re.M), "the .target is the entry's arch"
    m = re.search(r"\.reqntid\s+(\d+)", text)
    assert m and int(m.group(1)) == h.threads
    if h.cluster_dims != (1, 1, 1):
        c = re.search(r"\.reqnctapercluster\s+(\d+),\s*(\d+),\s*(\d+)", text)
        assert c and tuple(int(x) for x in c.groups()) == h.cluster_dims
    assert text.isascii(), "ptxas rejects non-ASCII PTX"


@pytest.mark.parametrize("name", NAMES)
def test_assembles_and_verifies_clean_with_the_reference_abi(name, tmp_path):
    h = HAND_PTX[name]
    text = h.text()
    asm = assemble(text, h.arch)
    assert asm.ok, asm.render(h.file)
    assert asm.spill_stores == 0 and asm.spill_loads == 0
    spec = registry.get(name)
    abi = compile_reference(spec, h.arch, spec.configs()[0], cache_dir=tmp_path).abi
    rep = verifier.verify(text, arch=h.arch, abi=abi, threads=h.threads, filename=h.file)
    bad = [f"{f.rule} {f.severity} {h.file}:{f.line}: {f.message}" for f in rep.findings
           if f.severity in ("error", "warning")]
    assert not bad, "\n".join(bad)


#: entries the emulator cannot run yet, and why (strict xfails: they flip when support lands)
EMU_XFAIL: dict[str, str] = {}  # every hand-written entry emulates (TMA multicast, tcgen05.cp)


@pytest.mark.slow
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=EMU_XFAIL[n]))
    if n in EMU_XFAIL else n for n in NAMES])
def test_emulates_ok_against_the_float64_reference(name):
    """Emulated at the verify size (every CTA), outputs within the spec's tolerance of the
    float64 reference and no error from the happens-before analysis."""
    from emulator.api import run_kernel

    h = HAND_PTX[name]
    res = run_kernel(h.text(), registry.get(name), h.arch, meta=h.emulation_meta(),
                     threads=h.threads, dynamic_smem=h.dynamic_smem,
                     global_scratch_size=h.global_scratch_size, time_limit_s=60.0,
                     cta_subset=False, filename=h.file)
    assert res.ok, res.summary()
    assert not res.findings, [f"{f.rule} {f.severity}: {f.message}" for f in res.findings]


@pytest.mark.slow
def test_cli_verify_takes_the_entrys_launch_threads(tmp_path):
    """``ailower verify FILE --kernel fast.ptx_X`` checks E3 against the entry's own threads
    (384), not the Triton baseline's (256): exit 0, no finding above a note."""
    import os
    import subprocess
    import sys

    h = HAND_PTX["fast.ptx_softmax_ws_sm90"]
    env = {**os.environ, "AILOWER_DATA_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "ailower", "verify", str(h.path), "--kernel", h.name,
                        "--output-format", "concise"], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "error[" not in r.stdout and "warning[" not in r.stdout, r.stdout
