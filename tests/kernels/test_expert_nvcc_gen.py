"""The nvcc-generated expert entries (bitdelta, bitdelta_batched, conv2d.fp16, conv2d.fp8 on
sm_90a) are reproducible: each folder's ``gen.py --check`` rebuilds ``kernel.ptx`` from the
hand-written CUDA source and finds it byte for byte equal to the committed candidate.

Needs the nvcc the PTX was generated with (CUDA 13.0: another release emits different PTX, which
is no defect of the candidate); without it the test is skipped with that reason. Slow (four nvcc
runs of ~2 s each on the 2-core host): ``AILOWER_RUN_SLOW=1``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NVCC = os.environ.get("NVCC", shutil.which("nvcc") or "/usr/local/bin/nvcc")
ENTRIES = ("bitdelta", "bitdelta_batched", "conv2d.fp16", "conv2d.fp8")


def _nvcc_13_0() -> bool:
    try:
        out = subprocess.run([NVCC, "--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return False
    return "release 13.0" in out


@pytest.mark.slow
@pytest.mark.skipif(not _nvcc_13_0(), reason="needs nvcc of CUDA 13.0 (the release the committed "
                                             "PTX was generated with)")
@pytest.mark.parametrize("kernel", ENTRIES)
def test_gen_py_rebuilds_the_committed_ptx(kernel):
    gen = ROOT / "kernels" / "expert" / kernel / "sm_90a" / "gen.py"
    proc = subprocess.run([sys.executable, str(gen), "--check"], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "NVCC": NVCC})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "up to date" in proc.stdout
