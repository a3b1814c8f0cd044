"""Reference compile: a KernelSpec through Triton's own pipeline, without a GPU.

``triton.compile(ASTSource(...), target=GPUTarget("cuda", cap, 32), options=...)`` runs on a
machine with no GPU and no libcuda (``../shared/reference/triton_toolchain.md`` section 2). For each
config we keep TTIR, TTGIR, LLIR, PTX, the cubin, the launch metadata and the exact kernel ABI
(the PTX ``.param`` list, with the two scratch pointers Triton appends).

Results are cached on disk under ``<cache_dir>/reference/<key>/``, keyed by the kernel source, the
spec, the config, the arch, the Triton version and the compile options; entries are written to a
temporary folder and moved into place with ``os.replace``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from harness import _triton_compat as compat
from harness.errors import ReferenceCompileError, UsageError
from kernels.abi import ABIParam, KernelABI
from kernels.spec import Config, KernelSpec, SpecError

__all__ = ["ReferenceArtifacts", "compile_reference", "compile_space", "extract_entry_params"]

_CACHE_FORMAT = 1


class ReferenceArtifacts(BaseModel):
    """Everything Triton produced for one (spec, config, arch).

    Attributes:
        spec_name, spec_id: the spec's name and content hash.
        arch: ``sm_90a`` etc.
        config: the autotune config.
        triton_version: Triton that compiled it.
        ttir, ttgir, llir, ptx: the IR texts.
        cubin: the assembled binary (Triton's own ptxas and flags).
        metadata: Triton's metadata as JSON-able values (``shared`` bytes, ``num_warps``, ...).
        abi: the entry signature and launch contract.
        compile_s: wall time of the compile in seconds (0 on a cache hit is not reported: the
            original compile time is kept).
        cache_hit: loaded from the disk cache.
    """

    model_config = ConfigDict(frozen=True)

    spec_name: str
    spec_id: str
    arch: str
    config: Config
    triton_version: str
    ttir: str
    ttgir: str
    llir: str
    ptx: str
    cubin: bytes
    metadata: dict[str, Any]
    abi: KernelABI
    compile_s: float
    cache_hit: bool = False


_ENTRY_RE = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\((.*?)\)", re.S)
_PARAM_RE = re.compile(
    r"\.param\s+(?P<attrs>(?:\.[\w:]+\s+(?:\d+\s+)?)*?)\.(?P<type>[busf]\d+|pred)\s+"
    r"(?:(?P<ptr>\.ptr)\s+(?P<ptrattrs>(?:\.[\w:]+\s+(?:\d+\s+)?)*))?"
    r"(?P<name>[A-Za-z_$][\w$]*)\s*(?:\[(?P<count>\d+)\])?")
_ALIGN_RE = re.compile(r"\.align\s+(\d+)")
_REQNTID_RE = re.compile(r"\.reqntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def extract_entry_params(ptx: str) -> tuple[str, list[tuple[str, str, int, int | None, bool]]]:
    """Read the first ``.entry`` of Triton-generated PTX.

    Returns:
        ``(entry_name, [(param_name, ptx_type, size_bytes, align_or_None, is_ptr), ...])``.

    Raises:
        ValueError: no ``.entry`` or an unreadable parameter (this is for *Triton's* PTX; candidate
            PTX goes through the verifier's full parser instead).
    """
    m = _ENTRY_RE.search(ptx)
    if not m:
        raise ValueError("no .entry in the PTX")
    name, body = m.group(1), m.group(2)
    params = []
    for chunk in (c.strip() for c in body.split(",")):
        if not chunk:
            continue
        pm = _PARAM_RE.search(chunk)
        if not pm:
            raise ValueError(f"cannot read parameter {chunk!r}")
        ptype = pm.group("type")
        width = 1 if ptype == "pred" else int(ptype[1:]) // 8
        count = int(pm.group("count") or 1)
        am = _ALIGN_RE.search(chunk)
        params.append((pm.group("name"), ptype, width * count, int(am.group(1)) if am else None,
                       bool(pm.group("ptr"))))
    return name, params


def _build_abi(spec: KernelSpec, arch: str, ptx: str, md: dict[str, Any]) -> KernelABI:
    entry, raw = extract_entry_params(ptx)
    sources: list[tuple[str, str | None]] = []
    for p in spec.params:
        if p.kind == "pointer":
            sources.append(("pointer", p.name))
        elif p.kind == "scalar":
            sources.append(("scalar", p.name))
        elif p.kind == "tensordesc":
            rank = len(p.shape or ())
            sources.extend([("tensordesc", p.name)] * (1 + 2 * rank))
    sources += [("global_scratch", None), ("profile_scratch", None)]
    if len(sources) != len(raw):
        raise ReferenceCompileError(
            f"{spec.name}: Triton's entry {entry!r} has {len(raw)} parameters but the spec implies "
            f"{len(sources)} (non-constexpr params + 2 scratch pointers); check the spec's kinds")
    params = tuple(
        ABIParam(name=n, ptx_type=t, size=size, align=align, is_pointer=isptr or src in (
            "pointer", "global_scratch", "profile_scratch"), source=src, spec_param=sp)
        for (n, t, size, align, isptr), (src, sp) in zip(raw, sources))
    rq = _REQNTID_RE.search(ptx)
    threads = int(rq.group(1)) if rq else 32 * int(md["num_warps"])
    return KernelABI(
        entry=entry, params=params, threads=threads, num_ctas=int(md.get("num_ctas", 1)),
        dynamic_smem=int(md.get("shared", 0)),
        global_scratch_size=int(md.get("global_scratch_size", 0) or 0),
        global_scratch_align=int(md.get("global_scratch_align", 1) or 1),
        profile_scratch_size=int(md.get("profile_scratch_size", 0) or 0),
        tmem_size=int(md.get("tmem_size", 0) or 0), arch=arch)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if hasattr(v, "_asdict"):
        return {k: _jsonable(x) for k, x in v._asdict().items()}
    if isinstance(v, list | tuple | set | frozenset):
        return [_jsonable(x) for x in v]
    if isinstance(v, str | int | float | bool) or v is None:
        return v
    return str(v)


def _cache_key(spec: KernelSpec, cfg: Config, arch: str, options: dict) -> str:
    h = hashlib.sha256()
    for part in (f"fmt{_CACHE_FORMAT}", spec.identity(), cfg.key(), arch, compat.triton_version(),
                 json.dumps(options, sort_keys=True), compat.toolchain(arch).ptxas_version):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _load_cached(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / "artifacts.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if data.get("format") == _CACHE_FORMAT else None


def compile_reference(spec: KernelSpec, arch: str, config: Config, *,
                      cache_dir: Path | None = None, max_ptx_version: int = 90) -> ReferenceArtifacts:
    """Compile ``spec`` with Triton for ``arch`` and ``config`` (no GPU needed).

    Args:
        spec: the kernel spec.
        arch: ``sm_80`` | ``sm_89`` | ``sm_90a`` | ``sm_100a``.
        config: one config of ``spec.configs()``.
        cache_dir: disk cache root (None: no caching).
        max_ptx_version: highest PTX ISA to stamp (90 = 9.0, the CUDA 13.0 driver's limit).

    Raises:
        UsageError: unknown arch, or ``max_ptx_version`` below what the arch needs.
        kernels.SpecError: the kernel source cannot be imported or does not match the spec.
        ReferenceCompileError: Triton failed (its message is included).
    """
    try:
        cap = compat.arch_capability(arch)
        compat.check_ptx_version(arch, max_ptx_version)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    options = compat.compile_options(arch, config.num_warps, config.num_stages, config.num_ctas,
                                     max_ptx_version)
    if config.maxnreg is not None:
        options["maxnreg"] = config.maxnreg
    folder = None
    if cache_dir is not None:
        folder = Path(cache_dir) / "reference" / _cache_key(spec, config, arch, options)
        data = _load_cached(folder)
        if data is not None:
            return ReferenceArtifacts.model_validate(
                {**data["artifacts"], "cubin": (folder / "kernel.cubin").read_bytes(),
                 "cache_hit": True})

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = spec.source.load(cache_dir)
    spec.check_function(fn)
    constexprs = spec.constexprs(config, "bench")
    src = ASTSource(fn=fn, signature=spec.signature(config, "bench"), constexprs=constexprs, attrs=spec.attrs())
    t0 = time.perf_counter()
    try:
        ck = triton.compile(src, target=GPUTarget("cuda", cap, 32), options=options)
    except Exception as exc:  # Triton raises many types (CompilationError, RuntimeError, ...)
        try:
            text = spec.source.source_text()
        except SpecError:
            text = None
        hint = compat.explain_compile_error(exc, text, spec.source.origin())
        # Triton wraps an error inside a called jit function in one CompilationError per call
        # level, and str() of the outer one shows only the call site: keep the whole chain
        msg = "\nwhich failed inside: ".join(compat.error_chain(exc))
        if len(msg) > 6000:
            msg = msg[:2000] + "\n...\n" + msg[-3000:]
        raise ReferenceCompileError(
            f"Triton failed to compile {spec.name} [{config.key()}] for {arch}: "
            f"{msg}" + (f"\n{hint}" if hint else "")) from None
    elapsed = time.perf_counter() - t0
    md = _jsonable(ck.metadata._asdict() if hasattr(ck.metadata, "_asdict") else dict(ck.metadata))
    asm = ck.asm
    art = ReferenceArtifacts(
        spec_name=spec.name, spec_id=spec.identity(), arch=arch, config=config,
        triton_version=compat.triton_version(), ttir=asm["ttir"], ttgir=asm["ttgir"],
        llir=asm["llir"], ptx=asm["ptx"], cubin=bytes(asm["cubin"]), metadata=md,
        abi=_build_abi(spec, arch, asm["ptx"], md), compile_s=elapsed)
    if folder is not None:
        _store(folder, art)
    return art


def _store(folder: Path, art: ReferenceArtifacts) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        (tmp / "kernel.cubin").write_bytes(art.cubin)
        for ext in ("ttir", "ttgir", "llir", "ptx"):
            (tmp / f"kernel.{ext}").write_text(getattr(art, ext))
        payload = art.model_dump(mode="json", exclude={"cubin", "cache_hit"})
        (tmp / "artifacts.json").write_text(json.dumps({"format": _CACHE_FORMAT, "artifacts": payload}))
        try:
            os.replace(tmp, folder)
        except OSError:  # another process won the race: its entry is equivalent
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


PARALLEL_MIN_CONFIGS = 16
"""Below this many uncompiled configs, :func:`compile_space` compiles in-process unless ``workers``
is given: each worker process pays its start-up and Triton's first-compile set-up (about 0.8 s,
``../shared/reference/triton_toolchain.md`` section 4) again. Measured on the shared 2-core
development host (load average ~13, so no idle core): 9 reduction_sum configs 5.9 s serial vs
11.3 s with 2 workers; 32 matmul configs 63.1 s vs 65.3 s. A 192-config space, the case that
motivated this, is compiled in parallel."""


def _cores() -> int:
    """CPUs this process may run on (``os.sched_getaffinity`` where available, else
    ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1


def _compile_one(spec: KernelSpec, arch: str, cfg: Config, cache_dir: Path | None,
                 max_ptx_version: int) -> ReferenceArtifacts | ReferenceCompileError:
    """One config, for a pool worker: a compile failure is returned (it pickles), not raised."""
    try:
        return compile_reference(spec, arch, cfg, cache_dir=cache_dir,
                                 max_ptx_version=max_ptx_version)
    except ReferenceCompileError as exc:
        return exc


def compile_space(spec: KernelSpec, arch: str, *, cache_dir: Path | None = None,
                  configs: list[Config] | None = None, max_ptx_version: int = 90,
                  workers: int | None = None,
                  ) -> tuple[list[ReferenceArtifacts], list[ReferenceCompileError]]:
    """Compile every config of the autotune space (or ``configs``), in parallel.

    Cached configs are read here; the others are compiled by a pool of ``workers`` processes
    (default: the CPUs this process may use, so a 2-core host runs two compiles at once, when at
    least :data:`PARALLEL_MIN_CONFIGS` configs need compiling; 1 compiles in this process).
    Workers are forked from a ``forkserver`` that has imported this module, never from this
    process (which may hold Triton/LLVM threads). A config whose shared memory exceeds the target's per-block limit
    (:data:`kernels.abi.SMEM_PER_BLOCK_OPTIN`) cannot launch there and is reported as a failure.

    Returns:
        ``(compiled, failures)`` in the order of the configs: a config Triton cannot compile is
        reported, not raised, as the autotuner scores it +inf. Raises :class:`UsageError` for an
        unknown arch and :class:`kernels.SpecError` when the source cannot be loaded.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    from kernels.abi import SMEM_PER_BLOCK_OPTIN

    cfgs = list(configs if configs is not None else spec.configs())
    results: list[ReferenceArtifacts | ReferenceCompileError | None] = [None] * len(cfgs)
    todo = []
    for i, cfg in enumerate(cfgs):
        try:
            compat.arch_capability(arch)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if cache_dir is not None:
            options = compat.compile_options(arch, cfg.num_warps, cfg.num_stages, cfg.num_ctas,
                                             max_ptx_version)
            if cfg.maxnreg is not None:
                options["maxnreg"] = cfg.maxnreg
            folder = Path(cache_dir) / "reference" / _cache_key(spec, cfg, arch, options)
            if _load_cached(folder) is not None:
                results[i] = _compile_one(spec, arch, cfg, cache_dir, max_ptx_version)
                continue
        todo.append(i)
    n = max(1, min(workers or _cores(), len(todo)))
    if workers is None and len(todo) < PARALLEL_MIN_CONFIGS:
        n = 1  # a small space: process start-up and Triton's per-process set-up outweigh it
    if n == 1:
        for i in todo:
            results[i] = _compile_one(spec, arch, cfgs[i], cache_dir, max_ptx_version)
    else:
        spec.source.load(cache_dir)  # a source that cannot load fails once, here, as SpecError
        # forkserver, not fork: the parent may hold Triton/LLVM state and threads; the server
        # imports the compile path once and forks each worker from that clean process
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["harness.reference"])
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            futs = {i: pool.submit(_compile_one, spec, arch, cfgs[i], cache_dir, max_ptx_version)
                    for i in todo}
            try:
                for i, fut in futs.items():
                    results[i] = fut.result()
            except BrokenProcessPool:
                raise ReferenceCompileError(
                    f"{spec.name}: a reference-compile worker process died (killed, out of "
                    "memory, or the calling script lacks an `if __name__ == \"__main__\":` guard "
                    "and re-ran itself in the worker, as Python's multiprocessing requires); "
                    "compile serially with workers=1") from None
    ok, bad = [], []
    limit = SMEM_PER_BLOCK_OPTIN.get(arch)
    for cfg, res in zip(cfgs, results):
        if isinstance(res, ReferenceCompileError):
            bad.append(res)
        elif res is not None and limit is not None and res.abi.dynamic_smem > limit:
            bad.append(ReferenceCompileError(
                f"{spec.name} [{cfg.key()}] for {arch}: Triton's kernel needs "
                f"{res.abi.dynamic_smem} B of shared memory per CTA, over the {limit} B "
                f"({limit // 1024} KiB) a CTA may use on {arch} (CUDA C++ Programming Guide, "
                "technical specifications per compute capability); it cannot launch there"))
        elif res is not None:
            ok.append(res)
    return ok, bad


def cubin_b64(art: ReferenceArtifacts) -> str:
    """The cubin as base64 text (for JSON transport to the worker)."""
    return base64.b64encode(art.cubin).decode()
