"""Emulated memories: global buffers in a 64-bit virtual space, per-CTA shared memory, and the
happens-before shadow state used for race detection.

Global memory is a list of regions (one per kernel buffer), each a ``uint8`` array placed at a
256-byte aligned base with an unmapped 64 KiB gap after it; any access outside a region is an
illegal address. Shared memory is one ``uint8`` array of shape (CTAs of the batch, bytes).

Race detection (rule HB1) keeps, per byte, the last writer (lane, its own vector-clock entry at the
write, program counter, byte value) and the last reader (lane, clock, pc). An access by lane ``l``
of CTA thread ``t`` conflicts with the recorded access by thread ``u`` of the same CTA when
``clock_u > VC[l][u]`` (not ordered by a synchronisation), and always with one of a different
CTA (the emulator models no grid-wide synchronisation). Keeping only the *last* reader is an
approximation: a write is checked against the most recent read only (documented in
:mod:`emulator`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["GlobalMemory", "Shadow", "MemoryFault", "GLOBAL_BASE", "SHARED_WINDOW"]

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
        out = np.empty((addr.size, nbytes), dtype=np.uint8)
        for r in np.unique(reg):
            sel = reg == r
            idx = off[sel][:, None] + np.arange(nbytes)
            out[sel] = self.data[r][idx]
        return out

    def write(self, addr: np.ndarray, data: np.ndarray) -> None:
        """Store ``data`` (n, nbytes) uint8 at ``addr`` (n,); later lanes win on overlap."""
        nbytes = data.shape[1]
        reg, off = self.translate(addr, nbytes)
        for r in np.unique(reg):
            sel = reg == r
            idx = off[sel][:, None] + np.arange(nbytes)
            self.data[r][idx] = data[sel]


class Shadow:
    """Per-byte last-writer / last-reader records of one memory (shared: per CTA of the batch)."""

    def __init__(self, nbytes: int):
        self.w_lane = np.full(nbytes, -1, dtype=np.int64)
        self.w_clk = np.zeros(nbytes, dtype=np.int32)
        self.w_pc = np.full(nbytes, -1, dtype=np.int32)
        self.w_val = np.zeros(nbytes, dtype=np.uint8)
        self.w_async = np.zeros(nbytes, dtype=np.bool_)
        self.w_pf = np.zeros(nbytes, dtype=np.int32)  # writer's proxy-fence count at the write
        self.r_lane = np.full(nbytes, -1, dtype=np.int64)
        self.r_clk = np.zeros(nbytes, dtype=np.int32)
        self.r_pc = np.full(nbytes, -1, dtype=np.int32)
        # the last write / read was an atomic or a morally strong (relaxed/acquire/release/
        # volatile) access: 0 weak, 1 strong at .cta scope, 2 strong at .gpu/.sys scope. Two
        # strong accesses whose scope includes both threads never race (PTX ISA 9.1 §8.7, §8.10)
        self.w_atomic = np.zeros(nbytes, dtype=np.int8)
        self.r_atomic = np.zeros(nbytes, dtype=np.int8)
