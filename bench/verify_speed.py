"""Parse and full-check time of the verifier on large Triton PTX (no GPU needed).

Compiles the suite's ``matmul`` for every autotune config at the given targets, takes the largest
PTX, and replicates its kernel (as renamed ``.func`` copies, so the module keeps one ``.entry``)
until the module has at least ``--lines`` lines. Prints best-of-``--repeat`` wall times for
``parse_ptx`` and for ``verify`` (parse + every rule).

    python3 bench/verify_speed.py [--lines 40000] [--repeat 5] [--cc 80 90 100]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verifier import parse_ptx, verify

ARCHS = {80: "sm_80", 89: "sm_89", 90: "sm_90a", 100: "sm_100a"}


def compile_all(ccs: list[int]) -> list[tuple[int, int, str]]:
    """``(cc, config index, ptx)`` for every matmul config at each target."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.import_module("kernels.suite.matmul").SPEC
    fn = spec.source.load()
    out = []
    for cc in ccs:
        for i, cfg in enumerate(spec.configs()):
            src = ASTSource(fn=fn, signature=spec.signature(), constexprs=spec.constexprs(cfg),
                            attrs=spec.attrs())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                k = triton.compile(src, target=GPUTarget("cuda", cc, 32),
                                   options={"num_warps": cfg.num_warps,
                                            "num_stages": cfg.num_stages})
            out.append((cc, i, k.asm["ptx"]))
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=40000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cc", type=int, nargs="+", default=[80, 90, 100])
    args = ap.parse_args()

    t0 = time.perf_counter()
    compiled = compile_all(args.cc)
    print(f"compiled {len(compiled)} matmul variants in {time.perf_counter() - t0:.1f} s")
    for cc, i, ptx in compiled:
        ms = best(lambda ptx=ptx: parse_ptx(ptx), args.repeat) * 1e3
        print(f"  {ARCHS[cc]:8} config {i}: {ptx.count(chr(10)):6d} lines, parse {ms:7.1f} ms")
    cc, i, ptx = max(compiled, key=lambda c: c[2].count("\n"))
    arch = ARCHS[cc]
    name = parse_ptx(ptx).entries[0].name
    big = replicate(ptx, name, args.lines)
    nlines = big.count("\n")
    print(f"largest: {arch} config {i} ({ptx.count(chr(10))} lines); replicated to {nlines} lines, "
          f"{len(big) / 1e6:.1f} MB")

    report = verify(big, arch=arch)
    assert report.ok, report.render("concise")
    t_parse = best(lambda: parse_ptx(big), args.repeat)
    t_full = best(lambda: verify(big, arch=arch), args.repeat)
    print(f"parse_ptx: {t_parse * 1e3:8.1f} ms  ({nlines / t_parse / 1e3:.0f}k lines/s)")
    print(f"verify   : {t_full * 1e3:8.1f} ms  (parse + {len(report.rules)} rules, "
          f"{len(report.findings)} findings)")


if __name__ == "__main__":
    main()
