"""ailower's PTX emulator: functional CPU execution of a candidate plus happens-before analysis.

Public API::

    run_kernel(ptx, spec, arch, *, size="verify", dims=None, config=None, meta=None, ...,
               memory_budget=4 GiB, cta_subset=True, max_ctas=None)
        -> EmulationResult        # outputs compared with the float64 reference by harness.compare
    check_races(ptx, spec, arch, **kw) -> list[Finding]
    run_launch(ptx, launch, gmem, ...) -> RunOutcome   # raw launch over your own buffers
    check_default_launch(ptx, arch=..., launch=None) -> list[LaunchCheck]
                                  # HB analysis with no spec: zero-filled buffers, a small grid
    load_launch(path) -> LaunchConfig                  # grid/block/scalars/buffers from YAML/JSON
    EmulationUnsupported                               # "emulation unsupported: X at file:line:col"

The PTX front end is the verifier's (:func:`verifier.parse_ptx`); findings use the verifier's
:class:`verifier.Finding` format with the emulator's own rule ids (the verifier's registry does
not list them; the verifier never imports the emulator):

* ``HB1`` data race: two accesses to the same byte of shared or global memory, at least one a
  write, by different threads, not ordered by a synchronisation the emulator models (CTA
  barriers ``bar.sync``/``barrier.sync``/``bar.arrive`` with optional thread counts, named
  barriers, ``bar.warp.sync``, mbarrier arrive (release) -> phase completion -> try_wait
  (acquire), ``cp.async.wait_group``/``wait_all`` for the issuing thread's copies); stores of the
  same value by the same instruction (Triton's replicated stores) are not races. Atomics and
  strong accesses are not checked against each other. Release / acquire through memory orders
  threads too (:mod:`emulator.flags`: ``st.release``/``red``/``atom`` release patterns or a
  release fence + ``.relaxed`` write, observed by ``ld.acquire``/``atom`` acquires or a
  ``.relaxed`` read + acquire fence, at a scope that includes both threads). Accesses by CTAs of
  different clusters always conflict (no grid-wide synchronisation is modelled: a split-K or
  stream-K semaphore between clusters is reported).
* ``HB2`` deadlock: every live thread is blocked (a barrier whose count is never reached, an
  mbarrier phase that never completes); the finding lists the blocked threads and the state.
* ``HB3`` a lane named in a warp collective's ``membermask`` does not execute it.
* ``HB5`` more threads arrive at a barrier with a thread count (``bar.sync 1, 64``) than the
  count before it completes: the hardware takes the first arrivals, in an order no program
  controls, so the threads it orders are unspecified.
* ``HB6`` a non-wgmma instruction reads or writes an accumulator (or register-A) register of a
  ``wgmma.mma_async`` that its thread has not retired with ``wgmma.wait_group`` (wgmma results
  are computed at issue here, so the values alone would not show it). An error for an
  accumulator; a warning for a register-A operand rewritten early (Triton 3.6 does that and
  ptxas orders it).
* ``HB4`` shared bytes written through the generic proxy (``st.shared``, ``cp.async``) are read
  by the async proxy although the writer executed no ``fence.proxy.async`` after the write
  (ptx_rules AP1/W5/TM8): an error for a TMA / bulk store's source (the PTX memory model leaves
  what the copy reads undefined, §8.6), a warning for ``wgmma``/``tcgen05.mma`` operands
  (Triton 3.6 omits it for cp.async-fed MMAs, which the verifier also keeps as a policy warning).
* ``HB10`` a ``wgmma.mma_async`` uses, as accumulator or register-A operand, a register its
  thread accessed with a non-wgmma instruction after its last ``wgmma.fence`` (PTX ISA 9.1
  §9.7.15.7.1: the fence is required between the access and the wgmma; accumulator accesses by
  wgmma.mma_async of the same shape need none).
* ``HB7`` ``mbarrier.inval`` while the current phase's tx-count is not zero: copies completed
  bytes no ``expect_tx`` announced, or announced bytes never came (:mod:`emulator.async_copy`).
* ``HB8`` an mbarrier operation on a peer CTA's mbarrier (``mapa`` address) before its
  ``mbarrier.init`` is visible: no ``fence.mbarrier_init.release.cluster`` by the initialising
  thread, or no cluster synchronisation between that fence and the remote operation
  (:mod:`emulator.cluster`).
* ``HB9`` a CTA's shared memory accessed by a cluster peer after the CTA exited, or a CTA that
  exits while a peer's access to its shared memory is not ordered before the exit (no cluster
  barrier between the peer's last access and the exit).

Clusters (:mod:`emulator.cluster`): the CTAs of a cluster run in one batch and every lane's
vector clock spans the cluster (one block of T + ASYNC_UNITS columns per CTA), so distributed shared
memory (``mapa``, ``ld/st/atom/red.shared::cluster``) and global accesses across the CTAs of a
cluster are ordered exactly by cluster-scope synchronisation: ``barrier.cluster.arrive``
(release; ``.relaxed`` publishes only what a prior cluster-scope ``fence.acq_rel``/``fence.sc``
covered) -> ``barrier.cluster.wait`` (acquire), remote ``mbarrier.arrive`` -> phase -> wait.

Async proxy: the shared-memory operand reads of ``wgmma.mma_async`` and ``tcgen05.mma`` belong
to the CTA's async unit 0 (an extra vector-clock column); they are ordered for a thread only
after the completion it observes: ``tcgen05.commit`` -> mbarrier phase -> ``try_wait``, or its
warpgroup's ``wgmma.wait_group``. Reusing a pipeline stage (``cp.async`` into it) before that is
HB1. TMA / bulk loads write shared memory as async unit 1 (ordered for a thread once it saw the
mbarrier phase their ``complete_tx`` completes), TMA / bulk stores read it as unit 2 (ordered
once the issuer's ``cp.async.bulk.wait_group{.read}`` covers them): :mod:`emulator.async_copy`.
TMEM accesses are not race-checked yet.

Execution model and numerics: :mod:`emulator.machine`. Instruction coverage: :mod:`emulator.ops`
(integer, float with PTX rounding, conversions incl. bf16/fp8 via ml_dtypes, ld/st of every state
space, shuffles, votes, redux, elect, atomics, barriers, ``ldmatrix``/``stmatrix``, ``mma.sync``
m16n8k16/k8 f16/bf16 and m16n8k32 s8, ``cp.async`` with per-thread groups, ``wgmma.mma_async``
with sm_90 smem descriptors (K-major A/B, MN-major B, all swizzles; f16, bf16, tf32, E4M3/E5M2
and s8/u8 mixed freely) or register A (f16 / bf16), mbarrier
(init/arrive/expect_tx/complete_tx/try_wait.parity), ``tcgen05`` alloc/dealloc/ld/st
(32x32b, 16x64b, 16x128b, 16x256b, 16x32bx2; pack::16b)/mma (kind::f16, f8f6f4, tf32, i8;
A from smem or TMEM; M=64/128)/commit).
TMA tile loads/stores/reductions (1-5D, swizzle none/32/64/128 B, OOB fill), bulk copies and
reductions, bulk groups, ``tensormap.replace``/``cp_fenceproxy`` and host tensor-descriptor
parameters (:mod:`emulator.async_copy`; kernel parameters have ``.param`` addresses and a
generic window for ``cvta.param``), ``brx.idx`` through ``.branchtargets``; TMA
``.multicast::cluster`` loads, clusters
(:mod:`emulator.cluster`); block-scaled ``tcgen05.mma`` (``kind::mxf8f6f4`` E4M3/E5M2,
``kind::mxf4``, ``kind::mxf4nvf4``; UE8M0/UE4M3 scales from TMEM), ``tcgen05.cp`` (no
decompression), ``tcgen05.shift``, multicast ``tcgen05.commit`` (:mod:`emulator.tcgen05_ext`);
the CTA pair (``.cta_group::2``): collective ``alloc``/``dealloc``/``relinquish_alloc_permit``,
``tcgen05.mma`` with smem A and B at M = 128 / 256 (issued by the even CTA), ``commit`` and TMA
tile loads completing on the peer's mbarrier (:mod:`emulator.cta_pair`);
``setmaxnreg`` count rules, ``griddepcontrol``, ``clusterlaunchcontrol`` (a cancel that never
succeeds) (:mod:`emulator.misc_ext`); ``call`` of a ``.func`` with ``.param``
arguments, inlined per call site (recursion refused) (:mod:`emulator.program`). Not yet
modelled (reported as unsupported): TMA im2col, ``tcgen05.cp``/``shift``/block-scaled,
``.ws`` or sparse MMAs with ``cta_group::2``, a pair MMA issued by the odd CTA, ``.b128``
registers, the sub-byte operand types of ``kind::mxf8f6f4``, an MN-major (transposed) smem A
of wgmma.
Asynchronous tensor-core operations compute their results at issue.

Limits of the race analysis: every emulated CTA is checked; CTAs run in batches whose vector
clocks fit a budget of 4 M clock entries; per byte only the last writer and the last reader are
kept, so a write is checked against the most recent read only. The records are kept per touched
4 KiB page (sparse) under a memory budget (status ``memory`` past it); the per-byte check runs
as compiled numba loops (:mod:`emulator._hbkern`), or as numpy array operations where numba is
not installed: the backend is chosen explicitly (:func:`set_hb_backend`, or the environment
variable ``AILOWER_EMU_HB_BACKEND=numba|numpy``; default numba, an error naming both when numba
is missing) and reported (``EmulationResult.hb_backend``).

Size-aware budget: when the whole grid would not finish in the time limit (or ``max_ctas`` is
given), ``run_kernel`` emulates a representative subset of complete CTAs (the grid's corners,
then CTAs spread evenly: :func:`emulator.machine.representative_order`) and compares only the
output elements they wrote; the result names the CTAs and the reason (docs/emulator.md,
"Emulation at real sizes").

Sources: PTX ISA 9.1 §8 (memory consistency model: morally strong, happens-before), §9.7.13.1
(bar/barrier), §9.7.9.x (data movement), §9.7.3-9.7.4 (floating point, rounding).
"""

