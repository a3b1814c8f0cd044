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
# SEARCH_BUDGET (seconds for the whole search part, default 150), STEPS (default "narrow wide
# search": run a subset per device call when one call (10 min) is too short; the table reads
# whatever parts exist, and `python3 bench/device_baselines_table.py DIR` rebuilds it on any
# machine), OUT (default /tmp/ailower-baselines; $OUT on the device machine comes back). Budgeted
# for ~8 min of GPU time for the whole suite: the compiles (16 cores) and input draws are shared
# by both baselines (inputs are keyed without the autotune space; the capped widened spaces hold
# 971 configs, 196 of them the narrow ones); every step prints its wall time.
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
STEPS=${STEPS:-narrow wide search}
t0=$(date +%s)
for step in $STEPS; do
  case "$step" in
    narrow)
      echo "== narrow (pre-issue-22) autotune spaces"
      python3 -m ailower baseline "${KARGS[@]}" --space narrow --no-vendor \
        --json "$DIR/narrow.json" > "$DIR/narrow.txt" 2> "$DIR/narrow.log" ;;
    wide)
      echo "== widened autotune spaces (at most $MAX_CONFIGS configs per entry)"
      python3 -m ailower baseline "${KARGS[@]}" --space wide --max-configs "$MAX_CONFIGS" \
        --no-vendor --json "$DIR/wide.json" > "$DIR/wide.txt" 2> "$DIR/wide.log" ;;
    search)
      echo "== search candidates of the memory-bound entries, isolated and in a pipeline context"
      # shellcheck disable=SC2086
      AILOWER_AUTOTUNE_SPACE=wide python3 -m search.suite --kernels $PIPE_KERNELS --pipeline \
        --total-budget "$SEARCH_BUDGET" --out "$DIR/search" > "$DIR/search.txt" 2> "$DIR/search.log" ;;
    *) echo "unknown step $step (narrow, wide, search)"; false ;;
  esac
  echo "$step: rc=$? ($(( $(date +%s) - t0 )) s since the start)"
done
python3 bench/device_baselines_table.py "$DIR" | tee "$DIR/table.txt"
