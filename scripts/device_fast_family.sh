#!/usr/bin/env bash
# Issue 22 items 3-4 on a GPU host (the H200 device image; .whl carried, see device_gpu_tests.sh):
#  1. the fast family's campaign: `ailower suite run fast --provider triton --provider search`;
#  2. compute-sanitizer racecheck + synccheck on every fast entry's Triton baseline (verify size);
#  3. evaluation feedback with ncu for one memory-bound, one GEMM-like, one attention kernel
#     (`ailower lower K --provider search`; the feedback text is read from transcript.jsonl).
# Prints a short table last. Writes everything under $OUT (or ./fast-family-out).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1
OUTDIR="${OUT:-fast-family-out}"
mkdir -p "$OUTDIR"
export AILOWER_DATA_DIR="$OUTDIR/data"
ARCH="${ARCH:-sm_90a}"
ITERS="${ITERS:-3}"
date -u +"start %F %T UTC"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

echo "== 1. fast family campaign ($ARCH, triton + search, $ITERS iterations)"
timeout "${CAMPAIGN_S:-300}" python3 -m ailower suite run fast --arch "$ARCH" --provider triton \
  --provider search --iterations "$ITERS" --json > "$OUTDIR/fast_campaign.jsonl" \
  || echo "campaign exit $? (cells that failed are listed below)"
python3 - "$OUTDIR/fast_campaign.jsonl" <<'PY' | tee "$OUTDIR/fast_cells.txt"
import json, sys
for line in open(sys.argv[1]):
    c = json.loads(line)
    if c.get("event") != "cell":
        continue
    err = (c.get("error") or "")[:120]
    print(f"cell {c['kernel']:26} {c['provider']:7} {c['status']:9} valid={c.get('valid')} "
          f"verr={c.get('verifier_errors')} speedup={c.get('speedup')} {err}")
PY
python3 -m ailower leaderboard > "$OUTDIR/fast_leaderboard.txt" 2>&1 || true

echo "== 2. compute-sanitizer on every fast baseline"
python3 - "$ARCH" "$OUTDIR" <<'PY' | tee "$OUTDIR/fast_sanitizer.txt"
import sys, time
import kernels
from kernels.registry import names
from harness import GPUEvaluator, compile_reference
from harness.candidate import Candidate
from harness.evaluate import race_gate
arch, out = sys.argv[1], sys.argv[2]
ev = GPUEvaluator()
for n in names("fast"):
    spec = kernels.get(n)
    cfg = spec.configs()[0]
    t0 = time.perf_counter()
    try:
        art = compile_reference(spec, arch, cfg)
        cand = Candidate.with_triton_launch(art.ptx, art.abi, cfg.meta, f"triton:{cfg.key()}")
        r = race_gate(spec, art, cand, art.cubin, ev)
        print(f"sanitizer {n:26} ran={r.ran} ok={r.ok} {time.perf_counter() - t0:5.1f}s {r.message[:160]}")
    except Exception as exc:  # report and go on with the next entry
        print(f"sanitizer {n:26} ERROR {type(exc).__name__}: {str(exc)[:200]}")
PY

echo "== 3. ncu feedback excerpts"
for K in softmax gemm.fp16 flash_attention.noncausal; do
  AILOWER_AUTOTUNE_SPACE="${NCU_SPACE:-wide}" timeout "${LOWER_S:-150}" python3 -m ailower lower "$K" --provider search --iterations 2 \
    --out "$OUTDIR/lower_$K" > "$OUTDIR/lower_$K.txt" 2>&1 || echo "lower $K exit $?"
  python3 scripts/feedback_excerpt.py "$OUTDIR/lower_$K/transcript.jsonl" "$K" \
    | tee "$OUTDIR/feedback_$K.txt" | head -40
done
date -u +"end %F %T UTC"
echo "== table"
cat "$OUTDIR/fast_cells.txt" "$OUTDIR/fast_sanitizer.txt"
for K in softmax gemm.fp16 flash_attention.noncausal; do
  printf "feedback %-26s ncu-lines=%s\n" "$K" "$(grep -c -i 'ncu\|dram\|stall' "$OUTDIR/feedback_$K.txt" || true)"
done
