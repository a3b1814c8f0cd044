"""The autotuned Triton baseline of every suite kernel on this GPU, and the suite preparation.

:func:`prepare` compiles every config of the suite's autotune spaces and draws the bench inputs in
parallel (used by ``search.suite``, ``search.probe`` and :func:`suite_baseline`);
:func:`suite_baseline` backs ``ailower baseline --suite`` (``ailower/cmd_baseline.py``) and
``bench/suite_baseline.py``. It belongs to the harness room: it imports only ``harness`` and
``kernels``.

Method, per the suite issue: every config of every kernel's autotune space is compiled with Triton
for the device arch (in parallel, on all CPU cores, while the bench-size inputs are drawn into the
input cache), then each kernel is autotuned on the GPU (``harness.autotune``: correctness of every
config against the float64 reference at the ``verify`` size on each seed, interleaved timing at the
``bench`` size). The row of a kernel is its fastest correct config. Roofline fractions:

* memory-bound: achieved GB/s (the spec's minimum bytes / median time) over the device-to-device
  copy bandwidth the worker measured (median over the jobs);
* compute-bound: achieved TFLOP/s over a *measured* matmul rate for the spec's ``flop_dtype``:
  ``torch.matmul`` on 8192^3 fp16 (and ``torch._scaled_mm`` on e4m3 for fp8) when torch is
  importable, else the suite's own best ``gemm.<dtype>`` rate (said in the output);

the bound is whichever roofline time is longer. A baseline under 50% of its roofline is flagged
with a one-line reason (:data:`LOW_ROOFLINE_REASONS`: our analysis of the kernel, not a
measurement).
"""

import concurrent.futures as cf
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from harness.vendor import VendorResult, measure_vendor_subprocess, vendor_cell

__all__ = [
    "LOW_ROOFLINE_REASONS",
    "BaselineRow",
    "SuiteBaselineReport",
    "measure_matmul_ceiling",
    "prepare",
    "render_table",
    "suite_baseline",
]

FLAG_BELOW = 0.5
"""Roofline fraction under which a baseline is flagged (the suite issue's 50%)."""

LOW_ROOFLINE_REASONS: dict[str, str] = {
    "flash_sinkhorn": "one exp2 per (i, j) pair and direction: the MUFU (16 ex2/clk/SM) bounds "
                      "it, not DRAM and not the D=64 tensor-core dots",
    "flash_attention": "Triton's FA forward on Hopper has no warp specialisation: softmax "
                       "(exp2, rescale) and wgmma serialise within each warpgroup",
    "forgetting_attention": "as flash_attention plus a per-tile cumsum of the gates; no tiles "
                            "are skipped although old keys are decayed to ~0",
    "sage_attention": "int8 Q.K^T counted at the fp16 rate; dequantisation multiplies and the "
                      "exp2 softmax sit between the int8 and fp16 wgmmas",
    "mamba2_chunk_scan": "short dots (K = NS = 128 or a 32-64 key tile) and C.B^T recomputed "
                         "per head keep wgmma underfed; exp per score element on the MUFU",
    "mamba2_chunk_state": "per-chunk programs with a 256-token reduction: few, short wgmma "
                          "chains and an fp32 state store per program",
    "bitdelta": "sign decoding (shift, and, convert, fma) for every weight element runs on the "
                "CUDA cores inside the wgmma main loop",
    "bitdelta_batched": "as bitdelta, and the per-request tiles re-read the shared base weight",
    "conv2d": "the implicit-GEMM A tile is a masked gather per (r, s) tap (no TMA, no window "
              "reuse), so loads limit the wgmma rate",
    "gemv": "one pass over A with fp32 CUDA-core FMAs; the partial-row tail and the final "
            "cross-lane sum cost bandwidth at this size",
    "reduction_sum": "one program per 512 KB row (7.8 waves on 132 SMs): the last wave runs "
                     "partly empty",
    "rope": "each token's program touches 40 heads x 256 B rows: short rows per program",
    "dion_update": "the u[:, map(n)] gather is uncoalesced (random columns of U)",
    "gemm_silu": "the silu epilogue (exp + divide over a 128x256 fp32 tile) is not overlapped "
                 "with the next tile's main loop (non-persistent kernel)",
}
"""Base kernel name -> why its baseline may sit under 50% of the roofline (our analysis)."""


