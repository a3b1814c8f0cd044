"""The prompt's knowledge base: sourced facts per target, the catalogue selection per kernel
class (from real TTGIR and the roofline), the token budget, and ``ailower prompt``."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

import kernels
from agent.knowledge import (
    CATALOGUE,
    classify,
    estimate_tokens,
    knowledge_section,
    roofline_bound,
    select,
)
from agent.knowledge.facts import FACTS, PEAKS, facts_for
from harness.reference import compile_reference


@pytest.fixture(scope="module")
def ttgir(ref_cache):
    memo: dict[tuple[str, str], str] = {}

    def get(name: str, arch: str) -> str:
        if (name, arch) not in memo:
            spec = kernels.get(name)
            memo[(name, arch)] = compile_reference(spec, arch, spec.configs()[0],
                                                   cache_dir=ref_cache).ttgir
        return memo[(name, arch)]

    return get


@pytest.mark.parametrize("name, arch, klass, bound, entries", [
    ("softmax", "sm_90a", "reduction", "memory",
     ["vector-widening", "cache-hints", "row-per-thread", "fast-exp"]),
    ("matmul", "sm_90a", "gemm", "compute",
     ["wgmma-register-a", "tma-warp-specialized", "persistent-tiles", "epilogue-fusion",
      "window-reuse"]),
    ("matmul", "sm_100a", "gemm", "compute",
     ["tma-warp-specialized", "tcgen05-pipeline", "persistent-tiles", "epilogue-fusion",
      "window-reuse"]),
    ("flash_attention.noncausal", "sm_90a", "attention", "compute",
     ["fast-exp", "online-softmax", "wgmma-register-a", "tma-warp-specialized",
      "persistent-tiles", "epilogue-fusion"]),
])
def test_selection_is_pinned_per_kernel_class(ttgir, name, arch, klass, bound, entries):
    spec = kernels.get(name)
    text = ttgir(name, arch)
    assert classify(text)[0] == klass
    assert roofline_bound(spec, arch)[0] == bound
    s = select(spec, arch, text, 20000)  # no budget pressure: every relevant entry
    assert [e.id for e in s.entries] == entries and not s.dropped
    assert [f.topic for f in s.facts] == [f.topic for f in facts_for(arch)]


def test_budget_is_respected_and_drops_whole_entries(ttgir):
    spec = kernels.get("flash_attention.noncausal")
    text = ttgir("flash_attention.noncausal", "sm_90a")
    for budget in (300, 1200, 2500, 4000):
        sec = knowledge_section(spec, "sm_90a", text, budget)
        assert estimate_tokens(sec) <= budget, budget
    small = select(spec, "sm_90a", text, 1200)
    assert small.dropped and len(small.entries) < 6
    full = knowledge_section(spec, "sm_90a", text, 20000)
    for e in small.entries:
        assert f"(`{e.id}`)" in full
    assert knowledge_section(spec, "sm_90a", text, 0) == ""


def test_every_fact_and_entry_has_a_source():
    for arch in FACTS:
        for f in facts_for(arch):
            assert f.source and f.text and f.topic, f
        assert set(PEAKS[arch]) >= {"fp16", "tb_s"}
    ids = [e.id for e in CATALOGUE]
    assert len(ids) == len(set(ids))
    for e in CATALOGUE:
        assert e.source and e.ptx and set(e.archs) <= set(FACTS)
    with pytest.raises(ValueError, match="no hardware facts for 'sm_80'"):
        facts_for("sm_80")


@pytest.mark.parametrize("arch, must", [
    ("sm_90a", ["wgmma.mma_async", "228 KB per SM", "H100 SXM5: 132 SMs"]),
    ("sm_100a", ["128 lanes x 512 columns", "tcgen05.mma.cta_group::1", "DGX B200"]),
])
def test_ailower_prompt_prints_facts_with_sources_and_is_deterministic(arch, must, data_dir):
    from ailower.cli import app

    runner = CliRunner()
    a = runner.invoke(app, ["prompt", "softmax", "--arch", arch])
    assert a.exit_code == 0, a.output
    b = runner.invoke(app, ["prompt", "softmax", "--arch", arch])
    assert a.output == b.output
    out = a.output
    sys_part, user = out.split("\n----- user -----\n")
    assert f"lower Triton kernels by hand to PTX for {arch}" in sys_part
    assert f"## Target facts and transformations for {arch}" in user
    assert "Kernel class: reduction" in user and "closer roofline bound: memory" in user
    facts = [ln for ln in user.splitlines() if ln.startswith("- ") and "[source: " in ln]
    assert len(facts) == len(facts_for(arch))
    assert all(re.search(r"\[source: [^\]]+\]$", ln) for ln in facts)
    for m in must:
        assert m in user, m
    assert "(`row-per-thread`)" in user and "(`vector-widening`)" in user
    assert "(`wgmma-register-a`)" not in user  # a GEMM idea is not offered for a reduction
    k = runner.invoke(app, ["prompt", "softmax", "--arch", arch, "--part", "knowledge"])
    assert k.exit_code == 0 and k.output.strip() in user
    v = runner.invoke(app, ["prompt", "softmax", "--arch", arch, "--variants", "4",
                            "--part", "system"])
    assert "up to 4 `variants`" in v.output
    bad = runner.invoke(app, ["prompt", "softmax", "--arch", "sm_70"])
    assert bad.exit_code == 2 and "choose one of" in bad.output
