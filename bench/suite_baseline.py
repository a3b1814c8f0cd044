"""The suite's autotuned Triton baselines on this GPU (needs a GPU; about 4-8 minutes on an H200).

For every suite kernel and variant: compile the autotune space for the device arch, autotune on
the GPU (correctness against the float64 reference on 3 seeds, interleaved timing), and print the
best config, time (ms), achieved TFLOP/s and GB/s, roofline fraction and bound, and whether it is
correct; baselines under 50% of their roofline are flagged with a reason. The same library
function backs ``ailower baseline --suite`` (:func:`harness.suite_baseline.suite_baseline`).

Usage: ``python bench/suite_baseline.py [--kernels NAME ...] [--arch auto] [--json FILE]
[--cache DIR] [--workers N]``. Exit status 0 when every row is correct, 1 otherwise, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.suite_baseline import render_table, suite_baseline
from harness import HarnessError


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", nargs="*", default=None, help="suite names (default: all)")
    ap.add_argument("--arch", default="auto")
    ap.add_argument("--cache", default=str(Path.home() / ".ailower" / "cache"))
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--timing-budget", type=float, default=0.5,
                    help="seconds of timed launches per kernel (10-100 reps per config)")
    ap.add_argument("--json", default=None, help="write the report as JSON here")
    args = ap.parse_args()
    try:
        rep = suite_baseline(args.kernels, arch=args.arch, cache_dir=Path(args.cache),
                             workers=args.workers, timing_budget_s=args.timing_budget,
                             log=lambda s: print(s, file=sys.stderr, flush=True))
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(render_table(rep))
    if args.json:
        Path(args.json).write_text(rep.model_dump_json(indent=2))
    return 0 if all(r.correct for r in rep.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
