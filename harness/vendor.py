"""The vendor-library column: the time of the vendor path of a suite kernel (cuBLAS, cuDNN, SDPA
through torch) next to the autotuned Triton baseline, and a candidate's ratio to it (issue 22).

A suite module declares its vendor path as a module-level ``vendor(spec_name, inputs, dims)``
next to its spec: ``inputs`` are the spec's ``in`` tensors as torch tensors (same names, shapes
and dtypes as :func:`harness.inputs.make_inputs` draws), ``dims`` the size's dimensions. It does
the untimed set-up (layout views, fp8 scales, bitdelta's pre-applied delta) and returns
``(description, run)`` where ``run()`` launches the vendor op and returns ``{output name:
tensor}``, or None for a variant without one. Every vendor path is
checked against the spec's float64 reference at the ``verify`` size with the spec's tolerance
before it is timed, so a wrong vendor path shows as ``wrong`` rather than as a time.

Timing, as the harness times a kernel (:mod:`harness.gpu.worker`): the ``bench``-size inputs of
the GPU worker's first timing set (:func:`harness.inputs.bench_seed`), an L2 flush before each launch (a memset of a
buffer of twice the L2 size), CUDA events around the launch alone, :func:`harness.timing.stats`
over the samples (median, IQR). Unlike the worker's candidate/reference pairs, the vendor launches
are not interleaved with the Triton baseline: they run in their own process (torch's memory pool
is freed when it exits) right after the autotune. Torch is optional: without it, without a CUDA
device or without a vendor path the result says ``n/a`` with the reason.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from pydantic import BaseModel

__all__ = ["VendorUnavailable", "VendorResult", "vendor_fn", "to_torch", "check_vendor",
           "time_vendor", "measure_vendor", "measure_vendor_subprocess", "ratio", "vendor_cell"]


class VendorUnavailable(Exception):
    """A kernel (variant) has no vendor path; the message says why."""


class VendorResult(BaseModel):
    """The vendor path of one kernel.

    Attributes:
        kernel: suite name (``gemm.fp16``).
        device: the CUDA device's name (``NVIDIA H200``), "" when none.
        path: what was run (``torch.matmul (cuBLAS)``); "" when none.
        median_ms, q1_ms, q3_ms, iqr_ms, n: timing at the ``bench`` size (None when not timed).
        correct: the vendor output matched the float64 reference at the ``verify`` size (None:
            not checked).
        reason: why there is no time (``n/a`` reasons, or the failed check), "" otherwise.
    """

    kernel: str
    device: str = ""
    path: str = ""
    median_ms: float | None = None
    q1_ms: float | None = None
    q3_ms: float | None = None
    iqr_ms: float | None = None
    n: int = 0
    correct: bool | None = None
    reason: str = ""


VendorFn = Callable[[str, dict[str, Any], dict[str, int]],
                    "tuple[str, Callable[[], dict[str, Any]]] | None"]


def vendor_fn(spec) -> VendorFn | None:
    """The ``vendor`` callable of the spec's source module, or None when it declares none.

    Raises:
        ImportError: the module cannot be imported.
    """
    mod = importlib.import_module(spec.source.module) if spec.source.module else None
    fn = getattr(mod, "vendor", None) if mod is not None else None
    return fn if callable(fn) else None


def to_torch(arr: np.ndarray, device: str = "cpu"):
    """A numpy array (fp8 as ml_dtypes ``float8_e4m3fn``) as a torch tensor on ``device``, same
    shape and dtype.

    Raises:
        TypeError: a dtype torch has no equivalent of.
    """
    import torch

    a = np.array(arr, order="C", copy=True)   # the input cache hands out read-only memmaps
    name = a.dtype.name
    if name in ("float8_e4m3fn", "float8_e5m2"):
        t = torch.from_numpy(a.view(np.uint8)).view(getattr(torch, name))
    else:
        try:
            t = torch.from_numpy(a)
        except TypeError as exc:
            raise TypeError(f"no torch dtype for numpy {name}") from exc
    return t.to(device)


def _inputs(spec, size: str, seed: int, device: str, cache_dir) -> tuple[dict, dict, dict]:
    from harness.inputs import cached_inputs

    host = cached_inputs(spec, size, seed, cache_dir)
    return host, {k: to_torch(v, device) for k, v in host.items()}, spec.dims(size)


def check_vendor(spec, device: str = "cpu", seed: int = 0, cache_dir=None) -> tuple[str, list[str]]:
    """Run the vendor path at the ``verify`` size and compare it with the float64 reference.

    Returns:
        ``(description, problems)``: problems are one line per failing output (empty: correct).

    Raises:
        VendorUnavailable: no vendor path (or none for this variant / device).
        ValueError: the spec has no float64 reference to check against.
    """
    from harness.correctness import compare
    from harness.inputs import reference_outputs

    fn = vendor_fn(spec)
    if fn is None:
        raise VendorUnavailable(f"{spec.name}: no vendor path declared")
    host, dev, dims = _inputs(spec, "verify", seed, device, cache_dir)
    ref = reference_outputs(spec, "verify", host)
    if ref is None:
        raise ValueError(f"{spec.name}: no float64 reference to check the vendor path against")
    got_fn = fn(spec.name, dev, dims)
    if got_fn is None:
        raise VendorUnavailable(f"{spec.name}: no vendor path for this variant")
    desc, run = got_fn
    out = run()
    problems = []
    for p in spec.outputs():
        if p.name not in out:
            problems.append(f"{p.name}: the vendor path returned no such output")
            continue
        got = out[p.name].detach().float().cpu().numpy()
        if got.shape != ref[p.name].shape:
            problems.append(f"{p.name}: shape {got.shape}, want {ref[p.name].shape}")
            continue
        res = compare(got, ref[p.name], spec.tolerance(p.dtype))
        if not res.ok:
            problems.append(f"{p.name}: {res.reason} (max abs err {res.max_abs_err:.3g}, "
                            f"norm err {res.norm_err:.3g})")
    return desc, problems


def time_vendor(run: Callable[[], Any], *, reps: int = 50, warmup: int = 5,
                l2_bytes: int | None = None):
    """Time ``run()`` on the current CUDA device: L2 flushed before each launch, CUDA events
    around the launch alone.

    Args:
        run: the launch (returns anything).
        reps: timed launches; warmup: untimed launches first.
        l2_bytes: L2 size in bytes (default: the device's, from torch).

    Returns:
        :class:`harness.timing.TimingStats` over the ``reps`` samples, ms.
    """
    import torch

    from harness.timing import stats

    if l2_bytes is None:
        l2_bytes = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
                       or 50 << 20)
    flush = torch.empty(max(2 * l2_bytes, 128 << 20) // 4, dtype=torch.int32, device="cuda")
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    samples = []
    for i in range(reps):
        flush.fill_(i)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        run()
        e.record()
        torch.cuda.synchronize()
        samples.append(s.elapsed_time(e))
    del flush
    return stats(samples)


def measure_vendor(names: list[str], *, cache_dir=None, reps: int = 50,
                   seed: int | None = None) -> list[VendorResult]:
    """Check and time the vendor path of each kernel in this process (needs torch and CUDA),
    timed on the bench-size input set ``seed`` (None: the GPU worker's first timing set,
    :func:`harness.inputs.bench_seed` of ``cache_dir``).

    Never raises for a missing torch, device or vendor path: the result's ``reason`` says it.
    """
    from kernels import get

    out: list[VendorResult] = []
    try:
        import torch
    except ImportError as exc:
        return [VendorResult(kernel=n, reason=f"n/a: torch not importable ({exc})") for n in names]
    if not torch.cuda.is_available():
        return [VendorResult(kernel=n, reason="n/a: torch sees no CUDA device") for n in names]
    device = torch.cuda.get_device_name(0)
    for n in names:
        spec = get(n)
        r = VendorResult(kernel=n, device=device)
        try:
            r.path, problems = check_vendor(spec, "cuda", 0, cache_dir)
            r.correct = not problems
            if problems:
                r.reason = "wrong: " + "; ".join(problems)
            else:
                from harness.inputs import bench_seed
                bs = bench_seed(0, cache_dir) if seed is None else seed
                _, dev, dims = _inputs(spec, "bench", bs, "cuda", cache_dir)
                _, run = vendor_fn(spec)(n, dev, dims)  # type: ignore[misc]
                t = time_vendor(run, reps=reps)
                r.median_ms, r.q1_ms, r.q3_ms = t.median_ms, t.q1_ms, t.q3_ms
                r.iqr_ms, r.n = t.iqr_ms, t.n
                del dev, run
        except VendorUnavailable as exc:
            r.reason = f"n/a: {exc}"
        except Exception as exc:  # noqa: BLE001 - a vendor library error is reported per kernel
            r.reason = f"n/a: {type(exc).__name__}: {str(exc)[:300]}"
        torch.cuda.empty_cache()
        out.append(r)
    return out


def measure_vendor_subprocess(names: list[str], *, cache_dir=None, reps: int = 50,
                              timeout_s: float = 600.0, python: str = sys.executable
                              ) -> list[VendorResult]:
    """:func:`measure_vendor` in a child process (its GPU memory is freed when it exits).

    Never raises: a crash or timeout of the child gives every kernel an ``n/a`` reason.
    """
    cmd = [python, "-m", "harness.vendor", "--reps", str(reps)]
    if cache_dir is not None:
        cmd += ["--cache-dir", str(cache_dir)]
    try:
        proc = subprocess.run(cmd + list(names), capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [VendorResult(kernel=n, reason=f"n/a: vendor measurement failed: {exc}")
                for n in names]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    if proc.returncode != 0 or not lines:
        why = (proc.stderr or proc.stdout)[-300:].strip()
        return [VendorResult(kernel=n, reason=f"n/a: vendor measurement exited "
                             f"{proc.returncode}: {why}") for n in names]
    return [VendorResult.model_validate(d) for d in json.loads(lines[-1])]


def ratio(vendor_ms: float | None, ms: float | None) -> float | None:
    """``vendor_ms / ms``: above 1 the measured kernel is faster than the vendor path (gemm.fp16
    on an H200, Triton 2.001 ms vs cuBLAS 1.573 ms: 0.79)."""
    if not vendor_ms or not ms or vendor_ms <= 0 or ms <= 0:
        return None
    return vendor_ms / ms


def vendor_cell(v: VendorResult | None, ms: float | None) -> str:
    """Text of the vendor column for a row timed at ``ms``: ``1.5730 ms (0.79x)``, or ``n/a``
    with the reason (``n/a: torch not importable``, ``wrong: ...``, ``n/a: not measured``)."""
    if v is None:
        return "n/a: not measured"
    if v.median_ms is None:
        return v.reason or "n/a"
    r = ratio(v.median_ms, ms)
    return f"{v.median_ms:.4f} ms" + (f" ({r:.2f}x)" if r is not None else "")


def main(argv: list[str] | None = None) -> None:
    """``python -m harness.vendor [--reps N] [--cache-dir DIR] NAME ...``: print the results of
    :func:`measure_vendor` as one JSON list."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m harness.vendor")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("names", nargs="+")
    a = ap.parse_args(argv)
    res = measure_vendor(a.names, cache_dir=a.cache_dir, reps=a.reps)
    print(json.dumps([r.model_dump() for r in res]))


if __name__ == "__main__":
    main()
