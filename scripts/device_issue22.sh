#!/usr/bin/env bash
# Issue 22 on the H200 in as few device calls as possible: each STEP has its own time limit so one
# slow part cannot eat the others; every step's output lands under /tmp/issue22/<step>/; a table last.
#   here:   ./scripts/device_wheels.sh                       (once; fills .whl/, git-ignored)
#   there:  STEPS="gpu_tests racecheck vendor" ./scripts/device_issue22.sh   (.whl carried)
# Steps: gpu_tests (pytest -m gpu), racecheck (scripts/device_racecheck.py on the attention
# baselines), vendor (python -m harness.vendor on the entries of the acceptance), fast
# (scripts/device_fast_family.sh: fast-family campaign, sanitizer on every fast baseline, ncu
# feedback with the narrow spaces), baselines (scripts/device_baselines.sh narrow + wide),
# pipeline (its search step: pipeline-context timing), expert (the expert row as a campaign:
# leaderboard cells, vendor column), expert_debug (why an expert candidate is not valid: the
# evaluation feedback per kernel). Small text outputs are copied to $OUT (at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1
# every step writes under WORK; one tarball (and the step table) comes back in $OUT (the device
# tool returns at most 8 files)
FINAL=${OUT:-/tmp/issue22-out}
ROOTOUT=/tmp/issue22
mkdir -p "$FINAL" "$ROOTOUT"
STEPS=${STEPS:-gpu_tests racecheck vendor}
declare -A RC SECS
date -u +"start %F %T UTC"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
for step in $STEPS; do
  d="$ROOTOUT/$step"; mkdir -p "$d"; t0=$(date +%s)
  echo "== $step ($(date -u +%T))"
  case "$step" in
    gpu_tests) OUT="$d" timeout "${GPU_TESTS_S:-360}" ./scripts/device_gpu_tests.sh \
                 --ignore=tests/emulator -q -rs ${GPU_TEST_ARGS:-} > "$d/pytest.txt" 2>&1; RC[$step]=$?
               tail -n 15 "$d/pytest.txt" ;;
    racecheck) OUT="$ROOTOUT" timeout "${RACE_S:-150}" python3 scripts/device_racecheck.py \
                 ${RACE_KERNELS:-fast.attention_ws fast.attention_tma} > "$d/out.txt" 2>&1; RC[$step]=$?
               tail -n 8 "$d/out.txt" ;;
    vendor) timeout "${VENDOR_S:-150}" python3 -m harness.vendor --reps 50 \
              ${VENDOR_KERNELS:-gemm.fp16 gemm.fp8 gemm_silu.fp8 conv2d.fp16 conv2d.fp8 flash_attention.noncausal flash_attention.causal bitdelta bitdelta_batched softmax} \
              > "$d/vendor.json" 2> "$d/vendor.err"; RC[$step]=$?
            python3 - "$d/vendor.json" <<'PY'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    print(f"vendor: no result ({exc})"); sys.exit(0)
for r in rows if isinstance(rows, list) else rows.values():
    print(f"vendor {r.get('kernel'):26} {r.get('median_ms')} ms  {r.get('path')}  correct={r.get('correct')} {r.get('reason','')[:80]}")
