"""Host tensor descriptors in the GPU request (issues 18 and 22 item 3), without a GPU.

The ABIs are built from the Triton 3.6 PTX fixtures (``tests/verifier/fixtures/fast36``) with the
``tensordesc_meta`` Triton 3.6.0 produced for the same kernels on the H200
(``tensordesc_meta36.json``), and with the 3.9 form of that metadata (3.9 adds ``is_im2col``; the
values were identical for every entry when compiled here with 3.9.0).
"""

from __future__ import annotations

import ctypes
import json
import types
from pathlib import Path

import pytest

from harness import _triton_compat as compat
from harness.errors import ReferenceCompileError, UsageError
from harness.evaluate import kernel_under_test
from harness.gpu import worker as worker_mod
from harness.reference import _build_abi
from harness.tensormap import (TensorMapArgs, check_tensor_map_args, encode_tensor_map, param_slot,
                               tensor_map_args)
from kernels.dtypes import dtype
from kernels.registry import get

HERE = Path(__file__).resolve().parent
FIX = HERE.parent / "verifier" / "fixtures" / "fast36"
META36 = json.loads((HERE / "tensordesc_meta36.json").read_text())["entries"]
ENTRIES = ("fast.gemm_tma_persistent", "fast.gemm_ws", "fast.gemm_fp8", "fast.gemm_mxfp8",
           "fast.gemm_mxfp4")
HOST_TYPE = {"fp16": 6, "fp8e4nv": 0, "u8": 0}
"""Spec dtype -> host CUtensorMapDataType (FLOAT16 = 6; fp8 and packed fp4 bytes go as UINT8 = 0,
as Triton encodes them)."""


def _meta(name: str, arch: str, version: str) -> dict:
    tm = [dict(m) for m in META36[f"{name}@{arch}"]]
    if version == "3.9":
        for m in tm:
            m["is_im2col"] = False
    return {"num_warps": 4, "num_ctas": 1, "shared": 131096, "tensordesc_meta": tm}


def _abi(name: str, arch: str = "sm_90a", version: str = "3.6", md: dict | None = None):
    spec = get(name)
    ptx = (FIX / f"{name}_{arch}.ptx").read_text()
    return spec, _build_abi(spec, arch, ptx, md or _meta(name, arch, version))


def _kut(spec, abi):
    cfg = spec.configs()[0]
    return kernel_under_test(spec, abi, b"\x7fELF", label="reference", role="reference",
                             config=cfg, threads=abi.threads, dynamic_smem=abi.dynamic_smem)


@pytest.mark.parametrize("version", ["3.6", "3.9"])
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("name", ENTRIES)
def test_every_descriptor_gets_encode_arguments_that_match_the_spec(name, arch, version):
    spec, abi = _abi(name, arch, version)
    kut = _kut(spec, abi)
    descs = [p for p in spec.params if p.kind == "tensordesc"]
    meta = META36[f"{name}@{arch}"]
    assert [t.spec_param for t in abi.tensor_maps] == [p.name for p in descs]
    for size in ("verify", "bench"):
        maps = kut.tensor_maps[size]
        assert sorted(maps) == [i for i, (k, _a) in enumerate(kut.params) if k == "tensordesc"]
        assert [a.param for _i, a in sorted(maps.items())] == [p.name for p in descs]
        for (i, a), p, m in zip(sorted(maps.items()), descs, meta):
            shape = spec.shape(p, size)
            item = dtype(p.dtype).itemsize
            assert a.data_type == HOST_TYPE[p.dtype] and a.elem_size == item
            assert a.global_dim == tuple(reversed(shape))                  # innermost first
            assert a.global_strides == (shape[1] * item,)                  # bytes, row-major
            assert a.box_dim == tuple(reversed(m["block_size"]))           # Triton's box
            assert a.swizzle == m["swizzle"] and a.l2_promotion == 2 and a.oob_fill == 0
            assert a.element_strides == (1, 1) and a.interleave == 0
            # the 2 shape (i32) and 2 stride (i64) pieces follow the CUtensorMap
            tail = [kut.scalars[size][j] for j in range(i + 1, i + 5)]
            assert tail == [("i32", shape[0]), ("i32", shape[1]), ("i64", shape[1]), ("i64", 1)]
            assert kut.params[i] == ("tensordesc", p.name)


