"""The sandboxed reference compile (run only by :func:`server.sandbox.compile_untrusted`, inside
the bubblewrap box, as a top-level module: it imports nothing from :mod:`server`).

Reads one JSON request on stdin (``spec``, ``arch``, ``cache_dir``, ``home``, ``result``,
``max_ptx_version``), compiles every config of the spec into ``cache_dir`` with
:func:`harness.compile_space`, and writes ``result``:
``{"compiled": [config keys], "failures": [messages], "expected": [config keys]}`` or
``{"error": message}``. The untrusted source runs in this process (Triton imports it and runs its
compile-time Python), so nothing here is trusted by the parent beyond being data.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    """Entry point; see the module docstring."""
    req = json.loads(sys.stdin.read())
    os.makedirs(req["home"], exist_ok=True)
    os.environ["HOME"] = req["home"]
    os.environ["TRITON_CACHE_DIR"] = os.path.join(req["home"], "triton-cache")
    os.environ["TRITON_DEFAULT_FP_FUSION"] = "1"
    os.chdir(req["home"])
    from pathlib import Path

    from harness import compile_space
    from kernels import KernelSpec

    try:
        spec = KernelSpec.model_validate(req["spec"])
        ok, bad = compile_space(spec, req["arch"], cache_dir=Path(req["cache_dir"]),
                                max_ptx_version=req["max_ptx_version"])
        out = {"compiled": [a.config.key() for a in ok], "failures": [str(f) for f in bad],
               "expected": [c.key() for c in spec.configs()]}
    except Exception as exc:  # reported to the parent as data: the child has no other channel
        out = {"error": f"{type(exc).__name__}: {exc}"[:4000]}
    with open(req["result"], "w") as f:
        json.dump(out, f)
    sys.stdout.flush()
