"""Thread-block clusters (sm_90+): launch, cluster special registers, distributed shared memory
and cluster-scope synchronisation, with their happens-before semantics.

Launch (PTX ISA 9.1 §11.4 performance-tuning and §11.7 cluster-dimension directives; CUDA
``cuLaunchKernelEx`` cluster attribute): the cluster shape is the launch's (``Launch.cluster``:
Triton launches ``num_ctas`` CTAs per cluster along x) or else the entry's
``.reqnctapercluster``; ``.explicitcluster`` without either, a launch shape that contradicts
the directive, more CTAs than ``.maxclusterrank`` or a grid not divisible by the cluster shape
are launch failures (status ``fault``). All CTAs of a cluster run in the same emulation batch (a
CTA subset is a subset of whole clusters).

Addresses: a ``.shared::cta`` address (``< 2**24``) is also the ``.shared::cluster`` address of
the executing CTA's own shared memory; ``mapa`` returns ``(rank + 1) << 24 | offset`` for CTA
``rank`` of the cluster (a generic address: that plus the shared window), which
``ld/st/atom/red.shared::cluster``, generic accesses and ``mbarrier`` operations decode
(PTX ISA 9.1 ``mapa``; §5.1 state spaces: the shared::cta window lies in the
shared::cluster window).

Happens-before (PTX ISA 9.1 §8 memory consistency model, ``barrier.cluster``, ``mbarrier``):
every lane's vector clock has one block of ``T + 3`` columns per CTA of its cluster, so
accesses by threads of different CTAs of one cluster (shared memory of a peer, global memory)
are ordered exactly by cluster-scope synchronisation:

* ``barrier.cluster.arrive`` (default ``.release``) publishes the arriving thread's clock;
  ``.relaxed`` publishes only what the thread's last cluster-scope release fence
  (``fence.acq_rel``/``fence.sc`` at ``.cluster``/``.gpu``/``.sys``, ``membar.gl/sys``) covered;
  ``barrier.cluster.wait`` (``.acquire``) blocks until every non-exited thread of the cluster has
  arrived and acquires the joined clocks. The ``.aligned`` forms behave the same here.
* a remote ``mbarrier.arrive.shared::cluster`` releases like a local one (``.relaxed``: only the
  last fence's clock); the waiter acquires through the phase as usual.
* ``HB8`` (error): an ``mbarrier`` operation on a peer CTA's mbarrier whose ``mbarrier.init`` is
  not visible to it: the initialising thread must execute ``fence.mbarrier_init.release.cluster``
  (or a cluster-scope release fence) after the init, and the operation must happen after that
  fence through cluster synchronisation (typically ``barrier.cluster.arrive.relaxed`` +
  ``barrier.cluster.wait``).
* ``HB9`` (error): a CTA's shared memory accessed by a peer after the CTA exited, or a CTA that
  exits while a peer's access to its shared memory is not ordered before the exit (the last
  reader and writer of each byte are checked when the last thread of the CTA exits).

Limits: the waits of ``mbarrier.try_wait`` acquire whatever scope they name (the scope of a
remote arrive is not enforced: CUTLASS's remote arrives use the default ``.cta`` scope); the
init-visibility knowledge a relaxed cluster arrive carries reaches the waiting threads only
through that barrier (not onwards through other barriers); per byte only the last reader and
writer are checked at exit.
"""

from __future__ import annotations

import numpy as np

from emulator import flags as _flags
from emulator import cta_pair as _cta_pair
from emulator import ops as _ops
from emulator.memory import SHARED_WINDOW
from emulator.registry import ASYNC_UNITS, _Fault, copy_unit, handler
from verifier.findings import Finding, Note

__all__ = ["RANK_SHIFT", "cluster_dims", "cluster_maps", "cluster_order", "ClusterBatch"]

#: a shared::cluster address holds (rank + 1) above this bit (shared windows are < 16 MiB)
RANK_SHIFT = 24
_OFF_MASK = (1 << RANK_SHIFT) - 1


def _ints(d) -> tuple[int, int, int]:
    v = [int(x) for x in (d.args if d is not None else [])][:3]
    return tuple(v + [1] * (3 - len(v)))  # type: ignore[return-value]


