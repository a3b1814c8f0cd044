"""Fixtures of the verifier tests (helpers live in ``verifier_testlib``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# the helpers are imported by basename; keep that working however pytest roots this folder
sys.path.insert(0, str(Path(__file__).parent))

from verifier_testlib import TritonPTX


@pytest.fixture(scope="session")
def triton_ptx() -> TritonPTX:
    """Suite kernels compiled by Triton, cached for the whole session."""
    pytest.importorskip("triton")
    return TritonPTX()
