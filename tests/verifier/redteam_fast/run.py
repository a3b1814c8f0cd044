"""Red-team measurement runner (issue 18): run `ailower verify` on every file here, print a table.

Rows: file, expected verdict (ok = correct code, bug = has a bug), got (ok / ERROR), the error
rule ids (warnings in brackets), and a mark: FALSE-ALARM (error on correct code) or MISS (no
error on a bug). Triton PTX under triton/ (from gen.py) is all correct code; bugs/ (from
make_bugs.py) holds <case>_ok.ptx / <case>_bug.ptx pairs. A measurement, not a CI test.
Run: python tests/verifier/redteam_fast/run.py   (exit 0 always; the table is the result)
"""
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def ailower_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("ailower")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ailower")
    if not found:
        raise SystemExit("run.py: no `ailower` executable next to the interpreter or on PATH")
    return [found]


def arch_of(p: Path) -> str:
    for line in p.read_text().splitlines():
        if line.strip().startswith(".target"):
            return line.split()[1].rstrip(",")
    raise SystemExit(f"{p}: no .target line")


def verify(p: Path) -> tuple[list[str], list[str], str]:
    r = subprocess.run(ailower_cmd() + ["verify", str(p), "--arch", arch_of(p), "--json"],
                       capture_output=True, text=True, timeout=120)
    try:
        rep = json.loads(r.stdout)
    except json.JSONDecodeError:
        return ["PARSE/CRASH"], [], (r.stdout + r.stderr).strip().splitlines()[-1:][0] if (r.stdout + r.stderr).strip() else "no output"
    errs = [f["rule"] for f in rep.get("findings", []) if f.get("severity") == "error"]
    warns = [f["rule"] for f in rep.get("findings", []) if f.get("severity") == "warning"]
    first = next((f.get("message", "") for f in rep.get("findings", []) if f.get("severity") == "error"), "")
    return errs, warns, first


def fmt(rules: list[str]) -> str:
    return ",".join(f"{k}x{v}" if v > 1 else k for k, v in sorted(Counter(rules).items()))


def main() -> int:
    rows = [(p, "ok") for p in sorted((HERE / "triton").glob("*.ptx"))]
    for p in sorted((HERE / "bugs").glob("*.ptx")):
        rows.append((p, "bug" if p.stem.endswith("_bug") else "ok"))
    fa = miss = 0
    print(f"{'file':52} {'expect':6} {'got':6} {'errors [warnings]':40} mark")
    for p, exp in rows:
        errs, warns, msg = verify(p)
        got = "ERROR" if errs else "ok"
        mark = ""
        if exp == "ok" and errs:
            mark, fa = "FALSE-ALARM", fa + 1
        elif exp == "bug" and not errs:
            mark, miss = "MISS", miss + 1
        rules = fmt(errs) + (f" [{fmt(warns)}]" if warns else "")
        print(f"{p.parent.name + '/' + p.name:52} {exp:6} {got:6} {rules:40} {mark}")
        if mark == "FALSE-ALARM" and msg:
            print(f"{'':52}   first error: {msg[:150]}")
    n_ok = sum(1 for _, e in rows if e == "ok")
    n_bug = len(rows) - n_ok
    print(f"\ncorrect files: {n_ok}, false alarms: {fa}; bugs: {n_bug}, caught: {n_bug - miss}, missed: {miss}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
