"""Release / acquire through memory: flag protocols ordered by morally strong accesses.

Source: PTX ISA 9.1 §8.8 (release and acquire patterns), §8.9.1 (synchronizes-with: a release
pattern synchronizes with an acquire pattern that observes a write of its release sequence),
§8.7 (morally strong operations: both ``.relaxed``/``.acquire``/``.release``/``.volatile`` or
atomic, and each one's scope includes the other thread), ``ld``/``st``/``atom``/``red`` (an
``atom``/``red`` without ``.sem`` is ``.relaxed``, without scope ``.gpu``; ``.volatile`` is
``.relaxed.sys``), ``fence``/``membar`` (``membar.{cta,gl,sys}`` is ``fence.sc.{cta,gpu,sys}``).

What the emulator models, per shared or global byte (``Machine.flag_sync``):

* a **release pattern** writes the byte: ``st.release`` / ``atom``/``red`` ``.release`` or
  ``.acq_rel`` (the writer's clock at the write), or a ``.relaxed`` strong write after the
  thread's last release fence (``fence.acq_rel``/``fence.sc``/``fence.release``/``membar``: its
  clock at that fence). The byte then carries that clock and the pattern's scope (the narrower
  of the fence's and the access's). A strong read-modify-write continues the release sequence
  (it adds its own release, if any, to what the byte carries); any other write ends it.
* an **acquire pattern** reads the byte: ``ld.acquire`` / ``atom`` ``.acquire``/``.acq_rel``
  join what the byte carries into the reader's clock at once; a ``.relaxed`` strong read keeps
  it for the reader's next acquire fence (``Machine.acquire_fence``, the fence-acquire pattern;
  another CTA's release only for a fence at ``.cluster`` scope or wider: ``fence.acq_rel.cta``
  or ``membar.cta`` after a ``.relaxed.gpu`` read orders nothing across CTAs).
* the two synchronize only when both scopes include both threads: a ``.cta`` pattern orders
  nothing across CTAs, a ``.cluster`` one nothing across clusters. The vector clocks span one
  cluster, so what a thread acquires of another cluster (a pattern at ``.gpu`` or ``.sys``: a
  grid-wide semaphore, the last-CTA reduction) is kept apart, per lane, as that cluster's
  clocks (``Machine.xvc``); the race check consults it for accesses of that cluster's threads,
  and CTA barriers and mbarrier phases pass it on (cluster barriers and flag writes do not: a
  chain of releases through three clusters is still reported). Global flag bytes keep their
  releases from one batch of CTAs to the next.

The emulator runs one interleaving, so the read observes the latest write of the byte: the
acquire synchronizes exactly when that write belongs to a release sequence. Weak (plain)
reads and writes never synchronize; a weak write of a flag byte ends its release sequence.
A lane spinning on a flag (the same strong load again with no write since) is parked until
the next write (``Machine.spin_check``), so that a consumer placed before its producer in
program order lets the producer run.
"""

from __future__ import annotations

import numpy as np

#: scope levels (PTX ISA 9.1 §8.5 scope): a pattern orders threads of different CTAs of one
#: cluster only at ``.cluster`` or wider
SCOPES = {"cta": 1, "cluster": 2, "gpu": 3, "sys": 4}


def sync_of(mods, atomic: bool) -> tuple[str, int] | None:
    """``(sem, scope level)`` of a ``ld``/``st``/``atom``/``red`` from its modifiers, or None
    for a weak access. ``sem`` is ``relaxed``, ``acquire``, ``release`` or ``acq_rel``."""
    sem = next((s for s in ("acq_rel", "acquire", "release", "relaxed") if s in mods), None)
    if sem is None and "volatile" in mods:
        return "relaxed", SCOPES["sys"]
    if sem is None and not atomic:
        return None
    scope = next((SCOPES[s] for s in ("cta", "cluster", "gpu", "sys") if s in mods),
                 SCOPES["gpu"])
    return sem or "relaxed", scope


def _scope_level(parts) -> int:
    """Scope level of a fence from its modifiers (``membar.{cta,gl,sys}`` included)."""
    if parts and parts[0] in ("cta", "gl", "sys"):  # membar.{cta,gl,sys}
        return {"cta": 1, "gl": 3, "sys": 4}[parts[0]]
    return next((SCOPES[s] for s in ("cta", "cluster", "gpu", "sys") if s in parts),
                SCOPES["gpu"])


