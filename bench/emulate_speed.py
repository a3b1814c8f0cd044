"""Emulator coverage and speed: every checked-in Triton 3.6 suite PTX (sm_80, sm_90a, sm_100a).

For each fixture ``tests/verifier/fixtures/triton36/<kernel>_<arch>.ptx`` it runs
:func:`emulator.run_kernel` at the spec's ``verify`` size (or ``--dims`` scaled sizes) with race
analysis on, and prints one row: status, seconds, instructions x threads executed, HB findings,
and for unsupported entries the first instruction the emulator lacks (file:line:col).
Columns: status, wall seconds, CPU seconds of this process (the fairer number on a shared
machine), CTAs emulated / of the grid, M lane-instructions, HB findings, message.

``--fast`` runs the ``fast`` family (TMA, warp specialization: ``kernels/fast/``) on its
Triton 3.6 fixtures (``tests/verifier/fixtures/fast36``; with ``--local-triton`` compiled by the
installed Triton) on sm_90a and sm_100a; the fixtures carry no metadata, so a device-side
descriptor kernel gets 4 KiB of global scratch per CTA (more than Triton's 128 B per
descriptor). ``--realk`` runs the emulator's own kernel set instead (tests/emulator/realk: Triton 3.9 PTX for
sm_90a and sm_100a), ``--size bench`` each spec at its bench size (where representative CTA
subsets act), ``--all-ctas`` without subsets. ``--realworld`` runs the real-world spec set
(``tests/kernels/realworld/specs/*.yaml``, the sizes of the kernels' authors), each compiled by the
installed Triton with its first config, as ``ailower lower --no-gpu`` emulates it; ``--kernel``
then names specs (``rw_matmul``). ``--backend`` picks the race-check backend
(``emulator.hb_backend``: ``numba`` or ``numpy``); every row says which one ran.

Usage::

    python3 bench/emulate_speed.py [--arch sm_80 --arch sm_90a] [--kernel softmax] \\
        [--time-limit 60] [--json out.json] [--realk | --realworld | --fast] [--size bench]
        [--all-ctas] [--backend numba|numpy]

Runs one entry at a time in this process (2-core machines: do not parallelise).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "tests" / "verifier" / "fixtures" / "triton36"
REALWORLD = ROOT / "tests" / "kernels" / "realworld" / "specs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", default=None)
    ap.add_argument("--kernel", action="append", default=None)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--no-race", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--local-triton", action="store_true",
                    help="compile each entry with the installed Triton (first config) instead of "
                         "reading the Triton 3.6 fixtures")
    ap.add_argument("--cache-dir", type=Path, default=Path("/tmp/ailower-emu-cache"))
    ap.add_argument("--realk", action="store_true",
                    help="run the emulator's own kernel set (tests/emulator/realk: Triton 3.9 "
                         "PTX for sm_90a and sm_100a) instead of the suite")
    ap.add_argument("--fast", action="store_true",
                    help="run the fast family (TMA, warp specialization) on sm_90a/sm_100a")
    ap.add_argument("--realworld", action="store_true",
                    help="run the real-world spec set (tests/kernels/realworld/specs), compiled "
                         "by the installed Triton (first config)")
    ap.add_argument("--backend", default=None,
                    help="race-check backend (numba or numpy; default: the emulator's default)")
    ap.add_argument("--size", default="verify", help="named size of each spec (default verify)")
    ap.add_argument("--all-ctas", action="store_true",
                    help="emulate the whole grid or time out (no representative CTA subset)")
    args = ap.parse_args()

    import kernels
    import emulator
    from emulator import run_kernel

    backend = "numba (the only one)"
    if hasattr(emulator, "hb_backend"):
        if args.backend:
            emulator.set_hb_backend(args.backend)
        backend = emulator.hb_backend()
        if not args.no_race:
            # import the backend (numba) before timing, as an emulator that imports numba with
            # its modules does at import
            from emulator import _hbkern
            _hbkern.kernels()
    elif args.backend:
        ap.error("this emulator has no selectable race-check backend")
    print(f"emulator: {Path(emulator.__file__).parent}; race-check backend: {backend}",
          flush=True)
    archs = args.arch or (["sm_90a", "sm_100a"] if args.realk or args.fast or args.realworld
                          else ["sm_80", "sm_90a", "sm_100a"])
    fixtures = FIXTURES.parent / "fast36" if args.fast else FIXTURES
    if args.realk:
        from tests.emulator import realk
        table = realk.specs()
    elif args.realworld:
        table = {}
        for path in sorted(REALWORLD.glob("*.yaml")):
            sp = kernels.load_spec(path)
            table[sp.name] = sp
    else:
        table = {n: kernels.get(n) for n in kernels.names("fast" if args.fast else "suite")}
    names = args.kernel or list(table)
    rows = []
    for name in names:
        spec = table[name]
        for arch in archs:
            extra: dict = {}
            if args.realk:
                fx = realk.fixture(name, arch)
                if fx is None:
                    continue
                text, meta = fx
                fname = f"{name}_{arch}.ptx"
                extra = dict(config=kernels.spec.Config(**meta["config"]),
                             dynamic_smem=meta["dynamic_smem"],
                             global_scratch_size=meta["global_scratch_size"])
            elif args.local_triton or args.realworld:
                from harness import ReferenceCompileError, compile_reference
                try:
                    art = compile_reference(spec, arch, spec.configs()[0],
                                            cache_dir=args.cache_dir)
                except ReferenceCompileError as exc:
                    print(f"{name:28s} {arch:8s} no-reference {str(exc)[:100]}", flush=True)
                    continue
                text, fname = art.ptx, f"{name}_{arch}_triton{art.triton_version}.ptx"
                extra = dict(config=art.config, dynamic_smem=art.abi.dynamic_smem,
                             global_scratch_size=art.abi.global_scratch_size)
            else:
                path = fixtures / f"{name}_{arch}.ptx"
                if not path.exists():
                    continue
                text, fname = path.read_text(), path.name
                if args.fast:
                    extra = dict(global_scratch_size=4096)
            t0, c0 = time.perf_counter(), time.process_time()
            res = run_kernel(text, spec, arch, size=args.size, filename=fname,
                             race=not args.no_race, cta_subset=not args.all_ctas,
                             time_limit_s=args.time_limit, **extra)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0
            row = {"kernel": name, "arch": arch, "backend": backend, "status": res.status,
                   "seconds": round(wall, 2),
                   "cpu_seconds": round(cpu, 2),
                   "ctas": f"{res.ctas_emulated}/{res.ctas_total}",
                   "lane_insts": res.lane_insts, "findings": [f"{f.rule}@{f.line}" for f in
                                                              res.findings],
                   "errors": [f"{f.rule}@{f.line}" for f in res.findings
                              if f.severity == "error"],
                   "message": res.message if res.status != "ok" else "",
                   "max_err": {k: c.max_abs_err for k, c in res.outputs.items()}}
            rows.append(row)
            print(f"{name:28s} {arch:8s} {res.status:12s} {wall:7.2f} s {cpu:7.2f} cpu-s "
                  f"{row['ctas']:>9s} CTAs "
                  f"{res.lane_insts / 1e6:8.2f} M  {' '.join(row['findings']) or '-':10s} "
                  f"{row['message'][:110]}", flush=True)
    ok = sum(r["status"] == "ok" and not r["errors"] for r in rows)
    warn = sum(r["status"] == "ok" and not r["errors"] and bool(r["findings"]) for r in rows)
    print(f"\n{ok} of {len(rows)} entries match the float64 reference with no HB error "
          f"({warn} of them with HB warnings)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
