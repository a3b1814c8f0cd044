"""Asynchronous copies: tensor maps, TMA (``cp.async.bulk.tensor``) and bulk copies, bulk groups,
device-side ``tensormap.replace`` / ``tensormap.cp_fenceproxy``, with their happens-before
semantics.

Tensor maps (PTX ISA 9.1 §5.5 "tensor maps", §9.7.9.25.5 ``cp.async.bulk.tensor``; CUDA driver
API ``cuTensorMapEncodeTiled``). The driver's 128-byte ``CUtensorMap`` is opaque; the emulator
uses its own byte layout of the same fields (:data:`TMAP_LAYOUT`), written by
:func:`encode_tensor_map` for host ``TensorDescriptor`` parameters (``emulator.api``) and edited
in place by ``tensormap.replace`` (the field values as PTX defines them: ``rank`` is rank - 1,
the others as given: box/global dims in elements, global strides in bytes, element strides,
the elemtype/interleave/swizzle/fill enums of PTX ISA 9.1 §9.7.9.26 ``tensormap.replace``), so
every kernel that builds a descriptor on the device (Triton's ``tl.make_tensor_descriptor``:
zero 128 bytes of shared memory, replace every field, ``tensormap.cp_fenceproxy`` it to global)
reads back what it wrote. Dimension 0 is the innermost (contiguous) one.

Copies complete at issue (the data lands at once), and the happens-before analysis treats
them as asynchronous:

* A TMA / bulk load into shared memory is a write by one of the CTA's copy units (its own
  vector clock column, ``registry.ASYNC_UNITS``; the unit of its completion mbarrier's slot,
  ``registry.copy_unit``) at a fresh epoch; its ``complete_tx`` releases the epoch into the
  mbarrier, and a thread is ordered after the copy only once it observed that
  mbarrier phase complete (``try_wait``/``test_wait`` true) or synchronised with a thread that
  did. A generic read before that is HB1 (PTX ISA 9.1 §8.6 proxies, §9.7.13.15 mbarrier). The
  copy itself is checked with the issuing thread's clock against earlier accesses of the
  destination (a refill of a stage still read by another thread, or by wgmma, is HB1:
  write-after-read across proxies).
* A TMA / bulk store (or reduction) reads its shared source as async unit 2 at a fresh epoch;
  the issuing thread learns that epoch at ``cp.async.bulk.wait_group{.read} N`` covering the
  store's bulk group; a generic write to the source not ordered after that is HB1. The source
  bytes written through the generic proxy need ``fence.proxy.async`` by the writing thread
  after the write (else **HB4, an error**: the PTX memory model leaves what the async proxy
  reads undefined, §8.6).
* mbarrier tx-count: a phase completes only when pending arrivals and tx-count are both zero
  (PTX ISA 9.1 §9.7.13.15.1); ``mbarrier.inval`` of an mbarrier whose current phase has a
  non-zero tx-count (bytes completed that no ``expect_tx`` announced, or announced bytes that
  never came) is HB7; a wait that can never succeed is HB2 (deadlock, with the tx-count).

Multicast copies (tensor and bulk) into the CTAs of a cluster: :func:`emulator.cluster.tma_multicast`.
Not modelled (reported as "emulation unsupported"): im2col mode, interleaved layouts, the 96 B
/ atomicity swizzle variants, sub-byte element types, multicast reductions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from emulator import tmap_infer as _tmap_infer
from emulator.registry import ASYNC_UNITS, _Fault, copy_unit, handler
from verifier.findings import Finding, Note

__all__ = ["PARAM_WINDOW", "TMAP_LAYOUT", "TensorMap", "bulk", "check_inval",
           "decode_tensor_map", "encode_tensor_map", "param_address", "triton_box"]

#: kernel parameters in the ``.param`` state space (``mov.b32 %r, param`` / ``mov.b64``) start at
#: :data:`PARAM_BASE` (64-byte aligned, declaration order); ``cvta.param`` maps them to the
#: generic window ``PARAM_WINDOW + param address``; only TMA tensor-map operands read through it
PARAM_BASE = 0x1000
PARAM_WINDOW = 0x7E00_0000_0000

#: the emulator's CUtensorMap layout: field -> (byte offset, bytes per entry, entries)
TMAP_LAYOUT = {
    "global_address": (0, 8, 1),
    "global_stride": (8, 8, 4),     # bytes, of dims 1..rank-1 (ord 0 = dim 1)
    "global_dim": (40, 4, 5),       # elements
    "box_dim": (60, 4, 5),          # elements
    "element_stride": (80, 4, 5),
    "rank": (100, 4, 1),            # rank - 1
    "elemtype": (104, 4, 1),
    "interleave_layout": (108, 4, 1),
    "swizzle_mode": (112, 4, 1),
    "swizzle_atomicity": (116, 4, 1),
    "fill_mode": (120, 4, 1),
}

#: PTX tensormap elemtype enum (PTX ISA 9.1 §9.7.9.26, table "tensormap.replace new_val") ->
#: (bytes, kind); kind: u unsigned, s signed, f float
ELEMTYPES = {0: (1, "u"), 1: (2, "u"), 2: (4, "u"), 3: (4, "s"), 4: (8, "u"), 5: (8, "s"),
             6: (2, "f16"), 7: (4, "f32"), 8: (4, "f32"), 9: (8, "f64"), 10: (2, "bf16"),
             11: (4, "f32"), 12: (4, "f32")}

#: Triton dtype name -> PTX elemtype (Triton maps fp8 to uint8 tiles)
TRITON_ELEMTYPE = {"fp16": 6, "bf16": 10, "fp32": 7, "fp64": 9, "i8": 0, "u8": 0, "i16": 1,
                   "i32": 3, "u32": 2, "i64": 5, "fp8e4nv": 0, "fp8e5": 0, "fp8e4b15": 0}

#: swizzle_mode enum -> swizzle span in bytes (0: none)
_SWIZZLE = {0: 0, 1: 32, 2: 64, 3: 128}


@dataclass(frozen=True)
class TensorMap:
    """A decoded tensor map (tile mode). Dims are innermost first; ``strides[i]`` is the byte
    stride of dim ``i + 1``; ``box``/``estrides`` per dim; enums as in :data:`TMAP_LAYOUT`."""

    address: int
    rank: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    estrides: tuple[int, ...]
    elemtype: int
    interleave: int
    swizzle: int
    fill: int

    @property
    def esize(self) -> int:
        """Bytes per element."""
        return ELEMTYPES[self.elemtype][0]

    @property
    def box_counts(self) -> tuple[int, ...]:
        """Elements of the box along each dim (``ceil(box / element_stride)``)."""
        return tuple(-(-b // e) for b, e in zip(self.box, self.estrides))

    @property
    def box_bytes(self) -> int:
        """Bytes of one box in shared memory (what ``complete_tx`` counts)."""
        return math.prod(self.box_counts) * self.esize


def encode_tensor_map(address: int, elemtype: int, dims: tuple[int, ...],
                      strides: tuple[int, ...], box: tuple[int, ...],
                      estrides: tuple[int, ...] | None = None, swizzle: int = 0,
                      interleave: int = 0, fill: int = 0) -> bytes:
    """The 128 bytes of a tensor map in the emulator's layout (:data:`TMAP_LAYOUT`).

    Args:
        address: global address of element 0 (16-byte aligned).
        elemtype: PTX elemtype enum (:data:`ELEMTYPES`).
        dims: global size of each dim in elements, innermost first (rank 1..5).
        strides: byte stride of dims 1..rank-1 (multiples of 16, cuTensorMapEncodeTiled).
        box: box size per dim in elements (1..256).
        estrides: element strides per dim (default 1).
        swizzle, interleave, fill: the PTX enums (swizzle 0 none, 1 32 B, 2 64 B, 3 128 B).

    Raises:
        ValueError: a field outside what cuTensorMapEncodeTiled accepts (named in the message).
    """
    r = len(dims)
    estrides = estrides or (1,) * r
    if not 1 <= r <= 5 or len(box) != r or len(estrides) != r or len(strides) != r - 1:
        raise ValueError(f"tensor map: rank {r} with {len(box)} box dims, {len(estrides)} "
                         f"element strides, {len(strides)} strides (need rank 1..5, rank - 1 "
                         f"strides)")
    if address % 16 or any(s % 16 for s in strides):
        raise ValueError(f"tensor map: address 0x{address:x} / strides {strides} not multiples "
                         f"of 16 bytes (cuTensorMapEncodeTiled)")
    if any(not 1 <= b <= 256 for b in box) or elemtype not in ELEMTYPES:
        raise ValueError(f"tensor map: box {box} (1..256 each) or elemtype {elemtype}")
    buf = bytearray(128)

    def put(field: str, i: int, v: int) -> None:
        off, w, _ = TMAP_LAYOUT[field]
        buf[off + w * i:off + w * (i + 1)] = int(v).to_bytes(w, "little")

    put("global_address", 0, address)
    for i, s in enumerate(strides):
        put("global_stride", i, s)
    for i in range(r):
        put("global_dim", i, dims[i])
        put("box_dim", i, box[i])
        put("element_stride", i, estrides[i])
    put("rank", 0, r - 1)
    put("elemtype", 0, elemtype)
    put("interleave_layout", 0, interleave)
    put("swizzle_mode", 0, swizzle)
    put("fill_mode", 0, fill)
    return bytes(buf)


def decode_tensor_map(raw: bytes, where: str) -> TensorMap:
    """Decode 128 bytes (:data:`TMAP_LAYOUT`).

    Raises:
        registry._Fault: a field the hardware would reject (rank, zero box/dim, elemtype,
            misaligned address or stride); ``where`` (file:line:col) is in the message.
    """
    a = np.frombuffer(raw, np.uint8)

    def get(field: str, i: int = 0) -> int:
        off, w, _ = TMAP_LAYOUT[field]
        return int.from_bytes(a[off + w * i:off + w * (i + 1)].tobytes(), "little")

    rank = get("rank") + 1
    if rank > 5:
        raise _Fault("fault", f"tensor map with rank field {rank - 1} (rank {rank} > 5) ({where})")
    tm = TensorMap(address=get("global_address"), rank=rank,
                   dims=tuple(get("global_dim", i) for i in range(rank)),
                   strides=tuple(get("global_stride", i) for i in range(rank - 1)),
                   box=tuple(get("box_dim", i) for i in range(rank)),
                   estrides=tuple(get("element_stride", i) for i in range(rank)),
                   elemtype=get("elemtype"), interleave=get("interleave_layout"),
                   swizzle=get("swizzle_mode"), fill=get("fill_mode"))
    bad = []
    if tm.elemtype not in ELEMTYPES:
        bad.append(f"elemtype {tm.elemtype}")
    if any(b < 1 or b > 256 for b in tm.box):
        bad.append(f"box {tm.box} (1..256)")
    if any(d < 1 for d in tm.dims):
        bad.append(f"global dims {tm.dims}")
    if any(e < 1 or e > 8 for e in tm.estrides):
        bad.append(f"element strides {tm.estrides} (1..8)")
    if tm.address % 16 or any(s % 16 for s in tm.strides):
        bad.append(f"address 0x{tm.address:x} / strides {tm.strides} not 16-byte multiples")
    if bad:
        raise _Fault("fault", f"invalid tensor map: {'; '.join(bad)} ({where})")
    return tm


def triton_box(block: tuple[int, ...], esize: int) -> tuple[tuple[int, ...], int]:
    """(box, swizzle enum) Triton's host descriptor uses for a ``block`` (outermost first, as
    in ``block_shape``) of ``esize``-byte elements: the NVMMA shared layout's swizzle is the
    largest of 128/64/32 bytes dividing the block's contiguous row, and the box's inner dim is
    clamped to the swizzle span, the others to 256 (Triton 3.9 ``tensordesc_meta``, checked
    against the compiled metadata of the fast GEMMs). Returned innermost first."""
    inner = block[-1] * esize
    swz = next((s for s in (128, 64, 32) if inner % s == 0), 0)
    code = {0: 0, 32: 1, 64: 2, 128: 3}[swz]
    box = [min(b, 256) for b in block]
    if swz:
        box[-1] = min(block[-1], swz // esize)
    return tuple(reversed(box)), code


# ----------------------------------------------------------------------------- parameters
def _param_offsets(launch) -> dict[str, int]:
    offs = getattr(launch, "_param_offsets", None)
    if offs is None:
        offs, o = {}, 0
        for name, raw in launch.params.items():
            offs[name] = o
            o += (len(raw) + 63) // 64 * 64
        object.__setattr__(launch, "_param_offsets", offs)
    return offs


def param_address(launch, name: str) -> int:
    """``.param`` state-space address of kernel parameter ``name``."""
    return PARAM_BASE + _param_offsets(launch)[name]


def _read_generic(m, addr: int, nbytes: int, pc: int) -> bytes:
    """``nbytes`` at a generic address: the parameter window or global memory."""
    if PARAM_WINDOW <= addr < PARAM_WINDOW + (1 << 32):
        return _read_param(m, addr - PARAM_WINDOW, nbytes, pc)
    return m.gmem.read(np.array([addr], np.uint64), nbytes).tobytes()


def _read_param(m, paddr: int, nbytes: int, pc: int) -> bytes:
    """``nbytes`` at ``.param`` state-space address ``paddr``."""
    off = paddr - PARAM_BASE
    for name, o in _param_offsets(m.launch).items():
        raw = m.launch.params[name]
        if o <= off and off + nbytes <= o + len(raw):
            return raw[off - o:off - o + nbytes]
    raise _Fault("fault", f"parameter-space read of {nbytes} B at 0x{paddr:x} outside every "
                              f"parameter ({m.prog.where(pc)})")


# ----------------------------------------------------------------------------- state
class _State:
    """Per-batch state: epochs of the async units per CTA, bulk groups per thread."""

    def __init__(self, m):
        self.shared = m.shared
        ncta = m.shared.shape[0]
        self.clk = np.zeros((ncta, ASYNC_UNITS), np.int64)
        self.committed = np.zeros(m.N, np.int64)
        self.pending: list[tuple[int, int, int]] = []  # (lane, group, store epoch)
        # global writes of bulk / tensor stores and reductions, recorded for the race check
        # when they complete: (lane, group, shadow bytes, data, pc, atomic)
        self.gwrites: list[tuple] = []


def _state(m) -> _State:
    st = getattr(m, "_acs", None)
    if st is None or st.shared is not m.shared:
        st = _State(m)
        m._acs = st
    return st


def _epoch(m, c: int, unit: int) -> int:
    st = _state(m)
    st.clk[c, unit] += 1
    return int(st.clk[c, unit])


def _unit_lane(m, c: int, unit: int) -> int:
    return m.n_ctas * m.T + ASYNC_UNITS * int(m.batch_ids[c]) + unit


# ----------------------------------------------------------------------------- shared memory
def _swizzled(offs: np.ndarray, swizzle: int) -> np.ndarray:
    """Shared byte addresses after the TMA swizzle (PTX ISA 9.1 §5.5.4 "swizzling modes": the
    16-byte chunk index within a span is XORed with the row index bits 7.. of the address, the
    same pattern wgmma descriptors read, :func:`emulator.ops._kmajor_bytes`)."""
    span = _SWIZZLE[swizzle]
    if not span:
        return offs
    mask = span // 16 - 1
    return offs ^ (((offs >> 7) & mask) << 4)


def _flat(m, ln: int, offs: np.ndarray, pc: int) -> np.ndarray:
    if offs.size and (int(offs.min()) < 0 or int(offs.max()) >= m.smem_bytes):
        bad = int(offs[(offs < 0) | (offs >= m.smem_bytes)][0])
        raise _Fault("fault", f"asynchronous copy touches shared address 0x{bad:x} outside the "
                              f"CTA's {m.smem_bytes} B of shared memory ({m.prog.where(pc)})")
    return int(m.cta_local[ln]) * m.shared.shape[1] + offs


def _flat_cluster(m, ln: int, offs: np.ndarray, mbar: int, pc: int,
                  pair: bool = False) -> np.ndarray:
    """Flat shared indices of a copy's destination bytes ``offs``: shared::cluster addresses
    (``mapa``, rank bits above ``cluster.RANK_SHIFT``) may name a peer CTA's shared memory
    (PTX ISA 9.1 §9.7.9.25.4.1 cp.async.bulk: the destination is in ``.shared::cluster``), whose
    completion mbarrier must be in the same CTA as the destination - or, with ``pair``
    (``.cta_group::2``, PTX ISA 9.1 cp.async.bulk.tensor), in that CTA or its peer CTA of the
    CTA pair (:func:`emulator.cta_pair.pair_peer`)."""
    from emulator import cluster as _cluster
    offs = np.asarray(offs, np.int64)
    c = int(m.cta_local[ln])
    if offs.size and (offs >> _cluster.RANK_SHIFT).any():
        tgt, off = m.clb.decode(m, np.full(offs.size, c), offs, pc)
    else:
        tgt, off = np.full(offs.size, c), offs
    tc = int(tgt[0]) if tgt.size else c
    if (tgt != tc).any():
        raise _Fault("fault", f"asynchronous copy destination spans two CTAs' shared memory "
                              f"({m.prog.where(pc)})")
    mc = m.mbar_key(ln, mbar, pc)[0]
    if pair and mc != tc:
        from emulator import cta_pair as _cta_pair
        if mc != _cta_pair.pair_peer(m, tc, pc):
            raise _Fault("fault", f"'.cta_group::2' copy into the shared memory of CTA "
                                  f"{int(m.batch_ids[tc])} completes on an mbarrier of CTA "
                                  f"{int(m.batch_ids[mc])}, which is neither that CTA nor its "
                                  f"peer CTA (PTX ISA 9.1 cp.async.bulk.tensor .cta_group) "
                                  f"({m.prog.where(pc)})")
    elif mc != tc:
        raise _Fault("fault", f"asynchronous copy into the shared memory of CTA "
                              f"{int(m.batch_ids[tc])} completes on an mbarrier of another CTA "
                              f"(the mbarrier must be in the destination's CTA, PTX ISA 9.1 "
                              f"cp.async.bulk) ({m.prog.where(pc)})")
    if off.size and (int(off.min()) < 0 or int(off.max()) >= m.smem_bytes):
        bad = int(off[(off < 0) | (off >= m.smem_bytes)][0])
        raise _Fault("fault", f"asynchronous copy touches shared address 0x{bad:x} outside the "
                              f"CTA's {m.smem_bytes} B of shared memory ({m.prog.where(pc)})")
    return tc * m.shared.shape[1] + off


def _copy_unit(m, ln: int, mbar: int, pc: int) -> int:
    """The copy unit (``registry.copy_unit``) of a copy by ``ln`` completing on the mbarrier at
    ``mbar`` (a shared::cluster address may name a peer CTA's): its slot in the mbarrier's CTA,
    rotated by that CTA's cluster rank."""
    tc, off = m.mbar_key(ln, mbar, pc)
    return copy_unit(off, int(m.rk_of[m.batch_ids[tc]]), m.C)


def async_write_shared(m, ln: int, offs: np.ndarray, data: np.ndarray, pc: int,
                       mbar: int, pair: bool = False) -> int:
    """Write ``data`` (uint8, one per byte) to the shared addresses ``offs`` of lane ``ln``'s
    CTA as the async proxy on behalf of issuer ``ln``, a copy completing on the mbarrier at
    ``mbar``: checked with the issuer's clock against earlier accesses, recorded under a fresh
    epoch of the copy unit of that mbarrier (``registry.copy_unit``); returns the epoch (to be
    released by the mbarrier's ``complete_tx``)."""
    c = int(m.cta_local[ln])
    flat = _flat_cluster(m, ln, offs, mbar, pc, pair=pair)
    unit = _copy_unit(m, ln, mbar, pc)
    epoch = _epoch(m, c, unit)
    if m.ntr and ln < m.ntr:
        war_proxy_check(m, ln, flat, pc)
        m._hb_check(m.sshadow, "shared", np.array([ln]), flat[None, :], pc, data[None, :],
                    "plain")
        slots = m.sshadow.slots(flat)
        m.sshadow.w_lane[slots] = _unit_lane(m, c, unit)
        m.sshadow.w_clk[slots] = epoch
    m.shared.reshape(-1)[flat] = data
    return epoch


def async_read_shared(m, ln: int, offs: np.ndarray, pc: int, epoch: int) -> np.ndarray:
    """Bytes at shared ``offs`` read by the async proxy (unit 2, a store source) for issuer
    ``ln``: HB4 (error) for generic writes not followed by the writer's ``fence.proxy.async``,
    HB1 for writes not ordered before the issue; recorded as unit-2 reads at ``epoch``."""
    c = int(m.cta_local[ln])
    flat = _flat(m, ln, offs, pc)
    if m.ntr and ln < m.ntr:
        _store_proxy_check(m, ln, flat, pc)
        m._hb_check(m.sshadow, "shared", np.array([ln]), flat[None, :], pc, None, "plain",
                    rec_lane=_unit_lane(m, c, 2), rec_clk=epoch)
    return m.shared.reshape(-1)[flat].copy()


def war_proxy_check(m, ln: int, flat: np.ndarray, pc: int) -> None:
    """HB4 (an error), write after read across proxies: an asynchronous copy issued by ``ln``
    writes the shared bytes ``flat`` that a thread last read through the generic proxy
    (``ld.shared``, ``ldmatrix``) with no ``fence.proxy.async`` on the causality path from the
    read to the copy - the reader's after its reads, ordered before the issue, or the issuer's
    after it learned of the reads (PTX ISA 9.1 §8.9 proxy-preserved base causality order;
    ptx_rules AP2: DeepEP#642, TransformerEngine#2695; a stage released by an mbarrier arrive
    and refilled by TMA needs the fence: the mbarrier does not bridge proxies)."""
    sh = m.sshadow
    idx = sh.slots(flat)
    rl = sh.r_lane[idx]
    NT = m.n_ctas * m.T
    real = (rl >= 0) & (rl < NT)
    if not real.any():
        return
    rl_r, rc = rl[real], sh.r_clk[idx[real]].astype(np.int64)
    # the reader's proxy fences before its read: its fence clocks up to the read's clock (a
    # fence ticks the clock, so one after the read has a larger clock)
    r_pf = np.zeros(rl_r.size, np.int64)
    for g in np.unique(rl_r).tolist():
        lc = int(m._batch_pos[g // m.T])
        if lc < 0:
            continue
        loc = lc * m.T + g % m.T
        sel = rl_r == g
        if loc < m.ntr:
            r_pf[sel] = np.searchsorted(np.asarray(m.pf_clk[loc], np.int64), rc[sel], "right")
    bad, _ = m.proxy_unfenced(np.array([ln]), rl_r, r_pf, rc, own_fence=False)
    if not bad.any():
        return
    j = int(np.flatnonzero(bad)[0])
    rpc = int(sh.r_pc[idx[real]][j])
    key = ("HB4", "war", rpc, pc)
    if key in m.findings or rpc < 0:
        return
    i1, i2 = m.prog.insts[rpc], m.prog.insts[pc]
    # a warning when the bytes read were the TMEM address tcgen05.alloc wrote: Triton 3.6's
    # sm_100a kernels read that slot in every thread, then use the memory as the first
    # pipeline stage with barriers but no proxy fence in between (like its cp.async operands,
    # kept as a warning so that Triton 3.6's own kernels are not rejected)
    wpc = int(sh.w_pc[idx[real]][j])
    alloc_slot = wpc >= 0 and m.prog.insts[wpc].opcode.startswith("tcgen05.alloc")
    m.findings[key] = Finding(
        rule="HB4", severity="warning" if alloc_slot else "error", file=m.prog.filename,
        line=i2.line, col=i2.col,
        message=(f"'{i2.opcode}' writes shared memory through the async proxy that "
                 f"{m._who(int(rl_r[j]))} read with '{i1.opcode}' (generic proxy) with no "
                 f"'fence.proxy.async' between the read and this copy ({int(bad.sum())} bytes): "
                 f"a write after read across proxies (the mbarrier or barrier that released "
                 f"the buffer does not order the two proxies)"),
        notes=[Note(message=f"generic-proxy read '{i1.opcode}'", line=i1.line, col=i1.col),
               Note(message="missing synchronisation: 'fence.proxy.async.shared::cta' by the "
                            "reading threads after their last read and before they release "
                            "the buffer (or by the issuing thread after it acquired the release)")])


_HB4_FIX = ("missing synchronisation: 'fence.proxy.async.shared::cta' by the writing threads "
            "after the writes and before the barrier that hands them to the issuing thread, or "
            "by the issuing thread after that barrier (PTX ISA 9.1 §8.9: a proxy fence on the "
            "causality path from the write to the async-proxy access)")


def _store_proxy_check(m, ln: int, flat: np.ndarray, pc: int) -> None:
    """HB4 as an error: a TMA/bulk store reads shared bytes whose generic-proxy writer executed
    no ``fence.proxy.async`` after writing them (PTX ISA 9.1 §8.6: without the proxy fence the
    value the async proxy reads is undefined)."""
    sh = m.sshadow
    idx = sh.slots(flat)
    wl = sh.w_lane[idx]
    NT = m.n_ctas * m.T
    real = (wl >= 0) & (wl < NT)
    if not real.any():
        return
    m.note_fence_use(idx)
    stale, late_b = m.proxy_unfenced(np.array([ln]), wl[real], sh.w_pf[idx[real]],
                                     sh.w_clk[idx[real]])
    if not stale.any():
        return
    j = int(np.flatnonzero(stale)[0])
    late = bool(late_b[j])
    who, n = m._who(int(wl[real][j])), int(stale.sum())
    _report_unfenced(m, int(sh.w_pc[idx[real]][j]), pc, lambda i1, i2: (
        f"'{i2.opcode}' reads shared memory through the async proxy that {who} wrote with "
        f"'{i1.opcode}' (generic proxy) "
        + ("and fenced, but neither that fence nor one of the issuing thread lies between "
           "the write and this copy" if late else
           "with no 'fence.proxy.async' between the write and this copy")
        + f": the bytes the copy reads are undefined ({n} bytes)"), _HB4_FIX)


def _report_unfenced(m, wpc: int, pc: int, message, fix: str) -> None:
    """The HB4 error (once per writer / async-proxy access pair) for an async-proxy access at
    ``pc`` of bytes that the generic-proxy write at ``wpc`` left unfenced; ``message(write,
    access)`` words it from the two instructions, ``fix`` is the synchronisation note."""
    key = ("HB4", wpc, pc)
    if key in m.findings:
        return
    i1, i2 = m.prog.insts[wpc], m.prog.insts[pc]
    m.findings[key] = Finding(
        rule="HB4", severity="error", file=m.prog.filename, line=i2.line, col=i2.col,
        message=message(i1, i2),
        notes=[Note(message=f"generic-proxy write '{i1.opcode}'", line=i1.line, col=i1.col),
               Note(message=fix)])


# ----------------------------------------------------------------------------- global memory
def _async_store_pcs(m) -> np.ndarray:
    """The pcs of the program's bulk / tensor stores and reductions to global memory (their
    global writes are async-proxy writes), cached on the program."""
    got = getattr(m.prog, "_async_store_pcs", None)
    if got is None:
        def to_global(op: str) -> bool:
            if not op.startswith(("cp.async.bulk.", "cp.reduce.async.bulk.")):
                return False
            spaces = [x for x in op.split(".")
                      if x in ("global", "shared::cluster", "shared::cta", "shared")]
            return bool(spaces) and spaces[0] == "global"   # the destination comes first

        got = np.array([pc for pc, ins in enumerate(m.prog.insts) if to_global(ins.opcode)],
                       np.int64)
        m.prog._async_store_pcs = got
    return got


def _global_proxy_check(m, ln: int, gidx: np.ndarray, pc: int, what: str) -> None:
    """HB4 (an error): the async-proxy access (``what``: ``reads`` for a copy's source,
    ``writes`` for a bulk store's or reduction's destination) by issuer ``ln`` of the global
    shadow bytes ``gidx`` that a thread last wrote through the generic proxy with no
    ``fence.proxy.async.global`` (or the full form) of its ordered before the issue (PTX ISA
    9.1 §8.6: accesses of one location through two proxies need a proxy fence between them;
    a reduction's or store's destination written by ``st.global`` before is as undefined as a
    copy's source)."""
    sh = m._gshadow
    idx = sh.slots(gidx.reshape(-1))
    wl = sh.w_lane[idx]
    NT = m.n_ctas * m.T
    real = (wl >= 0) & (wl < NT)
    if real.any():
        # a completed bulk store's or reduction's record (_complete_writes) is the async
        # proxy's own write, not a generic one: no proxy fence is needed after it
        wpc = sh.w_pc[idx]
        real &= ~np.isin(wpc, _async_store_pcs(m))
    if not real.any():
        return
    stale, _ = m.proxy_unfenced(np.array([ln]), wl[real], sh.w_pf[idx[real]],
                                sh.w_clk[idx[real]], space="global")
    if not stale.any():
        return
    j = int(np.flatnonzero(stale)[0])
    who, n = m._who(int(wl[real][j])), int(stale.sum())
    _report_unfenced(m, int(sh.w_pc[idx[real]][j]), pc, lambda i1, i2: (
        f"'{i2.opcode}' {what} global memory through the async proxy that {who} wrote with "
        f"'{i1.opcode}' (generic proxy) without a 'fence.proxy.async.global' after the write "
        f"ordered before the copy: "
        + ("the bytes it reads are undefined" if what == "reads" else
           "which of the two writes the bytes keep is undefined") + f" ({n} bytes)"),
        "missing synchronisation: 'fence.proxy.async.global' (or 'fence.proxy.async') by the "
        "writing threads after the writes, before the barrier that orders them with the "
        "issuing thread")


def global_async_read(m, ln: int, addrs: np.ndarray, nb: int, pc: int) -> None:
    """A bulk / tensor copy issued by ``ln`` reads global rows ``addrs`` (k,) of ``nb`` bytes
    through the async proxy: HB1 for a write not ordered before the issue (as a read by the
    issuer), HB4 (an error) for bytes a thread wrote through the generic proxy with no
    ``fence.proxy.async`` (the ``.global`` or full form) of its ordered before the issue (PTX
    ISA 9.1 §8.6 proxies; ptx_rules AP4). Before 2026-12-04 the copies' global sources were
    not checked at all (red team round 8)."""
    if not (m.ntr and ln < m.ntr and m._gshadow is not None and addrs.size and nb):
        return
    a = addrs.astype(np.uint64)
    reg, off = m.gmem.translate(a, nb)
    gidx = (m._gstarts[reg] + off)[:, None] + np.arange(nb)
    sh = m._gshadow
    _global_proxy_check(m, ln, gidx, pc, "reads")
    m._hb_check(sh, "global", np.full(a.size, ln), gidx, pc, None, "plain")


def _global_write(m, ln: int, addrs: np.ndarray, data: np.ndarray, pc: int,
                  atomic: bool = False, check: bool = True) -> None:
    """Rows ``data`` (k, nbytes) to global ``addrs`` (k,) by the async proxy, for a bulk /
    tensor store or reduction issued by ``ln``: the bytes change now; unless ``check`` is
    False (a store through an inferred tensor map) the destination's generic writers must
    have fenced (HB4) and the write enters the race shadow when the store completes
    (:func:`_wait_group` without ``.read``, or the issuer's exit)."""
    if not addrs.size:
        return
    nb = data.shape[1]
    a = addrs.astype(np.uint64)
    if check and m.ntr and ln < m.ntr and m._gshadow is not None:
        reg, off = m.gmem.translate(a, nb)
        gidx = (m._gstarts[reg] + off)[:, None] + np.arange(nb)
        _global_proxy_check(m, ln, gidx, pc, "writes")
        st = _state(m)
        st.gwrites.append((ln, int(st.committed[ln]), gidx, np.ascontiguousarray(data), pc,
                           atomic))
    m.gmem.write(a, data)
    if m.gmem.written is not None:
        m.gmem.mark(a, nb, atomic=atomic)


# ----------------------------------------------------------------------------- tile geometry
def _tile(tm: TensorMap, coords: list[int]):
    """Rows of a box: (row start addresses (R,), row-valid mask (R,), inner element range
    [lo, hi) valid in every row, elements per row). Rows enumerate dims 1.. (dim 1 fastest),
    each row spans dim 0 (element stride 1)."""
    cnt = tm.box_counts
    idx = [coords[i] + np.arange(cnt[i], dtype=np.int64) * tm.estrides[i]
           for i in range(tm.rank)]
    es = tm.esize
    row_addr = np.zeros(1, np.int64) + tm.address
    valid = np.ones(1, np.bool_)
    for i in range(1, tm.rank):  # outer dims: row-major, dim 1 fastest
        ok = (idx[i] >= 0) & (idx[i] < tm.dims[i])
        row_addr = (row_addr[None, :] + idx[i][:, None] * tm.strides[i - 1]).reshape(-1)
        valid = (valid[None, :] & ok[:, None]).reshape(-1)
    i0 = idx[0]
    ok0 = (i0 >= 0) & (i0 < tm.dims[0])
    lo = int(np.argmax(ok0)) if ok0.any() else 0
    hi = lo + int(ok0.sum())
    row_addr = row_addr + coords[0] * es
    return row_addr, valid, lo, hi, cnt[0]


def _fill_bytes(tm: TensorMap) -> bytes:
    """One out-of-bounds element: zero, or NaN for float types with fill_mode 1
    (CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)."""
    es, kind = ELEMTYPES[tm.elemtype]
    if tm.fill == 1 and kind in ("f16", "bf16", "f32", "f64"):
        return {"f16": b"\x00\x7e", "bf16": b"\xc0\x7f", "f32": b"\x00\x00\xc0\x7f",
                "f64": b"\x00" * 6 + b"\xf8\x7f"}[kind]
    return b"\x00" * es


def _check_tile(m, tm: TensorMap, pc: int, what: str) -> None:
    if tm.interleave != 0:
        raise m.prog.unsupported(pc, f"'{what}' with an interleaved tensor map")
    if tm.swizzle not in _SWIZZLE:
        raise m.prog.unsupported(pc, f"'{what}' with swizzle mode {tm.swizzle}")
    if tm.estrides[0] != 1:
        raise m.prog.unsupported(pc, f"'{what}' with an inner element stride "
                                     f"{tm.estrides[0]}")
    inner = tm.box_counts[0] * tm.esize
    span = _SWIZZLE[tm.swizzle]
    if inner % 16:
        raise _Fault("fault", f"tensor map box inner dimension of {inner} B is not a multiple of "
                              f"16 B ({m.prog.where(pc)})")
    if span and inner != span:
        raise m.prog.unsupported(pc, f"'{what}': a {inner} B box row with the {span} B swizzle "
                                     f"(only rows of the swizzle span are modelled)")


def _load_box(m, tm: TensorMap, coords: list[int], pc: int, ln: int | None = None
              ) -> np.ndarray:
    """The box's bytes in shared-memory order (dense, dim 0 fastest), OOB elements filled;
    with the issuer ``ln``, its global rows are checked (:func:`global_async_read`)."""
    row_addr, valid, lo, hi, n0 = _tile(tm, coords)
    es = tm.esize
    fill = np.frombuffer(_fill_bytes(tm), np.uint8)
    out = np.tile(fill, row_addr.size * n0).reshape(row_addr.size, n0 * es)
    if hi > lo and valid.any():
        rows = (row_addr[valid] + lo * es).astype(np.uint64)
        if ln is not None:
            global_async_read(m, ln, rows, (hi - lo) * es, pc)
        got = m.gmem.read(rows, (hi - lo) * es)
        out[np.flatnonzero(valid), lo * es:hi * es] = got
    return out.reshape(-1)


def _tmap_operand(m, op, ln: int, pc: int):
    """(tensor map, coordinates, mark) of a ``[tmap, {c0, ...}]`` operand for lane ``ln``; the
    mark (:func:`emulator.tmap_infer.map_tag`) is None for a map the launch described, else
    that of a probe map (the map returned is then a placeholder of the coordinates' rank) or
    of an inferred one."""
    addr = int(m.address(op, pc)[ln]) & 0xFFFF_FFFF_FFFF_FFFF
    if _param_map(m, op):
        raw = _read_param(m, addr, 128, pc)  # [param, {..}]: a .param state-space address
    else:
        raw = _read_generic(m, addr, 128, pc)
        gidx = _global_descriptor(m, op, ln, pc)
        if gidx is not None:
            # a descriptor in global memory (tensormap.cp_fenceproxy, or a generic store) read
            # by the copy: ordered after its writer only by a barrier or a release/acquire
            m._hb_check(m._gshadow, "global", np.array([ln]), gidx, pc, None, "plain")
    tm = decode_tensor_map(raw, m.prog.where(pc))
    vec = op.elems[0] if op.elems else None
    if vec is None:
        raise m.prog.unsupported(pc, "tensor copy without coordinates")
    cs = vec.elems if vec.kind == "vector" else (vec,)
    coords = [int(np.broadcast_to(m.read(c, "s32", pc), (m.N,))[ln]) for c in cs]
    tag = _tmap_infer.map_tag(raw)
    if tag is not None and tag.probe:
        if m.tmap_probe is None:
            raise m.prog.unsupported(pc, "a probe tensor map outside a probe run")
        return tm, coords, tag
    if len(coords) != tm.rank:
        raise _Fault("fault", f"{len(coords)} coordinates for a rank-{tm.rank} tensor map "
                              f"({m.prog.where(pc)})")
    return tm, coords, tag


def _param_map(m, op) -> bool:
    """Whether the ``[tmap, {..}]`` operand ``op`` names a kernel parameter (``.param``)."""
    return op.base is not None and op.base.kind == "symbol" and (
        op.base.name or op.base.text) in m.launch.params


def _global_descriptor(m, op, ln: int, pc: int) -> np.ndarray | None:
    """The global race-shadow indices (1, 128) of the descriptor a non-parameter tensor-map
    operand ``op`` names for traced lane ``ln``, or None (an untraced lane, no global shadow,
    an address in the parameter window)."""
    if not (m.ntr and ln < m.ntr and m._gshadow is not None):
        return None
    addr = int(m.address(op, pc)[ln]) & 0xFFFF_FFFF_FFFF_FFFF
    if PARAM_WINDOW <= addr < PARAM_WINDOW + (1 << 32):
        return None
    reg, off = m.gmem.translate(np.array([addr], np.uint64), 128)
    return (m._gstarts[reg] + off)[:, None] + np.arange(128)


def _descriptor_in_flight(m, op, ln: int, mbar: int, epoch: int, pc: int) -> None:
    """A tensor load through a descriptor in global memory reads it until the load completes
    (its complete-tx, ``epoch`` of the copy's unit): the 128 bytes are recorded as read by the
    copy at its completion, so a later write (``tensormap.replace`` on the global copy, a
    generic store of the next map) by a thread not ordered after that completion - one that
    waited on the mbarrier phase, or is ordered after such a wait - races with the in-flight
    load (DeepGEMM#343: a grouped GEMM rewriting the per-group map before the last load through
    it landed). A map in the kernel parameters is never written."""
    gidx = None if _param_map(m, op) else _global_descriptor(m, op, ln, pc)
    if gidx is None:
        return
    c = int(m.cta_local[ln])
    m._hb_check(m._gshadow, "global", np.array([ln]), gidx, pc, None, "plain",
                rec_lane=_unit_lane(m, c, _copy_unit(m, ln, mbar, pc)), rec_clk=epoch)


# ----------------------------------------------------------------------------- mbarriers
def mbar_access(m, exe: np.ndarray, addr: np.ndarray, pc: int, write: bool) -> None:
    """The happens-before view of an mbarrier operation on the 8 shared bytes of the object:
    ``mbarrier.init``/``inval`` are plain writes, every other operation (arrive, expect_tx,
    complete_tx, test/try_wait) an atomic access; so a use by a thread not ordered after the
    init (the barrier between them removed) or an init/inval racing with uses is HB1 (PTX ISA
    9.1 §9.7.13.15.2: the object must be initialised before any other mbarrier operation)."""
    if not m.ntr:
        return
    lanes = np.flatnonzero(exe)
    lanes = lanes[lanes < m.ntr]
    if not lanes.size:
        return
    a = np.asarray(addr, dtype=np.int64)[lanes] & 0xFFFFFFFF
    if not write:  # a use of no initialised mbarrier faults in the operation itself
        known = np.array([m.mbar_key(int(ln), int(x)) in m.mbar for ln, x in zip(lanes, a)],
                         np.bool_)
        lanes, a = lanes[known], a[known]
        if not lanes.size:
            return
    idx = m._shared_idx(a, lanes, 8, pc, cluster=True)  # a peer's mbarrier (mapa)
    if write:
        m._hb_check(m.sshadow, "shared", lanes, idx, pc, np.zeros((lanes.size, 8), np.uint8),
                    "plain")
    else:
        # a use is ordered after an init that fence.mbarrier_init published through a cluster
        # barrier (emulator.cluster: that fence orders only the inits, so its knowledge is
        # kept apart from the thread's clock and joined for mbarrier uses only)
        with _cluster_init_knowledge(m, lanes):
            m._hb_check(m.sshadow, "shared", lanes, idx, pc, None, "atomic")


class _cluster_init_knowledge:
    """Context: ``lanes`` check with their clocks joined with the mbarrier-init knowledge
    they acquired through cluster barriers (``ClusterBatch.ivc``), restored afterwards."""

    def __init__(self, m, lanes: np.ndarray):
        self.m, self.lanes, self.saved = m, lanes, None

    def __enter__(self):
        clb = getattr(self.m, "clb", None)
        if clb is not None and clb.ivc is not None and clb.ivc[self.lanes].any():
            self.saved = self.m.vc[self.lanes].copy()
            self.m.vc[self.lanes] = np.maximum(self.saved, clb.ivc[self.lanes])
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            self.m.vc[self.lanes] = self.saved
        return False


def note_init(m, ln: int, addr: int, pc: int) -> None:
    """Remember who initialised the mbarrier at ``addr`` (the cluster checks read it) and its
    proxy-fence count then."""
    st = m.mbar.get(m.mbar_key(ln, addr))
    if st is not None:
        st["init_lane"], st["init_pf"], st["init_pc"] = ln, int(m.pfence[ln]), pc


# ----------------------------------------------------------------------------- handlers
def _complete_tx(m, ln: int, mbar: int, nbytes: int, epoch: int, pc: int) -> None:
    st = m.mbar_get(ln, mbar, pc)
    one = np.zeros(m.N, np.bool_)
    one[ln] = True
    # the complete-tx accesses the mbarrier through the generic proxy (PTX ISA 9.1, the cp.async.bulk
    # (§9.7.9.25.4.1) and cp.async.bulk.tensor descriptions: "accesses its mbarrier operand using
    # generic-proxy"), like mbarrier.init: the init needs no proxy fence, only to happen before
    # the copy (mbar_access: a use not ordered after the init is a race)
    mbar_access(m, one, np.full(m.N, mbar, np.int64), pc, write=False)
    # the copy's release: its unit's column in the issuing CTA's block (emulator.cluster)
    col = int(m.acol[m.cta_local[ln]]) + _copy_unit(m, ln, mbar, pc)
    st["vc"][col] = max(int(st["vc"][col]), epoch)
    m.mbar_complete_tx(ln, mbar, nbytes, pc)


def _dims_of(mods: list[str]) -> int | None:
    for x in mods:
        if len(x) == 2 and x[1] == "d" and x[0].isdigit():
            return int(x[0])
    return None


def bulk(m, ins, pc, exe, active):
    """``cp.async.bulk*`` and ``cp.reduce.async.bulk*`` (called from the ``cp`` handler)."""
    mods, types = m._types[pc]
    ops = ins.operands
    st = _state(m)
    if "commit_group" in mods:
        st.committed[exe] += 1
        return None
    if "wait_group" in mods:
        n = int(ops[0].value or 0) if ops else 0
        _wait_group(m, exe, n, read="read" in mods)
        return None
    if "prefetch" in mods:
        return None  # an L2 hint: no architectural effect
    if "multicast::cluster" in mods and mods[0] != "reduce" and (
            "tensor" in mods or "global" in mods[mods.index("bulk"):]):
        from emulator import cluster as _cluster  # TMA / bulk multicast into the cluster
        _cluster.tma_multicast(m, ins, pc, exe)
        return None
    # .cta_group::2 (PTX ISA 9.1 cp.async.bulk.tensor): the completion mbarrier may be in the
    # peer CTA of the destination's CTA pair (emulator.cta_pair); modelled for the tile loads
    pair = "cta_group::2" in mods
    if "multicast::cluster" in mods or any(x.startswith("im2col") for x in mods) or (
            pair and not ("tensor" in mods and mods[0] != "reduce" and
                          "mbarrier::complete_tx::bytes" in mods)):
        raise m.prog.unsupported(pc)
    spaces = [x for x in mods if x in ("global", "shared::cluster", "shared::cta", "shared")]
    if len(spaces) < 2:
        raise m.prog.unsupported(pc)
    dst_sp, src_sp = spaces[0], spaces[1]
    reduce_op = None
    if mods[0] == "reduce":
        reduce_op = next((x for x in mods if x in ("add", "min", "max", "inc", "dec", "and",
                                                     "or", "xor")), None)
        if reduce_op is None:
            raise m.prog.unsupported(pc)
    tensor = "tensor" in mods
    lanes = np.flatnonzero(exe)
    for ln in lanes:
        ln = int(ln)
        if tensor and dst_sp.startswith("shared"):
            if "mbarrier::complete_tx::bytes" not in mods:
                raise m.prog.unsupported(pc)
            tm, coords, tag = _tmap_operand(m, ops[1], ln, pc)
            dst = int(m.address(ops[0], pc)[ln])
            if dst % 128:
                raise _Fault("fault", f"TMA destination 0x{dst:x} is not 128-byte aligned "
                                      f"({m.prog.where(pc)})")
            if tag is not None and tag.probe:
                m.tmap_probe.load(m, ln, tag.index, coords, dst,
                                  int(m.address(ops[2], pc)[ln]) & 0xFFFFFFFF, pc)
                continue
            _check_tile(m, tm, pc, ins.opcode)
            # an inferred map's global layout is a guess: its global side is not checked
            data = _load_box(m, tm, coords, pc, ln if tag is None else None)
            offs = _swizzled(dst + np.arange(data.size, dtype=np.int64), tm.swizzle)
            mbar = int(m.address(ops[2], pc)[ln]) & 0xFFFFFFFF
            epoch = async_write_shared(m, ln, offs, data, pc, mbar, pair=pair)
            _descriptor_in_flight(m, ops[1], ln, mbar, epoch, pc)
            _complete_tx(m, ln, mbar, data.size, epoch, pc)
        elif tensor:  # shared -> global tile store / reduction
            if "bulk_group" not in mods:
                raise m.prog.unsupported(pc)
            tm, coords, tag = _tmap_operand(m, ops[0], ln, pc)
            src = int(m.address(ops[1], pc)[ln])
            if src % 128:
                raise _Fault("fault", f"TMA source 0x{src:x} is not 128-byte aligned "
                                      f"({m.prog.where(pc)})")
            epoch = _epoch(m, int(m.cta_local[ln]), 2)
            if tag is not None and tag.probe:
                m.tmap_probe.store(m, ln, tag.index, coords, src)
                st.pending.append((ln, int(st.committed[ln]), epoch))
                continue
            _check_tile(m, tm, pc, ins.opcode)
            offs = _swizzled(src + np.arange(tm.box_bytes, dtype=np.int64), tm.swizzle)
            data = async_read_shared(m, ln, offs, pc, epoch)
            st.pending.append((ln, int(st.committed[ln]), epoch))
            row_addr, valid, lo, hi, n0 = _tile(tm, coords)
            es = tm.esize
            rows = data.reshape(row_addr.size, n0 * es)[valid, lo * es:hi * es]
            addrs = (row_addr[valid] + lo * es).astype(np.uint64)
            if hi <= lo:
                continue
            if reduce_op is not None:
                rows = _reduce(m, pc, reduce_op, ELEMTYPES[tm.elemtype], addrs, rows)
            _global_write(m, ln, addrs, np.ascontiguousarray(rows), pc,
                          atomic=reduce_op is not None, check=tag is None)
        else:
            size = int(np.broadcast_to(m.read(ops[2], "u32", pc), (m.N,))[ln])
            if size % 16 or size <= 0:
                raise _Fault("fault", f"bulk copy size {size} is not a positive multiple of 16 "
                                      f"({m.prog.where(pc)})")
            dst = int(m.address(ops[0], pc)[ln])
            src = int(m.address(ops[1], pc)[ln])
            if dst % 16 or src % 16:
                raise _Fault("fault", f"bulk copy addresses 0x{dst:x} <- 0x{src:x} not 16-byte "
                                      f"aligned ({m.prog.where(pc)})")
            c = int(m.cta_local[ln])
            if src_sp == "global":
                global_async_read(m, ln, np.array([src], np.uint64), size, pc)
                data = m.gmem.read(np.array([src], np.uint64), size).reshape(-1)
            else:
                epoch = _epoch(m, c, 2)
                data = async_read_shared(m, ln, src + np.arange(size, dtype=np.int64), pc,
                                         epoch)
            if dst_sp.startswith("shared"):
                if "mbarrier::complete_tx::bytes" not in mods:
                    raise m.prog.unsupported(pc)
                mbar = int(m.address(ops[3], pc)[ln]) & 0xFFFFFFFF
                if src_sp != "global":
                    # a shared-to-shared copy completes, source reads included, when its
                    # complete-tx lands: the destination barrier's phase releases the source
                    # reads too (a receiver that waited, then hands the buffer back, orders the
                    # sender's restaging after them)
                    bst = m.mbar_get(ln, mbar, pc)
                    col2 = int(m.acol[c]) + 2
                    bst["vc"][col2] = max(int(bst["vc"][col2]), epoch)
                offs = dst + np.arange(size, dtype=np.int64)
                if reduce_op is not None:  # cp.reduce.async.bulk into shared::cluster
                    kind = _REDUCE_TYPES.get(next((x for x in types), None) or "")
                    if kind is None:
                        raise m.prog.unsupported(pc)
                    old = m.shared.reshape(-1)[_flat_cluster(m, ln, offs, mbar, pc)]
                    data = _reduce_bytes(m, pc, reduce_op, kind, old.reshape(1, -1),
                                         data.reshape(1, -1)).reshape(-1)
                epoch = async_write_shared(m, ln, offs, data, pc, mbar)
                _complete_tx(m, ln, mbar, size, epoch, pc)
            else:
                if "bulk_group" not in mods:
                    raise m.prog.unsupported(pc)
                st.pending.append((ln, int(st.committed[ln]), epoch))
                rows = data.reshape(1, -1)
                addrs = np.array([dst], np.uint64)
                if reduce_op is not None:
                    t = next((x for x in types), None)
                    kind = _REDUCE_TYPES.get(t or "")
                    if kind is None:
                        raise m.prog.unsupported(pc)
                    rows = _reduce(m, pc, reduce_op, kind, addrs, rows)
                _global_write(m, ln, addrs, rows, pc, atomic=reduce_op is not None)
    return None


_REDUCE_TYPES = {"f16": (2, "f16"), "bf16": (2, "bf16"), "f32": (4, "f32"), "f64": (8, "f64"),
                 "u32": (4, "u"), "s32": (4, "s"), "u64": (8, "u"), "s64": (8, "s"),
                 "b32": (4, "u"), "b64": (8, "u")}


def _reduce(m, pc, op: str, kind: tuple[int, str], addrs: np.ndarray, rows: np.ndarray):
    """New global bytes of a bulk reduction: ``old <op> rows`` element-wise (PTX ISA 9.1
    §9.7.9.25.4 cp.reduce.async.bulk; float add rounds once per element, .rn)."""
    return _reduce_bytes(m, pc, op, kind, m.gmem.read(addrs, rows.shape[1]), rows)


def _reduce_bytes(m, pc, op: str, kind: tuple[int, str], old: np.ndarray, rows: np.ndarray):
    """``old <op> rows`` element-wise, both uint8 rows of one shape (:func:`_reduce`)."""
    import ml_dtypes
    es, k = kind
    dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
          "u": {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es],
          "s": {4: np.int32, 8: np.int64}.get(es, np.int32)}[k]
    old = np.ascontiguousarray(old).view(dt)
    new = np.ascontiguousarray(rows).view(dt)
    if op == "add":
        out = (old.astype(np.float64) + new.astype(np.float64)).astype(dt) if k in (
            "f16", "bf16") else old + new
    elif op == "min":
        out = np.minimum(old, new)
    elif op == "max":
        out = np.maximum(old, new)
    elif op in ("and", "or", "xor") and k in ("u", "s"):
        out = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](old, new)
    else:
        raise m.prog.unsupported(pc, f"bulk reduction .{op} on {k}")
    return np.ascontiguousarray(out.astype(dt)).view(np.uint8).reshape(rows.shape)


def _wait_group(m, exe: np.ndarray, n: int, read: bool = False) -> None:
    """``cp.async.bulk.wait_group{.read} n``: the executing threads' bulk groups but the newest
    ``n`` have finished reading their sources (both forms; the shared source retires here:
    each thread acquires the async unit 2's epochs of its retired stores) and, without
    ``.read``, are complete: their global writes are performed now, ordered before what the
    thread does next (PTX ISA 9.1 §9.7.9.27.2.2: ``.read`` waits only until the sources are
    read)."""
    st = _state(m)
    keep = []
    for ln, grp, epoch in st.pending:
        if exe[ln] and grp < st.committed[ln] - n:
            if m.ntr and ln < m.ntr:
                col = int(m.acol[m.cta_local[ln]]) + 2  # the thread's CTA block (cluster)
                m.vc[ln, col] = max(int(m.vc[ln, col]), epoch)
        else:
            keep.append((ln, grp, epoch))
    st.pending = keep
    if not read and st.gwrites:
        _complete_writes(m, st, lambda ln, grp: exe[ln] and grp < st.committed[ln] - n)


def _complete_writes(m, st: _State, due) -> None:
    """Record the pending bulk-store global writes ``due(lane, group)`` selects in the race
    shadow with their issuing thread's clock now (the write is performed at completion, not
    at issue: a reader ordered after the issue but not after this point races with it)."""
    keep = []
    for w in st.gwrites:
        ln, grp, gidx, data, pc, atomic = w
        if due(ln, grp):
            m._hb_check(m._gshadow, "global", np.full(gidx.shape[0], ln), gidx, pc, data,
                        "atomic" if atomic else "plain")
        else:
            keep.append(w)
    st.gwrites = keep


def complete_at_exit(m, exe: np.ndarray) -> None:
    """The exiting threads ``exe``' bulk-store global writes still pending (never covered by a
    ``wait_group`` without ``.read``): performed at some point after the issue; recorded with
    the thread's clock at its exit, after everything it did (called by ``Machine.on_exit``)."""
    st = getattr(m, "_acs", None)
    if st is not None and st.gwrites:
        _complete_writes(m, st, lambda ln, grp: bool(exe[ln]))


@handler("tensormap")
def _tensormap(m, ins, pc, exe, active):
    """``tensormap.replace.tile.<field>.<space>.b1024.<type> [tm], {ord,} new_val`` (a generic-
    proxy write of the field, :data:`TMAP_LAYOUT`) and ``tensormap.cp_fenceproxy.global.
    shared::cta.tensormap::generic.release.gpu.sync.aligned [dst], [src], 128`` (the warp
    copies 128 bytes from shared to global; the proxy fence has no further effect here)."""
    mods, types = m._types[pc]
    ops = ins.operands
    if mods[0] == "replace":
        if len(mods) < 3 or mods[1] != "tile":
            raise m.prog.unsupported(pc)
        field = mods[2]
        if field not in TMAP_LAYOUT:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' field .{field}")
        space = "global" if "global" in mods else "shared"
        off, w, n = TMAP_LAYOUT[field]
        if n > 1:
            ordv = int(ops[1].value or 0)
            if not 0 <= ordv < n:
                raise _Fault("fault", f"'{ins.opcode}' ordinal {ordv} outside 0..{n - 1} "
                                      f"({m.prog.where(pc)})")
            off += w * ordv
            val_op = ops[2]
        else:
            val_op = ops[1]
        lanes = np.flatnonzero(exe)
        if not lanes.size:
            return None
        v = np.broadcast_to(m.read(val_op, "b64" if w == 8 else "b32", pc), (m.N,))[lanes]
        data = np.ascontiguousarray(v.astype(np.uint64 if w == 8 else np.uint32)).view(
            np.uint8).reshape(lanes.size, w)
        addr = m.address(ops[0], pc)
        m.mem_access(space, addr + off, w, exe, pc, data=data)
        return None
    if mods[0] == "cp_fenceproxy":
        size = int(ops[2].value or 0)
        if size != 128:
            raise m.prog.unsupported(pc, f"'{ins.opcode}' of {size} bytes")
        lanes = np.flatnonzero(exe)
        first = lanes[np.r_[True, (lanes[1:] // 32) != (lanes[:-1] // 32)]] if lanes.size \
            else lanes
        one = np.zeros(m.N, np.bool_)
        one[first] = True
        src = m.address(ops[1], pc)
        dst = m.address(ops[0], pc)
        got = m.mem_access("shared", src, 128, one, pc)
        m.mem_access("global", dst, 128, one, pc, data=got)
        return None
    raise m.prog.unsupported(pc)


def check_inval(m, st: dict, addr: int, pc: int) -> None:
    """HB7 at ``mbarrier.inval``: the current phase's tx-count is not zero: bytes completed
    that no ``expect_tx`` announced (negative: an expect_tx byte count too small, the excess
    landed on a later phase) or announced bytes that never arrived (positive), PTX ISA 9.1
    §9.7.13.15.1 (a phase completes only when its tx-count reaches zero)."""
    tx = int(st.get("tx", 0))
    if tx == 0:
        return
    key = ("HB7", pc, addr)
    if key in m.findings:
        return
    ins = m.prog.insts[pc]
    m.findings[key] = Finding(
        rule="HB7", severity="error", file=m.prog.filename, line=ins.line, col=ins.col,
        message=(f"mbarrier at shared 0x{addr:x} invalidated with tx-count {tx} in its current "
                 f"phase ({st['pending']} of {st['count']} arrivals pending): "
                 + ("asynchronous copies completed more bytes than 'expect_tx' announced"
                    if tx < 0 else "'expect_tx' announced bytes that no copy completed")),
        notes=[Note(message="the expect_tx byte count must equal the bytes of the copies that "
                            "signal the phase (a TMA box counts all its bytes, out-of-bounds "
                            "fill included)")])
