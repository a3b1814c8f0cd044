"""tcgen05 at CTA-pair granularity (``.cta_group::2``, sm_100a), with its happens-before rules.

The pair (PTX ISA 9.1 §9.7.16.5.1 CTA Pair, §9.7.16.5.2 Peer CTA): two CTAs of a cluster whose
``%cluster_ctarank`` differ only in bit 0; the one with bit 0 clear is the even CTA, the other
the odd CTA, and each is the other's peer. A cluster whose size leaves a CTA without a peer
(a cluster of 1 or 3 CTAs) cannot run ``.cta_group::2``: a ``fault``.

Issue granularity (§9.7.16.5, the issue-granularity table):

* ``tcgen05.alloc`` / ``dealloc`` / ``relinquish_alloc_permit`` ``.cta_group::2``: one warp in
  each CTA of the pair performs the operation collectively; "the first warp to perform the
  operation could block until the second warp in the Peer CTA also performs the operation".
  The emulator always blocks (the conservative reading: a kernel that deadlocks when the first
  warp blocks is wrong, PTX ISA 9.1 §9.7.16.5, the dealloc example with a cluster barrier after
  the dealloc in one CTA only). A warp waiting for a peer that never comes (it exited, or waits
  elsewhere) ends in a deadlock (``HB2``). The allocation is held jointly by both CTAs
  (§9.7.16.7.1): the same columns are taken in both CTAs' TMEM (the first fit over the columns
  free in both) and each warp's ``[dst]`` (its own CTA's shared memory) receives the address;
  the dealloc frees them in both. Both warps must pass the same ``nCols`` (and, for the dealloc,
  the same address): otherwise a ``fault``. The collective orders nothing between the two warps
  (the ISA states no memory ordering for it).
* ``tcgen05.mma.cta_group::2`` (§9.7.16.10, data-path layouts §9.7.16.10.5 Layouts A and B): a
  single thread of the pair issues it; the emulator models the even CTA as the issuer (CUTLASS's
  ``umma_arrive_multicast_2x1SM`` / 2SM MMA atoms issue from the even, "leader" CTA) and reports
  an issue from the odd CTA as unsupported. "When the current CTA issues the operation, the peer
  CTA should be active and should not have exited" (§9.7.16.5, for ``mma`` and ``commit``): an
  issue after the peer CTA exited is a ``fault``. Operands: the shared-memory descriptors are
  offsets in the current CTA's shared memory (§9.7.16.4.1) and name the same offsets in both
  CTAs, each CTA holding
  half of each operand: with ``M`` the instruction's M (128 or 256, idesc bits 24-28) and ``N``
  (bits 17-22, a multiple of 16), A (M x K) is rows ``0 .. M/2-1`` from the even CTA and
  ``M/2 .. M-1`` from the odd CTA, each half the (M/2) x K matrix its descriptor describes; B
  (N x K, K-major as the descriptor describes, or its transpose) is rows ``0 .. N/2-1`` from the
  even CTA and ``N/2 .. N-1`` from the odd CTA. ``D = A @ B^T (+ D)`` (M x N, f32 or s32);
  rows ``0 .. M/2-1`` land in the even CTA's TMEM and ``M/2 .. M-1`` in the odd CTA's, at the
  same TMEM address (lane 0 required):

  - M = 256 (Layout A): CTA row ``r`` (0..127), column ``n`` -> lane ``r``, column ``col0 + n``.
  - M = 128 (Layout B, "2x2" data path): CTA row ``r`` (0..63), column ``n`` -> lane
    ``r + 64 * (n >= N/2)``, column ``col0 + n mod N/2`` (the two column halves folded onto
    the two 64-lane halves; this per-element mapping is the one TVM's TIRx documents for
    ``tmem_datapath_layout('B')``: the ISA shows it as a figure only).

  Kinds ``f16`` (f16/bf16), ``tf32``, ``f8f6f4`` (E4M3/E5M2) and ``i8`` with both operands in
  shared memory. Unsupported: A in TMEM, ``.ws``, sparse, block scaling, the
  disable-output-lane forms, ``tcgen05.cp`` / ``tcgen05.shift`` ``.cta_group::2``.
* ``tcgen05.commit.cta_group::2...`` (§9.7.16.12.1): like ``.cta_group::1``, one arrive (count 1,
  cluster scope) on the mbarrier, or with ``.multicast::cluster`` on the mbarrier at the same
  offset in each CTA named in ``ctaMask``, when the executing thread's prior ``.cta_group::2``
  operations complete.

Happens-before. The MMA completes at issue (as for ``.cta_group::1``), but its effects are
published only through the commit:

* its shared-memory reads, in both CTAs, are async-proxy reads of the issuer's CTA's tensor-core
  unit (``Machine.async_read``: the issuer must be ordered after the writes - a TMA's
  complete_tx it observed, or generic stores followed by ``fence.proxy.async`` and
  synchronisation with the issuer; HB4 / HB1 otherwise);
* its TMEM writes in both CTAs carry the issuer CTA's tensor-core epoch
  (``_TmemShadow.a_clk`` with ``a_cta`` naming the issuer's CTA): a ``tcgen05.ld`` of those
  cells by a thread that has not acquired that epoch (a wait on the phase of an mbarrier the
  issuer's ``tcgen05.commit`` arrives on, or ordering after such a waiter) is HB1 - in the odd
  CTA this needs the commit to arrive on the odd CTA's mbarrier too (``.multicast::cluster``
  with its bit in the mask, or a commit to its mapa'd mbarrier);
* ``dealloc``: "before attempting to deallocate Tensor Memory, it suffices to ensure that there
  are no concurrent Tensor Memory accesses from the Peer CTA" (§9.7.16.5): freeing columns a
  pair MMA writes while neither of the two dealloc warps has acquired its completion is HB1;
* exit: a CTA of the pair whose last thread exits while a pair MMA that reads its shared memory
  and writes its TMEM is not known complete to it (the joined clocks of its exited threads lack
  the issuer's epoch) is HB9: its shared memory is released at exit while the tensor core may
  still use it.
"""

