"""Run the ``search`` provider over the suite on a GPU and print the acceptance table.

``python -m search.suite [--kernels K ...] [--total-budget 480] [--out DIR]``: compiles every
autotune space and draws the bench inputs in parallel first (``harness.suite_baseline.prepare``),
then runs ``ailower lower K --provider search --iterations N`` for each entry in its own process
with a per-entry search budget (``AILOWER_SEARCH_BUDGET_S``) sized so that the whole run fits
``--total-budget`` seconds; compute-bound and paper kernels get ``--weight`` times the budget of
the memory-bound ones. Reads each entry's ``report.json`` and prints one row per entry: speedup of
the kept candidate over the autotuned baseline (measured by the loop's own 3-seed evaluation),
the winning transformation, and how many candidates the loop rejected; then the geometric mean
over the compute-bound and paper kernels and over all entries. Writes ``summary.json`` to
``--out``. Exit status 0 when every entry produced a correct candidate, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

__all__ = ["entry_class", "geomean", "main", "rows_from_leaderboard", "NOISE"]

NOISE = 0.01
"""Relative timing noise of the loop's interleaved median comparison (about 1% on the H200 in
the device runs of 2026-12-01: baseline against itself measured 0.998-1.000)."""


def entry_class(name: str) -> str:
    """``paper`` (one of the 10 paper kernels), ``compute`` (tensor-core FLOPs bound it) or
    ``memory``, for suite entry ``name``."""
    from kernels import get
    from kernels.registry import PAPERS, base_name

    if base_name(name) in PAPERS:
        return "paper"
    spec = get(name)
    return "compute" if spec.flop_dtype and spec.flops not in (0, "0") else "memory"


def geomean(xs: list[float]) -> float | None:
    """Geometric mean of positive numbers; None for an empty list."""
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _run_entry(name: str, arch: str, out: Path, budget_s: float, iterations: int,
               timeout_s: float, max_configs: int, pipeline: bool = False) -> dict:
    env = dict(os.environ, AILOWER_SEARCH_BUDGET_S=f"{budget_s:.1f}", PYTHONUNBUFFERED="1",
               AILOWER_SEARCH_MAX_CONFIGS=str(max_configs))
    folder = out / name
    cmd = [sys.executable, "-c", "from ailower.cli import main; main()", "lower", name,
           "--provider", "search", "--iterations", str(iterations), "--arch", arch,
           "--out", str(folder)] + (["--pipeline"] if pipeline else [])
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        rc, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, log = -1, f"timed out after {timeout_s:.0f} s\n{exc.stdout or ''}"
    row: dict = {"kernel": name, "rc": rc, "seconds": time.monotonic() - t0, "budget_s": budget_s,
                 "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (out / f"{name}.log").write_text(log if isinstance(log, str) else str(log))
    try:
        rep = json.loads((folder / "report.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        row["error"] = f"no report: {exc}; rc={rc}; {str(log)[-300:]}"
        return row
    its = rep.get("iterations", [])
    row.update({
        "speedup": rep.get("speedup"),
        "winner": (rep.get("candidate") or {}).get("origin", ""),
        "baseline": (rep.get("reference", {}).get("baseline") or {}).get("config"),
        "accepted": sum(1 for i in its if i["verdict"] == "accepted"),
        "rejected": {v: sum(1 for i in its if i["verdict"] == v) for v in
                     ("rejected-assembly", "rejected-verifier", "rejected-evaluation")},
        "iterations": [{"origin": i["origin"], "verdict": i["verdict"], "speedup": i["speedup"]}
                       for i in its],
        "space": (rep.get("reference", {}).get("autotune_space") or {}),
    })
    pipe = rep.get("pipeline") or {}
    if pipe:
        row["pipeline"] = {k: pipe.get(k) for k in ("speedup", "speedup_ci", "step_speedup",
                                                   "step_speedup_ci", "isolated_speedup",
                                                   "survives", "pairs", "error")}
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", nargs="*", default=None, help="suite entries (default: all)")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--total-budget", type=float, default=480.0, help="seconds for the whole run")
    ap.add_argument("--overhead", type=float, default=22.0,
                    help="estimated seconds per entry outside the search (start, autotune, "
                         "the loop's evaluations)")
    ap.add_argument("--weight", type=float, default=3.0,
                    help="budget of a compute/paper entry relative to a memory-bound one")
    ap.add_argument("--min-budget", type=float, default=2.0)
    ap.add_argument("--max-budget", type=float, default=60.0)
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--max-configs", type=int, default=12,
                    help="Triton configs beyond the autotune space per compute/paper entry "
                         "(memory-bound entries get a third)")
    ap.add_argument("--part", default=None, metavar="I/N",
                    help="run every N-th entry starting with the I-th (1-based): the suite in N "
                         "device calls; merge the summaries with --merge")
    ap.add_argument("--merge", nargs="+", default=None, metavar="SUMMARY",
                    help="print the table of several summary.json files (no GPU needed)")
    ap.add_argument("--leaderboard", default=None, metavar="JSON",
                    help="print the table of the search cells of a leaderboard (the output of "
                         "`ailower leaderboard --json` after `ailower suite run ... --provider "
                         "search`; no GPU needed)")
    ap.add_argument("--pipeline", action="store_true",
                    help="also time each entry's kept candidate in a pipeline context (ailower "
                         "lower --pipeline: a producer writes its inputs, a consumer reads its "
                         "outputs) and print it next to the isolated speedup")
    ap.add_argument("--out", default="search-suite")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    args = ap.parse_args(argv)

    if args.merge:
        rows = []
        for f in args.merge:
            try:
                rows += json.loads(Path(f).read_text())["rows"]
            except (OSError, json.JSONDecodeError, KeyError) as exc:
                print(f"error: --merge {f}: {exc}", file=sys.stderr)
                return 2
        summary = _summarise(rows, 0.0)
        _print(summary, args.arch)
        return 0 if len(rows) == summary["with_candidate"] else 1

    if args.leaderboard:
        try:
            rows = rows_from_leaderboard(json.loads(Path(args.leaderboard).read_text()), args.arch)
        except (OSError, json.JSONDecodeError, KeyError) as exc:
            print(f"error: --leaderboard {args.leaderboard}: {exc}", file=sys.stderr)
            return 2
        summary = _summarise(rows, 0.0)
        # the time the last cell finished, not now
        summary["finished_at"] = max((r["measured_at"] or "" for r in rows), default="")
        _print(summary, args.arch)
        return 0 if rows and len(rows) == summary["with_candidate"] else 1

    from harness.suite_baseline import prepare
    from common.settings import get_settings
    from kernels import names

    t_all = time.monotonic()
    entries = args.kernels or names()
    if args.part:
        try:
            i, n = (int(x) for x in args.part.split("/"))
            if not 1 <= i <= n:
                raise ValueError
        except ValueError:
            print(f"error: --part {args.part!r}: expected I/N with 1 <= I <= N", file=sys.stderr)
            return 2
        entries = entries[i - 1::n]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prepare(entries, args.arch, get_settings().cache_dir, args.workers,
            lambda m: print(m, file=sys.stderr, flush=True))
    classes = {n: entry_class(n) for n in entries}
    rows = []
    for i, name in enumerate(entries):
        left = args.total_budget - (time.monotonic() - t_all)
        rest = entries[i:]
        weights = [args.weight if classes[n] != "memory" else 1.0 for n in rest]
        pool = left - args.overhead * len(rest)
        w = args.weight if classes[name] != "memory" else 1.0
        budget = min(args.max_budget, max(args.min_budget, pool * w / sum(weights)))
        print(f"[{i + 1}/{len(entries)}] {name} ({classes[name]}): search budget {budget:.1f} s",
              file=sys.stderr, flush=True)
        cfgs = args.max_configs if classes[name] != "memory" else max(1, args.max_configs // 3)
        row = _run_entry(name, args.arch, out, budget, args.iterations,
                         timeout_s=max(120.0, budget * 4 + 120), max_configs=cfgs,
                         pipeline=args.pipeline)
        row["class"] = classes[name]
        rows.append(row)
        print(f"    -> {row.get('speedup')} {row.get('winner', row.get('error', ''))} "
              f"({row['seconds']:.0f} s)", file=sys.stderr, flush=True)
        (out / "summary.json").write_text(json.dumps({"rows": rows}, indent=1))
    summary = _summarise(rows, time.monotonic() - t_all)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    _print(summary, args.arch)
    return 0 if summary["with_candidate"] == len(rows) else 1


def rows_from_leaderboard(lb: dict, arch: str) -> list[dict]:
    """Table rows from a leaderboard (``ailower leaderboard --json``): one per ``search`` cell
    on ``arch``: speedup and origin of the best verified candidate (measured by the loop's
    evaluation, interleaved with the autotuned baseline in one job) and, when the leaderboard
    also has a ``triton`` cell for the kernel, ``vs_triton_cell``: that cell's baseline time
    (another job) over the candidate's time, a cross-check of the paired number.
    Raises KeyError on a document without entries."""
    triton = {e["kernel"]: e for e in lb["entries"]
              if e.get("provider") == "triton" and e.get("arch") == arch and e.get("baseline_ms")}
    rows = []
    for e in lb["entries"]:
        if e.get("provider") != "search" or e.get("arch") != arch:
            continue
        t = triton.get(e["kernel"])
        cand = e.get("candidate_ms") if e.get("valid") else None
        rows.append({"kernel": e["kernel"], "class": entry_class(e["kernel"]),
                     "speedup": e.get("speedup") if e.get("valid") else None,
                     # cross-check: the triton provider's cell timed the same autotuned baseline
                     # in another job; its time over this candidate's
                     "vs_triton_cell": (t["baseline_ms"] / cand) if t and cand else None,
                     "winner": e.get("origin") or "", "outcome": e.get("outcome"),
                     "error": e.get("error") or "", "baseline": e.get("baseline_config"),
                     "measured_at": e.get("finished_at"), "campaign": e.get("campaign")})
    return rows


def _summarise(rows: list[dict], wall_s: float) -> dict:
    cp = [r["speedup"] for r in rows if r["class"] != "memory" and r.get("speedup")]
    allv = [r["speedup"] for r in rows if r.get("speedup")]
    cross = [r["vs_triton_cell"] for r in rows if r.get("vs_triton_cell")]
    cross_cp = [r["vs_triton_cell"] for r in rows if r.get("vs_triton_cell") and r["class"] != "memory"]
    return {"rows": rows, "geomean_compute_paper": geomean(cp), "geomean_all": geomean(allv),
            "cross_check": {"geomean_compute_paper": geomean(cross_cp), "geomean_all": geomean(cross),
                            "n": len(cross)} if cross else None,
            "n_compute_paper": len(cp), "entries": len(rows), "with_candidate": len(allv),
            # the loop keeps the fastest accepted candidate and the baseline is always one, so a
            # kept speedup under 1 is the timing noise of two equal kernels (the IQR of the
            # interleaved medians is ~1%); beyond NOISE it would be a real regression
            "below_1": [r["kernel"] for r in rows if r.get("speedup") and r["speedup"] < 1.0],
            "slower_than_baseline": [r["kernel"] for r in rows
                                     if r.get("speedup") and r["speedup"] < 1.0 - NOISE],
            "wall_s": wall_s,
            "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def _print(summary: dict, arch: str) -> None:
    rows = summary["rows"]
    wall = f", {summary['wall_s']:.0f} s" if summary.get("wall_s") else ""
    print(f"\nsearch provider over {len(rows)} suite entries on {arch} "
          f"(UTC {summary['finished_at']}{wall})")
    cross = summary.get("cross_check")
    xhead = f" {'x-check':>8s}" if cross else ""
    print(f"{'entry':27s} {'class':8s} {'speedup':>8s}{xhead} {'rej':>4s}  winning transformation")
    for r in rows:
        sp = f"{r['speedup']:.3f}" if r.get("speedup") else "-"
        xc = (f" {r['vs_triton_cell']:8.3f}" if r.get("vs_triton_cell") else f" {'-':>8s}") if cross else ""
        rej = str(sum(r["rejected"].values())) if "rejected" in r else "-"
        win = r.get("winner", "").removeprefix("search:") or r.get("error", "")[:60]
        pipe = r.get("pipeline") or {}
        ctx = ""
        if pipe.get("step_speedup"):
            lo, hi = pipe["step_speedup_ci"]
            ctx = (f"  [pipeline: kernel {pipe['speedup']:.3f}, step {pipe['step_speedup']:.3f} "
                   f"({lo:.3f}-{hi:.3f}) {'survives' if pipe['survives'] else 'does not survive'}]")
        elif pipe:
            ctx = f"  [pipeline not timed: {str(pipe.get('error'))[:60]}]"
        print(f"{r['kernel']:27s} {r['class']:8s} {sp:>8s}{xc} {rej:>4s}  {win}{ctx}")
    g1, g2 = summary["geomean_compute_paper"], summary["geomean_all"]
    print(f"geomean speedup: compute-bound + paper {g1 or 0:.3f} ({summary['n_compute_paper']} "
          f"entries), all {g2 or 0:.3f} ({summary['with_candidate']} entries); slower than "
          f"baseline beyond {NOISE:.0%} noise: {', '.join(summary['slower_than_baseline']) or 'none'}"
          f"; under 1.000: {', '.join(summary.get('below_1', [])) or 'none'}")
    if cross:
        print(f"x-check (the triton cell's baseline time, another job, over the candidate's): "
              f"geomean compute-bound + paper {cross['geomean_compute_paper'] or 0:.3f}, all "
              f"{cross['geomean_all'] or 0:.3f} ({cross['n']} entries)")


if __name__ == "__main__":
    sys.exit(main())
