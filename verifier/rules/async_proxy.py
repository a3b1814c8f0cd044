"""AP (+ W5, TM8): async proxy, bulk copies (TMA) and their groups.

Policy (like TF5): a missing proxy fence is a **warning** when the generic writes are landed
``cp.async`` data or when a CTA barrier separates the writes from the async-proxy reader (Triton
3.6 emits no fence in either case; Triton 3.9 does), and an **error** when ``st.shared``/
``stmatrix`` writes reach the reader with no barrier and no fence at all.

One proxy-state property serves AP1 (generic writes read by a bulk store), W5 (read by wgmma)
and TM8 (read by tcgen05.mma/cp), AP2 (generic reads before an async write), AP3 (bulk-load
destination read before completion) and AP4 (generic global writes read by TMA). Sources: PTX ISA
9.1 §8.6 (proxies), §9.7.9.25 (bulk copies), §9.7.9.27 (tensor copies), §9.7.13.4 (proxy fences),
and ``docs/ptx_rules.md`` §3. AP8 and AP9 live in
:mod:`verifier.rules.hazards`.
"""

from __future__ import annotations

from verifier.analysis import Property
from verifier.analysis.ranges import footprint
from verifier.context import Context
from verifier.findings import Finding, Note
from verifier.rules._flow import (
    addr_val,
    each_function,
    event_findings,
    fmt_addr,
    is_cta_barrier,
    is_mbar_wait,
    is_smem_read,
    is_smem_write,
    is_tc,
    mbar_operand,
    note_finding,
    ranges_of,
)

__all__ = [
    "bulk_dst_read_early",
    "bulk_group_uncommitted",
    "bulk_size_invalid",
    "bulk_source_reuse",
    "generic_read_async_write",
    "generic_write_async_read",
    "global_write_tma_read",
    "is_bulk_load",
    "is_bulk_store",
    "tc_smem_unfenced",
    "wgmma_smem_unfenced",
]


def _is_bulk(ins) -> bool:
    p = ins.parts
    return p[0] == "cp" and len(p) > 2 and p[1] in ("async", "reduce") and (
        p[2] == "bulk" or (len(p) > 3 and p[3] == "bulk"))


def is_bulk_load(ins) -> bool:
    """A bulk / tensor copy into shared memory (global → shared::cta / shared::cluster)."""
    p = ins.parts
    if not _is_bulk(ins) or "prefetch" in p:
        return False
    try:
        k = next(j for j, x in enumerate(p) if x.startswith("shared"))
        g = p.index("global")
    except (StopIteration, ValueError):
        return False
    return k < g


def is_bulk_store(ins) -> bool:
    """A bulk / tensor copy or reduction reading shared memory (shared::cta → global)."""
    p = ins.parts
    if not _is_bulk(ins) or "commit_group" in p or "wait_group" in p:
        return False
    try:
        k = next(j for j, x in enumerate(p) if x.startswith("shared"))
        g = p.index("global")
    except (StopIteration, ValueError):
        return False
    return g < k


def _span(ins) -> int | None:
    """Bytes read/written by a generic smem access (type size x vector)."""
    from verifier.ptx.ast import TYPE_SIZES
    n = 1
    sz = None
    for p in ins.parts:
        if p in ("v2", "v4", "v8"):
            n = int(p[1])
        if p in TYPE_SIZES:
            sz = TYPE_SIZES[p]
    if ins.parts[0] == "ldmatrix":
        return 512
    return None if sz is None else sz * n


def _overlap(a, asz, b, bsz) -> bool | None:
    """Do [a, a+asz) and [b, b+bsz) overlap (None sizes: unbounded); None: unknown."""
    if a is None or b is None or a[0] != "s" or b[0] != "s":
        return None
    if a[1] != b[1]:
        return False
    lo1, lo2 = a[2], b[2]
    hi1 = lo1 + asz if asz is not None else float("inf")
    hi2 = lo2 + bsz if bsz is not None else float("inf")
    return lo1 < hi2 and lo2 < hi1


def _param_addr(fa, o, i: int, depth: int = 6):
    """``("p", param name, byte offset)`` when the address operand ``o`` of instruction ``i`` is
    a kernel parameter's pointer plus a constant: every definition of its base register (all of
    them, so the value is the same in every iteration) is ``ld.param`` of that parameter, or a
    ``mov`` / ``cvta.to.global`` / ``add`` of a constant over such a register. None otherwise."""
    if o is None or o.kind != "address" or o.base is None or o.base.kind != "reg":
        return None
    v, cfg = fa.values, fa.cfg
    key, off = cfg.reg_key(o.base.name, i), o.value or 0
    for _ in range(depth):
        sites = v.def_sites.get(key, ())
        if not sites:
            return None
        found = None
        for j in sites:
            d = cfg.instrs[j]
            ops = d.operands
            if d.predicate is not None or len(ops) < 2:
                return None
            if d.parts[0] == "ld" and len(d.parts) > 1 and d.parts[1] == "param" \
                    and ops[1].kind == "address" and ops[1].base is not None \
                    and ops[1].base.kind == "symbol":
                nxt = ("p", ops[1].base.name, ops[1].value or 0)
            elif d.parts[0] in ("mov", "cvta") and ops[1].kind == "reg" and (
                    d.parts[0] == "mov" or "to" in d.parts):
                nxt = ("r", cfg.reg_key(ops[1].name, j), 0)
            elif d.parts[0] == "add" and len(ops) == 3 and ops[1].kind == "reg" \
                    and v.const(ops[2], j) is not None:
                nxt = ("r", cfg.reg_key(ops[1].name, j), v.const(ops[2], j))
            else:
                return None
            if found is not None and found != nxt:
                return None
            found = nxt
        if found[0] == "p":
            return ("p", found[1], off) if found[2] == 0 else None
        key, off = found[1], off + found[2]
    return None


