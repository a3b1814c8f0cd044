"""Compiled (numba) inner loops of the happens-before check (:meth:`Machine._hb_check`).

One pass over the byte accesses of one instruction step checks each against the shadow state as
it was before the step (pass 1: no mutation, so the lanes of one instruction are checked as if
simultaneous, like the vectorised numpy code they replace); a second pass records them, in lane
order (the last lane wins a byte, as a numpy scatter does). The semantics are those documented on
:meth:`emulator.machine.Machine._hb_check`; sources: PTX ISA 9.1 §8 (happens-before, morally
strong accesses).

Arrays: ``I`` (n,) record slots of the bytes; ``lanes``/``glane`` (k,) batch-local and global
lane ids, byte ``e`` belongs to access ``e // nb``; ``vc`` (tracked lanes, C * (T + AU)) int32
vector clocks; ``tid`` (lanes,) each lane's own clock column; shadow fields as in
:mod:`emulator.memory`. Clusters (:mod:`emulator.cluster`): a lane's clock has one block of
T + AU columns (T threads, then the AU async units, ``registry.ASYNC_UNITS``) per CTA of its
cluster; ``cl_of``/``rk_of`` (global CTAs,) give each CTA's cluster and rank, so an access by a
thread of another CTA of the same cluster is ordered by the clock column ``rank * (T + AU) + t``
(without clusters every CTA is its own cluster of rank 0: the per-CTA clocks of before).

Two backends run them (:func:`backend`, :func:`set_backend`, or the environment variable
``AILOWER_EMU_HB_BACKEND``): ``numba`` compiles these loops (nopython, cached on disk) and adds
:func:`_access`, one fused pass that checks and records a whole instruction step when nothing is
unordered (the common case) and leaves the state untouched otherwise, so that the caller runs
the separate passes and reports the race; ``numpy`` runs the same rules as whole-array numpy
operations (:func:`_check_np` ...) for hosts without numba (slower, same findings). The default
is ``numba``; when numba cannot be imported and no backend was chosen, :func:`kernels` raises
:class:`BackendError` rather than falling back silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from emulator.registry import ASYNC_UNITS

#: the async units per CTA, written here as a literal: numba's on-disk cache (``cache=True``)
#: is keyed on this file, not on the values of the globals the compiled loops read, so a
#: changed ``registry.ASYNC_UNITS`` must change this file too (else an installed package would
#: load loops compiled for the old layout and decode async-unit lanes wrongly)
AU = 18
if AU != ASYNC_UNITS:
    raise ImportError(f"emulator._hbkern.AU ({AU}) != registry.ASYNC_UNITS ({ASYNC_UNITS}): "
                      f"update the literal (it keys numba's cache)")

__all__ = ["BACKENDS", "ENV", "BackendError", "Kernels", "backend", "kernels", "set_backend"]


def _check(I, lanes, glane, nb, vc, tid, w_lane, w_clk, w_pc, w_val, w_async, w_atomic,
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
                if wl >= NT:  # an async unit: NT + AU * cta + unit (registry.ASYNC_UNITS)
                    w_cta = (wl - NT) // AU
                    w_col = T + (wl - NT) % AU
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
                    known = vc[ln, rk_of[w_cta] * (T + AU) + w_col] if same_cl else 0
                    uo = (not same_cl) or (w_clk[s] > known) or wa
                    if uo and write and w_pc[s] == pc and w_val[s] == vals[e]:
                        uo = False  # replicated store: same instruction, same value
                    unord_w[e] = uo
        if write:
            rl = r_lane[s]
            if rl >= 0 and rl != g:
                if rl >= NT:
                    r_cta = (rl - NT) // AU
                    r_col = T + (rl - NT) % AU
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
                    known = vc[ln, rk_of[r_cta] * (T + AU) + r_col] if same_cl else 0
                    unord_r[e] = (not same_cl) or (r_clk[s] > known)


def _record_write(I, lanes, glane, nb, my_clk, vals, pc, async_issue, level, pfence,
                 w_lane, w_clk, w_pc, w_val, w_async, w_atomic, w_pf, r_lane, dup):
    """Pass 2 of a write: record every byte (later lanes win); ``dup[e]`` is set where a byte
    written by several lanes of this step ends with a value other than byte ``e``'s."""
    n = I.size
    for e in range(n):
        a = e // nb
        s = I[e]
        if level > 0 and w_lane[s] == glane[a] and w_atomic[s] == 0 and not w_async[s]:
            # a strong write after the thread's own plain write keeps the plain record (a
            # later access must be ordered after the plain write; one ordered after the
            # strong write is, by program order): atomics of other threads not ordered after
            # a zeroing store are races although this thread's own atomic came between
            w_val[s] = vals[e]
            r_lane[s] = -1
            continue
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


