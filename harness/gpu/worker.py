"""The GPU evaluation worker: ``python -m harness.gpu.worker`` (one persistent process per GPU).

Protocol: one :class:`WorkerRequest` per line (JSON) on stdin; for each, JSON lines on stdout:
``stage`` events as it goes, then one ``result`` line. The process serves requests until stdin
closes. A kernel that does not finish within ``hang_timeout_s`` makes the worker print a ``hang``
line and exit with status 3; a sticky CUDA error (illegal address, ...) prints ``crash`` and exits
with status 4. Either way only this process dies; the parent (:mod:`harness.evaluate`) restarts it
for the next request. ``--once`` serves a single request (used under compute-sanitizer).

What stays loaded between requests (per kernel spec and reference cubin, the "setup"): the
reference module, the inputs of every seed and of the two bench input sets in device memory, the
float64 and reference-kernel outputs, the measured copy bandwidth and the L2 flush buffer. A
candidate request then costs a module load, the correctness runs and the timing.

Method (``../shared/reference/harness_threats.md`` sections 10-11, ``METHOD.md``, issue 9):

* every buffer is a :class:`~harness.gpu.driver.GuardedBuffer`: its own virtual-address
  reservation with unmapped guard pages around the mapped pages, data placed against the end of
  the mapping (even seeds, bench set 0) or its start (odd seeds, bench set 1), so an out-of-bounds
  access faults; the remaining slack holds a canary that is checked. Inputs are mapped
  **read-only**: a candidate store into an input faults, even one it undoes before exiting;
* outputs are poisoned before **every** launch (0xFF: NaN for floats, or 0x7F); scratch too;
* correctness at the ``verify`` size on the caller's seeds plus one secret seed: each compared
  with the reference kernel's output (bitwise fast path) and the float64 reference; every
  candidate runs twice, the second pass in reverse seed order while another stream keeps the SMs
  busy (changes CTA co-residency and timing, exposing races), and must reproduce its outputs
  bitwise;
* timing at the ``bench`` size: reference and candidate interleaved in pairs (ABBA order, two
  input sets, one shared output buffer), each launch preceded outside the timed window by the
  output poison, ``applypriority.evict_normal`` over the inputs, a persisting-L2 reset and a write
  of >= 2x L2; **every** timed launch's output is compared on the device with the reference
  output (:mod:`harness.gpu.helpers`); timing stops when the speedup's 95% confidence interval is
  within ``ci_target`` of the median (or at the budget);
* a final launch from a **freshly loaded** module must match too, and a roofline fraction above
  ``roofline_bound`` (measured copy bandwidth, datasheet peak) is rejected as faster than the
  hardware allows;
* a candidate that disagrees with the reference kernel beyond the tolerance at the bench size
  (but passed every verify-size check) is **arbitrated by float64** (:meth:`Worker.arbitrate`,
  ``harness.correctness.arbitrate``): it must give bitwise the same output on two fresh launches
  per bench set and be at least about as close to the spec's float64 reference as the reference
  kernel is; then the timing runs again with **every** launch compared bytewise with that
  arbitrated output (so a launch the float64 check did not see cannot differ from one it did).
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from harness.correctness import CompareResult, arbitrate, compare
from harness.gpu.driver import Context, CudaError, DeviceBuffer, GuardedBuffer, Kernel, LaunchSpec, check
from harness.gpu.helpers import CHECK_KERNEL_FOR_DTYPE, SLOT_BYTES, Helpers
from harness.inputs import (bench_seed, cached_inputs, make_inputs, output_fill_byte,
                            reference_outputs)
from harness.refproc import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_S, ReferenceBudgetError, bench_reference
from harness.results import (
    DeviceSummary,
    EvalResult,
    KernelRun,
    KernelUnderTest,
    PipelineTiming,
    SeedCheck,
)
from harness.tensormap import TensorMapArgs, encode_tensor_map, param_slot
from harness.timing import PEAK_TFLOPS, ROOFLINE_BOUND, paired_speedup, roofline_fraction, stats
from kernels.dtypes import dtype
from kernels.spec import KernelSpec

__all__ = ["WorkerRequest", "main"]

CTYPES = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
          "u64": ctypes.c_uint64, "f32": ctypes.c_float, "f64": ctypes.c_double,
          "u16": ctypes.c_uint16, "u8": ctypes.c_uint8}


class WorkerRequest(BaseModel):
    """One job for the worker.

    Attributes:
        job: ``evaluate`` (reference + candidate: correctness then interleaved timing),
            ``autotune`` (every reference config: correctness, then timing) or ``launch_once``
            (the candidate once on the first seed, nothing else: for compute-sanitizer).
        spec: the KernelSpec (JSON form).
        kernels: what to run; in ``evaluate`` exactly one reference and at most one candidate.
        seeds: input seeds for the correctness phase (>= 3 for ``evaluate``).
        secret_seed: add one seed drawn from ``os.urandom`` (evaluate jobs).
        hang_timeout_s: a launch still running after this many seconds is a hang.
        timing_budget_s: wall-time cap of the timed loop, seconds.
        min_reps, max_reps: bounds on timed launches (pairs in ``evaluate``) per kernel.
        ci_target: timing stops when the speedup's 95% CI lies within +-ci_target (relative) of
            the median (evaluate jobs).
        roofline_bound: a candidate above this roofline fraction is rejected.
        flops, bytes: FLOPs and minimum DRAM bytes of one ``bench`` launch (roofline).
        flop_dtype: dtype whose tensor-core peak bounds the FLOPs.
        time: run the timing phase at all.
        perturb: run the second correctness pass under SM occupancy from the side stream.
        inputs_read_only: map inputs read-only (False only for the crash diagnosis, which then
            compares the inputs bytewise after every launch).
        l2_demote: demote the inputs' L2 lines to evict_normal before each timed launch.
        input_cache: folder memoising the bench-size inputs (``harness.inputs.cached_inputs``).
    """

    job: Literal["evaluate", "autotune", "launch_once"]
    spec: dict[str, Any]
    kernels: list[KernelUnderTest]
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2])
    secret_seed: bool = True
    hang_timeout_s: float = 10.0
    timing_budget_s: float = 0.6
    min_reps: int = 16
    max_reps: int = 2000
    ci_target: float = 0.0025
    roofline_bound: float = ROOFLINE_BOUND
    flops: float = 0.0
    bytes: float = 0.0
    flop_dtype: str | None = None
    time: bool = True
    perturb: bool = True
    inputs_read_only: bool = True
    l2_demote: bool = True
    input_cache: str | None = None
    pipeline: bool = False
    """Evaluate jobs: after the isolated timing, time the pair again in a pipeline context
    (:meth:`Worker.timing_pipeline`, :class:`harness.results.PipelineTiming`)."""
    check_size: Literal["verify", "bench"] = "verify"
    """Size the correctness checks run at: ``verify``, or ``bench`` for a spec with size
    constexprs (each size is its own compile, and a cubin is checked at the size it was
    compiled for: :meth:`kernels.KernelSpec.size_constexprs`)."""
    launch_size: Literal["verify", "bench"] = "verify"
    """Size of the single launch of a ``launch_once`` job (``bench`` for Nsight Compute,
    :mod:`harness.profile`)."""
    bench_arbitration: bool = True
    """Evaluate jobs: decide a bench-size disagreement with the reference kernel by the float64
    reference (:meth:`Worker.arbitrate`) instead of rejecting at once."""
    arbitration_max_bytes: int = DEFAULT_MAX_BYTES
    """Address-space cap of the child computing the bench-size float64 reference, bytes
    (:func:`harness.refproc.bench_reference`)."""
    arbitration_timeout_s: float = DEFAULT_TIMEOUT_S
    """Wall-clock cap of that child, seconds."""


def emit(obj: dict[str, Any]) -> None:
    """Write one JSON line to stdout and flush."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class _Abort(Exception):
    """Internal: stop the job with a hang/crash record."""

    def __init__(self, kind: str, label: str, stage: str, message: str):
        super().__init__(message)
        self.kind, self.label, self.stage, self.message = kind, label, stage, message


