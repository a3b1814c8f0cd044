"""Emulated memories: global buffers in a 64-bit virtual space, per-CTA shared memory, and the
happens-before shadow state used for race detection.

Global memory is a list of regions (one per kernel buffer), each a ``uint8`` array placed at a
256-byte aligned base with an unmapped 64 KiB gap after it; any access outside a region is an
illegal address. Shared memory is one ``uint8`` array of shape (CTAs of the batch, bytes).

Race detection (rule HB1) keeps, per touched byte (sparse, in 4 KiB pages), the last writer (lane,
its own vector-clock entry at the write, program counter, byte value) and the last reader (lane,
clock, pc). An access by lane ``l`` of CTA thread ``t`` conflicts with the recorded access by
thread ``u`` of the same CTA when ``clock_u > VC[l][u]`` (not ordered by a synchronisation), and
always with one of a different CTA (the emulator models no grid-wide synchronisation). Keeping only
the *last* reader is an approximation: a write is checked against the most recent read only
(documented in :mod:`emulator`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["GlobalMemory", "Shadow", "ShadowBudgetExceeded", "MemoryFault", "GLOBAL_BASE",
           "SHARED_WINDOW", "SHADOW_BYTES_PER_BYTE"]

#: first global address handed out (buffers are never at 0, so NULL faults)
GLOBAL_BASE = 0x10_0000_0000
#: generic-address window of the executing CTA's shared memory (``cvta.shared``)
SHARED_WINDOW = 0x7F00_0000_0000
_GAP = 1 << 16


class MemoryFault(Exception):
    """An access outside every buffer, or a misaligned one (the GPU's illegal-address error)."""


class GlobalMemory:
    """Named global buffers at fixed virtual addresses."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.bases: list[int] = []
        self.data: list[np.ndarray] = []
        self._next = GLOBAL_BASE
        self._bases_arr = np.zeros(0, dtype=np.uint64)
        self._ends_arr = np.zeros(0, dtype=np.uint64)
        self.written: list[np.ndarray] | None = None
        self.atomic: list[np.ndarray] | None = None

    def add(self, name: str, data: np.ndarray) -> int:
        """Map ``data`` (copied as bytes) and return its base address."""
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1).copy()
        base = self._next
        self.names.append(name)
        self.bases.append(base)
        self.data.append(raw)
        self._next = (base + max(raw.size, 1) + _GAP + 255) // 256 * 256
        self._bases_arr = np.array(self.bases, dtype=np.uint64)
        self._ends_arr = np.array([b + d.size for b, d in zip(self.bases, self.data)],
                                  dtype=np.uint64)
        return base

    def add_zeros(self, name: str, nbytes: int) -> int:
        """Map a zero-filled buffer of ``nbytes`` bytes and return its base address. The array
        is ``numpy.zeros`` (the OS backs its pages on first touch), so a large buffer the kernel
        barely touches costs little host memory."""
        raw = np.zeros(max(int(nbytes), 1), dtype=np.uint8)
        base = self._next
        self.names.append(name)
        self.bases.append(base)
        self.data.append(raw)
        self._next = (base + raw.size + _GAP + 255) // 256 * 256
        self._bases_arr = np.array(self.bases, dtype=np.uint64)
        self._ends_arr = np.array([b + d.size for b, d in zip(self.bases, self.data)],
                                  dtype=np.uint64)
        return base

    def track_writes(self) -> None:
        """From now on record, per byte of every buffer, whether a store wrote it
        (:attr:`written`) and whether an atomic did (:attr:`atomic`): what a run over a subset
        of CTAs may be checked on."""
        self.written = [np.zeros(d.size, np.bool_) for d in self.data]
        self.atomic = [np.zeros(d.size, np.bool_) for d in self.data]

    def mark(self, addr: np.ndarray, nbytes: int, atomic: bool) -> None:
        """Record a store (or atomic) of ``nbytes`` at each of ``addr`` (when tracking)."""
        if getattr(self, "written", None) is None:
            return
        reg, off = self.translate(addr, nbytes)
        self.mark_at(reg, off, nbytes, atomic)

    def mark_at(self, reg: np.ndarray, off: np.ndarray, nbytes: int, atomic: bool) -> None:
        """:meth:`mark` of accesses already translated (:meth:`translate`'s region, offset)."""
        if getattr(self, "written", None) is None:
            return
        for r, sel in _by_region(reg):
            idx = (off if sel is None else off[sel])[:, None] + np.arange(nbytes)
            self.written[r][idx] = True
            if atomic:
                self.atomic[r][idx] = True

    def buffer(self, name: str) -> np.ndarray:
        """The bytes of buffer ``name``."""
        return self.data[self.names.index(name)]

    def translate(self, addr: np.ndarray, nbytes: int) -> tuple[np.ndarray, np.ndarray]:
        """(region index, offset) of each address; raises :class:`MemoryFault` when any access of
        ``nbytes`` bytes is not inside one region."""
        a = addr.astype(np.uint64)
        r = np.searchsorted(self._bases_arr, a, side="right").astype(np.int64) - 1
        ok = r >= 0
        rc = np.maximum(r, 0)
        if self._bases_arr.size == 0:
            ok = np.zeros_like(ok)
        else:
            ok &= (a + np.uint64(nbytes)) <= self._ends_arr[rc]
        if not ok.all():
            bad = int(a[~ok][0])
            raise MemoryFault(f"illegal global address 0x{bad:x} ({nbytes} B access outside every "
                              f"buffer)")
        return rc, (a - self._bases_arr[rc]).astype(np.int64)

    def flat_index(self, region: np.ndarray, off: np.ndarray) -> np.ndarray:
        """Index into the concatenation of all regions (for the shadow state)."""
        starts = np.cumsum([0] + [d.size for d in self.data[:-1]]).astype(np.int64)
        return starts[region] + off

    @property
    def total(self) -> int:
        return int(sum(d.size for d in self.data))

    def read(self, addr: np.ndarray, nbytes: int) -> np.ndarray:
        """Bytes at ``addr`` (n,) -> array (n, nbytes) uint8."""
        reg, off = self.translate(addr, nbytes)
        return self.read_at(reg, off, nbytes)

    def read_at(self, reg: np.ndarray, off: np.ndarray, nbytes: int) -> np.ndarray:
        """:meth:`read` of accesses already translated: array (n, nbytes) uint8."""
        by = _by_region(reg)
        if len(by) == 1 and by[0][1] is None:  # every lane in one buffer (the common case)
            return self.data[by[0][0]][off[:, None] + np.arange(nbytes)]
        out = np.empty((reg.size, nbytes), dtype=np.uint8)
        for r, sel in by:
            idx = off[sel][:, None] + np.arange(nbytes)
            out[sel] = self.data[r][idx]
        return out

    def write(self, addr: np.ndarray, data: np.ndarray) -> None:
        """Store ``data`` (n, nbytes) uint8 at ``addr`` (n,); later lanes win on overlap."""
        reg, off = self.translate(addr, data.shape[1])
        self.write_at(reg, off, data)

    def write_at(self, reg: np.ndarray, off: np.ndarray, data: np.ndarray) -> None:
        """:meth:`write` of accesses already translated."""
        nbytes = data.shape[1]
        for r, sel in _by_region(reg):
            if sel is None:
                self.data[r][off[:, None] + np.arange(nbytes)] = data
                continue
            idx = off[sel][:, None] + np.arange(nbytes)
            self.data[r][idx] = data[sel]


def _by_region(reg: np.ndarray) -> list[tuple[int, np.ndarray | None]]:
    """(region, lane mask) per distinct region of ``reg`` (ascending); the mask is None when
    every lane is in that one region."""
    if reg.size and reg.min() == reg.max():
        return [(int(reg[0]), None)]
    return [(int(r), reg == r) for r in np.unique(reg)]


class ShadowBudgetExceeded(Exception):
    """The happens-before shadow state would grow past its memory budget (bytes)."""

    def __init__(self, needed: int, budget: int, what: str):
        self.needed, self.budget, self.what = needed, budget, what
        super().__init__(f"the race-analysis shadow of {what} memory would need "
                         f"{needed / 2**20:.0f} MiB, over its budget of {budget / 2**20:.0f} MiB")


#: shadow fields: name -> (dtype, initial value)
_FIELDS = {
    "w_lane": (np.int64, -1), "w_clk": (np.int32, 0), "w_pc": (np.int32, -1),
    "w_val": (np.uint8, 0), "w_async": (np.bool_, False),
    "w_pf": (np.int32, 0),  # writer's proxy-fence count at the write
    "r_lane": (np.int64, -1), "r_clk": (np.int32, 0), "r_pc": (np.int32, -1),
    # the last write / read was an atomic or a morally strong (relaxed/acquire/release/
    # volatile) access: 0 weak, 1 strong at .cta scope, 2 strong at .gpu/.sys scope. Two
    # strong accesses whose scope includes both threads never race (PTX ISA 9.1 §8.7, §8.10)
    "w_atomic": (np.int8, 0), "r_atomic": (np.int8, 0),
}
#: bytes of shadow state per byte of tracked memory
SHADOW_BYTES_PER_BYTE = sum(np.dtype(d).itemsize for d, _ in _FIELDS.values())


class Shadow:
    """Per-byte last-writer / last-reader records of one memory (shared: per CTA of the batch),
    kept sparse when large: the byte space is cut in pages of :attr:`PAGE` bytes and a page's
    records are
    allocated when an access first touches it, so the state is proportional to the bytes the
    kernel touches, not to the buffers' size (:data:`SHADOW_BYTES_PER_BYTE` bytes of state per
    touched byte, rounded up to pages). A space whose full records fit :attr:`DENSE_BYTES`
    (and the budget) is allocated at once instead (shared memory, small launches).

    Callers map byte indices to record slots with :meth:`slots` and index the field arrays
    (``w_lane``, ``w_clk``, ... see :data:`_FIELDS`) with the slots.

    Args:
        nbytes: size of the tracked byte space.
        budget: most bytes of records allowed (None: unbounded); :meth:`slots` raises
            :class:`ShadowBudgetExceeded` rather than growing past it.
        what: the memory's name for messages (``global``, ``shared``).
    """

    PAGE = 4096
    #: byte spaces whose full records take at most this many bytes are allocated densely at
    #: once (slot = byte index: no page lookups), when the budget allows
    DENSE_BYTES = 256 << 20

    def __init__(self, nbytes: int, budget: int | None = None, what: str = "global"):
        self.nbytes = nbytes
        self.budget, self.what = budget, what
        self.page_of = np.full(max(1, -(-nbytes // self.PAGE)), -1, dtype=np.int64)
        self.n_pages = 0
        self._cap = 0
        for name, (dt, _) in _FIELDS.items():
            setattr(self, name, np.zeros(0, dtype=dt))
        full = self.page_of.size * self.PAGE * SHADOW_BYTES_PER_BYTE
        self.dense = full <= self.DENSE_BYTES and (budget is None or full <= budget)
        if self.dense:
            self._grow(self.page_of.size)
            self.page_of[:] = np.arange(self.page_of.size)
            self.n_pages = self.page_of.size

    @property
    def state_bytes(self) -> int:
        """Bytes of records allocated now."""
        return self._cap * self.PAGE * SHADOW_BYTES_PER_BYTE

    def slots(self, idx: np.ndarray) -> np.ndarray:
        """Record slots (same shape) of byte indices ``idx``, allocating untouched pages.

        Raises:
            ShadowBudgetExceeded: the new pages would take the records past ``budget``.
        """
        idx = np.asarray(idx, dtype=np.int64)
        if self.dense:
            return idx
        pg = idx >> 12 if self.PAGE == 4096 else idx // self.PAGE
        loc = self.page_of[pg]
        if (loc < 0).any():
            new = np.unique(pg[loc < 0])
            self._grow(self.n_pages + new.size)
            self.page_of[new] = np.arange(self.n_pages, self.n_pages + new.size)
            self.n_pages += new.size
            loc = self.page_of[pg]
        return loc * self.PAGE + (idx & (self.PAGE - 1))

    def _grow(self, pages: int) -> None:
        if pages <= self._cap:
            return
        cap = max(pages, 2 * self._cap, 4)
        cap = min(cap, max(pages, self.page_of.size))
        need = pages * self.PAGE * SHADOW_BYTES_PER_BYTE
        if self.budget is not None and need > self.budget:
            raise ShadowBudgetExceeded(need, self.budget, self.what)
        if self.budget is not None:
            cap = max(pages, min(cap, self.budget // (self.PAGE * SHADOW_BYTES_PER_BYTE)))
        n = cap * self.PAGE
        for name, (dt, init) in _FIELDS.items():
            old = getattr(self, name)
            # zero-initialised fields come from calloc (the OS zero-fills pages on first
            # touch): only the -1 fields are written at allocation
            arr = np.zeros(n, dtype=dt) if init == 0 else np.full(n, init, dtype=dt)
            arr[:old.size] = old
            setattr(self, name, arr)
        self._cap = cap
