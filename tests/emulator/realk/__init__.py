"""The emulator's own set of Triton kernels in the styles of public repositories (attention,
GEMM, reductions with atomics, scans, rotary embedding, LayerNorm), with their Triton 3.9 PTX for
sm_90a and sm_100a checked in under ``ptx/`` (``python -m tests.emulator.realk.build`` rewrites
them). Used by ``tests/emulator/test_emulator_realk.py`` and ``bench/emulate_speed.py --realk``.
"""

from __future__ import annotations

import json
from pathlib import Path

from kernels.spec import KernelSpec

PTX_DIR = Path(__file__).parent / "ptx"
ARCHS = ("sm_90a", "sm_100a")


def specs() -> dict[str, KernelSpec]:
    """name -> spec of every kernel of the set."""
    from tests.emulator.realk import k_atomic, k_dense, k_more, k_small
    out = {}
    for mod in (k_atomic, k_dense, k_small, k_more):
        for v in vars(mod).values():
            if isinstance(v, KernelSpec):
                out[v.name] = v
    return out


def fixture(name: str, arch: str) -> tuple[str, dict] | None:
    """(PTX text, launch metadata: config, dynamic_smem, global_scratch_size, triton_version) of
    ``name`` on ``arch``, or None when it was not compiled."""
    p = PTX_DIR / f"{name}_{arch}.ptx"
    if not p.exists():
        return None
    return p.read_text(), json.loads(p.with_suffix(".json").read_text())
