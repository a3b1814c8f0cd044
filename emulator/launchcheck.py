"""Happens-before checking of a PTX file with no spec: a default launch (issue 18 item 5).

``ailower verify FILE.ptx`` without ``--kernel`` has no KernelSpec to draw inputs from, so it
runs each ``.entry`` on a *default launch* instead and reports what the happens-before analysis
finds (HB1 races, HB2 deadlocks, HB3/HB5/HB6) on that execution:

* every pointer-like parameter (``.u64``/``.b64``/``.s64``, or declared ``.ptr``) is backed by
  its own zero-filled global buffer of ``buffer_bytes`` (16 MiB by default; ``numpy.zeros``
  pages are allocated by the OS on first touch, and the race shadow is sparse, so untouched
  bytes cost nothing);
* a small grid (2 CTAs along x: two CTAs are enough for a cross-CTA conflict to show), or one
  cluster: the entry's ``.reqnctapercluster`` shape, or 2 CTAs for code that uses cluster
  features without naming a shape (it is a launch attribute);
* threads per CTA from ``.reqntid``, else ``.maxntid``, else 128;
* 32-bit and narrower integer scalars are 256, float scalars 1.0;
* dynamic shared memory is the arch's opt-in maximum (what ``extern .shared`` arrays may use).

A launch file (YAML or JSON, :func:`load_launch`) overrides any of it: ``grid``, ``block``,
``scalars`` (parameter name or 0-based index -> value; a 64-bit parameter given a value is a
scalar, not a pointer), ``buffers`` (parameter -> bytes), ``tensor_maps`` (a ``.b8 [128]``
tensor-map parameter -> the tensor it describes, backed by a zero-filled buffer),
``dynamic_smem`` and ``entry``. A tensor-map parameter the file does not describe is inferred
from the kernel (:mod:`emulator.tmap_infer`: a probe run reads the bytes per copy off the
mbarrier ``expect_tx`` counts and the box off the coordinate steps); where that fails, the check
stops with a reason naming the parameter.

What this can and cannot say: the findings are those of *one* concrete execution, so a race on
a path the default values do not take is not seen. When the launch cannot run to the end (an
instruction the emulator does not model, an access outside a buffer because a scalar should
have been larger or a 64-bit parameter was not a pointer, the time limit), the result says so
(``status`` and ``reason``: which parameter, opcode or limit, and what to change), never "no
findings".
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from emulator import tmap_infer as _tmap_infer
from emulator.api import MAX_DYNAMIC_SMEM, _pack
from emulator.async_copy import ELEMTYPES, TRITON_ELEMTYPE, encode_tensor_map
from emulator.machine import Launch, Machine
from emulator.memory import GlobalMemory
from emulator.program import EmulationUnsupported, build_program
from verifier.errors import PTXSyntaxError
from verifier.findings import Finding
from verifier.ptx.parser import parse_ptx

__all__ = ["LaunchConfig", "TensorMapSpec", "LaunchCheck", "LaunchFileError", "load_launch", "check_default_launch",
           "DEFAULT_BUFFER_BYTES", "DEFAULT_INT_SCALAR", "DEFAULT_FLOAT_SCALAR", "DEFAULT_GRID",
           "DEFAULT_THREADS"]

#: bytes of the zero-filled buffer behind each pointer parameter
DEFAULT_BUFFER_BYTES = 16 << 20
#: value of an integer scalar parameter not given in the launch file
DEFAULT_INT_SCALAR = 256
#: value of a float scalar parameter not given in the launch file
DEFAULT_FLOAT_SCALAR = 1.0
#: programs along x, y, z when the launch file gives no grid
DEFAULT_GRID = (2, 1, 1)
#: threads per CTA when the entry has no ``.reqntid`` / ``.maxntid`` and the file gives none
DEFAULT_THREADS = 128

_PTR_TYPES = {"u64", "b64", "s64"}
_FLOAT_TYPES = {"f32", "f64", "f16", "bf16"}
_LAUNCH_KEYS = {"grid", "block", "cluster", "scalars", "buffers", "tensor_maps", "dynamic_smem",
                "entry"}
_TMAP_KEYS = {"dtype", "shape", "block", "swizzle"}
#: swizzle span in bytes -> the CUtensorMap / PTX swizzle_mode enum
_SWIZZLE_MODE = {0: 0, 32: 1, 64: 2, 128: 3}


class LaunchFileError(ValueError):
    """A launch file that cannot be read or has a bad field (the message names it)."""


@dataclass(frozen=True)
class TensorMapSpec:
    """The tensor a tile-mode tensor-map parameter describes (what a host ``TensorDescriptor``
    or ``cuTensorMapEncodeTiled`` gives), row-major like Triton's ``TensorDescriptor``.

    Attributes:
        dtype: Triton dtype name (``fp16``, ``bf16``, ``fp32``, ``fp8e4nv`` ..., the keys of
            :data:`emulator.async_copy.TRITON_ELEMTYPE`).
        shape: elements per dim, outermost first (rank 1..5); the tensor is contiguous, so the
            innermost dim's bytes must be a multiple of 16 (cuTensorMapEncodeTiled).
        block: the box per dim in elements, outermost first (1..256 each).
        swizzle: the shared-memory swizzle span in bytes: 0, 32, 64 or 128.
    """

    dtype: str
    shape: tuple[int, ...]
    block: tuple[int, ...]
    swizzle: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor (its zero-filled buffer)."""
        return int(np.prod(self.shape)) * ELEMTYPES[TRITON_ELEMTYPE[self.dtype]][0]

    def encode(self, address: int) -> bytes:
        """The 128-byte tensor map of the tensor at global ``address``.

        Raises:
            ValueError: a field cuTensorMapEncodeTiled rejects (named in the message).
        """
        es = ELEMTYPES[TRITON_ELEMTYPE[self.dtype]][0]
        dims = tuple(reversed(self.shape))
        strides, acc = [], es
        for d in dims[:-1]:
            acc *= d
            strides.append(acc)
        return encode_tensor_map(address, TRITON_ELEMTYPE[self.dtype], dims, tuple(strides),
                                 tuple(reversed(self.block)), swizzle=_SWIZZLE_MODE[self.swizzle])


