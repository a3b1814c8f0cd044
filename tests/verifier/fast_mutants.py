"""Mutation testing over the ``fast`` corpus (issue 18, item 4): single-bug mutants derived from
every fast-family PTX file, one class per synchronization obligation, each expected to be
rejected by the verifier (an error, any rule: ``ailower lower`` / ``eval`` reject on any error).

Classes (``CLASSES``), each applied at every site it finds in a file (bounded by ``MAX_SITES``):

* ``parity_xor`` / ``parity_sub`` / ``parity_selp`` / ``parity_imm``: an mbarrier wait's parity
  flipped, written as ``xor.b32 p', p, 1``, as ``sub.s32 p', 1, p``, through ``setp`` +
  ``selp``, or as the other immediate;
* ``no_proxy_fence``: one ``fence.proxy.async`` removed (generic writes then an async-proxy
  read: TMA store, wgmma, tcgen05.mma);
* ``no_mbar_wait``: one mbarrier wait loop removed where shared data is consumed after it (an
  MMA, ``tcgen05.cp`` or a generic shared read follows before the next mbarrier operation);
* ``expect_tx``: one ``expect_tx`` byte count halved;
* ``no_wgmma_wait`` / ``no_wgmma_fence``: one ``wgmma.wait_group`` / ``wgmma.fence`` removed;
* ``no_tcgen05_wait`` / ``no_tcgen05_fence``: one ``tcgen05.wait::ld/st`` / ``tcgen05.fence``
  removed;
* ``no_bar_sync``: one ``bar.sync`` / ``barrier.sync`` removed (not one of two identical
  adjacent barriers: removing a duplicate changes nothing);
* ``bar_count``: one named barrier's thread count lowered by 32;
* ``early_dealloc``: ``tcgen05.dealloc`` moved right after the last ``tcgen05.mma``;
* ``no_cluster_barrier``: one ``barrier.cluster.arrive`` / ``wait`` removed;
* ``store_refill``: one ``cp.async.bulk.wait_group.read`` removed (a TMA store's source reused
  before the read completed);
* ``early_release``: a ``wgmma.wait_group N`` followed by a stage-release arrive gets ``N + 1``
  (the stage is released before the wgmma reading it retires).

A class that finds no site in a file contributes nothing for it (e.g. no wgmma on sm_100a).
Used by ``bench/mutant_table.py --fast`` and ``tests/verifier/test_verifier_fast_mutants.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

MAX_SITES = 4
"""Mutants per class and file (the first sites in text order): bounds the table's run time."""


@dataclass(frozen=True)
class FastMutant:
    """One seeded bug: ``cls`` (a key of :data:`CLASSES`), the source file, a site line (1-based,
    in the original), a one-line description and the mutated text."""

    cls: str
    base: str
    line: int
    what: str
    text: str


_REG_DECL = "\t.reg .b32 \t%ailower_m<4>;\n\t.reg .pred \t%ailower_q<2>;\n"


def _declare(text: str) -> str:
    """Add the mutants' scratch registers after the first ``.reg`` line of the entry body."""
    m = re.search(r"\n\s*\.reg [^\n]*\n", text)
    assert m, "no .reg declaration to put the scratch registers after"
    return text[:m.end()] + _REG_DECL + text[m.end():]


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _drop(text: str, m: re.Match) -> str:
    return text[:m.start()] + "\n" + text[m.end():]


_WAIT = re.compile(r"\n(?P<ind>[ \t]*)(?P<pred>@!?%\w+\s+)?mbarrier\.(?:try|test)_wait\.parity"
                   r"(?P<mods>[\w.:]*)\s+(?P<dst>%?\w+),\s*\[(?P<bar>[^\]]+)\],\s*(?P<par>[%\w]+)"
                   r"\s*;")


def _parity(form: str) -> Callable[[str], Iterator[tuple[int, str, str]]]:
    def gen(text: str) -> Iterator[tuple[int, str, str]]:
        for m in _WAIT.finditer(text):
            par = m.group("par")
            reg = par.startswith("%")
            if form == "imm":
                if reg:
                    continue
                new = m.group(0)[:m.start("par") - m.start()] + str(1 - int(par, 0)) + \
                    m.group(0)[m.end("par") - m.start():]
                yield _line_of(text, m.start() + 1), f"parity {par} -> {1 - int(par, 0)}", \
                    text[:m.start()] + new + text[m.end():]
                continue
            if not reg:
                continue
            calc = {"xor": f"xor.b32 \t%ailower_m0, {par}, 1;",
                    "sub": f"sub.s32 \t%ailower_m0, 1, {par};",
                    "selp": f"setp.eq.u32 \t%ailower_q0, {par}, 0;\n{m.group('ind')}"
                            f"selp.b32 \t%ailower_m0, 1, 0, %ailower_q0;"}[form]
            body = m.group(0)[:m.start("par") - m.start()] + "%ailower_m0" + \
                m.group(0)[m.end("par") - m.start():]
            new = f"\n{m.group('ind')}{calc}" + body
            yield _line_of(text, m.start() + 1), f"parity {par} flipped ({form})", \
                _declare(text[:m.start()] + new + text[m.end():])
    return gen


def _remove(pattern: str, what: str, skip_dup: bool = False
            ) -> Callable[[str], Iterator[tuple[int, str, str]]]:
    rx = re.compile(r"\n[ \t]*(?:@!?%\w+\s+)?" + pattern + r"[^\n]*")

    def gen(text: str) -> Iterator[tuple[int, str, str]]:
        for m in rx.finditer(text):
            if skip_dup:
                here = m.group(0).strip()
                nxt = text[m.end():].lstrip("\n").split("\n", 1)[0].strip()
                prv = text[:m.start()].rsplit("\n", 1)[-1].strip()
                if here in (nxt, prv):
                    continue
            yield _line_of(text, m.start() + 1), f"{what}: {m.group(0).strip()[:60]}", \
                _drop(text, m)
    return gen


