"""The instruction-handler registry and the small types shared by :mod:`emulator.machine` (the
SIMT engine) and :mod:`emulator.ops` (instruction semantics), so that neither imports the other
in a circle: ``ops`` registers its handlers here, ``machine`` looks them up here.

A handler is ``h(m, ins, pc, exe, active)`` (see :mod:`emulator.ops`). Contract: a handler
that changes control - sets program counters (branches), blocks lanes (barriers, waits) or
ends them (exit) - sets ``m.pc`` of every ``active`` lane itself and returns ``True``; any
other return means "no control change", and the engine advances every active lane to
``pc + 1`` (and, when all live lanes were active, keeps them converged without a scheduler
search).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emulator.numerics import UINT

__all__ = ["handler", "_HANDLERS", "_Fault", "_adapt", "ASYNC_UNITS", "WGMMA_UNIT",
           "WGMMA_UNITS", "COPY_SLOTS", "copy_unit", "unit_kind"]

#: the first async unit of wgmma: unit ``WGMMA_UNIT + k`` holds the operand reads of warpgroup
#: k's wgmma groups (a CTA has at most 1024 threads: 8 warpgroups). Each warpgroup has its own
#: unit because a ``wgmma.wait_group`` completes only the executing warpgroup's groups (PTX ISA
#: 9.1 §9.7.15.7): one unit per CTA would order a warpgroup after the other's reads too
WGMMA_UNIT = 3
#: wgmma units per CTA (one per warpgroup)
WGMMA_UNITS = 8
#: copy units per CTA: a TMA / bulk copy writing shared memory is recorded under the unit of
#: its completion mbarrier's slot (``copy_unit``), so acquiring one mbarrier's phase orders a
#: thread after the copies that complete on that mbarrier (and others of its slot) only - PTX
#: orders a thread after the copies whose complete_tx it observed (PTX ISA 9.1 §9.7.9.25.4.1);
#: mbarriers whose slots collide (more than COPY_SLOTS of them, 8 bytes apart) share a unit
COPY_SLOTS = 8
#: the first of the copy units 2..COPY_SLOTS - 1 (slot 0 is unit 1)
_COPY_EXTRA = WGMMA_UNIT + WGMMA_UNITS
#: extra vector-clock columns per CTA after its T threads: the async units (0: tensor core,
#: tcgen05 operand reads; 1: TMA and bulk copies writing shared memory, mbarrier slot 0; 2: TMA
#: and bulk stores reading shared memory; 3-10: wgmma operand reads of warpgroups 0-7; 11-17:
#: copies of mbarrier slots 1-7); an async unit's shadow lane id is ``n_ctas * T + ASYNC_UNITS *
#: cta + unit`` (column ``T + unit``)
ASYNC_UNITS = _COPY_EXTRA + COPY_SLOTS - 1


def copy_unit(mbar: int, rank: int = 0, nrank: int = 1) -> int:
    """The async unit of a copy completing on the mbarrier at shared offset ``mbar`` (rank bits
    of a shared::cluster address ignored) of the CTA of cluster rank ``rank`` (of ``nrank``):
    its 8-byte slot, rotated by the rank (a multicast or a copy into a peer lands on the
    mbarriers at one offset in several CTAs: one unit for them all would order a CTA's waiter
    after the bytes the copy wrote into its peers, PTX ISA 9.1 §9.7.9.25.4.1), modulo
    :data:`COPY_SLOTS`."""
    stride = max(1, COPY_SLOTS // max(1, int(nrank)))
    slot = (((int(mbar) & 0xFFFFFF) >> 3) + int(rank) * stride) % COPY_SLOTS
    return 1 if slot == 0 else _COPY_EXTRA + slot - 1


def unit_kind(unit: int) -> int:
    """What async ``unit`` does: 0 tensor core, 1 copy into shared memory, 2 store reading
    shared memory, 3 wgmma operand reads (of warpgroup ``unit - WGMMA_UNIT``)."""
    if unit in (0, 1, 2):
        return unit
    return 3 if unit < _COPY_EXTRA else 1

#: opcode base (``add``, ``wgmma``) -> handler
_HANDLERS: dict[str, Callable] = {}


def handler(*names: str):
    """Register the decorated function as the handler of opcodes ``names``."""
    def deco(fn):
        for n in names:
            _HANDLERS[n] = fn
        return fn
    return deco


class _Fault(Exception):
    """A candidate bug that ends the launch: ``kind`` is the outcome status (fault, deadlock,
    timeout), ``message`` the one-line report."""

    def __init__(self, kind: str, message: str):
        self.kind, self.message = kind, message
        super().__init__(message)


def _adapt(arr: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Reinterpret register bits ``arr`` as dtype ``dt`` (truncating or extending the width)."""
    w = dt.itemsize
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8)
    if arr.dtype.itemsize != w:
        if arr.dtype.itemsize > w:
            arr = arr.astype(UINT[w])
        elif dt.kind == "i":
            arr = arr.view({1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[arr.dtype.itemsize]
                           ).astype(dt)
            return arr
        else:
            arr = arr.astype(UINT[w])
    return arr.view(dt) if arr.dtype != dt else arr


def _lanes(x, n: int) -> np.ndarray:
    """``np.broadcast_to(x, (n,))``: a read-only array of ``n`` lanes; for an array that already
    has that shape, the same read-only view made without broadcast_to's argument handling
    (about 6x cheaper; it runs for most operands of every instruction)."""
    if type(x) is np.ndarray and x.shape == (n,):
        v = x.view()
        v.flags.writeable = False
        return v
    return np.broadcast_to(x, (n,))