def test_gemm_ws_request_spelled_out():
    """fast.gemm_ws at the verify size (M, N, K = 320, 256, 192), numbers written out: C's box
    is Triton's [128, 64], not the spec's block [128, 128] (the 128-byte swizzle spans 64 fp16)."""
    spec, abi = _abi("fast.gemm_ws")
    kut = _kut(spec, abi)
    assert [k for k, _ in kut.params] == (["tensordesc"] + ["scalar"] * 4) * 3 + \
        ["scalar"] * 3 + ["scratch"] * 2
    a, b, c = (kut.tensor_maps["verify"][i] for i in (0, 5, 10))
    assert (a.global_dim, a.global_strides, a.box_dim) == ((192, 320), (384,), (64, 128))
    assert (b.global_dim, b.global_strides, b.box_dim) == ((192, 256), (384,), (64, 128))
    assert (c.global_dim, c.global_strides, c.box_dim) == ((256, 320), (512,), (64, 128))
    assert {a.data_type, b.data_type, c.data_type} == {6} and {a.swizzle, c.swizzle} == {3}
    assert (a.nbytes, c.nbytes) == (320 * 192 * 2, 320 * 256 * 2)
    bench = kut.tensor_maps["bench"][0]
    assert bench.global_dim == (8192, 8192) and bench.global_strides == (16384,)
    assert [kut.scalars["verify"][j] for j in (15, 16, 17)] == \
        [("i32", 320), ("i32", 256), ("i32", 192)]


def test_small_tensor_bit21_follows_the_installed_triton(monkeypatch):
    """Triton 3.9 clears bit 21 for tensors under 128 KiB (on drivers <= 13.1); 3.6 never does."""
    spec, abi = _abi("fast.gemm_ws")
    for clears in (True, False):
        monkeypatch.setattr(compat, "tensordesc_launch",
                            lambda c=clears: compat.TensorDescLaunch(c, False, "test"))
        kut = _kut(spec, abi)
        v, bn = kut.tensor_maps["verify"], kut.tensor_maps["bench"]
        # A is 320 x 192 fp16 = 120 KiB (small), C 320 x 256 = 160 KiB, bench tensors 128 MiB
        assert (v[0].clear_bit21, v[10].clear_bit21, bn[0].clear_bit21) == (clears, False, False)


def test_launch_rules_read_from_the_launcher_sources():
    c39 = "if (x) { uint64_t *w = (uint64_t *)&d->m; w[1] &= ~(1llu << 21); }"
    py39 = ("def make_tensordesc_arg(arg, metadata, _):\n    if fp4_padded:\n"
            "        expanded_shape = list(shape)\n    return [m, *shape]\n\ndef other():\n    pass\n")
    py36 = ("def make_tensordesc_arg(arg, metadata):\n    if fp4_padded:\n        shape = list(shape)\n"
            "        shape[-1] *= 2\n    return [m, *shape]\n")
    assert compat.launch_rules_from_sources(c39, py39) == (True, False)
    assert compat.launch_rules_from_sources("cuTensorMapEncodeTiled(...);", py36) == (False, True)
    installed = compat.tensordesc_launch()
    if compat.triton_version().startswith("3.9"):
        assert (installed.clears_small_tensor_bit21, installed.fp4_padded_tail_doubled) == \
            (True, False)


def test_device_to_host_data_type_table_is_tritons():
    from triton.backends.nvidia import driver

    assert driver.TMA_DTYPE_DEVICE_TO_HOST == compat.TMA_DTYPE_DEVICE_TO_HOST


