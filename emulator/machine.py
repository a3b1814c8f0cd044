"""The SIMT engine: every thread of a batch of CTAs is one lane of numpy arrays.

Execution model (PTX ISA 9.1 §3, §9.7.13):

* Each lane has its own program counter. At every step the scheduler picks the lowest program
  counter among runnable lanes (min-PC scheduling) and executes that instruction for every lane
  standing there; divergent paths therefore run one after the other and reconverge where their
  program counters meet. Guard predicates (``@%p``) mask lanes inside one step.
* Registers are stored as raw bits (unsigned integers of the declared width, ``bool`` for
  predicates); an instruction reinterprets them through its type (``add.f32`` views ``uint32`` as
  ``float32``), which is how PTX untyped ``.b32`` registers behave.
* ``bar.sync``/``barrier.sync``/``bar.arrive`` (ids 0-15, optional thread count) block lanes until
  the CTA's arrival count is reached; exited threads no longer count toward a barrier without a
  thread count. When no lane is runnable but some are blocked the launch is deadlocked (HB2).
  A lane that repeats a strong load of the same address with no write performed since spins
  on a flag: it is parked until the next write (``Machine.spin_check``).
* Warp collectives (``shfl.sync``, ``vote.sync``, ``redux.sync``, ``elect.sync``,
  ``bar.warp.sync``) read the values of the lanes executing them in the same step; a member lane
  of ``membermask`` that is not there is reported (HB3).
* Happens-before: each tracked lane has a vector clock over the threads of its CTA; barrier
  completion joins the clocks of all participants; memory accesses are checked against the
  per-byte shadow (:mod:`emulator.memory`) and unordered conflicting pairs are HB1 findings.

Numerics: integer ops wrap modulo 2**width; ``.f32`` arithmetic with ``.rn`` is numpy IEEE
float32; directed rounding and ``fma`` go through float64 and :func:`round_f64_to`; ``.approx``
transcendental functions are computed in float64 and rounded (the GPU's are within 2 ulp).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from emulator import _hbkern
from emulator import async_copy as _async_copy  # noqa: F401  (TMA / bulk-copy handlers)
from emulator import cluster as _cluster  # registers the cluster handlers (after ops)
from emulator import flags as _flags  # release / acquire through memory
from emulator import cta_pair as _cta_pair  # tcgen05 .cta_group::2 (deadlock notes)
from emulator import ops as _ops  # noqa: F401  (registers the instruction handlers)
from emulator import misc_ext as _misc_ext  # noqa: F401  (setmaxnreg, clusterlaunchcontrol)
from emulator import tcgen05_ext as _tc_ext  # noqa: F401  (block-scaled MMA, cp, shift)
from emulator.memory import (SHADOW_BYTES_PER_BYTE, SHARED_WINDOW, GlobalMemory, MemoryFault,
                             Shadow, ShadowBudgetExceeded)
from emulator.numerics import NP, UINT, imm_bits
from emulator.program import Program
from emulator.registry import (_HANDLERS, ASYNC_UNITS, WGMMA_UNIT, WGMMA_UNITS, _adapt, _Fault,
                               _lanes, unit_kind)
from verifier.findings import Finding, Note
from verifier.ptx import Instruction, Operand

__all__ = ["Launch", "Machine", "RunOutcome", "DEFAULT_MEMORY_BUDGET", "representative_order"]

#: bytes each race-analysis shadow may take by default (4 GiB: this machine class has 24 GiB
#: shared by several processes; the shadow grows with the bytes the kernel touches, 40 B each)
DEFAULT_MEMORY_BUDGET = 4 << 30

_TYPES = set(NP)
_NO_VALS = np.zeros(1, np.uint8)  # the value operand of a read check (never indexed)
_NO_CLK = np.zeros(1, np.int64)
#: immediates as 0-d arrays, by (text, value, type): a pure function of the key
_IMM_CACHE: dict[tuple, np.ndarray] = {}
_REG_NAME = re.compile(r"%[A-Za-z_$][\w$]*")
_ROUND = {"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi"}
_SPACES = {"global", "shared", "local", "param", "const", "shared::cta", "shared::cluster"}


#: ``Machine.block_kind`` of a lane blocked in a spin loop on memory (``Machine.spin_check``)
SPIN_KIND = 6
#: rounds a spin on memory is run again while every other lane is blocked or exited, with no
#: write performed, before the launch is a deadlock (HB2)
SPIN_LIMIT = 4096

@dataclass
class Launch:
    """One launch: grid (programs per axis), threads per CTA, parameter bytes, shared memory.

    ``params`` maps each ``.param`` name to its little-endian bytes. ``dynamic_smem`` is Triton's
    ``metadata.shared`` (bytes of the extern ``global_smem`` window).
    """

    grid: tuple[int, int, int]
    threads: int
    params: dict[str, bytes]
    dynamic_smem: int = 0
    arch: str = "sm_90a"
    #: CTAs per cluster (x, y, z) given at launch (Triton: ``(num_ctas, 1, 1)``); None: the
    #: entry's ``.reqnctapercluster`` or no cluster (:func:`emulator.cluster.cluster_dims`)
    cluster: tuple[int, int, int] | None = None


@dataclass
class RunOutcome:
    """What one emulated launch did: ``status`` ok | fault | deadlock | timeout | memory, a
    message, the HB findings, executed steps (instruction groups) and instructions x lanes;
    ``ctas_run`` CTAs completed; ``cta_ids`` and ``subset_reason`` when only a representative
    subset of the grid ran (``Machine(cta_subset=True)`` and a grid too large for the time
    limit)."""

    status: str = "ok"
    message: str = ""
    findings: list[Finding] = field(default_factory=list)
    steps: int = 0
    lane_insts: int = 0
    race_ctas: int = 0
    ctas_run: int = 0
    cta_ids: list[int] | None = None  # the CTAs run when only a subset was (None: all)
    subset_reason: str = ""
    hb_backend: str = ""  # the race check's backend (emulator._hbkern: numba | numpy), "" off


def _parts(ins: Instruction) -> tuple[list[str], list[str]]:
    """(modifiers, types) of an opcode after the mnemonic."""
    mods, types = [], []
    for p in ins.parts[1:]:
        (types if p in _TYPES else mods).append(p)
    return mods, types


def _wgmma_operand_keys(prog) -> frozenset:
    """Register keys used as a ``wgmma.mma_async`` accumulator or register-A operand anywhere in
    ``prog`` (cached on the program: the same for every launch)."""
    got = getattr(prog, "_wg_operand_keys", None)
    if got is not None:
        return got
    keys = set()
    for pc, ins in enumerate(prog.insts):
        if ins.base != "wgmma" or "mma_async" not in ins.parts or len(ins.operands) < 2:
            continue
        for op in (ins.operands[0], ins.operands[1]):
            for e in (op.elems if op.kind == "vector" else ()):
                if e.kind in ("reg", "symbol"):  # a register named without '%' is a symbol
                    info = prog.envs[pc].lookup(e.name or e.text)
                    if info is not None:
                        keys.add(info.key)
    prog._wg_operand_keys = got = frozenset(keys)
    return got


class Machine:
    """Runs one :class:`Program` for one :class:`Launch` over :class:`GlobalMemory`.

    Args:
        prog: the flattened entry.
        launch: grid, block and parameters.
        gmem: global memory holding every buffer (modified in place).
        race: run the happens-before race and deadlock analysis.
        race_budget: vector-clock entries allowed per batch (CTAs x threads x threads); it
            bounds the CTAs executed together, every CTA is race-checked.
        time_limit_s: wall-clock limit; the outcome is ``timeout`` when exceeded.
        batch_lanes: lanes executed together (CTAs are batched up to this many threads).
        memory_budget: bytes each race-analysis shadow (global; shared of a batch) may grow to
            (None: unbounded); past it the outcome is status ``memory`` with a report, never an
            out-of-memory kill. Default :data:`DEFAULT_MEMORY_BUDGET`.
        cta_subset: when the whole grid would not finish within ``time_limit_s`` (projected
            from the CTAs run so far), stop after a representative subset of complete CTAs
            (:func:`representative_order`) instead of timing out; the outcome names them. The
            caller must then check only what those CTAs wrote (``gmem.track_writes``).
        max_ctas: emulate at most this many CTAs, in representative order (None: no CTA
            budget); the outcome then names the subset as above.
    """

    #: with coverage (``emulator.api``): global lane -> program counters of the lane's
    #: ``fence.proxy.async`` executions in order, and the sites an HB4 check depended on alone
    #: (:meth:`note_fence_use`); None / empty without coverage
    pfence_log: dict[int, list[int]] | None = None
    pfence_used: set[int] = frozenset()
    #: with coverage: ``emulator.barrier_use``'s recorder of TMEM cell accesses (write, lane,
    #: batch CTA, rows, columns, pc), called by ``emulator.tcgen05_ext``; None without
    tmem_note = None
    #: in a probe run (``emulator.tmap_infer``): the log of copies through probe tensor maps,
    #: whose phases complete when every live thread is blocked; None otherwise
    tmap_probe = None

    def __init__(self, prog: Program, launch: Launch, gmem: GlobalMemory, *, race: bool = True,
                 race_budget: int = 1 << 22, time_limit_s: float = 120.0,
                 batch_lanes: int = 1 << 16, memory_budget: int | None = DEFAULT_MEMORY_BUDGET,
                 cta_subset: bool = False, max_ctas: int | None = None):
        self.prog, self.launch, self.gmem = prog, launch, gmem
        self.cta_subset = cta_subset
        self.max_ctas = max_ctas
        if max_ctas is not None and max_ctas < 1:
            raise ValueError(f"max_ctas must be at least 1, got {max_ctas}")
        self.race = race
        self.elect_highest = False  # elect.sync elects the highest active lane (run_kernel)
        # the race check's compiled (numba) or numpy functions; raises _hbkern.BackendError
        # when numba is the backend and cannot be imported (never a silent fallback)
        self._hk = _hbkern.kernels() if race else None
        self.T = launch.threads
        self.n_ctas = launch.grid[0] * launch.grid[1] * launch.grid[2]
        self.race_ctas = 0
        self.time_limit = time_limit_s
        # clusters (emulator.cluster): every lane's clock has T + ASYNC_UNITS columns per CTA of its
        # cluster; the CTAs of one cluster always run in one batch
        self._launch_error = None
        try:
            self.cdims = _cluster.cluster_dims(prog, launch)
        except _Fault as f:
            self._launch_error, self.cdims = f.message, (1, 1, 1)
        self.C = self.cdims[0] * self.cdims[1] * self.cdims[2]
        self.explicit_cluster = (launch.cluster is not None or
                                 prog.entry.directive("reqnctapercluster") is not None or
                                 prog.entry.directive("explicitcluster") is not None)
        if self._launch_error is None:
            self.cl_of, self.rk_of, self.cl_members = _cluster.cluster_maps(launch.grid,
                                                                            self.cdims)
        else:
            self.cl_of = np.arange(self.n_ctas, dtype=np.int64)
            self.rk_of = np.zeros(self.n_ctas, np.int64)
            self.cl_members = self.cl_of[:, None]
        self.W = self.C * (self.T + ASYNC_UNITS)  # per CTA: T threads, then its async units
        self.batch_ctas = max(1, batch_lanes // self.T)
        if race:
            # every CTA is race-checked: the vector-clock budget bounds the CTAs of one batch
            # (a race placed only in CTAs beyond a launch-wide budget must not escape)
            self.batch_ctas = max(1, min(self.batch_ctas,
                                         race_budget // max(1, self.T * self.W)))
            self.race_ctas = self.n_ctas
        self.smem_bytes = max(prog.static_shared, 0)
        ext = [o for o, s in prog.shared_vars.values() if s is None]
        if ext:
            self.smem_bytes = max(self.smem_bytes, ext[0] + launch.dynamic_smem)
        # memory of one CTA's state: shared bytes, local bytes and registers (8 B per register
        # name the program uses, per thread, times 3 for numpy temporaries); the batch is cut
        # so that it fits half the budget, and a single CTA over the budget is reported
        names = {t for ins in prog.insts for op in ins.operands
                 for t in _REG_NAME.findall(op.text)}
        self.cta_state_bytes = (self.smem_bytes + self.T * prog.local_bytes +
                                self.T * len(names) * 8 * 3)
        self._too_big = None
        if memory_budget is not None:
            if self.cta_state_bytes > memory_budget:
                self._too_big = (f"emulation not started: one CTA's state "
                                 f"({self.cta_state_bytes / 2**20:.0f} MiB: "
                                 f"{self.smem_bytes} B shared, {len(names)} registers x "
                                 f"{self.T} threads) exceeds the memory budget of "
                                 f"{memory_budget / 2**20:.0f} MiB")
            self.batch_ctas = max(1, min(self.batch_ctas,
                                         (memory_budget // 2) // max(1, self.cta_state_bytes)))
        self.batch_ctas = max(self.C, self.batch_ctas // self.C * self.C)
        self.findings: dict[tuple, Finding] = {}
        self.outcome = RunOutcome(race_ctas=self.race_ctas,
                                  hb_backend=self._hk.name if race else "")
        self.memory_budget = memory_budget
        # global flag bytes (emulator.flags): kept from one batch of CTAs to the next, so that
        # a later batch's acquire of an earlier batch's release is ordered
        self.gflag_vc: dict[tuple[str, int], dict] = {}
        self._later_ctas = 0  # CTAs of the grid after the running batch (Machine.run)
        self._gshadow = (Shadow(gmem.total, budget=memory_budget, what="global") if race
                         else None)
        self._gstarts = np.cumsum([0] + [d.size for d in gmem.data[:-1]]).astype(np.int64)
        self._handlers: dict[str, Callable] = {}
        self._compiled: list[Callable | None] = [None] * len(prog.insts)
        self._types: list[tuple[list[str], list[str]]] = [_parts(i) for i in prog.insts]
        self._typ_memo: dict[int, str] = {}  # pc -> its one type, once ops._typ accepted it

    # ------------------------------------------------------------------ driver
    def run(self) -> RunOutcome:
        """Execute every CTA (in batches) and return the outcome (never raises for a candidate
        bug: faults, deadlocks and the time limit become the status)."""
        if self._too_big is not None:
            self.outcome.status, self.outcome.message = "memory", self._too_big
            return self.outcome
        if self._launch_error is not None:
            self.outcome.status, self.outcome.message = "fault", self._launch_error
            return self.outcome
        t0 = time.perf_counter()
        self._t0_ns = time.time_ns()
        self._deadline = t0 + self.time_limit
        C = self.C
        if C > 1:  # whole clusters, in representative order of the cluster grid
            cg = tuple(g // d for g, d in zip(self.launch.grid, self.cdims))
            corder = representative_order(cg) if (
                self.cta_subset or self.max_ctas is not None) else np.arange(
                self.n_ctas // C, dtype=np.int64)
            order = _cluster.cluster_order(corder, self.cl_members)
        else:
            order = representative_order(self.launch.grid) if (
                self.cta_subset or self.max_ctas is not None) else np.arange(
                self.n_ctas, dtype=np.int64)
        with np.errstate(all="ignore"):
            try:
                i = 0
                # with a subset allowed, a first smaller batch measures the cost per CTA when
                # the grid is large (every batch costs the same steps: small grids run in one)
                size = self.batch_ctas
                if self.cta_subset and (self.n_ctas > self.batch_ctas or self.n_ctas >= 32):
                    size = min(self.batch_ctas, 2)
                size = max(C, size // C * C)
                limit_n = self.n_ctas if self.max_ctas is None else min(self.n_ctas,
                                                                            self.max_ctas)
                limit_n = -(-limit_n // C) * C
                costs: list[tuple[int, float]] = []  # (CTAs, seconds) of each batch
                while i < limit_n:
                    ids = order[i:min(i + size, limit_n)]
                    tb = time.perf_counter()
                    snap = self._written_snapshot() if (self.cta_subset and i) else None
                    self._later_ctas = self.n_ctas - (i + int(ids.size))
                    try:
                        self._run_batch(ids)
                    except _Fault as f:
                        if f.kind != "timeout" or snap is None:
                            raise
                        # the deadline fell inside a batch after complete ones: drop this
                        # batch's CTAs (their writes are not compared) and report the subset
                        self._written_restore(snap)
                        per = _per_cta(costs, self.n_ctas, self.batch_ctas)
                        self._stop_subset(order[:i], per, cut=int(ids.size))
                        break
                    costs.append((int(ids.size), time.perf_counter() - tb))
                    i += ids.size
                    if self.outcome.status != "ok":
                        break
                    if i >= limit_n:
                        if i < self.n_ctas:
                            self._stop_subset(order[:i], None)
                        break
                    size = self.batch_ctas
                    if self.cta_subset:
                        left = self._deadline - time.perf_counter()
                        size = _next_batch(costs, self.n_ctas - i, self.batch_ctas, left)
                        size = size // C * C  # whole clusters
                        if size < 1:
                            self._stop_subset(
                                order[:i], _per_cta(costs, self.n_ctas, self.batch_ctas))
                            break
            except _Fault as f:
                self.outcome.status, self.outcome.message = f.kind, f.message
            except ShadowBudgetExceeded as e:
                self.outcome.status = "memory"
                self.outcome.message = (
                    f"emulation stopped: {e} (the kernel touched "
                    f"{e.needed // (Shadow.PAGE * SHADOW_BYTES_PER_BYTE)} pages of 4 KiB); "
                    f"emulate a smaller size, or without race analysis")
        if self.outcome.cta_ids is None:
            self.outcome.ctas_run = self.n_ctas if self.outcome.status == "ok" else 0
        self.outcome.findings = sorted(self.findings.values(), key=lambda f: f.sort_key())
        return self.outcome

    def _written_snapshot(self) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
        """Copies of the global written/atomic marks (None when not tracking)."""
        if self.gmem.written is None:
            return None
        return [w.copy() for w in self.gmem.written], [a.copy() for a in self.gmem.atomic]

    def _written_restore(self, snap) -> None:
        if snap is not None:
            self.gmem.written, self.gmem.atomic = snap

    def _stop_subset(self, ran: np.ndarray, per_cta_s: float | None, cut: int = 0) -> None:
        """Stop after the CTAs ``ran`` (complete): the outcome covers only them. ``per_cta_s``:
        the measured cost that made the grid too slow (None: the CTA budget ``max_ctas``);
        ``cut``: CTAs of a batch the deadline interrupted (dropped, not compared)."""
        n = self.n_ctas
        self.outcome.cta_ids = np.sort(ran).tolist()
        self.outcome.ctas_run = int(ran.size)
        why = (f"the CTA budget is {self.max_ctas}" if per_cta_s is None else
               f"the full grid would take about {per_cta_s * n:.0f} s ({per_cta_s:.2f} s per "
               f"CTA), over the {self.time_limit:.0f} s limit")
        if cut:
            why += (f"; the limit was reached inside a batch of {cut} further CTAs, which were "
                    f"dropped (their writes are not compared)")
        self.outcome.subset_reason = (
            f"{ran.size} of {n} CTAs emulated ({_ranges(self.outcome.cta_ids)}): {why}; the "
            f"CTAs were taken in representative order (the grid's corners - first and last "
            f"tile along each axis, where bounds masks act - then CTAs spread evenly over the "
            f"grid)")

    def _run_batch(self, ids: np.ndarray) -> None:
        T = self.T
        ids = np.asarray(ids, dtype=np.int64)
        n = ids.size * T
        self.N = n
        self.batch_ids = ids  # global CTA id of each batch-local CTA
        if getattr(self, "_batch_pos", None) is None:
            self._batch_pos = np.full(self.n_ctas, -1, np.int64)
        else:
            self._batch_pos[self._batch_pos >= 0] = -1
        self._batch_pos[ids] = np.arange(ids.size)  # global CTA id -> batch-local CTA, or -1
        lane = np.arange(n, dtype=np.int64)
        self.cta_local = lane // T
        cta = ids[self.cta_local]
        gx, gy, _ = self.launch.grid
        self.ctaid = (cta % gx, (cta // gx) % gy, cta // (gx * gy))
        self.tid = lane % T
        self.vcol = self.rk_of[cta] * (T + ASYNC_UNITS) + self.tid  # each lane's clock column
        # each batch CTA's first async-unit column (unit u is acol + u, registry.ASYNC_UNITS)
        self.acol = self.rk_of[ids] * (T + ASYNC_UNITS) + T
        self.laneid = self.tid % 32
        self.glane = cta * T + self.tid  # global lane id (for findings and the global shadow)
        self.regs: dict[str, np.ndarray] = {}
        self.pc = np.zeros(n, dtype=np.int64)
        self.done = np.zeros(n, dtype=np.bool_)
        self.blocked = np.zeros(n, dtype=np.bool_)
        self.block_kind = np.zeros(n, dtype=np.int8)  # 1 barrier, 2 mbarrier, 3 cluster, 4 warp,
        # 5 CTA-pair collective (emulator.cta_pair), SPIN_KIND a spin on memory (spin_check)
        self.block_id = np.zeros(n, dtype=np.int64)
        ncta = ids.size
        # shared and local memory start undefined on a GPU: fill them with a garbage pattern so
        # a kernel that reads them before writing (e.g. an accumulator never zeroed) fails here
        self.shared = _garbage((ncta, max(self.smem_bytes, 1)))
        self.local = (_garbage((n, self.prog.local_bytes)) if self.prog.local_bytes else None)
        self.bar_count = np.zeros((ncta, 16), dtype=np.int64)
        self.bar_expect = np.zeros((ncta, 16), dtype=np.int64)
        # race tracking: every lane of the batch (the batch size is bounded by the budget)
        tr_ctas = ncta if self.race else 0
        self.ntr = tr_ctas * T
        # per tracked lane (emulator.flags), per scope class 1 .cta / 2 .cluster / 3 .gpu: the clocks at the
        # lane's last release fence of that scope or wider, and which lanes executed one
        self.frel_vc: dict[int, np.ndarray] = {}
        self.frel_set: dict[int, np.ndarray] = {}
        # what a lane's .relaxed flag reads observed of other CTAs' releases: acquired by its
        # next acquire fence of .cluster scope or wider only (emulator.flags.on_access)
        self.relaxed_wide_vc: np.ndarray | None = None
        # what a tracked lane knows of other clusters' threads: {lane: {cluster: clock over
        # that cluster's columns}} (acquired at .gpu scope: emulator.flags), what its .relaxed
        # reads observed of them until its next .gpu acquire fence, and what CTA barriers
        # being arrived at carry of them {(batch CTA, barrier id): {cluster: clock}}
        self.xvc: dict[int, dict[int, np.ndarray]] = {}
        self.xrel: dict[int, dict[int, np.ndarray]] = {}
        self.bar_x: dict[tuple[int, int], dict[int, np.ndarray]] = {}
        # ... and what it knew of them at its last cluster-scope release fence (what a
        # .relaxed mbarrier arrive publishes: emulator.cluster.release_fence)
        self.xfence: dict[int, dict[int, np.ndarray]] = {}
        # tcgen05 ordering through relaxed synchronisation (emulator.tcgen05_ext): a lane's
        # clock at its last tcgen05.fence::before_thread_sync (what its next .relaxed
        # mbarrier arrive releases to tcgen05 operations), the tcgen05-only releases its
        # waits observed, and what its last tcgen05.fence::after_thread_sync acquired for
        # its later tcgen05 operations; None until first used (and without traced lanes)
        self.tc_rel_vc: np.ndarray | None = None
        self.tc_pend_vc: np.ndarray | None = None
        self.tc_after_vc: np.ndarray | None = None
        self.bar_tc: dict[tuple[int, int], np.ndarray] = {}  # (CTA, barrier) -> tcgen05 release
        if self.ntr:
            # columns T .. T + 2 of a CTA's block of clocks are its async units
            self.vc = np.zeros((self.ntr, self.W), dtype=np.int32)
            self.vc[np.arange(self.ntr), self.vcol[:self.ntr]] = 1
            # what a lane's .relaxed mbarrier waits observed, acquired by its next acquire
            # fence (mbar_wait, acquire_fence); None until a relaxed wait succeeds
            self.relaxed_vc = None
            self.bar_vc = np.zeros((tr_ctas, 16, self.W), dtype=np.int32)
            self.sshadow = Shadow(tr_ctas * max(self.smem_bytes, 1), budget=self.memory_budget,
                                  what="shared")
        # per-batch memo of values an instruction computes from immediates and lane ids
        # alone (shfl source lanes): key (pc, N, ...) -> value
        self.op_cache: dict[tuple, object] = {}
        self.mbar: dict[tuple[int, int], dict] = {}
        # (space, flat shadow byte) -> {(writer CTA, wide scope): clock}: emulator.flags
        self.flag_vc: dict[tuple[str, int], dict] = {}  # shared bytes: this batch's
        # flat shared byte -> (writer, its clock, reading CTA) of a strong write a strong read
        # of another CTA observed (emulator.flags.observe; HB9 at the reader's exit)
        self.flag_obs: dict[int, tuple[int, int, int]] = {}
        # spin loops on memory (spin_check): writes to shared / global memory so far, and per
        # lane the (pc, address, write count) of its last strong load
        self.writes = 0
        self.spin_pc = np.full(n, -1, dtype=np.int64)
        self.spin_addr = np.zeros(n, dtype=np.int64)
        self.spin_writes = np.full(n, -1, dtype=np.int64)
        self.n_spinning = 0
        self.n_spin_lanes = 0  # spin_check calls so far: stores compare what they overwrite
        self.spin_forced = 0
        self.spin_forced_writes = -1
        self.mbar_ids: dict[tuple[int, int], int] = {}
        self.tmem: np.ndarray | None = None
        # TMEM columns allocated per batch CTA (tcgen05.alloc / dealloc, PTX ISA 9.1
        # §9.7.16.7.1: dealloc frees the columns for later allocations)
        self.tmem_used = np.zeros((ncta, 512), dtype=np.bool_)
        # CTAs whose allocation permit was relinquished (tcgen05.relinquish_alloc_permit)
        self.tmem_relinquished = np.zeros(ncta, dtype=np.bool_)
        self.cp_entries: list[dict] = []
        self.async_clk = np.zeros(ncta, dtype=np.int32)
        # per batch CTA and warpgroup: the epoch of its latest wgmma.commit_group (async unit
        # WGMMA_UNIT + warpgroup, registry.WGMMA_UNIT)
        self.wg_clk = np.zeros((ncta, WGMMA_UNITS), dtype=np.int32)
        # proxy fences per state space (ops.proxy_fence_spaces): per lane the count of its
        # fences that order shared (pfence) / global (gpfence) memory; per tracked lane its own
        # clock at each, and its clocks at the latest one (proxy_fence, proxy_unfenced)
        self.pfence = np.zeros(n, dtype=np.int32)
        self.pf_clk: list[list[int]] = [[] for _ in range(self.ntr)]
        self.pf_vc: np.ndarray | None = None
        self.gpfence = np.zeros(n, dtype=np.int32)
        self.gpf_clk: list[list[int]] = [[] for _ in range(self.ntr)]
        self.gpf_vc: np.ndarray | None = None
        self.wg_groups: dict[tuple[int, int], list[int]] = {}
        # wgmma registers in flight: register key -> per lane the commit-group number (1-based,
        # per thread) the mma_async belongs to, 0 when not in flight; wg_committed per lane
        self.wg_pending: dict[object, np.ndarray] = {}
        self.wg_a_keys: set[object] = set()  # registers used as a wgmma's register A operand
        # HB10: the wgmma operand registers (accumulator, register A) of the program, and per
        # register the lanes that accessed it with a non-wgmma instruction since their last
        # wgmma.fence (PTX ISA 9.1 §9.7.15.7.1)
        self.wg_operand_keys: frozenset = _wgmma_operand_keys(self.prog)
        self.wg_unfenced: dict[object, np.ndarray] = {}
        self.wg_fenced = np.zeros(n, dtype=np.bool_)  # lanes that executed a wgmma.fence
        # per operand register, per lane: how a wgmma.mma_async accessed it since the lane's last
        # wgmma.fence (0: not; -1: as register A; else a code of the shape it was an accumulator
        # of): only accumulator accesses by wgmma of the same shape are ordered without a fence
        self.wg_use: dict[object, np.ndarray] = {}
        self._exe_now: np.ndarray | None = None  # the executing lanes of the current handler
        self.wg_committed = np.zeros(n, dtype=np.int64)
        self.cp_committed = np.zeros(n, dtype=np.int64)
        self.clb = _cluster.ClusterBatch(self, ids)
        insts = self.prog.insts
        steps = 0
        # Converged fast path: when every live lane executed the last instruction and its
        # handler left control alone (returned non-True: no branch, barrier, wait or exit -
        # the handler contract of emulator.registry), the same lanes stand at the next
        # instruction, so the scheduler's min-PC search is skipped; when no lane is blocked
        # either, the program counters are set with one fill (exited lanes' counters are
        # never read).
        fast = False
        p, n_act, uniform, none_blocked = 0, 0, False, False
        active = self.done
        while True:
            if not fast:
                live = ~self.done & ~self.blocked
                if not live.any() and self.n_spinning:
                    live = self._spin_release()
                if not live.any():
                    if self.blocked.any():
                        if self.tmap_probe is not None and self.tmap_probe.resolve(self):
                            continue  # probe copies completed their phases (tmap_infer)
                        self._deadlock()
                    if self.tmap_probe is not None:
                        self.tmap_probe.resolve(self, every=True)
                    return
                p = int(self.pc[live].min())
                active = live & (self.pc == p)
                n_act = int(active.sum())
                uniform = n_act == int(live.sum())
                none_blocked = uniform and not self.blocked.any()
            if p >= len(insts):
                self.done |= active  # fell off the end: like ret
                fast = False
                continue
            steps += 1
            if steps & 1023 == 0 and time.perf_counter() > self._deadline:
                raise _Fault("timeout", f"emulation exceeded {self.time_limit:.0f} s "
                                        f"(at {self.prog.where(p)})")
            self.outcome.steps += 1
            self.outcome.lane_insts += n_act
            fn = self._compiled[p]
            if fn is None:
                fn = self._compile(p)
            try:
                took_control = fn(p, active)
            except MemoryFault as e:
                raise _Fault("fault", f"{e} at {self.prog.where(p)}") from None
            if took_control:
                fast = False
                continue
            if none_blocked:
                self.pc.fill(p + 1)
            else:
                self.pc[active] = p + 1
            fast = uniform
            p += 1

    # ------------------------------------------------------------------ compile
    def _compile(self, p: int) -> Callable:
        ins = self.prog.insts[p]
        base = ins.base
        h = _HANDLERS.get(base)
        if h is None:
            raise self.prog.unsupported(p)
        guard = ins.predicate
        neg = ins.negated

        def run(pc: int, active: np.ndarray, h=h, ins=ins) -> bool:
            # True when the handler set the lanes' program counters itself; otherwise the
            # driver advances every active lane to pc + 1
            if guard is not None:
                g = self.reg_bits(guard, pc)
                exe = active & (~g if neg else g)
            else:
                exe = active
            self._exe_now = exe  # operand reads of the handler are by these lanes only
            return h(self, ins, pc, exe, active) is True

        self._compiled[p] = run
        return run

    # ------------------------------------------------------------------ registers
    def _info(self, name: str, pc: int):
        info = self.prog.envs[pc].lookup(name)
        if info is None:
            raise self.prog.unsupported(pc, f"undeclared register '{name}'")
        return info

    def reg_bits(self, name: str, pc: int) -> np.ndarray:
        """Raw storage of register ``name`` (all lanes)."""
        info = self._info(name, pc)
        arr = self.regs.get(info.key)
        if arr is None:
            # a register read before any write holds an undefined value (PTX ISA 9.1 §5.1.1):
            # garbage, so a kernel relying on it being 0 does not pass emulation
            st = np.dtype(info.storage)
            if st == np.bool_:
                arr = (_garbage((1, self.N)).reshape(-1) & 1).astype(np.bool_)
            else:
                arr = _garbage((1, self.N * st.itemsize)).reshape(-1).view(st).copy()
            self.regs[info.key] = arr
        return arr

    def _special(self, name: str, pc: int) -> np.ndarray | None:
        n = name[1:]
        T = self.T
        g = self.launch.grid
        axis = {"x": 0, "y": 1, "z": 2}
        if "." in n:
            head, ax = n.split(".", 1)
            if ax in axis:
                a = axis[ax]
                if head == "tid":
                    return (self.tid if a == 0 else np.zeros(self.N, np.int64)).astype(np.uint32)
                if head == "ntid":
                    return np.full(self.N, T if a == 0 else 1, dtype=np.uint32)
                if head == "ctaid":
                    return self.ctaid[a].astype(np.uint32)
                if head == "nctaid":
                    return np.full(self.N, g[a], dtype=np.uint32)
                sp = _cluster.special(self, head, a)
                if sp is not None:
                    return sp
        table = {
            "laneid": lambda: self.laneid.astype(np.uint32),
            "warpid": lambda: (self.tid // 32).astype(np.uint32),
            "nwarpid": lambda: np.full(self.N, (T + 31) // 32, np.uint32),
            # hardware- and timing-dependent values differ between CTAs and warps (and are
            # not 0): a kernel that only works on one SM or at one time must not pass emulation
            "smid": lambda: (self._scramble(1) % np.uint64(132)).astype(np.uint32),
            "nsmid": lambda: np.full(self.N, 132, np.uint32),
            "gridid": lambda: np.full(self.N, 1, np.uint64),
            "clock": lambda: self._clock().astype(np.uint32),
            "clock_hi": lambda: (self._clock() >> np.uint64(32)).astype(np.uint32),
            "clock64": lambda: self._clock(),
            "globaltimer": lambda: self._timer(),
            "globaltimer_lo": lambda: self._timer().astype(np.uint32),
            "globaltimer_hi": lambda: (self._timer() >> np.uint64(32)).astype(np.uint32),
            "cluster_ctarank": lambda: _cluster.special_flat(self, "cluster_ctarank"),
            "cluster_nctarank": lambda: _cluster.special_flat(self, "cluster_nctarank"),
            "is_explicit_cluster": lambda: _cluster.special_flat(self, "is_explicit_cluster"),
            "dynamic_smem_size": lambda: np.full(self.N, self.launch.dynamic_smem, np.uint32),
            "total_smem_size": lambda: np.full(self.N, self.smem_bytes, np.uint32),
            "lanemask_eq": lambda: (np.uint32(1) << self.laneid.astype(np.uint32)),
            "lanemask_lt": lambda: ((np.uint64(1) << self.laneid.astype(np.uint64)) - np.uint64(1)
                                    ).astype(np.uint32),
            "lanemask_le": lambda: ((np.uint64(2) << self.laneid.astype(np.uint64)) - np.uint64(1)
                                    ).astype(np.uint32),
            "lanemask_gt": lambda: (~((np.uint64(2) << self.laneid.astype(np.uint64)) -
                                      np.uint64(1))).astype(np.uint32),
            "lanemask_ge": lambda: (~((np.uint64(1) << self.laneid.astype(np.uint64)) -
                                      np.uint64(1))).astype(np.uint32),
        }
        f = table.get(n)
        return f() if f else None

    def _wg_touch(self, name: str, pc: int, exe: np.ndarray | None, what: str) -> None:
        """HB6: a non-wgmma instruction touches a register of an ``mma_async`` its thread has not
        retired with ``wgmma.wait_group`` (PTX ISA 9.1 §9.7.15.7.3: accessing the accumulator
        or A registers of an in-flight wgmma is undefined; the emulator computes wgmma at issue,
        so only this check sees it)."""
        if self.prog.insts[pc].base == "wgmma":
            return
        info = self._info(name, pc)
        pend = self.wg_pending.get(info.key)
        if pend is None:
            return
        lanes = exe if exe is not None else self._reading_lanes(pc)
        hit = lanes & (pend > 0)
        if not hit.any():
            return
        key = ("HB6", pc)
        if key in self.findings:
            return
        ln = int(np.flatnonzero(hit)[0])
        ins = self.prog.insts[pc]
        # an accumulator touched early is an error (its value is undefined); a register-A operand
        # rewritten early is a warning: Triton 3.6 emits that for mamba2_chunk_state on sm_90a
        # (the next iteration's A fragments are converted while three groups are in flight) and
        # ptxas orders it, the kernel being correct on an H200 (campaign of 2026-12-01)
        severity = "warning" if info.key in self.wg_a_keys else "error"
        self.findings[key] = Finding(
            rule="HB6", severity=severity, file=self.prog.filename, line=ins.line, col=ins.col,
            message=(f"'{ins.opcode}' {what} '{name}' of a wgmma.mma_async still in flight for "
                     f"{self._who(int(self.glane[ln]))} ({int(hit.sum())} threads)"),
            notes=[Note(message="retire its group first: 'wgmma.commit_group' then "
                                "'wgmma.wait_group.sync.aligned N' with N small enough")])

    def _wg_access(self, name: str, key: object, pc: int, exe: np.ndarray | None,
                   what: str) -> None:
        """The wgmma register checks of one access of register ``name`` (``key``) at ``pc``
        (``exe``: a write's lanes, None: the reading lanes): HB6 while a wgmma holds it in
        flight, HB10's note that it needs a ``wgmma.fence`` before a wgmma uses it. Callers test
        ``wg_pending`` / ``wg_operand_keys`` first (the register hot path)."""
        if self.wg_pending:
            self._wg_touch(name, pc, exe, what)
        if key in self.wg_operand_keys:
            self._wg_unfence(key, pc, exe)

    def _reading_lanes(self, pc: int) -> np.ndarray:
        """The lanes whose operand reads at ``pc`` happen: those executing the current handler
        (an instruction whose guard predicate is false accesses no register, PTX ISA 9.1
        §9.3)."""
        lanes = ~self.done & ~self.blocked & (self.pc == pc)
        return lanes & self._exe_now if self._exe_now is not None else lanes

    def tmem_first_fit(self, c: int, n: int) -> int:
        """The first column of ``n`` free TMEM columns of batch CTA ``c`` at a multiple of 32
        (allocations are whole 32-column granules, PTX ISA 9.1 §9.7.16.7.1), or -1."""
        used = self.tmem_used[c]
        for base in range(0, 512 - n + 1, 32):
            if not used[base:base + n].any():
                return base
        return -1

    def _wg_unfence(self, key: object, pc: int, exe: np.ndarray | None) -> None:
        """Note a non-wgmma access of wgmma operand register ``key`` by the lanes at ``pc``
        (``exe``: a write's lanes): they need a ``wgmma.fence`` before a wgmma uses it (HB10)."""
        if self.prog.insts[pc].base == "wgmma":
            return
        lanes = exe if exe is not None else self._reading_lanes(pc)
        arr = self.wg_unfenced.get(key)
        if arr is None:
            arr = self.wg_unfenced[key] = np.zeros(self.N, np.bool_)
        arr |= lanes

    def wg_fence_check(self, pc: int, exe: np.ndarray, keys: list[tuple[str, object]],
                       shape: int = 0, n_acc: int | None = None) -> None:
        """HB10 (error): ``wgmma.mma_async`` at ``pc`` takes, as its accumulator or register-A
        operand, a register that an executing thread accessed with a non-wgmma instruction
        after its last ``wgmma.fence`` (PTX ISA 9.1 §9.7.15.7.1: wgmma.fence is required
        between a register access and a wgmma.mma_async that accesses the same registers;
        only accumulator accesses by wgmma.mma_async of the same shape are ordered without it).
        ``keys``: (register name, key) of its operands. Also HB10: a thread's first
        wgmma.mma_async with no wgmma.fence before it (the same section: the fence is required
        before the first wgmma.mma_async of a warpgroup)."""
        first = exe & ~self.wg_fenced
        if first.any():
            self._hb10(pc, first, "is the first wgmma.mma_async of {who}, which executed no "
                                  "wgmma.fence before it", "before the first wgmma.mma_async")
            return
        n_acc = len(keys) if n_acc is None else n_acc
        for j, (name, key) in enumerate(keys):
            arr = self.wg_unfenced.get(key)
            use = self.wg_use.get(key)
            hit = arr & exe if arr is not None else np.zeros(self.N, np.bool_)
            by_wg = None
            if use is not None:
                # another wgmma.mma_async accessed it since the fence: only as the accumulator
                # of one of the same shape is it ordered (an A operand read while a wgmma
                # writes it as accumulator, or a different shape's fragment, is not)
                by_wg = exe & (use != 0) & ((use != shape) if j < n_acc else (use > 0))
                hit = hit | by_wg
            if not hit.any():
                continue
            how = ("a non-wgmma instruction" if by_wg is None or not (by_wg & hit).any() else
                   "another wgmma.mma_async (a different shape, or the other of accumulator "
                   "and register A)")
            self._hb10(pc, hit, f"uses register '{name}', which {{who}} accessed with {how} "
                                f"after its last wgmma.fence",
                       "between the register access and the wgmma.mma_async")
            return

    def _hb10(self, pc: int, lanes: np.ndarray, what: str, where: str) -> None:
        """Record HB10 at ``pc`` once: ``what`` (with ``{who}``: the first of ``lanes``) and
        where the missing ``wgmma.fence`` goes."""
        if ("HB10", pc) in self.findings:
            return
        ins = self.prog.insts[pc]
        who = self._who(int(self.glane[int(np.flatnonzero(lanes)[0])]))
        self.findings[("HB10", pc)] = Finding(
            rule="HB10", severity="error", file=self.prog.filename, line=ins.line, col=ins.col,
            message=f"'{ins.opcode}' {what.format(who=who)} ({int(lanes.sum())} threads)",
            notes=[Note(message=f"missing synchronisation: 'wgmma.fence.sync.aligned' {where}")])

    def wg_fence(self, exe: np.ndarray) -> None:
        """``wgmma.fence`` by ``exe``: their earlier register accesses are ordered before any
        later wgmma.mma_async (HB10)."""
        self.wg_fenced |= exe
        for arr in self.wg_unfenced.values():
            arr[exe] = False
        for arr in self.wg_use.values():
            arr[exe] = 0

    def wg_used(self, exe: np.ndarray, keys: list[object], shape: int, n_acc: int) -> None:
        """Note the operand registers of a ``wgmma.mma_async`` executed by ``exe`` (the first
        ``n_acc`` its accumulator, of shape code ``shape``; the rest register A)."""
        for j, key in enumerate(keys):
            arr = self.wg_use.get(key)
            if arr is None:
                arr = self.wg_use[key] = np.zeros(self.N, np.int64)
            if j < n_acc:
                arr[exe] = shape
            else:
                arr[exe & (arr == 0)] = -1

    def _scramble(self, salt: int) -> np.ndarray:
        """A per-(CTA, warp) pseudo-random uint64 (multiplicative hash of the global warp id),
        for values the hardware does not fix: %smid, %clock, %globaltimer."""
        w = (self.glane // 32).astype(np.uint64) + np.uint64(salt)
        return (w * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)

    def _clock(self) -> np.ndarray:
        """Cycle counter: a per-warp start offset plus the steps executed so far."""
        return (self._scramble(2) & np.uint64((1 << 40) - 1)) + np.uint64(self.outcome.steps)

    def _timer(self) -> np.ndarray:
        """%globaltimer: nanoseconds since the Unix epoch (as on a GPU, PTX ISA 9.1 §10.16),
        from the launch's wall-clock start, a per-warp skew (< 1 ms) and the steps so far."""
        return (np.uint64(self._t0_ns) + (self._scramble(3) % np.uint64(1_000_000)) +
                np.uint64(self.outcome.steps * 100))

    def read(self, op: Operand, t: str, pc: int) -> np.ndarray:
        """Value of operand ``op`` viewed as PTX type ``t`` (array over lanes or 0-d)."""
        dt = NP[t]
        kind = op.kind
        if kind == "symbol" and self.prog.envs[pc].lookup(op.name or op.text) is not None:
            op = Operand(kind="reg", text=op.text, line=op.line, col=op.col, name=op.name,
                         negated=op.negated)
            kind = "reg"
        if kind == "reg":
            name = op.name or op.text
            info = self.prog.envs[pc].lookup(name)
            if info is None and name.startswith("%"):
                sp = self._special(name, pc)
                if sp is None:
                    raise self.prog.unsupported(pc, f"register '{name}'")
                arr = sp
            else:
                # reg_bits, inlined for a register already written (the common case)
                arr = self.regs.get(info.key) if info is not None else None
                if arr is None:
                    arr = self.reg_bits(name, pc)
                if info is not None and (self.wg_pending or info.key in self.wg_operand_keys):
                    self._wg_access(name, info.key, pc, None, "reads")
            if dt == np.bool_:
                v = arr.astype(np.bool_) if arr.dtype != np.bool_ else arr
                return ~v if op.negated else v
            if arr.dtype == dt:
                return arr
            return _adapt(arr, dt)
        if kind == "imm":
            key = (op.text, op.value, t)
            v = _IMM_CACHE.get(key)
            if v is None:
                v = imm_bits(op.text, op.value, t)
                v.flags.writeable = False  # shared between executions: never updated in place
                _IMM_CACHE[key] = v
            return v
        if op.kind == "symbol":
            return np.array(self.symbol_addr(op.name or op.text, pc)).astype(np.uint64).astype(
                UINT[dt.itemsize] if dt.itemsize in UINT else np.uint64).view(dt)
        raise self.prog.unsupported(pc, f"operand '{op.text}'")

    def symbol_addr(self, name: str, pc: int) -> int:
        if name in self.prog.shared_vars:
            return self.prog.shared_vars[name][0]
        if name in self.prog.local_vars:
            return self.prog.local_vars[name][0]
        if name in self.launch.params:
            return _async_copy.param_address(self.launch, name)
        raise self.prog.unsupported(pc, f"address of symbol '{name}'")

    def write(self, op: Operand, value: np.ndarray, exe: np.ndarray, pc: int) -> None:
        """Store ``value`` (any dtype of the register's width) into register ``op`` for ``exe``."""
        if op.kind == "sink":
            return
        if op.kind != "reg" and not (op.kind == "symbol" and self.prog.envs[pc].lookup(
                op.name or op.text) is not None):
            raise self.prog.unsupported(pc, f"destination '{op.text}'")
        name = op.name or op.text
        info = self._info(name, pc)
        if self.wg_pending or info.key in self.wg_operand_keys:
            self._wg_access(name, info.key, pc, exe, "writes")
        st = info.storage
        v = np.asarray(value)
        if st == np.bool_:
            bits = v.astype(np.bool_)
        else:
            if v.dtype == np.bool_:
                v = v.astype(np.uint8)
            bits = v.view(UINT[v.dtype.itemsize]) if v.dtype.itemsize in UINT else v
            if bits.dtype != st:
                bits = bits.astype(st)
        if bits.shape != (self.N,):
            bits = _lanes(bits, self.N)
        if exe.all():
            self.regs[info.key] = bits.copy() if not bits.flags.writeable else bits
        else:
            old = self.regs.get(info.key)
            if old is None:
                old = self.reg_bits(name, pc)
            self.regs[info.key] = np.where(exe, bits, old)

    # ------------------------------------------------------------------ addresses
    def address(self, op: Operand, pc: int, t64: bool = True) -> np.ndarray:
        """Byte address of an ``[base+off]`` operand, int64 over lanes."""
        if op.kind != "address":
            raise self.prog.unsupported(pc, f"address operand '{op.text}'")
        b = op.base
        off = int(op.value or 0)
        if b is None:
            return np.full(self.N, off, dtype=np.int64)
        if b.kind == "symbol":
            return np.full(self.N, self.symbol_addr(b.name or b.text, pc) + off, dtype=np.int64)
        if b.kind == "imm":
            return np.full(self.N, int(b.value or 0) + off, dtype=np.int64)
        info = self.prog.envs[pc].lookup(b.name or b.text)
        if info is not None and (self.wg_pending or info.key in self.wg_operand_keys):
            # an address base is a register read too (HB6 / HB10, as in Machine.read)
            self._wg_access(b.name or b.text, info.key, pc, None, "reads")
        raw = self.reg_bits(b.name or b.text, pc) if info else self.read(b, "u32", pc)
        return raw.astype(np.uint64).view(np.int64) + off if raw.dtype == np.uint64 else \
            raw.astype(np.int64) + off

    # ------------------------------------------------------------------ memory access
    def mem_access(self, space: str, addr: np.ndarray, nbytes: int, exe: np.ndarray, pc: int,
                   data: np.ndarray | None = None, kind: str = "plain",
                   sync: tuple[str, int] | None = None, rmw: bool = False,
                   same: bool = False) -> np.ndarray | None:
        """Load (``data`` None) or store ``nbytes`` per executing lane; returns (k, nbytes) uint8
        for loads, in the order of ``np.flatnonzero(exe)``. ``sync`` (``emulator.flags.sync_of``:
        semantics and scope of a strong access) and ``rmw`` (the write half of an atomic) drive
        release / acquire through memory (:mod:`emulator.flags`); ``same``: the write stores the
        value the bytes hold (an ``atom.add 0``), which does not wake a spin on memory
        (:meth:`spin_check`)."""
        lanes = np.flatnonzero(exe)
        a = addr[lanes]
        if space == "generic":
            sh = (a >= SHARED_WINDOW) & (a < SHARED_WINDOW + (1 << 32))
            if sh.any() and not sh.all():
                out = np.empty((lanes.size, nbytes), dtype=np.uint8)
                for m, sp in ((sh, "shared::cluster"), (~sh, "global")):
                    e2 = np.zeros(self.N, np.bool_)
                    e2[lanes[m]] = True
                    ad = addr.copy()
                    if sp == "shared::cluster":
                        ad[lanes[m]] -= SHARED_WINDOW
                    r = self.mem_access(sp, ad, nbytes, e2, pc,
                                        None if data is None else data[m], kind, sync, rmw,
                                        same)
                    if r is not None:
                        out[m] = r
                return out if data is None else None
            if sh.all() and lanes.size:
                space, addr = "shared::cluster", addr - SHARED_WINDOW
                a = addr[lanes]
            else:
                space = "global"
        if lanes.size and (a % min(nbytes, 16)).any():
            bad = int(a[(a % min(nbytes, 16)) != 0][0])
            raise _Fault("fault", f"misaligned {nbytes} B {space} access at 0x{bad:x} "
                                  f"({self.prog.where(pc)})")
        if space in ("shared", "shared::cta", "shared::cluster"):
            idx = self._shared_idx(a, lanes, nbytes, pc, cluster=space == "shared::cluster")
            view = self.shared.reshape(-1)
            if self.ntr:
                self._hb_check(self.sshadow, "shared", lanes, idx, pc, data, kind)
                if sync is not None or (data is not None and self.flag_vc):
                    _flags.on_access(self, "shared", lanes, idx[:, 0], nbytes,
                                     data is not None, sync, rmw)
            if data is None:
                return view[idx]
            if self.n_spin_lanes and not same:  # a store of what is there wakes no spin
                same = bool((view[idx] == data).all())
            view[idx] = data
            if not same:
                self.wrote()
            return None
        if space == "local":
            if self.local is None or ((a < 0) | (a + nbytes > self.local.shape[1])).any():
                raise _Fault("fault", f"local address outside the thread's local memory "
                                      f"({self.prog.where(pc)})")
            idx = a[:, None] + np.arange(nbytes)
            if data is None:
                return self.local[lanes[:, None], idx]
            self.local[lanes[:, None], idx] = data
            return None
        if space in ("global", "const"):
            if not lanes.size:
                return np.zeros((0, nbytes), np.uint8) if data is None else None
            # one translation serves the race check, the data and the written-byte marks
            reg, off = self.gmem.translate(a.astype(np.uint64), nbytes)
            if self.ntr and self._gshadow is not None:
                gidx = (self._gstarts[reg] + off)[:, None] + np.arange(nbytes)
                self._hb_check(self._gshadow, "global", lanes, gidx, pc, data, kind)
                if self.ntr and (sync is not None or (data is not None and self.gflag_vc)):
                    _flags.on_access(self, "global", lanes, gidx[:, 0], nbytes,
                                     data is not None, sync, rmw)
            if kind.startswith("atomic") and self.gmem.written is not None:
                self.gmem.mark_at(reg, off, nbytes, atomic=True)
            if data is None:
                return self.gmem.read_at(reg, off, nbytes)
            if self.n_spin_lanes and not same:
                same = bool((self.gmem.read_at(reg, off, nbytes) == data).all())
            self.gmem.write_at(reg, off, data)
            if not same:
                self.wrote()
            if self.gmem.written is not None:
                self.gmem.mark_at(reg, off, nbytes, atomic=False)
            return None
        raise self.prog.unsupported(pc, f"state space '.{space}'")

    def _shared_idx(self, a: np.ndarray, lanes: np.ndarray, nbytes: int, pc: int,
                    cluster: bool = False) -> np.ndarray:
        """Flat shared byte indices (k, nbytes); ``cluster``: ``a`` are shared::cluster
        addresses that may name a peer CTA (:mod:`emulator.cluster`)."""
        S = self.shared.shape[1]
        cl = self.cta_local[lanes]
        if cluster and lanes.size and (a >> _cluster.RANK_SHIFT).any():
            cl, a = self.clb.decode(self, cl, a, pc)
        if lanes.size and ((a < 0) | (a + nbytes > self.smem_bytes)).any():
            bad = int(a[(a < 0) | (a + nbytes > self.smem_bytes)][0])
            raise _Fault("fault", f"shared address 0x{bad:x} outside the CTA's "
                                  f"{self.smem_bytes} B of shared memory "
                                  f"({self.prog.where(pc)})")
        return (cl * S + a)[:, None] + np.arange(nbytes)

    # ------------------------------------------------------------------ cp.async (per thread)
    def async_issue(self, dst: np.ndarray, data: np.ndarray, lanes: np.ndarray, pc: int) -> None:
        """Record a non-bulk ``cp.async`` of ``lanes``: the shared bytes are written when the
        issuing thread's ``cp.async.wait_group``/``wait_all`` covers its group (PTX ISA 9.1
        §9.7.9.25.3); until then any access to them races with the copy."""
        if not lanes.size:
            return
        a = dst[lanes]
        if (a % data.shape[1]).any():
            raise _Fault("fault", f"misaligned cp.async destination ({self.prog.where(pc)})")
        idx = self._shared_idx(a, lanes, data.shape[1], pc)
        if self.ntr:
            self._hb_check(self.sshadow, "shared", lanes, idx, pc, data, "async_issue")
        self.cp_entries.append({"lanes": lanes, "idx": idx, "data": data, "pc": pc,
                                "grp": self.cp_committed[lanes].copy(),
                                "open": np.ones(lanes.size, np.bool_)})

    def async_commit(self, exe: np.ndarray) -> None:
        self.cp_committed[exe] += 1

    def async_wait_all_groups(self, exe: np.ndarray, pc: int) -> None:
        """Every ``cp.async`` of the lanes ``exe`` completes, committed or not
        (``cp.async.mbarrier.arrive`` tracks all prior copies of the thread)."""
        self.async_wait(exe, 0, pc, committed_only=False)

    def async_wait(self, exe: np.ndarray, n: int, pc: int, committed_only: bool = True) -> None:
        view = self.shared.reshape(-1)
        keep = []
        for e in self.cp_entries:
            ln = e["lanes"]
            due = e["open"] & exe[ln] & (
                (e["grp"] < self.cp_committed[ln] - n) if committed_only else True)
            if due.any():
                view[e["idx"][due]] = e["data"][due]
                if self.ntr:
                    self._hb_check(self.sshadow, "shared", ln[due], e["idx"][due], e["pc"],
                                   e["data"][due], "async_complete")
                e["open"] &= ~due
            if e["open"].any():
                keep.append(e)
        self.cp_entries = keep

    # ------------------------------------------------------------------ happens-before
    def _split(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(global CTA, clock column) of shadow lane ids; async units are
        ``NT + ASYNC_UNITS * cta + unit`` (column ``T + unit``)."""
        T, NT = self.T, self.n_ctas * self.T
        asy = ids >= NT
        cta = np.where(asy, (ids - NT) // ASYNC_UNITS, ids // T)
        col = np.where(asy, T + (ids - NT) % ASYNC_UNITS, ids % T)
        return cta, col.astype(np.int64)

    def async_read(self, lane: int | np.ndarray, flat_idx: np.ndarray, pc: int,
                   wgmma: bool = False) -> None:
        """Async-proxy reads of shared bytes (wgmma / tcgen05.mma operands) issued by ``lane``
        (one lane and ``flat_idx`` of any shape, or lanes (k,) and ``flat_idx`` (k, nbytes)):
        checked against earlier writes with each issuer's clocks, recorded as reads by its CTA's
        async unit at the epoch its next completion (commit) publishes - for ``wgmma``, the
        unit of the issuer's warpgroup and its next ``wgmma.commit_group``
        (``registry.WGMMA_UNIT``), else unit 0 and the next ``tcgen05.commit``."""
        lanes = np.atleast_1d(np.asarray(lane, dtype=np.int64))
        idx = flat_idx.reshape(lanes.size, -1)
        keep = lanes < self.ntr
        if not (self.ntr and keep.any()):
            return
        lanes, idx = lanes[keep], idx[keep]
        c = self.cta_local[lanes]
        if self._proxy_check(int(lanes[0]), idx.reshape(-1), pc, report=False):
            for r in range(lanes.size):  # report per issuing warpgroup, as each checks alone
                self._proxy_check(int(lanes[r]), idx[r], pc)
        base = self.n_ctas * self.T + ASYNC_UNITS * self.batch_ids[c]
        if wgmma:
            wg = self.tid[lanes] // 128
            rec_lane, rec_clk = base + WGMMA_UNIT + wg, self.wg_clk[c, wg] + 1
        else:
            rec_lane, rec_clk = base, self.async_clk[c] + 1
        self._hb_check(self.sshadow, "shared", lanes, idx, pc, None, "plain",
                       rec_lane=rec_lane, rec_clk=rec_clk)

    def _fences(self, space: str):
        """(count per lane, clocks per tracked lane, clocks at the latest) of the proxy fences
        that order ``space`` (``shared`` / ``global``) memory."""
        if space == "shared":
            return self.pfence, self.pf_clk, self.pf_vc
        return self.gpfence, self.gpf_clk, self.gpf_vc

    def proxy_fence(self, exe: np.ndarray, spaces: tuple[str, ...] = ("shared", "global")
                    ) -> None:
        """A ``fence.proxy.async{.space}`` by the lanes ``exe`` ordering ``spaces``: counted
        (``pfence`` / ``gpfence``) and, for tracked lanes, timestamped with the lane's own clock
        after a tick, so that only readers ordered after the fence itself (not merely after an
        earlier release of the writer) see it (:meth:`proxy_unfenced`)."""
        lanes = np.flatnonzero(exe[:self.ntr]) if self.ntr else np.zeros(0, np.int64)
        if lanes.size:
            self._tick(lanes)
        clk = self.vc[lanes, self.vcol[lanes]] if lanes.size else None
        for space in spaces:
            count, clks, vc = self._fences(space)
            count[exe] += 1
            if not lanes.size:
                continue
            for ln, c in zip(lanes.tolist(), clk.tolist()):
                clks[ln].append(int(c))
            if vc is None:
                vc = np.zeros_like(self.vc)
                if space == "shared":
                    self.pf_vc = vc
                else:
                    self.gpf_vc = vc
            vc[lanes] = self.vc[lanes]  # what each knew at its latest proxy fence

    def proxy_unfenced(self, readers: np.ndarray, wl: np.ndarray, w_pf: np.ndarray,
                       w_clk: np.ndarray, own_fence: bool = True, space: str = "shared"
                       ) -> tuple[np.ndarray, np.ndarray]:
        """HB4's test for bytes written through the generic proxy by global lanes ``wl`` (k,)
        (threads, not async units) when their writer's own clock was ``w_clk`` and it had
        executed ``w_pf`` proxy fences, read through the async proxy on behalf of the tracked
        lanes ``readers`` (the issuing thread; a wgmma's warpgroup).

        The PTX memory model needs a ``fence.proxy.async`` on the causality path from the
        generic write to the async-proxy access (PTX ISA 9.1 §8.9, proxy-preserved base
        causality order), in any thread. Two such fences are recognised: the writer's first
        fence after the write, when the readers are ordered after it; a fence of a reader that
        already knew of the write (the issuer fencing after the hand-off barrier, Triton 3.6's
        sm_100a code) - with ``own_fence``, only when the writer fenced its write too: the
        PTX ISA's recipe for async-proxy operands has the *writing* threads execute the proxy
        fence (§9.7.15 wgmma, §9.7.9.25 bulk copies; ptx_rules AP1), and a writer that never
        fences relies on another thread's fence (issue 18's "proxy fence in another thread
        than the writer", ThunderKittens' issuer-only fence) - an error by that recipe.
        ``own_fence`` False (a generic *read* before an async-proxy write, AP2): either
        fence. Returns ``(unfenced, late)`` (k,): no recognised fence, and of those the ones
        whose writer did fence since the write (the fence not ordered before the read).
        Writers of CTAs outside this batch: not judged. ``space``: the memory accessed (the
        fences counted are those ordering it)."""
        pfence, pf_clk, pf_vc = self._fences(space)
        T = self.T
        k = wl.size
        bad = np.zeros(k, np.bool_)
        late = np.zeros(k, np.bool_)
        if not self.ntr or not k or not readers.size:
            return bad, late
        wc, wt = np.divmod(wl, T)
        lc = self._batch_pos[wc]
        inb = lc >= 0
        loc = np.where(inb, lc * T + wt, 0)
        rc = int(self.batch_ids[int(self.cta_local[int(readers[0])])])
        same = self.cl_of[wc] == self.cl_of[rc]
        col = np.where(same, self.rk_of[wc] * (T + ASYNC_UNITS) + wt, 0)
        known = self.vc[readers].max(axis=0)
        ok = np.zeros(k, np.bool_)
        fenced = inb & (pfence[loc] > w_pf)
        if pf_vc is not None:  # (b) a reader's fence that knew of the write
            fk = pf_vc[readers].max(axis=0)
            ok = same & (fk[col] >= w_clk) & (fenced if own_fence else True)
        # (a) also across the CTAs of a cluster (a CTA pair's odd CTA fences its operand
        # writes before the cluster barrier; Lustig et al., "Mixed-proxy extensions for the
        # NVIDIA PTX memory consistency model", ISCA 2022, §5.4, put the fence in the CTA of
        # the async-proxy access for cross-CTA synchronisation: not enforced, no false alarm)
        todo = np.flatnonzero(~ok & fenced & same)
        if todo.size:  # (a) the writer's first fence since the write, ordered before the read
            pairs = {}
            for e in todo.tolist():
                pairs.setdefault((int(loc[e]), int(w_pf[e]), int(col[e])), []).append(e)
            for (ln, kk, cc), es in pairs.items():
                if ln < self.ntr and kk < len(pf_clk[ln]) and \
                        int(known[cc]) >= pf_clk[ln][kk]:
                    ok[es] = True
        # (c) a writer in another cluster that fenced since its write: its clock is not in the
        # reader's cluster clocks (cross-cluster knowledge travels as flags' release/acquire,
        # emulator.flags), so whether the fence precedes the release is not decided here; the
        # write itself must still be ordered before the read (HB1). A split-K fix-up's
        # workspace: st.global, fence.proxy.async.global, bar.sync, release; the reader
        # acquires and bulk-copies it (red team round 16)
        ok |= fenced & ~same
        bad = inb & ~ok
        late = bad & fenced
        return bad, late

    def _proxy_check(self, lane: int, idx: np.ndarray, pc: int, report: bool = True) -> bool:
        """HB4 (warning): shared bytes written through the generic proxy (st.shared, cp.async)
        read by the async proxy while their writer has executed no ``fence.proxy.async`` since
        the write (PTX ISA 9.1 §8.6 proxies, §9.7.13.4 membar/fence; ptx_rules AP1/W5/TM8).
        Returns whether any byte is stale; ``report`` False only tells."""
        sh = self.sshadow
        idx = np.ascontiguousarray(sh.slots(idx).reshape(-1))
        NT = self.n_ctas * self.T
        self.note_fence_use(idx)
        wl = sh.w_lane[idx]
        real = (wl >= 0) & (wl < NT)
        if not real.any() or lane >= self.ntr:
            return False
        # the readers: the issuing lane, or for a wgmma its warpgroup (the collective issue
        # follows each of its threads' own fences)
        c = int(self.cta_local[lane])
        grp = np.flatnonzero((self.cta_local[:self.ntr] == c) &
                             (self.tid[:self.ntr] // 128 == self.tid[lane] // 128)) \
            if self.prog.insts[pc].base == "wgmma" else np.array([lane])
        ri = np.flatnonzero(real)
        bad_r, late_r = self.proxy_unfenced(grp, wl[ri], sh.w_pf[idx[ri]], sh.w_clk[idx[ri]])
        if not bad_r.any():
            return False
        bad = np.zeros(idx.shape, np.bool_)
        bad[ri] = bad_r
        j = int(np.flatnonzero(bad)[0])
        late = bool(late_r[np.flatnonzero(bad_r)[0]])
        if not report:
            return True
        if self.prog.insts[int(sh.w_pc[idx[j]])].base == "cp":
            # the first stale byte is cp.async-written (a warning): a stale byte a generic
            # store wrote (an error) must not hide behind it
            is_cp = self.__dict__.get("_is_cp")
            if is_cp is None:
                is_cp = self._is_cp = np.array([x.base == "cp" for x in self.prog.insts])
            wpcs = sh.w_pc[idx]
            gen = np.flatnonzero(bad & (wpcs >= 0) & ~is_cp[np.maximum(wpcs, 0)])
            if gen.size:
                j = int(gen[0])
                late = bool(late_r[np.searchsorted(ri, j)])
        wl_j = int(sh.w_lane[idx[j]])
        wpc = int(sh.w_pc[idx[j]])
        key = ("HB4", wpc)
        if key in self.findings:
            return True
        i1, i2 = self.prog.insts[wpc], self.prog.insts[pc]
        # an error for generic stores (st, stmatrix): the async proxy's read is undefined
        # without the fence (PTX ISA 9.1 §8.6); a warning for cp.async-fed operands, which
        # Triton 3.6 emits without it (the verifier keeps the same policy warning)
        self.findings[key] = Finding(
            rule="HB4", severity="warning" if i1.base == "cp" else "error",
            file=self.prog.filename, line=i2.line, col=i2.col,
            message=(f"'{i2.opcode}' reads shared memory through the async proxy that "
                     f"{self._who(wl_j)} wrote with '{i1.opcode}' (generic proxy) "
                     + ("and fenced, but neither that fence nor one of the issuing threads "
                        "lies between the write and this read" if late else
                        "with no 'fence.proxy.async' between the write and this read")),
            notes=[Note(message=f"generic-proxy write '{i1.opcode}'", line=i1.line, col=i1.col),
                   Note(message=_async_copy._HB4_FIX)])
        return True

    def note_fence_use(self, slots: np.ndarray) -> None:
        """With coverage (``pfence_log`` set by ``emulator.api``): the shared-shadow ``slots``
        are read by the async proxy and every generic-proxy writer among them has fenced since
        its write; a ``fence.proxy.async`` site that is the only site among the writer's fences
        since that write is added to ``pfence_used`` (removing that site would make the read
        an HB4; ``EmulationResult.wait_effects``)."""
        log = self.pfence_log
        if log is None:
            return
        sh = self.sshadow
        wl = sh.w_lane[slots]
        NT = self.n_ctas * self.T
        real = (wl >= 0) & (wl < NT)
        if not real.any():
            return
        pairs = np.unique(np.stack([wl[real], sh.w_pf[slots][real]]), axis=1)
        for g, pf in pairs.T.tolist():
            lc = int(self._batch_pos[g // self.T])
            if lc < 0:
                continue
            now = int(self.pfence[lc * self.T + g % self.T])
            sites = set(log.get(g, [])[pf:now])
            if len(sites) == 1:
                self.pfence_used.add(sites.pop())

    def async_complete_epoch(self, c: int) -> int:
        """Close the CTA's current async epoch (a commit); returns it."""
        self.async_clk[c] += 1
        return int(self.async_clk[c])

    def _hb_check(self, sh: Shadow, space: str, lanes: np.ndarray, idx: np.ndarray, pc: int,
                  data: np.ndarray | None, kind: str, rec_lane: int | np.ndarray | None = None,
                  rec_clk: int | np.ndarray | None = None) -> None:
        """Check and record accesses of ``lanes`` (k,) to shadow bytes ``idx`` (k, nbytes);
        ``rec_lane``/``rec_clk`` record the access under another identity (an async unit)."""
        T = self.T
        if not lanes.size:
            return
        tr = lanes < self.ntr
        every = bool(tr.all())
        if not every:
            if not tr.any():
                return
            lanes, idx = lanes[tr], idx[tr]
        gl = self.glane[lanes]  # global lane ids of the accessors
        k, nb = idx.shape
        I = sh.slots(idx.reshape(-1))  # record slots of the bytes (sparse shadow)
        write = data is not None
        # atomics and strong ld/st never race with each other, but they do race with weak
        # (plain) accesses of another thread that are not ordered with them
        strong = kind in ("atomic", "strong", "atomic_cta", "strong_cta")
        level = (1 if kind.endswith("_cta") else 2) if strong else 0
        hk = self._hk
        NT = self.n_ctas * T
        pfence = self.pfence if space == "shared" else self.gpfence  # the writer's count
        if hk.access is not None and kind != "async_complete":
            # one fused compiled pass: check and record when no byte is unordered; when one
            # is (code 1) nothing was recorded and the separate passes below name the race
            vals = (np.ascontiguousarray(data if every else data[tr],
                                         dtype=np.uint8).reshape(-1) if write else _NO_VALS)
            use_rec = rec_lane is not None
            rl_arr = (np.array(np.broadcast_to(rec_lane, (k,)), dtype=np.int64)
                      if use_rec else _NO_CLK)
            rc_arr = (np.array(np.broadcast_to(rec_clk, (k,)), dtype=np.int64)
                      if use_rec else _NO_CLK)
            code = hk.access(I, lanes, gl, nb, self.vc, self.vcol, sh.w_lane, sh.w_clk,
                             sh.w_pc, sh.w_val, sh.w_async, sh.w_atomic, sh.w_pf, sh.r_lane,
                             sh.r_clk, sh.r_pc, sh.r_atomic, vals, write, strong, level, pc, T,
                             NT, self.cl_of, self.rk_of, kind == "async_issue", pfence,
                             rl_arr, rc_arr, use_rec, write and not strong and k > 1)
            if code == 0:
                return
            if code == 2:  # recorded; a byte's lanes disagree (as the dup test below)
                G = np.repeat(gl, nb)
                dup = sh.w_val[I] != vals
                j = int(np.flatnonzero(dup)[0])
                other = np.flatnonzero((I == I[j]) & (vals != vals[j]))
                j2 = int(other[0]) if other.size else j
                a, b = sorted((int(G[j]), int(G[j2])))
                self._race(space, pc, a, "write", pc, b, "write", int(np.unique(I[dup]).size))
                return
        if kind == "async_complete":
            L = np.repeat(lanes, nb)
            sh.w_clk[I] = self.vc[L, self.vcol[L]]
            sh.w_async[I] = False
            sh.w_atomic[I] = 0
            sh.w_pf[I] = pfence[L]
            return
        n = I.size
        vals = (np.ascontiguousarray(data if every else data[tr], dtype=np.uint8).reshape(-1)
                if write else _NO_VALS)
        unord_w = np.zeros(n, np.bool_)
        unord_r = np.zeros(n, np.bool_)
        my_clk = np.empty(n, np.int32)
        # pass 1 (compiled): every byte against the shadow as it was before this step
        hk.check(I, lanes, gl, nb, self.vc, self.vcol, sh.w_lane, sh.w_clk, sh.w_pc,
                      sh.w_val, sh.w_async, sh.w_atomic, sh.r_lane, sh.r_clk, sh.r_atomic,
                      vals, write, strong, level, pc, T, NT, unord_w, unord_r, my_clk,
                      self.cl_of, self.rk_of)
        if self.xvc:  # ordered through what the accessor acquired of another cluster
            self._x_ordered(unord_w, lanes, gl, nb, sh.w_lane[I], sh.w_clk[I], sh.w_async[I])
            if write:
                self._x_ordered(unord_r, lanes, gl, nb, sh.r_lane[I], sh.r_clk[I], None)
        if unord_w.any():
            G = np.repeat(gl, nb)
            wl = sh.w_lane[I]
            if write and lanes.size > 1:
                # the recorded writer also writes this byte in this very instruction
                # instance (a duplicated layout: lanes 0 and 8 hold one element): its new
                # write follows its old one in program order, so whatever order the others
                # land in, the byte ends with this instance's value - the old write cannot
                # be the last one, and the two lanes' new writes are replicated stores
                cand = np.flatnonzero(unord_w)
                mine = I.astype(np.int64) * (1 << 24) + G
                theirs = I[cand].astype(np.int64) * (1 << 24) + wl[cand]
                unord_w[cand[np.isin(theirs, mine)]] = False
            if unord_w.any():
                j = int(np.flatnonzero(unord_w)[0])
                self._race(space, int(sh.w_pc[I[j]]), int(wl[j]), "write", pc, int(G[j]),
                           "write" if write else "read", int(unord_w.sum()))
        if write and unord_r.any():
            G = np.repeat(gl, nb)
            rl = sh.r_lane[I]
            j = int(np.flatnonzero(unord_r)[0])
            self._race(space, int(sh.r_pc[I[j]]), int(rl[j]), "read", pc, int(G[j]),
                       "write", int(unord_r.sum()))
        # pass 2 (compiled): record the accesses
        if write:
            dup = np.zeros(n, np.bool_)
            hk.record_write(I, lanes, gl, nb, my_clk, vals, pc, kind == "async_issue",
                                 level, pfence, sh.w_lane, sh.w_clk, sh.w_pc, sh.w_val,
                                 sh.w_async, sh.w_atomic, sh.w_pf, sh.r_lane, dup)
            # two lanes of this instruction storing different values to one byte: one value
            # survives per byte, so a byte whose lanes disagree has a lane that lost
            if not strong and k > 1 and dup.any():
                G = np.repeat(gl, nb)
                j = int(np.flatnonzero(dup)[0])
                other = np.flatnonzero((I == I[j]) & (vals != vals[j]))
                j2 = int(other[0]) if other.size else j
                a, b = sorted((int(G[j]), int(G[j2])))
                self._race(space, pc, a, "write", pc, b, "write", int(np.unique(I[dup]).size))
        else:
            use_rec = rec_lane is not None
            rl_arr = (np.array(np.broadcast_to(rec_lane, (k,)), dtype=np.int64)
                      if use_rec else gl)
            rc_arr = (np.array(np.broadcast_to(rec_clk, (k,)), dtype=np.int64)
                      if use_rec else _NO_CLK)
            hk.record_read(I, nb, rl_arr, rc_arr, my_clk, use_rec, pc, level, sh.r_lane,
                                sh.r_clk, sh.r_pc, sh.r_atomic)

    def _x_ordered(self, flagged: np.ndarray, lanes: np.ndarray, gl: np.ndarray, nb: int,
                   other: np.ndarray, clk: np.ndarray, asy: np.ndarray | None) -> None:
        """Clear the ``flagged`` (n,) bytes whose recorded accessor (``other`` global lane,
        its clock ``clk``; ``asy`` True: an async write still in flight, never ordered) is a
        thread or async unit of another cluster that the accessing lane knows of up to that
        clock (``Machine.xvc``: a release at ``.gpu`` scope it acquired)."""
        e = np.flatnonzero(flagged)
        if not e.size:
            return
        T, AU = self.T, ASYNC_UNITS
        NT = self.n_ctas * T
        acc = lanes[e // nb]
        for ln in np.unique(acc).tolist():
            x = self.xvc.get(ln)
            if x is None:
                continue
            ee = e[acc == ln]
            wl = other[ee].astype(np.int64)
            unit = wl >= NT
            w_cta = np.where(unit, (wl - NT) // AU, wl // T)
            w_col = np.where(unit, T + (wl - NT) % AU, wl % T)
            mine = self.cl_of[int(gl[ee[0] // nb]) // T]
            for X, known in x.items():
                sel = (self.cl_of[w_cta] == X) & (X != mine) & (wl >= 0)
                if asy is not None:
                    sel &= ~asy[ee]
                if not sel.any():
                    continue
                col = self.rk_of[w_cta[sel]] * (T + AU) + w_col[sel]
                ok = clk[ee[sel]] <= known[col]
                flagged[ee[sel][ok]] = False

    def _who(self, glane: int) -> str:
        gx, gy, _ = self.launch.grid
        NT = self.n_ctas * self.T
        if glane >= NT:
            cta, unit = divmod(glane - NT, ASYNC_UNITS)
            kind = unit_kind(unit)
            what = ("the async proxy (tensor core)", "the async proxy (TMA/bulk copy into shared "
                    "memory)", "the async proxy (TMA/bulk store reading shared memory)")[kind] \
                if kind < 3 else \
                f"the async proxy (wgmma of warpgroup {unit - WGMMA_UNIT})"
            return f"{what} of CTA ({cta % gx},{(cta // gx) % gy},{cta // (gx * gy)})"
        cta, tid = divmod(glane, self.T)
        return (f"thread {tid} (warp {tid // 32}) of CTA "
                f"({cta % gx},{(cta // gx) % gy},{cta // (gx * gy)})")

    def _race(self, space: str, pc1: int, lane1: int, k1: str, pc2: int, lane2: int, k2: str,
              count: int) -> None:
        key = ("HB1", space, pc1, pc2)
        if key in self.findings:
            return
        i1, i2 = self.prog.insts[pc1], self.prog.insts[pc2]
        c1 = int(self._split(np.array([lane1]))[0][0])
        c2 = int(self._split(np.array([lane2]))[0][0])
        missing = ("a CTA barrier (bar.sync/barrier.sync), an mbarrier release/acquire or a "
                   "release/acquire flag (st.release -> ld.acquire) between them" if c1 == c2 else
                   "cluster-scope synchronisation between them (barrier.cluster.arrive.release "
                   "-> barrier.cluster.wait.acquire, a remote mbarrier arrive -> wait, or a "
                   "cluster-scope release/acquire flag; a .relaxed arrive publishes only what a "
                   "prior fence.acq_rel.cluster covers)"
                   if self.cl_of[c1] == self.cl_of[c2] else
                   "none exists between CTAs of different clusters: the accesses must not "
                   "overlap")
        if lane1 >= self.n_ctas * self.T:
            unit = unit_kind((lane1 - self.n_ctas * self.T) % ASYNC_UNITS)
            missing = ("completion of the asynchronous operation observed before this access: "
                       "tcgen05.commit -> mbarrier wait, or wgmma.wait_group",
                       "the wait on the mbarrier phase that the copy's complete_tx completes "
                       "(mbarrier.try_wait.parity returning true) by this thread, or a barrier "
                       "after a thread that did",
                       "'cp.async.bulk.wait_group.read' (or 'wait_group') by the issuing thread "
                       "covering the store's bulk group, then a barrier with this thread",
                       "'wgmma.wait_group' by the warpgroup that issued the wgmma, covering its "
                       "group, then a barrier with this thread (a wait_group completes only the "
                       "executing warpgroup's groups)")[unit]
        if i1.base == "cp" and "async" in i1.parts and "bulk" not in i1.parts and \
                k1 == "write":  # a non-bulk cp.async (a bulk copy's unit said it above)
            missing = ("'cp.async.wait_group'/'cp.async.wait_all' by the issuing thread covering "
                       "the copy" + (", then a CTA barrier" if lane1 != lane2 else ""))
        self.findings[key] = Finding(
            rule="HB1", severity="error", file=self.prog.filename, line=i2.line, col=i2.col,
            message=(f"data race on {space} memory: '{i2.opcode}' ({k2}) by {self._who(lane2)} is "
                     f"not ordered after '{i1.opcode}' ({k1}) by {self._who(lane1)}"),
            notes=[Note(message=f"conflicting {k1} '{i1.opcode}' by {self._who(lane1)}",
                        line=i1.line, col=i1.col),
                   Note(message=f"missing synchronisation: {missing}"),
                   Note(message=f"{count} conflicting byte accesses at this step")])

    def _hb_join(self, lanes: np.ndarray, vc_row: np.ndarray) -> None:
        """lanes (tracked, of one CTA) acquire ``vc_row``: VC = max(VC, vc_row)."""
        if lanes.size:
            self.vc[lanes] = np.maximum(self.vc[lanes], vc_row)

    def _tick(self, lanes: np.ndarray) -> None:
        lanes = lanes[lanes < self.ntr]
        if lanes.size:
            self.vc[lanes, self.vcol[lanes]] += 1

    # ------------------------------------------------------------------ barriers
    def barrier(self, pc: int, exe: np.ndarray, bar_id: np.ndarray, count: np.ndarray | None,
                wait: bool) -> None:
        """Arrive at CTA barrier ``bar_id`` (per lane); block the lanes when ``wait``."""
        lanes = np.flatnonzero(exe)
        if not lanes.size:
            return
        ids = bar_id[lanes].astype(np.int64)
        if (ids < 0).any() or (ids > 15).any():
            raise _Fault("fault", f"barrier id {int(ids[(ids < 0) | (ids > 15)][0])} outside 0..15 "
                                  f"({self.prog.where(pc)})")
        ctas = self.cta_local[lanes]
        np.add.at(self.bar_count, (ctas, ids), 1)
        if count is not None:
            cnt = count[lanes].astype(np.int64)
            self.bar_expect[ctas, ids] = cnt
        else:
            self.bar_expect[ctas, ids] = -1  # all non-exited threads of the CTA
        if self.ntr:
            tl = lanes < self.ntr
            if tl.any():
                tlanes = lanes[tl]
                # join the arrivals' clocks per (CTA, barrier id): lanes come in lane order, so
                # equal keys are mostly contiguous; a segmented max (reduceat) replaces the slow
                # unbuffered np.maximum.at
                key = ctas[tl] * 16 + ids[tl]
                if key.size > 1 and (key[1:] < key[:-1]).any():
                    o = np.argsort(key, kind="stable")
                    key, tlanes_s = key[o], tlanes[o]
                else:
                    tlanes_s = tlanes
                starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
                red = np.maximum.reduceat(self.vc[tlanes_s], starts, axis=0)
                uk = key[starts]
                cc, bb = uk // 16, uk % 16
                self.bar_vc[cc, bb] = np.maximum(self.bar_vc[cc, bb], red)
                if self.tc_rel_vc is not None:
                    # the arrivals' tcgen05 releases (fence::before_thread_sync snapshots) go
                    # along to the participants' next fence::after_thread_sync
                    tred = np.maximum.reduceat(self.tc_rel_vc[tlanes_s], starts, axis=0)
                    for k, (c, b) in enumerate(zip(cc.tolist(), bb.tolist())):
                        old = self.bar_tc.get((c, b))
                        self.bar_tc[(c, b)] = tred[k] if old is None else np.maximum(old,
                                                                                     tred[k])
                if self.xvc:  # what the arrivals know of other clusters goes along
                    for ln, c, b in zip(tlanes.tolist(), ctas[tl].tolist(), ids[tl].tolist()):
                        x = self.xvc.get(ln)
                        if x is not None:
                            self.bar_x[(c, b)] = _flags._join_x(self.bar_x.get((c, b), {}), x)
                self._tick(tlanes)
        if wait:
            self.blocked[lanes] = True
            self.block_kind[lanes] = 1
            self.block_id[lanes] = ids
            self.pc[lanes] = pc  # re-checked on release
        self._release_barriers(pc, np.unique(ctas))

    def _release_barriers(self, pc: int, ctas: np.ndarray) -> None:
        """Complete every barrier of ``ctas`` (batch-local CTA ids) whose arrivals reached its
        count (its thread count, or every non-exited thread of the CTA): release its blocked
        lanes past the barrier and give them the joined clocks of the arrivals. Vectorised over
        the CTAs (they are independent; the HB5 checks run in CTA, then barrier order)."""
        T = self.T
        ctas = np.asarray(ctas, dtype=np.int64).reshape(-1)
        if not ctas.size:
            return
        cnt = self.bar_count[ctas]  # (k, 16)
        if not cnt.any():
            return
        exp = self.bar_expect[ctas]
        over = (exp >= 0) & (cnt > exp)
        for i, b in np.argwhere(over):
            self._overshoot(pc, int(ctas[i]), int(b), int(cnt[i, b]), int(exp[i, b]))
        alive = (~self.done).reshape(-1, T)[ctas].sum(axis=1)
        need = np.where(exp < 0, alive[:, None], exp)
        fire = (cnt > 0) & (cnt >= need)
        if not fire.any():
            return
        for b in np.flatnonzero(fire.any(axis=0)):
            cs = ctas[fire[:, b]]
            in_cs = np.zeros(self.bar_count.shape[0], np.bool_)
            in_cs[cs] = True
            rel = np.flatnonzero(self.blocked & (self.block_kind == 1) &
                                 (self.block_id == b) & in_cs[self.cta_local])
            self.blocked[rel] = False
            self.block_kind[rel] = 0
            self.pc[rel] += 1
            if self.ntr:
                tr = rel[rel < self.ntr]
                if tr.size:
                    self.vc[tr] = np.maximum(self.vc[tr], self.bar_vc[self.cta_local[tr], b])
                self.bar_vc[cs, b] = 0
                for c in cs.tolist():
                    tv = self.bar_tc.pop((c, int(b)), None)
                    if tv is None:
                        continue
                    tc = tr[self.cta_local[tr] == c]
                    if self.tc_pend_vc is None:
                        self.tc_pend_vc = np.zeros_like(self.vc)
                    self.tc_pend_vc[tc] = np.maximum(self.tc_pend_vc[tc], tv)
                if self.bar_x:
                    for c in cs.tolist():
                        x = self.bar_x.pop((c, int(b)), None)
                        if x is None:
                            continue
                        _flags.learn_x(self, tr[self.cta_local[tr] == c].tolist(), x)
            self.bar_count[cs, b] = 0

    def _overshoot(self, pc: int, c: int, b: int, arrived: int, expected: int) -> None:
        """HB5: more threads arrived at barrier ``b`` than its thread count before it completed.
        The hardware completes the barrier with the first ``expected`` arrivals (in an order no
        program controls) and starts a new instance for the rest (PTX ISA 9.1 §9.7.13.1), so
        which threads it orders is unspecified; the emulator's lockstep order is one of many."""
        key = ("HB5", pc, b)
        if key in self.findings:
            return
        ins = self.prog.insts[pc]
        gx, gy, _ = self.launch.grid
        cta = int(self.batch_ids[c])
        self.findings[key] = Finding(
            rule="HB5", severity="error", file=self.prog.filename, line=ins.line, col=ins.col,
            message=(f"barrier {b} expects {expected} threads but {arrived} threads of CTA "
                     f"({cta % gx},{(cta // gx) % gy},{cta // (gx * gy)}) arrived before it "
                     f"completed: which threads it synchronises depends on arrival order"),
            notes=[Note(message="give the barrier the number of threads that execute it (a "
                                "multiple of 32), or use a different barrier id per thread group")])

    # ------------------------------------------------------------------ mbarrier
    def mbar_key(self, lane: int, addr: int, pc: int = -1) -> tuple[int, int]:
        """(batch-local CTA, shared offset) of the mbarrier at ``addr`` (a shared::cluster
        address may name a peer CTA's, :func:`emulator.cluster.mbar_cta`; ``mapa`` of the
        executing CTA's own rank holds rank bits in a cluster of one, or with no cluster, too)."""
        if int(addr) >> _cluster.RANK_SHIFT:
            return _cluster.mbar_cta(self, lane, addr, pc)
        return int(self.cta_local[lane]), int(addr)

    def mbar_init(self, lane: int, addr: int, count: int, pc: int) -> None:
        key = self.mbar_key(lane, addr, pc)
        if self.tmap_probe is not None and key in self.mbar:
            self.tmap_probe.close(self.mbar[key])  # a re-init ends the probed phase
        self.mbar[key] = {"count": count, "pending": count, "phase": 0, "tx": 0,
                          "vc": np.zeros(self.W, np.int32),
                          "phase_vc": np.zeros(self.W, np.int32),
                          "init_lane": lane, "init_pc": pc,
                          "init_clk": int(self.vc[lane, self.vcol[lane]]) if lane < self.ntr
                          else 0}
        self.mbar_ids.setdefault(key, len(self.mbar_ids) + 1)

    def mbar_get(self, lane: int, addr: int, pc: int) -> dict:
        key = self.mbar_key(lane, addr, pc)
        st = self.mbar.get(key)
        if st is not None and key[0] != self.cta_local[lane]:
            _cluster.remote_mbar_check(self, lane, st, pc)  # HB8
        if st is None:
            raise _Fault("fault", f"mbarrier operation on shared address 0x{addr:x}, which holds "
                                  f"no initialised mbarrier ({self.prog.where(pc)})")
        return st

    def _relaxed_release(self, lane: int, addr: int, pc: int) -> np.ndarray:
        """What a ``.relaxed`` strong operation of ``lane`` on the mbarrier at ``addr``
        publishes: the clocks at its last release fence whose scope includes the barrier's
        owner (PTX ISA 9.1 §8.8.3, the fence-release pattern: a ``.cta`` fence suffices for a
        barrier of the lane's own CTA, a peer CTA's needs ``.cluster`` or wider)."""
        rel = self.clb.rel_vc[lane]
        local = self.mbar_key(lane, addr, pc)[0] == int(self.cta_local[lane])
        cta = self.frel_vc.get(1) if local else None
        return rel if cta is None else np.maximum(rel, cta[lane])

    def mbar_arrive(self, lane: int, addr: int, count: int, tx: int, pc: int) -> int:
        """One arrive(-on) of ``count`` with ``tx`` expected bytes; returns the phase before it.
        Completes the phase when pending arrivals and tx-count both reach 0 (PTX ISA 9.1
        §9.7.13.15.5-7); arrive has release semantics, the completing phase carries the joined
        clocks to the waiters."""
        st = self.mbar_get(lane, addr, pc)
        before = st["phase"]
        if self.ntr and lane < self.ntr:
            # .relaxed (PTX ISA 9.1 mbarrier.arrive) publishes only its last release fence
            relaxed = pc >= 0 and "relaxed" in self._types[pc][0]
            rel = self._relaxed_release(lane, addr, pc) if relaxed else self.vc[lane]
            st["vc"] = np.maximum(st["vc"], rel)
            if self.tc_rel_vc is not None:
                # tcgen05.fence::before_thread_sync + an arrive (.relaxed too): the tcgen05
                # operations before the fence are ordered before it (PTX ISA 9.1 §9.7.16.6.3-4)
                tv = st.get("tc_vc")
                st["tc_vc"] = (self.tc_rel_vc[lane].copy() if tv is None
                               else np.maximum(tv, self.tc_rel_vc[lane]))
            x = (self.xfence if relaxed else self.xvc).get(lane)
            if x is not None:  # what the arriving thread knows of other clusters goes along
                st["x"] = _flags._join_x(st.get("x", {}), x)
            self._tick(np.array([lane]))
        st["tx"] += tx
        st["pending"] -= count
        if st["pending"] <= 0 and st["tx"] == 0:
            self._mbar_complete(lane, addr, st)
        return before

    def mbar_remote_async(self, lane: int, addr: int, pc: int) -> None:
        """An asynchronous operation issued by ``lane`` (a ``tcgen05.commit``, a TMA or bulk
        copy's complete-tx, an ``st.async``) arrives on the mbarrier at ``addr``: when that
        mbarrier is a peer CTA's, record the phase it arrives in, which a thread of the owning
        CTA must observe (a successful wait on that phase or a later one) before the CTA exits
        (HB9, :func:`emulator.cluster.on_exit`). The issuer's own synchronisation (a cluster
        barrier after the issue) does not order an asynchronous arrival (PTX ISA 9.1
        §9.7.16.7.1 'tcgen05.commit', §9.7.9.25.4 the bulk copies: the arrival is made by the
        async proxy when the operation completes)."""
        key = self.mbar_key(lane, addr, pc)
        if key[0] == int(self.cta_local[lane]):
            return
        st = self.mbar.get(key)
        if st is not None:
            who = int(self.batch_ids[self.cta_local[lane]])
            st.setdefault("remote", {})[(pc, who)] = int(st["phase"])

    def mbar_complete_tx(self, lane: int, addr: int, nbytes: int, pc: int,
                         asynchronous: bool = True) -> None:
        """Complete ``nbytes`` of transactions on the mbarrier at ``addr`` (an asynchronous
        operation's complete-tx unless ``asynchronous`` is False: the ``mbarrier.complete_tx``
        instruction, which the issuing thread performs in program order)."""
        if asynchronous:
            self.mbar_remote_async(lane, addr, pc)
        st = self.mbar_get(lane, addr, pc)
        if asynchronous:
            st["async_in_phase"] = True
        elif self.ntr and lane < self.ntr:
            # the instruction is a relaxed strong operation (its only form): it publishes the
            # lane's last release fence (a fence + complete_tx is a release pattern)
            st["vc"] = np.maximum(st["vc"], self._relaxed_release(lane, addr, pc))
            self._tick(np.array([lane]))
        st["tx"] -= nbytes
        if st["pending"] <= 0 and st["tx"] == 0:
            self._mbar_complete(lane, addr, st)

    def _mbar_complete(self, lane: int, addr: int, st: dict) -> None:
        st["late"] = st.pop("async_in_phase", False)  # see mbar_wait
        st["phase"] += 1
        st["pending"] = st["count"]
        st["tx"] = 0
        st["phase_vc"] = st["vc"].copy()
        if "tc_vc" in st:
            st["phase_tc_vc"] = st["tc_vc"].copy()
        if "x" in st:
            st["phase_x"] = st["x"]
        key = self.mbar_key(lane, addr)
        mid = self.mbar_ids[key]
        c = key[0]
        sl = slice(c * self.T, (c + 1) * self.T)
        rel = np.flatnonzero(self.blocked[sl] & (self.block_kind[sl] == 2) &
                             (self.block_id[sl] == mid)) + c * self.T
        self.blocked[rel] = False  # they re-execute the wait, which now succeeds
        self.block_kind[rel] = 0

    def wrote(self) -> None:
        """A write to shared or global memory that changed a value was performed (once a spin
        check ran, a store of the bytes already there is not one): lanes blocked in a spin on
        memory (:meth:`spin_check`) run their load again."""
        self.writes += 1
        if self.n_spinning:
            self._unpark()

    def _unpark(self) -> np.ndarray:
        """Make every lane parked in a spin on memory runnable again; returns them."""
        rel = np.flatnonzero(self.blocked & (self.block_kind == SPIN_KIND))
        self.blocked[rel] = False
        self.block_kind[rel] = 0
        self.n_spinning = 0
        return rel

    def spin_check(self, pc: int, exe: np.ndarray, addr: np.ndarray) -> np.ndarray:
        """Lanes ``exe`` executed a strong load (``ld.acquire``/``.relaxed``/``.volatile``) of
        ``addr`` at ``pc``, or an atomic that left the value as it was (a failed ``atom.cas``,
        an ``atom.add`` of 0: Triton's atomic load): the lanes whose previous such access was
        this one, of the same address, with no write to shared or global memory performed
        since, are in a spin loop that reads the same value again (a flag or lock another
        thread has still to write). They block at ``pc`` until the next write (a scheduling
        choice: under min-PC scheduling a consumer spinning in code before its producer's
        would otherwise never let the producer run). Returns the (N,) mask of those lanes; their program counters and block
        state are set here, the caller sets the others'."""
        lanes = np.flatnonzero(exe)
        self.n_spin_lanes += int(lanes.size)
        a = np.asarray(addr)[lanes].astype(np.int64)
        spin = ((self.spin_pc[lanes] == pc) & (self.spin_addr[lanes] == a) &
                (self.spin_writes[lanes] == self.writes))
        self.spin_pc[lanes] = pc
        self.spin_addr[lanes] = a
        self.spin_writes[lanes] = self.writes
        out = np.zeros(self.N, np.bool_)
        if spin.any():
            sl = lanes[spin]
            out[sl] = True
            self.blocked[sl] = True
            self.block_kind[sl] = SPIN_KIND
            self.pc[sl] = pc
            self.n_spinning += int(sl.size)
        return out

    def _spin_release(self) -> np.ndarray:
        """No lane is runnable but some spin on memory (:meth:`spin_check`): they run again
        (a loop that also counts or reads a clock may leave by itself). After
        ``SPIN_LIMIT`` such rounds with no write performed the spin never ends: the blocked
        lanes are then a deadlock (HB2). Returns the new runnable mask."""
        if self.spin_forced and self.spin_forced_writes == self.writes:
            self.spin_forced += 1
        else:
            self.spin_forced, self.spin_forced_writes = 1, self.writes
        if self.spin_forced > SPIN_LIMIT:
            if self._later_ctas > 0:
                # the write may come from a CTA this launch runs in a later batch (or not at
                # all: a representative subset): batches run one after the other, so a wait
                # across them is not a deadlock the emulator can decide
                spin = np.flatnonzero(self.blocked & (self.block_kind == SPIN_KIND))
                raise self.prog.unsupported(
                    int(self.pc[spin[0]]),
                    f"a spin on memory no CTA of this batch writes ({self._later_ctas} CTAs "
                    f"of the grid run in later batches or not at all: the emulator runs "
                    f"{int(self.batch_ids.size)} CTAs at a time, so a wait for one of them "
                    f"is not decided)")
            return ~self.done & ~self.blocked
        rel = self._unpark()
        self.spin_pc[rel] = -1  # its next load is one iteration, not a spin
        return ~self.done & ~self.blocked

    def acquire_fence(self, exe: np.ndarray, level: int) -> None:
        """An acquire fence (``fence.acquire`` / ``.acq_rel`` / ``.sc``, ``membar``) at scope
        ``level`` (``emulator.flags.SCOPES``) by the lanes ``exe``: what their earlier
        ``.relaxed`` mbarrier waits and flag reads of their own CTA's releases observed is
        acquired now, other CTAs' releases only at ``.cluster`` scope or wider (PTX ISA 9.1
        §8.8.3 fence-acquire patterns; §8.9.1: the fence and the release must be morally
        strong). mbarrier phases are acquired whatever the fence's scope, as they are by a
        wait: Triton and CUTLASS-style code arrive on a peer's mbarrier at the default
        ``.cta`` scope, and this emulator does not call that a race."""
        if not self.ntr:
            return
        tl = np.flatnonzero(exe[:self.ntr])
        if not tl.size:
            return
        if self.relaxed_vc is not None:
            self.vc[tl] = np.maximum(self.vc[tl], self.relaxed_vc[tl])
        if self.relaxed_wide_vc is not None and level >= _flags.SCOPES["cluster"]:
            self.vc[tl] = np.maximum(self.vc[tl], self.relaxed_wide_vc[tl])
        if self.xrel and level >= _flags.SCOPES["gpu"]:
            for ln in tl.tolist():
                got = self.xrel.pop(ln, None)
                if got is not None:
                    _flags.learn_x(self, (ln,), got)

    def mbar_wait(self, pc: int, exe: np.ndarray, addr: np.ndarray, parity: np.ndarray,
                  acquire: bool = True) -> np.ndarray:
        """try_wait/test_wait.parity: True where the phase of parity ``parity`` completed; the
        other lanes block until the mbarrier's phase changes (a spin loop is equivalent). A
        successful wait acquires the phase's releases unless ``acquire`` is False (a
        ``.relaxed`` wait: ordering needs a ``fence.acquire`` after it). The first test of a
        phase that an asynchronous operation completed returns False without blocking (the
        operation may land later on the GPU: a wait that does not retry is exercised)."""
        ok = np.zeros(self.N, np.bool_)
        lanes = np.flatnonzero(exe)
        if not lanes.size:
            return ok
        # lanes grouped by mbarrier (CTA, address), groups in the order of their first lane:
        # no state changes inside a wait, so this equals the lane-by-lane loop
        ctas = self.cta_local[lanes].astype(np.int64)
        ad = np.asarray(addr)[lanes].astype(np.int64)
        keys = np.stack([ctas, ad], axis=1)
        uk, first, inv = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
        par = np.asarray(parity)[lanes].astype(np.int64) & 1
        for gi in np.argsort(first, kind="stable"):
            grp = lanes[inv == gi]
            lane0 = int(grp[0])
            st = self.mbar_get(lane0, int(addr[lane0]), pc)
            done = par[inv == gi] != (st["phase"] & 1)
            okl, blk = grp[done], grp[~done]
            if okl.size and st.get("late"):
                # the phase was completed by an asynchronous operation (a copy's complete-tx,
                # a tcgen05.commit), which the emulator performs at issue; on the GPU it may
                # complete later, so the first test of the phase may find it incomplete: the
                # testing lanes get False (not blocked) and run their own retry path - a
                # wait that does not loop until true (PTX ISA 9.1 §9.7.13.15.16) is seen
                st["late"] = False
                okl = okl[:0]
            ok[okl] = True
            if okl.size:  # the owning CTA observed every phase completed so far
                st["seen"] = int(st["phase"])
            if self.ntr:
                tl = okl[okl < self.ntr]
                if tl.size and st.get("remote"):
                    # each traced thread's first observation of each phase count: a peer's
                    # outgoing bulk copy needs one of them ordered before its exit
                    # (cluster._outgoing_check)
                    obs = st.setdefault("obs", {}).setdefault(int(st["phase"]), {})
                    for l0 in tl.tolist():
                        obs.setdefault(l0, int(self.vc[l0, self.vcol[l0]]))
                if tl.size and "phase_tc_vc" in st:
                    # tcgen05-only releases (relaxed arrives after before_thread_sync): acquired
                    # for tcgen05 operations by the lane's next after_thread_sync
                    if self.tc_pend_vc is None:
                        self.tc_pend_vc = np.zeros_like(self.vc)
                    self.tc_pend_vc[tl] = np.maximum(self.tc_pend_vc[tl], st["phase_tc_vc"])
                if tl.size and acquire:
                    self.vc[tl] = np.maximum(self.vc[tl], st["phase_vc"])
                    px = st.get("phase_x")
                    if px:
                        _flags.learn_x(self, tl.tolist(), px)
                elif tl.size:
                    if self.relaxed_vc is None:
                        self.relaxed_vc = np.zeros_like(self.vc)
                    self.relaxed_vc[tl] = np.maximum(self.relaxed_vc[tl], st["phase_vc"])
            if blk.size:
                self.blocked[blk] = True
                self.block_kind[blk] = 2
                self.block_id[blk] = self.mbar_ids[self.mbar_key(lane0, int(addr[lane0]), pc)]
        return ok

    def on_exit(self, exe: np.ndarray) -> None:
        if self.ntr and self._gshadow is not None:
            _async_copy.complete_at_exit(self, exe)  # bulk stores never waited for
        self.done |= exe
        ctas = np.unique(self.cta_local[exe])
        if ctas.size and self.bar_count[ctas].any():
            self._release_barriers(-1, ctas)
        if ctas.size and self.C > 1:
            _cluster.on_exit(self, exe)  # HB8, cluster barriers waiting on exited threads

    def _deadlock(self) -> None:
        T = self.T
        blocked = np.flatnonzero(self.blocked)
        by: dict[tuple[int, int], list[int]] = {}
        for l in blocked:
            by.setdefault((int(self.pc[l]), int(self.block_kind[l])), []).append(int(l))
        notes = []
        first = None
        for (p, kind), ls in sorted(by.items()):
            ins = self.prog.insts[p]
            first = first or ins
            c = int(self.cta_local[ls[0]])
            alive = int((~self.done[c * T:(c + 1) * T]).sum())
            if kind == 3:
                what = "barrier.cluster.wait: not every thread of the cluster arrived"
            elif kind == _cta_pair.BLOCK_KIND:
                peer = _cta_pair.pair_peer(self, c, p)
                state = "it exited" if self.clb.exited[peer] else "it is blocked elsewhere"
                what = (f"'{ins.opcode}' waits for a warp of the peer CTA "
                        f"{int(self.batch_ids[peer])} to perform the same collective operation"
                        f" ({state}; PTX ISA 9.1 §9.7.16.5)")
            elif kind == SPIN_KIND:
                what = (f"'{ins.opcode}' spins on memory no thread writes any more "
                        f"({SPIN_LIMIT} rounds with every other thread blocked or exited)")
            elif kind == _misc_ext.REG_KIND:
                what = _misc_ext.blocked_message(self, ls[0])
            elif kind == 4:
                what = (f"bar.warp.sync membermask 0x{int(self.block_id[ls[0]]):08x}: a lane of "
                        f"the mask never arrives")
            elif kind == 1:
                b = int(self.block_id[ls[0]])
                exp = int(self.bar_expect[c, b])
                what = (f"barrier {b}: {int(self.bar_count[c, b])} of "
                        f"{exp if exp >= 0 else alive} threads arrived")
            else:
                key = next((k for k, v in self.mbar_ids.items() if v == int(self.block_id[ls[0]])),
                           None)
                st = self.mbar.get(key) if key else None
                what = ("mbarrier phase never completes" if st is None else
                        f"mbarrier at shared 0x{key[1]:x}: phase {st['phase']}, "
                        f"{st['pending']} of {st['count']} arrivals pending, tx-count {st['tx']}")
            tids = sorted({int(self.tid[l]) for l in ls if self.cta_local[l] == c})
            notes.append(Note(message=f"{len(ls)} threads blocked here ({what}); in CTA "
                                      f"{int(self.batch_ids[c])}: threads {_ranges(tids)}",
                              line=ins.line, col=ins.col))
        exited = int(self.done.sum())
        if exited:
            notes.append(Note(message=f"{exited} threads already exited"))
        assert first is not None
        self.findings[("HB2", first.line, first.col)] = Finding(
            rule="HB2", severity="error", file=self.prog.filename, line=first.line,
            col=first.col, message=f"deadlock: all {len(blocked)} live threads are blocked and "
                                   f"no thread can make progress", notes=notes)
        raise _Fault("deadlock", f"deadlock: {len(blocked)} threads blocked at "
                                 f"{self.prog.filename}:{first.line}:{first.col}")

    def warp_members(self, pc: int, exe: np.ndarray, mask: np.ndarray | None) -> None:
        """HB3: a lane named in ``membermask`` that does not execute this warp collective."""
        if mask is None:
            return
        W = exe.reshape(-1, 32) if self.N % 32 == 0 else None
        if W is None:
            return
        if mask.ndim == 0 and int(mask) & 0xFFFFFFFF == 0xFFFFFFFF and self.T % 32 == 0:
            # the full mask (Triton's -1): a lane is missing only in a warp that runs the
            # collective with some lanes but not all
            rows = W.any(axis=1)
            if not (rows & ~W.all(axis=1)).any():
                return
        m = mask.reshape(-1, 32)[:, 0].astype(np.uint64) if mask.ndim else np.full(
            W.shape[0], int(mask), dtype=np.uint64)
        bits = (m[:, None] >> np.arange(32, dtype=np.uint64)) & np.uint64(1)
        members = bits.astype(np.bool_)
        # only warps where at least one lane executes
        runs = W.any(axis=1)
        alive = ~self.done.reshape(-1, 32)
        missing = members & ~W & runs[:, None] & (alive | True)
        exists = (np.arange(self.N).reshape(-1, 32) % self.T) < self.T
        missing &= exists
        if missing.any():
            w = int(np.flatnonzero(missing.any(axis=1))[0])
            ins = self.prog.insts[pc]
            lanes = np.flatnonzero(missing[w])
            key = ("HB3", pc)
            if key not in self.findings:
                self.findings[key] = Finding(
                    rule="HB3", severity="error", file=self.prog.filename, line=ins.line,
                    col=ins.col,
                    message=(f"'{ins.opcode}': lanes {_ranges(lanes.tolist())} of warp "
                             f"{(w * 32 % self.T) // 32} are in membermask but do not execute it "
                             f"(diverged or exited)"))


def representative_order(grid: tuple[int, int, int]) -> np.ndarray:
    """Every linear CTA id of ``grid`` (x fastest), most representative first: the grid's
    corners (first and last index along each axis: the tiles where bounds masks and partial
    tiles act), then the rest spread evenly over the grid (a golden-ratio stride, so any prefix
    samples the whole id range: different rows, heads, batches and diagonal positions)."""
    gx, gy, gz = grid
    n = gx * gy * gz
    seen = np.zeros(n, np.bool_)
    out: list[int] = []
    for z in sorted({0, gz - 1}):
        for y in sorted({0, gy - 1}):
            for x in sorted({0, gx - 1}):
                c = x + gx * (y + gy * z)
                if not seen[c]:
                    seen[c] = True
                    out.append(c)
    if n > len(out):
        step = max(1, int(round(n * 0.6180339887)))
        while np.gcd(step, n) != 1:
            step += 1
        rest = (np.arange(n, dtype=np.int64) * step) % n
        rest = rest[~seen[rest]]
        return np.concatenate([np.array(out, np.int64), rest])
    return np.array(out, np.int64)


#: 4 KiB of fixed pseudo-random bytes tiled over uninitialised shared/local memory
_GARBAGE = np.random.default_rng(0x5EED).integers(0, 256, 4096, dtype=np.uint8)


def _garbage(shape: tuple[int, int]) -> np.ndarray:
    """uint8 array of ``shape`` filled with :data:`_GARBAGE` (undefined initial contents)."""
    n = shape[0] * shape[1]
    reps = -(-n // _GARBAGE.size)
    return np.tile(_GARBAGE, reps)[:n].reshape(shape)


def _per_cta(costs: list[tuple[int, float]], n: int, batch_ctas: int) -> float:
    """Projected seconds per CTA of a whole grid of ``n`` CTAs run in batches of
    ``batch_ctas``, under the cost model of the batches so far (:func:`_fit`)."""
    a, b = _fit(costs)
    return max((a * -(-n // max(batch_ctas, 1)) + b * n) / max(n, 1), 1e-9)


def _fit(costs: list[tuple[int, float]]) -> tuple[float, float]:
    """(fixed seconds per batch, seconds per CTA) of ``costs`` [(CTAs, seconds)]: a batch's
    steps cost the same whatever its CTA count (numpy runs all lanes of a step at once), so
    a batch costs about ``a + b * CTAs``. With one batch size only, ``a = 0`` (the cautious
    bound: every CTA is charged the whole measured cost)."""
    ks = np.array([k for k, _ in costs], float)
    ts = np.array([t for _, t in costs], float)
    if ks.size < 2 or np.ptp(ks) == 0:
        return 0.0, float(ts.sum() / max(ks.sum(), 1.0))
    b, a = np.polyfit(ks, ts, 1)
    if b <= 0:  # noise: fall back to the cautious bound
        return 0.0, float(ts.sum() / ks.sum())
    return max(0.0, float(a)), float(b)


def _next_batch(costs: list[tuple[int, float]], remaining: int, batch_ctas: int,
                left_s: float) -> int:
    """CTAs of the next batch of a run that may stop at a representative subset: the whole
    rest in one batch when it fits 80% of the time left under the cost model (:func:`_fit`),
    else the largest batch that fits half of it (0: stop now). After one batch only (the
    cautious bound), a partial batch is at most 8 times as large, so that the fit gets a
    second size."""
    a, b = _fit(costs)
    k = min(batch_ctas, remaining)
    if k == remaining and a + b * remaining <= 0.8 * left_s:
        return k  # the rest in one batch (after one batch: under the cautious bound)
    if len(costs) == 1:
        k = min(k, 8 * costs[0][0])
    fit = int((0.5 * left_s - a) / max(b, 1e-9))
    return max(0, min(k, fit))


def _ranges(xs: list[int]) -> str:
    if not xs:
        return "none"
    out, s, prev = [], xs[0], xs[0]
    for x in xs[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(f"{s}" if s == prev else f"{s}-{prev}")
        if x is not None:
            s = prev = x
    return ",".join(out)