PY
            ;;
    fast) OUT="$d" CAMPAIGN_S=${CAMPAIGN_S:-240} LOWER_S=${LOWER_S:-90} NCU_SPACE=narrow \
            timeout "${FAST_S:-480}" ./scripts/device_fast_family.sh > "$d/out.txt" 2>&1; RC[$step]=$?
          sed -n '/== table/,$p' "$d/out.txt" ;;
    baselines) OUT="$d" STEPS="narrow wide" timeout "${BASELINES_S:-540}" ./scripts/device_baselines.sh \
                 > "$d/out.txt" 2>&1; RC[$step]=$?; tail -n 45 "$d/out.txt" ;;
    pipeline) OUT="$d" STEPS=search SEARCH_BUDGET=${SEARCH_BUDGET:-150} timeout "${PIPE_S:-300}" \
                ./scripts/device_baselines.sh > "$d/out.txt" 2>&1; RC[$step]=$?; tail -n 20 "$d/out.txt" ;;
    expert)  # the expert row as a campaign (leaderboard cells), the baseline autotuned over at
             # most MAX_CONFIGS configs of the widened space, vendor times for the ratio column
      EK=${EXPERT_KERNELS:-softmax gemm.fp8 gemm_silu.fp8 bitdelta bitdelta_batched conv2d.fp16 conv2d.fp8}
      export AILOWER_DATA_DIR="$d/data" AILOWER_AUTOTUNE_MAX_CONFIGS=${MAX_CONFIGS:-40}
      timeout 90 python3 -m harness.vendor --reps 50 $EK > "$d/vendor.json" 2> "$d/vendor.err"
      timeout "${EXPERT_S:-420}" python3 -m ailower suite run $EK --arch sm_90a --provider expert \
        --iterations 1 --precompile-workers 0 --json > "$d/cells.jsonl" 2> "$d/suite.err"; RC[$step]=$?
      # EXPERT_ROWS (e.g. "triton search"): the same entries with other providers in the same
      # data dir, so the leaderboard has their rows side by side with the expert's
      for prov in ${EXPERT_ROWS:-}; do
        timeout "${ROWS_S:-120}" python3 -m ailower suite run $EK --arch sm_90a --provider "$prov" \
          --iterations 1 --precompile-workers 0 --json >> "$d/cells.jsonl" 2>> "$d/suite.err"
      done
      python3 -m ailower leaderboard --arch sm_90a --vendor "$d/vendor.json" --html "$d/leaderboard.html" \
        > "$d/leaderboard.txt" 2>&1
      COLUMNS=200 python3 -m ailower leaderboard --arch sm_90a --vendor "$d/vendor.json" --json > "$d/leaderboard.json" 2>&1
      cat "$d/leaderboard.txt"; unset AILOWER_DATA_DIR AILOWER_AUTOTUNE_MAX_CONFIGS ;;
    expert_debug)  # why an expert candidate is not valid on the GPU: verdict, messages per kernel
      export AILOWER_DATA_DIR="$d/data" AILOWER_AUTOTUNE_MAX_CONFIGS=${DEBUG_MAX_CONFIGS:-4}
      for k in ${DEBUG_KERNELS:-gemm.fp8 conv2d.fp8 bitdelta bitdelta_batched}; do
        timeout "${DEBUG_S:-60}" python3 -m ailower lower "$k" --provider expert --arch sm_90a \
          --iterations 1 --out "$d/$k" > "$d/$k.txt" 2>&1
        python3 - "$d/$k" "$k" "$d/$k.txt" <<'PY' >> "$d/summary.txt"
import json, sys
from pathlib import Path
folder, k, log = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
rep = None
for cand in (folder / "report.json", Path(str(folder) + ".failed") / "report.json"):
    if cand.exists():
        rep = json.loads(cand.read_text()); break
print(f"===== {k}")
if rep is None:
    print("no report; log tail:"); print(log.read_text()[-3000:]); sys.exit(0)
for it in rep.get("iterations", []):
    print("iteration", it.get("index"), it.get("origin"), it.get("verdict"))
    for key in ("provider_error", "reason", "message", "race_gate", "emulation"):
        if it.get(key):
            print(f"  {key}: {json.dumps(it[key], default=str)[:1500]}")
    if it.get("feedback"):  # the GPU verdict is at the end, after the verifier findings
        print("  feedback (end):", str(it["feedback"])[-2500:])
    ev = it.get("evaluation") or {}
    for kk in ev.get("kernels", []):
        print(f"  kernel {kk.get('role')} {kk.get('label')} {kk.get('status')} {str(kk.get('message'))[:800]}")
    if ev.get("message"):
        print("  eval message:", str(ev.get("message"))[:800])
tx = folder / "transcript.jsonl"
if not tx.exists():
    tx = Path(str(folder) + ".failed") / "transcript.jsonl"