def _tensor_map_spec(v: Any, what: str) -> TensorMapSpec:
    if not isinstance(v, dict):
        raise LaunchFileError(f"{what}: a mapping with dtype, shape, block (and swizzle) "
                              f"expected, got {v!r}")
    bad = sorted(set(map(str, v)) - _TMAP_KEYS)
    if bad or not {"dtype", "shape", "block"} <= set(v):
        raise LaunchFileError(f"{what}: needs dtype, shape and block, may have swizzle "
                              f"(unknown: {', '.join(bad) or 'none'})")
    dt = v["dtype"]
    if not isinstance(dt, str) or dt not in TRITON_ELEMTYPE:  # (a list is unhashable)
        raise LaunchFileError(f"{what}.dtype: {dt!r} is not one of "
                              f"{', '.join(sorted(TRITON_ELEMTYPE))}")
    shape = _ints(v["shape"], f"{what}.shape", 5, 1, 2**32 - 1)
    block = _ints(v["block"], f"{what}.block", 5, 1, 256)
    if len(block) != len(shape):
        raise LaunchFileError(f"{what}: block {block} and shape {shape} differ in rank")
    sw = v.get("swizzle", 0)
    if isinstance(sw, bool) or not isinstance(sw, int | float) or sw not in _SWIZZLE_MODE:
        raise LaunchFileError(f"{what}.swizzle: {sw!r} is not 0, 32, 64 or 128 (bytes)")
    spec = TensorMapSpec(dt, tuple(shape), tuple(block), int(sw))
    inner = block[-1] * ELEMTYPES[TRITON_ELEMTYPE[dt]][0]
    if spec.swizzle and inner > spec.swizzle:
        # cuTensorMapEncodeTiled: with a swizzle (and no interleave) the box's inner dimension
        # in bytes may not exceed the swizzle span
        raise LaunchFileError(f"{what}: the block's inner dimension is {inner} B, over the "
                              f"{spec.swizzle} B swizzle (the driver refuses the map)")
    if spec.nbytes > 1 << 34:  # the limit of a buffer: its zero-filled tensor is allocated
        raise LaunchFileError(f"{what}.shape: {shape} is {spec.nbytes} bytes of {dt}, over "
                              f"the {1 << 34} B a buffer may have")
    try:
        spec.encode(0)
    except ValueError as exc:
        raise LaunchFileError(f"{what}: {exc}") from None
    return spec


