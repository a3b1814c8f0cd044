"""The widened autotune spaces (issue 22 item 6): at least the usual Triton grid per kind, the narrow
space kept with its identity, pruning with reasons. Fast: nothing is compiled (the compile of the
widened spaces is ``bench/compile_spaces.py`` and the slow test in test_suite_compile.py)."""

from __future__ import annotations

import pytest

import kernels
from kernels import Config, SpecError
from kernels.suite._spaces import SMEM_MAX_ANY_TARGET, WIDEN, dot_prune, pruned, wide_space

NAMES = kernels.names()
GEMM_LIKE = ("matmul", "gemm.fp16", "gemm.fp8", "gemm_silu.fp16", "gemm_silu.fp8", "conv2d.fp16",
             "conv2d.fp8", "bitdelta", "bitdelta_batched")
ATTENTION = ("flash_attention.causal", "flash_attention.noncausal", "sage_attention",
             "forgetting_attention")
ELEMENTWISE = ("vector_add", "lion", *[f"{k}.{d}" for k in ("sigmoid", "relu", "silu", "swiglu")
                                      for d in ("fp16", "fp32")])


def _values(spec, key):
    return {c.meta[key] for c in spec.configs()}


def test_every_suite_entry_is_widened():
    assert set(WIDEN) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_wide_space_starts_with_the_narrow_one(name):
    narrow, wide = kernels.get(name, "narrow"), kernels.get(name, "wide")
    nk = [c.key() for c in narrow.configs()]
    wk = [c.key() for c in wide.configs()]
    assert wk[:len(nk)] == nk  # configs()[0], the no-GPU baseline, is unchanged
    assert len(wk) > len(nk) and len(set(wk)) == len(wk)
    # the narrow spec is the module's own (its identity keys caches and stored results)
    module, _, attr = kernels.registry.SUITE[name].partition(":")
    import importlib

    assert narrow is getattr(importlib.import_module(module), attr or "SPEC")
    assert wide.identity() != narrow.identity()
    assert kernels.space_of(wide) == "wide" and kernels.space_of(narrow) == "narrow"


@pytest.mark.parametrize("name", GEMM_LIKE)
def test_gemm_like_spaces_hold_the_usual_grid(name):
    spec = kernels.get(name, "wide")
    assert _values(spec, "BLOCK_M") >= {64, 128, 256}
    assert _values(spec, "BLOCK_N") >= {64, 128, 256}
    assert _values(spec, "BLOCK_K") >= {32, 64, 128}
    assert 8 in _values(spec, "GROUP_M")
    assert {c.num_warps for c in spec.configs()} >= {4, 8}
    assert {c.num_stages for c in spec.configs()} >= {2, 3, 4, 5}
    # every (BM, BN, BK) tile with a legal accumulator appears at 2 stages with 8 warps
    keys = {(c.meta["BLOCK_M"], c.meta["BLOCK_N"], c.meta["BLOCK_K"], c.num_warps, c.num_stages)
            for c in spec.configs()}
    assert (128, 128, 32, 4, 5) in keys and (256, 128, 64, 8, 2) in keys


def test_study_sized_grids_for_bitdelta_and_mamba2_chunk_scan():
    # the study's grids had 216 (bitdelta) and 162 (mamba2_chunk_scan) configs (issue 22)
    assert len(kernels.get("bitdelta", "wide").configs()) >= 216
    assert len(kernels.get("mamba2_chunk_scan", "wide").configs()) >= 162


@pytest.mark.parametrize("name", ATTENTION)
def test_attention_spaces(name):
    spec = kernels.get(name, "wide")
    assert _values(spec, "BLOCK_M") >= {64, 128}
    assert _values(spec, "BLOCK_N") >= {32, 64, 128}
    assert {c.num_warps for c in spec.configs()} >= {4, 8}
    assert {c.num_stages for c in spec.configs()} >= {2, 3, 4}
    assert all(c.meta["BLOCK_M"] % c.meta["BLOCK_N"] == 0 for c in spec.configs())


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_memory_bound_spaces(name):
    spec = kernels.get(name, "wide")
    assert _values(spec, "BLOCK_SIZE") >= {512, 1024, 2048, 4096, 8192, 16384}
    assert {c.num_warps for c in spec.configs()} >= {2, 4, 8, 16}


