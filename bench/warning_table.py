"""Verifier errors and warnings, by rule, per PTX set and arch (issue 18, acceptance point 3).

The sets:

- ``suite39``: every suite kernel (``kernels.names()``, config 0) compiled by the installed
  Triton for sm_80, sm_89, sm_90a and sm_100a (no GPU needed; kernels Triton cannot compile
  for a target are counted as skipped);
- ``suite36``: the checked-in Triton 3.6 PTX of the suite (``tests/verifier/fixtures/triton36``);
- ``fast39``: the ``fast`` family's Triton entries compiled by the installed Triton (sm_90a,
  sm_100a);
- ``fast36``: their checked-in Triton 3.6 PTX (``tests/verifier/fixtures/fast36``);
- ``hand``: the hand-written PTX entries (``kernels/fast/ptx/*.ptx``);
- ``expert``: the expert corpus (``kernels/expert/*/*/kernel.ptx``, threads from ``launch.yaml``).

    python3 bench/warning_table.py [--sets suite39 fast36 ...] [--cache DIR] [--files]

``--cache DIR`` keeps the compiled PTX (``DIR/<set>/<name>_<arch>.ptx``) and reuses it, so a
"before" and an "after" count are taken on the same bytes. ``--files`` also lists each file's
warnings by rule. Output: one line per (set, arch): files, errors, warnings, and the count of
each rule.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from verifier import parse_ptx, verify  # noqa: E402

FIXTURES = ROOT / "tests" / "verifier" / "fixtures"
SUITE_ARCHS = {80: "sm_80", 89: "sm_89", 90: "sm_90a", 100: "sm_100a"}
SETS = ("suite39", "suite36", "fast39", "fast36", "hand", "expert")


def _suite39(cache: Path | None) -> list[tuple[str, str, str, int | None]]:
    """``(name, arch, ptx, threads)`` for config 0 of every suite kernel at every target."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError

    import kernels

    out = []
    for name in kernels.names():
        spec = kernels.get(name)
        cfg = spec.configs()[0]
        for cc, arch in SUITE_ARCHS.items():
            path = cache / "suite39" / f"{name}_{arch}.ptx" if cache else None
            if path is not None and path.exists():
                text = path.read_text()
                out.append((name, arch, text, None if text == "skip" else 32 * cfg.num_warps))
                continue
            src = ASTSource(fn=spec.source.load(), signature=spec.signature(),
                            constexprs=spec.constexprs(cfg), attrs=spec.attrs())
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    k = triton.compile(src, target=GPUTarget("cuda", cc, 32),
                                       options={"num_warps": cfg.num_warps,
                                                "num_stages": cfg.num_stages})
                text = k.asm["ptx"]
            except CompilationError:
                text = "skip"
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            out.append((name, arch, text, None if text == "skip" else 32 * cfg.num_warps))
    return out


def _fast39(cache: Path | None) -> list[tuple[str, str, str, int | None]]:
    """``(name, arch, ptx, threads)`` of every Triton ``fast`` entry at sm_90a and sm_100a."""
    from kernels.fast._common import ARCH_CC, compile_fast
    from kernels.fast.hand_ptx import hand_ptx
    from kernels.registry import get, names

    out = []
    for name in names("fast"):
        if hand_ptx(name) is not None:
            continue
        for arch in sorted(ARCH_CC):
            path = cache / "fast39" / f"{name}_{arch}.ptx" if cache else None
            if path is not None and path.exists():
                text, _, threads = path.read_text().rpartition("\n// threads ")
                out.append((name, arch, text, int(threads)))
                continue
            text, threads = compile_fast(get(name), arch)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"{text}\n// threads {threads}")
            out.append((name, arch, text, threads))
    return out


def _fixtures(folder: str) -> list[tuple[str, str, str, int | None]]:
    out = []
    for p in sorted((FIXTURES / folder).glob("*.ptx")):
        text = p.read_text()
        out.append((p.stem.rsplit("_sm_", 1)[0], parse_ptx(text).arch, text, None))
    return out


def _hand() -> list[tuple[str, str, str, int | None]]:
    from kernels.fast.hand_ptx import HAND_PTX

    return [(h.file.removesuffix(".ptx"), h.arch, h.text(), h.threads) for h in HAND_PTX.values()]


def _expert() -> list[tuple[str, str, str, int | None]]:
    import yaml

    out = []
    for p in sorted((ROOT / "kernels" / "expert").glob("*/*/kernel.ptx")):
        launch = yaml.safe_load((p.parent / "launch.yaml").read_text())
        out.append((p.parent.parent.name, launch["arch"], p.read_text(), int(launch["threads"])))
    return out


def collect(name: str, cache: Path | None) -> list[tuple[str, str, str, int | None]]:
    """The files of set ``name`` as ``(kernel, arch, ptx, threads)`` (``ptx == "skip"`` when
    Triton cannot compile it for the arch).

    Raises:
        KeyError: ``name`` is not one of :data:`SETS`.
    """
    table = {"suite39": lambda: _suite39(cache), "suite36": lambda: _fixtures("triton36"),
             "fast39": lambda: _fast39(cache), "fast36": lambda: _fixtures("fast36"),
             "hand": _hand, "expert": _expert}
    return table[name]()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("--files", action="store_true", help="per-file warnings too")
    args = ap.parse_args()
    for set_name in args.sets:
        rows: dict[str, dict] = {}
        for kernel, arch, text, threads in collect(set_name, args.cache):
            row = rows.setdefault(arch, {"files": 0, "skip": 0, "E": Counter(), "W": Counter()})
            if text == "skip":
                row["skip"] += 1
                continue
            row["files"] += 1
            rep = verify(text, arch=arch, threads=threads, filename=f"{kernel}_{arch}.ptx")
            e = Counter(f.rule for f in rep.errors)
            w = Counter(f.rule for f in rep.warnings)
            row["E"].update(e)
            row["W"].update(w)
            if args.files and (e or w):
                print(f"  {set_name} {kernel}_{arch}: E {dict(e)} W {dict(w)}")
        for arch in sorted(rows, key=lambda a: int("".join(c for c in a if c.isdigit()))):
            r = rows[arch]
            e, w = r["E"], r["W"]
            rules = " ".join(f"{k} {v}" for k, v in sorted((e + w).items()))
            skip = f" ({r['skip']} not compilable)" if r["skip"] else ""
            print(f"{set_name:8s} {arch:8s} {r['files']:3d} files{skip}: "
                  f"{sum(e.values())} E, {sum(w.values())} W  {rules}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