if tx.exists():
    for line in tx.read_text().splitlines():
        ev = json.loads(line)
        if ev.get("event") in ("iteration", "evaluation", "race_gate", "rejected", "verdict"):
            e = ev.get("evaluation") or {}
            print("  tx", ev.get("event"), "status", e.get("status"), str(e.get("message"))[:1500])
            for kk in e.get("kernels", []):
                kk.pop("timing", None); kk.pop("samples", None)
                print("    kernel", json.dumps(kk, default=str)[:2000])
            for key in ("race_gate", "emulation", "reason"):
                if ev.get(key):
                    print(f"    {key}:", json.dumps(ev[key], default=str)[:1500])
print(log.read_text()[-1500:])
PY
      done
      unset AILOWER_DATA_DIR AILOWER_AUTOTUNE_MAX_CONFIGS; RC[$step]=0; tail -n 30 "$d/summary.txt" ;;
    raceprobe)  # does racecheck follow barrier.sync from different PCs? (bench/racecheck_probe)
      timeout "${PROBE_S:-120}" python3 bench/racecheck_probe/probe.py --all > "$d/out.txt" 2>&1; RC[$step]=$?
      sed -n '/== table/,$p' "$d/out.txt" ;;
    ncu)  # evaluation feedback with ncu: memory-bound, GEMM-like (attention: NCU_KERNELS)
      for K in ${NCU_KERNELS:-softmax gemm.fp16}; do
        AILOWER_DATA_DIR="$d/data" AILOWER_AUTOTUNE_MAX_CONFIGS=${NCU_MAX_CONFIGS:-4} \
          timeout "${LOWER_S:-90}" python3 -m ailower lower "$K" --provider search --iterations 2 \
          --out "$d/lower_$K" > "$d/lower_$K.txt" 2>&1; echo "lower $K rc=$?"
        python3 scripts/feedback_excerpt.py "$d/lower_$K/transcript.jsonl" "$K" --max-chars 5000 \
          >> "$d/feedback.txt"
        tail -n 25 "$d/lower_$K.txt" >> "$d/feedback.txt"
      done
      RC[$step]=0; grep -c -i "ncu\|dram\|stall" "$d/feedback.txt" ;;
    fastsearch)  # the fast family's search cells
      AILOWER_DATA_DIR="$d/data" AILOWER_AUTOTUNE_MAX_CONFIGS=${FS_MAX_CONFIGS:-8} \
        timeout "${FS_S:-450}" python3 -m ailower suite run ${FS_KERNELS:-fast} --arch sm_90a --provider search \
        --iterations ${FS_ITERS:-1} --json > "$d/cells.jsonl" 2> "$d/suite.err"; RC[$step]=$?
      python3 - "$d/cells.jsonl" <<'PY' | tee "$d/cells.txt"
import json, sys
for line in open(sys.argv[1]):
    c = json.loads(line)
    if c.get("event") != "cell":
        continue
    print(f"cell {c['kernel']:26} {c['provider']:7} {c['status']:9} valid={c.get('valid')} "
          f"verr={c.get('verifier_errors')} speedup={c.get('speedup')} {(c.get('error') or '')[:100]}")
PY
      ;;
    *) echo "unknown step $step"; RC[$step]=2 ;;
  esac
  SECS[$step]=$(( $(date +%s) - t0 ))
done
date -u +"end %F %T UTC"
echo "== steps"
for step in $STEPS; do printf "%-10s rc=%-4s %5s s\n" "$step" "${RC[$step]}" "${SECS[$step]}"; done | tee "$FINAL/steps.txt"
# small text outputs only (the data dirs hold GiBs of cached inputs): at most 8 files come back
for f in ${BACK_FILES:-racecheck/fast_attention_ws.racecheck.txt expert/leaderboard.txt expert/cells.jsonl \
         expert_debug/summary.txt fast/out.txt baselines/out.txt gpu_tests/pytest.txt}; do
  [ -f "$ROOTOUT/$f" ] && head -c 4000000 "$ROOTOUT/$f" > "$FINAL/$(echo "$f" | tr / _)"
done
ls -la "$FINAL"