def cluster_dims(prog, launch) -> tuple[int, int, int]:
    """The launch's cluster shape (x, y, z) in CTAs (see the module docstring for the source).

    Raises:
        _Fault: ``fault`` for a launch the driver refuses (shape contradicting
            ``.reqnctapercluster``, over ``.maxclusterrank``, ``.explicitcluster`` without a
            shape, grid not a multiple of the shape).
    """
    fn = prog.entry
    req = fn.directive("reqnctapercluster")
    mx = fn.directive("maxclusterrank")
    expl = fn.directive("explicitcluster")
    where = f"{prog.filename}:{fn.line}:{fn.col}"
    dims = getattr(launch, "cluster", None)
    if dims is not None:
        dims = tuple(int(x) for x in dims)
        if req is not None and _ints(req) != dims:
            raise _Fault("fault", f"launch failure: cluster shape {dims} contradicts "
                                  f".reqnctapercluster {_ints(req)} of '{fn.name}' ({where})")
    elif req is not None:
        dims = _ints(req)
    else:
        dims = (1, 1, 1)
        if expl is not None:
            raise _Fault("fault", f"launch failure: '{fn.name}' is .explicitcluster but the "
                                  f"launch gives no cluster shape ({where})")
    if min(dims) < 1:
        raise _Fault("fault", f"launch failure: cluster shape {dims} ({where})")
    n = dims[0] * dims[1] * dims[2]
    if mx is not None and mx.args and n > int(mx.args[0]):
        raise _Fault("fault", f"launch failure: {n} CTAs per cluster exceed .maxclusterrank "
                              f"{int(mx.args[0])} ({where})")
    g = launch.grid
    if any(g[i] % dims[i] for i in range(3)):
        raise _Fault("fault", f"launch failure: grid {tuple(g)} is not a multiple of the "
                              f"cluster shape {dims} ({where})")
    return dims  # type: ignore[return-value]