class BaselineRow(BaseModel):
    """One kernel (variant) of the suite baseline.

    Attributes:
        kernel: suite name (``gemm.fp8``).
        configs: configs compiled; ``compile_failures``: configs Triton could not compile.
        configs_correct: configs that passed the float64 check on every seed.
        best_config: the winning config's key ("" when none was correct).
        median_ms, iqr_ms: timing of the best config at the bench size, ms.
        tflops, gbps: achieved TFLOP/s and GB/s (spec FLOPs / bytes over the median).
        bound: ``memory`` or ``compute``; ``roofline``: the fraction (1.0 = at the roofline).
        ceiling: what the fraction was taken against (``copy 4.2 TB/s``, ``torch fp16 720``).
        correct: the best config passed every correctness check on every seed.
        flagged: roofline < 50%; ``reason``: why (flagged rows) or what failed.
        seconds: compile + autotune wall time for this kernel.
        space: the autotune space (``wide`` or ``narrow``, ``kernels.SPACES``).
        space_configs: configs in that space; ``configs`` < it when ``max_configs`` capped the
            autotune (``capped``: which configs were kept is said in ``reason``).
    """

    kernel: str
    space: str = "wide"
    space_configs: int = 0
    capped: bool = False
    configs: int = 0
    compile_failures: int = 0
    configs_correct: int = 0
    best_config: str = ""
    median_ms: float | None = None
    iqr_ms: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    flop_dtype: str | None = None
    bound: str = ""
    roofline: float | None = None
    ceiling: str = ""
    correct: bool = False
    flagged: bool = False
    reason: str = ""
    seconds: float = 0.0


class SuiteBaselineReport(BaseModel):
    """The whole suite baseline run (what ``--json`` writes); ``space`` is the autotune space
    (``wide``: at least the usual Triton grid per kind; ``narrow``: the spaces before issue 22),
    ``max_configs`` the per-kernel cap (None: whole spaces)."""

    arch: str
    space: str = "wide"
    max_configs: int | None = None
    device: str = ""
    copy_gbps: float = 0.0
    matmul_tflops: dict[str, float] = Field(default_factory=dict)
    matmul_source: dict[str, str] = Field(default_factory=dict)
    rows: list[BaselineRow] = Field(default_factory=list)
    vendor: list[VendorResult] = Field(default_factory=list)
    """The vendor path per kernel (:mod:`harness.vendor`; ``n/a`` rows say why)."""
    seconds: dict[str, float] = Field(default_factory=dict)


_CEILING_CODE = r"""
import json, sys
try:
    import torch
except ImportError as exc:
    print(json.dumps({"error": f"torch not importable: {exc}"})); sys.exit(0)
if not torch.cuda.is_available():
    print(json.dumps({"error": "torch sees no CUDA device"})); sys.exit(0)
n = 8192
def rate(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(15):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    ts.sort()
    return 2 * n ** 3 / (ts[len(ts) // 2] * 1e-3) / 1e12
out = {"torch": torch.__version__}
a = torch.randn(n, n, device="cuda", dtype=torch.float16)
b = torch.randn(n, n, device="cuda", dtype=torch.float16)
out["fp16"] = rate(lambda: a @ b)
try:
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda", dtype=torch.float32)
    out["fp8e4nv"] = rate(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                   out_dtype=torch.float16))
except Exception as exc:
    out["fp8_error"] = f"{type(exc).__name__}: {exc}"[:300]
print(json.dumps(out))
"""


