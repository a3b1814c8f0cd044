"""tcgen05 extensions (sm_100a): block-scaled MMA kinds, ``tcgen05.cp`` (shared memory -> TMEM),
``tcgen05.shift`` and the cluster-multicast ``tcgen05.commit``; the ``.cta_group::2`` (CTA pair)
forms go to :mod:`emulator.cta_pair`, every other tcgen05 form to the handler of
:mod:`emulator.ops`.

Block scaling (PTX ISA 9.1 §9.7.16.10.7; instruction descriptor §9.7.16.4.2, the tables for
``.kind::mxf8f6f4`` and ``.kind::mxf4``/``.kind::mxf4nvf4``):
``D = (A * scale_A) @ (B * scale_B)^T (+ D)``. Descriptor fields: B scale-factor id (bits 4-5),
A type (7-9), B type (10-12; 10-11 for mxf4), negate A/B (13, 14), transpose A/B (15, 16),
N >> 3 (17-22), scale format (23: 1 = UE8M0, 0 = UE4M3, the latter for mxf4nvf4 only),
M >> 7 (27-28), A scale-factor id (29-30), K dimension (31, mxf4nvf4: 0 = dense K 64).

* ``.kind::mxf8f6f4`` with ``.scale_vec::1X``: K = 32 per instruction, one scale per row of A and
  per row of B^T (block 32); operands E4M3 (type 0) or E5M2 (1), one byte per element (the
  sub-byte E2M3/E3M2/E2M1 types of this kind are stored in byte containers whose bit placement
  the emulator does not model: unsupported).
* ``.kind::mxf4`` (``.scale_vec::2X``, block 32, UE8M0) and ``.kind::mxf4nvf4`` (``2X`` or
  ``4X``: block 16, UE8M0 or UE4M3): K = 64, E2M1 packed two per byte, the lower K index in the
  low nibble.

Scale factors in TMEM (the layout Triton's ``tcgen05.st`` of scales writes, matching the ISA's
requirement that they be duplicated to all four 32-lane partitions): the scale of row ``r`` (of A,
or of B^T) and K block ``j`` is byte ``SF_ID + j`` of the 32-bit word in column ``col0 + r // 32``
of lane ``32 p + r % 32``, in every partition ``p``; copies that differ between partitions are a
``fault`` (which one the hardware reads is not specified). M = 128 only (an M = 64 block-scaled
MMA is reported unsupported). UE8M0 ``0xFF`` and UE4M3 NaN scales give NaN.

``tcgen05.cp.cta_group::1.<shape>`` [taddr], sdesc (PTX ISA 9.1, 'tcgen05.cp'): the source is a
K-major shared-memory matrix described like an MMA operand (no swizzle: core matrices of 8 rows
x 16 bytes, LBO between the 16-byte column chunks, SBO between 8-row groups; 32/64/128-byte
swizzle: rows of the swizzle width with its 16-byte chunk XOR, SBO between 8-row groups, a
descriptor advanced by bytes along K as for the MMA); each row of the
shape's ``rows x bits`` block is written to one TMEM lane as consecutive 32-bit columns. Shapes:
``.128x256b``, ``.128x128b`` (lanes ``l0 .. l0+127``), ``.4x256b`` (4 lanes), ``.64x128b`` with
``.warpx2::02_13`` (rows to lanes 0-31 of partitions 0 and 2, duplicated into 1 and 3) or
``.warpx2::01_23`` (partitions 0 and 1, duplicated into 2 and 3), ``.32x128b.warpx4`` (32 rows
duplicated into all four partitions). Decompression (``.b8x16.b6x16_p32``/``.b4x16_p64``) is
unsupported. The copy completes at issue (like the MMA); its shared-memory reads belong to the
async proxy until the ``tcgen05.commit`` that tracks it.

``tcgen05.shift.cta_group::1.down [taddr]``: lanes ``l0 .. l0 + 30`` of the 32-lane partition move
one lane down (lane ``l + 1`` takes lane ``l``'s columns), over the columns of the whole
allocation; the emulator shifts all 512 columns of the partition from ``l0``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from emulator import cta_pair as _cta_pair
from emulator import ops as _ops
from emulator.registry import ASYNC_UNITS, _Fault, handler

__all__ = ["decode_e2m1", "scale_values"]

_E2M1 = np.array([float(x) for x in np.arange(16, dtype=np.uint8).view(
    ml_dtypes.float4_e2m1fn)], np.float64) if hasattr(ml_dtypes, "float4_e2m1fn") else None
_E4M3 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
_E5M2 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e5m2).astype(np.float64)
#: UE8M0: 2 ** (e - 127), 0xFF is NaN (OCP Microscaling Formats v1.0, E8M0)
_UE8M0 = np.where(np.arange(256) == 255, np.nan,
                  np.exp2(np.arange(256, dtype=np.float64) - 127.0))
#: UE4M3: E4M3 without its sign bit (PTX ISA 9.1 ``.ue4m3``)
_UE4M3 = np.abs(np.arange(128, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64))


def decode_e2m1(raw: np.ndarray) -> np.ndarray:
    """float64 values of packed E2M1 bytes ``raw`` (..., nbytes) -> (..., 2 * nbytes), the low
    nibble first (OCP Microscaling Formats v1.0, E2M1; the order Triton's ``tl.dot_scaled``
    packs, see kernels/fast/dot_scaled.py)."""
    lo, hi = raw & 0xF, raw >> 4
    out = np.stack([_E2M1[lo], _E2M1[hi]], axis=-1)
    return out.reshape(*raw.shape[:-1], raw.shape[-1] * 2)


def scale_values(raw: np.ndarray, ue8m0: bool) -> np.ndarray:
    """float64 scale factors of bytes ``raw`` (UE8M0, or UE4M3 with bit 7 ignored)."""
    return _UE8M0[raw] if ue8m0 else _UE4M3[raw & 0x7F]


_MX_KINDS = {"kind::mxf8f6f4": ("1X",), "kind::mxf4": ("2X",), "kind::mxf4nvf4": ("2X", "4X")}


def _scale_block(m, c: int, taddr: int, rows: int, sf_id: int, nblk: int, pc: int,
                 what: str) -> np.ndarray:
    """Scale-factor bytes (rows, nblk) of batch CTA ``c`` at TMEM address ``taddr``."""
    tm = _ops._tmem(m)
    lane0, col0 = (taddr >> 16) & 0xFFFF, taddr & 0xFFFF
    ncols = -(-rows // 32)
    if lane0 != 0:
        raise m.prog.unsupported(pc, f"block-scaled tcgen05.mma with the {what} scale factors "
                                     f"at TMEM lane {lane0} (lane 0 modelled)")
    if col0 + ncols > 512 or sf_id + nblk > 4:
        raise _Fault("fault", f"tcgen05.mma {what} scale factors outside TMEM "
                              f"({m.prog.where(pc)})")
    _ops.tmem_allocated(m, c, col0, ncols, pc, f"{what} scale factors")
    r = np.arange(rows)
    words = np.stack([tm[c, 32 * p + r % 32, col0 + r // 32] for p in range(4)])  # (4, rows)
    raw = np.stack([(words >> np.uint32(8 * (sf_id + j))) & np.uint32(0xFF)
                    for j in range(nblk)], axis=-1).astype(np.uint8)  # (4, rows, nblk)
    if (raw != raw[:1]).any():
        p = int(np.flatnonzero((raw != raw[:1]).any(axis=(1, 2)))[0])
        raise _Fault("fault", f"tcgen05.mma {what} scale factors differ between TMEM lane "
                              f"partitions 0 and {p}: they must be duplicated to all four "
                              f"32-lane partitions (PTX ISA 9.1 §9.7.16.10.7) "
                              f"({m.prog.where(pc)})")
    return raw[0]


def _mx_mma(m, ins, pc, exe, mods):
    """A block-scaled ``tcgen05.mma.cta_group::1.kind::mx*.block_scale`` (module docstring)."""
    kind = next((x for x in mods if x.startswith("kind::")), None)
    vec = next((x.split("::")[1] for x in mods if x.startswith("scale_vec::")), None)
    if kind not in _MX_KINDS or any(x in mods for x in ("ws", "sp")):
        raise m.prog.unsupported(pc)
    if vec is None:
        vec = _MX_KINDS[kind][0]
    vec = vec.upper()
    if vec not in _MX_KINDS[kind]:
        raise _Fault("fault", f"'{ins.opcode}': .scale_vec::{vec} is not valid with .{kind} "
                              f"(PTX ISA 9.1 §9.7.16.10.7.1) ({m.prog.where(pc)})")
    ops = ins.operands
    if len(ops) < 7 or ops[1].kind == "address" or ops[4].kind != "address" or \
            ops[5].kind != "address":
        raise m.prog.unsupported(pc, f"'{ins.opcode}' operand form (A from shared memory, "
                                     f"scale factors in TMEM modelled)")
    tm = _ops._tmem(m)
    S = m.shared.shape[1]
    sh = m.shared.reshape(-1)
    dt_ = np.broadcast_to(m.address(ops[0], pc), (m.N,))
    ad = np.broadcast_to(m.read(ops[1], "b64", pc), (m.N,))
    bd = np.broadcast_to(m.read(ops[2], "b64", pc), (m.N,))
    idv = np.broadcast_to(m.read(ops[3], "u32", pc), (m.N,))
    sfa = np.broadcast_to(m.address(ops[4], pc), (m.N,))
    sfb = np.broadcast_to(m.address(ops[5], pc), (m.N,))
    en = np.broadcast_to(m.read(ops[6], "pred", pc), (m.N,))
    fp4 = kind != "kind::mxf8f6f4"
    K = 64 if fp4 else 32
    nblk = 1 if vec == "1X" else (2 if vec == "2X" else 4)
    blk = K // nblk
    for ln in np.flatnonzero(exe):
        idesc = int(idv[ln])
        Nv = ((idesc >> 17) & 0x3F) << 3
        Mv = ((idesc >> 27) & 0x3) << 7
        at, bt = (idesc >> 7) & 7, (idesc >> 10) & (3 if fp4 else 7)
        ta, tb = (idesc >> 15) & 1, (idesc >> 16) & 1
        neg_a, neg_b = (idesc >> 13) & 1, (idesc >> 14) & 1
        ue8m0 = bool((idesc >> 23) & 1)
        sfb_id, sfa_id = (idesc >> 4) & 3, (idesc >> 29) & 3
        if Mv != 128 or Nv < 8 or Nv > 256:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' with idesc 0x{idesc:x} (M=128 and "
                                         f"N <= 256 modelled)")
        if fp4:
            if at != 1 or bt != 1:
                raise _Fault("fault", f"'{ins.opcode}': idesc 0x{idesc:x} A/B type {at}/{bt} "
                                      f"(E2M1 is 1) ({m.prog.where(pc)})")
            if (idesc >> 31) & 1:
                raise m.prog.unsupported(pc, f"'{ins.opcode}' with K = 96 (idesc bit 31)")
            if not ue8m0 and kind == "kind::mxf4":
                raise _Fault("fault", f"'{ins.opcode}': .kind::mxf4 needs UE8M0 scale factors "
                                      f"(idesc bit 23) ({m.prog.where(pc)})")
            if sfa_id % 2 or sfb_id % 2 or (vec == "4X" and (sfa_id or sfb_id)):
                raise _Fault("fault", f"'{ins.opcode}': scale-factor ids {sfa_id}/{sfb_id} not "
                                      f"valid with .scale_vec::{vec} ({m.prog.where(pc)})")
            if ta or tb:
                raise m.prog.unsupported(pc, f"'{ins.opcode}' with a transposed packed E2M1 "
                                             f"operand")
            dec_a = dec_b = "e2m1"
        else:
            if not ue8m0:
                raise _Fault("fault", f"'{ins.opcode}': .kind::mxf8f6f4 needs UE8M0 scale "
                                      f"factors (idesc bit 23) ({m.prog.where(pc)})")
            names = {0: "e4m3", 1: "e5m2"}
            if at not in names or bt not in names:
                raise m.prog.unsupported(pc, f"'{ins.opcode}' operand types {at}/{bt} (E4M3 and "
                                             f"E5M2 modelled; the sub-byte types of this kind "
                                             f"are not)")
            dec_a, dec_b = names[at], names[bt]
        try:
            da, db = _ops._desc100(int(ad[ln])), _ops._desc100(int(bd[ln]))
        except ValueError as e:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' descriptor ({e})") from None
        aidx = (_ops._mnmajor_bytes(da, Mv, K, 1) if ta else _ops._kmajor_bytes(da, Mv, 32))
        bidx = (_ops._mnmajor_bytes(db, Nv, K, 1) if tb else _ops._kmajor_bytes(db, Nv, 32))
        for idx in (aidx, bidx):
            if (idx < 0).any() or (idx >= m.smem_bytes).any():
                raise _Fault("fault", f"tcgen05.mma operand outside shared memory "
                                      f"({m.prog.where(pc)})")
        c = int(m.cta_local[ln])
        ra, rb = sh[c * S + aidx], sh[c * S + bidx]
        A = decode_e2m1(ra) if dec_a == "e2m1" else (_E4M3 if dec_a == "e4m3" else _E5M2)[ra]
        B = decode_e2m1(rb) if dec_b == "e2m1" else (_E4M3 if dec_b == "e4m3" else _E5M2)[rb]
        _ops._async_read(m, int(ln), c * S + aidx, pc)
        _ops._async_read(m, int(ln), c * S + bidx, pc)
        _scale_read_check(m, int(ln), c, int(sfa[ln]), Mv, pc)
        _scale_read_check(m, int(ln), c, int(sfb[ln]), Nv, pc)
        sa = scale_values(_scale_block(m, c, int(sfa[ln]), Mv, sfa_id, nblk, pc, "A"), ue8m0)
        sb = scale_values(_scale_block(m, c, int(sfb[ln]), Nv, sfb_id, nblk, pc, "B"), ue8m0)
        A = A * np.repeat(sa, blk, axis=1) * (-1.0 if neg_a else 1.0)
        B = B * np.repeat(sb, blk, axis=1) * (-1.0 if neg_b else 1.0)
        D = A @ B.T
        taddr = int(dt_[ln])
        lane0, col0 = (taddr >> 16) & 0xFFFF, taddr & 0xFFFF
        if col0 + Nv > 512 or lane0 != 0:
            raise _Fault("fault", f"tcgen05.mma accumulator outside TMEM ({m.prog.where(pc)})")
        _ops.tmem_allocated(m, c, col0, Nv, pc, "accumulator")
        cur = tm[c, :, col0:col0 + Nv]
        if en[ln]:
            D = D + cur.view(np.float32).astype(np.float64)
        tm[c, :, col0:col0 + Nv] = np.ascontiguousarray(D.astype(np.float32)).view(np.uint32)
    return None


# ------------------------------------------------------------------ tcgen05.cp
#: shape -> (rows, bits per row)
_CP_SHAPES = {"128x256b": (128, 256), "4x256b": (4, 256), "128x128b": (128, 128),
              "64x128b": (64, 128), "32x128b": (32, 128)}


def _cp_lanes(shape: str, mods: list[str], rows: int, pc, m) -> list[np.ndarray]:
    """For each destination copy, the TMEM lane (offset from the address's lane) of each row."""
    r = np.arange(rows)
    if shape == "64x128b":
        if "warpx2::02_13" in mods:
            base = np.where(r < 32, r, 64 + r - 32)
            return [base, base + 32]
        if "warpx2::01_23" in mods:
            return [r, r + 64]
        raise m.prog.unsupported(pc, "'tcgen05.cp' .64x128b without .warpx2::02_13/01_23")
    if shape == "32x128b":
        if "warpx4" not in mods:
            raise m.prog.unsupported(pc, "'tcgen05.cp' .32x128b without .warpx4")
        return [r + 32 * p for p in range(4)]
    return [r]


def _tc_cp(m, ins, pc, exe, mods):
    """``tcgen05.cp.cta_group::1.<shape>{.multicast}`` [taddr], sdesc (module docstring)."""
    shape = next((x for x in mods if x in _CP_SHAPES), None)
    if shape is None or any(x.startswith("b8x16") or x.startswith("b6x16") or
                            x.startswith("b4x16") for x in mods):
        raise m.prog.unsupported(pc, f"'{ins.opcode}' (shape or decompression not modelled)")
    rows, bits = _CP_SHAPES[shape]
    rb = bits // 8
    ops = ins.operands
    taddr = np.broadcast_to(m.address(ops[0], pc), (m.N,))
    sdesc = np.broadcast_to(m.read(ops[1], "b64", pc), (m.N,))
    tm = _ops._tmem(m)
    S = m.shared.shape[1]
    sh = m.shared.reshape(-1)
    for ln in np.flatnonzero(exe):
        try:  # the source is laid out like a K-major MMA operand (any swizzle)
            idx = _ops._kmajor_bytes(_ops._desc100(int(sdesc[ln])), rows, rb)
        except ValueError as e:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' descriptor ({e})") from None
        if (idx < 0).any() or (idx >= m.smem_bytes).any():
            raise _Fault("fault", f"tcgen05.cp source outside shared memory "
                                  f"({m.prog.where(pc)})")
        c = int(m.cta_local[ln])
        words = np.ascontiguousarray(sh[c * S + idx]).view(np.uint32)  # (rows, rb // 4)
        _ops._async_read(m, int(ln), c * S + idx, pc)
        t = int(taddr[ln])
        lane0, col0 = (t >> 16) & 0xFFFF, t & 0xFFFF
        for lanes in _cp_lanes(shape, mods, rows, pc, m):
            tl = lane0 + lanes
            if tl.max() > 127 or col0 + rb // 4 > 512:
                raise _Fault("fault", f"tcgen05.cp destination outside TMEM "
                                      f"({m.prog.where(pc)})")
            _ops.tmem_allocated(m, c, col0, rb // 4, pc, "destination")
            tm[c, tl, col0:col0 + rb // 4] = words
            _tmem_cp_writes(m, c, int(ln), tl, col0, rb // 4, pc)
    return None


def _tc_shift(m, ins, pc, exe, mods):
    """``tcgen05.shift.cta_group::1.down [taddr]`` (module docstring)."""
    if "down" not in mods:
        raise m.prog.unsupported(pc)
    taddr = np.broadcast_to(m.address(ins.operands[0], pc), (m.N,))
    tm = _ops._tmem(m)
    done = set()
    for ln in np.flatnonzero(exe):
        c = int(m.cta_local[ln])
        lane0 = (int(taddr[ln]) >> 16) & 0xFFFF
        if (c, lane0) in done:
            continue
        done.add((c, lane0))
        if lane0 % 32:
            raise _Fault("fault", f"tcgen05.shift at TMEM lane {lane0}: not the start of a "
                                  f"32-lane partition ({m.prog.where(pc)})")
        tm[c, lane0 + 1:lane0 + 32] = tm[c, lane0:lane0 + 31].copy()
        sh = _tsh(m)
        if sh is not None and ln < m.ntr:
            # a tensor-core write like an MMA's: complete only at the issuer's next commit
            # (a commit before the shift does not track it: PTX ISA 9.1 'tcgen05.commit'), so
            # a tcgen05.ld of the shifted rows must acquire a later commit's phase
            rows = np.arange(lane0 + 1, lane0 + 32)
            _tmem_war_check(m, sh, int(ln), c, rows[:, None], np.arange(512)[None, :], pc,
                            "shifts into")
            sh.w_lane[c, lane0 + 1:lane0 + 32] = -1
            sh.pending[c, lane0 + 1:lane0 + 32] = False
            sh.a_clk[c, lane0 + 1:lane0 + 32] = int(m.async_clk[c]) + 1
            sh.a_cta[c, lane0 + 1:lane0 + 32] = c
    return None


def _tc_commit_multicast(m, ins, pc, exe, mods):
    """``tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster
    .b64 [mbar], ctaMask``: one arrive on the mbarrier at the same offset in every CTA of the
    cluster named in ``ctaMask`` (PTX ISA 9.1, 'tcgen05.commit'), carrying the async unit's
    epoch."""
    ops = ins.operands
    addr = _ops._addr_u(m, ops[0], pc)
    mask = np.broadcast_to(m.read(ops[1], "u16", pc), (m.N,))
    for ln in np.flatnonzero(exe):
        c = int(m.cta_local[ln])
        epoch = m.async_complete_epoch(c)
        ac = int(m.acol[c])
        off = int(addr[ln]) & 0xFFFFFF
        for r in range(m.C):
            if not (int(mask[ln]) >> r) & 1:
                continue
            a = off if r == int(m.rk_of[m.batch_ids[c]]) else ((r + 1) << 24) | off
            st = m.mbar_get(int(ln), a, pc)
            st["vc"][ac] = max(int(st["vc"][ac]), epoch)
            m.mbar_remote_async(int(ln), a, pc)
            m.mbar_arrive(int(ln), a, 1, 0, pc)
    return None


@handler("tcgen05")
def _tcgen05(m, ins, pc, exe, active):
    """Every tcgen05 instruction (:func:`_tcgen05_op`), with the tcgen05 fences' ordering
    through relaxed synchronisation (PTX ISA 9.1 §9.7.16.6.3, the canonical patterns of
    §9.7.16.6.4: ``mbarrier.try_wait.relaxed``, ``tcgen05.fence::after_thread_sync``,
    ``tcgen05.ld``): ``fence::before_thread_sync`` snapshots the lane's clock (with what its
    tcgen05 operations were ordered after), which its next mbarrier arrive (``.relaxed`` too)
    or CTA barrier releases for tcgen05 operations only (``Machine.mbar_arrive``,
    ``Machine.barrier``); ``fence::after_thread_sync`` acquires, for the lane's later tcgen05
    operations only, what its relaxed waits (and flag reads) observed and those tcgen05-only
    releases. The TMEM checks of the lane's later tcgen05 operations see that knowledge
    (:func:`_tvc`); its generic accesses, the shared-memory operand reads of its MMAs and copies,
    and what its arrives and commits release do not (a relaxed wait orders no ``ld.shared``)."""
    mods = m._types[pc][0]
    op = mods[0]
    tl = np.flatnonzero(exe[:m.ntr]) if m.ntr else np.zeros(0, np.int64)
    if op == "fence::before_thread_sync":
        if tl.size:
            if m.tc_rel_vc is None:
                m.tc_rel_vc = np.zeros_like(m.vc)
            # what the thread's tcgen05 operations so far are ordered after goes along too
            # (a relaxed wait, after_thread_sync, tcgen05.ld, before_thread_sync, bar.sync:
            # the dealloc after the barrier is ordered after the MMAs the ld waited for)
            m.tc_rel_vc[tl] = _tvc(m, tl)
            m._tick(tl)  # later tcgen05 operations (a load after the fence) are not released
        return None
    if op == "fence::after_thread_sync":
        if tl.size:
            got = [v[tl] for v in (m.relaxed_vc, m.tc_pend_vc) if v is not None]
            if got:
                if m.tc_after_vc is None:
                    m.tc_after_vc = np.zeros_like(m.vc)
                m.tc_after_vc[tl] = np.maximum.reduce([m.tc_after_vc[tl], *got])
        return None
    return _tcgen05_op(m, ins, pc, exe, active)


def _tvc(m, rows):
    """The clocks of traced lanes ``rows`` as the TMEM checks see them: the lane's own clock
    joined with what its ``tcgen05.fence::after_thread_sync`` acquired for tcgen05 operations
    (:func:`_tcgen05`). Generic accesses, the shared-memory operand reads of MMAs and copies,
    and the releases of arrives and commits use ``m.vc`` alone."""
    v = m.vc[rows]
    return v if m.tc_after_vc is None else np.maximum(v, m.tc_after_vc[rows])


def _tcgen05_op(m, ins, pc, exe, active):
    """Block-scaled MMA, ``cp``, ``shift`` and multicast ``commit`` here; the rest in ops."""
    mods = m._types[pc][0]
    op = mods[0]
    if "cta_group::2" in mods:  # CTA-pair granularity (emulator.cta_pair)
        if op == "commit" and "multicast::cluster" in mods:
            for c in np.unique(m.cta_local[exe]).tolist():
                _cta_pair.live_peer(m, int(c), pc)  # a fault without a (running) peer
            return _tc_commit_multicast(m, ins, pc, exe, mods)
        return _cta_pair.dispatch(m, ins, pc, exe, active, mods)
    if op == "mma":
        out = (_mx_mma(m, ins, pc, exe, mods) if "block_scale" in mods else
               _ops._tcgen05(m, ins, pc, exe, active))
        _tmem_mma_overwrites(m, ins, pc, exe)
        return out
    if op == "cp":
        return _tc_cp(m, ins, pc, exe, mods)
    if op == "shift":
        return _tc_shift(m, ins, pc, exe, mods)
    if op == "commit" and "multicast::cluster" in mods:
        return _tc_commit_multicast(m, ins, pc, exe, mods)
    if op == "ld" and m.ntr:
        _tmem_track(m, ins, pc, exe, mods, "ld")  # check before the values are read
    if op == "dealloc" and m.ntr:
        _dealloc_check(m, ins, pc, exe)
    out = _ops._tcgen05(m, ins, pc, exe, active)
    if op in ("st", "wait::st", "wait::ld") and m.ntr:
        _tmem_track(m, ins, pc, exe, mods, op)
    return out


def _tmem_war_check(m, sh: _TmemShadow, ln: int, c: int, rows, cols, pc: int,
                    what: str) -> None:
    """HB1 on tensor memory, write after read: lane ``ln`` issues a write (``what``: an MMA's
    accumulator, a ``tcgen05.st``, a ``tcgen05.cp`` destination) of cells (CTA ``c``,
    ``rows`` x ``cols``, broadcastable) last read by a ``tcgen05.ld`` of another thread whose
    ``tcgen05.wait::ld`` is still to come or is not ordered before this issue (PTX ISA 9.1
    §9.7.16.6.4: the load completes only at that wait; an epilogue that hands the accumulator
    back before its last load overlaps the next tile's MMA). The cells' read records end."""
    rows, cols = np.broadcast_arrays(np.asarray(rows), np.asarray(cols))
    rl = sh.r_lane[c][rows, cols]
    g = int(m.glane[ln])
    _note_ld_wait_use(m, sh, ln, c, rows, cols, rl)
    other = (rl >= 0) & (rl != g)
    if other.any():
        rl_o = rl[other]
        pend = sh.r_pend[c][rows, cols][other]
        late = pend | ~sh.after_wait(m, ln, sh.r_wait[c][rows, cols][other])
        if late.any():
            j = int(np.flatnonzero(late)[0])
            why = ("its 'tcgen05.wait::ld' has not completed the load" if pend[j] else
                   "the reader's 'tcgen05.wait::ld' is not ordered before this issue")
            _tmem_race(m, ("HB1", "tmem-war", pc), pc,
                       f"{m._who(g)} {what} TMEM that a 'tcgen05.ld' of "
                       f"{m._who(int(rl_o[j]))} reads: {why}",
                       "the reader's 'tcgen05.wait::ld' after its last tcgen05.ld of these "
                       "cells, then tcgen05.fence::before_thread_sync and the release (mbarrier "
                       "arrive / barrier) that hands the cells to the writer")
    sh.r_lane[c][rows, cols] = -1
    sh.r_pend[c][rows, cols] = False
    sh.r_done_pc[c][rows, cols] = -1


def _note_ld_wait_use(m, sh: _TmemShadow, ln: int, c: int, rows, cols, rl) -> None:
    """With ``coverage`` (``m.tmem_wait_used`` a set): lane ``ln`` writes cells (CTA ``c``,
    ``rows`` x ``cols``; ``rl`` their last readers) whose ``tcgen05.ld`` a ``tcgen05.wait::ld``
    completed; unless the writer is ordered after the reader's next ``wait::ld`` (which would
    complete the load as well; for the reader itself: it waited again since), that wait's pc is
    added: it ordered this write after the read (PTX ISA 9.1 §9.7.16.6.4, write after read)."""
    used = getattr(m, "tmem_wait_used", None)
    if used is None or ln >= m.ntr:
        return
    dp = sh.r_done_pc[c][rows, cols]
    hit = (dp >= 0) & (rl >= 0) & ~sh.r_pend[c][rows, cols]
    if not hit.any():
        return
    _add_used_waits(m, used, ln, dp[hit].tolist(), rl[hit].tolist(),
                    sh.r_done_gen[c][rows, cols][hit].tolist(), sh.rclks)


def _add_used_waits(m, used: set, ln: int, pcs: list, owners: list, gens: list,
                    clks_of: dict) -> None:
    """Add to ``used`` the pc of each wait (``pcs``: per access, the ``tcgen05.wait::st`` /
    ``wait::ld`` that completed it; ``owners``: the global lane that waited; ``gens``: that
    lane's count of such waits at it) that lane ``ln``'s access depends on: unless ``ln`` is
    ordered after the owner's next wait (``clks_of``: per owner, its clock at each wait), which
    would complete the access as well."""
    T = m.T
    for pc_, w, k in set(zip(pcs, owners, gens)):
        if w < 0:
            continue
        clks = clks_of.get(int(w), [])
        if ln < m.ntr and len(clks) > k:  # the owner waited again: is ln after that wait?
            col = int(m.rk_of[w // T]) * (T + ASYNC_UNITS) + w % T
            if int(_tvc(m, ln)[col]) >= clks[k]:
                continue
        used.add(int(pc_))


# ------------------------------------------------------------------ TMEM: tcgen05.st -> readers
class _TmemShadow:
    """Happens-before records of TMEM cells written by ``tcgen05.st`` (any shape): the
    writing thread, whether its ``tcgen05.wait::st`` has completed the store yet, and the
    writer's clock at that wait (PTX ISA 9.1 ``tcgen05.wait``: a ``tcgen05.st`` is asynchronous;
    only after ``tcgen05.wait::st`` may other threads, ordered after the waiter, use the data).
    Readers checked: the scale factors of a block-scaled MMA and ``tcgen05.ld`` (any shape).

    Cells written by the tensor core (a ``tcgen05.mma`` accumulator, a ``tcgen05.cp``
    destination) carry ``a_clk``: the epoch of the CTA's async unit 0 that the issuer's next
    ``tcgen05.commit`` publishes through its mbarrier (0: no such write), and ``a_cta`` the
    batch CTA whose unit that is (the cell's own CTA, or for a CTA-pair MMA,
    :mod:`emulator.cta_pair`, the issuing even CTA). The MMA and the copy
    are asynchronous (PTX ISA 9.1, 'tcgen05.commit': their completion is observed
    only through the commit's mbarrier), so a ``tcgen05.ld`` of those cells by a thread that has
    not acquired that epoch (a wait on the commit's phase, or ordering after a thread that
    waited) is HB1. MMAs, copies and MMAs reading copied scales are ordered among themselves in
    issue order, so only ``tcgen05.ld`` is checked against ``a_clk``."""

    def __init__(self, ncta: int):
        self.w_lane = np.full((ncta, 128, 512), -1, np.int64)
        self.w_clk = np.zeros((ncta, 128, 512), np.int32)
        # the cell's writer is a tcgen05.cp (w_lane its issuer, w_clk its clock at the issue):
        # pipelined with that thread's own MMAs only (PTX ISA 9.1 §9.7.16.6.2); another thread's
        # MMA or load must be ordered after the issue (fence::before_thread_sync, a sync,
        # fence::after_thread_sync: §9.7.16.6.4.3)
        self.w_cp = np.zeros((ncta, 128, 512), np.bool_)
        self.pending = np.zeros((ncta, 128, 512), np.bool_)
        self.a_clk = np.zeros((ncta, 128, 512), np.int32)
        self.a_cta = np.broadcast_to(np.arange(ncta, dtype=np.int32)[:, None, None],
                                     (ncta, 128, 512)).copy()
        # which tcgen05.wait::st completed a cell (pc, -1: none) and which of its writer's
        # waits that was (1-based); per writer, its clock at each of its waits: a read depends
        # on that wait unless the reader is ordered after the writer's next one (which also
        # completes the store). For EmulationResult.wait_effects (_note_wait_use).
        self.done_pc = np.full((ncta, 128, 512), -1, np.int32)
        self.done_gen = np.zeros((ncta, 128, 512), np.int32)
        self.wclks: dict[int, list[int]] = {}
        # the last tcgen05.ld of each cell: its reader (global lane, -1 none), whether its
        # 'tcgen05.wait::ld' is still to come, and the reader's clock at that wait (a later
        # write by another thread must be ordered after it: write-after-read)
        self.r_lane = np.full((ncta, 128, 512), -1, np.int64)
        self.r_pend = np.zeros((ncta, 128, 512), np.bool_)
        # a completed read names its warp's wait: r_wait index into waits, (lanes, clocks) of
        # the warp's 'tcgen05.wait::ld.sync.aligned' (warp-collective: every lane waits for the
        # warp's loads, so a release by any of its lanes after it covers them all)
        self.r_wait = np.full((ncta, 128, 512), -1, np.int64)
        self.waits: list[tuple[np.ndarray, np.ndarray]] = []
        # which 'tcgen05.wait::ld' completed a cell's last read (pc, -1: none) and which of its
        # reader's waits that was (1-based); per reader, its clock at each of its wait::ld: a
        # later write depends on that wait unless the writer is ordered after the reader's next
        # one (which completes the load as well). For EmulationResult.wait_effects.
        self.r_done_pc = np.full((ncta, 128, 512), -1, np.int32)
        self.r_done_gen = np.zeros((ncta, 128, 512), np.int32)
        self.rclks: dict[int, list[int]] = {}
        # likewise the warp's 'tcgen05.wait::st' that completed a stored cell (-1: none yet)
        self.w_wait = np.full((ncta, 128, 512), -1, np.int64)

    def warp_wait(self, m, lanes: np.ndarray) -> int:
        """Record the warp-collective wait of ``lanes`` (one warp): its index in ``waits``."""
        self.waits.append((m.glane[lanes].astype(np.int64),
                           m.vc[lanes, m.vcol[lanes]].astype(np.int64)))
        return len(self.waits) - 1

    def after_wait(self, m, ln: int, w: np.ndarray) -> np.ndarray:
        """Per wait index in ``w``: whether lane ``ln`` is ordered after that warp wait (after
        the wait of any of the warp's lanes: the wait is warp-collective, ``.sync.aligned``)."""
        out = np.zeros(w.shape, np.bool_)
        T = m.T
        for x in np.unique(w[w >= 0]).tolist():
            wl, wc = self.waits[x]
            col = m.rk_of[wl // T] * (T + ASYNC_UNITS) + wl % T
            if (_tvc(m, ln)[col] >= wc).any():
                out |= w == x
        return out


def _note(m, write: bool, ln: int, c: int, rows, cols, pc: int) -> None:
    """Tell the coverage tracker (``m.tmem_note``, :mod:`emulator.barrier_use`; None without
    coverage) that lane ``ln`` accesses TMEM cells (batch CTA ``c``, ``rows`` x ``cols``,
    broadcastable arrays) at ``pc``."""
    note = m.tmem_note
    if note is not None and ln < m.ntr:
        note(write, int(ln), int(c), np.asarray(rows), np.asarray(cols), pc)


def _tsh(m) -> _TmemShadow | None:
    if not m.ntr:
        return None
    sh = getattr(m, "_tmem_sh", None)
    if sh is None or m._tmem_sh_batch is not m.batch_ids:
        sh = _TmemShadow(m.shared.shape[0])
        m._tmem_sh, m._tmem_sh_batch = sh, m.batch_ids
    return sh


def _ldst_cells(m, ins, pc, exe, mods):
    """(lanes (k,), cta (k,), rows (k, n), cols (k, n)) of the TMEM cells a tcgen05.ld/st
    accesses (every shape of :func:`emulator.ops.tmem_fragment`; a packed access's two columns
    per register both count), or None (nothing recorded: no traced lane, or the access faults
    in :func:`emulator.ops._tmem_ld_st`)."""
    aop = next((o for o in ins.operands if o.kind == "address"), None)
    if aop is None:
        return None
    lanes = np.flatnonzero(exe)
    lanes = lanes[lanes < m.ntr]
    if not lanes.size:
        return None
    imms = [o for o in ins.operands if o.kind == "imm"]
    frag = _ops.tmem_fragment(mods, m.laneid[lanes], int(imms[0].value or 0) if imms else 0)
    if frag is None:
        return None
    drow, dcol, _, _ = frag
    taddr = np.broadcast_to(m.read(aop.base, "u32", pc) if aop.base is not None and
                            aop.base.kind == "reg" else np.uint32(0), (m.N,)).astype(
        np.int64) + int(aop.value or 0)
    k = lanes.size
    rows = (((taddr[lanes] >> 16) & 0xFFFF)[:, None, None] + drow).reshape(k, -1)
    cols = ((taddr[lanes] & 0xFFFF)[:, None, None] + dcol).reshape(k, -1)
    if (rows > 127).any() or (cols > 511).any():
        return None  # the access itself faults in ops
    return lanes, m.cta_local[lanes], rows, cols


def _tmem_read_check(m, sh: _TmemShadow, lanes, cta, rows, cols, pc) -> None:
    """HB1 on tensor memory: ``lanes`` read cells (cta, rows, cols) written by a tcgen05.st that
    is not complete (no ``tcgen05.wait::st`` yet) or not ordered before the read."""
    T = m.T
    for i, ln in enumerate(lanes):
        c, r = int(cta[i]), rows[i]
        cc = cols[i]
        _note_wait_use(m, sh, int(ln), c, r, cc)
        wl = sh.w_lane[c, r, cc]
        g = int(m.glane[ln])
        other = (wl >= 0) & (wl != g)
        if not other.any():
            continue
        wl_o = wl[other]
        pend = sh.pending[c, r, cc][other]
        wcta = wl_o // T
        col = m.rk_of[wcta] * (T + ASYNC_UNITS) + wl_o % T
        # a completed store of another lane of the reader's own warp is ordered: its
        # 'tcgen05.wait::st.sync.aligned' is warp-collective (every lane of the warp executes
        # it converged, PTX ISA 9.1 §9.7.16.8.5), so it precedes the warp's later ld in each lane
        warp = (wcta == g // T) & ((wl_o % T) // 32 == (g % T) // 32)
        late = pend | (~warp & (sh.w_clk[c, r, cc][other] > _tvc(m, int(ln))[col]) &
                       ~sh.after_wait(m, ln, sh.w_wait[c, r, cc][other]))
        if late.any():
            j = int(np.flatnonzero(late)[0])
            w = int(wl_o[j])
            key = ("HB1", "tmem", pc)
            if key in m.findings:
                return
            from verifier.findings import Finding, Note
            ins = m.prog.insts[pc]
            if sh.w_cp[c, r, cc][other][j]:
                m.findings[key] = _cp_race(m, ins, g, w)
                return
            why = ("its 'tcgen05.wait::st' has not completed the store" if pend[j] else
                   "the writer's 'tcgen05.wait::st' is not ordered before this read")
            m.findings[key] = Finding(
                rule="HB1", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
                message=(f"data race on tensor memory: '{ins.opcode}' by {m._who(g)} reads "
                         f"TMEM written by 'tcgen05.st' of {m._who(w)}: {why}"),
                notes=[Note(message="missing synchronisation: 'tcgen05.wait::st' by the writer "
                                    "after its tcgen05.st, then tcgen05.fence::before_thread_sync"
                                    " + a barrier + tcgen05.fence::after_thread_sync")])
            return


def _cp_race(m, ins, g: int, w: int):
    """The HB1 finding of ``ins`` by global lane ``g`` reading TMEM a ``tcgen05.cp`` of lane
    ``w`` writes, the copy's issue not ordered before this one (PTX ISA 9.1 §9.7.16.6.2: a
    copy and an MMA are pipelined only when one thread issues both)."""
    from verifier.findings import Finding, Note
    return Finding(
        rule="HB1", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
        message=(f"data race on tensor memory: '{ins.opcode}' by {m._who(g)} reads TMEM that "
                 f"a 'tcgen05.cp' of {m._who(w)} writes, and that copy's issue is not ordered "
                 f"before this operation (tcgen05.cp and tcgen05.mma are pipelined only in one "
                 f"thread)"),
        notes=[Note(message="missing synchronisation: tcgen05.fence::before_thread_sync after "
                            "the copy, the arrive / barrier that hands the cells over, then "
                            "tcgen05.fence::after_thread_sync before the MMA")])


def _tmem_track(m, ins, pc, exe, mods, op) -> None:
    """Record tcgen05.st cells / complete them at wait::st / check tcgen05.ld reads."""
    sh = _tsh(m)
    if sh is None:
        return
    if op == "wait::ld":
        lanes = np.flatnonzero(exe)
        lanes = lanes[lanes < m.ntr]
        for ln in lanes.tolist():
            sh.rclks.setdefault(int(m.glane[ln]), []).append(int(m.vc[ln, m.vcol[ln]]))
        wid = m.cta_local[lanes].astype(np.int64) * m.T + m.tid[lanes] // 32
        for w in np.unique(wid).tolist():
            ln = lanes[wid == w]
            c = int(m.cta_local[ln[0]])
            g = m.glane[ln]
            mine = sh.r_pend[c] & np.isin(sh.r_lane[c], g)
            if mine.any():
                sh.r_wait[c][mine] = sh.warp_wait(m, ln)
                sh.r_pend[c][mine] = False
                readers, inv = np.unique(sh.r_lane[c][mine], return_inverse=True)
                gens = np.array([len(sh.rclks.get(int(r), ())) for r in readers.tolist()],
                                np.int32)
                sh.r_done_pc[c][mine] = pc
                sh.r_done_gen[c][mine] = gens[inv.ravel()]
        if lanes.size:
            m._tick(lanes)
        return
    if op == "wait::st":
        lanes = np.flatnonzero(exe)
        lanes = lanes[lanes < m.ntr]
        # each waiting lane's list of wait::st clocks (its generations: a TMEM read records
        # which generation completed the cells it depends on)
        for ln in lanes.tolist():
            sh.wclks.setdefault(int(m.glane[ln]), []).append(int(m.vc[ln, m.vcol[ln]]))
        wid = m.cta_local[lanes].astype(np.int64) * m.T + m.tid[lanes] // 32
        for w in np.unique(wid).tolist():
            wln = lanes[wid == w]
            c = int(m.cta_local[wln[0]])
            mine = sh.pending[c] & np.isin(sh.w_lane[c], m.glane[wln])
            if mine.any():
                sh.w_wait[c][mine] = sh.warp_wait(m, wln)
        # per CTA at once (each cell has one writer, so the lanes' cells are disjoint): a
        # pending cell written by one of the waiting lanes completes at that lane's clock
        T = m.T
        for c in np.unique(m.cta_local[lanes]).tolist():
            ln = lanes[m.cta_local[lanes] == c]
            base = int(m.glane[ln[0]]) - int(m.tid[ln[0]])  # global lane of the CTA's thread 0
            clk = np.full(T, -1, np.int64)  # per thread of the CTA: its clock, -1 not waiting
            clk[m.tid[ln]] = m.vc[ln, m.vcol[ln]]
            gen = np.zeros(T, np.int64)  # per thread: its number of wait::st so far
            gen[m.tid[ln]] = [len(sh.wclks[int(g)]) for g in m.glane[ln]]
            t = sh.w_lane[c] - base
            inside = sh.pending[c] & (t >= 0) & (t < T)
            mine = np.zeros_like(inside)
            mine[inside] = clk[t[inside]] >= 0
            if mine.any():
                sh.pending[c][mine] = False
                sh.w_clk[c][mine] = clk[t[mine]]
                sh.done_pc[c][mine] = pc
                sh.done_gen[c][mine] = gen[t[mine]]
        if lanes.size:
            m._tick(lanes)
        return
    cells = _ldst_cells(m, ins, pc, exe, mods)
    if cells is None:
        return
    lanes, cta, rows, cols = cells
    if m.tmem_note is not None:
        for i, ln in enumerate(lanes.tolist()):
            _note(m, op == "st", ln, int(cta[i]), rows[i], cols[i], pc)
    if op == "st":
        R = rows
        C3 = np.broadcast_to(cta[:, None], cols.shape)
        for i, ln in enumerate(lanes.tolist()):
            _tmem_war_check(m, sh, ln, int(cta[i]), rows[i], cols[i], pc, "writes")
        sh.w_lane[C3, R, cols] = np.broadcast_to(m.glane[lanes][:, None], cols.shape)
        sh.w_wait[C3, R, cols] = -1
        sh.w_cp[C3, R, cols] = False
        sh.pending[C3, R, cols] = True
        sh.a_clk[C3, R, cols] = 0
        sh.done_pc[C3, R, cols] = -1
    else:
        _tmem_async_check(m, sh, lanes, cta, rows, cols, pc)
        _tmem_read_check(m, sh, lanes, cta, rows, cols, pc)
        C3 = np.broadcast_to(cta[:, None], cols.shape)
        sh.r_lane[C3, rows, cols] = np.broadcast_to(m.glane[lanes][:, None], cols.shape)
        sh.r_pend[C3, rows, cols] = True


def _tmem_async_check(m, sh: _TmemShadow, lanes, cta, rows, cols, pc) -> None:
    """HB1 on tensor memory: ``lanes`` (k,) ``tcgen05.ld`` cells (cta (k,), rows (k,) or
    (k, n), cols (k, n)) that a ``tcgen05.mma``/``tcgen05.cp`` wrote, before acquiring the
    async epoch of the ``tcgen05.commit`` that completes the write (see :class:`_TmemShadow`)."""
    R = np.broadcast_to(rows if rows.ndim == 2 else rows[:, None], cols.shape)
    C3 = np.broadcast_to(cta[:, None], cols.shape)
    need = sh.a_clk[C3, R, cols]  # (k, n) the tensor-core epoch of each cell read
    if not need.any():
        return
    # each reader's knowledge of the unit 0 of the CTA whose MMA / copy wrote the cell (its own
    # CTA, or the issuer of a CTA-pair MMA)
    seen = _tvc(m, lanes)[np.arange(lanes.size)[:, None], m.acol[sh.a_cta[C3, R, cols]]]
    late = (need > seen).any(axis=1)
    if not late.any():
        return
    key = ("HB1", "tmem-async", pc)
    if key in m.findings:
        return
    j = int(np.flatnonzero(late)[0])
    from verifier.findings import Finding, Note
    ins = m.prog.insts[pc]
    src = sh.a_cta[int(cta[j]), R[j], cols[j]][need[j] > seen[j]]
    by = int(src[0]) if src.size else int(cta[j])
    what = ("an asynchronous 'tcgen05.mma'/'tcgen05.cp' writes" if by == int(cta[j]) else
            f"the asynchronous CTA-pair 'tcgen05.mma' issued by "
            f"{m._who(int(m.batch_ids[by]) * m.T).split(' of ')[-1]} writes")
    m.findings[key] = Finding(
        rule="HB1", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
        message=(f"data race on tensor memory: '{ins.opcode}' by {m._who(int(m.glane[lanes[j]]))}"
                 f" reads TMEM lane {int(R[j].min())} that {what}, before that operation is "
                 f"known to be complete"),
        notes=[Note(message="missing synchronisation: 'tcgen05.commit' of the MMA to an "
                            "mbarrier, a wait on that phase by the reader (or a thread ordered "
                            "before it), then tcgen05.fence::after_thread_sync")])


def _dealloc_check(m, ins, pc, exe) -> None:
    """HB1: a ``tcgen05.dealloc.cta_group::1`` frees columns an asynchronous ``tcgen05.mma`` /
    ``tcgen05.cp`` wrote (``_TmemShadow.a_clk``) while the deallocating warp has not acquired
    that operation's completion (the commit's mbarrier phase, or ordering after a thread that
    waited on it): the tensor core may still write freed memory (PTX ISA 9.1 §9.7.16.7.1, the
    dealloc requires the columns' accesses to be complete; 'tcgen05.commit'). The warp's lanes
    together: the dealloc is warp-collective."""
    from verifier.findings import Finding, Note
    sh = _tsh(m)
    if sh is None:
        return
    ops = ins.operands
    taddr = np.broadcast_to(m.read(ops[0], "u32", pc), (m.N,)) if ops[0].kind != "imm" else \
        np.full(m.N, int(ops[0].value or 0), np.int64)
    ncol = np.broadcast_to(m.read(ops[1], "u32", pc), (m.N,))
    for ln in _ops._warp_leaders(m, exe):
        if ln >= m.ntr:
            continue
        c = int(m.cta_local[ln])
        c0, n = int(taddr[ln]) & 0xFFFF, int(ncol[ln])
        if c0 + n > 512:
            continue  # the dealloc faults in ops
        # freeing is a write of every lane's cells: a tcgen05.ld of another thread still in
        # flight (its wait::ld not ordered before) races with it, and a wait::ld that ordered
        # it acted (coverage)
        _tmem_war_check(m, sh, int(ln), c, np.arange(128)[:, None],
                        np.arange(c0, c0 + n)[None, :], pc, "frees")
        warp = np.flatnonzero(exe & (m.cta_local == c) & (m.tid // 32 == m.tid[ln] // 32))
        warp = warp[warp < m.ntr]
        known = _tvc(m, warp).max(axis=0)
        need = sh.a_clk[c, :, c0:c0 + n]
        src = sh.a_cta[c, :, c0:c0 + n]
        late = need > known[m.acol[src]]
        if not late.any():
            continue
        key = ("HB1", "tmem-dealloc", pc)
        if key in m.findings:
            return
        m.findings[key] = Finding(
            rule="HB1", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
            message=(f"'{ins.opcode}' by {m._who(int(m.glane[ln]))} frees TMEM columns "
                     f"{c0}-{c0 + n - 1} that an asynchronous 'tcgen05.mma'/'tcgen05.cp' "
                     f"writes, before that operation is known to be complete"),
            notes=[Note(message="missing synchronisation: a wait on the phase of the mbarrier "
                                "the MMA's 'tcgen05.commit' arrives on (or ordering after a "
                                "thread that waited) before the dealloc")])
        return


def _scale_read_check(m, ln: int, c: int, taddr: int, rows: int, pc: int) -> None:
    """The block-scaled MMA issuer ``ln`` reads the scale cells of ``rows`` rows at ``taddr``
    (all four lane partitions, the columns of :func:`_scale_block`)."""
    sh = _tsh(m)
    if sh is None or ln >= m.ntr:
        return
    col0 = taddr & 0xFFFF
    ncols = -(-rows // 32)
    r = np.arange(128)
    cols = col0 + np.arange(ncols)
    _note(m, False, ln, c, r[:, None], cols[None, :], pc)
    _tmem_read_check(m, sh, np.full(128, ln), np.full(128, c), r,
                     np.broadcast_to(cols[None, :], (128, ncols)), pc)


def _tmem_mma_overwrites(m, ins, pc, exe) -> None:
    """An MMA overwrites its accumulator cells: earlier tcgen05.st records there no longer
    describe the data; the cells become tensor-core writes completed by the issuer's next
    ``tcgen05.commit`` (``a_clk``, :class:`_TmemShadow`). Rows as the MMA writes them (M from
    idesc bits 24-28; M = 64 uses lanes 32q .. 32q + 15 of each partition q, PTX ISA 9.1
    §9.7.16.10.5); columns N (bits 17-22)."""
    sh = _tsh(m)
    if sh is None:
        return
    d = np.broadcast_to(m.address(ins.operands[0], pc), (m.N,))
    idv = np.broadcast_to(m.read(ins.operands[3], "u32", pc), (m.N,))
    ops = ins.operands
    # the enable-input-d predicate: the last operand of the plain forms, after the scale
    # addresses of the block-scaled ones (PTX ISA 9.1, 'tcgen05.mma')
    acc = (np.broadcast_to(m.read(ops[-1], "pred", pc), (m.N,)) if len(ops) > 4 and
           ops[-1].kind == "reg" else None)
    a_tmem = (np.broadcast_to(m.address(ops[1], pc), (m.N,)) if ops[1].kind == "address"
              else None)
    for ln in np.flatnonzero(exe):
        if ln >= m.ntr:
            continue
        c = int(m.cta_local[ln])
        lane0, col0 = (int(d[ln]) >> 16) & 0xFFFF, int(d[ln]) & 0xFFFF
        n = ((int(idv[ln]) >> 17) & 0x3F) << 3
        mv = ((int(idv[ln]) >> 24) & 0x1F) << 4
        r = np.arange(mv)
        rows = lane0 + (r if mv == 128 else 32 * (r // 16) + r % 16)
        rows = rows[rows < 128]
        _note(m, True, int(ln), c, rows[:, None], np.arange(col0, min(col0 + n, 512))[None, :],
              pc)
        if acc is None or acc[ln]:
            _tmem_acc_read_check(m, sh, int(ln), c, rows, col0, min(col0 + n, 512), pc)
        if a_tmem is not None:  # A from TMEM: 32 bytes of K per row = 8 columns
            ta = int(a_tmem[ln])
            a0, ac0 = (ta >> 16) & 0xFFFF, ta & 0xFFFF
            arows = a0 + (r if mv == 128 else 32 * (r // 16) + r % 16)
            _note(m, False, int(ln), c, arows[arows < 128][:, None],
                  np.arange(ac0, min(ac0 + 8, 512))[None, :], pc)
            _tmem_acc_read_check(m, sh, int(ln), c, arows[arows < 128], ac0,
                                 min(ac0 + 8, 512), pc, what="reads its A operand from")
        _tmem_war_check(m, sh, int(ln), c, rows[:, None],
                        np.arange(col0, min(col0 + n, 512))[None, :], pc, "writes its "
                        "accumulator into")
        sh.w_lane[c, :, col0:col0 + n] = -1
        sh.pending[c, :, col0:col0 + n] = False
        sh.a_clk[c, rows[:, None], np.arange(col0, min(col0 + n, 512))[None, :]] = \
            int(m.async_clk[c]) + 1
        sh.a_cta[c, :, col0:col0 + n] = c


def _note_wait_use(m, sh: _TmemShadow, ln: int, c: int, rows, cols) -> None:
    """With ``coverage`` (``m.tmem_wait_used`` a set): reader ``ln`` reads cells (CTA ``c``,
    ``rows``, ``cols``, broadcastable) that a ``tcgen05.wait::st`` completed; unless the reader
    is ordered after the writer's next wait (which would complete the store as well), that
    wait's pc is added: it ordered this read."""
    used = getattr(m, "tmem_wait_used", None)
    if used is None:
        return
    dp = sh.done_pc[c][rows, cols]
    hit = dp >= 0
    if not hit.any():
        return
    wl = np.broadcast_to(sh.w_lane[c][rows, cols], dp.shape)[hit]
    dg = np.broadcast_to(sh.done_gen[c][rows, cols], dp.shape)[hit]
    _add_used_waits(m, used, ln, dp[hit].tolist(), wl.tolist(), dg.tolist(), sh.wclks)


def _tmem_acc_read_check(m, sh: _TmemShadow, ln: int, c: int, rows: np.ndarray, c0: int,
                         c1: int, pc: int, what: str = "accumulates into") -> None:
    """HB1 on tensor memory: a ``tcgen05.mma`` issued by ``ln`` reads cells (CTA ``c``,
    ``rows``, columns ``c0 .. c1 - 1``: its accumulator when it accumulates, its A operand when
    that is in TMEM) that another thread wrote with ``tcgen05.st`` not completed by its
    ``tcgen05.wait::st`` or not ordered before the issue (e.g. a zeroed accumulator with the
    barrier between the stores and the MMA removed, or attention's P written by the softmax
    warps and read by the MMA warp without the wait on their "P ready" mbarrier; PTX ISA 9.1
    'tcgen05.wait', 'tcgen05.fence')."""
    if not rows.size or c1 <= c0:
        return
    _note_wait_use(m, sh, ln, c, rows[:, None], np.arange(c0, c1)[None, :])
    wl = sh.w_lane[c][rows, c0:c1]
    g = int(m.glane[ln])
    other = (wl >= 0) & (wl != g)
    if not other.any():
        return
    T = m.T
    wl_o = wl[other]
    pend = sh.pending[c][rows, c0:c1][other]
    col = m.rk_of[wl_o // T] * (T + ASYNC_UNITS) + wl_o % T
    late = pend | ((sh.w_clk[c][rows, c0:c1][other] > _tvc(m, ln)[col]) &
                   ~sh.after_wait(m, ln, sh.w_wait[c][rows, c0:c1][other]))
    if not late.any():
        return
    j = int(np.flatnonzero(late)[0])
    if sh.w_cp[c][rows, c0:c1][other][j]:
        key = ("HB1", "tmem-acc", what, pc)
        if key not in m.findings:
            m.findings[key] = _cp_race(m, m.prog.insts[pc], g, int(wl_o[j]))
        return
    why = ("its 'tcgen05.wait::st' has not completed the store" if pend[j] else
           "the writer's 'tcgen05.wait::st' is not ordered before the MMA's issue")
    _tmem_race(m, ("HB1", "tmem-acc", what, pc), pc,
               f"{m._who(g)} {what} TMEM written by 'tcgen05.st' of {m._who(int(wl_o[j]))}: "
               f"{why}",
               "'tcgen05.wait::st' by the writers, tcgen05.fence::before_thread_sync, a "
               "barrier, then tcgen05.fence::after_thread_sync before the MMA")


def _tmem_race(m, key: tuple, pc: int, what: str, fix: str) -> None:
    """Record the HB1 finding ``key`` (once) at ``pc``: "data race on tensor memory: '<opcode>'
    by ``what``", with the missing synchronisation ``fix`` as a note."""
    if key in m.findings:
        return
    from verifier.findings import Finding, Note
    ins = m.prog.insts[pc]
    m.findings[key] = Finding(
        rule="HB1", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
        message=f"data race on tensor memory: '{ins.opcode}' by {what}",
        notes=[Note(message=f"missing synchronisation: {fix}")])


def _tmem_cp_writes(m, c: int, ln: int, tl: np.ndarray, col0: int, ncol: int,
                    pc: int) -> None:
    """A ``tcgen05.cp`` by lane ``ln`` writes TMEM lanes ``tl`` of CTA ``c``, columns
    ``col0 .. col0 + ncol - 1``: tensor-core writes completed by the next commit."""
    _note(m, True, ln, c, tl[:, None], np.arange(col0, col0 + ncol)[None, :], pc)
    sh = _tsh(m)
    if sh is None or ln >= m.ntr:
        return
    _tmem_war_check(m, sh, ln, c, tl[:, None], np.arange(col0, col0 + ncol)[None, :], pc,
                    "copies into")
    sh.w_lane[c, tl, col0:col0 + ncol] = int(m.glane[ln])
    sh.w_clk[c, tl, col0:col0 + ncol] = int(m.vc[ln, m.vcol[ln]])
    sh.w_wait[c, tl, col0:col0 + ncol] = -1
    sh.w_cp[c, tl, col0:col0 + ncol] = True
    sh.done_pc[c, tl, col0:col0 + ncol] = -1
    sh.pending[c, tl, col0:col0 + ncol] = False
    sh.a_clk[c, tl, col0:col0 + ncol] = int(m.async_clk[c]) + 1
    sh.a_cta[c, tl, col0:col0 + ncol] = c