@dataclass
class LaunchConfig:
    """What the user fixed of a default launch (every field optional).

    Attributes:
        grid: programs along x, y, z (1-3 positive ints).
        block: threads per CTA (an int, or 1-3 ints multiplied), 1..1024.
        cluster: CTAs per cluster along x, y, z (the launch attribute; default the entry's
            ``.reqnctapercluster``, else (2, 1, 1) for code using cluster features).
        scalars: parameter name or 0-based index (as a string) -> int/float value.
        buffers: parameter name or index -> bytes of its zero-filled buffer.
        tensor_maps: tensor-map parameter name or index -> :class:`TensorMapSpec`.
        dynamic_smem: bytes of dynamic shared memory.
        entry: the ``.entry`` to run (default: every entry of the file).
    """

    grid: tuple[int, int, int] | None = None
    block: int | None = None
    cluster: tuple[int, int, int] | None = None
    scalars: dict[str, int | float] = field(default_factory=dict)
    buffers: dict[str, int] = field(default_factory=dict)
    tensor_maps: dict[str, TensorMapSpec] = field(default_factory=dict)
    dynamic_smem: int | None = None
    entry: str | None = None


def _ints(v: Any, what: str, n_max: int, lo: int, hi: int) -> list[int]:
    vals = v if isinstance(v, list) else [v]
    if not 1 <= len(vals) <= n_max or not all(isinstance(x, int) and not isinstance(x, bool)
                                              for x in vals):
        raise LaunchFileError(f"{what}: give 1 to {n_max} integers, got {v!r}")
    for x in vals:
        if not lo <= x <= hi:
            raise LaunchFileError(f"{what}: {x} is outside [{lo}, {hi}]")
    return vals


