"""Compiled (numba) inner loops of the happens-before check (:meth:`Machine._hb_check`).

One pass over the byte accesses of one instruction step checks each against the shadow state as
it was before the step (pass 1: no mutation, so the lanes of one instruction are checked as if
simultaneous, like the vectorised numpy code they replace); a second pass records them, in lane
order (the last lane wins a byte, as a numpy scatter does). The semantics are those documented on
:meth:`emulator.machine.Machine._hb_check`; sources: PTX ISA 9.1 §8 (happens-before, morally
strong accesses).

Arrays: ``I`` (n,) record slots of the bytes; ``lanes``/``glane`` (k,) batch-local and global
lane ids, byte ``e`` belongs to access ``e // nb``; ``vc`` (tracked lanes, C * (T + 3)) int32
vector clocks; ``tid`` (lanes,) each lane's own clock column; shadow fields as in
:mod:`emulator.memory`. Clusters (:mod:`emulator.cluster`): a lane's clock has one block of
T + 3 columns (T threads, then the 3 async units, ``registry.ASYNC_UNITS``) per CTA of its
cluster; ``cl_of``/``rk_of`` (global CTAs,) give each CTA's cluster and rank, so an access by a
thread of another CTA of the same cluster is ordered by the clock column ``rank * (T + 3) + t``
(without clusters every CTA is its own cluster of rank 0: the per-CTA clocks of before).
"""

from __future__ import annotations

import numba

__all__ = ["check", "record_write", "record_read", "proxy_stale"]


@numba.njit(cache=True, nogil=True)
def check(I, lanes, glane, nb, vc, tid, w_lane, w_clk, w_pc, w_val, w_async, w_atomic,
          r_lane, r_clk, r_atomic, vals, write, strong, level, pc, T, NT,
          unord_w, unord_r, my_clk, cl_of, rk_of):
    """Pass 1: flag bytes unordered with the recorded writer (``unord_w``) and, for writes,
    with the recorded reader (``unord_r``); fill ``my_clk`` (each byte's accessor clock)."""
    n = I.size
    for e in range(n):
        a = e // nb
        ln = lanes[a]
        g = glane[a]
        s = I[e]
        me = vc[ln, tid[ln]]
        my_clk[e] = me
        my_cta = g // T
        wl = w_lane[s]
        if wl >= 0:
            wa = w_async[s]
            other = (wl != g) or wa
            if other:
                if wl >= NT:  # an async unit: NT + 3 * cta + unit (machine.ASYNC_UNITS)
                    w_cta = (wl - NT) // 3
                    w_col = T + (wl - NT) % 3
                else:
                    w_cta = wl // T
                    w_col = wl % T
                same_cta = w_cta == my_cta
                same_cl = cl_of[w_cta] == cl_of[my_cta]
                if strong:
                    wat = w_atomic[s]
                    if wat > 0 and (same_cta or (wat == 2 and level == 2)):
                        other = False
                if other:
                    known = vc[ln, rk_of[w_cta] * (T + 3) + w_col] if same_cl else 0
                    uo = (not same_cl) or (w_clk[s] > known) or wa
                    if uo and write and w_pc[s] == pc and w_val[s] == vals[e]:
                        uo = False  # replicated store: same instruction, same value
                    unord_w[e] = uo
        if write:
            rl = r_lane[s]
            if rl >= 0 and rl != g:
                if rl >= NT:
                    r_cta = (rl - NT) // 3
                    r_col = T + (rl - NT) % 3
                else:
                    r_cta = rl // T
                    r_col = rl % T
                same_cta = r_cta == my_cta
                same_cl = cl_of[r_cta] == cl_of[my_cta]
                ok = True
                if strong:
                    rat = r_atomic[s]
                    if rat > 0 and (same_cta or (rat == 2 and level == 2)):
                        ok = False
                if ok:
                    known = vc[ln, rk_of[r_cta] * (T + 3) + r_col] if same_cl else 0
                    unord_r[e] = (not same_cl) or (r_clk[s] > known)


@numba.njit(cache=True, nogil=True)
def record_write(I, lanes, glane, nb, my_clk, vals, pc, async_issue, level, pfence,
                 w_lane, w_clk, w_pc, w_val, w_async, w_atomic, w_pf, r_lane, dup):
    """Pass 2 of a write: record every byte (later lanes win); ``dup[e]`` is set where a byte
    written by several lanes of this step ends with a value other than byte ``e``'s."""
    n = I.size
    for e in range(n):
        a = e // nb
        s = I[e]
        w_lane[s] = glane[a]
        w_clk[s] = my_clk[e]
        w_pc[s] = pc
        w_val[s] = vals[e]
        w_async[s] = async_issue
        w_atomic[s] = level
        w_pf[s] = pfence[lanes[a]]
        r_lane[s] = -1
    for e in range(n):
        dup[e] = w_val[I[e]] != vals[e]


@numba.njit(cache=True, nogil=True)
def record_read(I, nb, rec_lane, rec_clk, my_clk, use_rec, pc, level, r_lane, r_clk, r_pc,
                r_atomic):
    """Pass 2 of a read: the reader of each byte is its access's lane (``rec_lane[a]``, clock
    ``my_clk`` or ``rec_clk[a]`` when ``use_rec``)."""
    for e in range(I.size):
        a = e // nb
        s = I[e]
        r_lane[s] = rec_lane[a]
        r_clk[s] = rec_clk[a] if use_rec else my_clk[e]
        r_pc[s] = pc
        r_atomic[s] = level


@numba.njit(cache=True, nogil=True)
def proxy_stale(I, w_lane, w_pf, NT, T, batch_pos, pfence):
    """HB4's test (:meth:`Machine._proxy_check`) in one pass: the first byte position ``e``
    whose recorded writer is a thread (not an async unit) of a CTA of this batch that has
    executed no more ``fence.proxy.async`` than it had at the write, or -1."""
    for e in range(I.size):
        s = I[e]
        wl = w_lane[s]
        if wl < 0 or wl >= NT:
            continue
        lc = batch_pos[wl // T]
        if lc < 0:
            continue
        if pfence[lc * T + wl % T] <= w_pf[s]:
            return e
    return -1
