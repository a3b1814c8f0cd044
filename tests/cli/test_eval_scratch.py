"""``ailower eval --global-scratch``: a candidate that builds tensor maps on the device in Triton's
global scratch (``tensormap.replace``, as the expert bitdelta entries do) is launched with the
scratch it declares; without the option the reference's contract (often none) stays."""

from __future__ import annotations

from types import SimpleNamespace

from ailower._fileprovider import FileProvider

PTX = ".version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry k()\n.reqntid 256\n{\n\tret;\n}\n"


def _ctx(size: int = 0, align: int = 1):
    abi = SimpleNamespace(threads=128, dynamic_smem=0, num_ctas=1, global_scratch_size=size,
                          global_scratch_align=align)
    return SimpleNamespace(abi=abi, config=SimpleNamespace(meta={"BLOCK": 64}))


def test_global_scratch_overrides_the_reference_contract():
    prop = FileProvider(PTX, "file:k.ptx", global_scratch=(128, 128)).propose(_ctx(), None, None)
    c = prop.candidate
    assert (c.global_scratch_size, c.global_scratch_align) == (128, 128)
    assert c.threads == 256 and c.meta == {"BLOCK": 64}


def test_without_it_the_reference_scratch_is_kept():
    c = FileProvider(PTX, "file:k.ptx").propose(_ctx(384, 128), None, None).candidate
    assert (c.global_scratch_size, c.global_scratch_align) == (384, 128)