def load_launch(path: str | Path) -> LaunchConfig:
    """Read a launch file (``.json`` as JSON, anything else as YAML)::

        grid: [4, 1, 1]          # programs per axis (default [2, 1, 1])
        block: 256               # threads per CTA (default .reqntid/.maxntid, else 128)
        cluster: [2, 1, 1]       # CTAs per cluster (default .reqnctapercluster, else 2 for
                                 # code using cluster features, else none)
        scalars: {n_elements: 1000, add_kernel_param_3: 7}   # name or index -> value
        buffers: {0: 4096}       # pointer parameter -> bytes (default 16 MiB)
        tensor_maps:             # .b8 [128] tensor-map parameter -> its tensor (row-major)
          a_desc: {dtype: fp16, shape: [512, 256], block: [128, 64], swizzle: 128}
        dynamic_smem: 49152      # bytes (default the arch's opt-in maximum)
        entry: add_kernel        # default: every .entry of the file

    Raises:
        LaunchFileError: unreadable file, bad YAML/JSON, unknown key or a bad value (named).
    """
    p = Path(path)
    try:
        raw = p.read_text()
    except OSError as exc:
        raise LaunchFileError(f"{p}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(raw) if p.suffix == ".json" else yaml.safe_load(raw)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise LaunchFileError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'YAML'}: "
                              f"{exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise LaunchFileError(f"{p}: the top level must be a mapping")
    bad = sorted(set(map(str, data)) - _LAUNCH_KEYS)
    if bad:
        raise LaunchFileError(f"{p}: unknown key(s) {', '.join(bad)} (known: "
                              f"{', '.join(sorted(_LAUNCH_KEYS))})")
    cfg = LaunchConfig()
    if "grid" in data:
        g = _ints(data["grid"], f"{p}: grid", 3, 1, 2**31 - 1)
        cfg.grid = tuple(g + [1] * (3 - len(g)))  # type: ignore[assignment]
    if "cluster" in data:
        c = _ints(data["cluster"], f"{p}: cluster", 3, 1, 16)
        cfg.cluster = tuple(c + [1] * (3 - len(c)))  # type: ignore[assignment]
    if "block" in data:
        b = _ints(data["block"], f"{p}: block", 3, 1, 1024)
        cfg.block = int(np.prod(b))
        if cfg.block > 1024:
            raise LaunchFileError(f"{p}: block: {b} is {cfg.block} threads, over 1024")
    for key in ("scalars", "buffers"):
        d = data.get(key) or {}
        if not isinstance(d, dict):
            raise LaunchFileError(f"{p}: {key} must be a mapping of parameter -> value")
        for k, v in d.items():
            if key == "scalars" and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise LaunchFileError(f"{p}: scalars.{k}: a number expected, got {v!r}")
            if key == "buffers":
                _ints(v, f"{p}: buffers.{k}", 1, 1, 1 << 34)
            getattr(cfg, key)[str(k)] = v
    tm = data.get("tensor_maps") or {}
    if not isinstance(tm, dict):
        raise LaunchFileError(f"{p}: tensor_maps must be a mapping of parameter -> tensor")
    for k, v in tm.items():
        cfg.tensor_maps[str(k)] = _tensor_map_spec(v, f"{p}: tensor_maps.{k}")
    if "dynamic_smem" in data:
        cfg.dynamic_smem = _ints(data["dynamic_smem"], f"{p}: dynamic_smem", 1, 0, 1 << 20)[0]
    if "entry" in data:
        if not isinstance(data["entry"], str):
            raise LaunchFileError(f"{p}: entry must be a string")
        cfg.entry = data["entry"]
    return cfg


@dataclass
class LaunchCheck:
    """The happens-before check of one ``.entry`` on a default launch.

    Attributes:
        entry: the entry's name.
        status: ``ok`` (ran to the end; ``findings`` are what the analysis found), or why it
            could not: ``unsupported`` (an instruction the emulator lacks), ``fault`` (an
            illegal or misaligned access, ``trap``), ``deadlock`` (HB2 is in ``findings``),
            ``timeout``, ``memory``, ``error`` (bad launch: an unknown parameter name ...).
        reason: for a status other than ``ok``, one line naming the opcode / parameter / limit
            and what to change.
        findings: HB findings (verifier format), also when the run stopped early.
        grid, threads: the launch; ``params``: parameter -> what it was bound to
            (``buffer N B`` or the scalar value), ``defaulted``: parameters that took a default,
            ``inferred``: tensor-map parameters whose map was inferred from the kernel
            (:mod:`emulator.tmap_infer`; the global side of their copies is not checked).
        seconds: wall time of the emulation, s.
    """

    entry: str
    status: str
    reason: str = ""
    findings: list[Finding] = field(default_factory=list)
    grid: tuple[int, int, int] = DEFAULT_GRID
    threads: int = DEFAULT_THREADS
    params: dict[str, str] = field(default_factory=dict)
    defaulted: list[str] = field(default_factory=list)
    inferred: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ran(self) -> bool:
        """The launch ran to the end (its findings cover the whole execution)."""
        return self.status in ("ok", "deadlock")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (findings as the verifier's dicts)."""
        return {"entry": self.entry, "status": self.status, "reason": self.reason,
                "grid": list(self.grid), "threads": self.threads, "params": self.params,
                "defaulted": self.defaulted, "inferred": self.inferred,
                "seconds": round(self.seconds, 3),
                "findings": [f.model_dump(mode="json") for f in self.findings]}

    def render(self) -> str:
        """Human-readable lines: the launch, then the findings or why it could not run."""
        head = (f"happens-before check of '{self.entry}' on a default launch: grid "
                f"{self.grid[0]}x{self.grid[1]}x{self.grid[2]}, {self.threads} threads")
        lines = [head]
        if self.defaulted:
            lines.append("  defaults: " + ", ".join(f"{n}={self.params[n]}"
                                                    for n in self.defaulted))
        for n in self.inferred:
            lines.append(f"  {n}: {self.params[n]}")
        if self.inferred:
            lines.append("  (the global memory read or written through an inferred tensor map "
                         "is not race-checked; give the maps in --launch to check it)")
        for f in self.findings:
            lines.append(f"  {f.file}:{f.line}:{f.col}: {f.severity}: [{f.rule}] {f.message}")
        if self.status == "ok":
            lines.append(f"  ran to the end in {self.seconds:.1f} s: "
                         + (f"{len(self.findings)} happens-before finding(s)" if self.findings
                            else "no happens-before findings on this launch (one execution: "
                                 "paths these values do not take are not checked)"))
        else:
            lines.append(f"  could not complete the check ({self.status}): {self.reason}")
        return "\n".join(lines)


def _key_for(cfg_map: dict[str, Any], name: str, idx: int) -> str | None:
    if name in cfg_map:
        return name
    if str(idx) in cfg_map:
        return str(idx)
    return None


def check_default_launch(ptx: str, *, arch: str, launch: LaunchConfig | None = None,
                         filename: str = "<ptx>", time_limit_s: float = 60.0,
                         buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> list[LaunchCheck]:
    """Run every ``.entry`` of ``ptx`` (or ``launch.entry``) on a default launch with the
    happens-before analysis on, and return one :class:`LaunchCheck` per entry.

    Args:
        ptx: the PTX module text.
        arch: ``sm_80`` | ``sm_90a`` | ``sm_100a`` ... (the default dynamic shared size).
        launch: what the user fixed (:func:`load_launch`); None: all defaults.
        filename: the name used in findings and messages.
        time_limit_s: wall-clock limit per entry, s.
        buffer_bytes: bytes of each pointer parameter's zero-filled buffer (unless
            ``launch.buffers`` names it).

    Returns:
        One check per entry (an entry without a body is skipped). Candidate bugs and what the
        emulator cannot run are reported in the checks, never raised.

    Raises:
        verifier.PTXSyntaxError: the PTX does not parse (the verifier reports it first).
        LaunchFileError: ``launch`` names an entry or a parameter the file does not have.
    """
    cfg = launch or LaunchConfig()
    module = parse_ptx(ptx, filename)
    entries = [f for f in module.entries if f.body is not None]
    if cfg.entry is not None:
        if cfg.entry not in [f.name for f in entries]:
            raise LaunchFileError(f"launch entry {cfg.entry!r} is not an .entry of {filename} "
                                  f"(have: {', '.join(f.name for f in entries) or 'none'})")
        entries = [f for f in entries if f.name == cfg.entry]
    out = []
    for fn in entries:
        names = [p.name for p in fn.params]
        for key in (*cfg.scalars, *cfg.buffers, *cfg.tensor_maps):
            if key not in names and not (key.isdigit() and int(key) < len(names)):
                raise LaunchFileError(f"launch parameter {key!r} is not a parameter of "
                                      f"'{fn.name}' (have: {', '.join(names) or 'none'}; or "
                                      f"use a 0-based index)")
        for i, pname in enumerate(names):
            given = [what for what, d in (("scalars", cfg.scalars), ("buffers", cfg.buffers),
                                          ("tensor_maps", cfg.tensor_maps))
                     if _key_for(d, pname, i) is not None]
            if len(given) > 1:
                raise LaunchFileError(f"launch parameter {i} '{pname}' of '{fn.name}' is given "
                                      f"in {' and '.join(given)}: give it once")
        out.append(_check_entry(module, fn, arch, cfg, filename, time_limit_s, buffer_bytes))
    return out


def _check_entry(module, fn, arch: str, cfg: LaunchConfig, filename: str, time_limit_s: float,
                 buffer_bytes: int) -> LaunchCheck:
    threads = cfg.block
    for d in ("reqntid", "maxntid"):
        if threads is None:
            dv = fn.directive(d)
            if dv is not None and dv.args:
                threads = int(np.prod([int(a) for a in dv.args]))
    threads = threads or DEFAULT_THREADS
    try:
        prog = build_program(module, fn.name)
    except EmulationUnsupported as exc:
        return LaunchCheck(entry=fn.name, status="unsupported", reason=str(exc),
                           grid=cfg.grid or DEFAULT_GRID, threads=threads)
    cluster = cfg.cluster or _default_cluster(prog, fn)
    # the default grid holds one cluster (at least 2 CTAs): a grid that is not a multiple of
    # the cluster shape is a launch the driver refuses
    grid = cfg.grid or (tuple(cluster) if cluster is not None and
                        cluster[0] * cluster[1] * cluster[2] >= 2 else DEFAULT_GRID)
    res = LaunchCheck(entry=fn.name, status="ok", grid=grid, threads=threads)
    dyn = cfg.dynamic_smem if cfg.dynamic_smem is not None else MAX_DYNAMIC_SMEM.get(arch, 232448)
    undescribed = {i: p.name for i, p in enumerate(fn.params)
                   if _tmap_like(p) and _key_for(cfg.tensor_maps, p.name, i) is None
                   and _key_for(cfg.scalars, p.name, i) is None}
    inferred = None
    t0 = time.perf_counter()
    if undescribed:
        # tensor maps the launch does not describe: a probe run, then the maps its mbarrier
        # byte counts and coordinates imply (emulator.tmap_infer)
        bound = _bind(fn, cfg, filename, buffer_bytes, res, probe=True)
        if bound is None:
            return res
        log = _tmap_infer.ProbeLog(subbyte=any(
            k in ins.opcode for ins in prog.insts for k in ("e2m1", "mxf4", ".b4x16", "f4e2m1")))
        mach = Machine(prog, Launch(grid=grid, threads=threads, params=bound[1],
                                    dynamic_smem=dyn, arch=arch, cluster=cluster),
                       bound[0], race=False, time_limit_s=time_limit_s)
        mach.tmap_probe = log
        probe_out = _run(mach, res, t0)
        if probe_out is None:
            return res
        inferred, why = _tmap_infer.infer_maps(log, undescribed)
        hb2 = [f for f in probe_out.findings if f.rule == "HB2" and f.severity == "error"]
        if not inferred and probe_out.status == "deadlock" and hb2:
            # the probe completes every phase whose arrivals are in as soon as probe copies
            # reached it, whatever their bytes (tmap_infer.ProbeLog.resolve): a deadlock there
            # does not depend on the maps' boxes - the kernel hangs on any launch of this shape
            res.status = "deadlock"
            res.findings = hb2
            res.reason = ("the probe run that infers the tensor maps deadlocked although every "
                          "phase that copies reached was completed as soon as its arrivals were "
                          f"in: the hang does not depend on the maps ({why})")
            res.seconds = time.perf_counter() - t0
            return res
        if not inferred:
            i = min(undescribed)
            p = fn.params[i]
            res.status = "error"
            res.reason = (f"parameter {i} '{p.name}' (.b8 [128]) at {filename}:{p.line}:{p.col} "
                          "looks like a tensor map (CUtensorMap), whose tensor could not be "
                          f"inferred from the kernel ({why}"
                          + (f"; the probe run ended: {probe_out.status}"
                             if probe_out.status != "ok" else "")
                          + "): describe it in --launch, e.g. tensor_maps: {" + p.name +
                          ": {dtype: fp16, shape: [M, K], block: [BM, BK], swizzle: 128}}")
            res.seconds = time.perf_counter() - t0
            return res
        res.params.clear()  # bound again below, with the inferred maps
        res.defaulted.clear()
    bound = _bind(fn, cfg, filename, buffer_bytes, res, inferred=inferred)
    if bound is None:
        return res
    gmem, params = bound
    mach = Machine(prog, Launch(grid=grid, threads=threads, params=params, dynamic_smem=dyn,
                                arch=arch, cluster=cluster), gmem, race=True,
                   time_limit_s=max(1.0, time_limit_s - (time.perf_counter() - t0)))
    outcome = _run(mach, res, t0)
    if outcome is None:
        return res
    res.seconds = time.perf_counter() - t0
    res.findings = list(outcome.findings)
    res.status = outcome.status
    code_fault = _code_fault(outcome.message, prog) if outcome.status == "fault" else None
    if code_fault is not None:
        # a fault that is a property of the code whatever the launch values (a warp's TMEM
        # lane slab is its position; a TMEM column count, the allocation permit): a concrete
        # witness of the static rule, not a launch misfit
        res.findings.append(code_fault)
        res.reason = outcome.message
    elif outcome.status == "fault":
        res.reason = (f"{outcome.message}: the default values may not fit this kernel (a "
                      "scalar bounding an index, a 64-bit parameter that is not a pointer, a "
                      "buffer smaller than the kernel reads); give them in --launch")
        hit = _buffer_of_fault(outcome.message, gmem)
        if hit:
            res.reason += f" ({hit})"
    elif outcome.status != "ok":
        res.reason = outcome.message
    return res


#: faults of the emulator (emulator.ops) that are properties of the code, not of the launch
#: values: (message pattern, rule, what the PTX ISA says)
_CODE_FAULTS = (
    (re.compile(r"32-lane slab of its position in the warpgroup\)"), "TL2",
     "PTX ISA 9.1 §9.7.16.8.1: warp w of a warpgroup accesses TMEM lanes 32*(w%4) .. "
     "32*(w%4)+31 only"),
    (re.compile(r"^tcgen05\.alloc of \d+ columns: the column count must be a power of two"),
     "TA1", "PTX ISA 9.1 §9.7.16.7.1: a power of two in 32..512"),
    (re.compile(r"^tcgen05\.alloc after the CTA relinquished its allocation permit"), "TA6",
     "PTX ISA 9.1 §9.7.16.7.1: no tcgen05.alloc after tcgen05.relinquish_alloc_permit"),
)
_FAULT_AT = re.compile(r" \((?P<file>[^()]+):(?P<line>\d+):(?P<col>\d+)\)$")


#: special registers whose value a launch chooses (the CTA's place in the grid and cluster)
_LAUNCH_SREGS = ("%ctaid", "%nctaid", "%clusterid", "%nclusterid", "%cluster_ctaid",
                 "%cluster_nctaid", "%cluster_ctarank", "%cluster_nctarank", "%gridid",
                 "%ntid")


def _launch_dependent(prog, line: int, col: int) -> bool:
    """Whether an input of the instruction at ``line:col`` may take its value from the launch:
    a parameter (``ld.param``), global memory, or a special register of the grid's shape, on
    the chain of register definitions that feeds it (every definition of each register in
    the entry). True when the instruction is not found."""
    insts = prog.insts
    pcs = [pc for pc, ins in enumerate(insts) if ins.line == line and ins.col == col]
    if not pcs:
        return True
    defs: dict[str, list] = {}
    for ins in insts:
        if ins.operands and ins.opcode.split(".")[0] not in ("st", "red", "bar", "barrier"):
            for r in ins.operands[0].registers():
                defs.setdefault(r.name, []).append(ins)
    work = [r.name for o in insts[pcs[0]].operands for r in o.registers()]
    seen: set[str] = set()
    while work:
        name = work.pop()
        if name in seen:
            continue
        seen.add(name)
        if name.startswith(_LAUNCH_SREGS):
            return True
        for d in defs.get(name, ()):
            if d.opcode.startswith("ldu") or (d.opcode.startswith("ld.")
                                               and ".shared" not in d.opcode):
                return True
            work += [r.name for o in d.operands[1:] for r in o.registers()]
    return False


def _code_fault(message: str, prog) -> Finding | None:
    """The error finding for an emulator fault that holds whatever the launch values are
    (:data:`_CODE_FAULTS`, when no input of the faulting instruction comes from the launch:
    :func:`_launch_dependent`), at the faulting instruction; None for any other fault."""
    at = _FAULT_AT.search(message)
    if at is None:
        return None
    for pat, rule, why in _CODE_FAULTS:
        if pat.search(message):
            if _launch_dependent(prog, int(at.group("line")), int(at.group("col"))):
                return None
            return Finding(rule=rule, severity="error", file=at.group("file"),
                           line=int(at.group("line")), col=int(at.group("col")),
                           message=f"{message[:at.start()]} on the default launch ({why})")
    return None


#: what makes a kernel a cluster kernel when it names no cluster shape (PTX ISA 9.1 §10
#: cluster special registers, ``mapa``, ``barrier.cluster``, multicast, remote mbarriers)
_CLUSTER_USE = ("%cluster_ctarank", "%cluster_nctarank", "%cluster_ctaid", "%cluster_nctaid",
                "%clusterid", "%is_explicit_cluster", "mapa", "barrier.cluster",
                "multicast::cluster", "cta_group::2")


def _default_cluster(prog, fn) -> tuple[int, int, int] | None:
    """The cluster shape of a default launch: the entry's ``.reqnctapercluster``; else (2,1,1)
    when it is ``.explicitcluster`` or its code (called functions included) uses cluster
    features (the shape is a launch attribute, ``cudaLaunchKernelEx``, that the PTX need not
    name); else None (no cluster)."""
    req = fn.directive("reqnctapercluster")
    if req is not None and req.args:
        d = [int(a) for a in req.args] + [1, 1]
        return (d[0], d[1], d[2])
    if fn.directive("explicitcluster") is not None:
        return (2, 1, 1)
    for ins in prog.insts:
        if any(k in ins.opcode for k in _CLUSTER_USE) or any(
                (o.name or "") in _CLUSTER_USE for o in ins.operands):
            return (2, 1, 1)
    return None


def _run(mach: Machine, res: LaunchCheck, t0: float):
    """``mach.run()``'s outcome, or None with ``res`` saying which instruction the emulator
    lacks (and the seconds since ``t0``)."""
    try:
        return mach.run()
    except EmulationUnsupported as exc:
        res.status, res.reason = "unsupported", str(exc)
        res.seconds = time.perf_counter() - t0
        return None


def _tmap_like(p) -> bool:
    """A ``.b8 [128]`` parameter: a CUtensorMap passed by value (``__grid_constant__``)."""
    return (p.type or "b64") == "b8" and tuple(p.dims) == (128,)


def _bind(fn, cfg: LaunchConfig, filename: str, buffer_bytes: int, res: LaunchCheck, *,
          probe: bool = False, inferred: dict | None = None
          ) -> tuple[GlobalMemory, dict[str, bytes]] | None:
    """Global memory and parameter bytes of the launch: what ``cfg`` gives, defaults for the
    rest; an undescribed tensor map is a probe map (``probe``) or its ``inferred`` map
    (:class:`emulator.tmap_infer.InferredMap`). Returns None with ``res`` set to the error
    when a parameter cannot be bound."""
    gmem = GlobalMemory()
    params: dict[str, bytes] = {}
    for i, p in enumerate(fn.params):
        t = p.type or "b64"
        sk = _key_for(cfg.scalars, p.name, i)
        tk = _key_for(cfg.tensor_maps, p.name, i)
        tmap_like = _tmap_like(p)
        if tmap_like and tk is None and sk is None and (probe or inferred):
            if probe:
                params[p.name] = _tmap_infer.probe_map(i)
                continue
            im = inferred[i]
            addr = gmem.add_zeros(p.name, im.tensor_bytes())
            params[p.name] = im.encode(addr)
            res.params[p.name] = (f"tensor map inferred from the kernel: box "
                                  f"{'x'.join(map(str, reversed(im.box)))} of {im.esize}-byte "
                                  f"elements ({im.how})")
            res.inferred.append(p.name)
            continue
        if tk is not None:
            if not tmap_like:
                res.status = "error"
                res.reason = (f"parameter {i} '{p.name}' (.{t}) at {filename}:{p.line}:{p.col} "
                              "is given a tensor map, but is not a .b8 [128] parameter")
                return None
            spec = cfg.tensor_maps[tk]
            addr = gmem.add_zeros(p.name, spec.nbytes)
            params[p.name] = spec.encode(addr)
            res.params[p.name] = (f"tensor map of a zero-filled {spec.dtype} "
                                  f"{'x'.join(map(str, spec.shape))} tensor, block "
                                  f"{'x'.join(map(str, spec.block))}, swizzle {spec.swizzle} B")
            continue
        if p.dims or t not in _PTR_TYPES | _FLOAT_TYPES | {"u32", "s32", "b32", "u16", "s16",
                                                           "b16", "u8", "s8", "b8", "pred"}:
            if sk is None:
                res.status = "error"
                res.reason = (f"parameter {i} '{p.name}' (.{t}{'[]' if p.dims else ''}) at "
                              f"{filename}:{p.line}:{p.col} is neither a pointer nor a scalar "
                              "this check can default (a struct/array parameter)")
                return None
        if sk is not None:
            v = cfg.scalars[sk]
            try:
                params[p.name] = _pack(t, v, "fp32" if t == "f32" and isinstance(v, float)
                                       else None)
            except ValueError as exc:
                res.status, res.reason = "error", f"parameter '{p.name}': {exc}"
                return None
            res.params[p.name] = repr(v)
            continue
        if t in _PTR_TYPES or p.is_ptr:
            bk = _key_for(cfg.buffers, p.name, i)
            nbytes = int(cfg.buffers[bk]) if bk is not None else buffer_bytes
            addr = gmem.add_zeros(p.name, nbytes)
            params[p.name] = _pack("u64", addr, None)
            res.params[p.name] = f"zero-filled buffer of {nbytes} B"
            if bk is None:
                res.defaulted.append(p.name)
            continue
        v = DEFAULT_FLOAT_SCALAR if t in _FLOAT_TYPES else DEFAULT_INT_SCALAR
        if t == "pred":
            v = 1
        params[p.name] = _pack(t, v, "fp32" if t == "f32" else None)
        res.params[p.name] = repr(v)
        res.defaulted.append(p.name)
    return gmem, params


def _buffer_of_fault(message: str, gmem: GlobalMemory) -> str:
    """Name the buffer nearest below the faulting address of a fault message, if any."""
    import re
    m = re.search(r"0x([0-9a-f]+)", message)
    if not m or not gmem.bases:
        return ""
    a = int(m.group(1), 16)
    best = None
    for name, base, data in zip(gmem.names, gmem.bases, gmem.data):
        if base <= a:
            best = (name, a - base, data.size)
    if best is None:
        return f"address below every buffer: a parameter read as a pointer may be a scalar"
    name, off, size = best
    return (f"{off} B past the start of parameter '{name}''s {size} B buffer" if off >= size
            else f"inside parameter '{name}''s buffer")
