"""Noise of the speedup: the same PTX evaluated 20 times against itself (needs a GPU).

For each kernel the baseline config's own Triton PTX is the candidate, so the true speedup is 1.
Acceptance (issue 9): at least 19 of 20 speedups within [0.995, 1.005]. Prints one table;
``--json FILE`` writes every speedup and its 95% CI.

Usage: ``python bench/noise.py [--kernels vector_add softmax matmul] [-n 20]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import assemble, compile_reference, device_arch, evaluate_candidate, gpu_available  # noqa: E402
from harness.candidate import Candidate  # noqa: E402
from harness.evaluate import GPUEvaluator  # noqa: E402
from kernels import get  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", nargs="*", default=["vector_add", "softmax", "matmul"])
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--lo", type=float, default=0.995)
    ap.add_argument("--hi", type=float, default=1.005)
    ap.add_argument("--cache", default=str(Path.home() / ".ailower" / "cache"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ok, why = gpu_available()
    if not ok:
        print(f"no GPU: {why}", file=sys.stderr)
        return 2
    arch = device_arch()
    cache = Path(args.cache)
    rows, runs = [], []
    with GPUEvaluator(input_cache=cache) as ev:
        for name in args.kernels:
            spec = get(name)
            art = compile_reference(spec, arch, spec.configs()[0], cache_dir=cache)
            asm = assemble(art.ptx, arch)
            cand = Candidate(ptx=art.ptx, threads=art.abi.threads, meta=art.config.meta,
                             dynamic_smem=art.abi.dynamic_smem, cluster_dims=(art.abi.num_ctas, 1, 1))
            sp = []
            for i in range(args.n):
                res = evaluate_candidate(spec, art, cand, asm.cubin, ev)
                c = res.candidate
                if res.speedup is None or c is None or c.status != "ok":
                    print(f"{name} run {i}: {res.status} {c.status if c else ''} "
                          f"{(c.message if c else res.message)[:300]}", file=sys.stderr)
                    sp.append(float("nan"))
                    continue
                sp.append(res.speedup)
                runs.append({"kernel": name, "i": i, "speedup": res.speedup,
                             "ci": res.speedup_ci, "pairs": res.timing_pairs})
            inside = sum(1 for s in sp if args.lo <= s <= args.hi)
            good = [s for s in sp if s == s]
            rows.append({"kernel": name, "n": args.n, "inside": inside,
                         "min": min(good) if good else None, "max": max(good) if good else None,
                         "median": statistics.median(good) if good else None})
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    if args.json:
        Path(args.json).write_text(json.dumps({"measured_at": stamp, "rows": rows, "runs": runs},
                                              indent=2))
    need = args.n - args.n // 20
    print(f"speedup noise, same PTX {args.n}x, measured {stamp}")
    print(f"{'kernel':<11} {'in [' + format(args.lo, 'g') + ', ' + format(args.hi, 'g') + ']':>18} "
          f"{'min':>7} {'median':>7} {'max':>7}  target >= {need}/{args.n}")
    for r in rows:
        print(f"{r['kernel']:<11} {r['inside']:>15}/{r['n']:<2} {(r['min'] or 0):>7.4f} "
              f"{(r['median'] or 0):>7.4f} {(r['max'] or 0):>7.4f}  "
              f"{'PASS' if r['inside'] >= need else 'FAIL'}")
    return 0 if all(r["inside"] >= need for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
