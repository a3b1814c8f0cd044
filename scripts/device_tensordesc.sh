#!/usr/bin/env bash
# Issues 18 and 22 item 3 on a GPU host (the H200 device image; .whl carried, see
# device_gpu_tests.sh): host tensor descriptors.
#  1. tests/gpu/test_tensordesc_launch.py: every fast entry with tensordesc params, Triton
#     baseline vs its float64 reference, Triton's own PTX as a candidate (one line per entry);
#  2. `ailower suite run fast --arch $ARCH --provider triton --iterations 1 --json`.
# Prints a table last. Writes everything under $OUT (or ./tensordesc-out).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1
OUTDIR="${OUT:-tensordesc-out}"
mkdir -p "$OUTDIR"
export AILOWER_DATA_DIR="$OUTDIR/data"
ARCH="${ARCH:-sm_90a}"
date -u +"start %F %T UTC"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
python3 -c "import triton, cuda.bindings; print('triton', triton.__version__, 'cuda-bindings', cuda.bindings.__version__)" || true

echo "== 1. GPU test: descriptor entries"
timeout "${TEST_S:-420}" python3 -m pytest -q -s -m gpu tests/gpu/test_tensordesc_launch.py -p no:cacheprovider \
  2>&1 | tee "$OUTDIR/tensordesc_test.txt"
echo "pytest exit ${PIPESTATUS[0]}"

echo "== 2. fast family, triton provider ($ARCH, 1 iteration)"
timeout "${CAMPAIGN_S:-300}" python3 -m ailower suite run fast --arch "$ARCH" --provider triton \
  --iterations 1 --json > "$OUTDIR/fast_triton.jsonl" 2> "$OUTDIR/fast_triton.err"
echo "suite exit $?"
tail -3 "$OUTDIR/fast_triton.err" || true

echo "== table"
grep -h '^tensordesc ' "$OUTDIR/tensordesc_test.txt" | awk '{printf "test  %-26s %s %s %s %s\n", $2, $4, $6, $7, $9}'
python3 - "$OUTDIR/fast_triton.jsonl" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    try:
        c = json.loads(line)
    except ValueError:
        continue
    if c.get("event") == "cell":
        rows.append(c)
print(f"{'suite kernel':32} {'provider':8} {'status':10} {'speedup':>8}  error")
for c in rows:
    sp = c.get("speedup")
    print(f"{c['kernel']:32} {c['provider']:8} {c['status']:10} "
          f"{(f'{sp:.3f}' if isinstance(sp, (int, float)) else '-'):>8}  {(c.get('error') or '')[:90]}")
print(f"{len(rows)} cells")
PY
