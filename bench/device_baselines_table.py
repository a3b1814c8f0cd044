"""The short table of ``scripts/device_baselines.sh``: narrow vs widened autotuned baselines per
entry, then isolated vs pipeline-context speedups of the search candidates (no GPU needed).

    python3 bench/device_baselines_table.py DIR     # DIR holds narrow.json, wide.json, search/

Reads ``DIR/narrow.json`` and ``DIR/wide.json`` (``ailower baseline --json``) and
``DIR/search/summary.json`` (``python -m search.suite --pipeline``); any missing part is said.
``wide/narrow`` is the widened baseline's time over the narrow one's (below 1: the widened space
found a faster config, so a speedup measured against the narrow baseline was inflated by its
inverse).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        print(f"({path}: {exc})")
        return None


def baseline_rows(narrow: dict | None, wide: dict | None) -> list[str]:
    """One line per kernel present in either report."""
    n = {r["kernel"]: r for r in (narrow or {}).get("rows", [])}
    w = {r["kernel"]: r for r in (wide or {}).get("rows", [])}
    out = [f"{'entry':26s} {'narrow ms':>10s} {'cfgs':>5s} {'wide ms':>10s} {'cfgs':>8s} "
           f"{'wide/narrow':>11s} {'s/cfg':>6s}  widened best config"]
    for k in [*n, *[k for k in w if k not in n]]:
        a, b = n.get(k, {}), w.get(k, {})
        am, bm = a.get("median_ms"), b.get("median_ms")
        ratio = f"{bm / am:.3f}" if am and bm else "-"
        cfgs = f"{b.get('configs', 0)}/{b.get('space_configs', 0)}" + ("*" if b.get("capped") else "")
        per = f"{b['seconds'] / b['configs']:.2f}" if b.get("configs") else "-"
        bad = "" if (not b or b.get("correct")) else f"  ({b.get('reason', '')[:60]})"
        out.append(f"{k:26s} {(f'{am:.4f}' if am else '-'):>10s} {a.get('configs', '-')!s:>5s} "
                   f"{(f'{bm:.4f}' if bm else '-'):>10s} {cfgs:>8s} {ratio:>11s} {per:>6s}  "
                   f"{b.get('best_config', '')}{bad}")
    if any(r.get("capped") for r in w.values()):
        out.append(f"* capped at {(wide or {}).get('max_configs')} configs (the narrow space's, "
                   "then every k-th of the rest)")
    return out


def pipeline_rows(summary: dict | None) -> list[str]:
    """One line per search entry: isolated speedup, kernel and step speedups in context."""
    out = [f"{'entry':26s} {'isolated':>9s} {'in context':>10s} {'step':>7s} {'step 95% CI':>15s}"
           "  survives  winning transformation"]
    for r in (summary or {}).get("rows", []):
        p = r.get("pipeline") or {}
        iso = r.get("speedup")
        if p.get("step_speedup"):
            lo, hi = p["step_speedup_ci"]
            out.append(f"{r['kernel']:26s} {iso or 0:9.3f} {p['speedup']:10.3f} "
                       f"{p['step_speedup']:7.3f} {f'[{lo:.3f}, {hi:.3f}]':>15s}  "
                       f"{'yes' if p['survives'] else 'no':8s}  "
                       f"{r.get('winner', '').removeprefix('search:')}")
        else:
            why = p.get("error") or r.get("error") or "no pipeline timing"
            out.append(f"{r['kernel']:26s} {(f'{iso:.3f}' if iso else '-'):>9s}  {str(why)[:80]}")
    return out


def main() -> None:
    d = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    narrow, wide = _load(d / "narrow.json"), _load(d / "wide.json")
    dev = (wide or narrow or {}).get("device", "?")
    print(f"\nautotuned Triton baselines on {dev}: narrow (pre-issue-22) vs widened spaces")
    print("\n".join(baseline_rows(narrow, wide)))
    print("\nsearch candidates: isolated speedup vs pipeline context (producer writes the inputs, "
          "consumer reads the outputs; step = producer + kernel + consumer)")
    print("\n".join(pipeline_rows(_load(d / "search" / "summary.json"))))


if __name__ == "__main__":
    main()
