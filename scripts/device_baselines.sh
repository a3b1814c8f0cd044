#!/usr/bin/env bash
# Issue 22 items 5 and 6 on the H200: per suite entry the old (narrow) and the widened autotuned
# Triton baseline (ms, best config, configs tuned, seconds per config), then the memory-bound
# entries' best search candidates timed in a pipeline context (a producer writes the inputs, a
# consumer reads the outputs) next to their isolated timing; prints a short table last.
#   here:   ./scripts/device_wheels.sh            (once; fills .whl/, git-ignored)
#   there:  ./scripts/device_baselines.sh          (with .whl carried along)
# Knobs (environment): KERNELS (default: the whole suite), PIPE_KERNELS (default: softmax rmsnorm
# relu.fp16 silu.fp16 swiglu.fp16 vector_add), MAX_CONFIGS (widened space cap per entry, default
# 40: the narrow configs first, then every k-th of the rest; rows say when they were capped),
# SEARCH_BUDGET (seconds for the whole search part, default 150), OUT (default
# /tmp/ailower-baselines; $OUT on the device machine comes back). Budgeted for ~8 min of GPU time:
# the compiles (16 cores) and input draws are shared by both baselines (inputs are keyed without
# the autotune space).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1
DIR=${OUT:-/tmp/ailower-baselines}
mkdir -p "$DIR"
MAX_CONFIGS=${MAX_CONFIGS:-40}
SEARCH_BUDGET=${SEARCH_BUDGET:-150}
PIPE_KERNELS=${PIPE_KERNELS:-softmax rmsnorm relu.fp16 silu.fp16 swiglu.fp16 vector_add}
KARGS=()
for k in ${KERNELS:-}; do KARGS+=(--kernels "$k"); done
[ ${#KARGS[@]} -eq 0 ] && KARGS=(--suite)
t0=$(date +%s)
echo "== narrow (pre-issue-22) autotune spaces"
python3 -m ailower baseline "${KARGS[@]}" --space narrow --no-vendor --json "$DIR/narrow.json" \
  > "$DIR/narrow.txt" 2> "$DIR/narrow.log"; echo "rc=$? ($(( $(date +%s) - t0 )) s)"
echo "== widened autotune spaces (at most $MAX_CONFIGS configs per entry)"
python3 -m ailower baseline "${KARGS[@]}" --space wide --max-configs "$MAX_CONFIGS" --no-vendor \
  --json "$DIR/wide.json" > "$DIR/wide.txt" 2> "$DIR/wide.log"; echo "rc=$? ($(( $(date +%s) - t0 )) s)"
echo "== search candidates of the memory-bound entries, isolated and in a pipeline context"
# shellcheck disable=SC2086
AILOWER_AUTOTUNE_SPACE=wide python3 -m search.suite --kernels $PIPE_KERNELS --pipeline \
  --total-budget "$SEARCH_BUDGET" --out "$DIR/search" > "$DIR/search.txt" 2> "$DIR/search.log"
echo "rc=$? ($(( $(date +%s) - t0 )) s)"
python3 bench/device_baselines_table.py "$DIR" | tee "$DIR/table.txt"
