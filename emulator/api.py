"""Running a candidate's PTX against a KernelSpec on the CPU emulator.

Inputs are drawn exactly as the GPU harness draws them (:func:`harness.make_inputs`), outputs are
pre-filled as the GPU worker fills them (:func:`harness.inputs.output_fill_byte`: the even-seed
sentinel 0xFF, or 0 for ``init: zeros``), the grid comes from the spec
(:meth:`kernels.KernelSpec.grid_dims`), parameters are packed in the entry's order (spec pointers
and scalars, then Triton's two scratch pointers), and every output is compared with the float64
reference by the harness's own :func:`harness.compare` under the spec's tolerance.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, computed_field

from emulator.barrier_use import BarrierUse
from emulator.machine import DEFAULT_MEMORY_BUDGET, Launch, Machine
from emulator.memory import GlobalMemory
from emulator.ops import counts_as_proxy_fence
from emulator.program import EmulationUnsupported, build_program
from harness.correctness import CompareResult, compare
from harness.inputs import make_inputs, output_fill_byte, reference_outputs
from kernels.spec import Config, KernelSpec, SpecError
from verifier.errors import PTXSyntaxError
from verifier.findings import Finding
from verifier.ptx.parser import parse_ptx

__all__ = ["EmulationResult", "run_kernel", "check_races", "MAX_DYNAMIC_SMEM"]

Status = Literal["ok", "mismatch", "fault", "deadlock", "timeout", "memory", "unsupported",
                 "error"]

#: largest dynamic shared memory a CTA may opt in to, bytes (CUDA C Programming Guide, Table
#: "Technical Specifications per Compute Capability": 8.0 -> 163 KB, 8.9 -> 99 KB, 9.0/10.0 ->
#: 227 KB). Used when the launch's shared size is not known.
#: poison byte of unwritten outputs: the GPU worker's sentinel of its even-seed passes
SENTINEL = 0xFF

MAX_DYNAMIC_SMEM = {"sm_80": 166912, "sm_86": 101376, "sm_89": 101376, "sm_90": 232448,
                    "sm_90a": 232448, "sm_100": 232448, "sm_100a": 232448}


class EmulationResult(BaseModel):
    """The outcome of one emulated launch.

    Attributes:
        kernel, arch, size: what ran; ``dims`` the problem size, ``grid`` programs per axis,
            ``threads`` per CTA.
        status: ``ok`` (ran, outputs match), ``mismatch`` (ran, an output is wrong), ``fault``
            (illegal or misaligned address, ``trap``), ``deadlock`` (HB2), ``timeout``,
            ``memory`` (the emulator's state would exceed ``memory_budget``: a report, not the
            candidate's verdict),
            ``unsupported`` (an instruction the emulator does not model; ``message`` names it
            with file:line:col), ``error`` (the PTX does not parse or does not fit the spec).
        message: one line for humans.
        outputs: per output parameter, the harness comparison.
        inputs_unchanged: per ``in`` parameter, whether the kernel left it intact.
        findings: HB1 races, HB2 deadlocks, HB3 warp-collective divergence (verifier format).
        seconds: wall time of the emulation (excluding the reference), s.
        steps: instruction groups executed; lane_insts: instructions x threads.
        race_checked_ctas: CTAs whose accesses went through the happens-before analysis.
        hb_backend: which implementation ran that analysis (``numba`` or ``numpy``,
            :func:`emulator.set_hb_backend`); empty when it did not run.
        ctas_total, ctas_emulated: CTAs of the grid, CTAs run to completion.
        emulated_ctas: linear ids (x fastest) of the CTAs run when only a representative
            subset ran (None: the whole grid); ``subset_reason`` says which and why.
        checked_elements: with a subset, per output (compared elements, elements of its
            checked region): only elements the emulated CTAs wrote are compared.
        unchecked_outputs: with a subset, outputs not compared at all, with the reason.
        line_counts: with ``coverage=True``, per PTX source line (1-based) of the entry, the
            threads that executed an instruction on it (reached it with its guard predicate
            true), summed over the run; a line absent was never executed. None without
            ``coverage``.
        wait_effects: with ``coverage=True``, per source line of a reached wait
            (``cp.async.bulk.wait_group``, ``wgmma.wait_group``, ``mbarrier.try_wait`` /
            ``test_wait``, ``tcgen05.wait::st`` / ``wait::ld``), its executions that had an
            effect (a thread blocked, acquired happens-before knowledge, or retired a bulk
            group / wgmma registers; for ``tcgen05.wait::st``, one when a TMEM cell it
            completed was read before its writer waited again; for ``tcgen05.wait::ld``, one
            when a cell whose load it completed was written by a thread (the reader included)
            not ordered after the reader's next ``wait::ld``), and of a reached ``fence.proxy.async``, one when
            some async-proxy read (wgmma / tcgen05.mma operand, TMA store source) of bytes a
            thread wrote through the generic proxy was fenced by that site's instances alone
            (PTX ISA 9.1 §8.6: without it the read would be HB4); 0: at this launch the wait
            or fence never ordered or retired anything.
        barrier_effects: with ``coverage=True``, per source line of a reached ``bar.sync`` /
            ``barrier.sync``, its instances that may have ordered two conflicting memory
            operations of two of its participants (:mod:`emulator.barrier_use`); 0: at this
            launch removing the barrier leaves every conflicting pair ordered.
    """

    model_config = ConfigDict(frozen=True)

    kernel: str
    arch: str
    size: str
    dims: dict[str, int] = Field(default_factory=dict)
    grid: tuple[int, int, int] = (1, 1, 1)
    threads: int = 0
    status: Status
    message: str = ""
    outputs: dict[str, CompareResult] = Field(default_factory=dict)
    inputs_unchanged: dict[str, bool] = Field(default_factory=dict)
    findings: list[Finding] = Field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0
    lane_insts: int = 0
    race_checked_ctas: int = 0
    hb_backend: str = ""
    ctas_total: int = 0
    ctas_emulated: int = 0
    emulated_ctas: list[int] | None = None
    subset_reason: str = ""
    checked_elements: dict[str, tuple[int, int]] = Field(default_factory=dict)
    unchecked_outputs: dict[str, str] = Field(default_factory=dict)
    line_counts: dict[int, int] | None = None
    wait_effects: dict[int, int] | None = None
    barrier_effects: dict[int, int] | None = None

    @property
    def ok(self) -> bool:
        """Ran to completion, every output matches, no HB error."""
        return self.status == "ok" and not any(f.severity == "error" for f in self.findings)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> str:
        """One word for tables, agreeing with :meth:`summary` and :attr:`ok`: ``ok`` only when
        :attr:`ok`; an ``ok`` run with an HB error is the first error's rule (``HB1``); else
        the status (``mismatch``, ``fault``, ``unsupported``, ...)."""
        if self.status == "ok":
            err = next((f for f in self.findings if f.severity == "error"), None)
            return "ok" if err is None else err.rule
        return self.status

    def summary(self) -> str:
        """One paragraph for the agent's feedback (PASS only when :attr:`ok`)."""
        head = f"emulated correctness ({self.arch}, size {self.size}): "
        errs = [f for f in self.findings if f.severity == "error"]
        if self.status == "ok" and not errs:
            head += "PASS"
        elif self.status == "ok":
            head += (f"FAIL (outputs match, but {len(errs)} happens-before error(s): "
                     f"{', '.join(sorted({f.rule for f in errs}))})")
        elif self.status == "unsupported":
            return self.message
        else:
            head += f"FAIL ({self.status}: {self.message})"
        lines = [head + f" [{self.seconds:.1f} s]"]
        if self.emulated_ctas is not None:
            lines.append(f"  subset: {self.subset_reason}")
            for n, why in self.unchecked_outputs.items():
                lines.append(f"  {n}: not checked ({why})")
        for name, c in self.outputs.items():
            lines.append(f"  {name}: {'ok' if c.ok else c.reason} (max |err| {c.max_abs_err:.3g})")
        for f in self.findings:
            lines.append(f"  {f.file}:{f.line}:{f.col}: {f.severity}: [{f.rule}] {f.message}")
        return "\n".join(lines)


def _host_tensor_map(spec: KernelSpec, p: Any, cfg: Config, size: str, address: int) -> bytes:
    """The 128-byte tensor map of host ``TensorDescriptor`` parameter ``p`` over its buffer at
    ``address`` (contiguous row-major, the spec's shape at ``size``), as Triton's launcher
    encodes it: box and swizzle from the block shape (:func:`emulator.async_copy.triton_box`),
    element type per :data:`emulator.async_copy.TRITON_ELEMTYPE`, zero OOB fill; in the
    emulator's layout (:func:`emulator.async_copy.encode_tensor_map`)."""
    from emulator.async_copy import TRITON_ELEMTYPE, encode_tensor_map, triton_box
    from kernels.dtypes import dtype as kdtype
    from kernels.spec import evaluate

    es = kdtype(p.dtype).np.itemsize
    shape = [int(x) for x in spec.shape(p, size)]
    env = spec.env(cfg, size)
    block = tuple(int(evaluate(e, env)) for e in p.block_shape)
    box, swz = triton_box(block, es)
    dims = tuple(reversed(shape))
    strides = tuple(int(np.prod(shape[j:])) * es for j in range(len(shape) - 1, 0, -1))
    return encode_tensor_map(address, TRITON_ELEMTYPE[p.dtype], dims, strides, box,
                             swizzle=swz)


def _pack(ptx_type: str, value: float | int, dtype_name: str | None) -> bytes:
    t = ptx_type
    if t == "f32":
        return struct.pack("<f", float(value))
    if t == "f64":
        return struct.pack("<d", float(value))
    if t in ("b16", "u16", "s16", "f16", "bf16"):
        if dtype_name in ("fp16", "bf16"):
            import ml_dtypes
            dt = np.float16 if dtype_name == "fp16" else ml_dtypes.bfloat16
            return np.array(value, dtype=dt).view(np.uint16).tobytes()
        return struct.pack("<H", int(value) & 0xFFFF)
    width = {"b8": 1, "u8": 1, "s8": 1, "b32": 4, "u32": 4, "s32": 4, "b64": 8, "u64": 8,
             "s64": 8, "pred": 4}.get(t)
    if width is None:
        raise ValueError(f"cannot pack a scalar into .{t}")
    if dtype_name == "fp32" and width == 4:
        return struct.pack("<f", float(value))
    return (int(value) & ((1 << (8 * width)) - 1)).to_bytes(width, "little")


def _pick_config(spec: KernelSpec, threads: int | None, config: Config | None) -> Config:
    if config is not None:
        return config
    cfgs = spec.configs()
    if threads is not None:
        for c in cfgs:
            if 32 * c.num_warps == threads:
                return c
    return cfgs[0]


def run_kernel(ptx: str, spec: KernelSpec, arch: str, *, size: str = "verify",
               dims: dict[str, int] | None = None, config: Config | None = None,
               meta: dict[str, int] | None = None, threads: int | None = None,
               dynamic_smem: int | None = None, global_scratch_size: int = 0, seed: int = 0,
               race: bool = True, time_limit_s: float = 120.0, filename: str = "candidate.ptx",
               entry: str | None = None, expected: Mapping[str, np.ndarray] | None = None,
               capture: dict[str, np.ndarray] | None = None,
               memory_budget: int | None = DEFAULT_MEMORY_BUDGET,
               cta_subset: bool = True, max_ctas: int | None = None,
               coverage: bool = False, elect: Literal["lowest", "highest"] = "lowest"
               ) -> EmulationResult:
    """Emulate ``ptx`` for ``spec`` at ``size`` (or explicit ``dims``) and check its outputs.

    Args:
        ptx: the PTX module text (one ``.entry``, or name it with ``entry``).
        spec: the kernel spec: parameters, sizes, grid, reference, tolerances.
        arch: ``sm_80`` | ``sm_89`` | ``sm_90a`` | ``sm_100a`` (recorded; instructions the arch
            lacks are the verifier's business).
        size: a named size of the spec (``verify`` by default); ignored when ``dims`` is given.
        dims: an explicit problem size (dim name -> int); scalars and the grid follow it.
        config: the autotune config whose constexprs the PTX was compiled with (default: the
            first config of the spec with ``threads`` threads); ``meta`` overrides its
            meta-parameters in the grid expression.
        threads: threads per CTA (default: the entry's ``.reqntid``, else 32 x num_warps).
        dynamic_smem: bytes of dynamic shared memory (Triton's ``metadata.shared``); default the
            arch's opt-in maximum (:data:`MAX_DYNAMIC_SMEM`).
        global_scratch_size: bytes of Triton global scratch per CTA (0: NULL pointer).
        seed: input seed (the harness's correctness seeds are 0, 1, 2).
        race: run the happens-before analysis (HB1/HB2/HB3 findings).
        time_limit_s: wall-clock limit of the emulation, s.
        filename: the name used in findings.
        expected: when the spec has no float64 reference, the outputs to compare with instead
            (out/inout parameter -> array of the spec's shape at ``size``: Triton's own kernel
            emulated on the same inputs, so every candidate must agree with it); ignored when the
            spec has a reference.
        capture: a dict that, when the run completes, receives every out/inout output (copies,
            the spec's dtype and shape), e.g. to serve as another run's ``expected``.
        memory_budget: bytes the emulator's state may take per race shadow and per CTA batch
            (default :data:`emulator.machine.DEFAULT_MEMORY_BUDGET`, None: unbounded); past it
            the status is ``memory`` with a report of what did not fit.

        cta_subset: when the whole grid would not finish within ``time_limit_s``, emulate a
            representative subset of CTAs (:func:`emulator.machine.representative_order`:
            the grid's corners, then CTAs spread evenly) rather than timing out; the result
            names them (``emulated_ctas``, ``subset_reason``) and compares only the output
            elements those CTAs wrote (``checked_elements``); outputs accumulated with atomics
            are then not checked (``unchecked_outputs``). False: all CTAs or ``timeout``.
        max_ctas: a CTA budget: emulate at most this many CTAs, chosen and reported as above.
        coverage: also count, per source line, the threads executing it and the executions of
            each wait that had an effect (``line_counts``, ``wait_effects``; slower: every
            instruction step is wrapped). Used by the mutation table to leave out mutants
            whose site the launch never reaches or whose removed wait never acted; also
            ``barrier_effects`` (:mod:`emulator.barrier_use`).
        elect: which active lane ``elect.sync`` elects: ``lowest`` (default) or ``highest``
            (PTX ISA 9.1 says only that the election is deterministic: a kernel correct on the
            hardware must be correct for either).

    Returns:
        An :class:`EmulationResult`; candidate bugs (faults, wrong values, races, deadlocks,
        unsupported instructions) are reported in it, never raised.

    Raises:
        kernels.SpecError: ``size`` is not a size of the spec (a grid the candidate's ``meta``
            cannot evaluate is reported as status ``error``).
    """
    t_start = time.perf_counter()
    base: dict[str, Any] = {"kernel": spec.name, "arch": arch, "size": size if dims is None
                            else "custom"}
    try:
        module = parse_ptx(ptx, filename)
        prog = build_program(module, entry)
    except PTXSyntaxError as exc:
        return EmulationResult(**base, status="error", message=str(exc))
    except EmulationUnsupported as exc:
        return EmulationResult(**base, status="unsupported", message=str(exc))
    if dims is not None:
        spec = spec.model_copy(update={"sizes": {**spec.sizes, "custom": dict(dims)}})
        size = "custom"
    fn = prog.entry
    rq = fn.directive("reqntid")
    if threads is None:
        threads = int(rq.args[0]) if rq is not None and rq.args else None
    cfg = _pick_config(spec, threads, config)
    if threads is None:
        threads = 32 * cfg.num_warps
    m = {**cfg.meta, **(meta or {})}
    cfg = Config(meta=m, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
                 num_ctas=cfg.num_ctas)
    try:
        grid = spec.grid_dims(size, m)
    except SpecError as exc:
        return EmulationResult(**base, status="error", message=f"launch grid: {exc}")
    grid = (grid[0] * cfg.num_ctas, grid[1], grid[2])
    dims_now = spec.dims(size)
    base.update(dims=dims_now, grid=grid, threads=threads)

    if memory_budget is not None:
        # host memory before any state: the inputs, their copy in emulated global memory, the
        # outputs, and the float64 reference of every output (8 B per element)
        from kernels.dtypes import dtype as kdtype
        need = 0
        for p in spec.params:
            if p.is_tensor:
                n_el = int(np.prod(spec.shape(p, size)))
                es = kdtype(p.dtype).np.itemsize
                need += n_el * es * (2 if p.role in ("in", "inout") else 1)
                need += n_el * 8 * (p.role != "in")
        if need > memory_budget:
            return EmulationResult(
                **base, status="memory",
                message=(f"emulation not started: the buffers of size '{size}' and the float64 "
                         f"reference take {need / 2**20:.0f} MiB, over the emulator's memory "
                         f"budget of {memory_budget / 2**20:.0f} MiB"))
    inputs = make_inputs(spec, size, seed)
    gmem = GlobalMemory()
    addrs: dict[str, int] = {}
    for p in spec.params:
        if p.is_tensor:
            if p.role in ("in", "inout"):
                addrs[p.name] = gmem.add(p.name, inputs[p.name])
            else:
                from kernels.dtypes import dtype as kdtype
                shape = spec.shape(p, size)
                # the GPU worker's fill of its first (even-seed) pass: sentinel 0xFF, or 0 for
                # `init: zeros` (one definition: harness.inputs.output_fill_byte)
                arr = np.full(int(np.prod(shape)) * kdtype(p.dtype).np.itemsize,
                              output_fill_byte(p, SENTINEL), np.uint8)
                addrs[p.name] = gmem.add(p.name, arr)
    n_ctas = grid[0] * grid[1] * grid[2]
    scratch_addr = 0
    if global_scratch_size:
        scratch_addr = gmem.add("__global_scratch",
                                np.zeros(n_ctas * global_scratch_size, np.uint8))
    sources: list[tuple[str, Any]] = []
    for p in spec.params:
        if p.kind == "pointer":
            sources.append(("pointer", p))
        elif p.kind == "scalar":
            sources.append(("scalar", p))
        elif p.kind == "tensordesc":
            # Triton passes a host TensorDescriptor as the 128-byte tensor map, then the shape
            # (i32 each) and the strides in elements (i64 each), triton/backends/nvidia/driver.py
            rank = len(p.shape or ())
            sources += ([("tensormap", p)] + [("desc_shape", (p, i)) for i in range(rank)] +
                        [("desc_stride", (p, i)) for i in range(rank)])
    sources += [("global_scratch", None), ("profile_scratch", None)]
    if len(sources) != len(fn.params):
        return EmulationResult(
            **base, status="error",
            message=(f"{filename}:{fn.line}:{fn.col}: entry '{fn.name}' has {len(fn.params)} "
                     f"parameters, the spec implies {len(sources)} (pointers and scalars in "
                     f"order, then Triton's two scratch pointers)"))
    params: dict[str, bytes] = {}
    for pp, (kind, sp) in zip(fn.params, sources):
        t = pp.type or "b64"
        if kind == "pointer":
            params[pp.name] = _pack("u64", addrs[sp.name], None)
        elif kind == "scalar":
            params[pp.name] = _pack(t, spec.scalar_value(sp, cfg, size), sp.dtype)
        elif kind == "global_scratch":
            params[pp.name] = _pack("u64", scratch_addr, None)
        elif kind == "tensormap":
            params[pp.name] = _host_tensor_map(spec, sp, cfg, size, addrs[sp.name])
        elif kind in ("desc_shape", "desc_stride"):
            dp, i = sp
            shape = [int(x) for x in spec.shape(dp, size)]
            strides = [int(np.prod(shape[j + 1:])) for j in range(len(shape))]
            params[pp.name] = _pack(t, (shape if kind == "desc_shape" else strides)[i], None)
        else:
            params[pp.name] = _pack("u64", 0, None)
    if dynamic_smem is None:
        dynamic_smem = MAX_DYNAMIC_SMEM.get(arch, 232448)
    launch = Launch(grid=grid, threads=threads, params=params, dynamic_smem=dynamic_smem,
                    arch=arch, cluster=(cfg.num_ctas, 1, 1) if cfg.num_ctas > 1 else None)
    lanes_budget = max(threads, min(1 << 16, (256 << 20) // max(1, dynamic_smem) * threads))
    t0 = time.perf_counter()
    try:
        if cta_subset or max_ctas is not None:
            gmem.track_writes()
        mach = Machine(prog, launch, gmem, race=race, time_limit_s=time_limit_s,
                       batch_lanes=lanes_budget, memory_budget=memory_budget,
                       cta_subset=cta_subset, max_ctas=max_ctas)
        mach.elect_highest = elect == "highest"
        use = BarrierUse(mach) if coverage else None
        if use is not None:
            use.install()
        counts, effects = _instrument(mach, use) if coverage else (None, None)
        out = mach.run()
        if effects is not None:
            _completion_effects(mach, effects)
    except EmulationUnsupported as exc:
        return EmulationResult(**base, status="unsupported", message=str(exc),
                               seconds=time.perf_counter() - t0)
    secs = time.perf_counter() - t0
    partial = out.cta_ids is not None
    if counts is not None:
        lines: dict[int, int] = {}
        waits: dict[int, int] = {}
        bars: dict[int, int] = {}
        for pc, k in use.effects().items():
            ln = prog.insts[pc].line
            bars[ln] = bars.get(ln, 0) + k
        for ins, k, e in zip(prog.insts, counts.tolist(), effects.tolist()):
            if k:
                lines[ins.line] = lines.get(ins.line, 0) + int(k)
                if _is_wait(ins):
                    waits[ins.line] = waits.get(ins.line, 0) + int(e)
        base = dict(base, line_counts=lines, wait_effects=waits, barrier_effects=bars)
    common = dict(base, findings=out.findings, seconds=secs, steps=out.steps,
                  lane_insts=out.lane_insts,
                  race_checked_ctas=(out.ctas_run if race else 0) if partial else out.race_ctas,
                  hb_backend=out.hb_backend,
                  ctas_total=n_ctas, ctas_emulated=out.ctas_run,
                  emulated_ctas=out.cta_ids, subset_reason=out.subset_reason)
    if out.status != "ok":
        return EmulationResult(**common, status=out.status, message=out.message)
    from kernels.dtypes import dtype as kdtype
    refs = reference_outputs(spec, size, inputs)
    against = "the float64 reference"
    if refs is None and expected is not None:
        refs, against = dict(expected), "Triton's own kernel (emulated on the same inputs)"
    results: dict[str, CompareResult] = {}
    unchanged: dict[str, bool] = {}
    checked: dict[str, tuple[int, int]] = {}
    unchecked: dict[str, str] = {}
    for p in spec.params:
        if not p.is_tensor:
            continue
        buf = gmem.buffer(p.name)
        arr = buf.view(kdtype(p.dtype).np).reshape(spec.shape(p, size))
        if p.role == "in":
            unchanged[p.name] = bool(np.array_equal(buf, inputs[p.name].view(np.uint8).reshape(-1)))
            continue
        if capture is not None:
            capture[p.name] = arr.copy()
        if refs is not None:
            # only the spec's `written` region is compared, as on the GPU (spec.checked)
            got, want = spec.checked(p, size, arr), spec.checked(p, size, np.asarray(refs[p.name]))
            if partial:
                # a subset of CTAs ran: only the elements they wrote are compared; an output
                # accumulated with atomics cannot be (the other CTAs' contributions are missing)
                es = kdtype(p.dtype).np.itemsize
                r = gmem.names.index(p.name)
                shape = spec.shape(p, size)
                wr = spec.checked(p, size, gmem.written[r].reshape(-1, es).all(axis=1)
                                  .reshape(shape))
                at = gmem.atomic[r].reshape(-1, es).any(axis=1)
                if at.any() or not wr.any():
                    unchecked[p.name] = ("accumulated with atomics by CTAs not all emulated"
                                         if at.any() else "no element written by the emulated "
                                                          "CTAs")
                    continue
                got, want = got[wr], want[wr]
                checked[p.name] = (int(wr.sum()), int(wr.size))
            results[p.name] = compare(got, want, spec.tolerance(p.dtype))
    bad = [n for n, c in results.items() if not c.ok] + [
        f"input {n} modified" for n, ok in unchanged.items() if not ok]
    status: Status = "mismatch" if bad else "ok"
    msg = (f"outputs match {against}" if not bad else
           "; ".join(f"{n}: {results[n].reason}" if n in results else n for n in bad))
    if refs is None:
        msg = "ran to completion (the spec has no reference)"
    if partial:
        done = ", ".join(f"{n}: {k} of {t} elements" for n, (k, t) in checked.items())
        skipped = "; ".join(f"{n} not checked ({why})" for n, why in unchecked.items())
        msg += (f" on the elements the {out.ctas_run} emulated CTAs wrote ({done or 'none'})"
                + (f"; {skipped}" if skipped else ""))
        if refs is not None and not results and not bad:
            # nothing could be compared: no verdict on correctness
            return EmulationResult(**common, status="timeout", message=(
                f"{out.subset_reason}; no output could be checked on that subset ({skipped})"),
                inputs_unchanged=unchanged)
    del t_start
    return EmulationResult(**common, status=status, message=msg, outputs=results,
                           inputs_unchanged=unchanged, checked_elements=checked,
                           unchecked_outputs=unchecked)


def _is_wait(ins) -> bool:
    """Whether ``ins`` is a wait whose effect :func:`_instrument` measures."""
    op = ins.opcode
    return (op.startswith("cp.async.bulk.wait_group") or op.startswith("wgmma.wait_group") or
            op.startswith("tcgen05.wait::st") or op.startswith("tcgen05.wait::ld") or
            _is_proxy_fence(ins) or
            (ins.base == "mbarrier" and len(ins.parts) > 1 and
             ins.parts[1] in ("try_wait", "test_wait")))


def _is_proxy_fence(ins) -> bool:
    """Whether ``ins`` is a ``fence.proxy.async{.space}`` that fences shared memory (the fences
    the shared-memory HB4 check counts, ``emulator.ops._fence``)."""
    return ins.base == "fence" and counts_as_proxy_fence(ins)


def _instrument(mach: Machine, use: BarrierUse | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Count, per instruction of ``mach``'s program, the threads that execute it (reach it with
    its guard predicate true), and per wait
    (``cp.async.bulk.wait_group``, ``wgmma.wait_group``, ``mbarrier.try_wait``/``test_wait``)
    the executions that had an effect: a thread blocked, a thread's happens-before knowledge
    grew (it acquired something), a bulk group or wgmma registers retired, or a thread outside
    the race-tracked set ran it (unknown: counted); a ``tcgen05.wait::st`` acts when a cell it
    completed is read before its writer waits again, a ``tcgen05.wait::ld`` when a cell whose
    load it completed is written before (not ordered after) its reader waits again
    (``emulator.tcgen05_ext``), a
    ``fence.proxy.async`` when an async-proxy read of generic-written bytes was fenced by that
    site alone (``Machine.note_fence_use``) - both filled in by :func:`_completion_effects`
    after the run; ``use`` (a :class:`BarrierUse`) is fed each
    executed instruction. Each compiled instruction step is wrapped
    (the machine compiles a step the first time a pc runs, then calls the stored step).
    Returns the two (len(insts),) int64 arrays the run fills."""
    counts = np.zeros(len(mach.prog.insts), np.int64)
    effects = np.zeros(len(mach.prog.insts), np.int64)
    compile_step = mach._compile

    def in_flight() -> tuple[int, int]:
        acs = getattr(mach, "_acs", None)
        return (len(acs.pending) if acs is not None else 0,
                sum(int(np.count_nonzero(v)) for v in mach.wg_pending.values()))

    def counting(p: int):
        fn = compile_step(p)
        ins = mach.prog.insts[p]
        fence = _is_proxy_fence(ins)
        # every fence the shared-memory HB4 check counts goes into the lane's fence log, so
        # its positions match the lane's fence count (Machine.pfence)
        logged = fence
        wait = _is_wait(ins) and not ins.opcode.startswith("tcgen05.") and not fence
        guard, neg = ins.predicate, ins.negated

        def run(pc: int, active: np.ndarray, fn=fn) -> bool:
            if guard is None:
                exe = active
            else:
                g = mach.reg_bits(guard, pc)
                exe = active & (~g if neg else g)
            counts[pc] += int(np.count_nonzero(exe))
            if use is not None:
                use.step(pc, exe)
            if logged:
                for ln in np.flatnonzero(exe[:mach.ntr]).tolist():
                    mach.pfence_log.setdefault(int(mach.glane[ln]), []).append(pc)
            if not wait:
                return fn(pc, active)
            lanes = np.flatnonzero(active)
            tr = lanes[lanes < mach.ntr]
            before = mach.vc[tr].copy() if tr.size else None
            pend = in_flight()
            out = fn(pc, active)
            if (tr.size < lanes.size or bool(mach.blocked[lanes].any()) or in_flight() != pend
                    or (before is not None and not np.array_equal(before, mach.vc[tr]))):
                effects[pc] += 1
            return out

        mach._compiled[p] = run
        return run

    mach._compile = counting
    mach.tmem_wait_used = set()
    mach.pfence_log, mach.pfence_used = {}, set()
    return counts, effects


def _completion_effects(mach: Machine, effects: np.ndarray) -> None:
    """Count one effect for each ``tcgen05.wait::st`` / ``wait::ld`` whose completion some
    read / write depended on,
    and for each ``fence.proxy.async`` site an async-proxy read of generic-written shared bytes
    depended on alone (``Machine.note_fence_use``; see :func:`_instrument`)."""
    for pc in getattr(mach, "tmem_wait_used", ()):
        effects[pc] += 1
    for pc in mach.pfence_used:
        effects[pc] += 1


def check_races(ptx: str, spec: KernelSpec, arch: str, **kwargs: Any) -> list[Finding]:
    """Only the happens-before findings (HB1 races, HB2 deadlocks, HB3 divergent collectives)
    of :func:`run_kernel` with the same arguments (``race`` is forced on)."""
    kwargs["race"] = True
    return run_kernel(ptx, spec, arch, **kwargs).findings