def cluster_maps(grid, cdims) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cluster id, rank) of every linear CTA id (x fastest) and the members (clusters, C) of
    every cluster in rank order (rank = x + cx * (y + cy * z) inside the cluster)."""
    gx, gy, gz = grid
    cx, cy, cz = cdims
    n = gx * gy * gz
    cta = np.arange(n, dtype=np.int64)
    x, y, z = cta % gx, (cta // gx) % gy, cta // (gx * gy)
    ncx, ncy = gx // cx, gy // cy
    cl = (x // cx) + ncx * ((y // cy) + ncy * (z // cz))
    rk = (x % cx) + cx * ((y % cy) + cy * (z % cz))
    C = cx * cy * cz
    members = np.zeros((n // C, C), np.int64)
    members[cl, rk] = cta
    return cl, rk, members


def cluster_order(cluster_order_ids: np.ndarray, members: np.ndarray) -> np.ndarray:
    """CTA order that runs whole clusters in the given cluster order (members in rank order)."""
    return members[np.asarray(cluster_order_ids, np.int64)].reshape(-1)


class ClusterBatch:
    """Cluster state of one emulation batch (its CTAs are whole clusters).

    Attributes: ``peer`` (batch CTAs, C) batch-local index of each rank of the CTA's cluster;
    per batch cluster the barrier.cluster phase, arrivals and joined clocks; per lane the clock
    snapshot of its last cluster-scope release fence (``rel_vc``), its own clock at its last
    ``fence.mbarrier_init`` (``mbi``), the init-visibility clocks it acquired (``ivc``) and the
    phase it last arrived in; per CTA the joined clock of its exited threads.
    """

    def __init__(self, m, ids: np.ndarray):
        C, T = m.C, m.T
        self.C = C
        ncta = ids.size
        pos = m._batch_pos
        cl = m.cl_of[ids]
        self.peer = pos[m.cl_members[cl]]  # (ncta, C)
        if (self.peer < 0).any():
            raise AssertionError("a cluster split across emulation batches")
        # batch clusters: index of each batch CTA's cluster
        ucl, self.bcl = np.unique(cl, return_inverse=True)
        nb = ucl.size
        self.phase = np.zeros(nb, np.int64)
        self.count = np.zeros(nb, np.int64)
        W = m.W
        tr = m.ntr > 0
        self.bvc = np.zeros((nb, W), np.int32) if tr else None
        self.bivc = np.zeros((nb, W), np.int32) if tr else None
        self.pvc = np.zeros((nb, W), np.int32) if tr else None
        self.pivc = np.zeros((nb, W), np.int32) if tr else None
        n = m.N
        self.arrived = np.full(n, -1, np.int64)
        self.rel_vc = np.zeros((m.ntr, W), np.int32) if tr else None
        self.ivc = np.zeros((m.ntr, W), np.int32) if tr else None
        self.mbi = np.zeros(m.ntr, np.int32) if tr else None
        self.exit_vc = np.zeros((ncta, W), np.int32) if tr else None
        self.exited = np.zeros(ncta, np.bool_)
        self.T = T

    # ---------------------------------------------------------------- addresses
    def decode(self, m, cl: np.ndarray, a: np.ndarray, pc: int) -> tuple[np.ndarray, np.ndarray]:
        """(batch-local CTA, offset) of shared::cluster addresses ``a`` used by CTAs ``cl``."""
        a = np.asarray(a, np.int64)
        r = (a >> RANK_SHIFT) - 1
        remote = r >= 0
        if not remote.any():
            return cl, a
        if (r >= self.C).any():
            bad = int(a[r >= self.C][0])
            raise _Fault("fault", f"shared::cluster address 0x{bad:x} names CTA rank "
                                  f"{int(r[r >= self.C][0])} of a {self.C}-CTA cluster "
                                  f"({m.prog.where(pc)})")
        tgt = np.where(remote, self.peer[cl, np.maximum(r, 0)], cl)
        off = np.where(remote, a & _OFF_MASK, a)
        if self.exited[tgt].any():
            _exit_access(m, pc, int(tgt[self.exited[tgt]][0]))
        return tgt, off


def _exit_access(m, pc: int, c: int) -> None:
    key = ("HB9", pc)
    if key in m.findings:
        return
    ins = m.prog.insts[pc]
    m.findings[key] = Finding(
        rule="HB9", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
        message=(f"'{ins.opcode}' accesses the shared memory of CTA {int(m.batch_ids[c])}, "
                 f"which has already exited (its shared memory is released at exit)"),
        notes=[Note(message="missing synchronisation: a cluster barrier "
                            "(barrier.cluster.arrive + barrier.cluster.wait) after the peers' "
                            "last access and before the owner exits")])


def mbar_cta(m, lane: int, addr: int, pc: int) -> tuple[int, int]:
    """(batch-local CTA, shared offset) of the mbarrier at ``addr`` (shared::cta, shared::cluster
    or generic shared) used by ``lane``."""
    a = int(addr)
    if a >= SHARED_WINDOW:
        a -= SHARED_WINDOW
    c = int(m.cta_local[lane])
    if a >> RANK_SHIFT and m.clb is not None:
        t, o = m.clb.decode(m, np.array([c]), np.array([a]), pc)
        return int(t[0]), int(o[0])
    return c, a


def remote_mbar_check(m, lane: int, st: dict, pc: int) -> None:
    """HB8: ``lane`` operates on a peer CTA's mbarrier whose init is not visible to it."""
    if not m.ntr or lane >= m.ntr or "init_lane" not in st:
        return
    il, fenced = st["init_lane"], st.get("init_fenced")
    ok = False
    if fenced is not None and il < m.ntr:
        col = int(m.vcol[il])
        known = max(int(m.vc[lane, col]), int(m.clb.ivc[lane, col]))
        ok = known >= fenced
    if ok:
        return
    key = ("HB8", pc)
    if key in m.findings:
        return
    ins = m.prog.insts[pc]
    why = ("the initialising thread executed no 'fence.mbarrier_init.release.cluster' after "
           "the init" if fenced is None else
           "the init's fence is not ordered before this operation by cluster synchronisation")
    m.findings[key] = Finding(
        rule="HB8", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
        message=(f"'{ins.opcode}' by {m._who(int(m.glane[lane]))} operates on an mbarrier of a "
                 f"peer CTA before its mbarrier.init is visible: {why}"),
        notes=[Note(message="'mbarrier.init'", line=m.prog.insts[st["init_pc"]].line,
                    col=m.prog.insts[st["init_pc"]].col),
               Note(message="missing synchronisation: 'fence.mbarrier_init.release.cluster' by "
                            "the initialising thread, then 'barrier.cluster.arrive' + "
                            "'barrier.cluster.wait' before the remote operation")])


# ------------------------------------------------------------------ barrier.cluster
def _alive(m, k: int) -> int:
    T = m.T
    tot = 0
    for c in np.flatnonzero(m.clb.bcl == k):
        tot += int((~m.done[c * T:(c + 1) * T]).sum())
    return tot


def _complete(m, k: int) -> None:
    cb = m.clb
    if cb.count[k] < _alive(m, k) or cb.count[k] == 0:
        return
    if cb.bvc is not None:
        cb.pvc[k] = cb.bvc[k]
        cb.pivc[k] = cb.bivc[k]
        cb.bvc[k] = 0
        cb.bivc[k] = 0
    cb.phase[k] += 1
    cb.count[k] = 0
    T = m.T
    for c in np.flatnonzero(cb.bcl == k):
        sl = slice(c * T, (c + 1) * T)
        rel = np.flatnonzero(m.blocked[sl] & (m.block_kind[sl] == 3)) + c * T
        m.blocked[rel] = False  # they re-execute the wait, which now passes
        m.block_kind[rel] = 0