_M32 = (1 << 32) - 1


def _bits_bound(v) -> tuple[int, int] | None:
    """``(lo, hi)`` of a 32-bit known-bits value whose unknown bits are all below bit 16."""
    if v is None or v[0] != "k":
        return None
    unknown = ~v[1] & _M32
    if unknown >> 16:
        return None
    return v[2] & v[1] & _M32, (v[2] & v[1] & _M32) | unknown


def _lin(fa, key: str, guards: dict, depth: int = 12):
    """``(root, lo, hi)``: register ``key`` is ``root + k`` for some ``lo <= k <= hi``.

    ``root`` is ``("s", symbol)`` (a shared symbol the value analysis resolved), ``("r", key)``
    (a register with several or opaque definitions) or None (a bounded value with no root:
    ``(%tid.x & 31) << 2``). Follows single definitions through ``add`` (constants, or a root
    plus a bounded term), ``cvt`` / ``mov`` / ``cvta`` and ``shl`` / ``mul`` by a constant; a
    register in ``guards`` (``{key: hi}``, from the instruction's guard ``setp.lt x, C``) is at
    most ``hi``. None when nothing is known."""
    v, cfg = fa.values, fa.cfg
    val = v.val(key)
    if val is not None and val[0] == "s":
        return ("s", val[1]), val[2], val[2]
    b = _bits_bound(val)
    if key in guards:
        g = guards[key]
        b = (b[0] if b else 0, min(b[1], g) if b else g)
    if b is not None and val is not None and val[1] == _M32:
        return None, b[0], b[1]
    sites = v.def_sites.get(key, ())
    if depth <= 0 or len(sites) != 1 or cfg.instrs[sites[0]].predicate is not None:
        return (None, b[0], b[1]) if b else (("r", key), 0, 0)
    j = sites[0]
    d = cfg.instrs[j]
    ops, op = d.operands, d.parts[0]

    def sub(o):
        return _lin(fa, cfg.reg_key(o.name, j), guards, depth - 1) if o.kind == "reg" else None

    if op == "add" and len(ops) == 3:
        c = v.const(ops[2], j)
        a = sub(ops[1])
        if a is not None and c is not None:
            return a[0], a[1] + c, a[2] + c
        other = sub(ops[2])
        if a is not None and other is not None and (a[0] is None or other[0] is None):
            return (a[0] or other[0]), a[1] + other[1], a[2] + other[2]
    elif (op in ("cvt", "mov") or (op == "cvta" and "to" in d.parts)) and len(ops) == 2 \
            and ops[1].kind == "reg":
        a = sub(ops[1])
        if a is not None:
            return a
    elif op in ("shl", "mul") and len(ops) == 3:
        c = v.const(ops[2], j)
        a = sub(ops[1])
        if a is not None and a[0] is None and c is not None and 0 <= c < 32:
            f = (1 << c) if op == "shl" else c
            return None, a[1] * f, a[2] * f
    if b is not None:
        return None, b[0], b[1]
    return ("r", key), 0, 0


def _addr_lin(fa, o, i: int, guards: dict | None = None):
    """:func:`_lin` of an address operand ``[reg + imm]`` / ``[symbol + imm]`` (None if not)."""
    if o is None or o.kind != "address" or o.base is None:
        return None
    off = o.value or 0
    if o.base.kind == "symbol":
        return ("s", o.base.name), off, off
    if o.base.kind != "reg":
        return None
    r = _lin(fa, fa.cfg.reg_key(o.base.name, i), guards or {})
    if r is None or r[0] is None:
        return None
    return r[0], r[1] + off, r[2] + off


def _guard_bounds(fa, ins, i: int) -> dict:
    """``{register: hi}`` from the instruction's guard when it is ``setp.lt(.u32) p, x, C``
    (``x <= C - 1`` wherever the instruction executes) or ``setp.le``."""
    if ins.predicate is None or ins.predicate.startswith("!"):
        return {}
    v, cfg = fa.values, fa.cfg
    sites = v.reaching(cfg.reg_key(ins.predicate, i), i)
    if len(sites) != 1:
        return {}
    d = cfg.instrs[sites[0]]
    if d.parts[0] != "setp" or len(d.parts) < 2 or d.parts[1] not in ("lt", "le") \
            or not any(t in d.parts for t in ("u32", "u64")) or len(d.operands) < 3 \
            or d.operands[1].kind != "reg":
        return {}
    c = v.const(d.operands[2], sites[0])
    if c is None:
        return {}
    return {cfg.reg_key(d.operands[1].name, sites[0]): c - 1 if d.parts[1] == "lt" else c}


