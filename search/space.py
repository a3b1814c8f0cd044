"""Triton-level search space: configs beyond a kernel's autotune space, pruned by legality.

:func:`expand_space` proposes the one-step neighbours of every autotune config (each block-size
meta-parameter halved or doubled, ``num_warps`` and ``num_stages`` moved one step, ``GROUP_M``
varied) that are not in the autotune space already, and keeps those that are *legal before
launch*:

* the spec's own constraints hold and every expression of the spec (grid, constexprs, scalar
  values, derived constexprs at every size) evaluates for the config (the same validation
  :class:`kernels.KernelSpec` applies to its autotune space);
* block sizes stay within ``[MIN_BLOCK, MAX_BLOCK]`` and keep ``tl.arange``'s power-of-two rule;
  for kernels with tensor-core dots an edge is at most :data:`MAX_DOT_TILE` (256, wgmma's N),
  except ``BLOCK_M``, which may reach :data:`MAX_DOT_TILE_M` (512: Triton spreads the M edge over
  warpgroups, 64 rows per wgmma, so it is bounded by registers, not by an instruction shape);
* for tiled dot kernels (meta has ``BLOCK_M`` and ``BLOCK_N``) the fp32 accumulator fits the
  register file: ``BLOCK_M * BLOCK_N / threads <= MAX_ACC_REGS`` 32-bit registers per thread
  (255 is the sm_90 per-thread limit, PTX ISA 9.0 §11.4.1 ``.maxnreg``; the rest of the kernel needs
  some too), and ``threads <= 1024``.

After Triton compiles a config, :func:`legal_after_compile` checks what is then known exactly:
the dynamic shared memory against the device's opt-in limit (232,448 B on sm_90,
``triton_toolchain.md`` section 0), and that the entry signature equals the baseline's (the
candidate is launched with the baseline's ABI).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from kernels.abi import KernelABI
from kernels.spec import AutotuneSpace, Config, KernelSpec

__all__ = ["expand_space", "is_legal", "legal_after_compile", "SMEM_OPTIN_SM90", "MIN_BLOCK",
           "MAX_BLOCK", "MAX_ACC_REGS", "MAX_DOT_TILE", "MAX_DOT_TILE_M"]

SMEM_OPTIN_SM90 = 232448
"""Opt-in dynamic shared memory per block on sm_90 (H100/H200), bytes (cudaDevAttrMaxSharedMemoryPerBlockOptin,
read on the H200: ``../shared/reference/triton_toolchain.md`` section 0)."""
MIN_BLOCK = 16
"""Smallest block size proposed (a wgmma/mma tile edge is at least 16 for 16-bit inputs)."""
MAX_BLOCK = 65536
"""Largest block size proposed (1-D elementwise blocks; ``tl.arange`` allows up to 2^17). Above the
widened elementwise autotune grid's 2^14 (``kernels/suite/_spaces.py``), so the search still has
block-size arms beyond it."""
MAX_DOT_TILE = 256
"""Largest block edge proposed for kernels with tensor-core dots (wgmma's N is at most 256)."""
MAX_DOT_TILE_M = 512
"""Largest ``BLOCK_M`` proposed for kernels with tensor-core dots: each wgmma covers 64 rows
(``m64nNk16``, PTX ISA 9.0 §9.7.15.5.1) and Triton repeats it over warpgroups and instructions, so
the M edge is bounded by the accumulator registers (:data:`MAX_ACC_REGS`) and shared memory
(checked after compiling), not by the instruction. A larger M tile divides per-tile work that does
not scale with M (e.g. decoding packed weights) over more rows."""
MAX_ACC_REGS = 128
"""Largest fp32 accumulator per thread proposed for tiled dot kernels (registers)."""


def _is_block(name: str) -> bool:
    return name.upper().startswith("BLOCK")


def _neighbours(cfg: Config) -> Iterable[tuple[Config, str]]:
    meta = dict(cfg.meta)
    for name, v in meta.items():
        if _is_block(name):
            for nv in (v // 2, v * 2):
                if MIN_BLOCK <= nv <= MAX_BLOCK or (v < MIN_BLOCK and 1 <= nv <= MAX_BLOCK):
                    yield cfg.model_copy(update={"meta": {**meta, name: nv}}), f"{name}={nv}"
        elif name.upper().startswith("GROUP"):
            for nv in (4, 8, 16):
                if nv != v:
                    yield cfg.model_copy(update={"meta": {**meta, name: nv}}), f"{name}={nv}"
    for w in (cfg.num_warps // 2, cfg.num_warps * 2):
        if 2 <= w <= 16:
            yield cfg.model_copy(update={"num_warps": w}), f"num_warps={w}"
    if cfg.num_stages > 1:  # kernels with a pipelined loop: one stage more or fewer
        for s in (cfg.num_stages - 1, cfg.num_stages + 1):
            if 2 <= s <= 6:
                yield cfg.model_copy(update={"num_stages": s}), f"num_stages={s}"
    # the same tile area in another aspect (a taller M tile re-reads the B operand less often)
    bm, bn = meta.get("BLOCK_M"), meta.get("BLOCK_N")
    if bm and bn:
        for nm, nn in ((bm * 2, bn // 2), (bm // 2, bn * 2)):
            if min(nm, nn) >= MIN_BLOCK:
                yield (cfg.model_copy(update={"meta": {**meta, "BLOCK_M": nm, "BLOCK_N": nn}}),
                       f"BLOCK_M={nm},BLOCK_N={nn}")
    # two-step moves that pay off most often on Hopper: bigger tiles with more warps
    for name in [n for n in meta if _is_block(n)]:
        v = meta[name]
        if cfg.num_warps <= 8 and MIN_BLOCK <= v * 2 <= MAX_BLOCK:
            yield (cfg.model_copy(update={"meta": {**meta, name: v * 2},
                                          "num_warps": cfg.num_warps * 2}),
                   f"{name}={v * 2},num_warps={cfg.num_warps * 2}")


def is_legal(spec: KernelSpec, cfg: Config) -> tuple[bool, str]:
    """Whether ``cfg`` is a legal config of ``spec`` before compiling (see the module docstring).

    Returns:
        ``(legal, reason)``; the reason names the rule that failed.
    """
    for name, v in cfg.meta.items():
        if _is_block(name) and (v < 1 or v & (v - 1)):
            return False, f"{name}={v} is not a power of two (tl.arange)"
    threads = 32 * cfg.num_warps
    if threads > 1024:
        return False, f"{threads} threads per CTA > 1024"
    if spec.flop_dtype:
        big = [f"{k}={v}" for k, v in cfg.meta.items() if _is_block(k)
               and v > (MAX_DOT_TILE_M if k == "BLOCK_M" else MAX_DOT_TILE)]
        if big:
            return False, (f"{', '.join(big)}: a dot tile edge above {MAX_DOT_TILE} (BLOCK_M: "
                           f"{MAX_DOT_TILE_M}; wgmma N <= 256, PTX ISA 9.0 §9.7.15.5)")
    bm, bn = cfg.meta.get("BLOCK_M"), cfg.meta.get("BLOCK_N")
    if bm and bn and bm * bn / threads > MAX_ACC_REGS and spec.flop_dtype:
        return False, (f"accumulator BLOCK_M*BLOCK_N/threads = {bm * bn // threads} registers "
                       f"> {MAX_ACC_REGS}")
    try:
        one = KernelSpec.model_validate({
            **{k: getattr(spec, k) for k in type(spec).model_fields},
            "autotune": AutotuneSpace(configs=(cfg,), constraints=spec.autotune.constraints)})
    except ValueError as exc:
        return False, f"spec rejects it: {str(exc).splitlines()[-1][:200]}"
    if not one.configs():
        return False, "the spec's constraints exclude it"
    return True, ""


def expand_space(spec: KernelSpec, *, around: Config | None = None, limit: int | None = None
                 ) -> list[tuple[Config, str]]:
    """Legal configs beyond ``spec``'s autotune space, nearest first.

    Args:
        spec: the kernel.
        around: the config whose neighbours come first (the autotuned baseline); None: the
            first autotune config.
        limit: keep at most this many (None: all).

    Returns:
        ``[(config, how it differs from the autotune config it came from), ...]``; no config of
        the autotune space, no duplicates. Order: neighbours of the first autotune config first
        (or of ``around``), then round-robin over the others.
    """
    base = spec.configs()
    seen = {c.key() for c in base}
    if around is not None:
        base = [around, *[c for c in base if c.key() != around.key()]]
    per_base = [list(_neighbours(c)) for c in base]
    out: list[tuple[Config, str]] = []
    groups = [[x] for x in per_base[0]] + list(itertools.zip_longest(*per_base[1:]))
    for group in groups:
        for item in group:
            if item is None:
                continue
            cfg, why = item
            if cfg.key() in seen:
                continue
            seen.add(cfg.key())
            ok, _ = is_legal(spec, cfg)
            if ok:
                out.append((cfg, why))
                if limit is not None and len(out) >= limit:
                    return out
    return out


def legal_after_compile(abi: KernelABI, baseline_abi: KernelABI, *,
                        smem_limit: int = SMEM_OPTIN_SM90) -> tuple[bool, str]:
    """Legality once Triton has compiled a config: shared memory and the launch contract.

    Args:
        abi: the compiled config's ABI (``dynamic_smem`` from Triton's metadata).
        baseline_abi: the contract the candidate will be launched with.
        smem_limit: the device's opt-in shared memory per block, bytes.

    Returns:
        ``(legal, reason)``.
    """
    if abi.dynamic_smem > smem_limit:
        return False, f"shared memory {abi.dynamic_smem} B > {smem_limit} B opt-in limit"
    if abi.entry != baseline_abi.entry:
        return False, f"entry {abi.entry!r} differs from the baseline's {baseline_abi.entry!r}"
    mine = [(p.ptx_type, p.size, p.source, p.spec_param) for p in abi.params]
    theirs = [(p.ptx_type, p.size, p.source, p.spec_param) for p in baseline_abi.params]
    if mine != theirs:
        return False, "entry parameters differ from the baseline's (the launch contract)"
    return True, ""
