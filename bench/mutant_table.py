"""Print the verifier's mutant table: rule id -> mutants -> caught (no GPU, no Triton needed).

Runs every seeded bug of ``tests/verifier/mutant_corpus.py`` through ``verifier.verify`` and
prints, per rule id, the mutants, whether the intended id reported each (as an error or warning),
its severity and the other ids reported; then the ``docs/ptx_rules.md`` §7 bugs reproduced.

    python3 bench/mutant_table.py [--all]    # --all: one row per mutant
    python3 bench/mutant_table.py --fast [PTX ...] [--misses] [--emulate | --default-launch]
                      # issue 18: mutation classes over the fast corpus (fixtures/fast36
                      # and the hand-written kernels/fast/ptx/*.ptx)

``--emulate``: a mutant also counts as caught when the verifier lets it through but emulation
rejects it as ``ailower lower``/``eval`` do without a GPU (``agent.loop._emulate``'s rule: a
fault, deadlock, mismatch, timeout or error status, or an HB error on a run that completed);
the file's spec is ``fast.<entry>`` from its name ``fast.<entry>_<arch>.ptx``; fixtures carry
no metadata, so a device-side-descriptor kernel gets 4 KiB of global scratch per CTA. A file
whose original does not emulate ``ok`` (unsupported: clusters, tcgen05.cp...) is counted
statically only and listed. A hand-written file of ``kernels/fast/ptx/`` takes its entry's
spec and launch (``kernels.fast.hand_ptx``).
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


def _emulation_rejects(text: str, path: Path, coverage: bool = False
                       ) -> tuple[bool | None, str] | tuple[bool | None, str, set[int] | None]:
    """(rejected, why) for ``text`` emulated as the fast entry ``path`` names; rejected None
    when there is no spec or no verdict (unsupported / memory). With ``coverage``, a third
    item: the :class:`emulator.EmulationResult` of the run (None without one; its
    ``line_counts`` and ``wait_effects`` feed ``fast_mutants.left_out``). The launch is the one
    ``ailower eval``/``lower`` emulate without a GPU (``agent.loop._emulate``): the spec's
    ``verify`` size, its grid and first config."""
    res = _emulate(text, path, coverage)
    if isinstance(res, tuple):
        return (*res, None) if coverage else res
    bad, why = _verdict(res)
    if coverage:
        return bad, why, res
    return bad, why


def _emulate(text: str, path: Path, coverage: bool, elect: str = "lowest"):
    """The emulation result of ``text`` as the fast entry ``path`` names, or (None, why)
    (``elect``: ``run_kernel``'s choice of the lane ``elect.sync`` elects)."""
    import kernels
    from emulator import run_kernel
    from kernels.fast.hand_ptx import HAND_PTX

    hand = next((h for h in HAND_PTX.values() if h.path == path.resolve()), None)
    if hand is not None:  # a hand-written entry: its own spec and launch
        return run_kernel(text, kernels.get(hand.name), hand.arch, filename=path.name,
                          meta=hand.emulation_meta(), threads=hand.threads,
                          dynamic_smem=hand.dynamic_smem,
                          global_scratch_size=hand.global_scratch_size, time_limit_s=60.0,
                          coverage=coverage, elect=elect)
    stem = path.stem
    name, _, arch = stem.rpartition("_sm_")
    arch = "sm_" + arch
    try:
        spec = kernels.get(name)
    except Exception as exc:  # noqa: BLE001 - an unknown name: no verdict, said so
        return None, f"no spec {name}: {exc}"
    return run_kernel(text, spec, arch, filename=path.name, global_scratch_size=4096,
                      time_limit_s=60.0, coverage=coverage, elect=elect)


def barrier_effects(text: str, path: Path, res) -> dict[int, int] | None:
    """Per barrier line of ``text``, the instances that may have ordered a conflicting pair
    (``EmulationResult.barrier_effects``), summed over ``res`` (the original's coverage run,
    ``elect.sync`` electing the lowest lane) and a second coverage run electing the highest
    lane: a barrier counts as inert only when it is in both. None when the second run does not
    complete ``ok``."""
    other = _emulate(text, path, True, elect="highest")
    if isinstance(other, tuple) or not other.ok or res.barrier_effects is None:
        return None
    b1, b2 = res.barrier_effects, other.barrier_effects or {}
    return {ln: b1[ln] + b2[ln] for ln in b1.keys() & b2.keys()}


def _verdict(res) -> tuple[bool | None, str]:
    """(rejected, why) of an emulation result (None: no verdict: unsupported / memory)."""
    if res.status in ("unsupported", "memory"):
        return None, f"{res.status}: {res.message[:100]}"
    bad = res.status != "ok" or not res.ok
    errs = sorted({f.rule for f in res.findings if f.severity == "error"})
    return bad, (f"emulation {res.status}" + (f" {','.join(errs)}" if errs else ""))


def _default_launch_rejects(text: str, path: Path, arch: str) -> tuple[bool, str]:
    """(rejected, why) as ``ailower verify FILE`` without ``--kernel`` / ``--launch`` decides
    on its happens-before part: an HB error on the default launch of any entry
    (:func:`emulator.check_default_launch`, tensor maps inferred)."""
    import emulator

    errs, status = set(), []
    for c in emulator.check_default_launch(text, arch=arch, filename=path.name):
        errs |= {f.rule for f in c.findings if f.severity == "error"}
        status.append(c.status)
    return bool(errs), (f"default launch {'/'.join(sorted(set(status)))}"
                        + (f" {','.join(sorted(errs))}" if errs else ""))


def fast_counts(paths: list[Path], max_sites: int = 4, emulate: bool = False,
                default_launch: bool = False) -> dict:
    """The numbers of the issue-18 table (see :func:`fast_table`) as a dict: ``tot``/``hit``
    (class -> mutants / rejected, Counters), ``rules`` (class -> Counter of rejecting rules),
    ``skipped`` (class -> Counter of left-out reasons), ``warned`` (class -> missed mutants
    with a new emulation warning), ``misses`` (class -> lines), ``false_alarms`` and
    ``static_only`` (file names with why), ``seconds``."""
    import time
    from collections import Counter

    from fast_mutants import mutants

    from verifier import parse_ptx, verify

    tot: Counter = Counter()
    hit: Counter = Counter()
    rules: dict[str, Counter] = defaultdict(Counter)
    misses: dict[str, list[str]] = defaultdict(list)
    false_alarms = []
    static_only = []
    skipped: dict[str, Counter] = defaultdict(Counter)
    warned: Counter = Counter()  # missed, but emulation gave a new warning (HB4 init fence)
    t0 = time.perf_counter()
    for path in paths:
        text = path.read_text()
        arch = parse_ptx(text).arch
        if not verify(text, arch=arch, filename=path.name).ok:
            false_alarms.append(path.name)
        dl_here = default_launch
        if default_launch:
            bad, why = _default_launch_rejects(text, path, arch)
            if bad:
                false_alarms.append(f"{path.name} ({why})")
                dl_here = False
            if "default launch ok" not in why:
                static_only.append(f"{path.name} ({why})")
        emu_here = emulate
        reached = effects = bar_effects = None
        orig_warn: set = set()
        if emulate:
            bad, why, res = _emulation_rejects(text, path, coverage=True)
            if bad:
                false_alarms.append(f"{path.name} ({why})")
            if bad is None or bad:
                emu_here = False
                static_only.append(f"{path.name} ({why})")
            else:
                reached, effects = res.line_counts, res.wait_effects
                bar_effects = barrier_effects(text, path, res)
                orig_warn = {(f.rule, f.line) for f in res.findings if f.severity == "warning"}
        for m in mutants(path.name, text, max_sites=max_sites, reached=reached,
                         wait_effects=effects, keep_skipped=True,
                         barrier_effects=bar_effects):
            if m.skip:
                skipped[m.cls][m.skip.split(":")[0]] += 1
                misses[m.cls].append(f"{path.name}:{m.line} {m.what} LEFT OUT ({m.skip})")
                continue
            rep = verify(m.text, arch=arch, filename=path.name)
            errs = {f.rule for f in rep.findings if f.severity == "error"}
            new_warn: set = set()
            if not errs and dl_here:
                bad, why = _default_launch_rejects(m.text, path, arch)
                if bad:
                    errs = {why}
            if not errs and emu_here:
                res = _emulate(m.text, path, False)
                bad, why = res if isinstance(res, tuple) else _verdict(res)
                if bad:
                    errs = {why}
                elif not isinstance(res, tuple):
                    new_warn = {(f.rule, f.line) for f in res.findings
                                if f.severity == "warning"} - orig_warn
            tot[m.cls] += 1
            hit[m.cls] += bool(errs)
            rules[m.cls].update(errs)
            if not errs:
                warned[m.cls] += bool(new_warn)
                misses[m.cls].append(f"{path.name}:{m.line} {m.what}" + (
                    f" (only new warnings: {sorted({r for r, _ in new_warn})})"
                    if new_warn else ""))
    return dict(tot=tot, hit=hit, rules=rules, skipped=skipped, warned=warned, misses=misses,
                false_alarms=false_alarms, static_only=static_only,
                seconds=time.perf_counter() - t0)


def fast_table(paths: list[Path], show_misses: bool, max_sites: int = 4,
               emulate: bool = False, default_launch: bool = False) -> int:
    """The issue-18 table: per mutation class of ``tests/verifier/fast_mutants.py``, mutants
    derived from ``paths`` and how many are rejected - by the verifier (an error, any rule)
    or, with ``emulate``, by emulation as ``ailower lower``/``eval`` reject without a GPU -,
    the rejecting rules, the mutants left out (equivalent, never executed or a wait that never
    acted at the emulated launch: ``fast_mutants.left_out``) and the false alarms on the
    unmutated files. Returns 0 when no original is rejected (the caught rates are reported, not
    gated here: ``tests/verifier/test_verifier_fast_mutants.py`` gates them)."""
    from fast_mutants import CLASSES

    c = fast_counts(paths, max_sites, emulate, default_launch)
    tot, hit, rules, skipped, warned, misses = (c[k] for k in (
        "tot", "hit", "rules", "skipped", "warned", "misses"))
    false_alarms, static_only = c["false_alarms"], c["static_only"]
    print(f"{'class':20} {'caught':>9}  {'rate':>5}  rejecting rules")
    for cls in CLASSES:
        if not tot[cls]:
            print(f"{cls:20} {'-':>9}  {'-':>5}  (no site in these files)")
            continue
        top = ", ".join(f"{r} {n}" for r, n in rules[cls].most_common(4))
        out = "; ".join(f"{r} {n}" for r, n in sorted(skipped[cls].items()))
        print(f"{cls:20} {hit[cls]:4d}/{tot[cls]:<4d}  {100 * hit[cls] / tot[cls]:4.0f}%  {top}"
              + (f"  [left out: {out}]" if out else "")
              + (f"  [missed but warned: {warned[cls]}]" if warned[cls] else ""))
        if show_misses:
            for x in misses[cls]:
                print(f"{'':22}{'LEFT' if 'LEFT OUT' in x else 'MISS'} {x}")
    n, k = sum(tot.values()), sum(hit.values())
    n_out = sum(sum(c.values()) for c in skipped.values())
    print(f"\n{k}/{n} mutants rejected over {len(paths)} files; false alarms on the originals: "
          f"{len(false_alarms)} {false_alarms or ''}; left out (equivalent / never executed / "
          f"inert wait at the emulated launch): {n_out}; {c['seconds']:.0f} s")
    if emulate or default_launch:
        print(f"not emulated (verifier only): {len(static_only)} {static_only or ''}")
    return 1 if false_alarms else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="one row per mutant")
    ap.add_argument("--fast", nargs="*", metavar="PTX", default=None,
                    help="the issue-18 table over fast-corpus PTX files (default: "
                         "tests/verifier/fixtures/fast36/*.ptx and kernels/fast/ptx/*.ptx)")
    ap.add_argument("--misses", action="store_true", help="with --fast: list missed mutants")
    ap.add_argument("--emulate", action="store_true",
                    help="with --fast: a mutant the verifier passes is caught when emulation "
                         "rejects it (HB error, deadlock, fault, wrong output)")
    ap.add_argument("--default-launch", action="store_true",
                    help="with --fast: a mutant the verifier passes is caught when the "
                         "happens-before check of 'ailower verify FILE' (no --kernel: a default "
                         "launch, tensor maps inferred) reports an error")
    ap.add_argument("--max-sites", type=int, default=4,
                    help="with --fast: mutants per class and file (default 4)")
    args = ap.parse_args()
    if args.fast is not None:
        paths = [Path(p) for p in args.fast] or [
            *sorted((ROOT / "tests" / "verifier" / "fixtures" / "fast36").glob("*.ptx")),
            *sorted((ROOT / "kernels" / "fast" / "ptx").glob("*.ptx"))]
        return fast_table(paths, args.misses, args.max_sites, args.emulate,
                          args.default_launch)
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
