#!/usr/bin/env bash
# The H200 acceptance run of the walking skeleton: `ailower lower` with the triton provider for
# each suite kernel (recorded in one database), the runs table, and bench/eval_latency.py.
# Run on the device with .whl carried (see scripts/device_wheels.sh); reports land in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1 AILOWER_DATA_DIR="${AILOWER_DATA_DIR:-/tmp/ailower-acceptance}"
OUTDIR="${OUT:-/tmp/ailower-acceptance-out}"
mkdir -p "$OUTDIR"
date -u +"run at %Y-%m-%dT%H:%MZ"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
for k in vector_add softmax matmul; do
  python3 -m ailower lower "$k" --provider triton --iterations 3 --out "/tmp/ailower-out/$k" 2>&1 | grep -v Warning | tail -4
  cp "/tmp/ailower-out/$k/report.json" "$OUTDIR/report_$k.json"
done
COLUMNS=200 python3 -m ailower runs
python3 bench/eval_latency.py --cache "$AILOWER_DATA_DIR/cache" --json "$OUTDIR/eval_latency.json" 2>&1 | grep -v Warning
python3 - "$OUTDIR" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print(f"{'kernel':<11} {'baseline config':<46} {'base ms':>8} {'best':<46} {'speedup':>7} {'it1':>6} {'correct':>7} {'roofline':>8}")
for k in ("vector_add", "softmax", "matmul"):
    r = json.loads((out / f"report_{k}.json").read_text())
    ev = r["evaluation"]
    cand = next(x for x in ev["kernels"] if x["role"] == "candidate")
    ref = next(x for x in ev["kernels"] if x["role"] == "reference")
    ok = cand["status"] == "ok" and all(c["ok"] for c in cand["checks"]) and len(cand["checks"]) >= 3
    it1 = r["iterations"][0]["speedup"]
    print(f"{k:<11} {r['reference']['baseline']['config']:<46} {ref['timing']['median_ms']:>8.4f} "
          f"{r['candidate']['origin']:<46} {r['speedup']:>7.3f} {it1:>6.3f} {'yes' if ok else 'NO':>7} "
          f"{cand['roofline_fraction']:>8.2f}")
PY
