"""Emulate the red-team bug/ok pairs (``tests/verifier/redteam_fast/bugs``) on a default launch.

The files have no spec, so ``tests/verifier/redteam_fast/run.py`` (``ailower verify``) checks
them statically only; this runs each through :func:`emulator.run_launch` with one CTA of the
file's ``.reqntid`` threads, every 64-bit parameter a pointer to its own zero-filled 1 MiB
buffer, every other scalar 4, array parameters (tensor maps) zero bytes (so kernels that need a
real descriptor fault on both files of the pair), 227 KiB of dynamic shared memory, and prints
status and HB error rules per file. A measurement, not a test.

    python3 bench/emulate_redteam.py
"""
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from emulator import GlobalMemory, Launch, run_launch  # noqa: E402

D = ROOT / "tests" / "verifier" / "redteam_fast" / "bugs"
for p in sorted(D.glob("*.ptx")):
    t = p.read_text()
    params = re.findall(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+"
                        r"(?:\.ptr\s+\S+\s+(?:\.align\s+\d+\s+)?)?(\w+)(\[\d+\])?", t)
    thr = int(re.search(r"\.reqntid\s+(\d+)", t).group(1))
    gm = GlobalMemory(); pr = {}
    for ty, name, arr in params:
        if arr: pr[name] = bytes(int(arr[1:-1])); continue
        if ty in ("u64", "b64", "s64"):
            pr[name] = gm.add(name, np.zeros(1 << 20, np.uint8)).to_bytes(8, "little")
        else:
            pr[name] = (4).to_bytes(4, "little")
    try:
        launch = Launch(grid=(1, 1, 1), threads=thr, params=pr, dynamic_smem=232448)
        r = run_launch(t, launch, gm, filename=p.name, time_limit_s=30)
        errs = sorted({f.rule for f in r.findings if f.severity == "error"})
        print(f"{p.name:42s} {r.status:10s} {','.join(errs) or '-':12s} {r.message[:80]}")
    except Exception as e:  # noqa: BLE001 - unsupported instructions / syntax: printed, not hidden
        print(f"{p.name:42s} {type(e).__name__}: {str(e)[:90]}")