def _tensormap_buffers(fa) -> frozenset:
    """Shared-memory ranges ``(root, lo, hi)`` that hold a tensor map being built: the shared
    operand of ``tensormap.replace`` and the source of ``tensormap.cp_fenceproxy`` (128 bytes,
    PTX ISA 9.1 §9.7.9.28 tensormap.replace, §9.7.9.29 tensormap.cp_fenceproxy)."""
    out = set()
    for i, ins in enumerate(fa.cfg.instrs):
        if ins.parts[0] != "tensormap":
            continue
        addrs = [o for o in ins.operands if o.kind == "address"]
        if ins.parts[1] == "replace" and any(x.startswith("shared") for x in ins.parts):
            o = addrs[0] if addrs else None
        elif ins.parts[1] == "cp_fenceproxy" and len(addrs) > 1:
            o = addrs[1]
        else:
            continue
        r = _addr_lin(fa, o, i)
        if r is not None and r[1] == r[2]:
            out.add((r[0], r[1], r[1] + 128))
    return frozenset(out)


def _in_tensormap(fa, ins, i: int, bufs: frozenset) -> bool:
    """Does the generic shared write ``ins`` provably land inside one tensor-map buffer?"""
    if not bufs:
        return False
    o = next((x for x in ins.operands if x.kind == "address"), None)
    r = _addr_lin(fa, o, i, _guard_bounds(fa, ins, i))
    sz = _span(ins)
    if r is None or sz is None:
        return False
    return any(r[0] == root and lo <= r[1] and r[2] + sz <= hi for root, lo, hi in bufs)


_UNKNOWN = ("?",)
_ELEM_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1,
               "e2m1": 1, "e2m3": 1, "e3m2": 1, "b1": 1}
_TC_ELEM = {"kind::f16": 2, "kind::tf32": 4}  # other kinds: 1 byte or less per element


def _write_item(fa, ins, i: int) -> tuple:
    """``(symbol, lo, hi)``: a generic shared write's bytes lie in ``[symbol + lo, symbol +
    hi)``; ``("?",)`` when the address or the size is unknown, or the address is a
    ``shared::cluster`` one (it may name another CTA's shared memory)."""
    if any(x.startswith("shared::cluster") for x in ins.parts):
        return _UNKNOWN
    if ins.parts[0] == "cp":  # cp.async.{ca,cg}.shared.global [dst], [src], cp-size
        addrs = [o for o in ins.operands if o.kind == "address"]
        size = [o for o in ins.operands if o.kind == "imm"]
        o, span = (addrs[0] if addrs else None), (size[0].value if size else None)
    else:
        o = next((x for x in ins.operands if x.kind == "address"), None)
        # stmatrix m8n8: each thread's address is one 16-byte row (PTX ISA 9.1 §9.7.14.5.16)
        span = (16 if "m8n8" in ins.parts else None) if ins.parts[0] == "stmatrix" \
            else _span(ins)
    r = ranges_of(fa).address(o, i) if o is not None else None
    if r is None or not isinstance(span, int):
        return _UNKNOWN
    return (r[0], r[1], r[2] + span)


