"""Print the verifier's mutant table: rule id -> mutants -> caught (no GPU, no Triton needed).

Runs every seeded bug of ``tests/verifier/mutant_corpus.py`` through ``verifier.verify`` and
prints, per rule id, the mutants, whether the intended id reported each (as an error or warning),
its severity and the other ids reported; then the ``docs/ptx_rules.md`` §7 bugs reproduced.

    python3 bench/mutant_table.py [--all]    # --all: one row per mutant
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "verifier"))

from mutant_corpus import MUTANTS, caught, run

from verifier.registry import RULES


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="one row per mutant")
    args = ap.parse_args()
    by_rule: dict[str, list] = defaultdict(list)
    for m in MUTANTS:
        rep, _ = run(m)
        sev = sorted({f.severity for f in rep.findings if f.rule == m.rule and f.severity != "note"})
        others = sorted({f.rule for f in rep.findings if f.rule != m.rule and f.severity != "note"})
        by_rule[m.rule].append((m, caught(m, rep), "/".join(sev) or "-", others))
    total = sum(len(v) for v in by_rule.values())
    ok = sum(c for v in by_rule.values() for _, c, _, _ in v)
    print(f"{'rule':6} {'mutants':>7} {'caught':>6}  severity   example")
    semantics = [r for r in RULES if RULES[r].status == "semantics"]
    missing = [r for r in RULES if r not in by_rule and r not in semantics]
    for rid in RULES:
        rows = by_rule.get(rid)
        if not rows:
            continue
        n, c = len(rows), sum(x[1] for x in rows)
        sev = ",".join(sorted({x[2] for x in rows}))
        print(f"{rid:6} {n:7d} {c:6d}  {sev:9}  {rows[0][0].what}")
        if args.all:
            for m, cg, s, others in rows:
                print(f"{'':8}{'ok ' if cg else 'MISS'} {m.base}: {m.what}"
                      + (f"  (also {', '.join(others)})" if others else ""))
    print(f"\n{ok}/{total} mutants caught with the intended id; {len(by_rule)} rule ids covered; "
          f"registered ids without a mutant: {', '.join(missing) or 'none'}; "
          f"guarantee rows (status 'semantics', modeled, no defect to seed): "
          f"{', '.join(semantics) or 'none'}")
    bugs = [(m.bug, m.rule, m.what) for m in MUTANTS if m.bug]
    print(f"\n{len(bugs)} real bugs from docs/ptx_rules.md §7 reproduced:")
    for b, r, w in bugs:
        print(f"  {b:34} {r:5} {w}")
    return 0 if ok == total and not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
