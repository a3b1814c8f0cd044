#!/usr/bin/env bash
# The H200 campaign run (issue 10): `ailower suite run` over all 32 suite entries for sm_90a on
# the GPU (provider triton, plus `search` when agent/providers/search.py exists, or PROVIDERS),
# and, at the same time on the CPU cores, the static campaigns for sm_89 and sm_100a (every
# config of every autotune space compiled, assembled and verified); then `ailower leaderboard`.
# Designed to fit ~8 minutes of device time: each campaign runs under BUDGET_S (default 360 s);
# a campaign stopped by the budget is resumable (rerun this script with the same AILOWER_DATA_DIR)
# and the leaderboard shows the cells that finished.
#
#   here:   ./scripts/device_wheels.sh   (once; fills .whl/, git-ignored; plotly for the HTML)
#   there:  ./scripts/device_campaign.sh  (with .whl carried; logs, JSON and HTML under $OUT)
#
# Ray is NOT exercised here: the ray wheel (~79 MB for cp312) does not fit the 64 MiB carry limit.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/ailower-site .whl/*.whl
  export PYTHONPATH="/tmp/ailower-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1 AILOWER_DATA_DIR="${AILOWER_DATA_DIR:-/tmp/ailower-campaign}"
OUTDIR="${OUT:-/tmp/ailower-campaign-out}"
BUDGET_S="${BUDGET_S:-360}"
KERNELS="${KERNELS:-all}"        # selectors: all = the 32 suite entries
ITER_GPU="${ITER_GPU:-1}"        # triton provider: iteration 1 = the autotuned config's own PTX
ITER_STATIC="${ITER_STATIC:-9}"  # static: every config of each space (<= 9), then 'exhausted'
STATIC_WORKERS="${STATIC_WORKERS:-6}"
PRECOMPILE_WORKERS="${PRECOMPILE_WORKERS:-8}"
if [ -z "${PROVIDERS:-}" ]; then
  PROVIDERS="triton"
  [ -f agent/providers/search.py ] && PROVIDERS="triton search"
fi
PARGS=()
for p in $PROVIDERS; do PARGS+=(--provider "$p"); done
mkdir -p "$OUTDIR"
AIL=(python3 -m ailower)
echo "campaign run at $(date -u +%Y-%m-%dT%H:%M:%SZ); providers: $PROVIDERS; budget ${BUDGET_S} s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

# static sm_89 + sm_100a (no GPU of those archs here) on CPU workers, in the background
( set +e
  t0=$(date +%s.%N)
  timeout -s TERM "$BUDGET_S" "${AIL[@]}" suite run $KERNELS --arch sm_89 --arch sm_100a \
    --provider triton --iterations "$ITER_STATIC" --campaign h200-static \
    --cpu-workers "$STATIC_WORKERS" --json > "$OUTDIR/static.jsonl" 2> "$OUTDIR/static.err"
  echo "$? $(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$t0")" \
    > "$OUTDIR/static.rc" ) &
STATIC_PID=$!

# sm_90a on the GPU: one worker per visible GPU, Triton compiles warmed on spare cores
set +e
t0=$(date +%s.%N)
timeout -s TERM "$BUDGET_S" "${AIL[@]}" suite run $KERNELS --arch sm_90a "${PARGS[@]}" \
  --iterations "$ITER_GPU" --campaign h200-sm90a --cpu-workers 1 \
  --precompile-workers "$PRECOMPILE_WORKERS" --json > "$OUTDIR/sm90a.jsonl" 2> "$OUTDIR/sm90a.err"
GPU_RC=$?
GPU_WALL=$(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$t0")
wait "$STATIC_PID"
set -e
read -r STATIC_RC STATIC_WALL < "$OUTDIR/static.rc"
tail -3 "$OUTDIR/sm90a.err" "$OUTDIR/static.err" 2>/dev/null | grep -v Warning || true

COLUMNS=220 "${AIL[@]}" leaderboard --html "$OUTDIR/leaderboard.html" | tee "$OUTDIR/leaderboard.txt"
"${AIL[@]}" leaderboard --json > "$OUTDIR/leaderboard.json"
python3 - "$OUTDIR" "$GPU_RC" "$GPU_WALL" "$STATIC_RC" "$STATIC_WALL" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
def lines(name):
    p = out / name
    return [json.loads(x) for x in p.read_text().splitlines() if x.startswith("{")] if p.exists() else []
for name, rc, wall in (("sm90a", sys.argv[2], sys.argv[3]), ("static", sys.argv[4], sys.argv[5])):
    ls = lines(f"{name}.jsonl")
    cells = [x for x in ls if x["event"] == "cell"]
    end = next((x for x in ls if x["event"] == "end"), None)
    per_arch = {}
    for c in cells:
        a = per_arch.setdefault(c["arch"], {"done": 0, "failed": 0, "verifier_errors": 0,
                                            "modes": set()})
        a["done" if c["status"] == "done" else "failed"] += 1
        a["verifier_errors"] += c.get("verifier_errors") or 0
        a["modes"].add(c.get("mode"))
    print(f"campaign {name}: exit {rc}, wall {wall} s, end event: "
          f"{'yes' if end else 'NO (stopped by the budget)'}")
    for a, v in sorted(per_arch.items()):
        print(f"  {a}: {v['done']} done, {v['failed']} failed, mode {sorted(v['modes'])}, "
              f"verifier errors over every iteration: {v['verifier_errors']}")
    for c in cells:
        if c["status"] == "failed":
            print(f"  FAILED {c['kernel']} {c['arch']}: {(c.get('error') or '')[:300]}")
lb = json.loads((out / "leaderboard.json").read_text())
for s in lb["summary"]:
    g = f"{s['geomean_speedup']:.3f}x" if s["geomean_speedup"] else "-"
    print(f"summary {s['arch']} {s['who']}: cells {s['cells']}, timed {s['timed']}, geomean {g}, "
          f"W/T/L {s['win']}/{s['tie']}/{s['loss']}, static {s['static']}, no valid "
          f"{s['invalid']}, failed {s['failed']}, verifier errors {s['verifier_errors']}")
PY
