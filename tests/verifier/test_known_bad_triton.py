"""Triton-generated PTX that is wrong on the hardware, kept as a target the static and emulated
checks do not reach yet (strict xfail: the day one of them rejects it, the xfail fails and this
file must be updated).

``fixtures/known_bad/fast.attention_ws_s3_sm_90a.ptx``: Triton 3.6.0's warp-specialized
attention (``fast.attention_ws`` with ``num_stages=3``). On the H200 (2026-12-02) under Triton's
own runtime it returns NaN for every output at Z=2, S=256 and differs between two runs; under
compute-sanitizer racecheck it is correct (a timing-dependent bug); the harness rejected the
``BLOCK_N=128`` twin at the bench size (nondeterministic outputs). The verifier reports no error
on it and the emulator's happens-before run on one concrete execution finds nothing, with
either ``elect.sync`` choice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kernels
from emulator import run_kernel
from kernels.spec import Config
from verifier import verify

PTX = Path(__file__).parent / "fixtures" / "known_bad" / "fast.attention_ws_s3_sm_90a.ptx"
CFG = Config(meta={"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=4, num_stages=3)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="timing-dependent bug of Triton 3.6's warp-specialized "
                                       "attention at num_stages=3: not found statically or by "
                                       "one emulated execution")
def test_triton36_warp_specialized_attention_at_three_stages_is_rejected():
    text = PTX.read_text()
    rep = verify(text, arch="sm_90a", filename=PTX.name)
    errors = [f for f in rep.findings if f.severity == "error"]
    spec = kernels.get("fast.attention_ws")
    runs = [run_kernel(text, spec, "sm_90a", config=CFG, threads=384, dynamic_smem=82456,
                       global_scratch_size=640, seed=seed, elect=elect, filename=PTX.name)
            for seed in (0, 1) for elect in ("lowest", "highest")]
    broken = [r.message for r in runs if r.status in ("unsupported", "error", "memory")]
    if broken:  # not the expected miss: a real failure (RuntimeError escapes the xfail)
        raise RuntimeError(f"the fixture does not emulate: {broken}")
    assert errors or any(not r.ok for r in runs)