def _arrive(m, pc: int, exe: np.ndarray, relaxed: bool) -> None:
    cb = m.clb
    lanes = np.flatnonzero(exe)
    if not lanes.size:
        return
    k_of = cb.bcl[m.cta_local[lanes]]
    again = cb.arrived[lanes] == cb.phase[k_of]
    if again.any():
        raise _Fault("fault", f"barrier.cluster.arrive executed twice by "
                              f"{m._who(int(m.glane[lanes[again][0]]))} in one phase, without a "
                              f"barrier.cluster.wait between ({m.prog.where(pc)})")
    cb.arrived[lanes] = cb.phase[k_of]
    for k in np.unique(k_of):
        ls = lanes[k_of == k]
        cb.count[k] += ls.size
        if cb.bvc is not None:
            tl = ls[ls < m.ntr]
            if tl.size:
                if relaxed:
                    contrib = cb.rel_vc[tl].max(axis=0)
                    iv = cb.rel_vc[tl].copy()
                    iv[np.arange(tl.size), m.vcol[tl]] = np.maximum(
                        iv[np.arange(tl.size), m.vcol[tl]], cb.mbi[tl])
                    icontrib = iv.max(axis=0)
                else:
                    contrib = m.vc[tl].max(axis=0)
                    icontrib = contrib
                cb.bvc[k] = np.maximum(cb.bvc[k], contrib)
                cb.bivc[k] = np.maximum(cb.bivc[k], icontrib)
                m._tick(tl)
    for k in np.unique(k_of):
        _complete(m, int(k))


def _wait(m, pc: int, exe: np.ndarray, active: np.ndarray) -> bool:
    cb = m.clb
    lanes = np.flatnonzero(exe)
    if lanes.size:
        if (cb.arrived[lanes] < 0).any():
            ln = int(lanes[cb.arrived[lanes] < 0][0])
            raise _Fault("fault", f"barrier.cluster.wait by {m._who(int(m.glane[ln]))} without a "
                                  f"preceding barrier.cluster.arrive ({m.prog.where(pc)})")
        k_of = cb.bcl[m.cta_local[lanes]]
        passed = cb.arrived[lanes] < cb.phase[k_of]
        go, stay = lanes[passed], lanes[~passed]
        if go.size and cb.pvc is not None:
            tl = go[go < m.ntr]
            kk = cb.bcl[m.cta_local[tl]]
            m.vc[tl] = np.maximum(m.vc[tl], cb.pvc[kk])
            cb.ivc[tl] = np.maximum(cb.ivc[tl], cb.pivc[kk])
        cb.arrived[go] = -1
        m.blocked[stay] = True
        m.block_kind[stay] = 3
        m.block_id[stay] = cb.bcl[m.cta_local[stay]]
    m.pc[active & ~m.blocked] = pc + 1
    return True


@handler("bar", "barrier")
def _bar(m, ins, pc, exe, active):
    """``barrier.cluster.arrive{.release|.relaxed}{.aligned}`` and
    ``barrier.cluster.wait{.acquire}{.aligned}`` (PTX ISA 9.1 ``barrier.cluster``); every other
    form goes to the CTA barrier handler of :mod:`emulator.ops`."""
    mods = m._types[pc][0]
    if "cluster" not in mods:
        return _ops._bar(m, ins, pc, exe, active)
    if "arrive" in mods:
        _arrive(m, pc, exe, "relaxed" in mods)
        return None
    if "wait" in mods:
        return _wait(m, pc, exe, active)
    raise m.prog.unsupported(pc)


def on_exit(m, exe: np.ndarray) -> None:
    """Record exiting threads; when a CTA's last thread exits, check HB9 on its shared memory
    and let cluster barriers waiting only on exited threads complete."""
    cb = m.clb
    T = m.T
    ctas = np.unique(m.cta_local[exe])
    for c in ctas:
        c = int(c)
        if cb.exit_vc is not None:
            ls = np.flatnonzero(exe[c * T:(c + 1) * T]) + c * T
            ls = ls[ls < m.ntr]
            if ls.size:
                cb.exit_vc[c] = np.maximum(cb.exit_vc[c], m.vc[ls].max(axis=0))
        if m.done[c * T:(c + 1) * T].all() and not cb.exited[c]:
            cb.exited[c] = True
            if m.ntr and c * T < m.ntr:
                _exit_check(m, c)
                _cta_pair.exit_check(m, c)  # HB9: a CTA-pair MMA still using this CTA
                _arrival_check(m, c)
                _outgoing_check(m, c)
        _complete(m, int(cb.bcl[c]))


