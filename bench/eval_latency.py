"""Wall-time breakdown of one candidate evaluation per suite kernel (needs a GPU).

For each kernel: compile the autotune space with Triton, autotune on the GPU, take the winning
config's PTX as the candidate, then time each stage of one evaluation: assemble (ptxas), load,
correctness (3 seeds at the verify size), timing (interleaved A/B at the bench size). Prints one
table; ``--json FILE`` also writes the raw numbers.

Usage: ``python bench/eval_latency.py [--arch sm_90a] [--kernels vector_add softmax matmul]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import assemble, autotune, compile_space, evaluate_candidate, gpu_available  # noqa: E402
from harness.candidate import Candidate  # noqa: E402
from harness.evaluate import GPUEvaluator  # noqa: E402
from kernels import get, names  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--kernels", nargs="*", default=["vector_add", "softmax", "matmul"],
                    help=f"suite kernels (any of: {', '.join(names())})")
    ap.add_argument("--cache", default=str(Path.home() / ".ailower" / "cache"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ok, why = gpu_available()
    if not ok:
        print(f"no GPU: {why}", file=sys.stderr)
        return 2
    ev = GPUEvaluator(input_cache=Path(args.cache))
    rows = []
    for name in args.kernels:
        spec = get(name)
        t0 = time.perf_counter()
        refs, bad = compile_space(spec, args.arch, cache_dir=Path(args.cache))
        t_compile = time.perf_counter() - t0
        t0 = time.perf_counter()
        base = autotune(spec, refs, ev)
        t_tune = time.perf_counter() - t0
        art = base.artifacts
        cand = Candidate(ptx=art.ptx, threads=art.abi.threads, meta=art.config.meta,
                         dynamic_smem=art.abi.dynamic_smem, cluster_dims=(art.abi.num_ctas, 1, 1),
                         origin=f"triton:{art.config.key()}")
        t0 = time.perf_counter()
        asm = assemble(cand.ptx, args.arch)
        t_asm = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = evaluate_candidate(spec, art, cand, asm.cubin, ev)
        t_eval = time.perf_counter() - t0
        c = res.candidate
        rows.append({
            "kernel": name, "configs": len(refs), "compile_failures": len(bad),
            "compile_s": t_compile, "autotune_s": t_tune, "best": art.config.key(),
            "assemble_s": t_asm, "load_ms": c.load_ms if c else None,
            "correctness_s": res.seconds.get("correctness"), "timing_s": res.seconds.get("timing"),
            "worker_total_s": res.seconds.get("total"), "evaluate_wall_s": t_eval,
            "status": res.status, "candidate": c.status if c else None,
            "message": (c.message if c else res.message)[:300],
            "speedup": res.speedup, "cand_ms": c.timing.median_ms if c and c.timing else None,
            "device": res.device.name if res.device else None,
            "copy_gbps": res.device.copy_gbps if res.device else None})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    hdr = (f"{'kernel':<11} {'assemble s':>10} {'load ms':>8} {'correct s':>9} {'timing s':>8} "
           f"{'worker s':>8} {'eval wall s':>11} {'speedup':>8} {'cand ms':>8}  status")
    print(hdr)
    for r in rows:
        def f(v, fmt):
            return format(v, fmt) if isinstance(v, float | int) else "-"
        print(f"{r['kernel']:<11} {f(r['assemble_s'], '10.3f')} {f(r['load_ms'], '8.2f')} "
              f"{f(r['correctness_s'], '9.3f')} {f(r['timing_s'], '8.3f')} {f(r['worker_total_s'], '8.3f')} "
              f"{f(r['evaluate_wall_s'], '11.3f')} {f(r['speedup'], '8.3f')} {f(r['cand_ms'], '8.4f')}  "
              f"{r['candidate']} {r['message'][:80]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
