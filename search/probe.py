"""Measure what the search finds per kernel on this GPU: ``python -m search.probe K1 K2 ...``.

For each kernel: compile the autotune space (in parallel), autotune it on the GPU (the baseline,
exactly as ``ailower lower`` does), then run :class:`search.engine.SearchEngine` with a per-kernel
wall budget and print one row: baseline config, best arm, its transformation and its speedup
(baseline time / arm time, measured interleaved in the same worker job). Writes JSON lines to
``--jsonl``. Needs a GPU; exit status 2 without one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per kernel (GPU rounds)")
    ap.add_argument("--max-configs", type=int, default=16)
    ap.add_argument("--cache", default=str(Path.home() / ".ailower" / "cache"))
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--total-budget", type=float, default=400.0, help="seconds for everything")
    ap.add_argument("--jsonl", default=None)
    ap.add_argument("--no-passes", action="store_true")
    args = ap.parse_args()

    from harness import GPUEvaluator, autotune, compile_space, gpu_available
    from kernels import get
    from search.engine import SearchEngine

    ok, why = gpu_available()
    if not ok:
        print(f"no GPU: {why}", file=sys.stderr)
        return 2
    t_all = time.monotonic()
    cache = Path(args.cache)
    specs = [get(k) for k in args.kernels]
    # one parallel compile of every kernel's autotune space and its expansion
    from harness.suite_baseline import prepare

    t = time.monotonic()
    prepare([s.name for s in specs], args.arch, cache, args.workers,
            lambda m: print(m, file=sys.stderr, flush=True))  # autotune spaces + bench inputs
    print(f"prepared autotune spaces and inputs in {time.monotonic() - t:.0f} s", file=sys.stderr)
    ev = GPUEvaluator(timing_budget_s=0.3, input_cache=cache, job_timeout_s=240)
    rows = []
    sink = open(args.jsonl, "a") if args.jsonl else None
    for s in specs:
        if time.monotonic() - t_all > args.total_budget:
            print(f"{s.name}: skipped (total budget)", file=sys.stderr)
            continue
        t0 = time.monotonic()
        try:
            refs, _ = compile_space(s, args.arch, cache_dir=cache)
            base = autotune(s, refs, ev)
            eng = SearchEngine(s, args.arch, base.artifacts, evaluator=ev, cache_dir=cache,
                               workers=args.workers, log=lambda m: print(m, file=sys.stderr, flush=True))
            outc = eng.run(budget_s=args.budget, max_configs=args.max_configs,
                           passes=not args.no_passes)
        except Exception as exc:  # report and go on with the next kernel
            print(f"{s.name}: FAILED {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            continue
        best, ratio = outc.ranking[0]
        row = {"kernel": s.name, "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "baseline": base.artifacts.config.key(), "best": best.transform,
               "speedup": (1 / ratio) if ratio else None, "seconds": time.monotonic() - t0,
               "table": outc.table()[:12],
               "rejected": dict(list(outc.rejected.items())[:20]),
               "stages": {k: (None if h is None else [
                   {"round": r.round, "reps": r.reps, "kept": r.kept,
                    "measured": {a: [m.ok, m.ratio, m.message[:100]] for a, m in r.measured.items()}}
                   for r in h.rounds]) for k, h in outc.stages.items()}}
        rows.append(row)
        if sink:
            sink.write(json.dumps(row) + "\n")
            sink.flush()
        print(f"{s.name}: best {row['best']} speedup {row['speedup']:.3f} "
              f"({row['seconds']:.0f} s)", file=sys.stderr, flush=True)
    print(f"\n{'kernel':28s} {'speedup':>8s}  winner (UTC {datetime.now(timezone.utc):%Y-%m-%d %H:%M})")
    for r in rows:
        print(f"{r['kernel']:28s} {r['speedup'] or 0:8.3f}  {r['best']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
