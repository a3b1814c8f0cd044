"""The sandboxed reference compile (run only by :func:`server.sandbox.compile_untrusted`).

Reads one JSON request on stdin, compiles every config of the spec into the given cache folder
with :func:`harness.compile_space`, and writes one JSON line on stdout:
``{"compiled": [config keys], "failures": [messages]}``, or ``{"error": message}``.
The process starts with an empty environment; the few variables Triton needs are set here, to
folders of the job.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    """Entry point; see the module docstring."""
    req = json.loads(sys.stdin.read())
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
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    sys.stdout.flush()