from __future__ import annotations

import numpy as np

from emulator import ops as _ops
from emulator.registry import _Fault
from verifier.findings import Finding, Note

__all__ = ["dispatch", "exit_check", "live_peer", "pair_peer", "BLOCK_KIND"]

#: ``Machine.block_kind`` of a warp waiting for its peer CTA's warp in a collective
#: alloc / dealloc / relinquish_alloc_permit (``block_id``: the pc it waits at)
BLOCK_KIND = 5


class _PairState:
    """Per emulation batch: warps waiting at a pair collective, and per batch CTA the newest
    pair MMA touching its shared memory / TMEM (issuer's batch CTA, epoch, pc)."""

    def __init__(self, ncta: int):
        self.waiting: dict[tuple[int, str], list[dict]] = {}
        self.mma_epoch = np.zeros(ncta, np.int64)
        self.mma_by = np.full(ncta, -1, np.int64)
        self.mma_pc = np.full(ncta, -1, np.int64)


def _state(m) -> _PairState:
    st = getattr(m, "_pair_st", None)
    if st is None or m._pair_st_batch is not m.batch_ids:
        st = _PairState(m.shared.shape[0])
        m._pair_st, m._pair_st_batch = st, m.batch_ids
    return st


def pair_peer(m, c: int, pc: int) -> int:
    """The batch-local CTA of the peer of batch CTA ``c`` (cluster rank ``rank ^ 1``, PTX ISA
    9.1 §9.7.16.5.2).

    Raises:
        _Fault: ``fault`` when the cluster has no CTA of that rank.
    """
    rk = int(m.rk_of[m.batch_ids[c]])
    if (rk ^ 1) >= m.C:
        ins = m.prog.insts[pc]
        raise _Fault("fault", f"'{ins.opcode}' needs a CTA pair, but CTA {int(m.batch_ids[c])} "
                              f"(cluster rank {rk}) has no peer in its {m.C}-CTA cluster (PTX "
                              f"ISA 9.1 §9.7.16.5.1: the peer has rank {rk ^ 1}) "
                              f"({m.prog.where(pc)})")
    return int(m.clb.peer[c, rk ^ 1])


def live_peer(m, c: int, pc: int) -> int:
    """:func:`pair_peer` for an operation issued by a single thread of the pair (``mma``,
    ``commit``): "the peer CTA should be active and should not have exited" (PTX ISA 9.1
    §9.7.16.5).

    Raises:
        _Fault: ``fault`` without a peer, or when the peer CTA has exited.
    """
    p = pair_peer(m, c, pc)
    if m.clb.exited[p]:
        ins = m.prog.insts[pc]
        raise _Fault("fault", f"'{ins.opcode}' issued by CTA {int(m.batch_ids[c])} after its "
                              f"peer CTA {int(m.batch_ids[p])} exited (PTX ISA 9.1 §9.7.16.5: "
                              f"the peer CTA should be active and should not have exited) "
                              f"({m.prog.where(pc)})")
    return p


