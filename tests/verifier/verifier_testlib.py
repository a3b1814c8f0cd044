"""Test helpers for the verifier: real Triton PTX (compiled once per kernel and target, no GPU
needed), an ABI built from it the way the harness does (``harness/reference.py``: ``_build_abi``),
and the fixture-file expectation reader.

Imported by basename (pytest puts this folder on ``sys.path``), hence the unique name."""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path

from kernels.abi import ABIParam, KernelABI
from verifier import parse_ptx

FIXTURES = Path(__file__).parent / "fixtures"

#: GPUTarget capability -> the arch string Triton writes in ``.target``.
ARCHS = {80: "sm_80", 89: "sm_89", 90: "sm_90a", 100: "sm_100a"}
KERNELS = ("vector_add", "softmax", "matmul")


class TritonPTX:
    """Compile suite kernels with Triton for a target without a GPU; cache per (kernel, cc, cfg)."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, int, int], tuple[str, int]] = {}

    def get(self, kernel: str, cc: int, cfg_index: int = 0) -> tuple[str, int]:
        """``(ptx, num_warps)`` for ``kernels/suite/<kernel>.py`` config ``cfg_index``."""
        key = (kernel, cc, cfg_index)
        if key not in self._cache:
            import triton
            from triton.backends.compiler import GPUTarget
            from triton.compiler import ASTSource

            spec = importlib.import_module(f"kernels.suite.{kernel}").SPEC
            cfg = spec.configs()[cfg_index]
            src = ASTSource(fn=spec.source.load(), signature=spec.signature(),
                            constexprs=spec.constexprs(cfg), attrs=spec.attrs())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compiled = triton.compile(src, target=GPUTarget("cuda", cc, 32),
                                          options={"num_warps": cfg.num_warps,
                                                   "num_stages": cfg.num_stages})
            self._cache[key] = (compiled.asm["ptx"], cfg.num_warps)
        return self._cache[key]


def abi_from_ptx(ptx: str, arch: str, threads: int) -> KernelABI:
    """The ABI of the (single) entry, mirroring the harness: the last two params are scratch."""
    fn = parse_ptx(ptx).entries[0]
    params = []
    n = len(fn.params)
    for i, p in enumerate(fn.params):
        if i == n - 2:
            src = "global_scratch"
        elif i == n - 1:
            src = "profile_scratch"
        else:
            src = "pointer" if p.is_ptr else "scalar"
        align = p.align if p.align is not None else p.ptr_align
        params.append(ABIParam(name=p.name, ptx_type=p.type, size=p.size, align=align,
                               is_pointer=p.is_ptr, source=src))
    return KernelABI(entry=fn.name, params=tuple(params), threads=threads, arch=arch)


_EXPECT = re.compile(r"//\s*expect-(error|warning|note):\s*([A-Z]+\d+(?:\s*,\s*[A-Z]+\d+)*)")
_VERIFY = re.compile(r"//\s*verify:(.*)$", re.MULTILINE)


def read_fixture(path: Path) -> tuple[str, dict, set[tuple[int, str, str]]]:
    """``(text, verify_kwargs, expected)`` of a rule fixture.

    The header ``// verify: arch=sm_90a threads=256`` gives ``verify`` arguments; each
    ``// expect-error: D1`` (or ``-warning``/``-note``, several ids comma-separated) expects a
    finding of that rule and severity on its line; ``// expect-no-diagnostics`` expects none.
    """
    text = path.read_text()
    kwargs: dict = {"filename": path.name}
    m = _VERIFY.search(text)
    if m:
        for item in m.group(1).split():
            key, _, value = item.partition("=")
            kwargs[key] = int(value) if key == "threads" else value
    expected = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        for sev, ids in _EXPECT.findall(line):
            for rid in ids.split(","):
                expected.add((lineno, sev, rid.strip()))
    if not expected:
        assert "expect-no-diagnostics" in text, f"{path.name}: no expectations"
    return text, kwargs, expected
