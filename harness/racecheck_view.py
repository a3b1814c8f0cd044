"""The PTX that compute-sanitizer racecheck is run on: the candidate with barrier 0 renumbered
where racecheck is known to misjudge it.

racecheck reports shared-memory RAW hazards that do not exist once a kernel uses *barrier 0 with
a thread count* (``bar.sync 0, 128``), as every Triton warp-specialized kernel does inside its
default partition. Reproduced on the H200 (2026-12-02, driver 580.159.04) with the hand-written
probes of ``bench/racecheck_probe/probe.py``: the dispatch idiom of Triton's warp specialization
(a table written by warps 0-3, read by warps 4-11 after ``barrier.sync 1``) is clean (0 hazards),
and the same kernel with one ``bar.sync 0, 128`` among the writers before the write gets 7 RAW
hazards on the table, though every read is ordered after the write by a generation of barrier 1
that all 384 threads join (PTX ISA 9.0 §9.7.13.1, ``barrier``/``bar``: barrier resources 0-15
are interchangeable; ``b`` is the number of participating threads).

Renumbering is an isomorphism of the program when it is applied only where it is sure to be one
(:func:`racecheck_view`): every instruction that names barrier 0 gives the same literal thread
count, no barrier instruction names its barrier by a register (that could be 0 at run time), and a
barrier id in 1-15 is named by no instruction. Otherwise the PTX is returned unchanged and
racecheck judges the kernel as written.
"""

from __future__ import annotations

import re

# bar{.cta}.sync / .arrive / .red and barrier{.cta}.sync / .arrive / .red, with .aligned; not
# bar.warp.sync, barrier.cluster.*, mbarrier.* (PTX ISA 9.0 §9.7.13.1-§9.7.13.3)
_BAR = re.compile(r"(?<![\w.$])(?P<op>bar|barrier)(?P<mods>(?:\.(?:cta|sync|arrive|red|aligned|popc|"
                  r"and|or|u32|pred))*)[ \t]+(?P<args>[^;]*);")
_INT = re.compile(r"^(?:0[xX][0-9a-fA-F]+|\d+)$")


def _operands(m: re.Match) -> tuple[int, list[str]]:
    """(index of the barrier-id operand, the operands) of one barrier instruction."""
    args = [a.strip() for a in m.group("args").split(",")]
    return (1 if ".red" in m.group("mods") else 0), args


def racecheck_view(ptx: str) -> tuple[str, str]:
    """``ptx`` as racecheck should see it, and a note saying what was changed ("" if nothing).

    Args:
        ptx: the candidate's PTX module text.

    Returns:
        ``(ptx', note)``: ``ptx'`` is ``ptx`` with every use of barrier 0 renamed to the lowest
        barrier id in 1-15 that no instruction names, when all uses of barrier 0 give the same
        literal thread count and no barrier instruction takes its id from a register; otherwise
        ``ptx`` itself and an empty note. The two programs synchronise identically (PTX ISA 9.0
        §9.7.13.1: the 16 barrier resources differ only by number).
    """
    uses: list[re.Match] = []
    named: set[int] = set()
    for m in _BAR.finditer(ptx):
        if m.group("mods") in ("", ".cta") or not any(
                k in m.group("mods") for k in (".sync", ".arrive", ".red")):
            continue  # not a barrier instruction (e.g. a label or another word)
        i, args = _operands(m)
        if len(args) <= i or not _INT.match(args[i]):
            return ptx, ""  # a register barrier id: any resource could be meant
        bid = int(args[i], 0)
        named.add(bid)
        if bid == 0:
            uses.append(m)
    if not uses:
        return ptx, ""
    counts = set()
    for m in uses:
        i, args = _operands(m)
        count = args[i + 1] if len(args) > i + 1 else ""
        if ".red" in m.group("mods"):
            # bar.red d, a{, b}, {!}c: the count is present only with four operands
            count = args[2] if len(args) == 4 else ""
        if not _INT.match(count):
            return ptx, ""  # all threads of the CTA (no count) or a register count: left alone
        counts.add(int(count, 0))
    if len(counts) != 1:
        return ptx, ""
    free = next((b for b in range(1, 16) if b not in named), None)
    if free is None:
        return ptx, ""
    out, last = [], 0
    for m in uses:
        i, args = _operands(m)
        args[i] = str(free)
        out.append(ptx[last:m.start("args")])
        out.append(", ".join(args))
        last = m.end("args")
    out.append(ptx[last:])
    n = counts.pop()
    return "".join(out), (f"racecheck ran on a copy with barrier 0 renumbered to {free} ({len(uses)} "
                          f"uses, each with thread count {n}): racecheck reports false hazards after "
                          f"a partial barrier 0 (bench/racecheck_probe/probe.py, ws_bar0)")
