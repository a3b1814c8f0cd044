"""Prints the expert table of scripts/device_expert.sh from its per-kernel report.json files.

Usage: python3 scripts/_expert_table.py DIR VENDOR_JSON KERNEL...
DIR/<kernel>/report.json is `ailower lower K --provider expert --iterations 1 --out DIR/<kernel>`;
VENDOR_JSON is the last line of `python3 -m harness.vendor` (a JSON list, or missing).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def row(kernel: str, rep: dict | None, vendor: dict | None) -> list[str]:
    """kernel, correct, speedup [95% CI], roofline fraction (expert / baseline), vendor ratio."""
    if rep is None:
        return [kernel, "no report", "-", "-", "-", "-"]
    its = rep.get("iterations") or []
    first = its[0] if its else {}
    if not str(first.get("origin", "")).startswith("expert:"):
        return [kernel, first.get("provider_error") or "none", "-", "-", "-", "-"]
    ev = rep.get("evaluation") or {}
    kern = {k.get("role"): k for k in ev.get("kernels", [])}
    cand, ref = kern.get("candidate") or {}, kern.get("reference") or {}
    correct = "yes" if cand.get("status") == "ok" else (cand.get("status") or first["verdict"])
    sp, ci = ev.get("speedup"), ev.get("speedup_ci")
    sp_s = f"{sp:.3f}x" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") if sp else "-"
    rf, rb = cand.get("roofline_fraction"), ref.get("roofline_fraction")
    rf_s = (f"{rf:.3f}" if rf is not None else "-") + " / " + (f"{rb:.3f}" if rb is not None else "-")
    ms = (cand.get("timing") or {}).get("median_ms")
    vm = (vendor or {}).get("median_ms")
    if vm and ms:
        v_s = f"{vm / ms:.2f}x ({vendor.get('path')}, {vm:.4f} ms vs {ms:.4f} ms)"
    else:
        v_s = (vendor or {}).get("reason") or "n/a: not measured"
    return [kernel, correct, first.get("verdict", "-"), sp_s, rf_s, v_s]


def main(argv: list[str]) -> int:
    out, vendor_json, kernels = Path(argv[0]), Path(argv[1]), argv[2:]
    vendors: dict[str, dict] = {}
    if vendor_json.is_file():
        txt = [ln for ln in vendor_json.read_text().splitlines() if ln.startswith("[")]
        if txt:
            vendors = {v["kernel"]: v for v in json.loads(txt[-1])}
    rows = [["kernel", "correct", "verdict", "speedup vs Triton [95% CI]",
             "roofline expert / triton", "vendor ratio (vendor ms / expert ms)"]]
    for k in kernels:
        p = out / k / "report.json"
        if not p.is_file():  # a run without a candidate writes to <out>.failed
            p = out / f"{k}.failed" / "report.json"
        rows.append(row(k, json.loads(p.read_text()) if p.is_file() else None, vendors.get(k)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
