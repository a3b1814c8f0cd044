"""Host-side inputs: fresh, seeded arrays for every tensor parameter of a spec.

Inputs are drawn per seed with NumPy's PCG64 from each parameter's distribution, stored in the
parameter's dtype (ml_dtypes for bf16/fp8). Outputs get no host data: the device buffers are
pre-filled with a sentinel instead.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from kernels.dtypes import dtype
from kernels.spec import KernelSpec

__all__ = ["make_inputs", "cached_inputs", "reference_outputs", "output_fill_byte", "bench_seed"]

SALT_BYTES = 32
_PROCESS_SALT = os.urandom(SALT_BYTES)  # bench seeds without an input cache: this process only


def _salt(cache_dir: str | Path | None) -> bytes:
    """The bench-seed salt of ``cache_dir`` (``<cache_dir>/bench_salt``, created on first use)."""
    if cache_dir is None:
        return _PROCESS_SALT
    path = Path(cache_dir) / "bench_salt"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it first: use theirs
            data = path.read_bytes()
        else:
            data = os.urandom(SALT_BYTES)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
    if len(data) != SALT_BYTES:
        from harness.errors import UsageError
        raise UsageError(f"{path}: a bench-seed salt must be {SALT_BYTES} bytes, found "
                         f"{len(data)} (delete the file; a new one is drawn)")
    return data


def bench_seed(i: int, cache_dir: str | Path | None) -> int:
    """The seed of bench-size input set ``i`` (0 or 1), the same for every process sharing
    ``cache_dir`` (the GPU worker's timing, the suite's pre-draw, the vendor timing) and unknown
    to whoever writes a candidate: derived (BLAKE2b) from a 32-byte salt drawn from
    ``os.urandom`` into ``<cache_dir>/bench_salt`` (mode 0600) on first use, or per process
    without a cache. A fixed, published bench seed would let a candidate recognise the bench
    inputs and write precomputed outputs (docs/threat-model.md). Always >= 2**40, so it never
    equals a verify seed.

    Raises:
        UsageError: the salt file exists but is not 32 bytes.
    """
    import hashlib

    digest = hashlib.blake2b(_salt(cache_dir) + int(i).to_bytes(4, "little"), digest_size=5).digest()
    return (1 << 40) | int.from_bytes(digest, "little")


def output_fill_byte(p, sentinel: int, timed: bool = False) -> int:
    """The byte an ``out`` pointer's buffer holds before a launch: the one definition of the
    spec's ``init`` semantics, shared by the GPU worker and the emulator.

    Args:
        p: a :class:`kernels.Param` with role ``out``.
        sentinel: the poison byte of this pass (the worker alternates 0xFF / 0x7F).
        timed: a timed launch (the worker zero-fills a partly written output there so every
            timed launch and the reference capture see the same unwritten bytes).

    Returns:
        0 for ``init: zeros`` (the caller zero-fills it, e.g. an output accumulated with
        atomics) and for a partly written output in a timed launch, else ``sentinel``.

    Raises:
        ValueError: ``p`` is not an ``out`` pointer.
    """
    if p.role != "out":
        raise ValueError(f"output_fill_byte: parameter {p.name!r} has role {p.role!r}, not out")
    return 0 if p.init == "zeros" or (timed and p.written is not None) else sentinel



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


def cached_inputs(spec: KernelSpec, size: str, seed: int, cache_dir: str | Path | None
                  ) -> dict[str, np.ndarray]:
    """:func:`make_inputs`, memoised as ``.npy`` files under ``cache_dir/inputs`` (None: no cache).

    Large ``bench`` inputs take seconds to draw; loading them back memory-mapped takes
    milliseconds. Files are keyed by the spec's identity without its autotune space (the inputs do
    not depend on it: a suite entry's narrow and widened spaces share them), the size name and the
    seed, and written atomically (temporary name, then ``os.replace``).
    """
    if cache_dir is None:
        return make_inputs(spec, size, seed)
    from kernels.spec import AutotuneSpace

    key = spec.model_copy(update={"autotune": AutotuneSpace()}).identity()
    folder = Path(cache_dir) / "inputs" / f"{key}_{size}_{seed}"
    names = [p.name for p in spec.params if p.is_tensor and p.role in ("in", "inout")]
    files = {n: folder / f"{n}.npy" for n in names}
    dts = {p.name: dtype(p.dtype).np for p in spec.params if p.name in files}
    if all(f.exists() for f in files.values()):
        try:
            # stored as unsigned integers of the same width: ml_dtypes types do not round-trip .npy
            return {n: np.load(f, mmap_mode="r").view(dts[n]) for n, f in files.items()}
        except (OSError, ValueError):
            pass  # a damaged cache entry is rebuilt below
    arrays = make_inputs(spec, size, seed)
    folder.mkdir(parents=True, exist_ok=True)
    for n, arr in arrays.items():
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".npy.tmp")
        with os.fdopen(fd, "wb") as f:
            np.save(f, arr.view(f"u{arr.dtype.itemsize}"))
        os.replace(tmp, files[n])
    return arrays


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
