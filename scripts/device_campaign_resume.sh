#!/usr/bin/env bash
# Issues 10 and 11 on the H200 over several device calls (one call is at most 10 minutes):
#   1. campaign `h200-search`: the `search` provider over the 32 suite entries on sm_90a, the
#      compute-bound and paper entries first (iterations 2: the search's winner, then the
#      autotuned baseline, which is always a candidate);
#   2. campaign `h200-triton`: the `triton` provider over the 32 entries (iteration 1);
# each resumable. Every call works until DEADLINE_S seconds (default 540), then saves the run
# database to $OUT/state.tgz and prints the leaderboard and the search table
# (`python3 -m search.suite --leaderboard`). The next call continues from that state:
#
#   here:   ./scripts/device_wheels.sh                       (once; fills .whl/, git-ignored)
#   there:  ./scripts/device_campaign_resume.sh              (carry .whl)
#   here:   mkdir -p .dev/device-state && cp FILES_AT/state.tgz .dev/device-state/
#   there:  ./scripts/device_campaign_resume.sh              (carry .whl and .dev/device-state)
#   ... until both campaigns report "end event: yes".
#
# A fresh machine restores the state from .dev/device-state/state.tgz when its data directory
# has no database; a warm one keeps its own (and its compile cache). Cells cut by the deadline
# are claimed again on the next call (a dead owner on this host at once, else after the 15 s lease).
# Search budgets: AILOWER_SEARCH_BUDGET_S (dot kernels, default here 22 s) and
# AILOWER_SEARCH_MEMORY_BUDGET_S (memory-bound kernels, default here 6 s).
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
DEADLINE_S="${DEADLINE_S:-540}"
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1 AILOWER_DATA_DIR="${AILOWER_DATA_DIR:-/tmp/ailower-final}"
export AILOWER_SEARCH_BUDGET_S="${AILOWER_SEARCH_BUDGET_S:-22}"
export AILOWER_SEARCH_MEMORY_BUDGET_S="${AILOWER_SEARCH_MEMORY_BUDGET_S:-6}"
OUTDIR="${OUT:-/tmp/ailower-final-out}"
mkdir -p "$OUTDIR" "$AILOWER_DATA_DIR"
if [ ! -f "$AILOWER_DATA_DIR/ailower.db" ] && [ -f .dev/device-state/state.tgz ]; then
  tar xzf .dev/device-state/state.tgz -C "$AILOWER_DATA_DIR"
  echo "restored the run database from .dev/device-state/state.tgz"
fi
echo "call at $(date -u +%Y-%m-%dT%H:%M:%SZ), data dir $AILOWER_DATA_DIR, deadline ${DEADLINE_S} s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

left() { echo $(( DEADLINE_S - ($(date +%s) - T0) )); }
HEAVY="bitdelta bitdelta_batched mamba2_chunk_scan flash_attention.noncausal gemm.fp16 gemm.fp8
gemm_silu.fp16 gemm_silu.fp8 conv2d.fp16 conv2d.fp8 matmul flash_sinkhorn flash_attention.causal
sage_attention forgetting_attention mamba2_chunk_state lion dion_update"
AIL=(python3 -m ailower)
campaign() {  # NAME LOG ARGS...: run until the deadline (minus 45 s for saving and the tables)
  local name=$1 log=$2; shift 2
  local budget=$(( $(left) - 45 ))
  if [ "$budget" -lt 20 ]; then echo "$name: no time left in this call"; return 0; fi
  local t=$(date +%s) rc=0
  timeout -s TERM -k 10 "$budget" "${AIL[@]}" suite run "$@" --campaign "$name" --arch sm_90a \
    --cpu-workers 1 --precompile-workers 12 --lease-s 15 --json >> "$OUTDIR/$log.jsonl" \
    2>> "$OUTDIR/$log.err" || rc=$?
  echo "$name ($log): exit $rc after $(( $(date +%s) - t )) s"
}
set +e
# shellcheck disable=SC2086
campaign h200-search search-heavy $HEAVY --provider search --iterations 2
campaign h200-search search-all all --provider search --iterations 2
campaign h200-triton triton all --provider triton --iterations 1
set -e

rm -f "$OUTDIR/state.tgz"
( cd "$AILOWER_DATA_DIR" && tar czf "$OUTDIR/state.tgz" ailower.db* )
COLUMNS=230 "${AIL[@]}" leaderboard --html "$OUTDIR/leaderboard.html" > "$OUTDIR/leaderboard.txt"
"${AIL[@]}" leaderboard --json > "$OUTDIR/leaderboard.json"
python3 - "$OUTDIR" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for name in ("search-heavy", "search-all", "triton"):
    p = out / f"{name}.jsonl"
    ls = [json.loads(x) for x in p.read_text().splitlines() if x.startswith("{")] if p.exists() else []
    cells = [x for x in ls if x["event"] == "cell"]
    end = [x for x in ls if x["event"] == "end"]
    fails = [f"{c['kernel']}: {(c.get('error') or '')[:200]}" for c in cells if c["status"] != "done"]
    print(f"{name}: {len(cells)} cells finished in this call, end event: {'yes' if end else 'NO'}, "
          f"verifier errors {sum(c.get('verifier_errors') or 0 for c in cells)}; failed: {fails or 'none'}")
lb = json.loads((out / "leaderboard.json").read_text())
for s in lb["summary"]:
    g = f"{s['geomean_speedup']:.3f}x" if s["geomean_speedup"] else "-"
    print(f"summary {s['arch']} {s['who']}: cells {s['cells']}, timed {s['timed']}, geomean {g}, "
          f"W/T/L {s['win']}/{s['tie']}/{s['loss']}, invalid {s['invalid']}, failed {s['failed']}, "
          f"verifier errors {s['verifier_errors']}")
PY
python3 -m search.suite --leaderboard "$OUTDIR/leaderboard.json" || true
echo "call took $(( $(date +%s) - T0 )) s"
