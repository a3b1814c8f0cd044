"""Results back into user programs: ailower's PTX in the layout Triton's kernel override reads.

Public API: :func:`triton_override`, :func:`read_manifest`, :class:`OverrideExport`,
:class:`OverrideEntry`, :class:`ExportError`.

How a Triton program picks it up, unmodified::

    TRITON_KERNEL_OVERRIDE=1 TRITON_OVERRIDE_DIR=DIR TRITON_CACHE_DIR=DIR/cache python prog.py

Triton then compiles the kernel as usual (TTIR, TTGIR, LLIR: the launch metadata such as shared
memory and ``num_warps`` come from there), but replaces its ``ptx`` stage output with
``DIR/<base32 hash>/<kernel>.ptx`` and assembles that with its own ptxas
(``triton/compiler/compiler.py``: "Overriding kernel with file ..."). The hash folder is
specific to the jit function (source and first line), the argument types, the constexpr values
and the launch's specialisation (16-byte-aligned pointers, integers divisible by 16); see
:mod:`export._jit`. The override is therefore used exactly for launches the PTX was judged for,
and every other launch compiles normally.

Caveats (written into ``DIR/ailower-export.json`` and printed by ``ailower export``):

* Triton's compile cache does not key on the override variables: a kernel compiled earlier
  without them is reused from ``TRITON_CACHE_DIR`` and the override is silently skipped, and a
  compile made with them is later reused without them. Use a separate ``TRITON_CACHE_DIR`` (or
  ``TRITON_ALWAYS_COMPILE=1``) for overridden runs.
* The hash does not cover ``num_warps``/``num_stages``: every launch with the same
  specialisation gets this PTX, so launch with the exported ``num_warps`` (the PTX's
  ``.reqntid``); an autotuner trying other warps would fail to launch those configs.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

__all__ = ["ExportError", "OverrideEntry", "OverrideExport", "triton_override", "read_manifest",
           "MAX_VARIANTS", "MANIFEST"]

MAX_VARIANTS = 256
"""At most this many specialisation variants (2**8: eight integer parameters whose divisibility
by 16 the spec leaves open) are written; beyond it, declare ``divisibility`` in the spec."""

MANIFEST = "ailower-export.json"
"""The manifest written at the top of the override folder (Triton ignores it)."""


class ExportError(Exception):
    """The run cannot be exported faithfully (message names the reason and what to do)."""


class OverrideEntry(BaseModel):
    """One override file.

    Attributes:
        folder: the hash folder name (base32 of ``ASTSource.hash()``).
        file: path of the PTX file, relative to the override folder.
        divisible_by_16: integer parameter -> whether this variant is for values divisible by 16.
    """

    folder: str
    file: str
    divisible_by_16: dict[str, bool]


class OverrideExport(BaseModel):
    """What :func:`triton_override` wrote.

    Attributes:
        directory: the override folder (``TRITON_OVERRIDE_DIR``).
        kernel, entry, arch, triton_version: what the PTX is for.
        constexprs: the constexpr values a launch must pass for the override to apply.
        num_warps: the warps a launch must use (``.reqntid`` / 32).
        size: the spec size the derived constexprs were evaluated at.
        entries: one per specialisation variant.
        marker: the comment line prepended to every exported PTX file.
        env: the environment variables to set.
    """

    directory: str
    kernel: str
    entry: str
    arch: str
    triton_version: str
    run_id: int | None
    candidate_digest: str | None
    constexprs: dict[str, Any]
    num_warps: int
    size: str
    entries: list[OverrideEntry]
    marker: str
    env: dict[str, str]
    notes: list[str]


def _scalar_values(dtype: str, divisible: bool, name: str) -> Any:
    """A launch value the JIT types as ``dtype`` and specialises as (not) divisible by 16."""
    if dtype == "i32":
        return 32 if divisible else 17
    if dtype == "i64":
        return (1 << 32) + (0 if divisible else 17)
    if dtype == "u64":
        return (1 << 63) + (0 if divisible else 17)
    raise ExportError(f"parameter {name!r} is {dtype}: Triton's JIT types a Python int as i32, "
                      "i64 or u64 only, so a launch can never match this signature")


def triton_override(spec: Any, ptx: str, directory: Path, *, arch: str, meta: dict[str, int],
                    threads: int, dynamic_smem: int = 0, global_scratch_size: int = 0,
                    size: str = "bench", run_id: int | None = None,
                    candidate_digest: str | None = None, cache_dir: Path | None = None,
                    max_ptx_version: int = 90) -> OverrideExport:
    """Write ``ptx`` where Triton's kernel override finds it for launches of ``spec``'s kernel.

    Every specialisation the PTX is valid for gets its own hash folder: pointers 16-byte aligned
    (the spec's assumption), and each integer parameter without a declared ``divisibility`` both
    divisible and not divisible by 16. The folder is replaced as a whole (written beside it, then
    renamed); a previous export is kept as ``DIRECTORY.prev``.

    Args:
        spec: :class:`kernels.KernelSpec` of the kernel.
        ptx: the candidate PTX (its entry must be the kernel's).
        directory: the override folder to write.
        arch: ``sm_90a`` etc.; meta: the candidate's meta-parameters; threads: its threads per CTA;
        dynamic_smem: its dynamic shared memory, bytes; global_scratch_size: its global scratch
        per CTA, bytes.
        size: spec size (``bench`` or ``verify``) at which derived constexprs are evaluated.
        run_id, candidate_digest: recorded in the marker and the manifest.
        cache_dir, max_ptx_version: for the reference compile of the matching config.

    Returns:
        :class:`OverrideExport`.

    Raises:
        ExportError: the PTX does not assemble with the installed Triton's ptxas (e.g. a run made
            with another Triton version), the kernel has tensor-descriptor or non-JIT-typable
            parameters, the PTX needs
            more shared memory or scratch than Triton's launch would give it, ``threads`` is not a
            whole number of warps, or too many variants.
        kernels.SpecError / harness errors: the spec cannot be loaded or compiled.
    """
    import re

    from harness import assemble, compile_reference, toolchain, triton_version
    from kernels.spec import Config

    from export._jit import FakeTensor, jit_source, override_folder_name

    if threads % 32:
        raise ExportError(f"the candidate runs {threads} threads per CTA: Triton launches whole "
                          "warps (32 * num_warps)")
    num_warps = threads // 32
    configs = spec.configs()
    cfg = next((c for c in configs if c.meta == meta and c.num_warps == num_warps),
               next((c for c in configs if c.meta == meta), None))
    if cfg is None:
        cfg = Config(meta=meta, num_warps=num_warps)
    ref = compile_reference(spec, arch, cfg.model_copy(update={"num_warps": num_warps}),
                            cache_dir=cache_dir, max_ptx_version=max_ptx_version)
    if not re.search(rf"\.entry\s+{re.escape(ref.abi.entry)}\s*\(", ptx):
        raise ExportError(f"the PTX has no entry {ref.abi.entry!r}: Triton keeps the kernel's name")
    if dynamic_smem > ref.abi.dynamic_smem:
        raise ExportError(f"the candidate needs {dynamic_smem} B of dynamic shared memory but "
                          f"Triton launches {spec.name} [{cfg.key()}] with {ref.abi.dynamic_smem} B "
                          "(the launch metadata comes from Triton's own TTGIR)")
    if global_scratch_size != ref.abi.global_scratch_size:
        raise ExportError(f"the candidate expects {global_scratch_size} B of global scratch per "
                          f"CTA, Triton allocates {ref.abi.global_scratch_size} B")
    tool = toolchain(arch)
    asm = assemble(ptx, arch, ptxas=tool.ptxas_path)
    if not asm.ok:  # Triton would fail at its cubin stage ("Internal Triton PTX codegen error")
        first = next((d.message for d in asm.diagnostics if d.severity in ("error", "fatal")), "")
        raise ExportError(f"Triton {triton_version()}'s ptxas {tool.ptxas_version} rejects "
                          f"the PTX ({first or 'see ailower verify --assemble'}); was the run made "
                          "with another Triton version?")
    fn = spec.source.load(cache_dir)
    constexprs = spec.constexprs(cfg, size)
    open_ints = [p for p in spec.params if p.kind == "scalar" and p.dtype in ("i32", "i64", "u64")
                 and not p.divisibility]
    if 2 ** len(open_ints) > MAX_VARIANTS:
        raise ExportError(f"{len(open_ints)} integer parameters leave divisibility by 16 open "
                          f"(more than {MAX_VARIANTS} variants): declare 'divisibility' in the spec")
    for p in spec.params:
        if p.kind == "tensordesc":
            raise ExportError(f"parameter {p.name!r} is a tensor descriptor: export of TMA "
                              "kernels is not supported yet")
    cap = int(re.sub(r"[^0-9]", "", arch))  # sm_90a -> 90, sm_100a -> 100 (validated above)
    want_sig = {p.name: p.triton_type() for p in spec.params}
    marker = (f"// ailower export: kernel {spec.name}, run {run_id if run_id is not None else '-'}"
              f", candidate {candidate_digest or '-'}, {arch}, Triton {triton_version()}")
    text = marker + "\n" + ptx if not ptx.startswith(marker) else ptx
    entries: dict[str, OverrideEntry] = {}
    for combo in itertools.product((True, False), repeat=len(open_ints)):
        div = {p.name: d for p, d in zip(open_ints, combo)}
        args: list[Any] = []
        for i, p in enumerate(spec.params):
            if p.kind == "pointer":
                args.append(FakeTensor(0x7F0000000000 + (i << 20), str(p.dtype)))
            elif p.kind == "scalar":
                dt = str(p.dtype)
                if dt in ("fp32",):
                    args.append(1.5)
                elif dt in ("i32", "i64", "u64"):
                    args.append(_scalar_values(dt, div.get(p.name, True), p.name))
                else:
                    raise ExportError(f"parameter {p.name!r} is {dt}: Triton's JIT types Python "
                                      "scalars as i32/i64/u64/fp32/u1 only; a launch cannot match")
            else:
                args.append(constexprs[p.name])
        src = jit_source(fn, args, {"num_warps": num_warps}, cap)
        got = {k: v for k, v in src.signature.items()}
        if got != want_sig:
            diff = [f"{k}: JIT {got.get(k)} vs spec {want_sig.get(k)}" for k in want_sig
                    if got.get(k) != want_sig.get(k)]
            raise ExportError("Triton's JIT would type this launch differently from the compiled "
                              "reference (" + "; ".join(diff) + ")")
        folder = override_folder_name(src)
        entries.setdefault(folder, OverrideEntry(folder=folder, file=f"{folder}/{src.name}.ptx",
                                                 divisible_by_16=div))
    directory = Path(directory)
    env = {"TRITON_KERNEL_OVERRIDE": "1", "TRITON_OVERRIDE_DIR": str(directory.absolute()),
           "TRITON_CACHE_DIR": str(directory.absolute() / "cache")}
    notes = [
        "Triton's compile cache ignores the override variables: use the TRITON_CACHE_DIR above "
        "(or TRITON_ALWAYS_COMPILE=1), or an earlier compile is reused and the override skipped",
        f"launch with num_warps={num_warps} (the PTX's block size) and constexprs "
        + ", ".join(f"{k}={v}" for k, v in constexprs.items()),
        "pointers must be 16-byte aligned; other launches compile normally",
        f"use this folder only on {arch} GPUs: the hash does not cover the target, so Triton "
        "would take this PTX on any GPU (and fail to assemble it for another arch)"]
    result = OverrideExport(
        directory=str(directory), kernel=spec.name, entry=ref.abi.entry, arch=arch,
        triton_version=triton_version(), run_id=run_id, candidate_digest=candidate_digest,
        constexprs=constexprs, num_warps=num_warps, size=size, entries=list(entries.values()),
        marker=marker, env=env, notes=notes)
    _write(directory, text, result)
    return result


def _write(directory: Path, text: str, result: OverrideExport) -> None:
    """Write the folder beside ``directory`` and swap it in; an existing one becomes ``.prev``."""
    if directory.is_symlink():  # write where the link points; never replace the link's target
        target = Path(os.path.realpath(directory))
        if not target.exists():
            raise ExportError(f"{directory}: a symbolic link to {target}, which does not exist")
        directory = target
    parent = directory.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.staging-", dir=parent))
    except OSError as exc:
        raise ExportError(f"{directory}: cannot create the folder: {exc.strerror or exc}") from None
    try:
        for e in result.entries:
            (tmp / e.folder).mkdir()
            (tmp / e.file).write_text(text)
        (tmp / MANIFEST).write_text(result.model_dump_json(indent=2))
        if directory.exists():
            if not directory.is_dir():
                raise ExportError(f"{directory}: exists and is not a folder")
            prev = directory.with_name(directory.name + ".prev")
            if prev.is_symlink() or prev.is_file():
                prev.unlink()  # never follow a link into a deletion
            elif prev.exists():
                shutil.rmtree(prev)
            os.replace(directory, prev)
        os.replace(tmp, directory)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ExportError(f"{directory}: cannot write the export ({exc.strerror or exc}: "
                          f"{exc.filename})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of an export folder (for tests and scripts)."""
    return json.loads((Path(directory) / MANIFEST).read_text())

