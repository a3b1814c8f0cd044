"""Wall time per candidate evaluation with the persistent worker (needs a GPU).

For each kernel: compile up to three configs of its autotune space with Triton (the first is the
baseline), then evaluate 10 candidates in a row through one :class:`GPUEvaluator` (one worker
process): candidate ``i`` is the PTX of config ``i mod --configs`` plus a comment naming it, so every
candidate is a new module text. Each evaluation is the full method of :mod:`harness.gpu.worker`
(correctness on 3 + 1 secret seeds with a perturbed second pass, paired timing until the
speedup's 95% CI is within +-0.25%, every timed launch checked, fresh-load final check). The first
candidate of a kernel also pays the worker's start and the kernel's setup (inputs, reference
outputs); the table shows it separately and in the median.

Prints one table (seconds); ``--json FILE`` writes every evaluation.

Usage: ``python bench/eval_latency.py [--arch sm_90a] [--kernels vector_add softmax matmul] [-n 10]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import assemble, compile_reference, device_arch, evaluate_candidate, gpu_available  # noqa: E402
from harness.candidate import Candidate  # noqa: E402
from harness.evaluate import GPUEvaluator  # noqa: E402
from kernels import get, names  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default=None, help="default: the GPU's")
    ap.add_argument("--kernels", nargs="*", default=["vector_add", "softmax", "matmul"],
                    help=f"suite kernels (any of: {', '.join(names())})")
    ap.add_argument("-n", type=int, default=10, help="candidates per kernel")
    ap.add_argument("--configs", type=int, default=3, help="configs compiled per kernel (the "
                    "candidates cycle through them)")
    ap.add_argument("--cache", default=str(Path.home() / ".ailower" / "cache"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ok, why = gpu_available()
    if not ok:
        print(f"no GPU: {why}", file=sys.stderr)
        return 2
    arch = args.arch or device_arch()
    cache = Path(args.cache)
    rows, evals = [], []
    with GPUEvaluator(input_cache=cache) as ev:
        for name in args.kernels:
            spec = get(name)
            arts = [compile_reference(spec, arch, c, cache_dir=cache) for c in spec.configs()[:args.configs]]
            base = arts[0]
            walls, asm_s, speed, widths, statuses = [], [], [], [], []
            for i in range(args.n):
                art = arts[i % len(arts)]
                ptx = art.ptx + f"\n// candidate {i} ({art.config.key()})\n"
                t0 = time.perf_counter()
                asm = assemble(ptx, arch)
                asm_s.append(time.perf_counter() - t0)
                if not asm.ok:
                    print(asm.summary(ptx), file=sys.stderr)
                    return 1
                cand = Candidate(ptx=ptx, threads=art.abi.threads, meta=art.config.meta,
                                 dynamic_smem=art.abi.dynamic_smem,
                                 cluster_dims=(art.abi.num_ctas, 1, 1))
                t0 = time.perf_counter()
                res = evaluate_candidate(spec, base, cand, asm.cubin, ev)
                walls.append(time.perf_counter() - t0)
                c = res.candidate
                statuses.append(c.status if c else res.status)
                if res.speedup_ci:
                    speed.append(res.speedup)
                    widths.append((res.speedup_ci[1] - res.speedup_ci[0]) / 2 / res.speedup)
                evals.append({"kernel": name, "i": i, "config": art.config.key(), "wall_s": walls[-1],
                              "assemble_s": asm_s[-1], "status": statuses[-1],
                              "message": (c.message if c else res.message)[:300],
                              "speedup": res.speedup, "speedup_ci": res.speedup_ci,
                              "pairs": res.timing_pairs, "seconds": res.seconds})
            rows.append({"kernel": name, "n": args.n, "first_s": walls[0],
                         "median_s": statistics.median(walls), "max_s": max(walls),
                         "median_rest_s": statistics.median(walls[1:]) if len(walls) > 1 else None,
                         "assemble_median_s": statistics.median(asm_s),
                         "ok": statuses.count("ok"),
                         "ci_halfwidth_median": statistics.median(widths) if widths else None,
                         "pairs_median": statistics.median(e["pairs"] for e in evals if e["kernel"] == name)})
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    if args.json:
        Path(args.json).write_text(json.dumps({"measured_at": stamp, "rows": rows, "evals": evals},
                                              indent=2))
    print(f"eval latency, {args.n} candidates per kernel, measured {stamp}")
    print(f"{'kernel':<11} {'median s':>8} {'first s':>8} {'max s':>7} {'median 2-n':>10} "
          f"{'ptxas s':>8} {'pairs':>6} {'CI +-%':>7} {'ok':>4}  target <= 1.0 s")
    for r in rows:
        ci = r["ci_halfwidth_median"]
        print(f"{r['kernel']:<11} {r['median_s']:>8.3f} {r['first_s']:>8.3f} {r['max_s']:>7.3f} "
              f"{(r['median_rest_s'] or 0):>10.3f} {r['assemble_median_s']:>8.3f} "
              f"{r['pairs_median']:>6.0f} {(ci or 0) * 100:>7.3f} {r['ok']:>2}/{r['n']:<2} "
              f"{'PASS' if r['median_s'] <= 1.0 else 'FAIL'}")
    return 0 if all(r["median_s"] <= 1.0 and r["ok"] == r["n"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
