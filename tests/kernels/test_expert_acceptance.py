"""Issue 19's acceptance of each expert entry without a GPU: ptxas for its arch, 0 verifier errors,
emulated correctness against the float64 reference at the verify size and at a second, larger
size, no happens-before finding. The gemm entries take 10-40 s per size in the emulator, bitdelta and conv2d 5-15 s,
flash_attention.noncausal 5-25 s: slow."""

from __future__ import annotations

import pytest

import kernels
from emulator import run_kernel
from harness import assemble
from kernels.expert import find

# entry -> the second, larger size (the PTX's constexprs bound it: softmax's BLOCK_N = 4096)
LARGER = {"softmax": {"M": 300, "N": 4096},
          "gemm.fp8": {"M": 600, "N": 528, "K": 400},
          "gemm_silu.fp8": {"M": 600, "N": 528, "K": 400},
          # two token tiles, four W-row tiles (the last partial), K of 5.5 stages
          "bitdelta": {"M": 200, "N": 400, "K": 352},
          "bitdelta_batched": {"B": 2, "MB": 150, "N": 304, "K": 416},
          # partial row / column / channel-chunk / output-channel tiles, 8 tiles on 4 CTAs
          "conv2d.fp16": {"NB": 1, "H": 17, "W": 12, "C": 144, "CO": 160},
          "conv2d.fp8": {"NB": 1, "H": 17, "W": 12, "C": 144, "CO": 160},
          # 4 heads, 5 query and 5 key tiles of 128 (the last of each partial: 600 = 4 x 128 + 88),
          # so the 2-stage K/V ring (and on sm_100a the two S buffers in tensor memory) wraps
          # twice and a head's last key tile reads the next head's rows (masked) or past the
          # tensor (zero-filled); the same size for both archs
          "flash_attention.noncausal": {"B": 2, "H": 2, "S": 600, "D": 128}}


def _accept(kernel: str, arch: str = "sm_90a") -> None:
    import verifier
    from harness import compile_reference

    entry = find(kernel, arch)
    assert entry is not None, f"no expert entry for {kernel} on {arch}"
    spec, lc = kernels.get(kernel), entry.launch
    asm = assemble(entry.ptx, arch)
    assert asm.ok, asm.summary(entry.ptx)
    abi = compile_reference(spec, arch, spec.configs()[0]).abi
    rep = verifier.verify(entry.ptx, arch=arch, abi=abi, threads=lc.threads, filename="kernel.ptx")
    errors = [f for f in rep.findings if f.severity == "error"]
    assert not errors, rep.render("full")
    for dims in (None, LARGER[kernel]):
        res = run_kernel(entry.ptx, spec, arch, dims=dims, meta={**spec.configs()[0].meta, **lc.meta},
                         threads=lc.threads, dynamic_smem=lc.dynamic_smem,
                         global_scratch_size=lc.global_scratch_size, time_limit_s=300)
        assert res.status == "ok", res.summary()
        assert not res.findings, [f.message for f in res.findings]


def test_softmax_sm90a_is_accepted():
    _accept("softmax")


@pytest.mark.slow
def test_gemm_fp8_sm90a_is_accepted():
    _accept("gemm.fp8")


@pytest.mark.slow
def test_gemm_silu_fp8_sm90a_is_accepted():
    _accept("gemm_silu.fp8")


@pytest.mark.slow
def test_bitdelta_sm90a_is_accepted():
    _accept("bitdelta")


@pytest.mark.slow
def test_bitdelta_batched_sm90a_is_accepted():
    _accept("bitdelta_batched")


@pytest.mark.slow
def test_conv2d_fp16_sm90a_is_accepted():
    _accept("conv2d.fp16")


@pytest.mark.slow
def test_conv2d_fp8_sm90a_is_accepted():
    _accept("conv2d.fp8")


@pytest.mark.slow
def test_flash_attention_noncausal_sm90a_is_accepted():
    _accept("flash_attention.noncausal")


@pytest.mark.slow
def test_flash_attention_noncausal_sm100a_is_accepted():
    _accept("flash_attention.noncausal", "sm_100a")