@pytest.mark.parametrize("name", ("softmax", "rmsnorm", "rope"))
def test_row_kernels_tune_warps(name):
    assert {c.num_warps for c in kernels.get(name, "wide").configs()} >= {2, 4, 8, 16}


def test_pruning_rules_and_reasons():
    rule = dot_prune(2)
    big_acc = Config(meta={"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 32}, num_warps=4,
                     num_stages=2)
    assert "512 registers per thread" in rule(big_acc)
    big_smem = Config(meta={"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 128}, num_warps=8,
                      num_stages=3)
    assert rule(big_smem) and str(3 * 384 * 128 * 2) in rule(big_smem)
    fits = Config(meta={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64}, num_warps=8, num_stages=3)
    assert rule(fits) is None  # 147,456 B, what Triton allocates on sm_90a
    assert 3 * 384 * 64 * 2 <= SMEM_MAX_ANY_TARGET
    cut = {p.config: p.reason for p in pruned("gemm.fp16")}
    assert cut and all(k not in cut for k in (c.key() for c in kernels.get("gemm.fp16", "wide")
                                               .configs()))
    assert any("registers" in r for r in cut.values()) and any("shared" in r for r in cut.values())
    assert pruned("vector_add") == ()
    assert wide_space("fast.gemm_ws", kernels.get("fast.gemm_ws").autotune) is None


def test_default_space_follows_the_setting(monkeypatch):
    monkeypatch.setenv("AILOWER_AUTOTUNE_SPACE", "wide")
    assert kernels.get("softmax") is kernels.get("softmax", "wide")
    monkeypatch.setenv("AILOWER_AUTOTUNE_SPACE", "narrow")
    assert kernels.get("softmax") is kernels.get("softmax", "narrow")
    monkeypatch.setenv("AILOWER_AUTOTUNE_SPACE", "huge")
    with pytest.raises(SpecError, match="AILOWER_AUTOTUNE_SPACE.*'huge'.*wide, narrow"):
        kernels.get("softmax")
    with pytest.raises(SpecError, match="'tiny' is not an autotune space"):
        kernels.get("softmax", "tiny")


def test_search_still_proposes_outside_the_wide_space():
    from search.space import expand_space

    spec = kernels.get("gemm.fp16", "wide")
    inside = {c.key() for c in spec.configs()}
    arms = expand_space(spec, limit=12)
    assert len(arms) == 12 and not any(c.key() in inside for c, _ in arms)


def test_kernels_command_shows_both_spaces():
    import json

    import typer
    from typer.testing import CliRunner

    from ailower import cmd_kernels

    app = typer.Typer()
    cmd_kernels.register(app)

    @app.command()
    def _other() -> None:  # a second command keeps typer in sub-command mode
        pass

    r = CliRunner().invoke(app, ["kernels", "--space", "wide", "--json"])
    assert r.exit_code == 0, r.output
    rows = {k["name"]: k for k in json.loads(r.output)}
    assert len(rows["bitdelta"]["configs"]) == len(kernels.get("bitdelta", "wide").configs())
    assert rows["bitdelta"]["grid_kind"] == "bitdelta"
    r = CliRunner().invoke(app, ["kernels", "--space", "narrow"], terminal_width=300)
    assert r.exit_code == 0 and "narrow autotune spaces" in r.output and "wide" in r.output
    r = CliRunner().invoke(app, ["kernels", "--space", "tiny"])
    assert r.exit_code != 0 and "tiny" in r.output


@pytest.mark.parametrize("name", ("vector_add", "relu.fp16", "lion", "gemm.fp16", "bitdelta",
                                  "flash_attention.causal", "mamba2_chunk_scan", "gemv"))
def test_search_keeps_config_arms_beyond_the_wide_space(name):
    from search.space import expand_space

    spec = kernels.get(name, "wide")
    inside = {c.key() for c in spec.configs()}
    arms = expand_space(spec, limit=8)
    assert len(arms) == 8 and not any(c.key() in inside for c, _ in arms)
