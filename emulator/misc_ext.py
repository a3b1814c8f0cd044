"""Remaining sm_90/sm_100 opcodes: ``setmaxnreg``, ``clusterlaunchcontrol`` and
``griddepcontrol`` (``elect.sync`` is in :mod:`emulator.ops`).

* ``setmaxnreg.{inc,dec}.sync.aligned.u32 imm`` (PTX ISA 9.1, 'setmaxnreg'): ``imm`` must lie in
  24..256 and be a multiple of 8 (else ``fault``); a ``.inc`` below (``.dec`` above) the count
  its warp set with its previous ``setmaxnreg`` is a ``fault``. Whether all warps of a
  warpgroup execute the same ``setmaxnreg`` is not checked: Triton 3.6's warp-specialized
  kernels run it per partition (one-warp partitions) and are correct on the GPU.
  The CTA's register pool: every warp starts with the launch's per-thread count, which this
  model bounds from above by the entry's ``.maxnreg`` (without one: the most a CTA of the
  launch's size can hold, ``REGISTER_FILE / threads`` rounded down to 8, at most 256); a
  ``.dec`` returns ``32 x (old - new)`` registers to the pool, and a ``.inc`` takes
  ``32 x (new - old)`` from it or *blocks* until another warp releases enough (PTX ISA 9.1,
  'setmaxnreg': "A pool of available registers is maintained per-CTA"; ``.inc`` "blocks the
  execution until enough registers are available in the CTA's register pool", which only
  ``.dec`` feeds: a warp's exit returns nothing to it in this model, as the ISA promises
  nothing of the kind). A plan that asks for more than the pool can ever hold (consumers at
  240 beside a producer at 40 in 384 threads at 168: 18432 asked, 16384 released) leaves the
  ``.inc`` warps blocked for ever: a deadlock (HB2). The launch count is an upper bound (the
  launch may hold fewer registers, which releases less), so such a deadlock is one on the GPU.
* ``griddepcontrol.wait`` / ``launch_dependents`` (PTX ISA 9.1, 'griddepcontrol'): a single
  launch has no prerequisite grid and no dependent grid, so both complete at once; memory
  ordering is unchanged (every access of this grid stays checked).
* ``clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes
  {.multicast::cluster::all}.b128 [resp], [mbar]`` (PTX ISA 9.1, 'clusterlaunchcontrol'): the
  emulator's request never succeeds - a legal outcome (the hardware cancels only clusters that
  have not been launched yet, and may launch all of them first). It writes a 16-byte response
  meaning "not canceled" to ``resp`` and completes 16 transaction bytes on ``mbar`` (in every CTA of
  the cluster with ``.multicast::cluster::all``). ``query_cancel.is_canceled`` is therefore
  always false, and ``query_cancel.get_first_ctaid`` on such a response is undefined in the ISA:
  a ``fault``. A kernel that only works when a cancel succeeds is not checked by this model.
"""

from __future__ import annotations

import numpy as np

from emulator import ops as _ops
from emulator.registry import _Fault, handler

__all__: list[str] = []

REGISTER_FILE = 65536
"""32-bit registers per SM on sm_90 and sm_100 (CUDA C++ Programming Guide, 'Technical
Specifications per Compute Capability': 64 K registers per multiprocessor)."""
#: ``Machine.block_kind`` of a warp whose ``setmaxnreg.inc`` waits for registers
REG_KIND = 7


