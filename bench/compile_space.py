"""Serial vs parallel reference compile of an autotune space (no GPU needed).

Builds a matmul space of ``--configs`` configs (BLOCK_M x BLOCK_N x BLOCK_K x num_warps x
num_stages, cross product cut to the first N), compiles it with ``workers=1`` and with
``workers=W`` into fresh caches with ``TRITON_ALWAYS_COMPILE=1`` (Triton's own cache would
otherwise hide the compile), and prints wall seconds and the load average, since on a shared host
parallel workers only help when cores are idle.

    python3 bench/compile_space.py [--configs 32] [--workers 2] [--arch sm_90a]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=32)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--arch", default="sm_90a")
    a = ap.parse_args()
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"

    import kernels
    from harness.reference import compile_space
    from kernels import Config, KernelSpec

    data = json.loads(kernels.get("matmul").model_dump_json())
    data["autotune"] = {"meta": {"BLOCK_M": [64, 128], "BLOCK_N": [64, 128, 256],
                                 "BLOCK_K": [32, 64], "GROUP_M": [8]},
                        "num_warps": [4, 8], "num_stages": [2, 3, 4]}
    spec = KernelSpec.model_validate(data)
    cfgs: list[Config] = spec.configs()[: a.configs]
    print(f"{len(cfgs)} configs of matmul for {a.arch}; load average {os.getloadavg()}")
    for w in (1, a.workers):
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            ok, bad = compile_space(spec, a.arch, cache_dir=Path(d), configs=cfgs, workers=w)
            print(f"workers={w}: {len(ok)} compiled, {len(bad)} failed, "
                  f"{time.perf_counter() - t:.1f} s wall")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