def test_abi_without_tensordesc_meta_or_with_other_parameters_is_refused():
    spec = get("fast.gemm_ws")
    ptx = (FIX / "fast.gemm_ws_sm_90a.ptx").read_text()
    with pytest.raises(ReferenceCompileError, match="0 TMA descriptors"):
        _build_abi(spec, "sm_90a", ptx, {"num_warps": 4})
    bad = ptx.replace(".param .u32 gemm_ws_kernel_param_1", ".param .u64 gemm_ws_kernel_param_1")
    with pytest.raises(ReferenceCompileError, match="passes tensordesc a_desc"):
        _build_abi(spec, "sm_90a", bad, _meta("fast.gemm_ws", "sm_90a", "3.6"))
    md = _meta("fast.gemm_ws", "sm_90a", "3.9")
    md["tensordesc_meta"][1]["is_im2col"] = True
    with pytest.raises(ReferenceCompileError, match="im2col"):
        _build_abi(spec, "sm_90a", ptx, md)


def _args(**kw) -> TensorMapArgs:
    base = dict(param="a_desc", data_type=6, elem_size=2, global_dim=(192, 320),
                global_strides=(384,), box_dim=(64, 128), element_strides=(1, 1), swizzle=3,
                shape_tail=(320, 192), stride_tail=(192, 1), nbytes=122880)
    return TensorMapArgs(**{**base, **kw})


@pytest.mark.parametrize("kw, msg", [
    ({"global_strides": (200,)}, r"globalStrides\[0\] = 200 bytes"),
    ({"global_strides": (2**40,)}, "below 2\\^40"),
    ({"global_dim": (0, 320)}, r"globalDim\[0\] = 0"),
    ({"box_dim": (64, 512)}, r"boxDim\[1\] = 512"),
    ({"box_dim": (128, 128)}, "spans 256 bytes, more than the 128-byte swizzle"),
    ({"box_dim": (4, 128), "swizzle": 0}, "spans 8 bytes; it must be a multiple of 16"),
    ({"box_dim": (64, 128), "swizzle": 2}, "more than the 64-byte swizzle"),
    ({"element_strides": (1, 9)}, r"elementStrides\[1\] = 9"),
    ({"data_type": 7}, "4-byte elements, not 2"),
    ({"data_type": 14}, "packed types"),
    ({"global_dim": (1,) * 6, "global_strides": (16,) * 5, "box_dim": (8,) * 6,
      "element_strides": (1,) * 6}, "rank 6"),
    ({"shape_tail": (2**31, 192)}, "does not fit the entry's i32"),
])
def test_encode_rules_are_checked_before_the_driver(kw, msg):
    with pytest.raises(UsageError, match=msg) as ei:
        check_tensor_map_args(_args(**kw))
    assert "a_desc" in str(ei.value)


def test_a_spec_size_with_an_unaligned_row_is_a_usage_error_naming_the_param():
    spec = get("fast.gemm_ws")
    odd = spec.model_copy(update={"sizes": {**spec.sizes, "verify": {"M": 320, "N": 256, "K": 100}}})
    _, abi = _abi("fast.gemm_ws")
    with pytest.raises(UsageError, match=r"fast.gemm_ws: tensordesc a_desc at size 'verify'.*"
                                         r"globalStrides\[0\] = 200 bytes"):
        _kut(odd, abi)


def test_box_must_tile_the_block_and_dtype_must_match():
    spec, abi = _abi("fast.gemm_ws")
    p = next(x for x in spec.params if x.name == "a_desc")
    lay = abi.tensor_maps[0]
    with pytest.raises(UsageError, match="does not tile the spec's block_shape"):
        tensor_map_args(spec, p, lay.model_copy(update={"box": (96, 64)}), "verify",
                        spec.configs()[0])
    with pytest.raises(UsageError, match="2-byte elements but Triton's descriptor metadata says 1"):
        tensor_map_args(spec, p, lay.model_copy(update={"elem_size": 1}), "verify",
                        spec.configs()[0])
    with pytest.raises(UsageError, match="fp4-padded"):
        tensor_map_args(spec, p, lay.model_copy(update={"fp4_padded": True}), "verify",
                        spec.configs()[0])


