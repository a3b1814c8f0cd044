"""The spec's float64 reference in a child process with a memory and a time budget.

The GPU worker computes the float64 reference at the bench size only to arbitrate a disagreement
between a candidate and the reference kernel (``Worker.arbitrate``). Any candidate can trigger
that (correct at the verify size, off by one element at the bench size), and some references
are large at the bench size (the attention references build the full S x S score matrix: 26-51
GB and about two minutes per input set on two cores). So the computation runs in a fresh
interpreter (``python -m harness.refproc``) whose address space is capped (``RLIMIT_AS``) and
which is killed after ``timeout_s``: a reference over budget makes the arbitration fail with a
clear reason instead of taking the host's memory.

The child gets the spec as JSON and the inputs as raw bytes (``.npy`` of ``uint8`` per tensor,
so bf16/fp8 arrays travel unchanged) in a temporary folder, and writes the outputs (float64) as
``.npy`` files there.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from kernels.dtypes import dtype
from kernels.spec import KernelSpec

__all__ = ["ReferenceBudgetError", "bench_reference", "DEFAULT_MAX_BYTES", "DEFAULT_TIMEOUT_S"]

DEFAULT_MAX_BYTES = 32 << 30
"""Address-space cap of the child, bytes (32 GiB: conv2d and the GEMM references at the bench
size fit; the attention references do not)."""
DEFAULT_TIMEOUT_S = 240.0
"""Wall-clock cap of the child, seconds."""


class ReferenceBudgetError(RuntimeError):
    """The float64 reference could not be computed within the budget (memory, time) or failed."""


def bench_reference(spec: KernelSpec, size: str, inputs: dict[str, np.ndarray], *,
                    max_bytes: int = DEFAULT_MAX_BYTES, timeout_s: float = DEFAULT_TIMEOUT_S,
                    workdir: str | Path | None = None) -> dict[str, np.ndarray] | None:
    """``harness.inputs.reference_outputs(spec, size, inputs)`` computed in a child process.

    Args:
        spec: the kernel spec (its ``reference`` is imported by the child).
        size: ``verify`` or ``bench``.
        inputs: input name -> array in the parameter's dtype (``harness.inputs.make_inputs``).
        max_bytes: the child's address-space limit (``RLIMIT_AS``), bytes.
        timeout_s: the child's wall-clock limit, seconds.
        workdir: where the temporary folder goes (None: the system's).

    Returns:
        output name -> float64 array of the output's shape, or None when the spec has no
        float64 reference.

    Raises:
        ReferenceBudgetError: the child ran out of memory, ran past ``timeout_s`` or failed
            (the message says which, with the tail of its stderr).
    """
    if spec.reference is None:
        return None
    with tempfile.TemporaryDirectory(prefix="ailower-ref64-", dir=workdir) as td:
        d = Path(td)
        (d / "spec.json").write_text(spec.model_dump_json())
        for name, arr in inputs.items():
            np.save(d / f"in_{name}.npy", np.ascontiguousarray(arr).view(np.uint8).ravel())
        (d / "meta.json").write_text(json.dumps({"size": size, "inputs": sorted(inputs)}))
        try:
            # the child caps itself (no preexec_fn: the GPU worker has driver threads)
            r = subprocess.run([sys.executable, "-m", "harness.refproc", str(d), str(max_bytes)],
                               capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ReferenceBudgetError(
                f"the float64 reference of {spec.name} at the {size} size took longer than "
                f"{timeout_s:g} s") from None
        if r.returncode != 0:
            tail = r.stderr.strip().splitlines()[-3:]
            what = ("ran out of memory (address space capped at "
                    f"{max_bytes / 2**30:.1f} GiB)" if "MemoryError" in r.stderr
                    or "Cannot allocate memory" in r.stderr else f"failed (exit {r.returncode})")
            raise ReferenceBudgetError(f"the float64 reference of {spec.name} at the {size} "
                                       f"size {what}: {' | '.join(tail)[:600]}")
        return {p.name: np.load(d / f"out_{p.name}.npy") for p in spec.outputs()}


def _child(folder: Path, max_bytes: int) -> None:
    """Child side: cap the address space at ``max_bytes``, read the spec and the inputs from
    ``folder``, write ``out_<name>.npy``."""
    resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))
    from harness.inputs import reference_outputs

    spec = KernelSpec.model_validate_json((folder / "spec.json").read_text())
    meta = json.loads((folder / "meta.json").read_text())
    size = meta["size"]
    params = {p.name: p for p in spec.params}
    inputs = {}
    for name in meta["inputs"]:
        p = params[name]
        raw = np.load(folder / f"in_{name}.npy")
        inputs[name] = raw.view(dtype(p.dtype).np).reshape(spec.shape(p, size))
    out = reference_outputs(spec, size, inputs)
    assert out is not None
    for name, arr in out.items():
        np.save(folder / f"out_{name}.npy", arr)


if __name__ == "__main__":
    _child(Path(sys.argv[1]), int(sys.argv[2]))