def _launch_regs(m) -> int:
    """Upper bound of the per-thread register count of the launch (module docstring)."""
    d = m.prog.entry.directive("maxnreg")
    if d is not None and d.args and isinstance(d.args[0], int):
        return int(d.args[0])
    warps = -(-m.T // 32)
    # a multiple of 8 like every setmaxnreg count (at most 256, the largest count)
    return min(256, (REGISTER_FILE // (32 * warps)) // 8 * 8)


def _pool(m) -> dict:
    """This batch's register pools: ``{"r0": launch count, "cap": registers per CTA, "warp":
    {cta * 4096 + warp: count}, "free": {cta: registers}}``."""
    if getattr(m, "_regpool_batch", None) is not m.batch_ids:
        r0 = _launch_regs(m)
        warps = -(-m.T // 32)
        m._regpool = {"r0": r0, "warp": {}, "free": {}, "cap": r0 * 32 * warps}
        m._regpool_batch = m.batch_ids
    return m._regpool


def _wake(m, c: int) -> None:
    """Let CTA ``c``'s warps blocked in ``setmaxnreg.inc`` retry (registers were released)."""
    T = m.T
    sl = slice(c * T, (c + 1) * T)
    rel = np.flatnonzero(m.blocked[sl] & (m.block_kind[sl] == REG_KIND)) + c * T
    m.blocked[rel] = False
    m.block_kind[rel] = 0


def blocked_message(m, lane: int) -> str:
    """The deadlock note of a warp blocked in ``setmaxnreg.inc``."""
    pool = _pool(m)
    c = int(m.cta_local[lane])
    return (f"setmaxnreg.inc waits for registers: the CTA's pool holds at most "
            f"{pool['cap']} ({pool['r0']} per thread at launch, an upper bound), "
            f"{pool['free'].get(c, 0)} are free and no warp will release more (PTX ISA 9.1, "
            f"'setmaxnreg'; {REGISTER_FILE} registers per SM)")


@handler("setmaxnreg")
def _setmaxnreg(m, ins, pc, exe, active):
    """``setmaxnreg`` count rules (module docstring)."""
    mods = m._types[pc][0]
    n = int(ins.operands[0].value or 0) if ins.operands else -1
    if ins.operands and ins.operands[0].kind != "imm":
        raise m.prog.unsupported(pc, f"'{ins.opcode}' with a register count that is not an "
                                     f"immediate")
    if not (24 <= n <= 256) or n % 8:
        raise _Fault("fault", f"'{ins.opcode} {n}': the register count must be a multiple of 8 "
                              f"in 24..256 (PTX ISA 9.1, 'setmaxnreg') ({m.prog.where(pc)})")
    lanes = np.flatnonzero(exe)
    if not lanes.size:
        return None
    if not hasattr(m, "_maxnreg") or m._maxnreg_batch is not m.batch_ids:
        m._maxnreg, m._maxnreg_batch = {}, m.batch_ids
    pool = _pool(m)
    held = False
    # per warp of its CTA (a CTA's thread count need not be a multiple of 32)
    wkey = m.cta_local[lanes].astype(np.int64) * 4096 + m.tid[lanes] // 32
    for w in np.unique(wkey).tolist():
        prev = m._maxnreg.get(int(w))
        if prev is not None and (("inc" in mods and n < prev) or ("dec" in mods and n > prev)):
            raise _Fault("fault", f"'{ins.opcode} {n}' after a count of {prev} in the same "
                                  f"warp: .inc must not lower and .dec must not raise the count "
                                  f"({m.prog.where(pc)})")
        c = w // 4096
        if c not in pool["free"]:
            pool["free"][c] = 0  # every warp starts with the launch count: nothing free
        cur = pool["warp"].get(w, pool["r0"])
        wl = lanes[wkey == w]
        if n > cur and 32 * (n - cur) > pool["free"][c]:
            # not enough registers released yet: the warp waits (retries when some are)
            m.blocked[wl] = True
            m.block_kind[wl] = REG_KIND
            m.pc[wl] = pc
            held = True
            continue
        pool["free"][c] += 32 * (cur - n)
        pool["warp"][w] = n
        m._maxnreg[int(w)] = n
        if n < cur:
            _wake(m, c)
    if held:
        m.pc[active & ~m.blocked] = pc + 1
        return True
    return None


@handler("griddepcontrol")
def _griddepcontrol(m, ins, pc, exe, active):
    """``griddepcontrol.wait`` / ``.launch_dependents``: complete at once (module docstring)."""
    mods = m._types[pc][0]
    if not any(x in mods for x in ("wait", "launch_dependents")):
        raise m.prog.unsupported(pc)
    return None


_RESP_BYTES = 16


@handler("clusterlaunchcontrol")
def _clc(m, ins, pc, exe, active):
    """``clusterlaunchcontrol.try_cancel`` / ``query_cancel`` (module docstring)."""
    mods = m._types[pc][0]
    ops = ins.operands
    if "try_cancel" in mods:
        resp = _ops._addr_u(m, ops[0], pc)
        mbar = _ops._addr_u(m, ops[1], pc)
        multi = any(x.startswith("multicast") for x in mods)
        lanes = np.flatnonzero(exe)
        for ln in lanes:
            one = np.zeros(m.N, np.bool_)
            one[ln] = True
            ranks = range(m.C) if multi else [None]
            me = int(m.rk_of[m.batch_ids[m.cta_local[ln]]])
            for r in ranks:
                off_r = int(resp[ln]) & 0xFFFFFF
                off_b = int(mbar[ln]) & 0xFFFFFF
                if r is not None and r != me:
                    off_r |= (r + 1) << 24
                    off_b |= (r + 1) << 24
                a = np.zeros(m.N, np.int64)
                a[ln] = off_r
                m.mem_access("shared::cluster", a, _RESP_BYTES, one, pc,
                             data=np.zeros((1, _RESP_BYTES), np.uint8))
                # the response is written by the request (issued after the issuer's earlier
                # accesses) and made visible by the complete_tx: the phase carries the write
                st = m.mbar_get(int(ln), off_b, pc)
                if m.ntr and ln < m.ntr:
                    st["vc"] = np.maximum(st["vc"], m.vc[ln])
                    m._tick(np.array([ln]))
                m.mbar_complete_tx(int(ln), off_b, _RESP_BYTES, pc)
        return None
    if "query_cancel" in mods:
        if "is_canceled" in mods:
            m.write(ops[0], np.zeros(m.N, np.bool_), exe, pc)
            return None
        if any(x.startswith("get_first_ctaid") for x in mods):
            if exe.any():
                raise _Fault("fault", f"'{ins.opcode}' on a response whose is_canceled is "
                                      f"false: undefined (PTX ISA 9.1 'clusterlaunchcontrol'; "
                                      f"the emulator's "
                                      f"try_cancel never succeeds) ({m.prog.where(pc)})")
            return None
    raise m.prog.unsupported(pc)

