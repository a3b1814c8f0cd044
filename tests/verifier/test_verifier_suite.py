"""No false alarms on real compiler output: every suite kernel (``kernels.all_specs()``, whatever
exists when the test runs) compiled by the installed Triton for sm_80, sm_89, sm_90a and sm_100a,
and the checked-in Triton 3.6 PTX (``fixtures/triton36/``, the device's Triton), verify without
errors. Warnings are pinned per arch and Triton version to the divergences from the PTX ISA that
remain (docs/verifier-fast.md, "Warnings on correct code"): none at all on sm_80 / sm_89 /
sm_90a with the installed Triton, only TF5 on its sm_100a code; W5 (Triton 3.6 feeds cp.async
data to wgmma with no proxy fence) and TF5 / TM8 on the Triton 3.6 fixtures. A warning of any
other rule coming back fails."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from verifier_testlib import FIXTURES, abi_from_ptx

import kernels
from verifier import parse_ptx, verify

ARCHS = {80: "sm_80", 89: "sm_89", 90: "sm_90a", 100: "sm_100a"}
#: the warnings each (Triton, arch) may still carry: real divergences from the PTX ISA
#: (TF5: no tcgen05.fence::after_thread_sync after an mbarrier wait, PTX ISA 9.1 §9.7.16.6.3,
#: §9.7.16.6.4.2; W5 / TM8: cp.async (generic proxy, §9.7.9.25.3) data read by wgmma /
#: tcgen05.mma (async proxy, §9.7.15, §9.7.16.6.5) with no fence.proxy.async)
ALLOWED = {
    ("installed", "sm_80"): set(), ("installed", "sm_89"): set(),
    ("installed", "sm_90a"): set(), ("installed", "sm_100a"): {"TF5"},
    ("3.6", "sm_80"): set(), ("3.6", "sm_90a"): {"W5"}, ("3.6", "sm_100a"): {"TF5", "TM8"},
}
SPECS = kernels.names()


def _check(report, triton: str, arch: str):
    assert report.ok, report.render()
    bad = [f for f in report.warnings if f.rule not in ALLOWED[(triton, arch)]]
    assert not bad, report.render()


@pytest.fixture(scope="module")
def compiled():
    pytest.importorskip("triton")
    return {}


def _compile(name: str, cc: int, cache: dict):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError

    key = (name, cc)
    if key not in cache:
        spec = kernels.get(name)
        cfg = spec.configs()[0]
        src = ASTSource(fn=spec.source.load(), signature=spec.signature(),
                        constexprs=spec.constexprs(cfg), attrs=spec.attrs())
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                k = triton.compile(src, target=GPUTarget("cuda", cc, 32),
                                   options={"num_warps": cfg.num_warps,
                                            "num_stages": cfg.num_stages})
            cache[key] = (k.asm["ptx"], cfg.num_warps)
        except CompilationError as err:   # e.g. fp8 kernels on sm_80
            cache[key] = ("skip", str(err).strip().splitlines()[-1][:200])
    return cache[key]


@pytest.mark.parametrize("cc", sorted(ARCHS))
@pytest.mark.parametrize("name", SPECS)
def test_suite_ptx_has_no_false_alarm(compiled, name, cc):
    ptx, warps = _compile(name, cc, compiled)
    if ptx == "skip":
        pytest.skip(f"Triton cannot compile {name} for {ARCHS[cc]}: {warps}")
    arch = ARCHS[cc]
    report = verify(ptx, arch=arch, abi=abi_from_ptx(ptx, arch, 32 * warps),
                    filename=f"{name}.ptx")
    _check(report, "installed", arch)


TRITON36 = sorted((FIXTURES / "triton36").glob("*.ptx"))


def test_triton36_fixtures_cover_the_three_archs():
    archs = {p.stem.rsplit("_sm_", 1)[1] for p in TRITON36}
    assert archs == {"80", "90a", "100a"}
    assert {"vector_add", "softmax", "matmul"} <= {p.stem.rsplit("_sm_", 1)[0] for p in TRITON36}


@pytest.mark.parametrize("path", TRITON36, ids=lambda p: p.stem)
def test_triton36_ptx_has_no_false_alarm(path: Path):
    text = path.read_text()
    arch = parse_ptx(text).arch
    assert "Triton" not in arch
    _check(verify(text, arch=arch, filename=path.name), "3.6", arch)