from emulator._hbkern import BackendError as HBBackendError
from emulator._hbkern import backend as hb_backend
from emulator._hbkern import set_backend as set_hb_backend
from emulator.api import MAX_DYNAMIC_SMEM, EmulationResult, check_races, run_kernel
from emulator.machine import Launch, Machine, RunOutcome
from emulator.memory import GlobalMemory
from emulator.program import EmulationUnsupported, build_program
from emulator.launchcheck import (LaunchCheck, LaunchConfig, LaunchFileError,
                                  check_default_launch, load_launch)

#: the emulator's rule ids and one-line descriptions (same role as verifier.RULES)
RULES = {
    "HB1": "data race: conflicting accesses not ordered by a modelled synchronisation",
    "HB2": "deadlock: every live thread is blocked (barrier count never reached)",
    "HB3": "warp collective: a membermask lane does not execute it (divergence or exit)",
    "HB4": "async-proxy read of generic-proxy shared writes without fence.proxy.async (warning)",
    "HB5": "barrier thread count smaller than the threads arriving: synchronised set unspecified",
    "HB6": "register of an in-flight wgmma.mma_async accessed before wgmma.wait_group retires it",
    "HB7": "mbarrier invalidated with a non-zero tx-count: expect_tx bytes != the copies' bytes",
    "HB8": "remote mbarrier operation before its init is visible (fence.mbarrier_init + cluster "
           "barrier)",
    "HB9": "CTA exits while a cluster peer may still access its shared memory",
    "HB10": "wgmma.mma_async operand register accessed by a non-wgmma instruction after the "
            "thread's last wgmma.fence",
}


def run_launch(ptx: str, launch: Launch, gmem: GlobalMemory, *, filename: str = "<ptx>",
               race: bool = True, time_limit_s: float = 60.0) -> RunOutcome:
    """Emulate one launch of ``ptx`` over caller-provided global memory (no spec needed).

    Raises:
        verifier.PTXSyntaxError: the PTX does not parse.
        EmulationUnsupported: an instruction the emulator does not model.
    """
    from verifier.ptx.parser import parse_ptx

    prog = build_program(parse_ptx(ptx, filename))
    return Machine(prog, launch, gmem, race=race, time_limit_s=time_limit_s).run()


__all__ = ["EmulationResult", "EmulationUnsupported", "GlobalMemory", "HBBackendError", "Launch",
           "LaunchCheck",
           "LaunchConfig", "LaunchFileError", "MAX_DYNAMIC_SMEM", "RULES", "RunOutcome",
           "check_default_launch", "check_races", "load_launch", "run_kernel", "run_launch"]
