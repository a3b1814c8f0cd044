#!/usr/bin/env bash
# The `search` provider over the suite on the GPU (issue 11's acceptance table).
# Runs `ailower lower K --provider search --iterations 2` for the suite entries on sm_90a, each
# with a search wall budget sized so that the run fits SEARCH_TOTAL_S seconds (default 420), then
# prints one row per entry (speedup of the kept candidate over the autotuned baseline, measured by
# the loop's own 3-seed evaluation; the winning transformation; rejected candidates) and the
# geometric means (compute-bound + paper kernels, and all).
#
# All 32 entries take about 15 minutes on the H200 (measured 2026-12-01: ~45 s per compute/paper
# entry with a 6-11 s search budget, ~14 s of it outside the search), more than one device call
# allows (10 min), so run it in two parts and merge the two summaries:
#   here:   ./scripts/device_wheels.sh                        (once; fills .whl/, git-ignored)
#   there:  ./scripts/device_search.sh --part 1/2             (.whl carried; ~7 min)
#   there:  ./scripts/device_search.sh --part 2/2             (second call)
#   here:   python3 -m search.suite --merge part1/summary.json part2/summary.json
# Other options: --kernels K ..., --total-budget S, --max-configs N (see python3 -m search.suite -h).
# Writes per-entry reports, transcripts and summary.json under $OUT/search-suite (or ./search-suite);
# $OUT/search-suite.tgz holds them all when $OUT is set (the device returns at most 8 files).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1
export AILOWER_DATA_DIR="${AILOWER_DATA_DIR:-/tmp/ailower-search}"
dest=/tmp/search-suite
rc=0
python3 -m search.suite --arch sm_90a --total-budget "${SEARCH_TOTAL_S:-420}" --out "$dest" "$@" \
  || rc=$?
if [ -n "${OUT:-}" ]; then
  cp "$dest/summary.json" "$OUT/summary.json" 2>/dev/null || true
  tar czf "$OUT/search-suite.tgz" -C /tmp search-suite
fi
exit $rc
