"""Every suite kernel, run by Triton's CPU interpreter, matches its float64 reference (slow; needs
torch CPU, which is not a project dependency: ``pip install torch==2.13.0`` in a scratch venv)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_interpreter_matches_float64_reference():
    pytest.importorskip("torch")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "tests.kernels.interp_check"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=3600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "0 failed" in proc.stdout