def measure_matmul_ceiling(python: str = sys.executable, timeout_s: float = 180.0
                           ) -> tuple[dict[str, float], dict[str, str]]:
    """Dense matmul rates on device 0 with torch, in a subprocess (its GPU memory is freed after).

    Returns:
        ``(rates, sources)``: flop dtype (``fp16``, ``fp8e4nv``) -> TFLOP/s of an 8192^3 product
        (median of 15 CUDA-event timings), and dtype -> how it was measured. Empty when torch is
        missing or fails (``sources["error"]`` says why); never raises for that.
    """
    try:
        proc = subprocess.run([python, "-c", _CEILING_CODE], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {}, {"error": f"torch matmul measurement failed: {exc}"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {}, {"error": f"torch matmul measurement printed nothing: {proc.stderr[-300:]}"}
    data = json.loads(lines[-1])
    if "error" in data:
        return {}, {"error": data["error"]}
    rates, src = {}, {}
    tv = data.get("torch", "?")
    for k in ("fp16", "fp8e4nv"):
        if k in data:
            rates[k] = float(data[k])
            src[k] = (f"torch {tv} matmul 8192^3 fp16" if k == "fp16"
                      else f"torch {tv} _scaled_mm 8192^3 e4m3")
    if "fp8_error" in data:
        src["fp8_error"] = data["fp8_error"]
    return rates, src


def _compile_task(name: str, arch: str, idx: int, cache_dir: str, space: str | None = None
                  ) -> tuple[str, int, str | None]:
    from harness import ReferenceCompileError, compile_reference
    from kernels import get

    spec = get(name, space)
    try:
        compile_reference(spec, arch, spec.configs()[idx], cache_dir=Path(cache_dir))
    except ReferenceCompileError as exc:
        return name, idx, str(exc)[:300]
    return name, idx, None


def _inputs_task(name: str, seed: int, cache_dir: str, space: str | None = None
                 ) -> tuple[str, int]:
    from harness.inputs import cached_inputs
    from kernels import get

    cached_inputs(get(name, space), "bench", seed, cache_dir)
    return name, seed


def capped_configs(spec, narrow_keys: set[str], max_configs: int | None) -> list:
    """The configs of ``spec`` an autotune capped at ``max_configs`` times: all when uncapped or
    small enough; else the narrow space's configs (in ``narrow_keys``) first, then configs spread
    evenly over the rest of the space (every k-th, in space order), ``max_configs`` in all.

    Raises:
        ValueError: ``max_configs`` < 1.
    """
    cfgs = spec.configs()
    if max_configs is None or len(cfgs) <= max_configs:
        return cfgs
    if max_configs < 1:
        raise ValueError(f"max_configs must be >= 1, got {max_configs}")
    head = [c for c in cfgs if c.key() in narrow_keys][:max_configs]
    rest = [c for c in cfgs if c.key() not in narrow_keys]
    room = max_configs - len(head)
    if room <= 0:
        return head
    step = len(rest) / room
    return head + [rest[int(i * step)] for i in range(room)]


def capped_space(spec, max_configs: int | None) -> list:
    """:func:`capped_configs` of ``spec`` with the narrow space's configs first when ``spec`` is a
    suite entry's (in either space; :func:`kernels.registry.space_of`), none first otherwise."""
    from kernels.registry import get, space_of

    narrow: set[str] = set()
    if max_configs is not None and space_of(spec) is not None:
        narrow = {c.key() for c in get(spec.name, "narrow").configs()}
    return capped_configs(spec, narrow, max_configs)


def prepare(names: list[str], arch: str, cache_dir: Path, workers: int,
            log: Callable[[str], None], space: str | None = None,
            max_configs: int | None = None) -> dict[str, list[str]]:
    """Compile every config of ``names`` (autotune space ``space``, None: the default; at most
    ``max_configs`` each, :func:`capped_configs`) for ``arch`` and draw the two bench input sets
    the GPU worker uses (seeds :func:`harness.inputs.bench_seed`), in a pool of ``workers`` spawned processes.

    Returns:
        kernel -> compile error messages (configs Triton could not compile).
    """
    from harness.inputs import bench_seed
    from kernels import get

    ctx = multiprocessing.get_context("spawn")
    errors: dict[str, list[str]] = {n: [] for n in names}
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futs = [pool.submit(_inputs_task, n, bench_seed(i, cache_dir), str(cache_dir), space)
                for n in names for i in range(2)]
        for n in names:
            spec = get(n, space)
            keep = {c.key() for c in capped_space(spec, max_configs)}
            futs += [pool.submit(_compile_task, n, arch, i, str(cache_dir), space)
                     for i, c in enumerate(spec.configs()) if c.key() in keep]
        for done, fut in enumerate(cf.as_completed(futs), start=1):
            res = fut.result()
            if len(res) == 3 and res[2] is not None:
                errors[res[0]].append(res[2])
            if done % 50 == 0 or done == len(futs):
                log(f"  prepared {done}/{len(futs)} (compiles and input sets)")
    return errors


def _roofline(row: BaselineRow, flops: float, nbytes: float, copy_gbps: float,
              rates: dict[str, float], sources: dict[str, str]) -> None:
    t = row.median_ms
    if not t:
        return
    t_mem = nbytes / (copy_gbps * 1e9) * 1e3 if copy_gbps else 0.0
    peak = rates.get(row.flop_dtype or "")
    t_cmp = flops / (peak * 1e12) * 1e3 if (peak and flops) else 0.0
    if t_cmp > t_mem:
        row.bound, row.roofline = "compute", t_cmp / t
        row.ceiling = f"{peak:.0f} TFLOP/s ({sources.get(row.flop_dtype or '', '?')})"
    else:
        row.bound, row.roofline = "memory", t_mem / t
        row.ceiling = f"copy {copy_gbps:.0f} GB/s"
    from kernels.registry import base_name

    row.flagged = row.roofline < FLAG_BELOW
    if row.flagged and row.correct:
        row.reason = LOW_ROOFLINE_REASONS.get(base_name(row.kernel),
                                              "no known cause: profile it (ncu)")


def suite_baseline(names: list[str] | None = None, *, arch: str = "auto",
                   cache_dir: Path | None = None, workers: int | None = None,
                   seeds: tuple[int, ...] = (0, 1, 2), timing_budget_s: float = 0.5,
                   space: str | None = None, max_configs: int | None = None,
                   vendor: bool = True,
                   log: Callable[[str], None] = print) -> SuiteBaselineReport:
    """Autotune every suite kernel on this machine's GPU and measure it against its roofline.

    Args:
        names: suite names (default: all, variants included).
        space: autotune space, ``wide`` or ``narrow`` (None: ``AILOWER_AUTOTUNE_SPACE``, wide by
            default): the report says which.
        max_configs: autotune at most this many configs per kernel (:func:`capped_configs`; a
            capped row says so); None: the whole space.
        vendor: also time the vendor paths (torch).
        arch: ``auto`` (the device's) or ``sm_89`` / ``sm_90a`` / ``sm_100a``.
        cache_dir: reference-compile and input cache (default ``~/.ailower/cache``).
        workers: CPU processes for compiling and drawing inputs (default: all cores).
        seeds: correctness seeds per config at the verify size.
        timing_budget_s: target wall time of each kernel's timed loop (10-100 reps per config).
        log: progress printer.

    Returns:
        The report; rows in the order of ``names``.

    Raises:
        GPUUnavailable: no CUDA driver or device.
        UsageError: an unknown arch, or the device arch differs from ``arch``.
        SpecError: an unknown kernel name.
    """
    from harness import (
        GPUUnavailable,
        UsageError,
        WorkerError,
        autotune,
        compile_space,
        device_arch,
        gpu_available,
    )
    from harness.evaluate import GPUEvaluator
    from kernels import get
    from kernels import names as all_names

    ok, why = gpu_available()
    if not ok:
        raise GPUUnavailable(f"suite baseline needs a GPU: {why}")
    dev = device_arch()
    if arch == "auto":
        arch = dev or "sm_90a"
    elif dev is not None and dev != arch:
        raise UsageError(f"--arch {arch} but the GPU is {dev}: the cubins would not load")
    from kernels import default_space

    space = space or default_space()
    names = list(names or all_names())
    specs = {n: get(n, space) for n in names}
    if cache_dir is None:  # the data directory's cache (AILOWER_DATA_DIR), not always ~
        from common.settings import get_settings

        cache_dir = get_settings().cache_dir
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    report = SuiteBaselineReport(arch=arch, space=space, max_configs=max_configs)
    t_all = time.perf_counter()

    t0 = time.perf_counter()
    log("measuring the matmul ceiling with torch (8192^3) ...")
    rates, sources = measure_matmul_ceiling()
    if "error" in sources:
        log(f"  {sources['error']}: the suite's own best gemm rates will be the ceiling")
    report.seconds["ceiling"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    workers = workers or os.cpu_count() or 1
    chosen = {n: capped_space(s, max_configs) for n, s in specs.items()}
    log(f"compiling {sum(len(c) for c in chosen.values())} configs ({space} spaces"
        f"{f', at most {max_configs} per kernel' if max_configs else ''}) of {len(names)} "
        f"kernels for {arch} and drawing bench inputs on {workers} processes ...")
    compile_errors = prepare(names, arch, cache, workers, log, space=space,
                             max_configs=max_configs)
    report.seconds["prepare"] = time.perf_counter() - t0

    ev = GPUEvaluator(input_cache=cache, timing_budget_s=timing_budget_s)
    copies: list[float] = []
    t0 = time.perf_counter()
    raw: dict[str, tuple[float, float]] = {}
    for n in names:
        spec = specs[n]
        tk = time.perf_counter()
        row = BaselineRow(kernel=n, flop_dtype=spec.flop_dtype, space=space,
                          space_configs=len(spec.configs()))
        refs, bad = compile_space(spec, arch, cache_dir=cache, configs=chosen[n])
        row.configs, row.compile_failures = len(refs) + len(bad), len(bad)
        row.capped = len(chosen[n]) < row.space_configs
        if not refs:
            row.reason = "no config compiled: " + "; ".join(compile_errors[n] or [str(b) for b in bad])[:300]
        else:
            try:
                base = autotune(spec, refs, ev, seeds=seeds)
            except WorkerError as exc:
                row.reason = str(exc)[:400]
            else:
                res = base.result
                if res.device is not None:
                    report.device = res.device.name
                    if res.device.copy_gbps:
                        copies.append(res.device.copy_gbps)
                best = res.kernel(res.best or "")
                row.configs_correct = sum(
                    1 for k in res.kernels if k.checks and all(c.ok for c in k.checks)
                    and k.status == "ok")
                if best is not None and best.timing is not None:
                    row.best_config = base.artifacts.config.key()
                    row.median_ms, row.iqr_ms = best.timing.median_ms, best.timing.iqr_ms
                    row.tflops, row.gbps = best.achieved_tflops, best.achieved_gbps
                    row.correct = (best.status == "ok" and len(best.checks) == len(seeds)
                                   and all(c.ok for c in best.checks))
                    if not row.correct:
                        row.reason = best.message
        if row.capped and not row.reason:
            row.reason = (f"autotune capped at {len(chosen[n])} of {row.space_configs} configs "
                          "(the narrow space's, then every k-th of the rest)")
        raw[n] = (spec.flop_count("bench"), spec.byte_count("bench"))
        row.seconds = time.perf_counter() - tk
        report.rows.append(row)
        log(f"  {n}: {row.best_config or 'no correct config'} "
            f"{f'{row.median_ms:.4f} ms' if row.median_ms else ''} ({row.seconds:.1f} s)")
    report.seconds["autotune"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if vendor:
        log("timing the vendor paths (torch: cuBLAS, cuDNN, SDPA) ...")
        report.vendor = measure_vendor_subprocess(names, cache_dir=cache)
    report.seconds["vendor"] = time.perf_counter() - t0

    report.copy_gbps = statistics.median(copies) if copies else 0.0
    for dt, gemm in (("fp16", "gemm.fp16"), ("fp8e4nv", "gemm.fp8")):
        if dt not in rates:
            row = next((r for r in report.rows if r.kernel == gemm and r.tflops and r.correct), None)
            if row is not None:
                rates[dt] = row.tflops  # type: ignore[assignment]
                sources[dt] = f"suite {gemm} baseline (torch unavailable; self-referential)"
    report.matmul_tflops = rates
    report.matmul_source = sources
    for row in report.rows:
        flops, nbytes = raw[row.kernel]
        _roofline(row, flops, nbytes, report.copy_gbps, rates, sources)
    report.seconds["total"] = time.perf_counter() - t_all
    return report


def render_table(report: SuiteBaselineReport) -> str:
    """The report as a plain-text table plus the flagged rows' reasons and the ceilings used."""
    head = (f"{'kernel':<26} {'configs':>9} {'best config':<52} {'ms':>9} {'TFLOP/s':>8} {'GB/s':>7} "
            f"{'bound':<7} {'roofline':>8} {'correct':>7}  vendor ms (vendor/Triton)")
    cap = f", at most {report.max_configs} configs per kernel" if report.max_configs else ""
    lines = [f"suite baseline on {report.device or '?'} ({report.arch}, {report.space} autotune "
             f"spaces{cap}); copy bandwidth "
             f"{report.copy_gbps:.0f} GB/s; matmul ceilings: "
             + ", ".join(f"{k} {v:.0f} TFLOP/s [{report.matmul_source.get(k, '?')}]"
                         for k, v in report.matmul_tflops.items()), head, "-" * len(head)]
    vend = {v.kernel: v for v in report.vendor}
    for r in report.rows:
        lines.append(
            f"{r.kernel:<26} {f'{r.configs}/{r.space_configs}':>9} {r.best_config[:52]:<52} "
            f"{(f'{r.median_ms:.4f}' if r.median_ms else '-'):>9} "
            f"{(f'{r.tflops:.1f}' if r.tflops else '-'):>8} "
            f"{(f'{r.gbps:.0f}' if r.gbps else '-'):>7} {r.bound:<7} "
            f"{(f'{r.roofline:.2f}' if r.roofline is not None else '-'):>8} "
            f"{'yes' if r.correct else 'NO':>7}  {vendor_cell(vend.get(r.kernel), r.median_ms)}"
            f"{'  <50%' if r.flagged else ''}")
    notes = [f"  {r.kernel}: {r.reason}" for r in report.rows if r.reason]
    if notes:
        lines += ["", "flagged (< 50% of roofline) or failed:", *notes]
    lines.append("\nwall time: " + ", ".join(f"{k} {v:.0f} s" for k, v in report.seconds.items()))
    return "\n".join(lines)