def _exit_check(m, c: int) -> None:
    """HB9 at the exit of CTA ``c``: the last peer reader/writer of each of its shared bytes."""
    sh = m.sshadow
    S = m.shared.shape[1]
    T, NT = m.T, m.n_ctas * m.T
    idx = sh.slots(np.arange(c * S, (c + 1) * S, dtype=np.int64))
    me = int(m.batch_ids[c])
    cb = m.clb
    for lane_f, clk_f, pc_f, what in ((sh.w_lane, sh.w_clk, sh.w_pc, "write"),
                                      (sh.r_lane, sh.r_clk, sh.r_pc, "read")):
        wl = lane_f[idx]
        real = (wl >= 0) & (wl < NT)
        if not real.any():
            continue
        wcta = wl // T
        peer = real & (wcta != me)
        if not peer.any():
            continue
        pi = np.flatnonzero(peer)
        col = m.rk_of[wcta[pi]] * (T + ASYNC_UNITS) + wl[pi] % T
        late = clk_f[idx[pi]] > cb.exit_vc[c, col]
        if what == "write" and late.any() and m.flag_obs:
            # a peer's strong write that a thread of this CTA read (it observed it, so it
            # was performed before the exit: emulator.flags.observe)
            for q in np.flatnonzero(late):
                b = c * S + int(pi[q])
                if m.flag_obs.get(b) == (int(wl[pi[q]]), int(clk_f[idx[pi[q]]]), me):
                    late[q] = False
        if not late.any():
            continue
        j = int(pi[np.flatnonzero(late)[0]])
        ppc = int(pc_f[idx[j]])
        key = ("HB9", "exit", ppc)
        if key in m.findings:
            return
        i1 = m.prog.insts[ppc]
        m.findings[key] = Finding(
            rule="HB9", severity="error", file=m.prog.filename, line=i1.line, col=i1.col,
            message=(f"CTA {me} exits while the {what} '{i1.opcode}' of its shared memory by "
                     f"{m._who(int(wl[j]))} is not ordered before the exit: the peer may still "
                     f"access released shared memory"),
            notes=[Note(message="missing synchronisation: a cluster barrier "
                                "(barrier.cluster.arrive + barrier.cluster.wait) after the "
                                "peer's last access and before the owner exits")])
        return


def _arrival_check(m, c: int) -> None:
    """HB9 at the exit of CTA ``c``: a peer's asynchronous arrival on one of its mbarriers
    (:meth:`Machine.mbar_remote_async`) in a phase no thread of ``c`` observed. Only an
    observed phase shows that the arrival was performed; a cluster barrier the issuer reaches
    after issuing does not (the arrival is made by the async proxy at completion: CUTLASS's
    "producer tail" waits on every stage's empty barrier for this reason)."""
    for (cta, off), st in m.mbar.items():
        if cta == c:
            late_arrival_check(m, c, off, st)


def late_arrival_check(m, c: int, off: int, st: dict, inval_pc: int | None = None) -> None:
    """HB9 for one mbarrier of CTA ``c`` (at shared ``off``, state ``st``) at the CTA's exit
    or, with ``inval_pc``, at its ``mbarrier.inval`` (which ends the object as the exit does:
    triton#10409, a CTA that invalidates its barriers and exits without the producer tail): a
    peer's asynchronous arrival on it in a phase no thread of ``c`` observed."""
    if not st.get("remote"):
        return
    seen = int(st.get("seen", 0))
    late = [(pc, ph, who) for (pc, who), ph in st["remote"].items() if ph >= seen]
    if not late:
        return
    pc, ph, who = min(late)
    key = ("HB9", "arrival", pc)
    if key in m.findings:
        return
    i1 = m.prog.insts[pc]
    when = ("exits" if inval_pc is None else
            f"invalidates it ('{m.prog.insts[inval_pc].opcode}' at line "
            f"{m.prog.insts[inval_pc].line})")
    m.findings[key] = Finding(
        rule="HB9", severity="error", file=m.prog.filename, line=i1.line, col=i1.col,
        message=(f"CTA {int(m.batch_ids[c])} {when} while the asynchronous arrival of "
                 f"'{i1.opcode}' (issued by CTA {who}) on its mbarrier at shared 0x{off:x} "
                 f"is not known to have been performed: no thread of CTA "
                 f"{int(m.batch_ids[c])} waited on phase {ph} or a later one"),
        notes=[Note(message="missing synchronisation: before exiting, wait on the phases "
                            "of the mbarrier that peers' asynchronous operations arrive on "
                            "(a producer tail); a cluster barrier after the issue does not "
                            "order an asynchronous arrival")])