def dispatch(m, ins, pc, exe, active, mods):
    """The ``tcgen05 ... .cta_group::2`` handler (module docstring); the multicast commit is
    :func:`emulator.tcgen05_ext._tc_commit_multicast` (called by the caller)."""
    op = mods[0]
    if op in ("alloc", "dealloc", "relinquish_alloc_permit"):
        return _collective(m, ins, pc, exe, active, op)
    if op == "mma":
        if any(x in mods for x in ("block_scale", "ws", "sp")) or not any(
                x.startswith("kind::") for x in mods):
            raise m.prog.unsupported(pc, f"'{ins.opcode}' (block-scaled, .ws and sparse "
                                         f"CTA-pair MMAs are not modelled)")
        _mma(m, ins, pc, exe, mods)
        return None
    if op == "commit":
        if "mbarrier::arrive::one" not in mods:
            raise m.prog.unsupported(pc)
        _commit(m, ins, pc, exe)
        return None
    # tcgen05.cp / tcgen05.shift .cta_group::2 (the message the .cta_group::1-only emulator gave)
    raise m.prog.unsupported(pc, f"'{ins.opcode}' (2-CTA)")


# ------------------------------------------------------------------ collectives
def _collective(m, ins, pc, exe, active, op: str) -> bool:
    """One warp of each CTA of the pair performs ``op`` together; the first to come blocks until
    its peer's warp comes (module docstring)."""
    st = _state(m)
    ops = ins.operands
    if op == "alloc":
        addr = _ops._addr_u(m, ops[0], pc)
        ncol = np.broadcast_to(m.read(ops[1], "u32", pc), (m.N,))
    elif op == "dealloc":
        taddr = (np.broadcast_to(m.read(ops[0], "u32", pc), (m.N,)) if ops[0].kind != "imm"
                 else np.full(m.N, int(ops[0].value or 0), np.int64))
        ncol = np.broadcast_to(m.read(ops[1], "u32", pc), (m.N,))
    for ln in _ops._warp_leaders(m, exe):
        c = int(m.cta_local[ln])
        p = pair_peer(m, c, pc)
        w = int(m.tid[ln]) // 32
        wl = np.flatnonzero(exe & (m.cta_local == c) & (m.tid // 32 == w))
        entry = {"c": c, "lanes": wl, "leader": int(ln), "pc": pc}
        if op == "alloc":
            entry["addr"], entry["n"] = int(addr[ln]), int(ncol[ln])
        elif op == "dealloc":
            entry["taddr"], entry["n"] = int(taddr[ln]) & 0xFFFFFFFF, int(ncol[ln])
        q = st.waiting.setdefault((min(c, p), op), [])
        partner = next((e for e in q if e["c"] == p), None)
        if partner is None:
            q.append(entry)
            m.blocked[wl] = True
            m.block_kind[wl] = BLOCK_KIND
            m.block_id[wl] = pc
            continue
        q.remove(partner)
        if op == "alloc":
            _alloc(m, partner, entry, pc)
        elif op == "dealloc":
            _dealloc(m, partner, entry, pc)
        pl = partner["lanes"]
        m.blocked[pl] = False
        m.block_kind[pl] = 0
        m.pc[pl] = partner["pc"] + 1
    m.pc[active & ~m.blocked] = pc + 1
    return True


def _alloc(m, e1: dict, e2: dict, pc: int) -> None:
    """The joint allocation of ``n`` columns in both CTAs; each warp's ``[dst]`` gets the
    address (PTX ISA 9.1 §9.7.16.7.1, ``.cta_group::2``: "ownership is held jointly")."""
    if e1["n"] != e2["n"]:
        raise _Fault("fault", f"tcgen05.alloc.cta_group::2: the warps of the CTA pair ask for "
                              f"{e1['n']} and {e2['n']} columns (one collective allocation) "
                              f"({m.prog.where(pc)})")
    n = e1["n"]
    c1, c2 = e1["c"], e2["c"]
    used = m.tmem_used[c1] | m.tmem_used[c2]
    base = next((b for b in range(0, 512 - n + 1, 32) if not used[b:b + n].any()), -1)
    if base < 0:
        raise _Fault("fault", f"tcgen05.alloc.cta_group::2 of {n} columns: only "
                              f"{int(512 - used.sum())} are free in both CTAs of the pair "
                              f"({m.prog.where(pc)})")
    _ops._tmem(m)
    for e in (e1, e2):
        m.tmem_used[e["c"], base:base + n] = True
        one = np.zeros(m.N, np.bool_)
        one[e["leader"]] = True
        m.mem_access("shared", np.full(m.N, e["addr"], np.int64), 4, one, e["pc"],
                     data=np.array([[base]], np.uint32).view(np.uint8).reshape(1, 4))


def _dealloc(m, e1: dict, e2: dict, pc: int) -> None:
    """The joint deallocation; HB1 when a pair MMA may still write the freed columns."""
    if (e1["taddr"], e1["n"]) != (e2["taddr"], e2["n"]):
        raise _Fault("fault", f"tcgen05.dealloc.cta_group::2: the warps of the CTA pair free "
                              f"different columns (0x{e1['taddr']:x}, {e1['n']} and "
                              f"0x{e2['taddr']:x}, {e2['n']}) ({m.prog.where(pc)})")
    c0, n = e1["taddr"] & 0xFFFF, e1["n"]
    for e in (e1, e2):
        c = e["c"]
        if c0 + n > 512 or not m.tmem_used[c, c0:c0 + n].all():
            raise _Fault("fault", f"tcgen05.dealloc.cta_group::2 of columns {c0}-{c0 + n - 1}, "
                                  f"which are not all allocated in CTA {int(m.batch_ids[c])} "
                                  f"(a double free, or no matching alloc) ({m.prog.where(pc)})")
    _dealloc_race(m, e1, e2, c0, n, pc)
    for e in (e1, e2):
        m.tmem_used[e["c"], c0:c0 + n] = False


def _dealloc_race(m, e1: dict, e2: dict, c0: int, n: int, pc: int) -> None:
    from emulator import tcgen05_ext as _ext
    sh = _ext._tsh(m)
    if sh is None:
        return
    lanes = np.concatenate([e1["lanes"], e2["lanes"]])
    lanes = lanes[lanes < m.ntr]
    if not lanes.size:
        return
    known = m.vc[lanes].max(axis=0)  # what the two warps together know (the collective)
    for e in (e1, e2):
        c = e["c"]
        need = sh.a_clk[c, :, c0:c0 + n]
        src = sh.a_cta[c, :, c0:c0 + n]
        late = need > known[m.acol[src]]
        if not late.any():
            continue
        key = ("HB1", "tmem-dealloc", pc)
        if key in m.findings:
            return
        ins = m.prog.insts[pc]
        by = int(m.batch_ids[int(src[late][0])])
        m.findings[key] = Finding(
            rule="HB1", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
            message=(f"'{ins.opcode}' frees TMEM columns {c0}-{c0 + n - 1} of CTA "
                     f"{int(m.batch_ids[c])} that an asynchronous 'tcgen05.mma' issued by CTA "
                     f"{by} may still write: neither warp of the collective dealloc has "
                     f"observed its completion"),
            notes=[Note(message="missing synchronisation: a wait on the phase of the mbarrier "
                                "the MMA's 'tcgen05.commit' arrives on (or ordering after a "
                                "thread that waited) before the dealloc (PTX ISA 9.1 "
                                "§9.7.16.5: no concurrent TMEM access from the peer CTA)")])
        return


# ------------------------------------------------------------------ the MMA
def _mma(m, ins, pc, exe, mods) -> None:
    """``tcgen05.mma.cta_group::2.kind::<k> [d], adesc, bdesc, idesc, enable_input_d`` (module
    docstring)."""
    from emulator import tcgen05_ext as _ext
    kind = next(x for x in mods if x.startswith("kind::"))
    if kind not in _ops._TC_TYPES:
        raise m.prog.unsupported(pc)
    ops = ins.operands
    if ops[1].kind == "address":
        raise m.prog.unsupported(pc, f"'{ins.opcode}' with A in tensor memory")
    if len(ops) > 5 or (len(ops) == 5 and ops[4].kind == "vector"):
        raise m.prog.unsupported(pc, f"'{ins.opcode}' operand form (disable-output-lane / "
                                     f"scale-input-d not modelled)")
    tm = _ops._tmem(m)
    S = m.shared.shape[1]
    sh = m.shared.reshape(-1)
    dt_ = np.broadcast_to(m.address(ops[0], pc), (m.N,))
    ad = np.broadcast_to(m.read(ops[1], "b64", pc), (m.N,))
    bd = np.broadcast_to(m.read(ops[2], "b64", pc), (m.N,))
    idv = np.broadcast_to(m.read(ops[3], "u32", pc), (m.N,))
    en = np.broadcast_to(m.read(ops[4], "pred", pc), (m.N,)) if len(ops) > 4 else None
    tsh = _ext._tsh(m)
    pst = _state(m)
    for ln in np.flatnonzero(exe):
        ln = int(ln)
        c = int(m.cta_local[ln])
        rk = int(m.rk_of[m.batch_ids[c]])
        p = live_peer(m, c, pc)
        if rk & 1:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' issued by the odd CTA of the pair "
                                         f"(rank {rk}); the even CTA's issue is modelled")
        idesc = int(idv[ln])
        Mv, Nv = ((idesc >> 24) & 0x1F) << 4, ((idesc >> 17) & 0x3F) << 3
        at, bt = (idesc >> 7) & 7, (idesc >> 10) & 7
        ta, tb = (idesc >> 15) & 1, (idesc >> 16) & 1
        want = 2 if kind == "kind::i8" else 1  # s32 / f32 accumulator
        if Mv not in (128, 256):
            raise _Fault("fault", f"'{ins.opcode}' with idesc 0x{idesc:x}: M = {Mv} (a CTA-pair "
                                  f"MMA has M = 128 or 256, PTX ISA 9.1 §9.7.16.10.5) "
                                  f"({m.prog.where(pc)})")
        if (idesc >> 4) & 3 != want or Nv % 16 or Nv == 0 or (idesc >> 2) & 1:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' with idesc 0x{idesc:x} (an f32/s32 "
                                         f"accumulator, dense, N a multiple of 16 modelled)")
        types = _ops._TC_TYPES[kind]
        if at not in types or bt not in types:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' operand types {at}/{bt}")
        ea, eb = np.dtype(types[at]), np.dtype(types[bt])
        K = 32 // ea.itemsize
        Mh, Nh = Mv // 2, Nv // 2
        try:
            da, db = _ops._desc100(int(ad[ln])), _ops._desc100(int(bd[ln]))
        except ValueError as e:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' descriptor ({e})") from None
        aidx = (_ops._mnmajor_bytes(da, Mh, K, ea.itemsize) if ta else
                _ops._kmajor_bytes(da, Mh, K * ea.itemsize))
        bidx = (_ops._mnmajor_bytes(db, Nh, K, eb.itemsize) if tb else
                _ops._kmajor_bytes(db, Nh, K * eb.itemsize))
        for idx in (aidx, bidx):
            if (idx < 0).any() or (idx >= m.smem_bytes).any():
                raise _Fault("fault", f"tcgen05.mma operand outside shared memory "
                                      f"({m.prog.where(pc)})")
        pair = (c, p)  # even first: its halves are the first rows of A and of B
        A = np.concatenate([np.ascontiguousarray(sh[x * S + aidx]).view(ea).astype(np.float64)
                            for x in pair])
        B = np.concatenate([np.ascontiguousarray(sh[x * S + bidx]).view(eb).astype(np.float64)
                            for x in pair])
        for x in pair:
            _ops._async_read(m, ln, x * S + aidx, pc)
            _ops._async_read(m, ln, x * S + bidx, pc)
        D = A @ B.T  # (M, N), exact products, f64 sums
        taddr = int(dt_[ln])
        lane0, col0 = (taddr >> 16) & 0xFFFF, taddr & 0xFFFF
        r = np.arange(Mh)[:, None]
        nn = np.arange(Nv)[None, :]
        if Mv == 256:  # Layout A
            L, Cc, ncols = np.broadcast_to(r, (Mh, Nv)), col0 + np.broadcast_to(nn, (Mh, Nv)), Nv
        else:  # Layout B: column halves folded onto lanes 0-63 / 64-127
            L, Cc, ncols = r + 64 * (nn >= Nh), col0 + nn % Nh, Nh
        if lane0 != 0 or col0 + ncols > 512:
            raise _Fault("fault", f"tcgen05.mma.cta_group::2 accumulator at TMEM lane {lane0}, "
                                  f"columns {col0}-{col0 + ncols - 1}: outside TMEM or not at "
                                  f"lane 0 (PTX ISA 9.1 §9.7.16.10.5) ({m.prog.where(pc)})")
        acc = np.int32 if want == 2 else np.float32
        epoch = int(m.async_clk[c]) + 1  # published by the issuer's next tcgen05.commit
        for h, x in enumerate(pair):
            if not m.tmem_used[x, col0:col0 + ncols].all():
                raise _Fault("fault", f"'{ins.opcode}' writes TMEM columns {col0}-"
                                      f"{col0 + ncols - 1} of CTA {int(m.batch_ids[x])}, which "
                                      f"are not all allocated (tcgen05.alloc.cta_group::2) "
                                      f"({m.prog.where(pc)})")
            Dx = D[h * Mh:(h + 1) * Mh]
            accumulate = en is None or bool(en[ln])
            if accumulate:
                Dx = Dx + tm[x, L, Cc].view(acc).astype(np.float64)
            if acc == np.int32:
                Dx = np.clip(Dx, -2**31, 2**31 - 1).astype(np.int64).astype(np.int32)
            tm[x, L, Cc] = np.ascontiguousarray(Dx.astype(acc)).view(np.uint32)
            if tsh is not None and ln < m.ntr:
                if accumulate:
                    _ext._tmem_acc_read_check(m, tsh, ln, x, np.arange(128), col0,
                                              col0 + ncols, pc)
                tsh.w_lane[x, :, col0:col0 + ncols] = -1
                tsh.pending[x, :, col0:col0 + ncols] = False
                tsh.done_pc[x, :, col0:col0 + ncols] = -1
                tsh.a_clk[x, :, col0:col0 + ncols] = epoch
                tsh.a_cta[x, :, col0:col0 + ncols] = c
            pst.mma_epoch[x], pst.mma_by[x], pst.mma_pc[x] = epoch, c, pc