def _record_read(I, nb, rec_lane, rec_clk, my_clk, use_rec, pc, level, r_lane, r_clk, r_pc,
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


def _proxy_stale(I, w_lane, w_pf, NT, T, batch_pos, pfence):
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


def _access(I, lanes, glane, nb, vc, tid, w_lane, w_clk, w_pc, w_val, w_async, w_atomic, w_pf,
            r_lane, r_clk, r_pc, r_atomic, vals, write, strong, level, pc, T, NT, cl_of, rk_of,
            async_issue, pfence, rec_lane, rec_clk, use_rec, dup_check):
    """Passes 1 and 2 fused, for a step with no conflict: check every byte as :func:`_check`
    does (against the state before the step) and, only when no byte is unordered, record them
    as :func:`_record_write` / :func:`_record_read` do.

    Returns:
        1 when some byte is unordered with its recorded writer or reader: nothing was recorded
        (the caller reruns the separate passes to name the race); 2 when the step was recorded
        and, with ``dup_check``, some byte written by several lanes of the step ends with a
        value other than one of its lanes' (a lost write: the caller reports it); 0 otherwise.
    """
    k = lanes.size
    for a in range(k):
        ln = lanes[a]
        g = glane[a]
        my_cta = g // T
        my_cl = cl_of[my_cta]
        # memo of the last decision within this access: the bytes of one access mostly share
        # their recorded writer (and reader), whose CTA/column decoding costs divisions
        m_wl, m_wc, m_wa, m_wat, m_uo = -2, 0, False, 0, False
        m_rl, m_rc, m_rat, m_ro = -2, 0, 0, False
        for b in range(nb):
            e = a * nb + b
            s = I[e]
            wl = w_lane[s]
            if wl >= 0:
                wa = w_async[s]
                wc = w_clk[s]
                wat = w_atomic[s] if strong else 0
                if wl != m_wl or wc != m_wc or wa != m_wa or wat != m_wat:
                    m_wl, m_wc, m_wa, m_wat = wl, wc, wa, wat
                    m_uo = False
                    if (wl != g) or wa:
                        if wl >= NT:
                            w_cta = (wl - NT) // AU
                            w_col = T + (wl - NT) % AU
                        else:
                            w_cta = wl // T
                            w_col = wl - w_cta * T
                        other = True
                        if strong and wat > 0 and ((w_cta == my_cta) or
                                                   (wat == 2 and level == 2)):
                            other = False
                        if other:
                            if cl_of[w_cta] != my_cl or wa:
                                m_uo = True
                            else:
                                m_uo = wc > vc[ln, rk_of[w_cta] * (T + AU) + w_col]
                if m_uo and not (write and w_pc[s] == pc and w_val[s] == vals[e]):
                    return 1
            if write:
                rl = r_lane[s]
                if rl >= 0 and rl != g:
                    rc = r_clk[s]
                    rat = r_atomic[s] if strong else 0
                    if rl != m_rl or rc != m_rc or rat != m_rat:
                        m_rl, m_rc, m_rat = rl, rc, rat
                        if rl >= NT:
                            r_cta = (rl - NT) // AU
                            r_col = T + (rl - NT) % AU
                        else:
                            r_cta = rl // T
                            r_col = rl - r_cta * T
                        m_ro = True
                        if strong and rat > 0 and ((r_cta == my_cta) or
                                                   (rat == 2 and level == 2)):
                            m_ro = False
                        if m_ro:
                            m_ro = (cl_of[r_cta] != my_cl or
                                    rc > vc[ln, rk_of[r_cta] * (T + AU) + r_col])
                    if m_ro:
                        return 1
    if write:
        for a in range(k):
            ln = lanes[a]
            g = glane[a]
            me = vc[ln, tid[ln]]
            pf = pfence[ln]
            for b in range(nb):
                e = a * nb + b
                s = I[e]
                if level > 0 and w_lane[s] == g and w_atomic[s] == 0 and not w_async[s]:
                    w_val[s] = vals[e]   # the thread's own plain record stays (_record_write)
                    r_lane[s] = -1
                    continue
                w_lane[s] = g
                w_clk[s] = me
                w_pc[s] = pc
                w_val[s] = vals[e]
                w_async[s] = async_issue
                w_atomic[s] = level
                w_pf[s] = pf
                r_lane[s] = -1
        if dup_check:
            for e in range(I.size):
                if w_val[I[e]] != vals[e]:
                    return 2
        return 0
    for a in range(k):
        ln = lanes[a]
        rl = rec_lane[a] if use_rec else glane[a]
        rc = rec_clk[a] if use_rec else vc[ln, tid[ln]]
        for b in range(nb):
            s = I[a * nb + b]
            r_lane[s] = rl
            r_clk[s] = rc
            r_pc[s] = pc
            r_atomic[s] = level
    return 0


# ---------------------------------------------------------------- the numpy backend
def _check_np(I, lanes, glane, nb, vc, tid, w_lane, w_clk, w_pc, w_val, w_async, w_atomic,
              r_lane, r_clk, r_atomic, vals, write, strong, level, pc, T, NT,
              unord_w, unord_r, my_clk, cl_of, rk_of):
    """:func:`_check` as whole-array numpy operations (same flags, same ``my_clk``)."""
    n = I.size
    if n == 0:
        return
    a = np.arange(n) // nb
    ln = lanes[a]
    g = glane[a]
    my_clk[:] = vc[ln, tid[ln]]
    my_cta = g // T
    wl = w_lane[I]
    wa = w_async[I]
    e = np.flatnonzero((wl >= 0) & ((wl != g) | wa))
    if e.size:
        wle = wl[e]
        asy = wle >= NT
        w_cta = np.where(asy, (wle - NT) // AU, wle // T)
        w_col = np.where(asy, T + (wle - NT) % AU, wle % T)
        if strong:
            wat = w_atomic[I[e]]
            keep = ~((wat > 0) & ((w_cta == my_cta[e]) | ((wat == 2) & (level == 2))))
            e, w_cta, w_col = e[keep], w_cta[keep], w_col[keep]
        same_cl = cl_of[w_cta] == cl_of[my_cta[e]]
        known = np.where(same_cl, vc[ln[e], rk_of[w_cta] * (T + AU) + w_col], 0)
        uo = ~same_cl | (w_clk[I[e]] > known) | wa[e]
        if write:
            uo &= ~((w_pc[I[e]] == pc) & (w_val[I[e]] == vals[e]))
        unord_w[e] = uo
    if write:
        rl = r_lane[I]
        e = np.flatnonzero((rl >= 0) & (rl != g))
        if e.size:
            rle = rl[e]
            asy = rle >= NT
            r_cta = np.where(asy, (rle - NT) // AU, rle // T)
            r_col = np.where(asy, T + (rle - NT) % AU, rle % T)
            if strong:
                rat = r_atomic[I[e]]
                keep = ~((rat > 0) & ((r_cta == my_cta[e]) | ((rat == 2) & (level == 2))))
                e, r_cta, r_col = e[keep], r_cta[keep], r_col[keep]
            same_cl = cl_of[r_cta] == cl_of[my_cta[e]]
            known = np.where(same_cl, vc[ln[e], rk_of[r_cta] * (T + AU) + r_col], 0)
            unord_r[e] = ~same_cl | (r_clk[I[e]] > known)


def _record_write_np(I, lanes, glane, nb, my_clk, vals, pc, async_issue, level, pfence,
                     w_lane, w_clk, w_pc, w_val, w_async, w_atomic, w_pf, r_lane, dup):
    """:func:`_record_write` as numpy scatters (a repeated slot keeps its last byte, as the
    loop's later lanes win; numpy assigns repeated indices in order)."""
    G = np.repeat(glane, nb)
    keep = ((w_lane[I] == G) & (w_atomic[I] == 0) & ~w_async[I].astype(np.bool_)
            if level > 0 else np.zeros(I.size, np.bool_))   # _record_write: own plain record
    J = I[~keep]
    w_lane[J] = G[~keep]
    w_clk[J] = my_clk[~keep]
    w_pc[J] = pc
    w_val[I] = vals
    w_async[J] = async_issue
    w_atomic[J] = level
    w_pf[J] = np.repeat(pfence[lanes], nb)[~keep]
    r_lane[I] = -1
    dup[:] = w_val[I] != vals


def _record_read_np(I, nb, rec_lane, rec_clk, my_clk, use_rec, pc, level, r_lane, r_clk, r_pc,
                    r_atomic):
    """:func:`_record_read` as numpy scatters."""
    r_lane[I] = np.repeat(rec_lane, nb)
    r_clk[I] = np.repeat(rec_clk, nb) if use_rec else my_clk
    r_pc[I] = pc
    r_atomic[I] = level


def _proxy_stale_np(I, w_lane, w_pf, NT, T, batch_pos, pfence):
    """:func:`_proxy_stale` as numpy operations (the same first position, or -1)."""
    wl = w_lane[I]
    e = np.flatnonzero((wl >= 0) & (wl < NT))
    if not e.size:
        return -1
    lc = batch_pos[wl[e] // T]
    m = lc >= 0
    e, lc = e[m], lc[m]
    stale = pfence[lc * T + wl[e] % T] <= w_pf[I[e]]
    hit = np.flatnonzero(stale)
    return int(e[hit[0]]) if hit.size else -1


# ---------------------------------------------------------------- backend selection
#: the environment variable naming the backend (``numba`` or ``numpy``)
ENV = "AILOWER_EMU_HB_BACKEND"
BACKENDS = ("numba", "numpy")


class BackendError(RuntimeError):
    """The race-check backend asked for (or the default, numba) is not available or not known."""


@dataclass(frozen=True)
class Kernels:
    """The functions of one backend (signatures of the loop versions above); ``access`` is None
    for a backend without the fused pass."""

    name: str
    check: Callable
    record_write: Callable
    record_read: Callable
    proxy_stale: Callable
    access: Callable | None


_chosen: str | None = None
_built: dict[str, Kernels] = {}


def set_backend(name: str | None) -> None:
    """Select the race-check backend for the machines created from now on (``None``: back to
    the environment variable / default).

    Raises:
        BackendError: ``name`` is not one of :data:`BACKENDS`.
    """
    global _chosen
    if name is not None and name not in BACKENDS:
        raise BackendError(f"unknown race-check backend {name!r} (known: {', '.join(BACKENDS)})")
    _chosen = name


def backend() -> str:
    """The backend the next machine uses: :func:`set_backend`'s choice, else ``$AILOWER_EMU_HB_
    BACKEND``, else ``numba``.

    Raises:
        BackendError: the environment variable names an unknown backend.
    """
    name = _chosen or os.environ.get(ENV) or "numba"
    if name not in BACKENDS:
        raise BackendError(f"{ENV}={name!r} is not a race-check backend (known: "
                           f"{', '.join(BACKENDS)})")
    return name


def kernels() -> Kernels:
    """The functions of :func:`backend` (numba compiles on first use; later runs load them from
    numba's on-disk cache).

    Raises:
        BackendError: numba is selected (the default) but cannot be imported; the message says
            how to choose the numpy backend instead.
    """
    name = backend()
    k = _built.get(name)
    if k is not None:
        return k
    if name == "numpy":
        k = Kernels("numpy", _check_np, _record_write_np, _record_read_np, _proxy_stale_np, None)
    else:
        try:
            import numba
        except ImportError as exc:
            raise BackendError(f"the emulator's race check needs numba ({exc}); install numba, or "
                               f"choose the slower pure-numpy backend explicitly with {ENV}=numpy "
                               f"(or emulator.set_hb_backend('numpy'))") from None
        jit = numba.njit(cache=True, nogil=True)
        k = Kernels("numba", jit(_check), jit(_record_write), jit(_record_read),
                    jit(_proxy_stale), jit(_access))
        _warm(k)
    _built[name] = k
    return k


def _warm(k: Kernels) -> None:
    """Compile (or load from numba's cache) every function for the argument types the machine
    passes, on one-byte dummies, so that no compilation runs inside an emulation's time limit."""
    from emulator.memory import _FIELDS

    one = np.zeros(1, np.int64)
    f = {n: np.full(1, init, dtype=dt) for n, (dt, init) in _FIELDS.items()}
    vc = np.zeros((1, 4), np.int32)
    vals = np.zeros(1, np.uint8)
    pf = np.zeros(1, np.int32)
    for write in (False, True):
        k.access(one, one, one, 1, vc, one, f["w_lane"], f["w_clk"], f["w_pc"], f["w_val"],
                 f["w_async"], f["w_atomic"], f["w_pf"], f["r_lane"], f["r_clk"], f["r_pc"],
                 f["r_atomic"], vals, write, False, 0, 0, 1, 1, one, one, False, pf, one, one,
                 False, write)
        k.check(one, one, one, 1, vc, one, f["w_lane"], f["w_clk"], f["w_pc"], f["w_val"],
                f["w_async"], f["w_atomic"], f["r_lane"], f["r_clk"], f["r_atomic"], vals, write,
                False, 0, 0, 1, 1, np.zeros(1, np.bool_), np.zeros(1, np.bool_),
                np.zeros(1, np.int32), one, one)
    k.record_write(one, one, one, 1, np.zeros(1, np.int32), vals, 0, False, 0, pf, f["w_lane"],
                   f["w_clk"], f["w_pc"], f["w_val"], f["w_async"], f["w_atomic"], f["w_pf"],
                   f["r_lane"], np.zeros(1, np.bool_))
    for use_rec in (False, True):
        k.record_read(one, 1, one, one, np.zeros(1, np.int32), use_rec, 0, 0, f["r_lane"],
                      f["r_clk"], f["r_pc"], f["r_atomic"])
    k.proxy_stale(one, f["w_lane"], f["w_pf"], 1, 1, one, pf)
