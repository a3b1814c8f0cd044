"""Tensor maps a PTX file does not describe, inferred from the kernel itself (issue 18 item 5).

``ailower verify FILE.ptx`` without ``--kernel`` runs the happens-before check on a default
launch (:mod:`emulator.launchcheck`). A ``.param .align 64 .b8 tmap[128]`` parameter is a
``CUtensorMap`` whose tensor (element type, box, swizzle) the file does not say. Before this
module such a kernel was not emulated at all ("describe it in --launch"), so every host
tensor-descriptor kernel (Triton's ``TensorDescriptor`` arguments, CUTLASS / DeepGEMM
``__grid_constant__ CUtensorMap``) was left to the static rules alone.

What the happens-before analysis needs of a tensor map is mostly *how many shared-memory bytes*
one copy writes (a TMA load) or reads (a TMA store): those bytes are what ``complete_tx``
counts, what a consumer must be ordered after, and what a refill must not overwrite early.
The kernel states that number itself, in its ``mbarrier.expect_tx`` byte counts (PTX ISA 9.1
§9.7.13.15: a phase completes when the pending arrivals *and* the tx-count reach zero). So the
check runs twice:

1. **Probe run** (no race analysis): every undescribed tensor map is a *probe map*. A tensor
   load through it writes nothing and completes no bytes; it is recorded on its mbarrier's
   current phase (with its coordinates and shared destination). When every live thread is
   blocked (the point where the real kernel could only go on once the copies land), each
   mbarrier some thread waits on, whose arrivals are all in and whose phase received probe
   copies, gives one equation ``sum(copies of map p in the phase) x bytes(p) = outstanding
   tx-count``, and its phase completes. Stores through a probe map only record coordinates.
2. The equations are solved for ``bytes(p)`` (a phase with one map first, then substitution;
   maps that only ever share a phase are split by their box shapes from the coordinate steps, or
   by the distance between their shared destinations). The box per dim is the step of that
   coordinate over the copies (tiles are laid side by side), the element size what makes the
   bytes fit; a map only stored through takes a box of at most those steps and 16-byte rows (an
   under-estimate: fewer bytes checked, never more). Inconsistent equations, or none, and the
   map is not inferred: the check stops with the reason, as before.
3. **The checked run** uses the inferred maps, each over its own zero-filled tensor. Only
   the shared-memory side of their copies is checked: global addresses through an inferred map
   are a guess of the layout, so the global bytes such copies read or write are not
   race-checked (said in the report).

The probe and inferred maps are marked in bytes 124..127 of the emulator's 128-byte layout
(:data:`emulator.async_copy.TMAP_LAYOUT` leaves them unused): ``b"\\xa5\\x5a"``, a kind byte
(``P`` probe, ``I`` inferred) and the parameter's index. ``tensormap.replace`` keeps them (it
edits fields only), so a device-side edit of a probed map stays probed.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MAGIC", "InferredMap", "ProbeLog", "TagInfo", "infer_maps", "map_tag", "probe_map",
           "tag_map"]

#: bytes 124..125 of a probe / inferred tensor map (unused by the emulator's layout)
MAGIC = b"\xa5\x5a"
_TAG_OFF = 124


@dataclass(frozen=True)
class TagInfo:
    """The mark of a probe (``kind`` ``"P"``) or inferred (``"I"``) map: which parameter."""

    kind: str
    index: int

    @property
    def probe(self) -> bool:
        return self.kind == "P"


def map_tag(raw: bytes) -> TagInfo | None:
    """The probe / inferred mark of 128 tensor-map bytes, or None for any other map."""
    if len(raw) < 128 or raw[_TAG_OFF:_TAG_OFF + 2] != MAGIC:
        return None
    kind = chr(raw[_TAG_OFF + 2])
    return TagInfo(kind, raw[_TAG_OFF + 3]) if kind in "PI" else None


def tag_map(raw: bytes, kind: str, index: int) -> bytes:
    """``raw`` (128 bytes) with the mark of ``kind`` (``P``/``I``) for parameter ``index``."""
    if not 0 <= index < 256:
        raise ValueError(f"tensor-map parameter index {index} outside 0..255")
    b = bytearray(raw)
    b[_TAG_OFF:_TAG_OFF + 4] = MAGIC + kind.encode() + bytes([index])
    return bytes(b)


def probe_map(index: int) -> bytes:
    """The 128 bytes of the probe map of parameter ``index`` (fields: a 16-byte rank-1 map, so
    a device-side ``tensormap.replace`` of it still decodes)."""
    from emulator.async_copy import encode_tensor_map
    return tag_map(encode_tensor_map(0, 0, (16,), (), (16,)), "P", index)


@dataclass
class _Copy:
    param: int
    coords: tuple[int, ...]
    cta: int          # the grid's CTA id (batch-independent)
    smem: int         # shared offset of the destination (load) / source (store)
    load: bool
    #: a store's source: bytes from it the kernel's threads had written (16-byte chunks that
    #: differ from the undefined initial contents), 0 when not measured
    written: int = 0


def _written_extent(m, ln: int, off: int, limit: int = 1 << 16) -> int:
    """Bytes from shared offset ``off`` of lane ``ln``'s CTA that were written since the launch:
    the leading 16-byte chunks of which some byte differs from the emulator's undefined initial
    contents (:data:`emulator.machine._GARBAGE`, tiled over the batch's shared memory)."""
    from emulator.machine import _GARBAGE
    c = int(m.cta_local[ln])
    S = m.shared.shape[1]
    end = min(S, off + limit)
    if off < 0 or off >= end:
        return 0
    flat = c * S + np.arange(off, end)
    diff = m.shared[c, off:end] != _GARBAGE[flat % _GARBAGE.size]
    n = (end - off) // 16
    if not n:
        return 0
    chunk = diff[:n * 16].reshape(n, 16).any(axis=1)
    first_clean = int(np.argmin(chunk)) if not chunk.all() else n
    return 16 * first_clean


@dataclass
class ProbeLog:
    """What the probe run saw (set as ``Machine.tmap_probe``): the copies through probe maps and
    the phase equations (:meth:`resolve`)."""

    copies: list[_Copy] = field(default_factory=list)
    #: (copies per parameter in the phase, bytes the phase still expected, the copies'
    #: (parameter, destination CTA, shared offset))
    equations: list[tuple[Counter, int, list[tuple[int, int, int]]]] = field(
        default_factory=list)
    ranks: dict[int, int] = field(default_factory=dict)
    #: a reason the probe saw that makes a map impossible to infer (rank mismatch ...)
    conflict: str = ""
    #: the kernel uses 4-bit element types (half a byte per element is a plausible box)
    subbyte: bool = False

    def _note(self, index: int, coords: list[int]) -> None:
        r = self.ranks.setdefault(index, len(coords))
        if r != len(coords) and not self.conflict:
            self.conflict = (f"tensor-map parameter {index} is used with {r} and with "
                             f"{len(coords)} coordinates")

    def load(self, m, ln: int, index: int, coords: list[int], dst: int, mbar: int,
             pc: int) -> None:
        """A tensor load by lane ``ln`` through the probe map of parameter ``index`` into the
        shared offset ``dst``, completing on the mbarrier at ``mbar`` (a shared::cluster address
        may name a peer's): recorded on that mbarrier's current phase."""
        self._note(index, coords)
        c = int(m.cta_local[ln])
        self.copies.append(_Copy(index, tuple(coords), int(m.batch_ids[c]), dst & 0xFFFFFF,
                                 True))
        st = m.mbar_get(ln, mbar, pc)
        tcta = int(m.batch_ids[m.mbar_key(ln, mbar, pc)[0]])
        st.setdefault("probe", []).append((st["phase"], (index, tcta, dst & 0xFFFFFF)))

    def store(self, m, ln: int, index: int, coords: list[int], src: int) -> None:
        """A tensor store / reduction by lane ``ln`` through a probe map, from shared ``src``."""
        self._note(index, coords)
        c = int(m.cta_local[ln])
        off = src & 0xFFFFFF
        self.copies.append(_Copy(index, tuple(coords), int(m.batch_ids[c]), off, False,
                                 _written_extent(m, ln, off)))

    def resolve(self, m, every: bool = False) -> bool:
        """Every live lane is blocked: complete the phase of each mbarrier a lane waits on (with
        ``every``, of every mbarrier: the batch ended) whose arrivals are all in, whose
        tx-count is still positive and which received probe copies in this phase, recording its
        equation. Returns whether any phase completed (the machine then runs on; otherwise the
        deadlock is real)."""
        keys = {v: k for k, v in m.mbar_ids.items()}
        if every:
            waited = list(keys)
        else:
            waited = np.unique(m.block_id[m.blocked & (m.block_kind == 2)]).tolist()
        done = False
        for mid in waited:
            key = keys.get(int(mid))
            st = m.mbar.get(key) if key is not None else None
            if st is None or not self.close(st):
                continue
            m._mbar_complete(key[0] * m.T, key[1], st)
            done = True
        return done

    def close(self, st: dict) -> bool:
        """Record the equation of mbarrier state ``st``'s current phase, if its arrivals are all
        in, its tx-count is positive and it received probe copies (also at ``mbarrier.inval``
        and a re-``init``, which end the phase); its tx-count is then zero. Returns whether it
        did."""
        mine = [c for ph, c in st.get("probe", ()) if ph == st["phase"]]
        if not mine or st["pending"] > 0 or st["tx"] <= 0:
            return False
        self.equations.append((Counter(c[0] for c in mine), int(st["tx"]), mine))
        st["probe"] = [(ph, c) for ph, c in st["probe"] if ph != st["phase"]]
        st["tx"] = 0
        return True


@dataclass(frozen=True)
class InferredMap:
    """A tensor map inferred for parameter ``index``: element size (bytes), box per dim
    (innermost first), and how it was decided (one line for the report)."""

    index: int
    esize: int
    box: tuple[int, ...]
    how: str

    @property
    def box_bytes(self) -> int:
        return math.prod(self.box) * self.esize

    def _strides(self) -> tuple[int, ...]:
        """Byte strides of dims 1.. of the tensor of exactly one box (16-byte multiples)."""
        strides, acc = [], self.esize
        for d in self.box[:-1]:
            acc = -(-(acc * d) // 16) * 16
            strides.append(acc)
        return tuple(strides)

    def encode(self, address: int) -> bytes:
        """The 128 bytes of this map over a tensor of exactly one box at ``address`` (coordinates
        outside it are out of bounds: zero-filled loads, dropped stores), marked inferred."""
        from emulator.async_copy import encode_tensor_map
        elem = {1: 0, 2: 1, 4: 2, 8: 4}[self.esize]
        return tag_map(encode_tensor_map(address, elem, self.box, self._strides(), self.box),
                       "I", self.index)

    def tensor_bytes(self) -> int:
        """Bytes of the zero-filled tensor behind :meth:`encode`."""
        strides = self._strides()
        return (strides[-1] if strides else self.esize) * self.box[-1]


def _steps(copies: list[_Copy], rank: int) -> list[int | None]:
    """Per dim, the gcd of the coordinate differences over the copies (the tile step), or None
    where the coordinate took one value."""
    out: list[int | None] = []
    for d in range(rank):
        vals = sorted({c.coords[d] for c in copies})
        g = 0
        for v in vals[1:]:
            g = math.gcd(g, v - vals[0])
        out.append(g or None)
    return out


def _factor(n: int, ndims: int) -> list[int] | None:
    """``n`` elements as ``ndims`` box extents of at most 256 each (innermost largest)."""
    out = []
    for _ in range(ndims):
        b = next((d for d in range(min(n, 256), 0, -1) if n % d == 0), 1)
        out.append(b)
        n //= b
    return out if n == 1 else None


def _nice(b: int) -> bool:
    """A box extent real kernels use: a power of two or a multiple of 8 (62 or 124 rows are
    the remainder of a wrong byte count, not a tile)."""
    return b & (b - 1) == 0 or b % 8 == 0


def _shape(nbytes: int, rank: int, steps: list[int | None], esizes: tuple[int, ...],
           nice: bool = False) -> tuple[int, tuple[int, ...]] | None:
    """(element size, box) with ``prod(box) * esize == nbytes``, each extent <= 256, the inner
    row a multiple of 16 bytes, the extents of stepped dims equal to their steps where they
    can be; with ``nice``, only boxes whose other extents are :func:`_nice` (and no fallback
    box)."""
    for es in esizes:
        if nbytes % es:
            continue
        n = nbytes // es
        box: list[int | None] = [s if s is not None and s <= 256 else None for s in steps]
        known = math.prod(b for b in box if b is not None)
        if n % known:
            continue
        free = [d for d in range(rank) if box[d] is None]
        rest = _factor(n // known, len(free)) if free else ([] if n == known else None)
        if rest is None:
            continue
        for d, b in zip(free, rest):
            box[d] = b
        if nice and not all(_nice(int(box[d])) for d in free):
            continue
        if (box[0] * es) % 16 == 0:
            return es, tuple(int(b) for b in box)
    if nice:
        return None
    # no shape matching the steps: any box of these bytes (the layout is not checked)
    for es in (1,):
        ext = _factor(nbytes, rank)
        if ext is not None and (ext[0] * es) % 16 == 0:
            return es, tuple(ext)
    return None


def infer_maps(log: ProbeLog, params: dict[int, str]) -> tuple[dict[int, InferredMap], str]:
    """Solve the probe run's equations for the tensor maps of ``params`` (index -> name).

    Bytes per copy: a phase with one undecided map decides it; a phase with several is split
    by candidate sizes (the coordinate steps times an element size of 1, 2, 4 or 8 bytes; the
    distance between a map's shared destinations, or from its destination to the next copy's
    in the phase), the first split that every phase's byte
    count agrees with and under which no two copies of one phase overlap in shared memory.
    A map's copies into different places of one CTA may not be larger than the distance
    between those places (its stage buffers): where the byte counts say more, the map gets that
    distance and the checked run reports the byte counts (a phase that never completes, HB2,
    or completes with bytes outstanding, HB7).

    Returns:
        (maps, why): one :class:`InferredMap` per parameter when every one was decided, else an
        empty dict and one line naming the parameter and what was missing or inconsistent.
    """
    if log.conflict:
        return {}, log.conflict
    used = {c.param for c in log.copies}
    loads = {p: [c for c in log.copies if c.param == p and c.load] for p in used}
    steps = {p: _steps([c for c in log.copies if c.param == p], log.ranks[p]) for p in used}
    dist = {p: _distance(loads[p]) for p in used}
    eqs = _typical(log.equations)
    x: dict[int, int] = {}
    how: dict[int, str] = {}
    err = _propagate(x, how, eqs, params, dist)
    while not err:
        open_eq = next((e for e in eqs if sum(p not in x for p in e[0]) > 1), None)
        if open_eq is None:
            break
        err = _split(open_eq, x, how, eqs, steps, dist, params, loads)
    if err:
        return {}, err
    _check_steps(x, how, steps, dist, log.subbyte)
    out: dict[int, InferredMap] = {}
    for p in sorted(used):
        if p in x:
            sh = _shape(x[p], log.ranks[p], steps[p], (2, 1, 4, 8), nice=True)
            d = dist.get(p)
            if sh is None and d and d > x[p] and loads[p]:
                # no tile of these bytes (a box of 62 rows: an expect_tx that leaves out some
                # copy's bytes, alike in every phase): the map takes the distance between its
                # stage buffers if that is a tile; the checked run reports the byte counts
                sh = _shape(d, log.ranks[p], steps[p], (2, 1, 4, 8), nice=True)
                if sh is not None:
                    how[p] = (f"the distance between its stage buffers (the expect_tx counts "
                              f"imply {x[p]} B per copy, which is no tile of its coordinates)")
                    x[p] = d
            if sh is None:
                sh = _shape(x[p], log.ranks[p], steps[p], (2, 1, 4, 8))
            if sh is None:
                return {}, f"parameter '{params[p]}': no box of {x[p]} bytes fits its coordinates"
            out[p] = InferredMap(p, sh[0], sh[1], f"{x[p]} B per copy from {how[p]}")
        elif loads[p]:
            return {}, (f"parameter '{params[p]}': its loads complete on mbarriers whose phases "
                        f"never completed in the probe run, so their bytes are unknown")
        else:
            out[p] = _store_only(p, [c for c in log.copies if c.param == p], log.copies,
                                 log.ranks[p], steps[p])
    for p in params:
        if p not in out:  # never used by a tensor copy: any map will do
            out[p] = InferredMap(p, 1, (16,), "not used by a tensor copy in this run")
    return out, ""


def _store_only(p: int, stores: list[_Copy], every: list[_Copy], rank: int,
                steps: list[int | None]) -> InferredMap:
    """The map of a parameter only stored through: 1-byte elements and as many bytes as the
    threads had written from every store's source (the staging tile), no more than the
    distance to another copy's shared address in the same CTA; where nothing was measured,
    its coordinate steps (tiles do not overlap: the true box is no larger) with 16-byte rows
    where a coordinate did not move. Both under-estimate: the bytes read are a prefix of the
    true box's."""
    n = min(c.written for c in stores)
    for c in stores:
        above = [o.smem - c.smem for o in every if o.cta == c.cta and o.smem > c.smem]
        if above:
            n = min(n, min(above))
    if steps and all(s_ is not None for s_ in steps):
        # no more than a box of the coordinate steps of the largest element size that fits
        # (the written bytes may run on into data next to the staging tile)
        prod = math.prod(steps)
        n = max((prod * es for es in (1, 2, 4, 8) if prod * es <= n), default=n)
    n = n // 16 * 16
    if n >= 16:
        ext = _factor(n, rank) or _factor(16, rank)
        return InferredMap(p, 1, tuple(ext), f"stores only: the {n} B its threads wrote from "
                                             f"the copy's source")
    box = [min(st, 256) if st is not None else 1 for st in steps]
    if steps[0] is None:
        box[0] = 16
    box[0] = -(-box[0] // 16) * 16
    return InferredMap(p, 1, tuple(box), "stores only: at most its coordinate steps, an "
                                         "under-estimate")


def _check_steps(x: dict[int, int], how: dict[int, str], steps, dist, subbyte: bool) -> None:
    """A map whose every coordinate moved has a box of at most those steps (tiles side by side)
    and an element size of 1, 2, 4 or 8 bytes (half a byte in a kernel with 4-bit types): bytes
    per copy that are no such multiple of the steps' product come from a wrong ``expect_tx``
    (one that leaves out a box, or counts only this CTA's half of a multicast, in every phase
    alike); the map then takes the steps' box and the checked run reports the byte counts."""
    sizes = (0.5, 1, 2, 4, 8) if subbyte else (1, 2, 4, 8)
    for p, v in list(x.items()):
        st = steps.get(p)
        if not st or any(s_ is None for s_ in st):
            continue
        prod = math.prod(st)
        if any(v == prod * es for es in sizes):
            continue
        fit = next((int(prod * es) for es in sizes if prod * es >= v and prod * es % 16 == 0),
                   None)
        if fit is None or (dist.get(p) and fit > dist[p]):
            continue
        x[p] = fit
        how[p] = (f"its coordinate steps ({' x '.join(map(str, st))} elements; the expect_tx "
                  f"counts imply {v} B per copy, no whole element size)")


def _layout_ok(x: dict[int, int], loads: dict[int, list[_Copy]]) -> bool:
    """No two loads of different shared destinations overlap with these bytes per copy (a
    split that makes one map's box run into the next stage's buffer is wrong; the same
    destination loaded again is a buffer reused)."""
    per_cta: dict[int, set[tuple[int, int]]] = {}
    for p, cs in loads.items():
        if p not in x:
            continue
        for c in cs:
            per_cta.setdefault(c.cta, set()).add((c.smem, c.smem + x[p]))
    for iv in per_cta.values():
        srt = sorted(iv)
        for (a0, a1), (b0, b1) in zip(srt, srt[1:]):
            if b0 != a0 and b0 < a1:
                return False
    return True


def _distance(loads: list[_Copy]) -> int | None:
    """The least distance between two different shared destinations of one map's loads in
    one CTA (its stage buffers), or None."""
    offs: dict[int, set[int]] = {}
    for c in loads:
        offs.setdefault(c.cta, set()).add(c.smem)
    d = [b - a for o in offs.values() for a, b in zip(sorted(o), sorted(o)[1:])]
    return min(d) if d else None


def _typical(equations) -> list:
    """The equations to solve: of the phases with the same copies (per map), those with the
    most common byte count (a tie: the count of the earliest phase). A tensor map has one box,
    so phases with the same copies expect the same bytes; a phase expecting other bytes (a
    wrong ``expect_tx`` site: the prologue's, or the loop's) is left to the checked run, where
    it is the deadlock (HB2), the early completion (HB1) or the leftover tx-count (HB7) it
    causes."""
    groups: dict[frozenset, list] = {}
    for cnt, t, spans in equations:
        groups.setdefault(frozenset(cnt.items()), []).append((dict(cnt), t, spans))
    out = []
    for eqs in groups.values():
        freq = Counter(t for _, t, _ in eqs)
        best = max(freq.values())
        keep = next(t for _, t, _ in eqs if freq[t] == best)
        out += [e for e in eqs if e[1] == keep]
    return out


def _propagate(x: dict[int, int], how: dict[int, str], eqs, params, dist,
               clamped: bool = False) -> str:
    """Decide every map that is the one undecided map of some phase, until none is; check
    every fully decided phase (byte count, no two copies overlapping) unless a map was clamped
    to its stage distance (the checked run then reports the byte counts). Returns an error
    line or ""."""
    progress = True
    while progress:
        progress = False
        for cnt, t, spans in eqs:
            unknown = [p for p in cnt if p not in x]
            rest = t - sum(n * x[p] for p, n in cnt.items() if p in x)
            if len(unknown) == 1:
                p = unknown[0]
                v, r = divmod(rest, cnt[p])
                if dist[p] and (r or v > dist[p]):
                    x[p], clamped = dist[p], True
                    how[p] = ("the distance between its shared destinations (the expect_tx "
                              "counts imply more)")
                    progress = True
                    continue
                if r or v <= 0 or v % 16:
                    return (f"parameter '{params[p]}': the mbarrier byte counts leave {rest} "
                            f"bytes for {cnt[p]} copies, not a positive multiple of 16 each")
                x[p] = v
                how.setdefault(p, "expect_tx of its mbarrier phases")
                progress = True
            elif not unknown and not clamped:
                if rest != 0:
                    names = ", ".join(f"'{params[p]}'" for p in cnt)
                    return (f"the mbarrier byte counts of phases with copies through {names} "
                            f"do not agree with one box size per tensor map")
                if _overlap(spans, x):
                    names = ", ".join(f"'{params[p]}'" for p in cnt)
                    return (f"with the box sizes the byte counts give, copies through {names} "
                            f"of one mbarrier phase overlap in shared memory")
    return ""


def _overlap(spans, x) -> bool:
    """Whether two copies of one phase overlap in shared memory (the same map into the same
    place twice is one copy repeated: a phase no thread waited on gathers several rounds)."""
    iv = sorted({(cta, dst, dst + x[p]) for p, cta, dst in spans})
    return any(a[0] == b[0] and b[1] < a[2] for a, b in zip(iv, iv[1:]))


def _gap(spans, p: int) -> int | None:
    """The least distance from a destination of map ``p`` to the next destination of another
    copy of the same phase in the same CTA (the copies of one phase do not overlap), or None."""
    d = [o - dst for q, cta, dst in spans if q == p
         for _, c2, o in spans if c2 == cta and o > dst]
    return min(d) if d else None


def _split(eq, x, how, eqs, steps, dist, params, loads) -> str:
    """A phase with several undecided maps: try candidate sizes for all but one of them (the
    equation gives the last, no larger than its stage distance), keep the first assignment
    every phase agrees with; failing that, each map its stage distance when all have one."""
    import itertools
    cnt = eq[0]
    unknown = sorted(p for p in cnt if p not in x)
    cands: dict[int, list[tuple[int, str]]] = {}
    for p in unknown:
        c: list[tuple[int, str]] = []
        if all(st is not None for st in steps[p]):
            c += [(es * math.prod(steps[p]), "expect_tx split by the coordinate steps")
                  for es in (2, 1, 4, 8)]
        if dist[p]:
            c.append((dist[p], "expect_tx split by the distance between its shared "
                               "destinations"))
        gap = _gap(eq[2], p)
        if gap:
            c.append((gap, "expect_tx split by the distance to the next copy's destination"))
        cands[p] = [(v, w) for v, w in c if v > 0 and v % 16 == 0 and
                    (dist[p] is None or v <= dist[p])]
    # a last resort, only when no other candidate fits: the phase's bytes split evenly over its
    # copies (A and B boxes of one size, the common square-tile GEMM; a split-K CTA that loads
    # one k-tile shows no step and no stage distance)
    even, r = divmod(eq[1], sum(cnt.values()))
    rounds = [cands]
    if not r and even > 0 and even % 16 == 0:
        rounds.append({p: cands[p] + [(even, "expect_tx split evenly between the maps' copies")]
                       for p in unknown if dist[p] is None or even <= dist[p]})
    for cs in rounds:
        if len(cs) != len(unknown):
            continue
        for last in unknown:
            fixed = [p for p in unknown if p != last]
            for combo in itertools.product(*(cs[p] for p in fixed)):
                tx, th = dict(x), dict(how)
                for p, (v, w) in zip(fixed, combo):
                    tx[p], th[p] = v, w
                if not _propagate(tx, th, eqs, params, dist) and last in tx and (
                        dist[last] is None or tx[last] <= dist[last]) and _layout_ok(tx, loads):
                    th.setdefault(last, "expect_tx less the other maps' bytes")
                    if th[last] == "expect_tx of its mbarrier phases":
                        th[last] = "expect_tx less the other maps' bytes"
                    x.clear(), x.update(tx)
                    how.clear(), how.update(th)
                    return ""
    if all(dist[p] for p in unknown):
        # the byte counts fit no split: the stage buffers decide, and the checked run reports
        # the phases whose expect_tx disagrees with them
        for p in unknown:
            x[p] = dist[p]
            how[p] = "the distance between its shared destinations"
        return _propagate(x, how, eqs, params, dist, clamped=True)
    names = ", ".join(f"'{params[p]}'" for p in unknown)
    return (f"parameters {names} share their mbarrier phases, and neither their coordinate "
            f"steps nor their shared destinations split the expected bytes between them")
