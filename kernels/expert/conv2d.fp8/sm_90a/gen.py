"""Regenerate ``kernel.ptx`` of this folder: ``../../conv2d.fp16/sm_90a/conv2d.cu`` built with
``-DFP8=1`` (e4m3 x and w, wgmma ``m64n128k32.f32.e4m3.e4m3``):
``python3 kernels/expert/conv2d.fp8/sm_90a/gen.py [--check]``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_GEN = HERE.parents[1] / "conv2d.fp16" / "sm_90a" / "gen.py"
_spec = importlib.util.spec_from_file_location("conv2d_expert_gen", _GEN)
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

if __name__ == "__main__":
    sys.exit(gen.main(HERE, fp8=True))
