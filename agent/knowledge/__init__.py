"""The knowledge base of the prompt: sourced hardware facts and a catalogue of transformations.

:func:`knowledge_section` renders, for one kernel on one target, the target's facts
(:mod:`agent.knowledge.facts`, each with its source) and the catalogue entries
(:mod:`agent.knowledge.catalogue`) relevant to the kernel's class, within a token budget. The
class comes from Triton's TTGIR ops (:func:`classify`); the closer roofline bound from the
spec's FLOP and byte formulas at the bench size against the target's machine balance (peak
FLOP/s of the FLOP dtype over DRAM bandwidth). Everything is a pure function of its inputs, so the
same kernel gives the same section byte for byte.

Tokens are estimated as ``ceil(characters / 4)`` (the usual rule of thumb for English and code
with BPE tokenizers); the budget is a cap on that estimate.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from agent.knowledge.catalogue import CATALOGUE, Entry
from agent.knowledge.facts import PEAKS, Fact, facts_for

__all__ = ["Selection", "classify", "roofline_bound", "select", "knowledge_section",
           "estimate_tokens", "Entry", "Fact", "CATALOGUE"]

_DOT = re.compile(r"\b(tt\.dot|tt\.dot_scaled|ttng\.warp_group_dot|ttng\.tc_gen5_mma|"
                  r"ttng\.tc_gen5_mma_scaled)\b")
_EXP = re.compile(r"\bmath\.(exp2|exp)\b")
_REDUCE = re.compile(r"\btt\.reduce\b")
_MAX = re.compile(r"\b(arith\.maxnumf|arith\.maximumf)\b")


def estimate_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``: the token estimate the budget is checked against."""
    return math.ceil(len(text) / 4)


def classify(ttgir: str) -> tuple[str, str]:
    """The kernel class from its TTGIR, and why.

    Returns:
        ``(class, reason)``: ``attention`` (two or more dot ops, an exponential and a row max),
        ``gemm`` (a dot op), ``reduction`` (``tt.reduce`` without a dot) or ``elementwise``.
    """
    dots = len(_DOT.findall(ttgir))
    exp = bool(_EXP.search(ttgir))
    red = bool(_REDUCE.search(ttgir))
    if dots >= 2 and exp and (red or _MAX.search(ttgir)):
        return "attention", f"{dots} dot ops, an exponential and a row reduction in the TTGIR"
    if dots:
        return "gemm", f"{dots} dot op(s) in the TTGIR"
    if red:
        return "reduction", "tt.reduce without a dot op in the TTGIR"
    return "elementwise", "no dot op and no tt.reduce in the TTGIR"


def roofline_bound(spec: Any, arch: str) -> tuple[str, str]:
    """The closer roofline bound at the bench size: ``memory`` or ``compute``, and why.

    Arithmetic intensity = ``spec.flop_count("bench") / spec.byte_count("bench")`` (FLOP per
    DRAM byte); machine balance = peak TFLOP/s of ``spec.flop_dtype`` (fp32 when none) over the
    target's DRAM TB/s (:data:`agent.knowledge.facts.PEAKS`).
    """
    cfg = spec.configs()[0]
    flops = float(spec.flop_count("bench", cfg))
    nbytes = float(spec.byte_count("bench", cfg))
    peaks = PEAKS[arch]
    dt = (spec.flop_dtype or "fp32").lower()
    key = next((k for k in (dt, dt[:4], "fp8" if dt.startswith("fp8") else "") if k in peaks),
               "fp32" if "fp32" in peaks else "tf32")
    balance = peaks[key] / peaks["tb_s"]
    if nbytes <= 0:
        return "compute", "no DRAM bytes declared"
    ai = flops / nbytes
    bound = "compute" if ai > balance else "memory"
    return bound, (f"{ai:.3g} FLOP/byte at the bench size vs a machine balance of "
                   f"{balance:.3g} ({key} {peaks[key]:g} TFLOP/s / {peaks['tb_s']:g} TB/s)")


