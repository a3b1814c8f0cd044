#!/usr/bin/env bash
# The expert corpus on the GPU (issue 19): `ailower lower K --provider expert --arch sm_90a` for
# every sm_90a entry of kernels/expert/, then a table (last): kernel, correct, verdict, the
# expert candidate's speedup over the autotuned Triton baseline with its 95% CI (the loop's
# paired, interleaved timing), roofline fraction of the expert and of Triton, and the ratio to
# the vendor path (harness/vendor.py, as `ailower baseline` measures it).
# --iterations 1: only the expert candidate is evaluated, so report.json's evaluation is its own
# (iteration 2 would be the baseline itself, which the paired timing already measures).
#   here:   ./scripts/device_wheels.sh            (once; fills .whl/, git-ignored)
#   there:  ./scripts/device_expert.sh [KERNEL ...]   (.whl carried; default: every sm_90a entry)
# Writes $OUT/expert/<kernel>/{report.json,transcript.jsonl} and $OUT/expert/table.txt when $OUT
# is set (else under /tmp/expert-gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1
export AILOWER_DATA_DIR="${AILOWER_DATA_DIR:-/tmp/ailower-expert}"
dest="${OUT:-/tmp/expert-gpu}/expert"
mkdir -p "$dest"
if [ "$#" -gt 0 ]; then
  kernels=("$@")
else
  mapfile -t kernels < <(python3 -c "from kernels.expert import entries
print('\n'.join(e.kernel for e in entries() if e.arch == 'sm_90a'))")
fi
for k in "${kernels[@]}"; do
  echo "== $k"
  python3 -m ailower lower "$k" --provider expert --arch sm_90a --iterations 1 \
    --out "$dest/$k" 2>&1 | tail -n 25
  rm -f "$dest/$k"/*.cubin "$dest/$k.failed"/*.cubin
done
python3 -m harness.vendor --reps 50 "${kernels[@]}" > "$dest/vendor.json" 2> "$dest/vendor.err" \
  || echo "vendor measurement failed: $(tail -n 3 "$dest/vendor.err")"
echo
python3 scripts/_expert_table.py "$dest" "$dest/vendor.json" "${kernels[@]}" | tee "$dest/table.txt"
