"""GPU evaluation from the parent's side: build worker requests, run the worker, read its result.

The worker (:mod:`harness.gpu.worker`) runs in its own process group; a hang or a crash kills only
it. Reference and candidate are described the same way (:class:`~harness.results.KernelUnderTest`)
and go through the same launcher.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from harness.candidate import Candidate
from harness.errors import UsageError, WorkerError
from harness.gpu.driver import device_arch, probe_gpu
from harness.gpu.worker import WorkerRequest
from harness.reference import ReferenceArtifacts
from harness.results import EvalResult, KernelRun, KernelUnderTest
from harness.tensormap import TENSOR_MAP_ALIGN, TENSOR_MAP_BYTES, TensorMapArgs, tensor_map_args
from kernels.abi import KernelABI
from kernels.spec import Config, KernelSpec, Param

__all__ = ["GPUEvaluator", "RaceGateResult", "kernel_under_test", "reference_under_test", "autotune",
           "evaluate_candidate", "candidate_request", "race_gate", "gpu_available", "device_arch",
           "Baseline"]

_ROOT = str(Path(__file__).resolve().parent.parent)


def gpu_available() -> tuple[bool, str]:
    """``(available, reason)``: is there a CUDA driver with a device? Safe without a GPU."""
    return probe_gpu()


def _ctype(abi_type: str, size: int, dt: str) -> str:
    if dt in ("fp32",):
        return "f32"
    if dt == "fp64":
        return "f64"
    if dt in ("fp16", "bf16"):
        return "u16"
    if size == 8:
        return "i64" if dt.startswith("i") else "u64"
    return "i32" if dt.startswith("i") else "u32"


def _scalar_bits(value: float | int, dt: str) -> float | int:
    import ml_dtypes
    import numpy as np

    if dt == "fp16":
        return int(np.array(value, dtype=np.float16).view(np.uint16))
    if dt == "bf16":
        return int(np.array(value, dtype=ml_dtypes.bfloat16).view(np.uint16))
    if dt in ("fp32", "fp64"):
        return float(value)
    return int(value)


def kernel_under_test(spec: KernelSpec, abi: KernelABI, cubin: bytes, *, label: str, role: str,
                      config: Config, threads: int, dynamic_smem: int,
                      cluster: tuple[int, int, int] = (1, 1, 1), meta: dict[str, int] | None = None,
                      global_scratch_bytes: int = 0, global_scratch_align: int = 1,
                      sizes: tuple[str, ...] = ("verify", "bench")) -> KernelUnderTest:
    """Describe one cubin and its launch for the worker.

    ``abi`` is the *contract* (the reference's ABI): arguments are packed by it for reference and
    candidate alike. ``meta`` (the candidate's meta-parameters) overrides ``config.meta`` in the
    grid expression.

    A ``tensordesc`` parameter becomes its CUtensorMap (``["tensordesc", name]``, encoded by the
    worker over its buffer from ``tensor_maps``: element type, swizzle and box from the ABI's
    :class:`~kernels.abi.TensorMapLayout`, i.e. the reference's ``tensordesc_meta``, so a
    candidate gets the reference's descriptors) followed by its shape (i32) and stride (i64)
    pieces as scalars (:mod:`harness.tensormap`).

    Raises:
        UsageError: a scalar whose packed size differs from the ABI's, a descriptor the ABI has no
            layout for or whose entry parameters are not the TMA form, or encode arguments that
            break a ``cuTensorMapEncodeTiled`` rule (the message names the parameter).
    """
    m = {**config.meta, **(meta or {})}
    cfg = Config(meta=m, num_warps=config.num_warps, num_stages=config.num_stages,
                 num_ctas=config.num_ctas)
    params: list[tuple[str, str]] = []
    scalars: dict[str, dict[int, tuple[str, float | int]]] = {s: {} for s in sizes}
    tmaps: dict[str, dict[int, TensorMapArgs]] = {s: {} for s in sizes}
    desc_args: dict[str, dict[str, TensorMapArgs]] = {}
    desc_pos: dict[str, int] = {}
    by_name = {p.name: p for p in spec.params}
    for i, ap in enumerate(abi.params):
        if ap.source == "pointer":
            params.append(("buf", ap.spec_param or ""))
        elif ap.source == "scalar":
            p = by_name[ap.spec_param or ""]
            ct = _ctype(ap.ptx_type, ap.size, p.dtype or "i32")
            if {"f32": 4, "f64": 8, "u16": 2, "i64": 8, "u64": 8, "i32": 4, "u32": 4}[ct] != ap.size:
                raise UsageError(f"parameter {ap.name}: spec dtype {p.dtype} packs to {ct}, but the "
                                 f"entry declares .{ap.ptx_type} ({ap.size} B)")
            for s in sizes:
                scalars[s][i] = (ct, _scalar_bits(spec.scalar_value(p, cfg, s), p.dtype or "i32"))
            params.append(("scalar", p.name))
        elif ap.source in ("global_scratch", "profile_scratch"):
            params.append(("scratch", "global" if ap.source == "global_scratch" else "profile"))
        elif ap.source == "tensordesc":
            name = ap.spec_param or ""
            if name not in desc_args:
                desc_args[name] = _descriptor(spec, abi, by_name, name, config, sizes)
                desc_pos[name] = 0
            k, desc_pos[name] = desc_pos[name], desc_pos[name] + 1
            rank = len(by_name[name].shape or ())
            if k == 0:
                if ap.size != TENSOR_MAP_BYTES or ap.align != TENSOR_MAP_ALIGN:
                    raise UsageError(f"parameter {ap.name}: the CUtensorMap of {name} needs "
                                     f".param .align 64 .b8 [128]; the entry declares "
                                     f"{ap.signature()}")
                for s in sizes:
                    tmaps[s][i] = desc_args[name][s]
                params.append(("tensordesc", name))
                continue
            ct, piece = ("i32", "shape_tail") if k <= rank else ("i64", "stride_tail")
            if k > 2 * rank or ap.size != (4 if ct == "i32" else 8):
                raise UsageError(f"parameter {ap.name}: piece {k} of tensordesc {name} (rank "
                                 f"{rank}) should be {'.u32' if ct == 'i32' else '.u64'}; the "
                                 f"entry declares {ap.signature()}")
            j = (k - 1) % rank
            for s in sizes:
                scalars[s][i] = (ct, getattr(desc_args[name][s], piece)[j])
            params.append(("scalar", f"{name}.{piece.split('_')[0]}[{j}]"))
        else:
            raise UsageError(f"{spec.name}: parameter {ap.name} has unknown source {ap.source!r}")
    grid = {s: spec.grid_dims(s, m) for s in sizes}
    return KernelUnderTest(
        label=label, role=role, cubin_b64=base64.b64encode(cubin).decode(), entry=abi.entry,
        threads=threads, dynamic_smem=dynamic_smem, cluster=cluster, grid=grid, params=params,
        scalars=scalars, tensor_maps=tmaps, global_scratch_bytes=global_scratch_bytes,
        global_scratch_align=global_scratch_align)


def _descriptor(spec: KernelSpec, abi: KernelABI, by_name: dict[str, Param], name: str,
                config: Config, sizes: tuple[str, ...]) -> dict[str, TensorMapArgs]:
    """Size -> encode arguments of tensordesc ``name``, from the ABI's layout (the reference's
    ``tensordesc_meta``: candidates get the same descriptors)."""
    lay = next((t for t in abi.tensor_maps if t.spec_param == name), None)
    if lay is None:
        raise UsageError(f"{spec.name}: the ABI has no tensor-map layout for tensordesc {name} "
                         "(recompile the reference: Triton's tensordesc_meta gives it)")
    return {s: tensor_map_args(spec, by_name[name], lay, s, config) for s in sizes}


def reference_under_test(spec: KernelSpec, art: ReferenceArtifacts, label: str | None = None
                         ) -> KernelUnderTest:
    """A reference config as a kernel under test (Triton's launch contract: block = 32 x warps,
    grid x multiplied by num_ctas, ``metadata.shared`` dynamic shared memory)."""
    abi = art.abi
    return kernel_under_test(
        spec, abi, art.cubin, label=label or f"triton [{art.config.key()}]", role="reference",
        config=art.config, threads=abi.threads, dynamic_smem=abi.dynamic_smem,
        cluster=(abi.num_ctas, 1, 1), global_scratch_bytes=abi.global_scratch_size,
        global_scratch_align=abi.global_scratch_align)


class GPUEvaluator:
    """Runs worker jobs in one persistent worker process (per evaluator, i.e. per GPU).

    The worker keeps the reference module, the inputs and the reference outputs of the last
    kernel loaded between jobs, so a candidate costs only its own load, checks and timing. A hang
    or a crash kills only the worker; the next job starts a fresh one transparently. A crash with
    a memory fault is diagnosed by re-running the candidate once in a fresh worker with writable
    inputs (it names the cause: a store into an input, or an access outside the buffers).

    Args:
        python: interpreter for the worker.
        hang_timeout_s: per-launch limit inside the worker, seconds.
        job_timeout_s: wall limit for one job; past it the worker's process group is killed.
        timing_budget_s: wall-time cap of one timed loop, seconds.
        ci_target: relative half-width of the speedup's 95% CI at which timing stops.
        input_cache: folder where the worker memoises bench-size inputs (None: draw each time).
        persistent: keep the worker between jobs (False: one process per job).
        sanitizer: path of compute-sanitizer for :meth:`race_gate` (None: search for it).
    """

    def __init__(self, *, python: str = sys.executable, hang_timeout_s: float = 10.0,
                 job_timeout_s: float = 900.0, timing_budget_s: float = 0.6,
                 ci_target: float = 0.0025, input_cache: Path | None = None,
                 persistent: bool = True, sanitizer: str | None = None):
        self.python, self.hang_timeout_s = python, hang_timeout_s
        self.job_timeout_s, self.timing_budget_s = job_timeout_s, timing_budget_s
        self.ci_target = ci_target
        self.input_cache = input_cache
        self.persistent = persistent
        self.sanitizer = sanitizer
        self.starts = 0
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] | None = None
        self._err_tail: list[str] = []
        self._lock = threading.Lock()

    def request(self, spec: KernelSpec, job: str, kernels: list[KernelUnderTest], **kw: Any
                ) -> WorkerRequest:
        """Build a request with the spec's roofline numbers at the bench size; for a spec with
        size constexprs the correctness checks run at the bench size too (``check_size``: a
        cubin is checked at the size whose constexpr values it was compiled with)."""
        cfg = spec.configs()[0]
        kw.setdefault("timing_budget_s", self.timing_budget_s)
        if spec.size_constexprs():
            # each size is its own compile: a cubin (the bench variant) is checked at bench
            kw.setdefault("check_size", "bench")
        kw.setdefault("ci_target", self.ci_target)
        return WorkerRequest(job=job, spec=spec.model_dump(mode="json"), kernels=kernels,
                             hang_timeout_s=self.hang_timeout_s,
                             flops=spec.flop_count("bench", cfg), bytes=spec.byte_count("bench", cfg),
                             flop_dtype=spec.flop_dtype,
                             input_cache=str(self.input_cache) if self.input_cache else None, **kw)

    # ---- the worker process ---------------------------------------------------------------------
    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        try:
            proc = subprocess.Popen([self.python, "-m", "harness.gpu.worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True, env=env, cwd=_ROOT)
        except OSError as exc:
            raise WorkerError(f"cannot start the GPU worker: {exc}") from None
        lines: queue.Queue[str | None] = queue.Queue()
        err_tail: list[str] = []

        def pump_out() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        def pump_err() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                err_tail.append(line)
                del err_tail[:-40]

        for target in (pump_out, pump_err):
            threading.Thread(target=target, daemon=True).start()
        self._proc, self._lines, self._err_tail = proc, lines, err_tail
        return proc

    @property
    def restarts(self) -> int:
        """Worker processes started after the first (after a hang, a crash or :meth:`close`)."""
        return max(0, self.starts - 1)

    def close(self) -> None:
        """Stop the worker (it exits at end of input; killed if it does not within 10 s)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()
        except OSError:
            pass
        self._kill(proc, grace_s=10.0)

    def __enter__(self) -> "GPUEvaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to report to
            pass

    def run(self, req: WorkerRequest) -> EvalResult:
        """Run one job; a hang, a crash or a timeout comes back as a status, not an exception.

        Raises:
            WorkerError: the worker could not be started or spoke an unknown protocol.
        """
        with self._lock:
            res = self._run_locked(req)
            if (res.status == "crash" and req.job == "evaluate" and req.inputs_read_only
                    and "memory fault" in res.message):
                res = self._diagnose(req, res)
            if not self.persistent:
                self.close()
            return res

    def _diagnose(self, req: WorkerRequest, res: EvalResult) -> EvalResult:
        """Name the cause of a memory fault: re-run the correctness phase with writable inputs."""
        bench = res.stage in ("timing", "timing-pipeline", "final-check", "setup-bench")  # bench size
        diag = self._run_locked(req.model_copy(update={"inputs_read_only": False, "time": bench,
                                                       "perturb": False}))
        cand = next((k for k in diag.kernels if k.role == "candidate"), None)
        if diag.status == "crash":
            why = ("an access outside the kernel's buffers: it faulted on an unmapped guard page "
                   "(also with writable inputs)")
        elif cand is not None and any(not c.inputs_unchanged for c in cand.checks):
            why = "a store into an input tensor (inputs are mapped read-only; the store faulted)"
        elif diag.status == "ok":
            why = ("a store into an input tensor that it undoes before exiting (inputs are mapped "
                   "read-only; the store faulted; with writable inputs they came back unchanged)")
        else:
            why = f"undetermined (diagnosis run: {diag.status} {diag.message[:200]})"
        res.message = f"{res.message}; cause: {why}"
        for k in res.kernels:
            if k.role == "candidate":
                k.status = "crash"
                k.message = res.message
        return res

    def _run_locked(self, req: WorkerRequest) -> EvalResult:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            proc = self._start()
            self.starts += 1
        lines = self._lines
        assert lines is not None and proc.stdin is not None
        payload = req.model_dump_json() + "\n"

        def feed() -> None:
            try:
                proc.stdin.write(payload)  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
            except (BrokenPipeError, ValueError, OSError):
                pass  # the worker died or stopped reading; its exit status and stderr tell why

        # written from a thread: a worker that never reads stdin cannot block us
        threading.Thread(target=feed, daemon=True).start()
        deadline = time.monotonic() + self.job_timeout_s
        last_stage: dict[str, Any] = {}
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self._kill(proc)
                self._proc = None
                return EvalResult(status="hang", stage=last_stage.get("stage", ""),
                                  message=f"the worker produced no result within {self.job_timeout_s:g} s"
                                          f" (last stage: {last_stage.get('stage')} "
                                          f"{last_stage.get('label') or ''}); killed")
            if line is None:
                break
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue  # stray output from a library: ignore
            kind = ev.get("event")
            if kind == "stage":
                last_stage = ev
            elif kind == "result":
                res = EvalResult.model_validate(ev["result"])
                if res.status == "error":  # the worker exits after a harness error
                    self._kill(proc, grace_s=10.0)
                    self._proc = None
                return res
            elif kind in ("hang", "crash"):
                self._kill(proc, grace_s=10.0)
                self._proc = None
                partial = [KernelRun.model_validate(r) for r in ev.get("partial", [])]
                for r in partial:
                    if r.label == ev.get("label"):
                        r.status = kind
                        r.message = ev.get("message", "")
                culprit = next((k for k in req.kernels if k.label == ev.get("label")), None)
                if culprit is not None and all(r.label != culprit.label for r in partial):
                    partial.append(KernelRun(label=culprit.label, role=culprit.role, status=kind,
                                             message=ev.get("message", "")))
                return EvalResult(status=kind, stage=ev.get("stage", ""), message=ev.get("message", ""),
                                  kernels=partial)
            else:
                self._kill(proc)
                self._proc = None
                raise WorkerError(f"unknown worker event {kind!r}")
        rc = proc.wait(timeout=30)
        self._proc = None
        tail = "".join(self._err_tail)[-2000:]
        sig = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
        return EvalResult(status="crash", stage=last_stage.get("stage", ""),
                          message=f"the worker died ({sig}) in stage {last_stage.get('stage')!r} "
                                  f"{last_stage.get('label') or ''}\n{tail}")

    @staticmethod
    def _kill(proc: subprocess.Popen, grace_s: float = 0.0) -> None:
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        proc.wait(timeout=30)

    # ---- race gate ------------------------------------------------------------------------------
    def find_sanitizer(self) -> str | None:
        """compute-sanitizer: ``sanitizer`` argument, ``AILOWER_COMPUTE_SANITIZER``, PATH, then
        ``$CUDA_HOME/bin`` and ``/usr/local/cuda*/bin``; None when absent."""
        import glob
        import shutil

        for c in (self.sanitizer, os.environ.get("AILOWER_COMPUTE_SANITIZER")):
            if c and os.access(c, os.X_OK):
                return c
        found = shutil.which("compute-sanitizer")
        if found:
            return found
        roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda",
                 *sorted(glob.glob("/usr/local/cuda-*"), reverse=True)]
        for r in roots:
            c = os.path.join(r, "bin", "compute-sanitizer") if r else ""
            if c and os.access(c, os.X_OK):
                return c
        return None

    def race_gate(self, req: WorkerRequest, tools: tuple[str, ...] = ("racecheck", "synccheck"),
                  timeout_s: float = 300.0) -> RaceGateResult:
        """Run the candidate of ``req`` once at the verify size under compute-sanitizer tools.

        For a candidate about to become the best: racecheck finds shared-memory data hazards
        (missing barriers), synccheck illegal barrier use (NVIDIA Compute Sanitizer docs).

        Returns:
            A :class:`RaceGateResult`; ``ran`` is False when compute-sanitizer is not installed.
        """
        tool_path = self.find_sanitizer()
        if tool_path is None:
            return RaceGateResult(ran=False, ok=True, message="compute-sanitizer not found: race "
                                  "gate skipped (install the CUDA toolkit or set "
                                  "AILOWER_COMPUTE_SANITIZER)")
        one = req.model_copy(update={"job": "launch_once", "seeds": req.seeds[:1]})
        env = dict(os.environ)
        env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        t0 = time.perf_counter()
        for tool in tools:
            cmd = [tool_path, "--tool", tool, "--error-exitcode", "86", "--print-limit", "12",
                   self.python, "-m", "harness.gpu.worker", "--once"]
            try:
                p = subprocess.run(cmd, input=one.model_dump_json() + "\n", capture_output=True,
                                   text=True, timeout=timeout_s, env=env, cwd=_ROOT,
                                   start_new_session=True)
            except subprocess.TimeoutExpired:
                return RaceGateResult(ran=True, ok=False, tool=tool, seconds=time.perf_counter() - t0,
                                      message=f"compute-sanitizer {tool} did not finish within "
                                              f"{timeout_s:g} s")
            text = p.stdout + p.stderr
            report = [ln for ln in text.splitlines() if ln.startswith("=========")]
            loaded = any('"status": "ok"' in ln for ln in text.splitlines() if '"result"' in ln)
            if p.returncode == 86 or any("Error" in ln or "hazard" in ln.lower() and "0 hazard" not in ln
                                         for ln in report if "ERROR SUMMARY: 0" not in ln):
                hits = [ln.removeprefix("=========").strip() for ln in report
                        if ln.strip("= ")][:8]
                return RaceGateResult(ran=True, ok=False, tool=tool, seconds=time.perf_counter() - t0,
                                      message=f"compute-sanitizer {tool} reports a hazard: "
                                              + " | ".join(hits))
            if p.returncode != 0 or not loaded:
                return RaceGateResult(ran=True, ok=False, tool=tool, seconds=time.perf_counter() - t0,
                                      message=f"compute-sanitizer {tool} run failed "
                                              f"(exit {p.returncode}): {text[-600:]}")
        return RaceGateResult(ran=True, ok=True, tool=",".join(tools), seconds=time.perf_counter() - t0,
                              message=f"compute-sanitizer {', '.join(tools)}: no hazards")


class RaceGateResult(BaseModel):
    """Outcome of :meth:`GPUEvaluator.race_gate`.

    Attributes:
        ran: compute-sanitizer was found and run.
        ok: no hazard reported (True when it did not run: the caller reads ``ran``).
        tool: the tool that reported (or the tools run).
        message: what it reported, or why it did not run.
        seconds: wall time.
        racecheck_unreliable: set (why) when racecheck reported hazards in a kernel it is known
            to misjudge (:mod:`harness.racecheck_limits`); ``ok`` stays False.
    """

    ran: bool
    ok: bool
    tool: str = ""
    message: str = ""
    seconds: float = 0.0
    racecheck_unreliable: str = ""


class Baseline:
    """The autotuned baseline: the fastest correct reference config and the autotune job's result.

    Attributes:
        artifacts: the winning config's reference artifacts.
        result: the autotune job's :class:`EvalResult` (per-config timings).
    """

    def __init__(self, artifacts: ReferenceArtifacts, result: EvalResult):
        self.artifacts, self.result = artifacts, result


def autotune(spec: KernelSpec, refs: list[ReferenceArtifacts], evaluator: GPUEvaluator,
             seeds: tuple[int, ...] = (0,), attempts: int = 4) -> Baseline:
    """Time every compiled config and pick the fastest correct one.

    A config whose launch faults or hangs ends the worker's job (a fault leaves the CUDA context
    unusable): it is taken out, with its status and message kept in the result's ``kernels``, and
    the job runs again on the other configs, at most ``attempts`` times in all (Triton's own
    kernel can fault at some configs of a widened space, e.g. ``mamba2_chunk_scan`` with
    ``BLOCK_P=16, num_warps=8`` on the H200, 2026-12-02).

    Raises:
        WorkerError: no config was correct (the result's messages say why), or the job failed.
    """
    kuts = [reference_under_test(spec, a) for a in refs]
    art_of = {k.label: a for k, a in zip(kuts, refs)}
    dropped: list[KernelRun] = []
    for _attempt in range(attempts):
        res = evaluator.run(evaluator.request(spec, "autotune", kuts, seeds=list(seeds),
                                              min_reps=10, max_reps=100))
        bad = {k.label for k in res.kernels if k.status in ("hang", "crash")}
        if res.status not in ("hang", "crash") or not bad or not bad & {k.label for k in kuts}:
            break
        dropped += [k for k in res.kernels if k.label in bad]
        kuts = [k for k in kuts if k.label not in bad]
        if not kuts:
            break
    if dropped:
        res = res.model_copy(update={"kernels": [*res.kernels, *(
            k for k in dropped if k.label not in {r.label for r in res.kernels})]})
    if res.status != "ok" or res.best is None:
        detail = "; ".join(f"{k.label}: {k.status} {k.message}" for k in res.kernels)
        # every config ran and none matched: Triton's own kernel disagrees with the reference
        hint = ("; Triton's own kernel fails the reference, so the spec or its reference is "
                "probably wrong (roles, dtypes, shapes, sizes, the reference function)"
                if res.status == "ok" and res.kernels else "")
        raise WorkerError(f"autotune of {spec.name} found no correct config ({res.status}: "
                          f"{res.message.strip()[:500]}) {detail}{hint}")
    return Baseline(art_of[res.best], res)


def candidate_request(spec: KernelSpec, baseline: ReferenceArtifacts, candidate: Candidate,
                      cubin: bytes, evaluator: GPUEvaluator, seeds: tuple[int, ...] = (0, 1, 2),
                      time_it: bool = True, pipeline: bool = False) -> WorkerRequest:
    """The worker request that evaluates ``candidate`` against ``baseline`` (see
    :func:`evaluate_candidate`; ``pipeline`` adds the pipeline-context timing).

    Raises:
        UsageError: fewer than 3 seeds, or the spec cannot be launched.
    """
    if len(seeds) < 3:
        raise UsageError("correctness needs at least 3 seeds")
    ref = reference_under_test(spec, baseline, label="reference")
    cand = kernel_under_test(
        spec, baseline.abi, cubin, label="candidate", role="candidate", config=baseline.config,
        threads=candidate.threads, dynamic_smem=candidate.dynamic_smem,
        cluster=candidate.cluster_dims, meta=candidate.meta,
        global_scratch_bytes=candidate.global_scratch_size,
        global_scratch_align=candidate.global_scratch_align)
    return evaluator.request(spec, "evaluate", [ref, cand], seeds=list(seeds), time=time_it,
                             pipeline=pipeline and time_it)


def evaluate_candidate(spec: KernelSpec, baseline: ReferenceArtifacts, candidate: Candidate,
                       cubin: bytes, evaluator: GPUEvaluator, seeds: tuple[int, ...] = (0, 1, 2),
                       time_it: bool = True, pipeline: bool = False) -> EvalResult:
    """Correctness (>= 3 seeds plus a secret one) and interleaved timing of ``candidate`` against
    ``baseline`` (method: :mod:`harness.gpu.worker`); with ``pipeline``, also the timing in a
    pipeline context (producer writes the inputs, consumer reads the outputs: the result's
    ``pipeline``, :class:`harness.results.PipelineTiming`).

    The candidate is launched with the baseline's ABI (the contract), its own threads, dynamic
    shared memory, cluster and meta-parameters (for the grid). The result's ``speedup`` is the
    median paired ratio and ``speedup_ci`` its 95% confidence interval.

    Raises:
        UsageError: fewer than 3 seeds, or the spec cannot be launched.
    """
    return evaluator.run(candidate_request(spec, baseline, candidate, cubin, evaluator, seeds,
                                           time_it, pipeline))


def race_gate(spec: KernelSpec, baseline: ReferenceArtifacts, candidate: Candidate, cubin: bytes,
              evaluator: GPUEvaluator) -> RaceGateResult:
    """compute-sanitizer racecheck + synccheck on ``candidate`` at the verify size (for a candidate
    about to become the best; a few seconds). ``ran`` is False without compute-sanitizer.

    When racecheck reports a hazard in a kernel racecheck is known to misjudge (a barrier with a
    thread count below the CTA's: :func:`harness.racecheck_limits.racecheck_misjudges`), the result
    is still ``ok=False`` and ``racecheck_unreliable`` says why; the caller (``agent.loop``) then
    has the emulator's happens-before analysis decide."""
    from harness.racecheck_limits import racecheck_misjudges

    g = evaluator.race_gate(candidate_request(spec, baseline, candidate, cubin, evaluator,
                                              time_it=False))
    if g.ran and not g.ok and g.tool == "racecheck" and "reports a hazard" in g.message:
        why = racecheck_misjudges(candidate.ptx, candidate.threads)
        if why:
            g = g.model_copy(update={"racecheck_unreliable": why})
    return g
