"""Regenerate ``kernel.ptx`` of this folder from ``conv2d.cu`` (hand-written CUDA C++ with inline
PTX): ``python3 kernels/expert/conv2d.fp16/sm_90a/gen.py [--check]``. The build and the rewrite to
Triton's entry ABI (``conv2d_kernel``: 3 pointers, NB, H, W, C, CO, the two scratch pointers) are
those of ``kernels/expert/bitdelta/sm_90a/gen.py`` (errors as documented there).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "conv2d.cu"
KINDS = ["p", "p", "p", "i", "i", "i", "i", "i", "p", "p"]
_GEN = HERE.parents[1] / "bitdelta" / "sm_90a" / "gen.py"
_spec = importlib.util.spec_from_file_location("bitdelta_expert_gen", _GEN)
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)


def main(folder: Path, fp8: bool) -> int:
    """Build ``conv2d.cu`` with ``-DFP8=0|1`` into ``folder/kernel.ptx`` (``--check``: compare)."""
    extra = [a[2:] for a in sys.argv[1:] if a.startswith("-D")]
    return gen.main(folder, "conv2d_kernel", [f"FP8={int(fp8)}", *extra], KINDS, SRC)


if __name__ == "__main__":
    sys.exit(main(HERE, fp8=False))
