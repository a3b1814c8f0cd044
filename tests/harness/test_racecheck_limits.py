"""harness.racecheck_limits: kernels whose racecheck report is not trusted (partial barriers)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from harness.racecheck_limits import racecheck_misjudges

ROOT = Path(__file__).resolve().parents[2]
WS = ROOT / "tests" / "verifier" / "fixtures" / "fast36" / "fast.attention_ws_sm_90a.ptx"


def _probe():
    spec = importlib.util.spec_from_file_location("racecheck_probe",
                                                  ROOT / "bench" / "racecheck_probe" / "probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernel(body: str) -> str:
    return (".version 8.0\n.target sm_90a\n.address_size 64\n"
            ".visible .entry k()\n{\n\t.reg .b32 %r<4>;\n" + body + "\n\tret;\n}\n")


def test_triton_warp_specialized_kernel_is_flagged():
    why = racecheck_misjudges(WS.read_text(), 384)
    assert "below the CTA's 384 threads" in why and "bar.sync \t0, 128;" in why


def test_probe_kernels_split_as_on_the_gpu():
    """The probes racecheck misjudged on the H200 are flagged, the ones it judged right are not."""
    p = _probe()
    for name, (body, _want) in p.KERNELS.items():
        why = racecheck_misjudges(p.HEAD + p._entry(name, body), 384)
        assert bool(why) == ("bar0" in name), name


@pytest.mark.parametrize("body, threads, flagged", [
    ("\tbar.sync 0;", 256, False),                      # __syncthreads
    ("\tbar.sync 1, 256;", 256, False),                  # every thread
    ("\tbarrier.sync.aligned 2, 128;", 256, True),
    ("\tbar.arrive 3, 64;", 256, True),
    ("\tbar.sync 1, %r1;", 256, True),                   # count unknown statically
    ("\tbar.red.popc.u32 %r1, 0, 128, %p1;", 256, True),
    ("\tbar.red.popc.u32 %r1, 0, %p1;", 256, False),
    ("\tbar.warp.sync -1;\n\tbarrier.cluster.arrive.aligned;\n\tmbarrier.init.shared.b64 [%r1], 1;",
     256, False),
])
def test_barrier_forms(body, threads, flagged):
    assert bool(racecheck_misjudges(_kernel(body), threads)) == flagged
