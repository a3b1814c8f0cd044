"""Regenerate ``kernel.ptx`` of this folder: ``bitdelta.cu`` of ``../../bitdelta/sm_90a`` built
with ``-DBATCHED=1`` (entry ``bitdelta_batched_kernel``; grid axis 1 is the request, whose x, packed
delta, alpha and y are offset at entry). ``python3 kernels/expert/bitdelta_batched/sm_90a/gen.py
[--check]``; see that folder's ``gen.py`` for the ABI rewrite and the errors raised.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_GEN = HERE.parents[1] / "bitdelta" / "sm_90a" / "gen.py"
_spec = importlib.util.spec_from_file_location("bitdelta_expert_gen", _GEN)
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

if __name__ == "__main__":
    extra = [a[2:] for a in sys.argv[1:] if a.startswith("-D")]
    sys.exit(gen.main(HERE, "bitdelta_batched_kernel", ["BATCHED=1", *extra]))