def _outgoing_check(m, c: int) -> None:
    """HB9 at the exit of CTA ``c``: a bulk copy it issued from its own shared memory to a
    peer (``cp.async.bulk.shared::cluster.shared::cta``) whose completion, observed by a wait
    of a thread of the peer on the peer's mbarrier, is not ordered before the exit. The copy
    reads its source until it completes (PTX ISA 9.1 §9.7.9.25.4.1: the source must stay
    valid); a CTA's shared memory is released at its exit, and only the receiver's mbarrier
    tells that the copy completed: the sender learns it through a cluster barrier after the
    receiver's wait."""
    me = int(m.batch_ids[c])
    cb = m.clb
    if cb.exit_vc is None:
        return
    for (cta, off), st in m.mbar.items():
        if cta == c or not st.get("remote"):
            continue
        obs = st.get("obs", {})
        for (pc, who), ph in sorted(st["remote"].items()):
            op = m.prog.insts[pc].opcode
            if who != me or not op.startswith("cp.async.bulk.shared::cluster.shared::cta"):
                continue
            if any(p > ph and cb.exit_vc[c, m.vcol[ln]] >= k
                   for p, seen in obs.items() for ln, k in seen.items()):
                continue
            key = ("HB9", "outgoing", pc)
            if key in m.findings:
                continue
            i1 = m.prog.insts[pc]
            peer = int(m.batch_ids[cta])
            m.findings[key] = Finding(
                rule="HB9", severity="error", file=m.prog.filename, line=i1.line, col=i1.col,
                message=(f"CTA {me} exits while its bulk copy '{op}' from its shared memory to "
                         f"CTA {peer} may still read the source: CTA {peer}'s wait on the "
                         f"copy's completion (phase {ph} of its mbarrier at shared 0x{off:x}) "
                         f"is not ordered before the exit"),
                notes=[Note(message="missing synchronisation: a cluster barrier after the "
                                    "receivers' waits and before the sender exits")])


# ------------------------------------------------------------------ fences, mapa
def release_fence(m, exe: np.ndarray, init_only: bool) -> None:
    """A cluster-scope release fence by ``exe``: snapshot the clocks a later relaxed arrive
    publishes (not for ``fence.mbarrier_init``, which orders only the inits) and publish the
    thread's earlier ``mbarrier.init`` s cluster-wide."""
    if not m.ntr:
        return
    lanes = np.flatnonzero(exe)
    lanes = lanes[lanes < m.ntr]
    if not lanes.size:
        return
    cb = m.clb
    clk = m.vc[lanes, m.vcol[lanes]]
    if not init_only:
        cb.rel_vc[lanes] = m.vc[lanes]
        if m.xvc or m.xfence:  # and what the lanes know of other clusters now
            for ln in lanes.tolist():
                x = m.xvc.get(ln)
                if x:
                    m.xfence[ln] = x
                else:
                    m.xfence.pop(ln, None)
    cb.mbi[lanes] = clk
    gl = {int(m.glane[x]): int(x) for x in lanes}
    for st in m.mbar.values():
        il = st.get("init_lane")
        if il is not None and int(m.glane[il]) in gl and st["init_clk"] <= clk[
                np.flatnonzero(lanes == il)[0]]:
            st["init_fenced"] = int(m.vc[il, m.vcol[il]])
    m._tick(lanes)


@handler("fence")
def _fence(m, ins, pc, exe, active):
    """``fence.mbarrier_init.release.cluster`` and cluster-or-wider ``fence.acq_rel``/
    ``fence.sc`` (PTX ISA 9.1 ``membar/fence``), then the proxy fences of :mod:`emulator.ops`."""
    parts = ins.parts[1:]
    if "mbarrier_init" in parts:
        # orders only the inits (PTX ISA 9.1 'fence': .mbarrier_init "only applies to the prior
        # mbarrier.init operations"): not a proxy fence for data (red team round 12)
        release_fence(m, exe, init_only=True)
        return None
    alvl = _flags.acquire_level(parts)
    if alvl is not None:
        m.acquire_fence(exe, alvl)
    lvl = _flags.fence_level(parts)
    if lvl is not None:  # a release fence: what a later relaxed flag write publishes
        _flags.release_fence(m, exe, lvl)
    if ("acq_rel" in parts or "sc" in parts) and any(
            s in parts for s in ("cluster", "gpu", "sys")):
        release_fence(m, exe, init_only=False)
    return _ops._fence(m, ins, pc, exe, active)