def _mma_reads(fa, ins, i: int) -> list[tuple] | None:
    """``[(symbol, lo, hi), ...]``: every shared byte a ``wgmma.mma_async`` / ``tcgen05.mma`` /
    ``tcgen05.cp`` can read through its matrix descriptors (:func:`footprint` of each), or None
    when a descriptor or the shape is not known well enough."""
    p = ins.parts
    ops = ins.operands
    rg = ranges_of(fa)
    if p[0] == "wgmma":
        shape = next((x for x in p if x.startswith("m") and "n" in x and "k" in x), None)
        if shape is None or "sp" in p or len(ops) < 3:
            return None
        n = int(shape[shape.index("n") + 1:shape.index("k")])
        types = [x for x in p if x in _ELEM_BYTES]
        e = _ELEM_BYTES[types[-1]] if types else None
        reg_a = ops[1].kind == "vector"

        def _imm(o):
            return o.value if o.kind == "imm" else None  # (not an immediate: either major)
        # d, a, b, scale-d, imm-scale-a, imm-scale-b{, imm-trans-a}, imm-trans-b for 16-bit
        # types: the transposes are the last operands (scale-d may be a predicate)
        if e == 2 and len(ops) >= (7 if reg_a else 8):
            ta = 0 if reg_a else _imm(ops[-2])
            tb = _imm(ops[-1])
        else:
            ta = tb = 0
        out = []
        for o, rows, t in ((None if reg_a else ops[1], 64, ta), (ops[2], n, tb)):
            if o is None:
                continue
            d = rg.descriptor(o, i, sm100=False)
            if d is None:
                return None
            out.append(footprint(d, rows, 32, e, "MN" if t == 1 else "K" if t == 0 else None))
        return out
    if p[0] == "tcgen05" and p[1] == "mma":
        if any(x in p for x in ("ws", "sp")) or len(ops) < 4:
            return None
        kind = next((x for x in p if x.startswith("kind::")), None)
        e = _TC_ELEM.get(kind, 1)
        idesc = fa.values.const(ops[3], i)
        if idesc is not None:
            m_rows, n_rows = ((idesc >> 24) & 0x1F) << 4, ((idesc >> 17) & 0x3F) << 3
            ma, mb = ("MN" if (idesc >> 15) & 1 else "K"), ("MN" if (idesc >> 16) & 1 else "K")
        else:
            m_rows, n_rows, ma, mb = 256, 256, None, None
        out = []
        for o, rows, mj in ((ops[1], m_rows, ma), (ops[2], n_rows, mb)):
            if o.kind == "address":  # A in tensor memory
                continue
            d = rg.descriptor(o, i, sm100=True)
            if d is None:
                return None
            out.append(footprint(d, rows or 256, 32, e, mj))
        return out
    if p[0] == "tcgen05" and p[1] == "cp" and len(ops) >= 2:
        shape = next((x for x in p if "x" in x and x.endswith("b") and x[0].isdigit()), None)
        if shape is None:
            return None
        rows, bits = shape.split("x")
        d = rg.descriptor(ops[1], i, sm100=True)
        if d is None or not rows.isdigit() or not bits[:-1].isdigit():
            return None
        return [footprint(d, int(rows), int(bits[:-1]) // 8, 1, "K")]
    return None


def _with(ww: frozenset, item: tuple) -> frozenset:
    """``ww`` plus one write item (at most 8 kept; beyond, unknown)."""
    if item in ww:
        return ww
    return ww | {item} if len(ww) < 8 and _UNKNOWN not in ww else frozenset({_UNKNOWN})


def _apart(ww: frozenset, reads: list[tuple] | None) -> bool:
    """Are all the unfenced generic writes ``ww`` provably outside every byte ``reads``?"""
    if not ww or reads is None or _UNKNOWN in ww:
        return False
    # the same symbol only: two .extern .shared arrays share one address (ptxas), so
    # different names prove nothing
    return all(w[0] == r[0] and (w[2] <= r[1] or r[2] <= w[1]) for w in ww for r in reads)


_SYNCED = "@synced"
"""Tag of a generic shared read that a CTA barrier or an mbarrier wait has since ordered."""


def _ordered(gr: frozenset) -> frozenset:
    """Generic reads ``gr`` after a synchronization: each tagged as ordered by it."""
    return frozenset(x if x[0] in ("?", _SYNCED) else (_SYNCED, *x) for x in gr)


class Proxy(Property):
    """Fact: (generic smem writes unfenced, generic smem reads unfenced (addresses, or "?"),
    generic global writes unfenced (``((param, offset), span)`` items or ``("?",)``), pending
    bulk-load destinations ``(dst, bytes, mbarrier, crossed)`` (a wait completes those of its
    own mbarrier; ``crossed``: a wait on another one came since), cp.async issued, the unfenced generic smem writes' byte ranges
    (:func:`_write_item` items: a wgmma / tcgen05 operand provably apart from all of them is
    not reported))."""

    RULES = ("AP1", "W5", "TM8", "AP2", "AP3", "AP4")

    @property
    def tmaps(self) -> frozenset:
        """The function's tensor-map staging buffers (:func:`_tensormap_buffers`), cached."""
        t = getattr(self, "_tmaps", None)
        if t is None:
            t = self._tmaps = _tensormap_buffers(self.fa)
        return t

    def initial(self):
        return (0, frozenset(), frozenset(), frozenset(), False, frozenset())

    def relevant(self, ins):
        p = ins.parts
        return is_smem_write(ins) or is_smem_read(ins) or _is_bulk(ins) or p[0] == "fence" \
            or is_cta_barrier(ins) \
            or (p[0] == "cp" and len(p) > 1 and p[1] == "async") or is_mbar_wait(ins) \
            or (p[0] in ("st", "red", "atom") and len(p) > 1 and p[1] == "global") \
            or (p[0] == "wgmma" and len(p) > 1 and p[1] == "mma_async") \
            or is_tc(ins, "mma", "cp")

    def transfer(self, i, ins, fact, report):
        gw, gr, gg, pend, cpa, ww = fact
        p = ins.parts
        fa = self.fa
        if p[0] == "fence":
            if "proxy" in p and any(x.startswith("async") for x in p):
                glob = "async" in p or "async::global" in ins.opcode or "global" in p
                return (0, frozenset(), frozenset() if glob else gg, pend, cpa, frozenset())
            return fact
        if is_mbar_wait(ins):
            # the wait completes the copies on its own mbarrier; copies known to complete on
            # another one stay pending (an unresolved barrier on either side: all done)
            # (another barrier's wait may order them transitively - a consumer that waited
            # on the copy's barrier arrives on this one - so a read of them later is a note)
            wb = addr_val(fa, mbar_operand(ins), i)
            pend = frozenset((x[0], x[1], x[2], True) for x in pend
                             if wb is not None and x[2] is not None and x[2] != wb)
            return (gw, _ordered(gr), gg, pend, cpa, ww)
        if is_cta_barrier(ins):
            return (3 if gw == 2 else gw, _ordered(gr), gg, pend, cpa, ww)
        if p[0] == "cp" and len(p) > 2 and p[1] == "async" and p[2] in ("wait_group", "wait_all"):
            return (max(gw, 1 if cpa else 0), gr, gg, pend, cpa, ww)
        if p[0] == "cp" and len(p) > 2 and p[1] == "async" and p[2] in ("ca", "cg"):
            return (gw, gr, gg, pend, True, _with(ww, _write_item(fa, ins, i)))
        if is_smem_write(ins):
            if _in_tensormap(fa, ins, i, self.tmaps):
                # the bytes of a tensor map being built: read by the tensormap proxy after
                # tensormap.cp_fenceproxy (which fences for it), not by the async proxy
                return fact
            return (2, gr, gg, pend, cpa, _with(ww, _write_item(fa, ins, i)))
        if p[0] in ("st", "red", "atom") and len(p) > 1 and p[1] == "global":
            a = _param_addr(fa, next((o for o in ins.operands if o.kind == "address"), None), i)
            item = (a, _span(ins)) if a is not None else ("?",)
            gg = gg | {item} if len(gg) < 8 else gg | {("?",)}
            return (gw, gr, gg, pend, cpa, ww)
        if is_smem_read(ins):
            a = addr_val(fa, next((o for o in ins.operands if o.kind == "address"), None), i)
            sz = _span(ins)
            for d, dsz, _bar, crossed in pend:
                ov = _overlap(a, sz, d, dsz)
                if ov and crossed:
                    report("AP3", f"'{ins.opcode}' reads '{fmt_addr(a)}', the destination of a "
                                  "bulk copy whose own mbarrier was not waited for (a wait on "
                                  "another mbarrier may order it)", severity="note")
                    break
                if ov and dsz is None and a[2] > d[2]:
                    # a tensor copy of unknown size (its box is in the tensor map, its mbarrier
                    # has no constant expect_tx) that starts below the read: it may or may not
                    # reach it; the emulation decides (HB1)
                    report("AP3", f"'{ins.opcode}' reads '{fmt_addr(a)}', above the "
                                  f"destination '{fmt_addr(d)}' of a bulk copy that has not been "
                                  "waited for and whose size the static rule does not know",
                           severity="note")
                    break
                if ov:
                    report("AP3", f"'{ins.opcode}' reads '{fmt_addr(a)}', the destination of a "
                                  "bulk copy that has not been waited for")
                    break
            item = (a, sz) if a is not None else ("?",)
            return (gw, gr | {item} if len(gr) < 8 else gr | {("?",)}, gg, pend, cpa, ww)
        sev = None if gw == 2 else "warning"
        how = {1: "filled by 'cp.async'", 2: "written through the generic proxy",
               3: "written through the generic proxy (handed off by a barrier only)"}.get(gw, "")
        if p[0] == "wgmma":
            if gw and not _apart(ww, _mma_reads(fa, ins, i)):
                report("W5", f"'wgmma.mma_async' reads shared memory {how} without "
                             "'fence.proxy.async'", severity=sev)
            return fact
        if is_tc(ins, "mma", "cp"):
            if gw and not _apart(ww, _mma_reads(fa, ins, i)):
                report("TM8", f"'tcgen05.{p[1]}' reads shared memory {how} without "
                              "'fence.proxy.async.shared::cta'", severity=sev)
            return fact
        if is_bulk_store(ins):
            if gw:
                report("AP1", f"'{ins.opcode.split('.global')[0]}' reads shared memory {how} "
                              "without 'fence.proxy.async'", severity=sev)
            return fact
        if is_bulk_load(ins):
            addrs = [o for o in ins.operands if o.kind == "address"]
            dst = addr_val(fa, addrs[0], i) if addrs else None
            size = None
            bar = addr_val(fa, mbar_operand(ins), i)
            if "tensor" not in p:
                sz = [o for o in ins.operands if o.kind != "address"]
                size = self.values.const(sz[0], i) if sz else None
            else:
                size = _tx_bounds(fa).get(bar) if bar is not None else None
            hits = []
            for item in gr:
                if item[0] == "?":
                    continue
                synced = item[0] == _SYNCED
                a, asz = item[1:] if synced else item
                if _overlap(a, asz, dst, size):
                    hits.append(synced)
            if hits and not all(hits):
                report("AP2", f"bulk copy overwrites '{fmt_addr(dst)}' that was read through "
                              "the generic proxy without 'fence.proxy.async' in between")
            elif hits:
                # the reads were performed before a barrier / mbarrier hand-off that orders the
                # copy's issue (PTX ISA 9.1 §9.7.13.1: memory accesses before the barrier are
                # performed relative to the participants); CUTLASS's PipelineTmaAsync releases
                # a stage to the TMA producer this way, with no proxy fence
                report("AP2", f"bulk copy overwrites '{fmt_addr(dst)}' read through the generic "
                              "proxy before a barrier, with no 'fence.proxy.async': ordered by "
                              "the barrier as far as the static rule can tell", severity="note")
            if gg:
                # sure only when a written range and the copy's source are the same parameter's
                # pointer plus overlapping constants (PTX ISA 9.1 §8.6, §9.7.13.4: generic
                # writes read by the async proxy need fence.proxy.async); a tensor copy's source
                # is in its tensor map, other pointers may or may not alias: a note, emulation
                # decides (its HB analysis sees the concrete addresses)
                src = _param_addr(fa, addrs[1], i) if len(addrs) > 1 and "tensor" not in p \
                    else None
                sure = src is not None and any(
                    x[0] != "?" and x[0][1] == src[1] and _overlap(
                        ("s", "g", x[0][2]), x[1], ("s", "g", src[2]), size) for x in gg)
                if sure:
                    report("AP4", "bulk copy reads global memory written through the generic "
                                  "proxy without 'fence.proxy.async.global'", severity="warning")
                else:
                    why = ("a tensor copy's source is in its tensor map" if "tensor" in p else
                           "the written addresses and the copy's source are not one "
                           "parameter's pointer plus constants")
                    report("AP4", "bulk copy after generic global writes with no "
                                  "'fence.proxy.async.global' in between; the static rule cannot "
                                  f"tell whether they overlap ({why}): emulation decides",
                           severity="note")
            if dst is not None and len(pend) < 8:
                pend = pend | {(dst, size, bar, False)}
            return (gw, gr, gg, pend, cpa, ww)
        return fact

    def describe(self, i, ins, old, new):
        if old == new:
            return None
        if new[0] and not old[0]:
            return "generic-proxy shared write" if new[0] == 2 else "cp.async data landed"
        if not new[0] and old[0]:
            return "proxy fence"
        return None


def _tx_bounds(fa) -> dict:
    """Resolved mbarrier address -> bytes (an upper bound) one tensor copy completing on it
    writes: the sum of the constant ``expect_tx`` / ``arrive.expect_tx`` counts of every site
    on that barrier (a copy's bytes count against the phase's expected transaction count, PTX
    ISA 9.1 §9.7.13.15.2 tx-count); absent where a site's count is not a constant. Cached."""
    got = fa.cache.get("tx_bounds")
    if got is not None:
        return got
    out: dict = {}
    unknown: set = set()
    for i, ins in enumerate(fa.cfg.instrs):
        p = ins.parts
        if p[0] != "mbarrier" or not any("expect_tx" in x for x in p):
            continue
        b = addr_val(fa, mbar_operand(ins), i)
        if b is None:
            continue
        c = fa.values.const(ins.operands[-1], i) if ins.operands else None
        if c is None:
            unknown.add(b)
        else:
            out[b] = out.get(b, 0) + c
    for b in unknown:
        out.pop(b, None)
    fa.cache["tx_bounds"] = out
    return out


def _proxy_rule(rule: str, hint: str):
    def check(ctx: Context) -> list[Finding]:
        out: list[Finding] = []
        for fi, fa in each_function(ctx):
            if not any(ins.parts[0] in ("cp", "wgmma", "tcgen05") for ins in fa.cfg.instrs):
                continue
            out += event_findings(ctx, fi, fa, Proxy, rule, hint)
        return out
    return check


def generic_write_async_read(ctx: Context) -> list[Finding]:
    """Generic shared-memory writes read by a bulk copy without a proxy fence (AP1).

    What it checks:
        Between a generic write to shared memory (``st.shared``, ``stmatrix``, landed
        ``cp.async`` data) and a ``cp.async.bulk``/``.tensor`` store or reduction from shared
        memory, ``fence.proxy.async`` executes on every path.

    Why it is bad:
        ``bar.sync`` does not bridge proxies: the TMA store reads stale shared memory
        (FlashKDA#24, cutlass#2960).

    Example:
        ``st.shared.v4.b32 [%r1], {...}; bar.sync 0; cp.async.bulk.tensor.2d.global.shared::cta...``

    Use instead:
        ``st.shared...; fence.proxy.async.shared::cta; bar.sync 0; cp.async.bulk...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §8.6, §9.7.9.25.2; docs/ptx_rules.md AP1.
    """
    return _proxy_rule("AP1", "insert 'fence.proxy.async.shared::cta;' after the writes, before "
                              "the barrier")(ctx)


def wgmma_smem_unfenced(ctx: Context) -> list[Finding]:
    """wgmma reads shared memory written by the generic proxy without a fence (W5).

    What it checks:
        As AP1, for ``wgmma.mma_async`` operands in shared memory.

    Why it is bad:
        Stale operands; ``wgmma.fence`` orders registers only.

    Example:
        ``cp.async.wait_group 0; bar.sync 0; wgmma.fence...; wgmma.mma_async...``

    Use instead:
        ``cp.async.wait_group 0; bar.sync 0; fence.proxy.async.shared::cta; wgmma.mma_async...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.15.4, §9.7.15.7.1; docs/ptx_rules.md W5.
    """
    return _proxy_rule("W5", "insert 'fence.proxy.async.shared::cta;' before the wgmma")(ctx)


def tc_smem_unfenced(ctx: Context) -> list[Finding]:
    """tcgen05.mma/cp reads shared memory written by the generic proxy without a fence (TM8).

    What it checks:
        As AP1, for ``tcgen05.mma`` and ``tcgen05.cp`` shared-memory operands.

    Why it is bad:
        The tensor core reads stale operands (sglang#39124).

    Example:
        ``cp.async.wait_group 2; bar.sync 0; tcgen05.mma...``

    Use instead:
        ``...; fence.proxy.async.shared::cta; bar.sync 0; tcgen05.mma...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.16.6.5; Triton ``ProxyFenceInsertion.cpp``; docs/ptx_rules.md TM8.
    """
    return _proxy_rule("TM8", "insert 'fence.proxy.async.shared::cta;' before the barrier that "
                              "hands the tile to the MMA thread")(ctx)


def generic_read_async_write(ctx: Context) -> list[Finding]:
    """Generic reads of a buffer then a bulk copy overwriting it without a proxy fence (AP2).

    What it checks:
        An ``ld.shared``/``ldmatrix`` of a resolved address followed by a bulk/tensor load into an
        overlapping range needs ``fence.proxy.async`` in between.

    Why it is bad:
        The TMA may overwrite data still being read (DeepEP#642, TransformerEngine#2695).

    Example:
        ``ld.shared.b32 %r1, [smem]; cp.async.bulk.shared::cluster.global... [smem], ...``

    Use instead:
        ``ld.shared...; fence.proxy.async.shared::cta; cp.async.bulk...``

    ptxas:
        no.

    References:
        Triton ``ProxyFenceInsertion.cpp``; docs/ptx_rules.md AP2.
    """
    return _proxy_rule("AP2", "insert 'fence.proxy.async.shared::cta;' between the reads and the "
                              "bulk copy")(ctx)


def bulk_dst_read_early(ctx: Context) -> list[Finding]:
    """Destination of a bulk load read before its completion is observed (AP3).

    What it checks:
        After a bulk/tensor load into a resolved shared address, a generic read of that range
        is preceded by an mbarrier wait on every path.

    Why it is bad:
        The data may not have landed.

    Example:
        ``cp.async.bulk... [smem], ..., [bar]; ld.shared.b32 %r1, [smem];``

    Use instead:
        wait on ``[bar]`` (try_wait loop) first.

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.9.25.2; docs/ptx_rules.md AP3.
    """
    return _proxy_rule("AP3", "wait on the copy's mbarrier before reading")(ctx)


def global_write_tma_read(ctx: Context) -> list[Finding]:
    """Generic global writes followed by a bulk load without ``fence.proxy.async.global`` (AP4).

    What it checks:
        ``st.global``/``red.global``/``atom.global`` followed on some path by a bulk/tensor load
        with no ``fence.proxy.async`` (global or full) between. A warning when the static rule
        is sure the copy reads what was written: the written address and the (non-tensor) bulk
        copy's source are the same kernel parameter's pointer plus constants, and the ranges
        overlap. Otherwise a note (a tensor copy's source is in its tensor map; two different
        pointers may or may not alias): emulation sees the concrete addresses.

    Why it is bad:
        The TMA may read stale global data (DeepEP#621).

    Example:
        ``st.global.b32 [%rd1], %r1; cp.async.bulk.shared::cluster.global...``

    Use instead:
        ``st.global...; fence.proxy.async.global; cp.async.bulk...``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.13.4; docs/ptx_rules.md AP4.
    """
    return _proxy_rule("AP4", "insert 'fence.proxy.async.global;' before the bulk copy")(ctx)


class BulkGroup(Property):
    """Fact: (uncommitted bulk ops, committed bulk async-groups oldest first (each the source
    addresses of its bulk stores; at most :data:`_MAX_GROUPS`, the oldest merged), source
    addresses of the uncommitted stores).

    ``cp.async.bulk.wait_group(.read) N`` keeps only the newest ``N`` groups pending (PTX ISA 9.1
    §9.7.9.27.2.2), so a store committed last is still pending after ``wait_group.read 1``
    (DeepEP#657). A source is an address key: the resolved value, or ``(register, offset)`` when
    the address is register-relative (loop-indexed stages), compared only for equality.
    """

    RULES = ("AP5", "AP6")

    def __init__(self, cfg, values, fa=None):
        super().__init__(cfg, values, fa)
        # registers that are bases of bulk-store sources: redefining one forgets its keys
        self._src_regs: set[str] = set()
        for i, ins in enumerate(cfg.instrs):
            if is_bulk_store(ins):
                addrs = [o for o in ins.operands if o.kind == "address"]
                if len(addrs) > 1 and addrs[1].base is not None and addrs[1].base.kind == "reg":
                    self._src_regs.add(cfg.reg_key(addrs[1].base.name, i))
        self._redef = [bool(self._src_regs.intersection(values.defs[i]))
                       for i in range(len(cfg.instrs))]

    def initial(self):
        return (False, (), frozenset())

    def relevant(self, ins):
        return _is_bulk(ins) or is_smem_write(ins)

    def relevant_index(self, i):
        return self._redef[i] or self.relevant(self.cfg.instrs[i])

    def _key(self, o, i):
        if o is None:
            return None
        v = addr_val(self.fa, o, i)
        if v is not None:
            return v
        if o.kind == "address" and o.base is not None and o.base.kind == "reg" and o.base.name:
            return ("r", self.cfg.reg_key(o.base.name, i), o.value or 0)
        return None

    def transfer(self, i, ins, fact, report):
        unc, groups, cur = fact
        p = ins.parts
        if self._redef[i]:
            gone = set(self.values.defs[i])

            def keep(ks):
                return frozenset(k for k in ks if k is None or k[0] != "r" or k[1] not in gone)
            fact = (unc, tuple(keep(g) for g in groups), keep(cur))
            unc, groups, cur = fact
            if not self.relevant(ins):
                return fact
        if "commit_group" in p:
            g = groups + (cur,)
            if len(g) > _MAX_GROUPS:
                g = (g[0] | g[1],) + g[2:]
            return (False, g, frozenset())
        if "wait_group" in p:
            if unc:
                report("AP6", "'cp.async.bulk.wait_group' does not cover bulk copies issued since "
                              "the last 'cp.async.bulk.commit_group'")
            n = self.values.const(ins.operands[0], i) if ins.operands else None
            if n is None:
                return fact
            return (unc, groups[len(groups) - n:] if n and n < len(groups) else
                    (groups if n else ()), cur)
        pending = cur.union(*groups) if groups else cur
        if is_bulk_store(ins):
            addrs = [o for o in ins.operands if o.kind == "address"]
            src = self._key(addrs[1], i) if len(addrs) > 1 else None
            self._check(ins, i, addrs[0] if is_bulk_load(ins) else None, pending, report)
            return (True, groups, cur | {src} if len(cur) < 6 else cur | {None})
        if is_bulk_load(ins):
            addrs = [o for o in ins.operands if o.kind == "address"]
            self._check(ins, i, addrs[0] if addrs else None, pending, report)
            return fact
        if is_smem_write(ins) and pending:
            self._check(ins, i, next((o for o in ins.operands if o.kind == "address"), None),
                        pending, report)
        return fact

    def _check(self, ins, i, dst, pending, report):
        if dst is None or not pending:
            return
        a = self._key(dst, i)
        if a is None:
            return
        for s in pending:
            if s is None:
                continue
            same = a == s
            if not same and a[0] == "s" and s[0] == "s":
                same = bool(_overlap(a, 16, s, None)) or (a[1] == s[1] and a[2] >= s[2])
            if same:
                report("AP5", f"'{ins.opcode}' overwrites '{_fmt_key(self.cfg, a)}' while a bulk "
                              "store committed in a group that is still pending may read it (its "
                              "'cp.async.bulk.wait_group.read' does not cover that group)")
                break

    def at_exit(self, i, fact, report):
        unc, groups, cur = fact
        if unc or any(groups):
            report("AP5", "the kernel exits while bulk stores from shared memory may still be "
                          "reading it (no 'cp.async.bulk.wait_group.read 0')")

    def describe(self, i, ins, old, new):
        return None if old == new else ins.opcode


_MAX_GROUPS = 4


def _fmt_key(cfg, k) -> str:
    if k[0] == "r":
        reg = k[1].split("#")[0]
        return f"{reg}+{k[2]}" if k[2] else reg
    return fmt_addr(k)


def bulk_source_reuse(ctx: Context) -> list[Finding]:
    """Bulk-store source modified or abandoned before the copy read it (AP5).

    What it checks:
        After a bulk store from shared memory, ``cp.async.bulk.commit_group`` and
        ``cp.async.bulk.wait_group.read N`` precede any generic write to the source and the
        kernel's exit.

    Why it is bad:
        Undefined behaviour: the copy reads modified or released shared memory.

    Example:
        ``cp.async.bulk.global.shared::cta.bulk_group [%rd1], [smem], 4096;`` then ``ret;``

    Use instead:
        ``cp.async.bulk.commit_group; cp.async.bulk.wait_group.read 0;``

    ptxas:
        no.

    References:
        PTX ISA 9.1 §9.7.9.25.1, §9.7.9.27.2.2; docs/ptx_rules.md AP5.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, is_bulk_store):
        out += event_findings(ctx, fi, fa, BulkGroup, "AP5",
                              "insert 'cp.async.bulk.commit_group; "
                              "cp.async.bulk.wait_group.read 0;'")
    return out


def bulk_group_uncommitted(ctx: Context) -> list[Finding]:
    """``cp.async.bulk.wait_group`` with uncommitted bulk copies (AP6).

    What it checks:
        Bulk async-groups are per thread: a wait_group only covers ops committed before it.

    Why it is bad:
        The wait covers nothing; the copies are still in flight.

    Example:
        ``cp.async.bulk.global.shared::cta.bulk_group ...; cp.async.bulk.wait_group.read 0;``

    Use instead:
        ``...; cp.async.bulk.commit_group; cp.async.bulk.wait_group.read 0;``

    ptxas:
        register N: ERR; missing commit: no.

    References:
        PTX ISA 9.1 §9.7.9.25.1.1, §9.7.9.27.2.1-2; docs/ptx_rules.md AP6.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, is_bulk_store):
        out += event_findings(ctx, fi, fa, BulkGroup, "AP6",
                              "insert 'cp.async.bulk.commit_group;' before the wait")
    return out


def bulk_size_invalid(ctx: Context) -> list[Finding]:
    """``cp.async.bulk`` size or shared address not a multiple of 16 (AP7).

    What it checks:
        Non-tensor bulk copies: the size (immediate or constant register) is a positive multiple
        of 16 and resolved shared-memory data addresses are 16-byte aligned; the mbarrier
        operand (a ``.b64`` object) needs only 8 bytes. Unknown sizes give a note.

    Why it is bad:
        Undefined behaviour.

    Example:
        ``mov.b32 %r5, 1000; cp.async.bulk.shared::cluster.global... [smem], [%rd1], %r5, [bar];``

    Use instead:
        a size that is a multiple of 16.

    ptxas:
        size: ERR for immediates only.

    References:
        PTX ISA 9.1 §9.7.9.25.4.1; docs/ptx_rules.md AP7.
    """
    out: list[Finding] = []
    for fi, fa in each_function(ctx, _is_bulk):
        for i, ins in enumerate(fa.cfg.instrs):
            if not (is_bulk_load(ins) or is_bulk_store(ins)) or "tensor" in ins.parts:
                continue
            sz = [o for o in ins.operands if o.kind != "address"]
            if not sz:
                continue
            c = fa.values.const(sz[0], i)
            if c is None:
                out.append(note_finding(ctx, "AP7", ins, "bulk copy size is not a constant; "
                                        "its multiple-of-16 rule is not checked"))
            elif c <= 0 or c % 16:
                out.append(ctx.finding("AP7", ins.line, ins.col,
                                       f"bulk copy size {c} is not a positive multiple of 16",
                                       notes=[Note(message="sizes and addresses of "
                                                   "'cp.async.bulk' must be 16-byte multiples")]))
            mbar = mbar_operand(ins)
            for o in ins.operands:
                if o.kind == "address":
                    # data operands: 16 bytes (§9.7.9.25.4.1); the mbarrier operand is a .b64
                    # object: 8 bytes (§9.7.13.15.1, MB1)
                    align = 8 if o is mbar else 16
                    v = addr_val(fa, o, i)
                    if v is not None and v[0] == "s" and v[2] % align:
                        what = "mbarrier operand" if o is mbar else "address"
                        out.append(ctx.finding("AP7", ins.line, ins.col,
                                               f"bulk copy {what} '{fmt_addr(v)}' is not "
                                               f"{align}-byte aligned"))
    return out
