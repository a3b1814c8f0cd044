#!/usr/bin/env bash
# One device call for the end of a session (fits a 10-minute call on the H200): the issue-13
# workflow (eval transcript, export round trip), every GPU test, and the issue-9 benches with
# tight time limits; a short table last. Logs land in $OUT. Carry .whl (scripts/device_wheels.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
OUTDIR="${OUT:-/tmp/ailower-final}"; mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1 AILOWER_DATA_DIR=/tmp/ailower-final-data
export AILOWER_TEST_CACHE=$AILOWER_DATA_DIR/cache AILOWER_VERDICT_LOG=$OUTDIR/verdicts.jsonl
mkdir -p "$AILOWER_TEST_CACHE"
START=$(date -u +%Y-%m-%dT%H:%M:%SZ)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout "${WF_S:-150}" bash scripts/device_workflow.sh > "$OUTDIR/workflow.log" 2>&1; WF=$?
timeout "${GPU_S:-300}" python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -rfEs \
  > "$OUTDIR/gpu_tests.log" 2>&1; PY=$?
timeout "${BENCH_S:-60}" python3 bench/eval_latency.py --cache "$AILOWER_TEST_CACHE" --configs 2 \
  --json "$OUTDIR/eval_latency.json" > "$OUTDIR/eval_latency.txt" 2>&1; EL=$?
timeout "${BENCH_S:-60}" python3 bench/noise.py --cache "$AILOWER_TEST_CACHE" \
  --json "$OUTDIR/noise.json" > "$OUTDIR/noise.txt" 2>&1; NZ=$?
echo "== started $START, ended $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "-- workflow (exit $WF)"; grep -E "PASS|FAIL|SKIP" "$OUTDIR/workflow.log" | tail -12
echo "-- pytest -m gpu tests/gpu (exit $PY)"; grep -E "^(FAILED|ERROR)" "$OUTDIR/gpu_tests.log" | cut -c1-300; tail -1 "$OUTDIR/gpu_tests.log"
echo "-- eval_latency (exit $EL)"; tail -6 "$OUTDIR/eval_latency.txt"
echo "-- noise (exit $NZ)"; tail -6 "$OUTDIR/noise.txt"
