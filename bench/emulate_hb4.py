"""The emulator's HB4 findings on every Triton 3.6 fast fixture (``tests/verifier/fixtures/fast36``),
split into the former init-fence warnings (message naming who ``initialised`` the mbarrier) and
the others (generic-proxy bytes read by the async proxy). No GPU; about a minute on the 2-core
host.

    python3 bench/emulate_hb4.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kernels  # noqa: E402
from emulator import run_kernel  # noqa: E402


def main() -> int:
    files = init = other = 0
    for p in sorted((ROOT / "tests" / "verifier" / "fixtures" / "fast36").glob("*.ptx")):
        name, _, arch = p.stem.rpartition("_sm_")
        res = run_kernel(p.read_text(), kernels.get(name), "sm_" + arch,
                         global_scratch_size=4096, time_limit_s=60, filename=p.name)
        hb4 = [f for f in res.findings if f.rule == "HB4"]
        n_init = sum("initialised" in f.message for f in hb4)
        files, init, other = files + bool(n_init), init + n_init, other + len(hb4) - n_init
        print(f"{p.stem:34s} {res.status:8s} HB4 init-fence {n_init}  other HB4 {len(hb4) - n_init}")
    print(f"files with an init-fence HB4: {files}; init-fence HB4: {init}; other HB4: {other}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