@dataclass(frozen=True)
class Selection:
    """What :func:`select` chose.

    Attributes:
        kernel_class, class_reason: from :func:`classify`.
        bound, bound_reason: from :func:`roofline_bound`.
        facts: the target's facts included (in order).
        entries: the catalogue entries included (most relevant first).
        dropped: ids of relevant entries left out by the budget.
    """

    kernel_class: str
    class_reason: str
    bound: str
    bound_reason: str
    facts: tuple[Fact, ...]
    entries: tuple[Entry, ...]
    dropped: tuple[str, ...]


def _fact_text(f: Fact) -> str:
    return f"- {f.text} [source: {f.source}]"


def _entry_text(e: Entry) -> str:
    return (f"### {e.title} (`{e.id}`)\n{e.text}\n```ptx\n{e.ptx}\n```\nSource: {e.source}")


def _relevant(entries: tuple[Entry, ...], kclass: str, bound: str, arch: str) -> list[Entry]:
    """Entries for the class and target, those that help the closer bound first (stable)."""
    ok = [e for e in entries if kclass in e.classes and arch in e.archs]
    return sorted(ok, key=lambda e: 0 if bound in e.bounds else 1)


def select(spec: Any, arch: str, ttgir: str, budget_tokens: int) -> Selection:
    """Choose the facts and entries for ``spec`` on ``arch`` within ``budget_tokens``.

    Facts come first, in order, while they fit; then the relevant entries, most relevant
    first, each whole or not at all.

    Raises:
        ValueError: an arch without facts.
    """
    kclass, creason = classify(ttgir)
    bound, breason = roofline_bound(spec, arch)
    # 40 tokens stay free for the "left out" line
    left = budget_tokens - 40 - estimate_tokens(_header(spec, arch, kclass, creason, bound,
                                                        breason))
    facts: list[Fact] = []
    for f in facts_for(arch):
        cost = estimate_tokens(_fact_text(f)) + 1
        if cost > left:
            break
        facts.append(f)
        left -= cost
    chosen: list[Entry] = []
    dropped: list[str] = []
    for e in _relevant(CATALOGUE, kclass, bound, arch):
        cost = estimate_tokens(_entry_text(e)) + 1
        if cost <= left:
            chosen.append(e)
            left -= cost
        else:
            dropped.append(e.id)
    return Selection(kclass, creason, bound, breason, tuple(facts), tuple(chosen), tuple(dropped))


def _header(spec: Any, arch: str, kclass: str, creason: str, bound: str, breason: str) -> str:
    return (f"## Target facts and transformations for {arch}\n"
            f"Kernel class: {kclass} ({creason}); closer roofline bound: {bound} ({breason}).")


def knowledge_section(spec: Any, arch: str, ttgir: str, budget_tokens: int = 2500) -> str:
    """The prompt section: header, the target's facts with sources, the matching entries.

    Args:
        spec: the :class:`~kernels.spec.KernelSpec` (FLOP and byte formulas, FLOP dtype).
        arch: the target.
        ttgir: Triton's TTGIR of the reference config.
        budget_tokens: cap on :func:`estimate_tokens` of the result (0: '').

    Returns:
        Markdown text, deterministic for the same inputs; '' when the budget is 0.

    Raises:
        ValueError: an arch without facts.
    """
    if budget_tokens <= 0:
        return ""
    s = select(spec, arch, ttgir, budget_tokens)
    parts = [_header(spec, arch, s.kernel_class, s.class_reason, s.bound, s.bound_reason), "",
             "Facts:", *(_fact_text(f) for f in s.facts)]
    if s.entries:
        parts += ["", "Transformations that fit this kernel (ideas, not requirements):", ""]
        parts.append("\n\n".join(_entry_text(e) for e in s.entries))
    if s.dropped:
        parts += ["", "Left out for the prompt budget: " + ", ".join(s.dropped) + "."]
    return "\n".join(parts)