@dataclass
class _BufSet:
    """The buffers of one input set: inputs (read-only), pristine in-out copies and work buffers."""

    inputs: dict[str, np.ndarray]
    bufs: dict[str, GuardedBuffer]                      # every tensor parameter
    pristine: dict[str, GuardedBuffer] = field(default_factory=dict)   # inout originals
    ref64: dict[str, np.ndarray] | None = None
    ref64_error: str = ""        # bench sets: why the float64 reference could not be computed
    ref_out: dict[str, np.ndarray] = field(default_factory=dict)       # reference kernel, host
    ref_dev: dict[str, GuardedBuffer] = field(default_factory=dict)    # reference kernel, device


@dataclass
class _Setup:
    key: str
    spec: KernelSpec
    verify: dict[int, _BufSet] = field(default_factory=dict)
    bench: list[_BufSet] = field(default_factory=list)
    ref_kernel: Kernel | None = None
    ref_label: str | None = None
    secret: int | None = None

    def free(self) -> None:
        for bs in [*self.verify.values(), *self.bench]:
            for b in [*bs.bufs.values(), *bs.pristine.values(), *bs.ref_dev.values()]:
                b.free()
        if self.ref_kernel is not None:
            self.ref_kernel.unload()


class Worker:
    """Serves requests on device 0; keeps the context, helpers and the last setup."""

    def __init__(self) -> None:
        self.ctx = Context(0)
        self.helpers = Helpers(self.ctx)
        self.stage = "init"
        self._copy_gbps: float | None = None
        self._flush: DeviceBuffer | None = None
        self._setup: _Setup | None = None
        self._slots: DeviceBuffer | None = None
        self._self_tested = False
        self._tmaps: dict[tuple[TensorMapArgs, int], ctypes.Array] = {}
        # per request: the candidate's arbitrated bench-size outputs (id of the bench _BufSet ->
        # output name -> read-only device copy), compared bytewise with every later launch
        self._expect: dict[int, dict[str, GuardedBuffer]] = {}
        self._disagreement: str | None = None

    # ---- per request ----------------------------------------------------------------------------
    def begin(self, req: WorkerRequest) -> None:
        self.req = req
        self.spec = KernelSpec.model_validate(req.spec)
        self.runs = {k.label: KernelRun(label=k.label, role=k.role) for k in req.kernels}
        self.kernels: dict[str, Kernel] = {}
        self._free_expect()
        self._disagreement = None

    def _free_expect(self) -> None:
        for outs in self._expect.values():
            for b in outs.values():
                b.free()
        self._expect = {}

    def _stage(self, stage: str, label: str | None = None) -> None:
        self.stage = stage
        emit({"event": "stage", "stage": stage, "label": label})

    def _sync(self, label: str) -> None:
        try:
            done = self.ctx.synchronize_all(self.req.hang_timeout_s)
        except CudaError as exc:
            raise _Abort("crash", label, self.stage, _fault_message(exc.code, label)) from None
        if not done:
            raise _Abort("hang", label, self.stage,
                         f"{label} did not finish within {self.req.hang_timeout_s:g} s")

    # ---- buffers ----------------------------------------------------------------------------------
    def _bufset(self, size: str, inputs: dict[str, np.ndarray], align: str) -> _BufSet:
        spec, ro = self.spec, self.req.inputs_read_only
        bufs: dict[str, GuardedBuffer] = {}
        pristine: dict[str, GuardedBuffer] = {}
        for p in spec.tensors():
            nbytes = int(np.prod(spec.shape(p, size))) * dtype(p.dtype).itemsize
            b = GuardedBuffer(self.ctx, nbytes, align=align)
            if p.role == "in":
                b.upload(inputs[p.name])
                b.set_read_only(ro)
            elif p.role == "inout":
                keep = GuardedBuffer(self.ctx, nbytes, align=align)
                keep.upload(inputs[p.name])
                keep.set_read_only(ro)
                pristine[p.name] = keep
            bufs[p.name] = b
        return _BufSet(inputs=inputs, bufs=bufs, pristine=pristine)

    def _prepare(self, bs: _BufSet, sentinel: int, timed: bool = False) -> None:
        """Poison outputs, restore in-out tensors (asynchronous, harness stream).

        An output with spec ``init: zeros`` is zero-filled instead (the kernel accumulates into
        it). For a partly written output (spec ``written``) a ``timed`` preparation fills 0: the
        device check compares the whole buffer with the reference capture, so the part the kernel
        never writes must hold the same bytes in every timed launch and in that capture; the
        verify-size checks poison it and compare only the written region on the host.
        """
        for p in self.spec.tensors():
            if p.role == "out":
                fill = output_fill_byte(p, sentinel, timed)
                bs.bufs[p.name].fill_byte(fill, self.ctx.stream)
            elif p.role == "inout":
                bs.bufs[p.name].copy_from(bs.pristine[p.name])

    def _scratch(self, kut: KernelUnderTest, size: str) -> DeviceBuffer | None:
        if not kut.global_scratch_bytes:
            return None
        g = kut.grid[size]
        ctas = g[0] * g[1] * g[2] * kut.cluster[0] * kut.cluster[1] * kut.cluster[2]
        return DeviceBuffer(self.ctx, ctas * kut.global_scratch_bytes, guard=0)

    def _params(self, kut: KernelUnderTest, size: str, bufs: dict[str, Any],
                scratch: DeviceBuffer | None) -> list[Any]:
        out: list[Any] = []
        for i, (kind, arg) in enumerate(kut.params):
            if kind == "buf":
                out.append(ctypes.c_uint64(bufs[arg].ptr))
            elif kind == "scalar":
                ctype, value = kut.scalars[size][i]
                out.append(CTYPES[ctype](value))
            elif kind == "scratch":
                ptr = scratch.ptr if (arg == "global" and scratch is not None) else 0
                out.append(ctypes.c_uint64(ptr))
            elif kind == "tensordesc":
                out.append(self._tensor_map(kut.tensor_maps[size][i], bufs[arg]))
            else:
                raise ValueError(f"unknown parameter kind {kind!r}")
        return out

    def _tensor_map(self, args: TensorMapArgs, buf: Any) -> ctypes.Array:
        """The CUtensorMap of ``args`` over ``buf`` in a 64-byte-aligned host slot, encoded once per
        (arguments, address): the descriptor depends on nothing else, so a buffer freed and
        another mapped at the same address gets the same bytes, and a timed launch pays no
        encode."""
        if buf.nbytes < args.nbytes:
            raise ValueError(f"tensordesc {args.param}: buffer of {buf.nbytes} B is smaller than "
                             f"the {args.nbytes} B its tensor map covers")
        key = (args, int(buf.ptr))
        slot = self._tmaps.get(key)
        if slot is None:
            if len(self._tmaps) > 4096:
                self._tmaps.clear()
            slot = param_slot(encode_tensor_map(args, int(buf.ptr), self.ctx.info.driver_version))
            self._tmaps[key] = slot
        return slot

    def _launch(self, kut: KernelUnderTest, size: str, bufs: dict[str, Any],
                scratch: DeviceBuffer | None, kernel: Kernel | None = None) -> None:
        ls = LaunchSpec(grid=kut.grid[size], block=(kut.threads, 1, 1),
                        dynamic_smem=kut.dynamic_smem, cluster=kut.cluster)
        if scratch is not None:
            scratch.fill_byte(0xFF, self.ctx.stream)
        try:
            (kernel or self.kernels[kut.label]).launch(ls, self._params(kut, size, bufs, scratch))
        except CudaError as exc:
            if exc.sticky:
                raise _Abort("crash", kut.label, self.stage, _fault_message(exc.code, kut.label)) from None
            raise

    def _download(self, bufs: dict[str, Any], size: str, names: list[str]) -> dict[str, np.ndarray]:
        out = {}
        for p in self.spec.tensors():
            if p.name in names:
                arr = np.empty(self.spec.shape(p, size), dtype=dtype(p.dtype).np)
                out[p.name] = bufs[p.name].download(arr)
        return out

    def _load(self, kut: KernelUnderTest) -> Kernel | None:
        """Load one cubin; on failure set the run's status and return None."""
        run = self.runs[kut.label]
        info = self.ctx.info
        t0 = time.perf_counter()
        try:
            if kut.threads > 1024:
                raise ValueError(f"{kut.threads} threads per CTA exceeds 1024")
            if kut.dynamic_smem > info.smem_optin_bytes:
                raise ValueError(f"dynamic shared memory {kut.dynamic_smem} B > "
                                 f"{info.smem_optin_bytes} B opt-in limit")
            k = Kernel(self.ctx, base64.b64decode(kut.cubin_b64), kut.entry, kut.dynamic_smem)
            if kut.threads > k.max_threads:
                raise ValueError(f"{kut.threads} threads per CTA exceeds the kernel's limit "
                                 f"{k.max_threads} (registers: {k.registers})")
            if k.static_smem + kut.dynamic_smem > info.smem_optin_bytes:
                run.status = "resource_error"
                run.message = (f"shared memory {k.static_smem} static + {kut.dynamic_smem} "
                               f"dynamic > {info.smem_optin_bytes} B opt-in limit")
                return None
        except CudaError as exc:
            run.status = "load_error"
            run.message = f"{exc.call}: {exc.code}"
            if exc.code == "CUDA_ERROR_NOT_FOUND":
                run.message += f" (no entry named {kut.entry!r} in the cubin)"
            return None
        except ValueError as exc:
            run.status = "resource_error"
            run.message = str(exc)
            return None
        run.load_ms = (time.perf_counter() - t0) * 1e3
        run.registers, run.static_smem, run.local_bytes = k.registers, k.static_smem, k.local_bytes
        run.status = "ok"
        return k

    # ---- device ceilings and shared buffers -----------------------------------------------------
    def copy_gbps(self) -> float:
        """Device-to-device copy bandwidth, GB/s counting bytes read + written (median of 5),
        measured once per worker."""
        if self._copy_gbps is None:
            ctx = self.ctx
            n = 1 << 30
            a, b = DeviceBuffer(ctx, n, guard=0), DeviceBuffer(ctx, n, guard=0)
            a.fill_byte(1)
            times = []
            for i in range(6):
                s, e = ctx.event(), ctx.event()
                ctx.record(s)
                b.copy_from(a)
                ctx.record(e)
                self._sync("copy-bandwidth")
                if i:
                    times.append(ctx.elapsed_ms(s, e))
            a.free()
            b.free()
            self._copy_gbps = 2 * n / (float(np.median(times)) * 1e-3) / 1e9
        return self._copy_gbps

    def flush(self) -> DeviceBuffer:
        if self._flush is None:
            self._flush = DeviceBuffer(self.ctx, max(2 * self.ctx.info.l2_bytes, 128 << 20), guard=0)
        return self._flush

    def slots(self, n: int) -> DeviceBuffer:
        if self._slots is None or self._slots.nbytes < n * SLOT_BYTES:
            if self._slots is not None:
                self._slots.free()
            self._slots = DeviceBuffer(self.ctx, max(n, 1024) * SLOT_BYTES, guard=0)
        return self._slots

    def _read_slots(self, n: int) -> np.ndarray:
        assert self._slots is not None
        raw = np.empty(n * 3, dtype=np.uint64)
        check(self.ctx.cu.cuMemcpyDtoH(raw.ctypes.data, self._slots.ptr, raw.nbytes), "cuMemcpyDtoH")
        return raw.reshape(n, 3)

    # ---- setup: everything that is per kernel, not per candidate --------------------------------
    def setup(self) -> _Setup:
        req, spec = self.req, self.spec
        cs = req.check_size  # the size the correctness checks run at
        ref_kut = next((k for k in req.kernels if k.role == "reference"), None)
        digest = hashlib.sha256((ref_kut.cubin_b64 if ref_kut and req.job == "evaluate" else "").encode())
        digest.update(json.dumps([spec.identity(), req.seeds, req.inputs_read_only, req.job,
                                  req.input_cache, req.secret_seed, cs]).encode())
        key = digest.hexdigest()
        if self._setup is not None and self._setup.key == key:
            return self._setup
        self._stage("setup")
        if self._setup is not None:
            self._setup.free()
            self._setup = None
        st = _Setup(key=key, spec=spec)
        seeds = list(req.seeds)
        if req.job == "evaluate" and req.secret_seed:
            st.secret = int.from_bytes(os.urandom(4), "little") | (1 << 32)
            seeds.append(st.secret)
        for idx, seed in enumerate(seeds):
            inputs = make_inputs(spec, cs, seed)
            bs = self._bufset(cs, inputs, "end" if idx % 2 == 0 else "start")
            bs.ref64 = reference_outputs(spec, cs, inputs)
            st.verify[seed] = bs
        if req.job == "evaluate" and ref_kut is not None:
            st.ref_label = ref_kut.label
            k = self._load(ref_kut)
            if k is None:
                raise RuntimeError(f"the reference did not load: {self.runs[ref_kut.label].message}")
            st.ref_kernel = k
            outs = [p.name for p in spec.outputs()]
            for seed, bs in st.verify.items():
                self._prepare(bs, 0xFF)
                self._launch(ref_kut, cs, bs.bufs, self._scratch(ref_kut, cs), kernel=k)
                self._sync(ref_kut.label)
                bs.ref_out = {n: a.copy() for n, a in self._download(bs.bufs, cs, outs).items()}
                if bs.ref64 is not None:
                    for n in outs:
                        p = next(x for x in spec.params if x.name == n)
                        c = compare(spec.checked(p, cs, bs.ref_out[n]),
                                    spec.checked(p, cs, bs.ref64[n]), spec.tolerance(p.dtype))
                        if not c.ok:
                            raise RuntimeError(f"the reference fails its float64 check on seed {seed}: "
                                               f"{n}: {c.reason}")
        self._setup = st
        return st

    def _bench_sets(self, st: _Setup, ref_kut: KernelUnderTest) -> None:
        """The two bench-size input sets and the reference kernel's output on each (kept on the
        device, read-only, for the per-launch checks)."""
        self._stage("setup-bench")
        k = st.ref_kernel
        assert k is not None
        for i in range(2):
            inputs = cached_inputs(self.spec, "bench", bench_seed(i, self.req.input_cache),
                                   self.req.input_cache)
            bs = self._bufset("bench", inputs, "end" if i == 0 else "start")
            self._prepare(bs, 0xFF, timed=True)
            self._launch(ref_kut, "bench", bs.bufs, self._scratch(ref_kut, "bench"), kernel=k)
            self._sync(ref_kut.label)
            for p in self.spec.outputs():
                d = GuardedBuffer(self.ctx, bs.bufs[p.name].nbytes)
                check(self.ctx.cu.cuMemcpyDtoD(d.ptr, bs.bufs[p.name].ptr, d.nbytes), "cuMemcpyDtoD")
                check(self.ctx.cu.cuCtxSynchronize(), "cuCtxSynchronize")
                d.set_read_only(True)
                bs.ref_dev[p.name] = d
            st.bench.append(bs)
        self._self_test(st)

    def _check_launch(self, bs: _BufSet, slot: int, candidate: bool = False) -> None:
        """Queue the device comparison of every output of ``bs`` with the reference output, or,
        for a ``candidate`` launch after a float64 arbitration, bytewise with the candidate's
        arbitrated output."""
        slots = self._slots
        assert slots is not None
        expect = self._expect.get(id(bs)) if candidate else None
        for j, p in enumerate(self.spec.outputs()):
            variant = CHECK_KERNEL_FOR_DTYPE.get(p.dtype or "", "bytes")
            tol = self.spec.tolerance(p.dtype)
            b = bs.bufs[p.name]
            want = bs.ref_dev[p.name]
            if expect is not None:
                variant, want = "bytes", expect[p.name]
            n = b.nbytes // dtype(p.dtype).itemsize if variant != "bytes" else b.nbytes
            self.helpers.check(variant, b.ptr, want.ptr, n, tol.atol, tol.rtol,
                               slots.ptr + (slot * len(self.spec.outputs()) + j) * SLOT_BYTES)

    def _self_test(self, st: _Setup) -> None:
        """The output check must fire on a poisoned output and stay silent on the reference's own
        output (harness_threats.md #26: no dead tripwires)."""
        bs = st.bench[0]
        n_out = len(self.spec.outputs())
        slots = self.slots(2)
        check(self.ctx.cu.cuMemsetD8Async(slots.ptr, 0, 2 * n_out * SLOT_BYTES, self.ctx.stream),
              "cuMemsetD8Async")
        self._check_launch(bs, 0)        # bs.bufs hold the reference output right now
        self._prepare(bs, 0xFF)
        self._check_launch(bs, 1)        # poisoned
        self._sync("self-test")
        r = self._read_slots(2 * n_out)
        if any(int(r[j, 0]) != 0 for j in range(n_out)):
            raise RuntimeError("self-test: the device output check flags the reference's own output")
        if any(int(r[n_out + j, 0]) == 0 for j in range(n_out)):
            raise RuntimeError("self-test: the device output check does not flag a poisoned output")

    # ---- phases -----------------------------------------------------------------------------------
    def correctness(self, st: _Setup) -> None:
        self._stage("correctness")
        spec, req = self.spec, self.req
        cs = req.check_size
        outs = [p.name for p in spec.outputs()]
        in_names = [p.name for p in spec.tensors() if p.role == "in"]
        kuts = [k for k in req.kernels if k.role == "candidate"] if req.job == "evaluate" else list(req.kernels)
        seeds = list(st.verify)
        pn = {p.name: p for p in spec.params}
        first: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        for pass_no in (0, 1) if req.job == "evaluate" else (0,):
            order = seeds if pass_no == 0 else list(reversed(seeds))
            for idx, seed in enumerate(order):
                bs = st.verify[seed]
                sentinel = 0xFF if (idx + pass_no) % 2 == 0 else 0x7F
                for kut in kuts:
                    run = self.runs[kut.label]
                    if run.status != "ok":
                        continue
                    self._prepare(bs, sentinel)
                    scratch = self._scratch(kut, cs)
                    if pass_no == 1 and req.perturb:
                        # co-resident occupancy from the side stream while the candidate runs
                        self.helpers.spin(ns=200_000, ctas=self.ctx.info.sm_count, threads=256,
                                          smem=48 * 1024)
                    try:
                        self._launch(kut, cs, bs.bufs, scratch)
                    except CudaError as exc:
                        run.status = "launch_error"
                        run.message = f"{exc.call}: {exc.code}"
                        continue
                    self._sync(kut.label)
                    got = {n: a.copy() for n, a in self._download(bs.bufs, cs, outs).items()}
                    if scratch is not None:
                        scratch.free()
                    ref_outs = bs.ref_out if req.job == "evaluate" else {}
                    same = {n: n in ref_outs and np.array_equal(got[n].view(np.uint8),
                                                                ref_outs[n].view(np.uint8))
                            for n in outs}
                    unwritten = {} if all(same.values()) else {
                        n: c for n, c in ((n, _count_poison(spec.checked(pn[n], cs, a), sentinel))
                                          for n, a in got.items()) if c}
                    if pass_no == 0:
                        chk = SeedCheck(seed=seed, sentinel=sentinel, secret=(seed == st.secret),
                                        unwritten=unwritten)
                        if not all(b.guards_intact() for b in [*bs.bufs.values(), *bs.pristine.values()]):
                            chk.guards_intact = False
                        # a read-only input faults on the store; comparing the bytes as well covers
                        # the diagnosis run (writable inputs) and a driver that would not enforce it
                        after = self._download(bs.bufs, cs, in_names)
                        if any(not np.array_equal(after[n].view(np.uint8), bs.inputs[n].view(np.uint8))
                               for n in in_names):
                            chk.inputs_unchanged = False
                        for name in outs:
                            p = next(x for x in spec.params if x.name == name)
                            tol = spec.tolerance(p.dtype)
                            ref_out = ref_outs.get(name)
                            identical = same[name]
                            if identical:
                                chk.vs_reference[name] = CompareResult(
                                    ok=True, n=int(got[name].size), n_nonfinite=0, n_ref_nonfinite=0,
                                    n_bad=0, max_abs_err=0.0, norm_err=0.0)
                            elif ref_out is not None:
                                chk.vs_reference[name] = compare(spec.checked(p, cs, got[name]),
                                                                 spec.checked(p, cs, ref_out), tol)
                            if bs.ref64 is not None and not identical:
                                chk.vs_float64[name] = compare(spec.checked(p, cs, got[name]),
                                                               spec.checked(p, cs, bs.ref64[name]),
                                                               tol)
                            elif bs.ref64 is not None:
                                # bitwise equal to the reference run, which passed this check
                                chk.vs_float64[name] = chk.vs_reference[name]
                        if req.job == "autotune" and bs.ref64 is None:
                            base = first.get(("__first__", seed))
                            if base is None:
                                first[("__first__", seed)] = got
                            else:
                                for name in outs:
                                    p = next(x for x in spec.params if x.name == name)
                                    chk.vs_reference[name] = compare(
                                        spec.checked(p, cs, got[name]),
                                        spec.checked(p, cs, base[name]), spec.tolerance(p.dtype))
                        first[(kut.label, seed)] = got
                        chk.ok = _seed_ok(chk)
                        run.checks.append(chk)
                        if not chk.ok and run.status == "ok":
                            run.status = "incorrect"
                            run.message = _describe_failure(chk)
                    else:
                        chk = next(c for c in run.checks if c.seed == seed)
                        for n, c in unwritten.items():
                            chk.unwritten[n] = max(chk.unwritten.get(n, 0), c)
                        prev = first[(kut.label, seed)]
                        chk.deterministic = all(
                            np.array_equal(spec.checked(pn[n], cs, prev[n]).view(np.uint8),
                                           spec.checked(pn[n], cs, got[n]).view(np.uint8))
                            for n in outs)
                        if not all(b.guards_intact() for b in bs.bufs.values()):
                            chk.guards_intact = False
                        chk.ok = _seed_ok(chk)
                        if not chk.ok and run.status == "ok":
                            run.status = "incorrect"
                            run.message = _describe_failure(chk) + (
                                " (second run: reverse seed order, another stream occupying the "
                                "SMs: a race or launch-order dependence)")

    def _prep_timed(self, bs: _BufSet, sentinel: int, flush_value: int) -> None:
        ctx = self.ctx
        self._prepare(bs, sentinel, timed=True)
        if self.req.l2_demote:
            for p in self.spec.tensors():
                if p.role in ("in", "inout"):
                    b = bs.bufs[p.name] if p.role == "in" else bs.pristine[p.name]
                    self.helpers.l2_normal(b.ptr, b.nbytes)
        fl = self.flush()
        check(ctx.cu.cuMemsetD32Async(fl.ptr, flush_value, fl.nbytes // 4, ctx.stream),
              "cuMemsetD32Async")

    def timing_evaluate(self, st: _Setup) -> tuple[float, float, float, int] | None:
        """Interleaved pairs until the speedup's CI is tight; every launch checked on the device."""
        self._stage("timing")
        req, ctx = self.req, self.ctx
        cand = next((k for k in req.kernels if k.role == "candidate"), None)
        ref = next(k for k in req.kernels if k.role == "reference")
        if cand is None or self.runs[cand.label].status != "ok":
            return None
        ctx.reset_persisting_l2()
        kern = {ref.label: st.ref_kernel, cand.label: self.kernels[cand.label]}
        scratch = {k.label: self._scratch(k, "bench") for k in (ref, cand)}
        n_out = len(self.spec.outputs())
        max_pairs = req.max_reps
        slots = self.slots((2 * max_pairs + 8) * n_out)
        check(ctx.cu.cuMemsetD8Async(slots.ptr, 0, slots.nbytes, ctx.stream), "cuMemsetD8Async")
        warm, batch = 2, 8
        t_ref: list[float] = []
        t_cand: list[float] = []
        slot_owner: list[str] = []
        ev = [(ctx.event(), ctx.event(), ctx.event(), ctx.event()) for _ in range(batch)]
        wall0 = time.perf_counter()
        r = 0
        result = None
        while True:
            for j in range(batch):
                i = r + j
                bs = st.bench[i % 2]
                order = (ref, cand) if (i // 2) % 2 == 0 else (cand, ref)
                for kut in order:
                    self._prep_timed(bs, 0xFF if i % 2 == 0 else 0x7F, i + 1)
                    s, e = (ev[j][0], ev[j][1]) if kut is ref else (ev[j][2], ev[j][3])
                    ctx.record(s)
                    self._launch(kut, "bench", bs.bufs, scratch[kut.label], kernel=kern[kut.label])
                    ctx.record(e)
                    self._check_launch(bs, len(slot_owner), candidate=kut is cand)
                    slot_owner.append(kut.label)
            self._sync(cand.label)
            for j in range(batch):
                if r + j >= warm:
                    t_ref.append(ctx.elapsed_ms(ev[j][0], ev[j][1]))
                    t_cand.append(ctx.elapsed_ms(ev[j][2], ev[j][3]))
            r += batch
            if len(t_ref) >= max(req.min_reps, 6):
                med, lo, hi = paired_speedup(t_ref, t_cand)
                result = (med, lo, hi, len(t_ref))
                if max(med - lo, hi - med) / med <= req.ci_target:
                    break
            if (time.perf_counter() - wall0 > req.timing_budget_s and len(t_ref) >= req.min_reps) \
                    or r + batch > max_pairs:
                break
        # every launch's device check, warm-up included
        res = self._read_slots(len(slot_owner) * n_out)
        outs = self.spec.outputs()
        for label in (ref.label, cand.label):
            run = self.runs[label]
            run.timing = stats(t_ref if label == ref.label else t_cand)
            idx = [i for i, o in enumerate(slot_owner) if o == label]
            run.timed_launches_checked = len(idx)
            for nth, i in enumerate(idx):
                for j, p in enumerate(outs):
                    bad = int(res[i * n_out + j, 0])
                    dn2, rn2 = (float(x) for x in res[i * n_out + j, 1:].view(np.float64))
                    norm = (dn2 ** 0.5) / (rn2 ** 0.5) if rn2 > 0 else dn2 ** 0.5
                    tol = self.spec.tolerance(p.dtype)
                    if bad or not norm <= tol.max_norm_err:
                        if label == ref.label:
                            raise RuntimeError(f"the reference's timed launch {nth + 1} differs from its "
                                               f"own earlier output ({bad} elements of {p.name})")
                        if run.status == "ok" and self._expect:
                            run.status = "incorrect"
                            run.message = (
                                f"timed launch {nth + 1} of {len(idx)} after the float64 "
                                f"arbitration: {p.name} differs from the arbitrated output in "
                                f"{bad} bytes: not deterministic, or its result depends on the "
                                "launch history")
                        elif run.status == "ok":
                            run.status = "incorrect"
                            run.message = (
                                f"timed launch {nth + 1} of {len(idx)}: {bad} elements of {p.name} "
                                f"outside atol={tol.atol:g} + rtol={tol.rtol:g}*|ref| (normalized "
                                f"error {norm:.3g}); outputs are poisoned before every launch, so "
                                "the kernel skipped work or its result depends on the launch history")
                            self._disagreement = run.message
                        break
        for s in scratch.values():
            if s is not None:
                s.free()
        return result

    def timing_pipeline(self, st: _Setup, isolated: float | None) -> PipelineTiming | None:
        """Reference and candidate in a pipeline context: producer (writes the inputs), kernel,
        consumer (reads the outputs), ABBA pairs, every launch checked on the device; see
        :class:`harness.results.PipelineTiming`. None when the candidate is not timeable."""
        self._stage("timing-pipeline")
        req, ctx, spec = self.req, self.ctx, self.spec
        cand = next((k for k in req.kernels if k.role == "candidate"), None)
        ref = next(k for k in req.kernels if k.role == "reference")
        if cand is None or self.runs[cand.label].status != "ok":
            return None
        ctx.reset_persisting_l2()
        kern = {ref.label: st.ref_kernel, cand.label: self.kernels[cand.label]}
        scratch = {k.label: self._scratch(k, "bench") for k in (ref, cand)}
        ins = [p for p in spec.tensors() if p.role == "in"]
        inouts = [p for p in spec.tensors() if p.role == "inout"]
        outs = spec.outputs()
        twins = [{p.name: GuardedBuffer(ctx, bs.bufs[p.name].nbytes,
                                        align="end" if i == 0 else "start") for p in ins}
                 for i, bs in enumerate(st.bench)]
        sinks = {p.name: DeviceBuffer(ctx, st.bench[0].bufs[p.name].nbytes, guard=0) for p in outs}
        n_out = len(outs)
        max_pairs = req.max_reps
        slots = self.slots((2 * max_pairs + 8) * n_out)
        check(ctx.cu.cuMemsetD8Async(slots.ptr, 0, slots.nbytes, ctx.stream), "cuMemsetD8Async")
        warm, batch = 2, 8
        tk: dict[str, list[float]] = {ref.label: [], cand.label: []}
        ts: dict[str, list[float]] = {ref.label: [], cand.label: []}
        n_checked = 0
        ev = {lab: [tuple(ctx.event() for _ in range(4)) for _ in range(batch)]
              for lab in (ref.label, cand.label)}
        wall0 = time.perf_counter()
        r = 0
        try:
            while True:
                for j in range(batch):
                    i = r + j
                    bs, tw = st.bench[i % 2], twins[i % 2]
                    order = (ref, cand) if (i // 2) % 2 == 0 else (cand, ref)
                    for kut in order:
                        self._prep_timed(bs, 0xFF if i % 2 == 0 else 0x7F, i + 1)
                        if self.req.l2_demote:
                            for b in tw.values():
                                self.helpers.l2_normal(b.ptr, b.nbytes)
                        e0, e1, e2, e3 = ev[kut.label][j]
                        ctx.record(e0)
                        for p in ins:       # producer: the previous layer writes the inputs
                            tw[p.name].copy_from(bs.bufs[p.name])
                        for p in inouts:
                            bs.bufs[p.name].copy_from(bs.pristine[p.name])
                        ctx.record(e1)
                        self._launch(kut, "bench", {**bs.bufs, **tw}, scratch[kut.label],
                                     kernel=kern[kut.label])
                        ctx.record(e2)
                        for p in outs:      # consumer: the next layer reads the outputs
                            sinks[p.name].copy_from(bs.bufs[p.name])
                        ctx.record(e3)
                        self._check_launch(bs, n_checked, candidate=kut is cand)
                        n_checked += 1
                self._sync(cand.label)
                for j in range(batch):
                    if r + j >= warm:
                        for lab in (ref.label, cand.label):
                            e0, e1, e2, e3 = ev[lab][j]
                            tk[lab].append(ctx.elapsed_ms(e1, e2))
                            ts[lab].append(ctx.elapsed_ms(e0, e3))
                r += batch
                done = False
                if len(tk[ref.label]) >= max(req.min_reps, 6):
                    med, lo, hi = paired_speedup(ts[ref.label], ts[cand.label])
                    done = max(med - lo, hi - med) / med <= req.ci_target
                if done or (time.perf_counter() - wall0 > req.timing_budget_s
                            and len(tk[ref.label]) >= req.min_reps) or r + batch > max_pairs:
                    break
            res = self._read_slots(n_checked * n_out)
            for i in range(n_checked):
                for j, p in enumerate(outs):
                    dn2, rn2 = (float(x) for x in res[i * n_out + j, 1:].view(np.float64))
                    norm = (dn2 ** 0.5) / (rn2 ** 0.5) if rn2 > 0 else dn2 ** 0.5
                    if int(res[i * n_out + j, 0]) or not norm <= spec.tolerance(p.dtype).max_norm_err:
                        run = self.runs[cand.label]
                        if run.status == "ok":
                            run.status = "incorrect"
                            run.message = (f"pipeline-context launch {i + 1}: {p.name} differs from "
                                           "the reference output (its result depends on the "
                                           "producer having just written its inputs)")
                        break
        finally:
            for tw in twins:
                for b in tw.values():
                    b.free()
            for b in sinks.values():
                b.free()
            for sc in scratch.values():
                if sc is not None:
                    sc.free()
        k_med, k_lo, k_hi = paired_speedup(tk[ref.label], tk[cand.label])
        s_med, s_lo, s_hi = paired_speedup(ts[ref.label], ts[cand.label])
        names_in = ", ".join(p.name for p in [*ins, *inouts]) or "none"
        return PipelineTiming(
            producer=f"device-to-device copy writing {names_in} right before the kernel",
            consumer=("device-to-device copy reading "
                      f"{', '.join(p.name for p in outs)} right after the kernel"),
            pairs=len(tk[ref.label]),
            reference_kernel=stats(tk[ref.label]), candidate_kernel=stats(tk[cand.label]),
            reference_step=stats(ts[ref.label]), candidate_step=stats(ts[cand.label]),
            speedup=k_med, speedup_ci=(k_lo, k_hi), step_speedup=s_med,
            step_speedup_ci=(s_lo, s_hi), isolated_speedup=isolated, survives=s_lo > 1.0)

    def timing_autotune(self, st: _Setup) -> None:
        """Median time of every correct config (trusted Triton code: no per-launch check)."""
        self._stage("timing")
        req, ctx = self.req, self.ctx
        timed = [k for k in req.kernels if self.runs[k.label].status == "ok"]
        if not timed:
            return
        ctx.reset_persisting_l2()
        sets = [self._bufset("bench", cached_inputs(self.spec, "bench", bench_seed(i, req.input_cache),
                                                  req.input_cache),
                             "end" if i == 0 else "start") for i in range(2)]
        try:
            scratch = {k.label: self._scratch(k, "bench") for k in timed}
            for kut in timed:
                for i in range(2):
                    self._prep_timed(sets[i], 0xFF, 1)
                    self._launch(kut, "bench", sets[i].bufs, scratch[kut.label])
                self._sync(kut.label)
            s, e = ctx.event(), ctx.event()
            ctx.record(s)
            self._launch(timed[0], "bench", sets[0].bufs, scratch[timed[0].label])
            ctx.record(e)
            self._sync(timed[0].label)
            est = max(ctx.elapsed_ms(s, e), 1e-3)
            per = (est + 0.1) / 1e3 * len(timed)
            reps = int(min(req.max_reps, max(req.min_reps, req.timing_budget_s / per)))
            events = {k.label: [(ctx.event(), ctx.event()) for _ in range(reps)] for k in timed}
            # synchronise often enough that the queued work stays well inside the hang timeout
            # (every 16 rounds, fewer when a round is long: a persistent kernel on a few CTAs
            # takes 58 ms a launch, and ten configs of it queued 16 times would read as a hang)
            every = max(1, min(16, int(0.25 * req.hang_timeout_s / per)))
            for r in range(reps):
                order = timed if r % 2 == 0 else list(reversed(timed))
                for kut in order:
                    self._prep_timed(sets[r % 2], 0xFF, r + 1)
                    s, e = events[kut.label][r]
                    ctx.record(s)
                    self._launch(kut, "bench", sets[r % 2].bufs, scratch[kut.label])
                    ctx.record(e)
                if r % every == every - 1:
                    self._sync(order[-1].label)
            self._sync(timed[-1].label)
            for kut in timed:
                self.runs[kut.label].timing = stats([ctx.elapsed_ms(s, e) for s, e in events[kut.label]])
        finally:
            for bs in sets:
                for b in [*bs.bufs.values(), *bs.pristine.values()]:
                    b.free()

    def final_fresh_load(self, st: _Setup, cand: KernelUnderTest) -> None:
        """Unload the candidate, load it again, launch once at the bench size, check on device."""
        self._stage("final-check", cand.label)
        run = self.runs[cand.label]
        self.kernels[cand.label].unload()
        k = Kernel(self.ctx, base64.b64decode(cand.cubin_b64), cand.entry, cand.dynamic_smem)
        self.kernels[cand.label] = k
        n_out = len(self.spec.outputs())
        slots = self.slots(n_out)
        check(self.ctx.cu.cuMemsetD8Async(slots.ptr, 0, n_out * SLOT_BYTES, self.ctx.stream),
              "cuMemsetD8Async")
        bs = st.bench[1]
        self._prep_timed(bs, 0x7F, 7)
        scratch = self._scratch(cand, "bench")
        self._launch(cand, "bench", bs.bufs, scratch)
        self._check_launch(bs, 0, candidate=True)
        self._sync(cand.label)
        if scratch is not None:
            scratch.free()
        res = self._read_slots(n_out)
        for j, p in enumerate(self.spec.outputs()):
            bad = int(res[j, 0])
            dn2, rn2 = (float(x) for x in res[j, 1:].view(np.float64))
            norm = (dn2 ** 0.5) / (rn2 ** 0.5) if rn2 > 0 else dn2 ** 0.5
            tol = self.spec.tolerance(p.dtype)
            n = bs.bufs[p.name].nbytes // dtype(p.dtype).itemsize
            ok = bad == 0 and norm <= tol.max_norm_err
            run.final_check = CompareResult(
                ok=ok, n=n, n_nonfinite=0, n_ref_nonfinite=0, n_bad=bad, max_abs_err=float("nan"),
                norm_err=norm, reason="" if ok else f"{bad} of {n} elements outside tolerance, "
                                                      f"normalized error {norm:.3g}")
            if not ok and run.status == "ok":
                run.status = "incorrect"
                run.message = ("bench-size output of a freshly loaded module differs from the "
                               + ("output accepted by the float64 arbitration (bytewise)"
                                  if self._expect else "reference")
                               + f": {p.name}: {run.final_check.reason}")

    def arbitrate(self, st: _Setup, cand: KernelUnderTest) -> bool:
        """Decide a bench-size disagreement between the candidate and the reference kernel by the
        spec's float64 reference; True when the candidate passes (its outputs are then kept on
        the device in ``self._expect`` and the caller times it again with every launch compared
        bytewise with them).

        Per bench input set: two fresh launches (outputs poisoned first, as in the timing) must
        give bitwise the same outputs, and every output must pass
        :func:`harness.correctness.arbitrate` against the float64 reference computed on the host
        at the bench size, in a child process capped at ``arbitration_max_bytes`` and
        ``arbitration_timeout_s`` (:func:`harness.refproc.bench_reference`; kept on the bench
        set for the next candidate of the same setup; over budget: not accepted). The outcome is
        recorded in the candidate's ``KernelRun.arbitration``; when it fails, the run's message
        keeps the disagreement and adds why the arbitration did not accept it.
        """
        self._stage("arbitration", cand.label)
        run, spec = self.runs[cand.label], self.spec
        outs = spec.outputs()
        names = [p.name for p in outs]
        scratch = self._scratch(cand, "bench")
        why = ""
        got: list[dict[str, np.ndarray]] = []
        try:
            for i, bs in enumerate(st.bench):
                seen = []
                for rep_no, sentinel in enumerate((0xFF, 0x7F)):
                    self._prep_timed(bs, sentinel, 0x5A5A0000 + 2 * i + rep_no)
                    self._launch(cand, "bench", bs.bufs, scratch)
                    self._sync(cand.label)
                    seen.append({n: a.copy() for n, a in self._download(bs.bufs, "bench", names).items()})
                diff = [n for n in names
                        if not np.array_equal(seen[0][n].view(np.uint8), seen[1][n].view(np.uint8))]
                if diff:
                    why = (f"two fresh launches on bench set {i} give different {diff[0]} "
                           "(arbitration needs a deterministic kernel)")
                    break
                got.append(seen[0])
        finally:
            if scratch is not None:
                scratch.free()
        if not why:
            for i, bs in enumerate(st.bench):
                if bs.ref64_error:  # over budget for an earlier candidate of this setup
                    why = f"bench set {i}: {bs.ref64_error}"
                    break
                if bs.ref64 is None:  # once per setup: later candidates of the kernel reuse it
                    try:
                        bs.ref64 = bench_reference(spec, "bench", bs.inputs,
                                                   max_bytes=self.req.arbitration_max_bytes,
                                                   timeout_s=self.req.arbitration_timeout_s,
                                                   workdir=self.req.input_cache)
                    except ReferenceBudgetError as exc:
                        bs.ref64_error = str(exc)
                        why = f"bench set {i}: {exc}"
                        break
                ref64 = bs.ref64
                if ref64 is None:
                    why = "the spec has no float64 reference"
                    break
                ref_k = self._download({n: bs.ref_dev[n] for n in names}, "bench", names)
                for p in outs:
                    a = arbitrate(p.name, spec.checked(p, "bench", got[i][p.name]),
                                  spec.checked(p, "bench", ref_k[p.name]),
                                  spec.checked(p, "bench", ref64[p.name]), spec.tolerance(p.dtype))
                    run.arbitration.append(a)
                    if not a.ok and not why:
                        why = f"bench set {i}: {p.name}: {a.reason}"
        if why:
            run.message += f"; float64 arbitration: not accepted: {why}"
            return False
        for i, bs in enumerate(st.bench):
            keep: dict[str, GuardedBuffer] = {}
            for n in names:
                b = GuardedBuffer(self.ctx, bs.bufs[n].nbytes)
                b.upload(got[i][n])
                b.set_read_only(True)
                keep[n] = b
            self._expect[id(bs)] = keep
        return True

    def launch_once(self) -> EvalResult:
        """The candidate once on the first seed's inputs at ``launch_size`` (for compute-sanitizer
        and Nsight Compute): no checks."""
        kut = next(k for k in self.req.kernels if k.role == "candidate")
        k = self._load(kut)
        if k is None:
            return EvalResult(status="ok", kernels=list(self.runs.values()))
        self.kernels[kut.label] = k
        size = self.req.launch_size
        inputs = make_inputs(self.spec, size, self.req.seeds[0])
        bs = self._bufset(size, inputs, "end")
        self._prepare(bs, 0xFF)
        self._launch(kut, size, bs.bufs, self._scratch(kut, size))
        self._sync(kut.label)
        for b in [*bs.bufs.values(), *bs.pristine.values()]:
            b.free()
        k.unload()
        return EvalResult(status="ok", kernels=list(self.runs.values()), stage="done")

    def run(self) -> EvalResult:
        req = self.req
        if req.job == "launch_once":
            return self.launch_once()
        t0 = time.perf_counter()
        info = self.ctx.info
        res = EvalResult(device=DeviceSummary(
            name=info.name, cc=info.cc, sm_count=info.sm_count, l2_bytes=info.l2_bytes,
            smem_optin_bytes=info.smem_optin_bytes, driver_version=info.driver_version),
            inputs_read_only=req.inputs_read_only)
        t = time.perf_counter()
        st = self.setup()
        res.seconds["setup"] = time.perf_counter() - t
        t = time.perf_counter()
        self._stage("load")
        for kut in req.kernels:
            if req.job == "evaluate" and kut.role == "reference":
                self.runs[kut.label].status = "ok"
                continue
            k = self._load(kut)
            if k is not None:
                self.kernels[kut.label] = k
        res.seconds["load"] = time.perf_counter() - t
        t = time.perf_counter()
        self.correctness(st)
        res.seconds["correctness"] = time.perf_counter() - t
        t = time.perf_counter()
        peak = PEAK_TFLOPS.get(info.name, {}).get(req.flop_dtype or "") if req.flop_dtype else None
        if req.time:
            copy = self.copy_gbps()
            res.device.copy_gbps = copy  # type: ignore[union-attr]
            res.device.peak_tflops = peak  # type: ignore[union-attr]
            if req.job == "evaluate":
                ref_kut = next(k for k in req.kernels if k.role == "reference")
                if not st.bench and any(self.runs[k.label].status == "ok"
                                        for k in req.kernels if k.role == "candidate"):
                    t_b = time.perf_counter()
                    self._bench_sets(st, ref_kut)  # once per kernel, when first needed
                    res.seconds["setup"] += time.perf_counter() - t_b
                sp = self.timing_evaluate(st)
                cand = next((k for k in req.kernels if k.role == "candidate"), None)
                if (cand is not None and req.bench_arbitration and self._disagreement
                        and self.runs[cand.label].status == "incorrect"):
                    t_a = time.perf_counter()
                    crun = self.runs[cand.label]
                    if self.arbitrate(st, cand):
                        crun.status, crun.message = "ok", ""
                        crun.timing, crun.timed_launches_checked = None, 0
                        sp = self.timing_evaluate(st)   # every launch checked bytewise now
                    res.seconds["arbitration"] = time.perf_counter() - t_a
                if sp is not None and cand is not None:
                    res.speedup, res.speedup_ci = sp[0], (sp[1], sp[2])
                    res.timing_pairs = sp[3]
                    if self.runs[cand.label].status == "ok" and req.pipeline:
                        t_p = time.perf_counter()
                        res.pipeline = self.timing_pipeline(st, res.speedup)
                        res.seconds["pipeline"] = time.perf_counter() - t_p
                    if self.runs[cand.label].status == "ok":
                        self.final_fresh_load(st, cand)
            else:
                self.timing_autotune(st)
            for run in self.runs.values():
                if run.timing is None:
                    continue
                med = run.timing.median_ms
                if req.flops:
                    run.achieved_tflops = req.flops / (med * 1e-3) / 1e12
                if req.bytes:
                    run.achieved_gbps = req.bytes / (med * 1e-3) / 1e9
                run.roofline_fraction, run.roofline_bound = roofline_fraction(
                    med, req.flops, req.bytes, copy, peak)
                if run.role == "candidate" and run.status == "ok" and \
                        run.roofline_fraction > req.roofline_bound:
                    run.status = "implausible"
                    run.message = (
                        f"faster than the hardware allows: roofline fraction "
                        f"{run.roofline_fraction:.2f} > {req.roofline_bound:.2f} "
                        f"({run.roofline_bound} bound; measured copy bandwidth {copy:.0f} GB/s"
                        + (f", peak {peak:g} TFLOP/s" if peak else "") + ")")
        res.seconds["timing"] = time.perf_counter() - t
        # normal path only: after a sticky fault the context refuses every call, and the
        # worker exits anyway (an unload error must not replace the fault being reported)
        for k in self.kernels.values():
            k.unload()
        self.kernels = {}
        self._free_expect()
        res.kernels = list(self.runs.values())
        if req.job == "autotune":
            good = [k for k in res.kernels if k.status == "ok" and k.timing]
            if good:
                res.best = min(good, key=lambda k: k.timing.median_ms).label  # type: ignore[union-attr]
        res.seconds["total"] = time.perf_counter() - t0
        res.stage = "done"
        return res


def _count_poison(a: np.ndarray, sentinel: int) -> int:
    """Elements of ``a`` whose every byte is ``sentinel`` (never written by the kernel); float
    outputs only (0xFF.. is NaN and 0x7F.. is near the top of the range, neither a real result;
    an integer output may legitimately be -1)."""
    if not (np.issubdtype(a.dtype, np.floating) or a.dtype.name == "bfloat16"):
        return 0
    b = np.ascontiguousarray(a).view(np.uint8).reshape(a.size, a.dtype.itemsize)
    return int(np.count_nonzero(np.all(b == sentinel, axis=1)))


def _seed_ok(chk: SeedCheck) -> bool:
    return (chk.inputs_unchanged and chk.guards_intact and chk.deterministic is not False
            and not chk.unwritten
            and all(c.ok for c in chk.vs_float64.values())
            and all(c.ok for c in chk.vs_reference.values()))


def _fault_message(code: str, label: str) -> str:
    if code in ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_MISALIGNED_ADDRESS"):
        return (f"{code} while running {label}: a memory fault (inputs are mapped read-only and "
                "every buffer lies between unmapped guard pages)")
    return f"{code} while running {label}"


def _describe_failure(chk: SeedCheck) -> str:
    parts = []
    for name, n in chk.unwritten.items():
        parts.append(f"{name}: {n} elements never written (still the harness's poison bytes; "
                     "outputs are poisoned before every launch)")
    if not chk.inputs_unchanged:
        parts.append("an input tensor was modified")
    if not chk.guards_intact:
        parts.append("out-of-bounds write into a guard band")
    if chk.deterministic is False:
        parts.append("two runs on the same inputs gave different outputs")
    for what, d in (("reference", chk.vs_reference), ("float64 reference", chk.vs_float64)):
        for name, c in d.items():
            if not c.ok:
                parts.append(f"{name} vs {what}: {c.reason}")
    seed = "the secret seed" if chk.secret else f"seed {chk.seed}"
    return f"{seed}: " + "; ".join(parts)


def _serve_one(worker: Worker, req: WorkerRequest) -> None:
    worker.begin(req)
    emit({"event": "stage", "stage": "start", "label": None})
    try:
        res = worker.run()
    except _Abort as ab:
        emit({"event": ab.kind, "label": ab.label, "stage": ab.stage, "message": ab.message,
              "partial": [r.model_dump(mode="json") for r in worker.runs.values()]})
        os._exit(3 if ab.kind == "hang" else 4)
    except CudaError as exc:
        msg = _fault_message(exc.code, f"a kernel ({exc.call} reported it)") if exc.sticky else str(exc)
        emit({"event": "crash", "label": None, "stage": worker.stage, "message": msg,
              "partial": [r.model_dump(mode="json") for r in worker.runs.values()]})
        os._exit(4)
    except Exception:  # a harness bug: report it with the traceback, never hang the parent
        emit({"event": "result", "result": EvalResult(
            status="error", message="worker error:\n" + traceback.format_exc(), stage=worker.stage,
            kernels=list(worker.runs.values())).model_dump(mode="json")})
        os._exit(5)  # state may be inconsistent: the parent starts a fresh worker
    emit({"event": "result", "result": res.model_dump(mode="json")})


def main() -> None:
    """Entry point: serve requests (one per stdin line) until EOF; ``--once``: one request."""
    once = "--once" in sys.argv[1:]
    try:
        worker = Worker()
    except CudaError as exc:
        emit({"event": "result", "result": EvalResult(status="error", message=str(exc)).model_dump(mode="json")})
        os._exit(0)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = WorkerRequest.model_validate_json(line)
        except ValueError as exc:
            emit({"event": "result", "result": EvalResult(
                status="error", message=f"bad request: {exc}").model_dump(mode="json")})
            continue
        _serve_one(worker, req)
        if once:
            break
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
