"""Print the first evaluation-feedback text with roofline/ncu lines from a lowering's transcript.

    python3 scripts/feedback_excerpt.py TRANSCRIPT.jsonl KERNEL [--max-chars N]

Used by the device scripts (scripts/device_fast_family.sh, scripts/device_issue22.sh) to pull
the ncu excerpt out of ``ailower lower``'s ``transcript.jsonl``. With ``--max-chars N`` a longer
text is cut to its first 800 characters plus the part from "GPU evaluation" on (at most 4000),
where the roofline and Nsight Compute lines are; 0 (the default) prints it whole. A missing
transcript prints one line saying so and exits 0 (the scripts go on with the next kernel).
"""

from __future__ import annotations

import argparse
import json
import sys


def _texts(x, out: list[str]) -> None:
    if isinstance(x, str):
        if "ncu" in x or "roofline" in x:
            out.append(x)
    elif isinstance(x, dict):
        for v in x.values():
            _texts(v, out)
    elif isinstance(x, list):
        for v in x:
            _texts(v, out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("transcript")
    ap.add_argument("kernel")
    ap.add_argument("--max-chars", type=int, default=0)
    a = ap.parse_args()
    try:
        with open(a.transcript) as f:
            lines = [json.loads(line) for line in f]
    except OSError as exc:
        print(f"--- feedback {a.kernel}: no transcript ({exc})")
        return 0
    texts: list[str] = []
    _texts(lines, texts)
    print(f"--- feedback {a.kernel}: {len(texts)} text(s) with roofline/ncu; the first:")
    t = texts[0] if texts else "(none)"
    if a.max_chars and len(t) >= a.max_chars:
        t = t[:800] + "\n[...]\n" + t[t.find("GPU evaluation"):][:4000]
    print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
