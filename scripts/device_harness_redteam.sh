#!/usr/bin/env bash
# The red team and both benches without the slower pipeline tests (a shorter device call than
# device_harness_acceptance.sh); prints each verdict in one line, then the bench tables.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 AILOWER_DATA_DIR="${AILOWER_DATA_DIR:-/tmp/ailower-harness}"
export AILOWER_TEST_CACHE="$AILOWER_DATA_DIR/cache"
OUTDIR="${OUT:-/tmp/ailower-harness-out}"
export AILOWER_VERDICT_LOG="$OUTDIR/verdicts.jsonl"
mkdir -p "$OUTDIR" "$AILOWER_TEST_CACHE"
date -u +"start %Y-%m-%dT%H:%M:%SZ"
timeout "${RT_TIMEOUT:-140}" python3 -m pytest -m gpu tests/gpu/test_redteam.py -q -p no:cacheprovider \
  -rfEs > "$OUTDIR/redteam.log" 2>&1
echo "redteam pytest exit $?: $(tail -1 "$OUTDIR/redteam.log")"
python3 - "$AILOWER_VERDICT_LOG" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    v = json.loads(line)
    print(f"{v['name'][:34]:<34} {v['stage']:<10} {v['seconds']:5.1f}s {v['message'][:170]!r}")
PY
grep -E "^(FAILED|ERROR)" "$OUTDIR/redteam.log" | cut -c1-300
timeout "${EL_TIMEOUT:-45}" python3 bench/eval_latency.py --cache "$AILOWER_TEST_CACHE" --configs 2 \
  --json "$OUTDIR/eval_latency.json" > "$OUTDIR/eval_latency.txt" 2>&1
tail -5 "$OUTDIR/eval_latency.txt"
timeout "${NZ_TIMEOUT:-70}" python3 bench/noise.py --cache "$AILOWER_TEST_CACHE" \
  --json "$OUTDIR/noise.json" > "$OUTDIR/noise.txt" 2>&1
tail -5 "$OUTDIR/noise.txt"
date -u +"end %Y-%m-%dT%H:%M:%SZ"
