#!/usr/bin/env bash
# The `search` provider over every suite entry on the GPU (issue 11's acceptance table).
# Runs `ailower lower K --provider search` for all 32 suite entries on sm_90a, each with a search
# wall budget sized so that the whole run fits SEARCH_TOTAL_S seconds (default 480 = 8 min),
# then prints one row per entry (speedup over the autotuned baseline as measured by the loop's
# 3-seed evaluation, winning transformation, rejected candidates) and the geometric means.
#   here:   ./scripts/device_wheels.sh      (once; fills .whl/, git-ignored)
#   there:  ./scripts/device_search.sh [--kernels K ...] [--total-budget S]   (.whl carried)
# Writes per-entry reports, logs and summary.json under $OUT/search-suite (or ./search-suite).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/ailower-site .whl/*.whl
  export PYTHONPATH="/tmp/ailower-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
export AILOWER_DATA_DIR="${AILOWER_DATA_DIR:-/tmp/ailower-search}"
python3 -m search.suite --arch sm_90a --total-budget "${SEARCH_TOTAL_S:-480}" \
  --out "${OUT:-.}/search-suite" "$@"
