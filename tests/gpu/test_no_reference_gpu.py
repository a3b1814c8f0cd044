"""Without a float64 reference, the GPU harness compares every candidate with Triton's own kernel
on the same inputs (``pytest -m gpu``; skipped without a driver): a search arm whose output
depends on its meta-parameters is incorrect, Triton's own PTX is correct."""

from __future__ import annotations

import pytest

from harness import GPUEvaluator, assemble, autotune, compile_space, device_arch, evaluate_candidate
from harness.candidate import Candidate
from harness.reference import compile_reference
from kernels import Config, load_spec
from tests.agent.test_no_reference_emulated import KERNEL, SPEC

pytestmark = pytest.mark.gpu


def test_a_search_arm_must_agree_with_tritons_output_on_the_gpu(tmp_path):
    (tmp_path / "k.py").write_text(KERNEL)
    (tmp_path / "s.yaml").write_text(SPEC)
    spec = load_spec(tmp_path / "s.yaml")
    arch = device_arch()
    refs, bad = compile_space(spec, arch, cache_dir=tmp_path / "c")
    assert not bad and spec.reference is None
    with GPUEvaluator(hang_timeout_s=3.0) as ev:
        art = autotune(spec, refs, ev).artifacts
        arm = compile_reference(spec, arch, Config(meta={"BLOCK_SIZE": 128}, num_warps=4),
                                cache_dir=tmp_path / "c")
        results = {}
        for label, a, meta in (("own", art, art.config.meta), ("arm", arm, {"BLOCK_SIZE": 128})):
            asm = assemble(a.ptx, arch)
            assert asm.ok, asm.summary(a.ptx)
            cand = Candidate(ptx=a.ptx, threads=a.abi.threads, meta=dict(meta),
                             dynamic_smem=a.abi.dynamic_smem)
            results[label] = evaluate_candidate(spec, art, cand, asm.cubin, ev, time_it=False)
    own, armr = results["own"].candidate, results["arm"].candidate
    assert own is not None and own.status == "ok", own
    assert armr is not None and armr.status == "incorrect", armr
    assert "vs reference" in armr.message