def _no_mbar_wait(text: str) -> Iterator[tuple[int, str, str]]:
    consume = re.compile(r"wgmma\.mma_async|tcgen05\.mma|tcgen05\.cp|ld\.shared|ldmatrix")
    for m in _WAIT.finditer(text):
        rest = text[m.end():]
        nxt = re.search(r"mbarrier\.", rest)
        window = rest[:nxt.start()] if nxt else rest
        if not consume.search(window):
            continue
        # the wait and its retry branch (Triton: `@!complete bra.uni waitLoop;`)
        retry = re.match(r"\n[ \t]*@!?%?\w+\s+bra(?:\.uni)?\s+\S+;", rest)
        end = m.end() + (retry.end() if retry else 0)
        dst = m.group("dst")
        # keep the predicate defined (true) so the code after still assembles
        fill = f"\n{m.group('ind')}setp.eq.u32 \t{dst}, 0, 0;" if dst.startswith("%") or \
            dst.isidentifier() else ""
        yield _line_of(text, m.start() + 1), f"mbarrier wait removed before a consumer", \
            text[:m.start()] + fill + "\n" + text[end:]


def _expect_tx(text: str) -> Iterator[tuple[int, str, str]]:
    rx = re.compile(r"(mbarrier\.(?:arrive\.)?expect_tx[\w.:]*\s+[^;]*,\s*)(\d+)(\s*;)")
    for m in rx.finditer(text):
        n = int(m.group(2))
        if n < 32:
            continue
        yield _line_of(text, m.start()), f"expect_tx {n} -> {n // 2}", \
            text[:m.start(2)] + str(n // 2) + text[m.end(2):]


def _bar_count(text: str) -> Iterator[tuple[int, str, str]]:
    rx = re.compile(r"(\n[ \t]*(?:@!?%\w+\s+)?bar(?:rier)?\.(?:sync|arrive)[\w.]*\s+\d+\s*,\s*)"
                    r"(\d+)(\s*;)")
    for m in rx.finditer(text):
        n = int(m.group(2))
        if n <= 32:
            continue
        yield _line_of(text, m.start() + 1), f"named barrier count {n} -> {n - 32}", \
            text[:m.start(2)] + str(n - 32) + text[m.end(2):]


def _early_dealloc(text: str) -> Iterator[tuple[int, str, str]]:
    d = re.search(r"\n[ \t]*(?:@!?%\w+\s+)?tcgen05\.dealloc[^\n]*", text)
    mmas = list(re.finditer(r"\n[ \t]*(?:@!?%\w+\s+)?tcgen05\.mma[^\n]*", text))
    if d is None or not mmas or mmas[-1].start() > d.start():
        return
    last = mmas[-1]
    out = text[:d.start()] + "\n" + text[d.end():]
    out = out[:last.end()] + d.group(0) + out[last.end():]
    yield _line_of(text, d.start() + 1), "tcgen05.dealloc moved after the last tcgen05.mma", out


def _early_release(text: str) -> Iterator[tuple[int, str, str]]:
    rx = re.compile(r"(\n[ \t]*wgmma\.wait_group\.sync\.aligned\s+)(\d+)(\s*;)")
    for m in rx.finditer(text):
        after = text[m.end():m.end() + 600]
        if not re.search(r"mbarrier\.arrive(?!\.expect_tx)", after):
            continue
        n = int(m.group(2))
        yield _line_of(text, m.start() + 1), f"wgmma.wait_group {n} -> {n + 1} before the " \
            "stage release", text[:m.start(2)] + str(n + 1) + text[m.end(2):]


CLASSES: dict[str, Callable[[str], Iterator[tuple[int, str, str]]]] = {
    "parity_xor": _parity("xor"),
    "parity_sub": _parity("sub"),
    "parity_selp": _parity("selp"),
    "parity_imm": _parity("imm"),
    "no_proxy_fence": _remove(r"fence\.proxy\.async(?!\.global)", "proxy fence removed"),
    "no_mbar_wait": _no_mbar_wait,
    "expect_tx": _expect_tx,
    "no_wgmma_wait": _remove(r"wgmma\.wait_group", "wgmma.wait_group removed"),
    "no_wgmma_fence": _remove(r"wgmma\.fence", "wgmma.fence removed"),
    "no_tcgen05_wait": _remove(r"tcgen05\.wait::", "tcgen05.wait removed"),
    "no_tcgen05_fence": _remove(r"tcgen05\.fence::", "tcgen05.fence removed"),
    "no_bar_sync": _remove(r"bar(?:rier)?\.sync\b", "barrier removed", skip_dup=True),
    "bar_count": _bar_count,
    "early_dealloc": _early_dealloc,
    "no_cluster_barrier": _remove(r"barrier\.cluster\.(?:arrive|wait)", "cluster barrier removed"),
    "store_refill": _remove(r"cp\.async\.bulk\.wait_group\.read", "wait_group.read removed"),
    "early_release": _early_release,
}
"""Mutation class -> generator of ``(site line, description, mutated text)``."""


def mutants(base: str, text: str, classes: list[str] | None = None,
            max_sites: int = MAX_SITES) -> list[FastMutant]:
    """Every mutant of ``text`` (named ``base``) for ``classes`` (default all), at most
    ``max_sites`` per class.

    Raises:
        KeyError: an unknown class name.
    """
    out = []
    for cls in classes or list(CLASSES):
        for k, (line, what, new) in enumerate(CLASSES[cls](text)):
            if k >= max_sites:
                break
            out.append(FastMutant(cls, base, line, what, new))
    return out
