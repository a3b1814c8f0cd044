#!/usr/bin/env bash
# Issue 9 acceptance on the GPU host: the GPU tests (tests/gpu: red team, controls, pipeline),
# bench/eval_latency.py (10 candidates per kernel, median <= 1.0 s) and bench/noise.py (same PTX
# 20x, >= 19 within [0.995, 1.005]); a short table last. Logs and JSON land in $OUT.
#   bash scripts/device_harness_acceptance.sh [pytest -k expression]
# On the device image (no pydantic & co.), carry .whl (scripts/device_wheels.sh) or set PYTHONPATH.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1 AILOWER_DATA_DIR="${AILOWER_DATA_DIR:-/tmp/ailower-harness}"
export AILOWER_TEST_CACHE="$AILOWER_DATA_DIR/cache" AILOWER_VERDICT_LOG="${OUT:-/tmp/ailower-harness-out}/verdicts.jsonl"
OUTDIR="${OUT:-/tmp/ailower-harness-out}"
mkdir -p "$OUTDIR" "$AILOWER_TEST_CACHE"
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "compute-sanitizer: ${SAN:-not found}"
K=()
[ $# -gt 0 ] && K=(-k "$1")
timeout 420 python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -rfEs "${K[@]}" \
  --junitxml "$OUTDIR/gpu_tests.xml" > "$OUTDIR/gpu_tests.log" 2>&1
PYRC=$?
grep -E "^(FAILED|ERROR|SKIPPED)" "$OUTDIR/gpu_tests.log" | cut -c1-400
timeout 240 python3 bench/eval_latency.py --cache "$AILOWER_TEST_CACHE" --configs 2 \
  --json "$OUTDIR/eval_latency.json" > "$OUTDIR/eval_latency.txt" 2>&1
ELRC=$?
timeout 240 python3 bench/noise.py --cache "$AILOWER_TEST_CACHE" \
  --json "$OUTDIR/noise.json" > "$OUTDIR/noise.txt" 2>&1
NZRC=$?
echo "== issue 9 acceptance, started $START, ended $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "pytest -m gpu tests/gpu (exit $PYRC): $(tail -1 "$OUTDIR/gpu_tests.log")"
echo "-- bench/eval_latency.py (exit $ELRC)"; tail -5 "$OUTDIR/eval_latency.txt"
echo "-- bench/noise.py (exit $NZRC)"; tail -5 "$OUTDIR/noise.txt"
[ $PYRC -eq 0 ] && [ $ELRC -eq 0 ] && [ $NZRC -eq 0 ]