def _fake_cu(calls: list, words: list[int], ok: bool = True):
    """A stand-in for ``cuda.bindings.driver`` with its own wrapper types: the encode call checks
    that every list element and enum is wrapped (cuda.bindings raises ``TypeError: Cannot convert
    int to cuuint64_t`` for a plain int)."""
    class U64(int):
        pass

    class U32(int):
        pass

    class Enum(int):
        pass

    def encode(dt, rank, addr, gdim, gstr, box, estr, il, sw, l2, oob):
        assert all(isinstance(x, U64) for x in gdim + gstr)
        assert all(isinstance(x, U32) for x in box + estr)
        assert all(isinstance(x, Enum) for x in (dt, il, sw, l2, oob))
        calls.append((int(dt), rank, addr, [int(x) for x in gdim], [int(x) for x in gstr],
                      [int(x) for x in box], [int(x) for x in estr], int(il), int(sw), int(l2),
                      int(oob)))
        return (0 if ok else 1), types.SimpleNamespace(opaque=[U64(w) for w in words])

    ns = types.SimpleNamespace(
        cuuint64_t=U64, cuuint32_t=U32, CUtensorMapDataType=Enum, CUtensorMapInterleave=Enum,
        CUtensorMapSwizzle=Enum, CUtensorMapL2promotion=Enum, CUtensorMapFloatOOBfill=Enum,
        CUresult=types.SimpleNamespace(CUDA_SUCCESS=0), cuTensorMapEncodeTiled=encode)
    return ns


def test_encode_passes_wrapped_arguments_and_applies_bit21_only_where_due():
    words = [(1 << 21) | 7] * 16
    calls: list = []
    a = _args(clear_bit21=True)
    out = encode_tensor_map(a, 0x7F00_0000_0100, 13000, cu=_fake_cu(calls, words))
    assert calls == [(6, 2, 0x7F00_0000_0100, [192, 320], [384], [64, 128], [1, 1], 0, 3, 2, 0)]
    got = [int.from_bytes(out[8 * i: 8 * i + 8], "little") for i in range(16)]
    assert got[1] == 7 and got[0] == got[2] == (1 << 21) | 7 and len(out) == 128
    newer = encode_tensor_map(a, 0x7F00_0000_0100, 13020, cu=_fake_cu([], words))
    assert int.from_bytes(newer[8:16], "little") == (1 << 21) | 7
    plain = encode_tensor_map(_args(), 0x7F00_0000_0100, 13000, cu=_fake_cu([], words))
    assert int.from_bytes(plain[8:16], "little") == (1 << 21) | 7
    with pytest.raises(UsageError, match="not 16-byte aligned"):
        encode_tensor_map(a, 0x7F00_0000_0108, 13000, cu=_fake_cu([], words))
    with pytest.raises(RuntimeError, match="refused tensordesc a_desc"):
        encode_tensor_map(a, 0x7F00_0000_0100, 13000, cu=_fake_cu([], words, ok=False))


def test_param_slot_is_64_byte_aligned_and_holds_the_bytes():
    data = bytes(range(128))
    for _ in range(8):
        s = param_slot(data)
        assert ctypes.addressof(s) % 64 == 0 and bytes(s) == data and ctypes.sizeof(s) == 128
    with pytest.raises(ValueError, match="128 bytes"):
        param_slot(b"\0" * 64)


