"""compute-sanitizer racecheck/synccheck on Triton baselines, with the whole report (issue 22).

The harness's race gate (:func:`harness.evaluate.race_gate`) keeps the first 8 report lines; to
decide whether a hazard on Triton's own kernel (``fast.attention_ws``) is a real race, this runs
the same ``launch_once`` request of the baseline (config 0, verify size, seed 0) under
``compute-sanitizer --tool racecheck --racecheck-report all`` and ``--tool synccheck`` and writes
the full text, the PTX and the SASS with line info (``nvdisasm -g``) under ``$OUT/racecheck/``.
Prints one summary line per kernel and tool last.

    python3 scripts/device_racecheck.py fast.attention_ws fast.attention_tma [--arch sm_90a]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kernels  # noqa: E402
from harness import GPUEvaluator, compile_reference  # noqa: E402
from harness.candidate import Candidate  # noqa: E402
from harness.evaluate import candidate_request  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--arch", default="sm_90a")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "/tmp")) / "racecheck"
    out.mkdir(parents=True, exist_ok=True)
    ev = GPUEvaluator()
    tool_path = ev.find_sanitizer()
    if tool_path is None:
        print("compute-sanitizer not found")
        return 2
    summary = []
    for name in args.kernels:
        spec = kernels.get(name)
        cfg = spec.configs()[0]
        art = compile_reference(spec, args.arch, cfg)
        cand = Candidate.with_triton_launch(art.ptx, art.abi, cfg.meta, "triton")
        safe = name.replace(".", "_")
        (out / f"{safe}.ptx").write_text(art.ptx)
        (out / f"{safe}.cubin").write_bytes(art.cubin)
        nvdis = shutil.which("nvdisasm")
        if nvdis:
            with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                f.write(art.cubin)
                f.flush()
                p = subprocess.run([nvdis, "-g", "-c", f.name], capture_output=True, text=True)
                (out / f"{safe}.sass").write_text(p.stdout + p.stderr)
        req = candidate_request(spec, art, cand, art.cubin, ev, time_it=False)
        one = req.model_copy(update={"job": "launch_once", "seeds": req.seeds[:1]})
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for tool, extra in (("racecheck", ["--racecheck-report", "all"]), ("synccheck", [])):
            cmd = [tool_path, "--tool", tool, *extra, "--print-limit", "200",
                   sys.executable, "-m", "harness.gpu.worker", "--once"]
            p = subprocess.run(cmd, input=one.model_dump_json() + "\n", capture_output=True,
                               text=True, timeout=300, env=env, cwd=str(ROOT))
            text = p.stdout + p.stderr
            (out / f"{safe}.{tool}.txt").write_text(text)
            m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)", text)
            e = re.search(r"ERROR SUMMARY: (\d+) error", text)
            summary.append(f"{name:24} {tool:9} rc={p.returncode} "
                           f"{m.group(0) if m else ''} {e.group(0) if e else ''}")
            print(f"--- {name} {tool}: first report lines")
            print("\n".join([ln for ln in text.splitlines() if ln.startswith("=====")][:40]))
    print("\n== racecheck summary")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
