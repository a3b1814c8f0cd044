"""The suite's widened autotune spaces and the narrow ones they replaced (issue 22, item 6).

On the H200 the study's own tuning grids beat the suite's first, hand-picked spaces (bitdelta
17.22 ms over a 216-config grid vs 21.36 ms over 7 configs; mamba2_chunk_scan 0.376 vs 0.402 ms
over 162), so part of a reported speedup was a narrow baseline. Every suite entry's space is
therefore at least the usual Triton grid for its kind (:data:`GRIDS` says which), built by
:func:`widen`:

* the narrow configs come first, in their order, so ``configs()[0]`` (the baseline without a
  GPU, the config fixtures and the emulator use) is unchanged; then the grid's cross product,
  duplicates removed;
* a grid config is pruned *before* compiling only for a reason that holds for it on every target
  (:func:`dot_prune`): its fp32 accumulator alone needs more registers per thread than a thread
  may have, or its operand tiles need more shared memory than any target gives a CTA. Each pruned
  config and its reason are kept (:func:`pruned`). What only a compile can tell (the exact shared
  memory, a Triton failure) is pruned by :func:`harness.compile_space` per arch, with its reason;
  ``bench/compile_spaces.py`` reports both per entry.

The suite modules keep their narrow spaces (so their specs, identities and every cache keyed on
them are unchanged): ``kernels.get(NAME, space="narrow")`` is the module's spec, and
``kernels.get(NAME)`` (``space="wide"``, the default, ``AILOWER_AUTOTUNE_SPACE``) the same spec
with the space :data:`WIDEN` builds from it, so old and widened baselines can be measured side by
side (``ailower baseline --space narrow``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kernels.spec import AutotuneSpace, Config

__all__ = ["GRIDS", "SMEM_MAX_ANY_TARGET", "WIDEN", "Pruned", "Widened", "dot_prune", "pruned",
           "wide_space", "widen"]

SMEM_MAX_ANY_TARGET = 232448
"""The largest dynamic shared memory a CTA may opt into on any target the suite compiles for,
bytes: 227 KiB on sm_90 and sm_100 (sm_80: 163 KiB, sm_89: 99 KiB); CUDA C++ Programming Guide,
technical specifications per compute capability (``kernels.abi.SMEM_PER_BLOCK_OPTIN``)."""
MAX_REGS_PER_THREAD = 255
"""Registers a thread may use (PTX ISA 9.0 §11.4.1 ``.maxnreg``; ptxas spills past it)."""

GRIDS: dict[str, str] = {
    "gemm": "BLOCK_M, BLOCK_N in {64, 128, 256}, BLOCK_K in {32, 64, 128} (fp8: also 256), "
            "GROUP_M 8, num_warps {4, 8}, num_stages {2, 3, 4, 5}",
    "bitdelta": "the gemm grid with num_warps {4, 8, 16} and GROUP_M {4, 8} (over the study's "
                "216 configs after the compile's pruning too)",
    "attention": "BLOCK_M {64, 128}, BLOCK_N {32, 64, 128} (BLOCK_M a multiple of BLOCK_N), "
                 "num_warps {4, 8}, num_stages {2, 3, 4}",
    "mamba2_chunk_scan": "BLOCK_M {32, 64, 128, 256}, BLOCK_P {16, 32, 64}, BLOCK_K {16, 32, 64}, "
                         "num_warps {4, 8}, num_stages {1, 2, 3} (216, over the study's 162)",
    "mamba2_chunk_state": "BLOCK_P {16, 32, 64}, BLOCK_NS {32, 64, 128}, BLOCK_T {32, 64, 128}, "
                          "num_warps {4, 8}, num_stages {2, 3, 4}",
    "elementwise": "BLOCK_SIZE 2^9 .. 2^14, num_warps {2, 4, 8, 16}",
    "reduction": "BLOCK 2^9 .. 2^14, num_warps {2, 4, 8, 16}, num_stages {1, 2, 3}",
    "row": "one program per row, its block fixed by the row length: num_warps {2, 4, 8, 16, 32}",
    "tiled-memory": "2-D blocks of 2^9 .. 2^14 elements, num_warps {2, 4, 8, 16}",
}
"""Kind -> the grid its entries get (the usual Triton grids of ``triton.ops``/tutorials and the
issue's list)."""


@dataclass(frozen=True)
class Pruned:
    """A grid config left out before compiling: ``config`` is its :meth:`Config.key`,
    ``reason`` the rule (one that holds on every target)."""

    config: str
    reason: str


Prune = Callable[[Config], str | None]


class Widened(NamedTuple):
    """A widened space (``space``), the grid configs pruned before compiling (``pruned``) and
    the grid kind (``kind``, a key of :data:`GRIDS`)."""

    space: AutotuneSpace
    pruned: tuple[Pruned, ...]
    kind: str


def dot_prune(itemsize: int, *, extra_tile_bytes: Callable[[Mapping[str, int]], int] | None = None
              ) -> Prune:
    """A pruning rule for tiled dot kernels (meta ``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``).

    A config is pruned when

    * its fp32 accumulator, ``BLOCK_M * BLOCK_N / (32 * num_warps)`` registers per thread, is
      above 128: with power-of-two tiles the next value is 256, over the
      :data:`MAX_REGS_PER_THREAD` a thread may have, so it spills on every target;
    * ``num_stages`` copies of the A and B tiles, ``(BLOCK_M + BLOCK_N) * BLOCK_K * itemsize``
      bytes each (plus ``extra_tile_bytes(meta)`` for other pipelined operands), exceed
      :data:`SMEM_MAX_ANY_TARGET`. Triton 3.9 allocates exactly that on sm_90a (measured:
      gemm.fp16 128x256x64 with 3 stages gets 147,456 B, 128x128x64 with 4 gets 131,072 B); a
      real kernel needs at least it, so the rule only removes what cannot launch anywhere.

    Args:
        itemsize: bytes per operand element (2 for fp16, 1 for fp8).
        extra_tile_bytes: more shared memory per stage (bytes), from the meta-parameters.
    """
    def rule(cfg: Config) -> str | None:
        m = cfg.meta
        bm, bn, bk = int(m["BLOCK_M"]), int(m["BLOCK_N"]), int(m.get("BLOCK_K", 0))
        acc = bm * bn // (32 * cfg.num_warps)
        if acc > 128:
            return (f"fp32 accumulator needs {acc} registers per thread, over the "
                    f"{MAX_REGS_PER_THREAD} a thread may have (PTX ISA .maxnreg): it spills")
        per_stage = (bm + bn) * bk * itemsize + (extra_tile_bytes(m) if extra_tile_bytes else 0)
        smem = per_stage * max(cfg.num_stages, 1)
        if smem > SMEM_MAX_ANY_TARGET:
            return (f"{cfg.num_stages} stages of operand tiles need >= {smem} B of shared memory, "
                    f"over the {SMEM_MAX_ANY_TARGET} B a CTA may use on any target")
        return None
    return rule


def widen(narrow: AutotuneSpace, kind: str, meta: Mapping[str, tuple[int, ...]],
          num_warps: tuple[int, ...], num_stages: tuple[int, ...], *,
          keep: Callable[[Config], bool] | None = None, prune: Prune | None = None
          ) -> Widened:
    """A widened space: ``narrow``'s configs first, then the grid's.

    Args:
        narrow: the space before the widening.
        kind: a key of :data:`GRIDS` (for the record).
        meta: meta-parameter -> values of the grid's cross product.
        num_warps, num_stages: the grid's values.
        keep: a structural condition of the kernel (``BLOCK_K <= BLOCK_M``); configs failing it
            are not part of the grid (not recorded: they are not configs of this kernel).
        prune: a rule that returns a reason for configs to leave out (recorded, see
            :func:`pruned`).

    Returns:
        The explicit-config space (with ``narrow``'s constraints), the grid configs ``prune``
        left out with their reasons, and ``kind``.

    Raises:
        KeyError: ``kind`` is not in :data:`GRIDS`.
    """
    if kind not in GRIDS:
        raise KeyError(f"unknown grid kind {kind!r}; have {', '.join(GRIDS)}")
    out: dict[str, Config] = {c.key(): c for c in narrow.expand()}
    cut: list[Pruned] = []
    names = list(meta)
    for values in itertools.product(*(meta[n] for n in names)):
        for w, s in itertools.product(num_warps, num_stages):
            cfg = Config(meta=dict(zip(names, values)), num_warps=w, num_stages=s)
            if cfg.key() in out or (keep is not None and not keep(cfg)):
                continue
            why = prune(cfg) if prune is not None else None
            if why:
                cut.append(Pruned(cfg.key(), why))
            else:
                out[cfg.key()] = cfg
    return Widened(AutotuneSpace(configs=tuple(out.values()), constraints=narrow.constraints),
                   tuple(cut), kind)


def pow2(lo: int, hi: int) -> tuple[int, ...]:
    """Powers of two from ``lo`` to ``hi`` inclusive (both powers of two)."""
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return tuple(out)


def elementwise(narrow: AutotuneSpace) -> Widened:
    """The ``elementwise`` grid for a 1-D ``BLOCK_SIZE`` kernel (one block per program, no loop:
    ``num_stages`` 1)."""
    return widen(narrow, "elementwise", {"BLOCK_SIZE": pow2(512, 16384)}, (2, 4, 8, 16), (1,))


def rows(narrow: AutotuneSpace) -> Widened:
    """The ``row`` grid: only ``num_warps`` (the block is the row length)."""
    return widen(narrow, "row", {}, (2, 4, 8, 16, 32), (1,))


def gemm(narrow: AutotuneSpace, itemsize: int, *, warps: tuple[int, ...] = (4, 8),
         kind: str = "gemm", extra_tile_bytes: Callable[[Mapping[str, int]], int] | None = None,
         group_m: tuple[int, ...] = (8,)) -> Widened:
    """The ``gemm`` grid (``BLOCK_K`` also 256 for 1-byte operands), pruned by :func:`dot_prune`."""
    bk = (32, 64, 128, 256) if itemsize == 1 else (32, 64, 128)
    return widen(narrow, kind,
                 {"BLOCK_M": (64, 128, 256), "BLOCK_N": (64, 128, 256), "BLOCK_K": bk,
                  "GROUP_M": group_m}, warps, (2, 3, 4, 5),
                 prune=dot_prune(itemsize, extra_tile_bytes=extra_tile_bytes))


def attention(narrow: AutotuneSpace, *, keep_multiple: bool = True) -> Widened:
    """The ``attention`` grid; with ``keep_multiple`` BLOCK_M is a multiple of BLOCK_N (the
    causal split needs it). Shared memory is left to the compile (:func:`harness.compile_space`
    drops a config over the target's limit, with the measured bytes)."""
    keep = (lambda c: c.meta["BLOCK_M"] % c.meta["BLOCK_N"] == 0) if keep_multiple else None
    return widen(narrow, "attention", {"BLOCK_M": (64, 128), "BLOCK_N": (32, 64, 128)},
                 (4, 8), (2, 3, 4), keep=keep)


def tiled(narrow: AutotuneSpace, a: str, a_values: tuple[int, ...], b: str,
          b_values: tuple[int, ...]) -> Widened:
    """The ``tiled-memory`` grid: 2-D blocks ``a x b`` of 2^9 .. 2^14 elements (a structural
    choice: outside it a program holds too little or too much), ``num_warps`` {2, 4, 8, 16}."""
    return widen(narrow, "tiled-memory", {a: a_values, b: b_values}, (2, 4, 8, 16), (1,),
                 keep=lambda c: 512 <= c.meta[a] * c.meta[b] <= 16384)


def reduction(narrow: AutotuneSpace, block: str) -> Widened:
    """The ``reduction`` grid: a looped 1-D block ``block`` (stages pipeline the loads)."""
    return widen(narrow, "reduction", {block: pow2(512, 16384)}, (2, 4, 8, 16), (1, 2, 3))


def bitdelta(narrow: AutotuneSpace) -> Widened:
    """The ``bitdelta`` grid: the fp16 gemm grid with ``num_warps`` {4, 8, 16} and ``GROUP_M``
    {4, 8} (448 configs after the static pruning: on sm_90a a quarter of the GROUP_M 8 half needs
    more shared memory than a CTA has or more registers than 16 warps may use, so the study's
    216-config grid size is kept after the compile too); the packed signs add
    ``BLOCK_N * BLOCK_K / 8`` bytes per stage (one int32 word per 32 k)."""
    return gemm(narrow, 2, warps=(4, 8, 16), kind="bitdelta", group_m=(4, 8),
                extra_tile_bytes=lambda m: m["BLOCK_N"] * m["BLOCK_K"] // 8)


def mamba2_chunk_scan(narrow: AutotuneSpace) -> Widened:
    """The ``mamba2_chunk_scan`` grid. A key tile longer than the row tile is fine: the key loop
    ends below ``m0 + BLOCK_M`` in ``BLOCK_K`` steps and the 256-token chunk is a multiple of
    every ``BLOCK_K``, so it never reads past the chunk (keys after a row are masked)."""
    return widen(narrow, "mamba2_chunk_scan",
                 {"BLOCK_M": (32, 64, 128, 256), "BLOCK_P": (16, 32, 64),
                  "BLOCK_K": (16, 32, 64)}, (4, 8), (1, 2, 3))


def mamba2_chunk_state(narrow: AutotuneSpace) -> Widened:
    """The ``mamba2_chunk_state`` grid (``NS`` = 128 and the 256-token chunk divide every
    block)."""
    return widen(narrow, "mamba2_chunk_state",
                 {"BLOCK_P": (16, 32, 64), "BLOCK_NS": (32, 64, 128), "BLOCK_T": (32, 64, 128)},
                 (4, 8), (2, 3, 4))


Widening = Callable[[AutotuneSpace], Widened]


def _gemm(itemsize: int) -> Widening:
    return lambda narrow: gemm(narrow, itemsize)


def _elementwise() -> dict[str, Widening]:
    out: dict[str, Widening] = {}
    for base in ("sigmoid", "relu", "silu", "swiglu"):
        for dt in ("fp16", "fp32"):
            out[f"{base}.{dt}"] = elementwise
    return out


WIDEN: dict[str, Widening] = {
    "vector_add": elementwise,
    "softmax": rows,
    "matmul": _gemm(2),
    **_elementwise(),
    "rmsnorm": rows,
    "rope": rows,
    "gemv": lambda n: tiled(n, "BLOCK_M", pow2(1, 64), "BLOCK_K", pow2(64, 2048)),
    "reduction_sum": lambda n: reduction(n, "BLOCK"),
    "conv2d.fp16": _gemm(2),
    "conv2d.fp8": _gemm(1),
    "gemm.fp16": _gemm(2),
    "gemm.fp8": _gemm(1),
    "gemm_silu.fp16": _gemm(2),
    "gemm_silu.fp8": _gemm(1),
    "bitdelta": bitdelta,
    "bitdelta_batched": bitdelta,
    "flash_sinkhorn": lambda n: attention(n, keep_multiple=False),
    "sage_attention": attention,
    "flash_attention.causal": attention,
    "flash_attention.noncausal": attention,
    "forgetting_attention": attention,
    "lion": elementwise,
    "dion_update": lambda n: tiled(n, "BLOCK_M", pow2(8, 128), "BLOCK_N", pow2(32, 512)),
    "mamba2_chunk_state": mamba2_chunk_state,
    "mamba2_chunk_scan": mamba2_chunk_scan,
}
"""Suite name -> how its narrow space is widened (every suite entry; the fast family keeps its
one config: those kernels are fixed TMA/warp-specialised layouts, the verifier's corpus)."""

_CACHE: dict[str, Widened] = {}


def wide_space(name: str, narrow: AutotuneSpace) -> Widened | None:
    """The widened space of suite entry ``name`` from its ``narrow`` one and the configs pruned
    before compiling (None: ``name`` is not widened). Memoised per name."""
    fn = WIDEN.get(name)
    if fn is None:
        return None
    if name not in _CACHE:
        _CACHE[name] = fn(narrow)
    return _CACHE[name]


def pruned(name: str) -> tuple[Pruned, ...]:
    """The grid configs of suite entry ``name`` left out before compiling, with their reasons.

    Raises:
        SpecError: no suite kernel has that name.
    """
    from kernels.registry import get

    get(name, "wide")
    return _CACHE[name].pruned if name in _CACHE else ()