@handler("membar")
def _membar(m, ins, pc, exe, active):
    """``membar.gl``/``membar.sys`` are ``fence.sc.gpu/sys`` (PTX ISA 9.1 ``membar/fence``);
    ``membar.cta`` orders nothing across CTAs."""
    lvl = _flags.fence_level(ins.parts[1:])
    if lvl is not None:  # membar is fence.sc (PTX ISA 9.1 membar/fence): acquire, release
        m.acquire_fence(exe, lvl)
        _flags.release_fence(m, exe, lvl)
    if any(s in ins.parts[1:] for s in ("gl", "sys")):
        release_fence(m, exe, init_only=False)
    return None


@handler("mapa")
def _mapa(m, ins, pc, exe, active):
    """``mapa{.shared::cluster}.u32|u64 d, a, rank`` (PTX ISA 9.1 ``mapa``): the address of
    ``a``'s location in the shared memory of CTA ``rank`` of the cluster."""
    mods, types = m._types[pc]
    t = types[0] if types else "u64"
    d, a, b = ins.operands[:3]
    addr = np.broadcast_to(m.read(a, "u64" if t in ("u64", "b64") else "u32", pc),
                           (m.N,)).astype(np.int64)
    rank = np.broadcast_to(m.read(b, "u32", pc), (m.N,)).astype(np.int64)
    lanes = np.flatnonzero(exe)
    if lanes.size and (rank[lanes] >= m.C).any():
        bad = int(rank[lanes][rank[lanes] >= m.C][0])
        raise _Fault("fault", f"mapa to CTA rank {bad} of a {m.C}-CTA cluster "
                              f"({m.prog.where(pc)})")
    generic = "shared::cluster" not in mods
    base = addr - SHARED_WINDOW if generic else addr
    if generic and lanes.size and ((base[lanes] < 0) | (base[lanes] >= 1 << 32)).any():
        raise _Fault("fault", f"mapa of a generic address outside shared memory "
                              f"({m.prog.where(pc)})")
    off = base & _OFF_MASK
    out = ((rank + 1) << RANK_SHIFT) | off
    if generic:
        out = out + SHARED_WINDOW
    m.write(d, out.astype(np.uint64 if t in ("u64", "b64") else np.uint32), exe, pc)
    return None