def _fence_level(parts, sems: tuple[str, ...]) -> int | None:
    """Scope level of a ``fence`` with one of ``sems`` or a ``membar``; None otherwise (proxy
    fences, ``fence.mbarrier_init``)."""
    if "proxy" in parts or "mbarrier_init" in parts:
        return None
    if parts and parts[0] in ("cta", "gl", "sys"):
        return _scope_level(parts)
    if not any(s in parts for s in sems):
        return None
    return _scope_level(parts)


def fence_level(parts) -> int | None:
    """Scope level of a release fence (``fence.acq_rel``/``.sc``/``.release``, ``membar``),
    or None when ``parts`` (without the opcode) is not one."""
    return _fence_level(parts, ("acq_rel", "sc", "release"))


def acquire_level(parts) -> int | None:
    """Scope level of an acquire fence (``fence.acquire``/``.acq_rel``/``.sc``, ``membar``),
    or None when ``parts`` (without the opcode) is not one. A fence-acquire pattern orders the
    reader after a release of another CTA's thread only at ``.cluster`` scope or wider (PTX
    ISA 9.1 §8.9.1: the pattern's last operation, the fence, must be morally strong with the
    release's first: each one's scope includes the other thread)."""
    return _fence_level(parts, ("acq_rel", "sc", "acquire"))


def _cls(level: int) -> int:
    """Scope class of a level: 1 ``.cta``, 2 ``.cluster``, 3 ``.gpu``/``.sys`` (what a pattern
    of that scope orders: its CTA, its cluster, the grid)."""
    return min(int(level), 3)


def release_fence(m, exe: np.ndarray, level: int) -> None:
    """Lanes ``exe`` execute a release fence at scope ``level``: their clocks now are what a
    later ``.relaxed`` strong write of theirs releases to their CTA, for a fence at ``.cluster``
    scope or wider to the other CTAs of the cluster, at ``.gpu`` or wider to other clusters (an
    earlier wide fence keeps publishing to them when a narrower one follows it:
    ``fence.acq_rel.gpu; fence.acq_rel.cta; st.relaxed.gpu`` is a release pattern at ``.gpu``
    of what came before the first fence); their own clocks advance."""
    if not m.ntr:
        return
    tl = np.flatnonzero(exe[:m.ntr])
    if not tl.size:
        return
    for c in range(1, _cls(level) + 1):
        if c not in m.frel_vc:
            m.frel_vc[c] = np.zeros_like(m.vc)
            m.frel_set[c] = np.zeros(m.ntr, np.bool_)
        m.frel_vc[c][tl] = m.vc[tl]
        m.frel_set[c][tl] = True
    m._tick(tl)


def _cta(m, ln: int) -> int:
    return int(m.batch_ids[m.cta_local[ln]])


def _reaches(m, wcta: int, c: int, rl: int, rlvl: int) -> bool:
    """Does a release pattern of scope class ``c`` (:func:`_cls`) of a thread of CTA ``wcta``
    order tracked lane ``rl``'s acquire pattern at ``rlvl`` (morally strong: each scope
    includes the other thread)?"""
    rc = _cta(m, rl)
    if wcta == rc:
        return True
    if m.cl_of[wcta] == m.cl_of[rc]:
        return c >= 2 and rlvl >= SCOPES["cluster"]
    return c >= 3 and rlvl >= SCOPES["gpu"]


def _join_x(d: dict, add: dict) -> dict:
    """Union of two {cluster: clock} dicts, element-wise max (new arrays: values are shared
    between lanes and never updated in place)."""
    out = dict(d)
    for k, v in add.items():
        out[k] = v if k not in out else np.maximum(out[k], v)
    return out


def learn_x(m, lanes, x: dict) -> None:
    """Tracked ``lanes`` now know of other clusters what ``x`` ({cluster: clock}) says
    (``Machine.xvc``)."""
    for ln in lanes:
        m.xvc[ln] = _join_x(m.xvc.get(ln, {}), x)


