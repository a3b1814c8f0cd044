"""Host-side inputs: fresh, seeded arrays for every tensor parameter of a spec.

Inputs are drawn per seed with NumPy's PCG64 from each parameter's distribution, stored in the
parameter's dtype (ml_dtypes for bf16/fp8). Outputs get no host data: the device buffers are
pre-filled with a sentinel instead.
"""

from __future__ import annotations

import numpy as np

from kernels.dtypes import dtype
from kernels.spec import KernelSpec

__all__ = ["make_inputs", "reference_outputs"]


def make_inputs(spec: KernelSpec, size: str, seed: int) -> dict[str, np.ndarray]:
    """Arrays for every ``in``/``inout`` tensor parameter at ``size``, drawn with ``seed``.

    Each parameter gets its own stream (seeded by ``(seed, index)``), so adding a parameter does
    not change the others' data.

    Returns:
        name -> C-contiguous array of the parameter's shape and dtype.
    """
    out = {}
    for i, p in enumerate(spec.params):
        if p.is_tensor and p.role in ("in", "inout"):
            rng = np.random.default_rng([seed, i])
            out[p.name] = p.distribution.sample(rng, spec.shape(p, size), dtype(p.dtype).np)
    return out


def reference_outputs(spec: KernelSpec, size: str, inputs: dict[str, np.ndarray]
                      ) -> dict[str, np.ndarray] | None:
    """The spec's float64 NumPy reference for ``inputs`` (upcast to float64), or None without one.

    Raises:
        kernels.SpecError: the reference cannot be imported.
        ValueError: the reference returned a wrong set of outputs or a wrong shape.
    """
    ref = spec.load_reference()
    if ref is None:
        return None
    up = {k: v.astype(np.float64) for k, v in inputs.items()}
    res = ref(up, spec.dims(size))
    for p in spec.outputs():
        if p.name not in res:
            raise ValueError(f"reference of {spec.name} returned no {p.name!r}")
        want = spec.shape(p, size)
        if tuple(np.shape(res[p.name])) != want:
            raise ValueError(f"reference {p.name!r} has shape {np.shape(res[p.name])}, want {want}")
    return {p.name: np.asarray(res[p.name], dtype=np.float64) for p in spec.outputs()}