def special(m, head: str, a: int) -> np.ndarray | None:
    """Cluster special registers per axis (PTX ISA 9.1 §10: ``%clusterid``, ``%nclusterid``,
    ``%cluster_ctaid``, ``%cluster_nctaid``)."""
    cd = m.cdims
    if head == "clusterid":
        return (m.ctaid[a] // cd[a]).astype(np.uint32)
    if head == "nclusterid":
        return np.full(m.N, m.launch.grid[a] // cd[a], np.uint32)
    if head == "cluster_ctaid":
        return (m.ctaid[a] % cd[a]).astype(np.uint32)
    if head == "cluster_nctaid":
        return np.full(m.N, cd[a], np.uint32)
    return None


def special_flat(m, name: str) -> np.ndarray | None:
    """``%cluster_ctarank``, ``%cluster_nctarank``, ``%is_explicit_cluster``."""
    if name == "cluster_ctarank":
        return m.rk_of[m.batch_ids[m.cta_local]].astype(np.uint32)
    if name == "cluster_nctarank":
        return np.full(m.N, m.C, np.uint32)
    if name == "is_explicit_cluster":
        return np.full(m.N, m.explicit_cluster, np.bool_)
    return None


# ------------------------------------------------------------------ TMA multicast
def tma_multicast(m, ins, pc, exe) -> None:
    """``cp.async.bulk{.tensor.Nd}.shared::cluster.global.mbarrier::complete_tx::bytes
    .multicast::cluster [dst], [tmap, {coords}] | [src], size, [mbar], ctaMask`` (PTX ISA 9.1
    ``cp.async.bulk.tensor``, ``cp.async.bulk``): the box (the ``size`` bytes at global ``src``)
    lands at the same shared offset ``dst`` in every CTA of the cluster whose rank bit is set in
    ``ctaMask``, and each of those CTAs' mbarrier at offset ``mbar`` receives the
    ``complete_tx`` of its bytes. The writes belong to the issuing CTA's copy unit of each
    destination's mbarrier (``registry.copy_unit``: its offset and the destination's rank), one
    epoch per destination, which that CTA's complete_tx releases; a reader is ordered after the
    bytes in its CTA only through its own mbarrier's phase, and after those in a peer only
    through synchronisation with a thread of the peer that waited."""
    from emulator import async_copy as _ac

    mods = m._types[pc][0]
    tensor = "tensor" in mods
    if "mbarrier::complete_tx::bytes" not in mods or "cta_group::2" in mods or any(
            x.startswith("im2col") for x in mods):
        raise m.prog.unsupported(pc)
    ops = ins.operands
    n_ops = 4 if tensor else 5
    if len(ops) < n_ops:
        raise m.prog.unsupported(pc, f"'{ins.opcode}' without a ctaMask operand")
    mask = np.broadcast_to(m.read(ops[n_ops - 1], "u16", pc), (m.N,))
    mop = ops[2] if tensor else ops[3]
    size = (None if tensor else np.broadcast_to(m.read(ops[2], "u32", pc), (m.N,)))
    for ln in np.flatnonzero(exe):
        ln = int(ln)
        if tensor:
            tm, coords, tag = _ac._tmap_operand(m, ops[1], ln, pc)
        dst = int(m.address(ops[0], pc)[ln]) & _OFF_MASK
        if dst % (128 if tensor else 16):
            raise _Fault("fault", f"{'TMA' if tensor else 'bulk copy'} destination 0x{dst:x} is "
                                  f"not {128 if tensor else 16}-byte aligned ({m.prog.where(pc)})")
        mbar = int(m.address(mop, pc)[ln]) & _OFF_MASK
        bits = int(mask[ln]) & ((1 << m.C) - 1)
        if int(mask[ln]) >> m.C:
            raise _Fault("fault", f"ctaMask 0x{int(mask[ln]):x} names CTAs beyond the "
                                  f"{m.C}-CTA cluster ({m.prog.where(pc)})")
        me = int(m.rk_of[m.batch_ids[int(m.cta_local[ln])]])
        if tensor and tag is not None and tag.probe:  # on every destination CTA's mbarrier
            for r in range(m.C):
                if (bits >> r) & 1:
                    m.tmap_probe.load(m, ln, tag.index, coords, dst,
                                      mbar if r == me else ((r + 1) << RANK_SHIFT) | mbar, pc)
            continue
        if tensor:
            _ac._check_tile(m, tm, pc, ins.opcode)
            data = _ac._load_box(m, tm, coords, pc, ln if tag is None else None)
            offs = _ac._swizzled(dst + np.arange(data.size, dtype=np.int64), tm.swizzle)
        else:
            n = int(size[ln])
            src = int(m.address(ops[1], pc)[ln])
            if n % 16 or n <= 0 or src % 16:
                raise _Fault("fault", f"bulk copy of {n} bytes from 0x{src:x}: the size must be "
                                      f"a positive multiple of 16 and the source 16-byte "
                                      f"aligned ({m.prog.where(pc)})")
            _ac.global_async_read(m, ln, np.array([src], np.uint64), n, pc)
            data = m.gmem.read(np.array([src], np.uint64), n).reshape(-1)
            offs = dst + np.arange(n, dtype=np.int64)
        _multicast_write(m, ln, pc, offs, data, mbar, bits, me)


def _multicast_write(m, ln: int, pc: int, offs: np.ndarray, data: np.ndarray, mbar: int,
                     bits: int, me: int) -> None:
    """The bytes ``data`` of a multicast copy by lane ``ln`` (cluster rank ``me``) at shared
    offsets ``offs`` of every CTA whose rank bit is in ``bits``, each completing on its own
    mbarrier at offset ``mbar`` (see :func:`tma_multicast`)."""
    from emulator import async_copy as _ac

    S = m.shared.shape[1]
    if offs.size and (int(offs.min()) < 0 or int(offs.max()) >= m.smem_bytes):
        raise _Fault("fault", f"multicast copy outside the {m.smem_bytes} B of shared "
                              f"memory ({m.prog.where(pc)})")
    c = int(m.cta_local[ln])
    for r in range(m.C):
        if not (bits >> r) & 1:
            continue
        a = mbar if r == me else ((r + 1) << RANK_SHIFT) | mbar
        # each destination CTA's bytes under the unit of its own mbarrier at one epoch,
        # which only that mbarrier's complete_tx releases: a CTA that observed its own
        # mbarrier is not ordered after the bytes the multicast wrote into its peers
        unit = copy_unit(mbar, r, m.C)
        epoch = _ac._epoch(m, c, unit)
        tc = int(m.clb.peer[c, r])
        if m.clb.exited[tc]:
            _exit_access(m, pc, tc)
        flat = tc * S + offs
        if m.ntr and ln < m.ntr:
            _ac.war_proxy_check(m, ln, flat, pc)
            m._hb_check(m.sshadow, "shared", np.array([ln]), flat[None, :], pc,
                        data[None, :], "plain")
            slots = m.sshadow.slots(flat)
            m.sshadow.w_lane[slots] = _ac._unit_lane(m, c, unit)
            m.sshadow.w_clk[slots] = epoch
        m.shared.reshape(-1)[flat] = data
        _ac._complete_tx(m, ln, a, data.size, epoch, pc)
