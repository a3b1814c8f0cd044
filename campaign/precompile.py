"""Warm the caches of GPU cells on the host's spare CPU cores: reference compiles and bench inputs.

A GPU worker runs its cells one after another, and each cell starts by compiling the kernel's
whole autotune space with Triton (CPU work, seconds per config). While the GPU worker is busy,
:func:`precompile` compiles the spaces of the cells still queued, in cell order, in a process pool;
the worker then finds them in the on-disk cache (written atomically by
:func:`harness.compile_reference`). The two bench-size input sets the GPU worker times with
(seeds :func:`harness.inputs.bench_seed` of the input cache, ``harness/gpu/worker.py``) are
drawn into the input cache the same way (:func:`harness.inputs.cached_inputs`). A config Triton cannot compile is counted here and reported
again, as part of its cell, by the agent loop.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["precompile"]


def _inputs_one(spec_ref: str, seed: int, cache_dir: str) -> str | None:
    from campaign.plan import load_target
    from harness.inputs import cached_inputs

    cached_inputs(load_target(spec_ref), "bench", seed, cache_dir)
    return None


def _compile_one(spec_ref: str, arch: str, idx: int, cache_dir: str, max_ptx_version: int
                 ) -> str | None:
    from campaign.plan import load_target
    from harness import compile_reference
    from harness.errors import ReferenceCompileError

    spec = load_target(spec_ref)
    try:
        compile_reference(spec, arch, spec.configs()[idx], cache_dir=Path(cache_dir),
                          max_ptx_version=max_ptx_version)
    except ReferenceCompileError as exc:
        return f"{spec.name} {arch} config {idx}: {str(exc)[:200]}"
    return None


def precompile(targets: Iterable[tuple[str, str]], cache_dir: Path, *, workers: int,
               max_ptx_version: int = 90, stop: Callable[[], bool] = lambda: False,
               inputs: bool = True) -> tuple[int, list[str]]:
    """Compile every config of each ``(spec_ref, arch)`` into ``cache_dir``.

    Args:
        targets: ``(spec_ref, arch)`` in the order the cells will run (duplicates skipped).
        cache_dir: the reference-compile cache the cells use.
        workers: processes (spawned: Triton is not fork-safe after use).
        max_ptx_version: as the cells' (the cache key includes it).
        stop: polled between tasks; True cancels what has not started.
        inputs: also draw the bench input sets (hundreds of MB per kernel in the suite).

    Returns:
        ``(configs compiled and input sets drawn (or found cached), compile failures as one
        line each)``.
    """
    from campaign.plan import load_target
    from harness.inputs import bench_seed

    tasks: list[tuple[str, str, int]] = []
    seen: set[tuple[str, str]] = set()
    for ref, arch in targets:
        if (ref, arch) in seen:
            continue
        seen.add((ref, arch))
        n = len(load_target(ref).configs())
        tasks += [(ref, arch, i) for i in range(n)]
    if not tasks or workers < 1:
        return 0, []
    ok, failures = 0, []
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futs = []
        refs_seen: set[str] = set()
        for ref, arch, i in tasks:  # in cell order: a cell's inputs, then its configs
            if inputs and ref not in refs_seen:
                refs_seen.add(ref)
                futs += [pool.submit(_inputs_one, ref, bench_seed(i, cache_dir), str(cache_dir))
                         for i in range(2)]
            futs.append(pool.submit(_compile_one, ref, arch, i, str(cache_dir), max_ptx_version))
        for fut in cf.as_completed(futs):
            if stop():
                for f in futs:
                    f.cancel()
                break
            if fut.cancelled():
                continue
            err = fut.result()
            if err is None:
                ok += 1  # a compiled config or a drawn input set
            else:
                failures.append(err)
    return ok, failures
