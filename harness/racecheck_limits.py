"""Where compute-sanitizer racecheck cannot be trusted: kernels with partial named barriers.

racecheck reports shared-memory RAW hazards that do not exist in a kernel where some threads
synchronise on a named barrier with a thread count below the CTA's (``bar.sync 0, 128`` in a CTA
of 384), as every Triton warp-specialized kernel does inside its partitions. Reproduced on the
H200 (2026-12-02, driver 580.159.04) by the hand-written probes of
``bench/racecheck_probe/probe.py``: Triton's partition dispatch (a table written by warps 0-3,
read by warps 4-11 after ``barrier.sync 1``, each side at its own instruction) is clean; the same
kernel with one ``bar.sync 0, 128`` among the writers before the write gets 7 RAW hazards (and 2
with that barrier renumbered to 4), though every read is ordered after the write by a generation
of barrier 1 that all 384 threads join (PTX ISA 9.0 §9.7.13.1). On Triton 3.6's own
``fast.attention_ws`` racecheck reports 40 such hazards on its partition-state table.

:func:`racecheck_misjudges` says when a kernel has such barriers; the agent loop then lets the
emulator's happens-before analysis (which models barrier generations and thread counts) decide
instead of racecheck's report (``agent.loop``). synccheck is unaffected.
"""

from __future__ import annotations

import re

# bar{.cta}.sync / .arrive / .red and barrier{.cta}.sync / .arrive / .red, with .aligned; not
# bar.warp.sync, barrier.cluster.*, mbarrier.* (PTX ISA 9.0 §9.7.13.1-§9.7.13.3)
_BAR = re.compile(r"(?<![\w.$])(?:bar|barrier)(?P<mods>(?:\.(?:cta|sync|arrive|red|aligned|popc|"
                  r"and|or|u32|pred))+)[ \t]+(?P<args>[^;]*);")
_INT = re.compile(r"^(?:0[xX][0-9a-fA-F]+|\d+)$")


def racecheck_misjudges(ptx: str, threads: int) -> str:
    """Why racecheck's hazards cannot be trusted for ``ptx`` launched with ``threads`` threads per
    CTA, or "" when nothing known makes it misjudge the kernel.

    Args:
        ptx: the candidate's PTX module text.
        threads: threads per CTA of the launch.

    Returns:
        A sentence naming the first barrier instruction (line) whose thread count is below
        ``threads`` or held in a register; "" if there is none.
    """
    partial = []
    for m in _BAR.finditer(ptx):
        mods = m.group("mods")
        if not any(k in mods for k in (".sync", ".arrive", ".red")):
            continue
        args = [a.strip() for a in m.group("args").split(",")]
        if ".red" in mods:
            count = args[2] if len(args) == 4 else ""
        else:
            count = args[1] if len(args) > 1 else ""
        if not count:
            continue  # every thread of the CTA
        if not _INT.match(count) or int(count, 0) < threads:
            partial.append((ptx.count("\n", 0, m.start()) + 1, m.group(0).strip()))
    if not partial:
        return ""
    line, text = partial[0]
    return (f"{len(partial)} barrier instruction(s) with a thread count below the CTA's {threads} "
            f"threads (first: line {line}, '{text}'); racecheck reports false hazards in such "
            f"kernels (bench/racecheck_probe/probe.py, ws_bar0)")
