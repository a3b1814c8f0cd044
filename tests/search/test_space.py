"""Config expansion beyond the autotune space and its legality rules."""

from __future__ import annotations

from kernels import Config, get
from search.space import MAX_DOT_TILE, MAX_DOT_TILE_M, expand_space, is_legal, legal_after_compile


def test_expansion_is_new_legal_and_starts_around_the_baseline():
    spec = get("gemm.fp16")
    base = spec.configs()
    around = base[2]
    out = expand_space(spec, around=around, limit=20)
    keys = [c.key() for c, _ in out]
    assert len(keys) == len(set(keys)) == 20
    assert not set(keys) & {c.key() for c in base}
    assert all(is_legal(spec, c)[0] for c, _ in out)
    # the first proposals are one-step neighbours of `around`
    first, why = out[0]
    diffs = [k for k in first.meta if first.meta[k] != around.meta[k]]
    diffs += [k for k in ("num_warps", "num_stages") if getattr(first, k) != getattr(around, k)]
    assert 1 <= len(diffs) <= 2 and why


def test_illegal_configs_are_pruned_with_a_reason():
    spec = get("gemm.fp16")
    c = spec.configs()[0]
    ok, why = is_legal(spec, c.model_copy(update={"meta": {**c.meta, "BLOCK_N": 512}}))
    assert not ok and str(MAX_DOT_TILE) in why
    ok, why = is_legal(spec, c.model_copy(update={"meta": {**c.meta, "BLOCK_M": 96}}))
    assert not ok and "power of two" in why
    ok, why = is_legal(spec, Config(meta={**c.meta, "BLOCK_M": 256, "BLOCK_N": 256}, num_warps=4,
                                    num_stages=3))
    assert not ok and "accumulator" in why


def test_tall_m_tiles_are_legal_when_the_accumulator_fits():
    # BLOCK_M spreads over warpgroups (64 rows per wgmma): up to 512 when registers allow
    spec = get("bitdelta")
    c = spec.configs()[0]
    tall = c.model_copy(update={"meta": {**c.meta, "BLOCK_M": 512, "BLOCK_N": 64}, "num_warps": 8})
    assert is_legal(spec, tall) == (True, "")
    ok, why = is_legal(spec, c.model_copy(update={"meta": {**c.meta, "BLOCK_M": 1024, "BLOCK_N": 16},
                                                  "num_warps": 8}))
    assert not ok and str(MAX_DOT_TILE_M) in why
    # 512 x 128 fp32 accumulator over 8 warps: 256 registers per thread
    ok, why = is_legal(spec, c.model_copy(update={"meta": {**c.meta, "BLOCK_M": 512}, "num_warps": 8}))
    assert not ok and "accumulator" in why


def test_neighbours_include_the_same_tile_area_in_another_aspect():
    spec = get("bitdelta")
    around = spec.configs()[0].model_copy(update={"meta": {**spec.configs()[0].meta, "BLOCK_M": 256}})
    out = {c.key(): why for c, why in expand_space(spec, around=around, limit=40)}
    tall = around.model_copy(update={"meta": {**around.meta, "BLOCK_M": 512, "BLOCK_N": 64}})
    assert out.get(tall.key()) == "BLOCK_M=512,BLOCK_N=64"


def test_bitdelta_constraint_block_k_multiple_of_32_is_kept():
    # the spec derives K // 32 words per row; BLOCK_K = 16 breaks the packing (BLOCK_K // 32 = 0)
    spec = get("bitdelta")
    keys = [c.meta["BLOCK_K"] for c, _ in expand_space(spec)]
    assert keys and all(k >= 16 for k in keys)


def test_elementwise_expansion_changes_block_size_and_warps_only():
    spec = get("relu.fp16")
    out = expand_space(spec)
    assert out and all(c.num_stages == 1 for c, _ in out)
    assert {c.meta["BLOCK_SIZE"] for c, _ in out} - {c.meta["BLOCK_SIZE"] for c in spec.configs()}


def test_legal_after_compile_checks_smem_and_signature(tmp_path):
    from harness import compile_reference

    spec = get("relu.fp16")
    a = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=tmp_path)
    b = compile_reference(spec, "sm_90a", spec.configs()[1], cache_dir=tmp_path)
    assert legal_after_compile(b.abi, a.abi) == (True, "")
    big = b.abi.model_copy(update={"dynamic_smem": 300_000})
    ok, why = legal_after_compile(big, a.abi)
    assert not ok and "opt-in" in why
    other = b.abi.model_copy(update={"params": b.abi.params[:-1]})
    ok, why = legal_after_compile(other, a.abi)
    assert not ok and "launch contract" in why
