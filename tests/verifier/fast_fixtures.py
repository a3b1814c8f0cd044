"""Regenerate ``fixtures/fast36/``: the ``fast`` family compiled by Triton 3.6 (the device's
Triton) for sm_90a and sm_100a, one ``<name>_<arch>.ptx`` per entry.

Run it with a Triton 3.6 interpreter (the installed Triton is newer; the tests compile with that
one live)::

    python -m venv --system-site-packages /tmp/venv-t36
    /tmp/venv-t36/bin/pip install triton==3.6.0
    /tmp/venv-t36/bin/pip install --no-deps -e .
    /tmp/venv-t36/bin/python tests/verifier/fast_fixtures.py tests/verifier/fixtures/fast36

Exit status 1 when an entry fails to compile (the message names it) or Triton is not 3.6.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    """Write every fast entry's PTX for both archs into ``argv[0]``; returns the exit status."""
    import triton

    from kernels.fast._common import ARCH_CC, compile_fast
    from kernels.registry import get, names

    if len(argv) != 1:
        print("usage: fast_fixtures.py OUTDIR", file=sys.stderr)
        return 2
    if not triton.__version__.startswith("3.6."):
        print(f"need Triton 3.6, have {triton.__version__}", file=sys.stderr)
        return 1
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    bad = 0
    from kernels.fast.hand_ptx import hand_ptx

    for name in names("fast"):
        if hand_ptx(name) is not None:
            continue  # its kernel is the hand-written PTX (kernels/fast/ptx/), not Triton's
        for arch in ARCH_CC:
            try:
                ptx, _ = compile_fast(get(name), arch)
            except Exception as exc:  # report every entry that fails, then fail
                print(f"{name} {arch}: {type(exc).__name__}: {exc}", file=sys.stderr)
                bad += 1
                continue
            (out / f"{name}_{arch}.ptx").write_text(ptx)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
