"""Compile every suite entry's widened autotune space and report, per entry, what survives.

For each entry (``--kernels``, default the suite): the narrow and widened config counts, the grid
configs pruned before compiling (``kernels/suite/_spaces.py``: accumulator registers, operand
shared memory, with the reason), then :func:`harness.compile_space` for every ``--arch``: configs
compiled, configs Triton failed on or whose shared memory exceeds that target's per-CTA limit
(grouped by reason), and the check of the static shared-memory rule against the compiled bytes
(``smem_rule_ratio``: the largest compiled / estimated ratio below 1 would mean the rule
over-estimates, i.e. pruned something that fits). Writes ``OUT/compile_spaces.json`` and
``OUT/compile_spaces.md``; a cache folder makes reruns (and other arches) resume.

    python3 bench/compile_spaces.py --arch sm_90a [--arch sm_100a] [--kernels gemm.fp16 ...]
        [--workers 2] [--cache /tmp/ailower-spaces] [--out bench-out] [--sample N]

``--sample N`` compiles every k-th config so at most N per entry (said in the table).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _reason(msg: str) -> str:
    """A failure message reduced to its kind (numbers and config keys removed)."""
    m = msg.split("]", 1)[-1] if "]" in msg else msg
    m = re.sub(r"\d+", "N", m)
    return m.strip()[:160]


def _smem_estimate(cfg, itemsize: int) -> int | None:
    meta = cfg.meta
    if not all(k in meta for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K")):
        return None
    return (meta["BLOCK_M"] + meta["BLOCK_N"]) * meta["BLOCK_K"] * itemsize * max(cfg.num_stages, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", default=None)
    ap.add_argument("--kernels", nargs="*", default=None)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--cache", default="/tmp/ailower-spaces-cache")
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--sample", type=int, default=0)
    a = ap.parse_args()
    archs = a.arch or ["sm_90a"]

    import kernels
    from harness import compile_space
    from kernels.dtypes import dtype
    from kernels.suite._spaces import pruned, wide_space

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    names = a.kernels or kernels.names()
    rows = []
    for n in names:
        narrow, wide = kernels.get(n, "narrow"), kernels.get(n, "wide")
        cfgs = wide.configs()
        step = max(1, -(-len(cfgs) // a.sample)) if a.sample else 1
        todo = cfgs[::step]
        ops = [p for p in wide.tensors() if p.role == "in" and p.dtype]
        itemsize = min(dtype(p.dtype).itemsize for p in ops) if ops else 2
        w = wide_space(n, narrow.autotune)
        row = {"kernel": n, "kind": w.kind if w else "-", "narrow": len(narrow.configs()),
               "widened": len(cfgs), "pruned_static": len(pruned(n)),
               "pruned_reasons": dict(collections.Counter(_reason(p.reason) for p in pruned(n))),
               "compiled": len(todo), "sampled": step > 1, "arch": {}}
        for arch in archs:
            t = time.perf_counter()
            ok, bad = compile_space(wide, arch, cache_dir=Path(a.cache), configs=todo,
                                    workers=a.workers)
            ratios = [art.abi.dynamic_smem / est for art in ok
                      if (est := _smem_estimate(art.config, itemsize))]
            row["arch"][arch] = {
                "ok": len(ok), "failed": len(bad),
                "failures": dict(collections.Counter(_reason(str(b)) for b in bad)),
                "failed_configs": [str(b)[:300] for b in bad],
                "narrow_ok": sum(1 for art in ok if art.config.key() in
                                 {c.key() for c in narrow.configs()}),
                "smem_rule_min_ratio": round(min(ratios), 3) if ratios else None,
                "seconds": round(time.perf_counter() - t, 1)}
            print(f"{n} {arch}: {len(ok)}/{len(todo)} compiled, {len(bad)} failed "
                  f"({row['arch'][arch]['seconds']} s; load {os.getloadavg()[0]:.1f})", flush=True)
        rows.append(row)
        (out / "compile_spaces.json").write_text(json.dumps(rows, indent=1))
    lines = ["| entry | kind | narrow | widened | pruned before compile | "
             + " | ".join(f"{x} ok / compiled" for x in archs) + " |",
             "|---|---|---|---|---|" + "---|" * len(archs)]
    for r in rows:
        cells = [f"{r['arch'][x]['ok']} / {r['compiled']}{' (sampled)' if r['sampled'] else ''}"
                 for x in archs]
        lines.append(f"| {r['kernel']} | {r['kind']} | {r['narrow']} | {r['widened']} | "
                     f"{r['pruned_static']} | " + " | ".join(cells) + " |")
    fails = [(r["kernel"], x, k, v) for r in rows for x in archs
             for k, v in r["arch"][x]["failures"].items()]
    if fails:
        lines += ["", "compile-time pruning (reason, count):", ""]
        lines += [f"- {k} {x}: {v} x {reason}" for k, x, reason, v in fails]
    (out / "compile_spaces.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
