"""Parse and full-check time of the verifier on the largest suite PTX (no GPU needed).

Compiles every suite kernel (``kernels.all_specs()``, config 0, plus every ``matmul`` config) at
the given targets, reports ``parse_ptx`` and ``verify`` (parse + every rule, analyses included)
best-of-``--repeat`` times on the largest PTX, then on a stress module that replicates that kernel
(as renamed ``.func`` copies, so the module keeps one ``.entry``) to at least ``--lines`` lines,
and times the ``ailower verify`` command itself (process start included) on the largest PTX.

    python3 bench/verify_speed.py [--lines 40000] [--repeat 5] [--cc 80 90 100]
    python3 bench/verify_speed.py --targets-only      # the bounded-analysis targets, no Triton

The targets (issue 12, speed): ``shared/cases/verifier/slow_redefinition_chain.ptx`` (512 chained
``fma`` on one register, checked-in copy in ``tests/verifier/fixtures/cases``) <= 1 s; the
largest checked-in suite PTX (``tests/verifier/fixtures/triton36/*sm_100a*.ptx``) <= 2 s; the
same PTX with 1000 chained ``add`` on one register inserted mid-kernel <= 2 s; 1000 predicated
``add`` on one register (every definition reaches every later use) <= 1 s. Each is reported
as best-of-``--repeat`` wall time and the CPU time of that run (``time.process_time``: on a
shared, loaded machine wall time overstates the cost), with PASS/FAIL against the target.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verifier import parse_ptx, verify

ARCHS = {80: "sm_80", 89: "sm_89", 90: "sm_90a", 100: "sm_100a"}


def compile_all(ccs: list[int]) -> list[tuple[int, str, str]]:
    """``(cc, "kernel/config", ptx)`` for config 0 of every suite kernel and every matmul config
    at each target (kernels Triton cannot compile for a target are skipped)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError

    import kernels

    out = []
    for spec in kernels.all_specs():
        fn = spec.source.load()
        cfgs = spec.configs() if spec.name == "matmul" else spec.configs()[:1]
        for cc in ccs:
            for i, cfg in enumerate(cfgs):
                src = ASTSource(fn=fn, signature=spec.signature(),
                                constexprs=spec.constexprs(cfg), attrs=spec.attrs())
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        k = triton.compile(src, target=GPUTarget("cuda", cc, 32),
                                           options={"num_warps": cfg.num_warps,
                                                    "num_stages": cfg.num_stages})
                except CompilationError:
                    continue
                out.append((cc, f"{spec.name}/{i}", k.asm["ptx"]))
    return out


def replicate(ptx: str, name: str, min_lines: int) -> str:
    """Append renamed ``.func`` copies of the entry until the text has ``min_lines`` lines."""
    start = ptx.index(".visible .entry")
    end = ptx.find("\t.file", start)
    end = len(ptx) if end < 0 else end
    head, kernel, tail = ptx[:start], ptx[start:end], ptx[end:]
    parts = [head, kernel]
    lines = ptx.count("\n")
    k = 0
    while lines < min_lines:
        k += 1
        copy = kernel.replace(".visible .entry", ".func", 1).replace(name, f"{name}_copy{k}")
        parts.append(copy)
        lines += kernel.count("\n")
    parts.append(tail)
    return "".join(parts)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "verifier" / "fixtures"


