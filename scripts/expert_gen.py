"""What the ``gen.py`` scripts of Triton-formulated expert entries share (kernels/expert/).

It lives in ``scripts/`` (no room): it compiles through the harness, which the ``kernels`` room
must not import (``tests/layout/test_imports.py``); the corpus itself only holds the results.

:func:`generate` compiles a hand-written Triton formulation of a suite kernel with the suite
spec's own parameters (so the ``.entry`` name and ``.param`` list are Triton's for that kernel,
scratch pointers included) through the harness's reference compile (the same Triton options,
PTX ISA cap and ptxas), then writes ``kernel.ptx`` and ``launch.yaml`` next to the formulation.

Run a ``gen.py`` from the repository root: ``python kernels/expert/gemm.fp8/sm_90a/gen.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_INIT = re.compile(r"^(\s*)(@%p\d+\s+)?mbarrier\.init\.shared(::cta)?\.b64\b[^\n]*$", re.M)
# a thread sync: a CTA / named barrier, an mbarrier arrive, the exit of Triton's try_wait loop
_BAR = re.compile(r"^(\s*)(?:@!?%\w+\s+)?(?:bar|barrier)\.(sync|arrive|red)\b[^\n]*$")
_ARRIVE = re.compile(r"^(\s*)(?:@!?%\w+\s+)?mbarrier\.arrive\b[^\n]*$")
_TRY_WAIT = re.compile(r"^\s*mbarrier\.try_wait\b")
_WAIT_EXIT = re.compile(r"^(\s*)@!(\w+)\s+bra(?:\.uni)?\s+\w+;\s*$")
_WG_FENCE = re.compile(r"^(\s*)wgmma\.fence\.sync\.aligned;\s*$")
_WG_COMMIT = re.compile(r"^(\s*)wgmma\.commit_group\.sync\.aligned;\s*$")
_WG_BAR = re.compile(r"^\s*bar\.sync\s+(\d+),\s*128;\s*$")
_MAXNREG_INC = re.compile(r"^\s*setmaxnreg\.inc\.sync\.aligned\.u32\s+\d+;\s*$")
_BRA_UNI = re.compile(r"^\s*bra\.uni\s+(\$\w+);\s*$")
_LABEL = re.compile(r"^(\$\w+):")
_BEFORE = "tcgen05.fence::before_thread_sync;  // expert gen.py"
_AFTER = "tcgen05.fence::after_thread_sync;  // expert gen.py"


def fence_mbarrier_inits(ptx: str) -> tuple[str, int]:
    """``ptx`` with ``fence.mbarrier_init.release.cluster`` after every ``mbarrier.init``.

    What CUTLASS's ``fence_barrier_init`` does after every pipeline's inits (cluster-scope
    visibility of the inits). For a CTA-local barrier it is not required: the PTX ISA's
    ``cp.async.bulk`` description says the copy accesses its mbarrier operand through the
    generic proxy, so an init ordered before the copy by a barrier suffices (the emulator's HB4
    used to say otherwise; docs/verifier-fast.md, "Warnings on correct code"). Triton 3.9's
    warp-specialized sm_90a code omits the fence; its non-specialized code has one. Executed by every thread that reaches the
    init, once per CTA, in the prologue.

    Returns:
        (patched PTX, number of fences inserted).
    """
    n = 0

    def add(m: re.Match) -> str:
        nonlocal n
        n += 1
        return f"{m.group(0)}\n{m.group(1)}fence.mbarrier_init.release.cluster;  // expert gen.py"

    return _INIT.sub(add, ptx), n


def fence_tcgen05_syncs(ptx: str) -> tuple[str, int]:
    """``ptx`` with the tcgen05 thread-sync fences around every thread synchronisation.

    PTX ISA 9.0 §9.7.16.6.4 (tcgen05 memory consistency): tensor-memory accesses of one thread
    (``tcgen05.ld/st/mma/cp``, and the TMEM address ``tcgen05.alloc`` writes) are ordered with
    another thread's only through a thread sync bracketed by ``tcgen05.fence::before_thread_sync``
    on the releasing side and ``tcgen05.fence::after_thread_sync`` on the acquiring side (the
    verifier's TF3 / TF4 / TF5; docs/ptx_rules.md). Triton 3.9's sm_100a code emits neither and
    relies on the default-acquire ``mbarrier.try_wait`` and ``bar.sync``. This inserts
    ``before_thread_sync`` before every ``mbarrier.arrive`` and CTA / named barrier
    (``bar|barrier.sync|arrive|red``), and ``after_thread_sync`` after every ``bar|barrier.sync``
    / ``.red`` and after the exit branch of every ``mbarrier.try_wait`` loop (Triton's
    ``@!complete bra.uni waitLoop;``). The fences are unpredicated (each is a no-op for a thread
    with no tcgen05 access in flight) and order nothing else, so adding them where no TMEM
    hand-off happens is harmless.

    Returns:
        (patched PTX, number of fences inserted).

    Raises:
        ValueError: an ``mbarrier.try_wait`` is not followed by its loop's exit branch (a wait
            form this patch does not know; names the 1-based line).
    """
    out: list[str] = []
    n = 0
    lines = ptx.split("\n")
    for i, ln in enumerate(lines):
        bar, arrive = _BAR.match(ln), _ARRIVE.match(ln)
        if bar or arrive:
            out.append(f"{(bar or arrive).group(1)}{_BEFORE}")
            n += 1
        out.append(ln)
        if bar and bar.group(2) != "arrive":
            out.append(f"{bar.group(1)}{_AFTER}")
            n += 1
        if _TRY_WAIT.match(ln):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if not _WAIT_EXIT.match(nxt):
                raise ValueError(f"line {i + 1}: 'mbarrier.try_wait' not followed by its loop's "
                                 f"exit branch ('@!p bra waitLoop;'): {nxt.strip()!r}")
        w = _WAIT_EXIT.match(ln)
        if w and i > 0 and _TRY_WAIT.match(lines[i - 1]):
            out.append(f"{w.group(1)}{_AFTER}")
            n += 1
    return "\n".join(out), n


def pingpong_wgmma_consumers(ptx: str, tokens: tuple[int, int] = (4, 5)) -> tuple[str, int]:
    """``ptx`` with FlashAttention-3-style ping-pong between two wgmma consumer warpgroups.

    For Triton 3.9's warp-specialized sm_90a code with two consumer warpgroups (each a
    partition of 128 threads with its own named barrier ``bar.sync N, 128``). Each consumer's
    wgmma groups (``wgmma.fence`` ... ``wgmma.commit_group``) become turns of a token passed
    between them with two more named barriers of 256 threads (PTX ISA 9.0 §9.7.13.1): before a
    group the consumer waits for its turn (``bar.sync tokens[k], 256``), right after the commit
    it hands the turn over (``bar.arrive tokens[1-k], 256``), then waits for its own results.
    So the tensor core takes the consumers' groups in strict alternation, and one consumer's
    softmax runs while the other's group is on the tensor core. The second consumer gives the
    first turn (an arrive at its partition start, after its ``setmaxnreg.inc``); the first takes
    the last hand-over at its loop's exit label, so every arrive has its sync.

    Needs both consumers to run the same number of groups (the same key loop: true when they
    split one tile's rows). The first consumer is the one whose wgmma comes first in the file.

    Returns:
        (patched PTX, number of barrier instructions inserted).

    Raises:
        ValueError: not exactly two consumers, a group without its commit or named barrier, or
            no ``bra.uni`` to the first consumer's loop-exit label after its last group (the
            message says which).
    """
    lines = ptx.split("\n")
    groups: list[tuple[int, int, int]] = []  # (fence line, commit line, consumer barrier id)
    for i, ln in enumerate(lines):
        if not _WG_FENCE.match(ln):
            continue
        commit = next((j for j in range(i + 1, len(lines)) if _WG_COMMIT.match(lines[j])), None)
        if commit is None:
            raise ValueError(f"line {i + 1}: 'wgmma.fence' without a later 'wgmma.commit_group'")
        bar = next((m for j in range(commit + 1, len(lines)) if (m := _WG_BAR.match(lines[j]))),
                   None)
        if bar is None:
            raise ValueError(f"line {commit + 1}: no consumer 'bar.sync N, 128' after the group")
        groups.append((i, commit, int(bar.group(1))))
    ids = list(dict.fromkeys(g[2] for g in groups))
    if len(ids) != 2:
        raise ValueError(f"expected two wgmma consumers (named barriers), found {ids}")
    first, second = ids
    tok = {first: tokens[0], second: tokens[1]}
    other = {first: tokens[1], second: tokens[0]}
    before: dict[int, list[str]] = {}
    after: dict[int, list[str]] = {}
    for fence, commit, cid in groups:
        ind = _WG_FENCE.match(lines[fence]).group(1)
        before.setdefault(fence, []).append(
            f"{ind}bar.sync {tok[cid]}, 256;  // expert gen.py: turn")
        after.setdefault(commit, []).append(
            f"{ind}bar.arrive {other[cid]}, 256;  // expert gen.py: hand over")
    # the second consumer gives the first turn at its partition start
    sfence = min(g[0] for g in groups if g[2] == second)
    start = next((j for j in range(sfence, -1, -1) if _MAXNREG_INC.match(lines[j])), None)
    if start is None:
        raise ValueError(f"line {sfence + 1}: no 'setmaxnreg.inc' opening the second consumer")
    after.setdefault(start, []).append(
        f"\tbar.arrive {tokens[0]}, 256;  // expert gen.py: first turn")
    # the first consumer takes the last hand-over at its loop-exit label
    fcommit = max(g[1] for g in groups if g[2] == first)
    exit_label = next((m.group(1) for j in range(fcommit, len(lines))
                       if (m := _BRA_UNI.match(lines[j]))), None)
    where = next((j for j, ln in enumerate(lines)
                  if (m := _LABEL.match(ln)) and m.group(1) == exit_label), None)
    if where is None:
        raise ValueError(f"line {fcommit + 1}: no 'bra.uni' to the first consumer's loop exit")
    after.setdefault(where, []).append(f"\tbar.sync {tokens[0]}, 256;  // expert gen.py: last turn")
    out: list[str] = []
    for i, ln in enumerate(lines):
        out.extend(before.get(i, []))
        out.append(ln)
        out.extend(after.get(i, []))
    return "\n".join(out), 2 * len(groups) + 2


def generate(folder: Path, kernel: str, arch: str, function: str, constexprs: dict[str, Any],
             num_warps: int, num_stages: int, grid_meta: dict[str, Any], summary: str,
             max_ptx_version: int = 87, fence_inits: bool = False,
             fence_tcgen05: bool = False, pingpong: bool = False) -> dict[str, Any]:
    """Compile ``folder/formulation.py::function`` as suite kernel ``kernel`` for ``arch``.

    Args:
        folder: the entry folder (``kernels/expert/<kernel>/<arch>``), holding formulation.py.
        kernel: the suite entry whose spec (parameters, signature) the formulation must keep.
        arch: the target (``sm_90a``).
        function: the ``@triton.jit`` function's name; it must be the suite kernel's (the
            ``.entry`` name follows it) and take the same parameters (checked by the spec).
        constexprs: the constexpr values the formulation is compiled with (its tile shape).
        num_warps, num_stages: Triton compile options.
        grid_meta: the meta values ``launch.yaml`` gives the spec's grid expression.
        summary: ``launch.yaml``'s one-line summary.
        fence_inits: apply :func:`fence_mbarrier_inits` to Triton's PTX (recorded in the
            returned metadata as ``expert_fences``).
        fence_tcgen05: apply :func:`fence_tcgen05_syncs` too (sm_100a; recorded as
            ``expert_tcgen05_fences``).
        pingpong: apply :func:`pingpong_wgmma_consumers` (sm_90a, two consumer warpgroups;
            recorded as ``expert_pingpong``).
        max_ptx_version: PTX ISA cap (87 = 8.7: what Triton 3.6's bundled ptxas 12.8 takes for
            sm_90a on the device, see shared/reference/triton_toolchain.md section 5; LLVM caps
            PTX features at 8.6 in both Triton versions, so only the ``.version`` line moves).

    Returns:
        Triton's metadata for the compile (``shared`` bytes, ``global_scratch_size``, ...).

    Raises:
        harness.ReferenceCompileError: Triton could not compile the formulation.
        kernels.SpecError: the formulation's parameters differ from the spec's.
        ValueError: ``fence_tcgen05`` and a wait form :func:`fence_tcgen05_syncs` does not know;
            ``pingpong`` and code :func:`pingpong_wgmma_consumers` cannot pair.
    """
    import yaml

    from harness import compile_reference
    from kernels import AutotuneSpace, Config, SourceRef, get

    spec = get(kernel)
    src = SourceRef(path=str(folder / "formulation.py"), function=function)
    cfg = Config(meta=dict(constexprs), num_warps=num_warps, num_stages=num_stages)
    mine = spec.model_copy(update={"source": src, "autotune": AutotuneSpace(configs=(cfg,))})
    art = compile_reference(mine, arch, cfg, max_ptx_version=max_ptx_version)
    abi = art.abi
    ptx, fences = fence_mbarrier_inits(art.ptx) if fence_inits else (art.ptx, 0)
    ptx, tc_fences = fence_tcgen05_syncs(ptx) if fence_tcgen05 else (ptx, 0)
    ptx, pp = pingpong_wgmma_consumers(ptx) if pingpong else (ptx, 0)
    (folder / "kernel.ptx").write_text(ptx)
    launch = {
        "kernel": kernel, "arch": arch, "entry": abi.entry, "threads": abi.threads,
        "meta": dict(grid_meta), "dynamic_smem": abi.dynamic_smem,
        "cluster_dims": [abi.num_ctas, 1, 1],
        "global_scratch_size": abi.global_scratch_size,
        "global_scratch_align": abi.global_scratch_align,
        "source": "gen.py", "summary": summary,
    }
    head = (f"# written by gen.py (Triton {art.triton_version}; constexprs {dict(constexprs)}, "
            f"num_warps={num_warps}, num_stages={num_stages}"
            + (f"; {fences} fence.mbarrier_init added" if fences else "")
            + (f"; {tc_fences} tcgen05.fence added" if tc_fences else "")
            + (f"; ping-pong: {pp} named-barrier instructions added" if pp else "")
            + "); see NOTES.md\n")
    (folder / "launch.yaml").write_text(head + yaml.safe_dump(launch, sort_keys=False, width=200))
    return {**art.metadata, "expert_fences": fences, "expert_tcgen05_fences": tc_fences,
            "expert_pingpong": pp}