def test_worker_packs_descriptor_params_and_encodes_once_per_buffer(monkeypatch):
    """``Worker._params`` without a GPU: the CUtensorMap slot, then i32/i64 pieces; a second
    launch over the same buffers reuses the encoded descriptors."""
    spec, abi = _abi("fast.gemm_ws")
    kut = _kut(spec, abi)
    encoded: list = []

    def fake_encode(args, addr, drv):
        encoded.append((args.param, addr))
        return bytes([len(encoded)]) * 128

    monkeypatch.setattr(worker_mod, "encode_tensor_map", fake_encode)
    stub = types.SimpleNamespace(_tmaps={}, ctx=types.SimpleNamespace(
        info=types.SimpleNamespace(driver_version=13000)))
    stub._tensor_map = lambda a, b: worker_mod.Worker._tensor_map(stub, a, b)
    bufs = {p.name: types.SimpleNamespace(ptr=0x1000 * (i + 1), nbytes=1 << 20)
            for i, p in enumerate(spec.tensors())}
    vals = worker_mod.Worker._params(stub, kut, "verify", bufs, None)
    assert len(vals) == len(abi.params) == 20
    assert bytes(vals[0]) == b"\x01" * 128 and ctypes.addressof(vals[0]) % 64 == 0
    assert [(ctypes.sizeof(v), type(v)(-1).value) for v in vals[1:5]] == [(4, -1)] * 2 + [(8, -1)] * 2
    assert [v.value for v in vals[1:5]] == [320, 192, 192, 1]
    worker_mod.Worker._params(stub, kut, "verify", bufs, None)
    assert encoded == [("a_desc", 0x1000), ("b_desc", 0x2000), ("c_desc", 0x3000)]
    small = {**bufs, "a_desc": types.SimpleNamespace(ptr=0x9000, nbytes=64)}
    with pytest.raises(ValueError, match="smaller than the 122880 B"):
        worker_mod.Worker._params(stub, kut, "verify", small, None)


@pytest.mark.slow
def test_installed_triton_gives_the_same_layouts(ref_cache):
    """Compile fast.gemm_ws with the installed Triton: its ABI's layouts equal the 3.6 ones."""
    from harness.reference import compile_reference

    spec = get("fast.gemm_ws")
    art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=ref_cache)
    assert art.abi.tensor_maps == _abi("fast.gemm_ws")[1].tensor_maps


def test_candidate_race_gate_and_ncu_requests_carry_the_reference_descriptors():
    """A candidate (its own threads and smem) is launched with the reference's descriptors; the
    race gate's and Nsight Compute's ``launch_once`` requests reuse the same kernels, with the
    bench-size maps for ``launch_size="bench"``."""
    from harness.candidate import Candidate
    from harness.evaluate import GPUEvaluator, candidate_request
    from harness.reference import ReferenceArtifacts

    spec, abi = _abi("fast.gemm_ws")
    art = ReferenceArtifacts(
        spec_name=spec.name, spec_id=spec.identity(), arch="sm_90a", config=spec.configs()[0],
        triton_version="3.6.0", ttir="", ttgir="", llir="", ptx="", cubin=b"\x7fELF",
        metadata={}, abi=abi, compile_s=0.0)
    cand = Candidate(ptx=".version 8.7", threads=abi.threads, dynamic_smem=1000,
                     meta=dict(spec.configs()[0].meta))
    req = candidate_request(spec, art, cand, b"\x7fELF", GPUEvaluator(), time_it=False)
    ref, c = req.kernels
    assert c.role == "candidate" and c.dynamic_smem == 1000
    assert c.tensor_maps == ref.tensor_maps and c.params == ref.params and c.scalars == ref.scalars
    assert set(c.tensor_maps) == {"verify", "bench"}
    once = req.model_copy(update={"job": "launch_once", "launch_size": "bench"})
    again = type(req).model_validate_json(once.model_dump_json())   # what the worker reads
    assert again.kernels[1].tensor_maps["bench"][0].global_dim == (8192, 8192)
