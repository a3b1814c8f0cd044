"""Is Triton's warp-specialized attention (``fast.attention_ws``) correct outside its spec's
autotune config? Run with Triton's own runtime (no ailower harness): each config twice on the
same inputs at the verify and bench sizes, compared with torch SDPA (needs a CUDA GPU).

    python3 bench/attention_ws_config_probe.py [--configs 64:4:2,128:4:3] [--ws 1] [--sizes 2x256]

Prints one row per (size, config, run): NaN count, elements outside the fp16 tolerance
(atol 0.01 + rtol 0.002, the spec's), max |err| vs SDPA, and whether run 2 equals run 1 bitwise.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    import torch
    import triton

    from kernels.fast.attention_tma import attention_tma_kernel

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="64:4:2,128:4:3",
                    help="BLOCK_N:num_warps:num_stages, comma-separated (BLOCK_M = 128)")
    ap.add_argument("--ws", type=int, default=1, help="warp_specialize (1) or not (0)")
    ap.add_argument("--sizes", default="2x256,32x8192", help="Z x S pairs, comma-separated")
    args = ap.parse_args()
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                 device="cuda"))
    print(f"{'Z':>3} {'S':>5} {'config':14} run {'nan':>9} {'bad':>9} {'max|err|':>9} same")
    for z, s in (tuple(int(v) for v in zs.split("x")) for zs in args.sizes.split(",")):
        d = 64
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(z * s, d, device="cuda", dtype=torch.float16, generator=g)
                   for _ in range(3))
        ref = torch.nn.functional.scaled_dot_product_attention(
            *(t.view(1, z, s, d) for t in (q, k, v))).view(z * s, d).float()
        for cfg in args.configs.split(","):
            bn, w, st = (int(x) for x in cfg.split(":"))
            prev = None
            for run in (1, 2):
                o = torch.full_like(q, float("nan"))
                attention_tma_kernel[(s // 128, z)](q, k, v, o, 1 / math.sqrt(d), z, s, D=d,
                                                    BLOCK_M=128, BLOCK_N=bn, WS=bool(args.ws),
                                                    num_warps=w, num_stages=st)
                torch.cuda.synchronize()
                err = (o.float() - ref).abs()
                nan = int(torch.isnan(o).sum())
                bad = int((~(err <= 0.01 + 0.002 * ref.abs())).sum())
                same = "-" if prev is None else str(bool(torch.equal(prev, o)))
                print(f"{z:3d} {s:5d} {'N=%d w%d s%d' % (bn, w, st):14} {run:3d} {nan:9d} "
                      f"{bad:9d} {float(err.nan_to_num(0).max()):9.5f} {same}", flush=True)
                prev = o.clone()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