def add_chain(ptx: str, n: int = 1000) -> str:
    """``ptx`` with a fresh ``.b32`` register and ``n`` chained ``add.s32 r, r, 1`` inserted after
    the middle instruction of the kernel (the register's declared range grows by one)."""
    m = re.search(r"\.reg \.b32\s+%r<(\d+)>;", ptx)
    if m is None:
        raise ValueError("no '.reg .b32 %r<N>;' declaration to extend")
    k = int(m.group(1))
    ptx = ptx[:m.start()] + f".reg .b32 %r<{k + 1}>;" + ptx[m.end():]
    lines = ptx.split("\n")
    body = [j for j, ln in enumerate(lines) if ln.strip().endswith(";")
            and not ln.strip().startswith(".") and "bra" not in ln]
    mid = body[len(body) // 2]
    ins = [f"\tmov.b32 %r{k}, 0;"] + [f"\tadd.s32 %r{k}, %r{k}, 1;"] * n
    return "\n".join(lines[:mid + 1] + ins + lines[mid + 1:])


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """``(best wall s, CPU s of that run, result)`` over ``repeat`` runs."""
    out = (float("inf"), 0.0, None)
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        r = fn()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if dt < out[0]:
            out = (dt, dc, r)
    return out


def targets(repeat: int) -> bool:
    """Time the issue-12 speed targets; print one row each; True when all pass (CPU time)."""
    largest = max(sorted((FIXTURES / "triton36").glob("*sm_100a*.ptx")),
                  key=lambda p: p.read_text().count("\n"))
    big = largest.read_text()
    cases = [
        ("slow_redefinition_chain.ptx (512 chained fma)",
         (FIXTURES / "cases" / "slow_redefinition_chain.ptx").read_text(), "sm_90a", 1.0),
        (f"largest suite PTX {largest.name}", big, "sm_100a", 2.0),
        (f"{largest.name} + 1000 chained add", add_chain(big), "sm_100a", 2.0),
    ]
    guarded = "\n".join(["  @%p1 add.s32 %r1, %r1, 1;"] * 1000)
    cases.append(("1000 guarded (predicated) adds on one register",
                  ".version 8.0\n.target sm_90a\n.address_size 64\n"
                  ".visible .entry k(.param .u32 p)\n{\n .reg .b32 %r<8>;\n .reg .pred %p<4>;\n"
                  " ld.param.u32 %r2, [p];\n mov.b32 %r1, 0;\n mov.u32 %r3, %tid.x;\n"
                  " setp.eq.u32 %p1, %r3, %r2;\n" + guarded + "\n ret;\n}\n", "sm_90a", 1.0))
    for p in sorted((FIXTURES / "triton36").glob("*sm_100a*.ptx")):
        if p.name.startswith(("flash_sinkhorn", "forgetting_attention")) and p != largest:
            cases.append((f"suite PTX {p.name}", p.read_text(), "sm_100a", 2.0))
    ok_all = True
    print(f"{'case':58s} {'lines':>6s} {'wall s':>7s} {'cpu s':>7s} {'target':>7s}  result")
    for name, text, arch, limit in cases:
        wall, cpu, rep = timed(lambda t=text, a=arch: verify(t, arch=a), repeat)
        ok = cpu <= limit and rep.ok
        ok_all &= ok
        notes = sum(f.severity == "note" for f in rep.findings)
        print(f"{name:58s} {text.count(chr(10)):6d} {wall:7.2f} {cpu:7.2f} {limit:7.1f}  "
              f"{'PASS' if ok else 'FAIL'} ({len(rep.errors)} errors, {notes} notes)")
    return ok_all


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=40000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cc", type=int, nargs="+", default=[80, 90, 100])
    ap.add_argument("--targets-only", action="store_true",
                    help="only the bounded-analysis targets (no Triton compilation)")
    args = ap.parse_args()

    ok = targets(min(args.repeat, 3))
    if args.targets_only:
        sys.exit(0 if ok else 1)

    t0 = time.perf_counter()
    compiled = compile_all(args.cc)
    print(f"compiled {len(compiled)} suite PTX modules in {time.perf_counter() - t0:.1f} s")
    worst = (0.0, "")
    for cc, i, ptx in compiled:
        t = best(lambda ptx=ptx, cc=cc: verify(ptx, arch=ARCHS[cc]), 1)
        worst = max(worst, (t, f"{ARCHS[cc]} {i}"))
    print(f"slowest full check over the suite: {worst[0] * 1e3:.1f} ms ({worst[1]})")
    cc, i, ptx = max(compiled, key=lambda c: c[2].count("\n"))
    arch = ARCHS[cc]
    name = parse_ptx(ptx).entries[0].name
    nl = ptx.count("\n")
    rep = verify(ptx, arch=arch)
    assert rep.ok, rep.render("concise")
    t_parse = best(lambda: parse_ptx(ptx), args.repeat)
    t_full = best(lambda: verify(ptx, arch=arch), args.repeat)
    print(f"largest suite PTX: {i} for {arch}, {nl} lines")
    print(f"  parse_ptx: {t_parse * 1e3:8.1f} ms")
    print(f"  verify   : {t_full * 1e3:8.1f} ms  ({len(rep.rules)} rules, {len(rep.findings)} "
          f"findings: {len(rep.errors)} errors, {len(rep.warnings)} warnings)")
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as fh:
        fh.write(ptx)
    cli = [sys.executable, "-c", "import sys, typer; from ailower.cmd_verify import "
           "verify_command; typer.run(verify_command)", fh.name, "--arch", arch,
           "--no-emulate"]
    t0 = time.perf_counter()
    r = subprocess.run(cli, capture_output=True, text=True)
    t_cli = time.perf_counter() - t0
    print(f"  'ailower verify' (cmd_verify.verify_command in a fresh process): {t_cli:.2f} s, "
          f"exit {r.returncode}")
    big = replicate(ptx, name, args.lines)
    nlines = big.count("\n")
    print(f"stress: {arch} {i} ({ptx.count(chr(10))} lines); replicated to {nlines} lines, "
          f"{len(big) / 1e6:.1f} MB")

    report = verify(big, arch=arch)
    assert report.ok, report.render("concise")[:2000]
    t_parse = best(lambda: parse_ptx(big), args.repeat)
    t_full = best(lambda: verify(big, arch=arch), args.repeat)
    print(f"parse_ptx: {t_parse * 1e3:8.1f} ms  ({nlines / t_parse / 1e3:.0f}k lines/s)")
    print(f"verify   : {t_full * 1e3:8.1f} ms  (parse + {len(report.rules)} rules, "
          f"{len(report.findings)} findings)")


if __name__ == "__main__":
    main()