def on_access(m, space: str, lanes: np.ndarray, first: np.ndarray, nbytes: int, write: bool,
              sync: tuple | None, rmw: bool) -> None:
    """Flag bookkeeping of one access (after its race check): ``lanes`` (k,) batch lanes,
    ``first`` (k,) the flat shadow index of each lane's first byte in ``space`` (``shared`` /
    ``global``), ``sync`` from :func:`sync_of` (None: weak), ``rmw`` for the write half of an
    ``atom``/``red``. Lanes are taken in order (atomics are serialised in lane order)."""
    flags = m.flag_vc if space == "shared" else m.gflag_vc
    if sync is None:
        if write and flags:
            for a in np.unique(first):
                for b in range(int(a), int(a) + nbytes):
                    flags.pop((space, b), None)
        return
    sem, lvl = sync
    for j, ln in enumerate(lanes):
        ln = int(ln)
        tracked = ln < m.ntr
        a = int(first[j])
        if write:
            rel = None
            if sem in ("release", "acq_rel") and tracked:
                rel = {(_cta(m, ln), _cls(lvl)): m.vc[ln].copy()}
            elif tracked and m.frel_vc:
                # each scope class's last fence releases to what that class orders, when
                # the write's own scope reaches it
                rel = {(_cta(m, ln), c): m.frel_vc[c][ln].copy()
                       for c in range(1, _cls(lvl) + 1)
                       if c in m.frel_vc and m.frel_set[c][ln]} or None
            for b in range(a, a + nbytes):
                old = flags.get((space, b))
                if rmw and old is not None:
                    # the release sequence goes on; a release of this RMW joins it
                    new = old if rel is None else _merge(old, rel)
                else:
                    new = rel
                if new is None:
                    flags.pop((space, b), None)
                else:
                    flags[(space, b)] = new
            if rel is not None and sem in ("release", "acq_rel"):
                m._tick(np.array([ln]))
            continue
        if not tracked:
            continue
        if space == "shared":
            observe(m, ln, a, nbytes)
        got = [None, None]  # releases of the reader's own CTA, of other CTAs of its cluster
        gotx: dict = {}  # of other clusters: {cluster: clock over that cluster's columns}
        me = _cta(m, ln)
        for b in range(a, a + nbytes):
            e = flags.get((space, b))
            if e is None:
                continue
            for (wcta, c), vc in e.items():
                if _reaches(m, wcta, c, ln, lvl):
                    if m.cl_of[wcta] != m.cl_of[me]:
                        gotx = _join_x(gotx, {int(m.cl_of[wcta]): vc})
                        continue
                    k = int(wcta != me)
                    got[k] = vc if got[k] is None else np.maximum(got[k], vc)
        if got[0] is None and got[1] is None and not gotx:
            continue
        if sem in ("acquire", "acq_rel"):
            for g in got:
                if g is not None:
                    m.vc[ln] = np.maximum(m.vc[ln], g)
            if gotx:
                learn_x(m, (ln,), gotx)
            continue
        if gotx:  # acquired by the next fence at .gpu scope or wider
            m.xrel[ln] = _join_x(m.xrel.get(ln, {}), gotx)
        # a relaxed read: acquired by the reader's next acquire fence, another CTA's
        # release only by a fence at .cluster scope or wider (Machine.acquire_fence)
        if got[0] is not None:
            if m.relaxed_vc is None:
                m.relaxed_vc = np.zeros_like(m.vc)
            m.relaxed_vc[ln] = np.maximum(m.relaxed_vc[ln], got[0])
        if got[1] is not None:
            if m.relaxed_wide_vc is None:
                m.relaxed_wide_vc = np.zeros_like(m.vc)
            m.relaxed_wide_vc[ln] = np.maximum(m.relaxed_wide_vc[ln], got[1])


def observe(m, ln: int, a: int, nbytes: int) -> None:
    """A strong read by tracked lane ``ln`` of shared bytes ``[a, a + nbytes)`` (flat shadow
    indices): the strong writes of other CTAs' threads it reads from were performed before it
    (a cluster peer's flag write into this CTA's shared memory is then not one that may still
    land after this CTA exits: ``emulator.cluster._exit_check``, HB9)."""
    sh = m.sshadow
    idx = np.arange(a, a + nbytes, dtype=np.int64)
    slots = sh.slots(idx)
    me = _cta(m, ln)
    NT = m.n_ctas * m.T
    for b, s in zip(idx, slots):
        wl = int(sh.w_lane[s])
        if 0 <= wl < NT and wl // m.T != me and sh.w_atomic[s] > 0:
            m.flag_obs[int(b)] = (wl, int(sh.w_clk[s]), me)


def _merge(old: dict, rel: dict) -> dict:
    """A release sequence's releases, one clock per (writer CTA, scope class): the most a
    sequence carries is three per writing CTA."""
    out = dict(old)
    for k, vc in rel.items():
        out[k] = vc if k not in out else np.maximum(out[k], vc)
    return out
