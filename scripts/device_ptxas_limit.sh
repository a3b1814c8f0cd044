#!/usr/bin/env bash
# On the GPU device (Triton 3.6's bundled ptxas): every checked-in suite and fast fixture
# assembles under the ptxas address-space limit (harness.ptxas, AILOWER_PTXAS_MEMORY_MB) at the
# default and at 256 MiB; then the harness's GPU tests run (an end-to-end evaluation assembles
# through the same call). Usage there: ./scripts/device_ptxas_limit.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_device_site.sh
export PYTHONUNBUFFERED=1
python3 - <<'PY'
import glob, time
from harness.ptxas import assemble, resolve_ptxas
files = sorted(glob.glob("tests/verifier/fixtures/triton36/*.ptx") +
               glob.glob("tests/verifier/fixtures/fast36/*.ptx"))
print("ptxas:", resolve_ptxas("sm_90a")[::2])
for lim in (None, 256):
    bad, worst = [], (0.0, "")
    for f in files:
        arch = next(a for a in ("sm_100a", "sm_90a", "sm_89", "sm_80") if a in f)
        t = time.perf_counter()
        r = assemble(open(f).read(), arch, memory_mb=lim)
        dt = time.perf_counter() - t
        worst = max(worst, (dt, f))
        if not r.ok:
            bad.append((f, [d.message for d in r.errors][:2]))
    print(f"limit {lim or 'default'} MiB: {len(files) - len(bad)}/{len(files)} assemble; "
          f"slowest {worst[0]:.2f} s ({worst[1].split('/')[-1]})")
    for b in bad[:5]:
        print("  FAIL", b)
PY
python3 -m pytest -m gpu -q -p no:cacheprovider tests/harness "$@"