def _commit(m, ins, pc, exe) -> None:
    """``tcgen05.commit.cta_group::2.mbarrier::arrive::one{.shared::cluster}.b64 [mbar]``: one
    arrive when the thread's prior ``.cta_group::2`` operations complete (at issue here),
    carrying its CTA's tensor-core epoch (PTX ISA 9.1 §9.7.16.12.1); ``mbar`` may be a peer
    CTA's (a mapa'd shared::cluster address)."""
    addr = _ops._addr_u(m, ins.operands[0], pc)
    for ln in np.flatnonzero(exe):
        c = int(m.cta_local[ln])
        live_peer(m, c, pc)
        epoch = m.async_complete_epoch(c)
        a = int(addr[ln]) & 0xFFFFFFFF
        st = m.mbar_get(int(ln), a, pc)
        ac = int(m.acol[c])
        st["vc"][ac] = max(int(st["vc"][ac]), epoch)
        m.mbar_remote_async(int(ln), a, pc)
        m.mbar_arrive(int(ln), a, 1, 0, pc)


# ------------------------------------------------------------------ exit
def exit_check(m, c: int) -> None:
    """HB9 when the last thread of batch CTA ``c`` exits while the newest pair MMA reading its
    shared memory and writing its TMEM is not known complete to its threads (module
    docstring)."""
    st = getattr(m, "_pair_st", None)
    if st is None or m._pair_st_batch is not m.batch_ids or st.mma_by[c] < 0 or not m.ntr:
        return
    by = int(st.mma_by[c])
    if int(m.clb.exit_vc[c, m.acol[by]]) >= int(st.mma_epoch[c]):
        return
    ppc = int(st.mma_pc[c])
    key = ("HB9", "pair-mma", ppc)
    if key in m.findings:
        return
    i1 = m.prog.insts[ppc]
    m.findings[key] = Finding(
        rule="HB9", severity="error", file=m.prog.filename, line=i1.line, col=i1.col,
        message=(f"CTA {int(m.batch_ids[c])} exits while the CTA-pair '{i1.opcode}' issued by "
                 f"CTA {int(m.batch_ids[by])} may still read its shared memory and write its "
                 f"tensor memory: no thread of the exiting CTA observed the MMA's completion"),
        notes=[Note(message="missing synchronisation: the CTA waits on the phase of an mbarrier "
                            "the MMA's 'tcgen05.commit' arrives on (e.g. "
                            "'.multicast::cluster' with its rank in ctaMask) before it exits "
                            "(PTX ISA 9.1 §9.7.16.5)")])
