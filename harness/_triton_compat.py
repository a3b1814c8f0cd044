"""Every difference between the Triton versions we support, in one place.

Supported: Triton 3.6 (the H200 device image) through the newest release on PyPI (3.9 at the time
of writing). Differences handled here (``../shared/reference/triton_toolchain.md`` sections 1, 5, 6):

* **Bundled ptxas.** 3.6 assembles arch < 100 with ``ptxas`` (CUDA 12.8) and arch >= 100 with
  ``ptxas-blackwell`` (12.9); 3.7+ uses ``ptxas-blackwell`` (CUDA 13.x) for every arch >= 90. We ask
  Triton's own ``get_ptxas(arch)`` so we always match the version in use.
* **Default PTX ``.version``.** Triton stamps the highest version its bundled ptxas accepts: 8.7/8.8
  in 3.6, 9.4 in 3.9. CUDA 13.0 drivers and ptxas accept at most 9.0, so we pass
  ``ptx_version=min(default, max_ptx_version)``; LLVM caps PTX *features* at 8.6 in both, so only
  the ``.version`` line changes.
* **ptxas flags.** 3.9 adds ``--regAllocOptLevel=2`` (a ptxas 13.x workaround); 3.6 does not (read
  from the installed ``make_cubin`` source, so no version table can drift). We assemble candidates with exactly the flags Triton uses, so Triton's own PTX assembles to the same
  SASS as the reference cubin.
* **Removed language constructs.** 3.9 removed block pointers (``tl.make_block_ptr``,
  ``tl.advance``: "Block pointers have been removed in favor of the tensor descriptor API";
  3.6 has them). :func:`explain_compile_error` turns such a failure into a message that names the
  construct, the file line using it, the installed version, the versions ailower supports and how
  to pin one (:data:`REMOVED_CONSTRUCTS`).
* **Host tensor descriptors.** Both lower a ``tensordesc`` parameter to TMA with the same
  ``metadata.tensordesc_meta`` (3.9 adds an ``is_im2col`` key) and the same entry parameters: the
  128-byte CUtensorMap (``.param .align 64 .b8 [128]``), ``rank`` x ``.u32`` shape, ``rank`` x
  ``.u64`` strides (observed for every fast entry, Triton 3.6.0 on the H200 and 3.9.0 here). Their
  launchers differ in two details (:func:`tensordesc_launch`): 3.9 clears bit 21 of the
  descriptor's second 64-bit word for a tensor under 128 KiB on drivers <= 13.1 (a CUTLASS driver
  workaround, ``fillTMADescriptorTiled`` in ``driver.c``), 3.6 does not; for an fp4-padded
  descriptor 3.6 passes the doubled innermost extent in the shape tail, 3.9 the original.
* **FP fusion default.** 3.9 warns unless ``TRITON_DEFAULT_FP_FUSION`` is set; we pass
  ``enable_fp_fusion=True`` explicitly (3.6's default), which silences it and keeps the cache key
  stable.
"""

from __future__ import annotations

import functools
import inspect
import re
import subprocess
from dataclasses import dataclass

__all__ = [
    "TritonToolchain",
    "toolchain",
    "triton_version",
    "arch_capability",
    "compile_options",
    "SUPPORTED_ARCHS",
    "MIN_PTX_VERSION",
    "check_ptx_version",
    "SUPPORTED_TRITON",
    "REMOVED_CONSTRUCTS",
    "explain_compile_error",
    "error_chain",
    "TMA_DTYPE_DEVICE_TO_HOST",
    "TensorDescLaunch",
    "tensordesc_launch",
]

SUPPORTED_TRITON = ("3.6", "3.9")
"""The oldest and newest Triton releases ailower is tested with: 3.6 is the GPU device image's,
3.9 the newest on PyPI when this was written (every version between works through this module)."""

REMOVED_CONSTRUCTS: tuple[tuple[str, str, str, str], ...] = (
    (r"Block pointers have been removed", "tl.make_block_ptr / tl.advance (block pointers)",
     r"\b(make_block_ptr|advance)\s*\(", "3.6"),
)
"""Constructs a supported Triton release refuses: (regex on Triton's error, the construct, regex
locating it in the kernel's file, a supported release that still compiles it). Source: Triton
3.9 ``triton/language/core.py`` (``make_block_ptr`` and ``advance`` raise ``NotImplementedError``
"Block pointers have been removed in favor of the tensor descriptor API"); Triton 3.6 compiles
them (the device image)."""

SUPPORTED_ARCHS = ("sm_80", "sm_89", "sm_90a", "sm_100a")
"""Targets the reference compile accepts (``a`` is added by Triton for capability >= 90)."""

_DEFAULT_MAX_PTX = 90  # CUDA 13.0 driver/ptxas: PTX ISA 9.0

MIN_PTX_VERSION = {"sm_80": 70, "sm_89": 78, "sm_90a": 80, "sm_100a": 86}
"""The first PTX ISA version that knows each target (PTX ISA 9.1, "Release notes" and "PTX ISA
version" of each target: sm_80 in 7.0, sm_89 in 7.8, sm_90a in 8.0, sm_100a in 8.6)."""


def check_ptx_version(arch: str, max_ptx_version: int) -> None:
    """Raise ``ValueError`` when ``max_ptx_version`` is too old for ``arch`` (LLVM would abort)."""
    need = MIN_PTX_VERSION[arch]
    if max_ptx_version < need:
        raise ValueError(f"max PTX version {max_ptx_version / 10:.1f} (AILOWER_MAX_PTX_VERSION="
                         f"{max_ptx_version}) is older than PTX {need / 10:.1f}, the first that "
                         f"supports {arch}")


def triton_version() -> str:
    """The installed Triton version string (``3.6.0``)."""
    import triton

    return triton.__version__


@functools.lru_cache(maxsize=1)
def _make_cubin_source() -> str:
    """Source of Triton's ``CUDABackend.make_cubin``: its ptxas command line is read from it."""
    from triton.backends.nvidia.compiler import CUDABackend

    try:
        return inspect.getsource(CUDABackend.make_cubin)
    except (OSError, TypeError):
        return ""


def arch_capability(arch: str) -> int:
    """``sm_90a`` -> 90. Raises ``ValueError`` for an arch outside :data:`SUPPORTED_ARCHS`."""
    if arch not in SUPPORTED_ARCHS:
        raise ValueError(f"unsupported arch {arch!r}; choose one of {', '.join(SUPPORTED_ARCHS)}")
    return int(arch[3:].rstrip("a"))


@dataclass(frozen=True)
class TritonToolchain:
    """Triton's bundled ptxas for one arch and how Triton drives it.

    Attributes:
        triton_version: e.g. ``3.9.0``.
        ptxas_path: absolute path of the ptxas Triton uses for this arch.
        ptxas_version: its CUDA version (``13.4``).
        default_ptx_version: the PTX ISA Triton would stamp (e.g. 94 for 9.4).
        ptxas_flags: flags Triton passes besides ``--gpu-name`` and the files.
    """

    triton_version: str
    ptxas_path: str
    ptxas_version: str
    default_ptx_version: int
    ptxas_flags: tuple[str, ...]


@functools.lru_cache(maxsize=None)
def toolchain(arch: str) -> TritonToolchain:
    """The toolchain Triton uses for ``arch`` (cached per process)."""
    from triton.backends.nvidia import compiler as nv

    cap = arch_capability(arch)
    tool = nv.get_ptxas(cap)
    version = tool.version if isinstance(tool.version, str) else str(tool.version)
    m = re.search(r"(\d+\.\d+)", version)
    cuda = m.group(1) if m else version
    default_ptx = nv.ptx_get_version(cuda)
    flags = ["-lineinfo", "-v"]
    if "regAllocOptLevel=2" in _make_cubin_source():
        flags.append("--regAllocOptLevel=2")
    return TritonToolchain(triton_version(), tool.path, cuda, default_ptx, tuple(flags))


def compile_options(arch: str, num_warps: int, num_stages: int, num_ctas: int,
                    max_ptx_version: int = _DEFAULT_MAX_PTX) -> dict:
    """``triton.compile`` options for one config.

    ``ptx_version`` is lowered to ``max_ptx_version`` (default 90 = PTX ISA 9.0, the CUDA 13.0
    driver's limit) when Triton's default is newer.
    """
    opts = {"num_warps": num_warps, "num_stages": num_stages, "num_ctas": num_ctas,
            "enable_fp_fusion": True}
    tc = toolchain(arch)
    if tc.default_ptx_version > max_ptx_version:
        opts["ptx_version"] = max_ptx_version
    return opts


def ptxas_version_of(path: str) -> str:
    """Run ``path --version`` and return the CUDA release (``13.0``); raises ``OSError``."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    if not m:
        raise OSError(f"{path} --version printed no release number")
    return m.group(1)


def error_chain(exc: BaseException) -> list[str]:
    """``exc``'s message and those of its causes/contexts, outermost first, as
    ``Type: message``; a message the previous one already contains is left out (Triton wraps an
    error inside a called jit function in one ``CompilationError`` per call level, each showing
    only its call site, and the innermost one repeats the language's own error)."""
    parts: list[str] = []
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e)
        if not (parts and text and text in parts[-1]):
            parts.append(f"{type(e).__name__}: {text}")
        e = e.__cause__ or e.__context__
    return parts


def _error_chain(exc: BaseException) -> str:
    return "\n".join(error_chain(exc))


def _locate(pattern: str, source_text: str | None, filename: str) -> str:
    """``file:line`` of the first match of ``pattern`` in the kernel's file, or the file name."""
    if source_text:
        for i, line in enumerate(source_text.splitlines(), 1):
            if re.search(pattern, line.split("#", 1)[0]):
                return f"{filename}:{i}"
    return filename


def _pin_hint(works_with: str | None) -> str:
    lo, hi = SUPPORTED_TRITON
    pin = works_with or lo
    return (f"ailower supports Triton {lo} (the GPU device's) through {hi} (the newest); "
            f"installed: {triton_version()}. Pin one that compiles it with "
            f"`pip install 'triton=={pin}.*'` in the environment ailower runs in")


def explain_compile_error(exc: BaseException, source_text: str | None = None,
                          filename: str = "<kernel source>") -> str | None:
    """Why the installed Triton refused a kernel, when the reason is a version difference.

    Args:
        exc: what ``triton.compile`` raised.
        source_text: the kernel's file (to give the line using the construct), or None.
        filename: its name, for the message.

    Returns:
        One paragraph naming the construct (``tl.make_block_ptr``), where the file uses it, the
        installed Triton, the supported range (:data:`SUPPORTED_TRITON`) and a ``pip`` pin; or
        None when the failure is not a known version difference (the kernel's own error).
    """
    chain = _error_chain(exc)
    for pattern, construct, where_re, works_with in REMOVED_CONSTRUCTS:
        if re.search(pattern, chain):
            return (f"{_locate(where_re, source_text, filename)} uses {construct}, which Triton "
                    f"{triton_version()} no longer compiles (Triton {works_with} does); "
                    f"{_pin_hint(works_with)}, or rewrite it with tl.make_tensor_descriptor")
    m = re.search(r"module 'triton\.language(?:\.(\w+))?' has no attribute '(\w+)'", chain)
    if m:
        name = f"tl.{m.group(1) + '.' if m.group(1) else ''}{m.group(2)}"
        where = _locate(r"\b" + m.group(2) + r"\b", source_text, filename)
        return (f"{where} uses {name}, which "
                f"Triton {triton_version()} does not have; {_pin_hint(None)}, or one whose "
                f"triton.language has {name}")
    return None


TMA_DTYPE_DEVICE_TO_HOST: dict[int, int] = {**{i: i for i in range(16)}, 8: 10, 9: 8, 10: 9}
"""Triton's ``tensordesc_meta[i]["elem_type"]`` (its device-side enum) -> the host
``CUtensorMapDataType`` value ``cuTensorMapEncodeTiled`` takes: identical except 8/9/10 (the
device enum orders bf16, fp32-ftz and fp64 differently). Source: ``TMA_DTYPE_DEVICE_TO_HOST`` in
``triton/backends/nvidia/driver.py``, the same table in Triton 3.6.0 and 3.9.0 (host enum: CUDA
driver API, ``CUtensorMapDataType``: 0 UINT8, 6 FLOAT16, 8 FLOAT64, 9 BFLOAT16, 10 FLOAT32_FTZ)."""


@dataclass(frozen=True)
class TensorDescLaunch:
    """How the installed Triton's launcher builds a host tensor descriptor argument.

    Attributes:
        clears_small_tensor_bit21: after ``cuTensorMapEncodeTiled``, bit 21 of 64-bit word 1 of
            the CUtensorMap is cleared when the tensor's last byte index + 1 is below 128 KiB and
            ``cuDriverGetVersion() <= 13010`` (3.9; not 3.6).
        fp4_padded_tail_doubled: for an fp4-padded descriptor the shape passed after the
            CUtensorMap has the innermost extent doubled (3.6; 3.9 passes the original shape).
        source: where it was read from (the installed launcher's files, or the version).
    """

    clears_small_tensor_bit21: bool
    fp4_padded_tail_doubled: bool
    source: str


SMALL_TENSOR_BYTES = 128 * 1024
"""The size under which Triton 3.9's launcher clears CUtensorMap bit 21 (``driver.c``)."""
SMALL_TENSOR_MAX_DRIVER = 13010
"""The newest driver (``cuDriverGetVersion``) on which it does so."""


@functools.lru_cache(maxsize=1)
def tensordesc_launch() -> TensorDescLaunch:
    """Read the installed Triton's launcher sources (``backends/nvidia/driver.c`` and
    ``driver.py``, as text: nothing is compiled or imported) to see which of the two
    version-dependent details of :class:`TensorDescLaunch` it has; when they cannot be read, decide
    by version (3.6 and older: neither bit-21 clearing nor the original fp4 tail).

    Raises:
        ModuleNotFoundError: Triton is not installed.
    """
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("triton is not installed")
    root = Path(list(spec.submodule_search_locations)[0]) / "backends" / "nvidia"
    try:
        c_src = (root / "driver.c").read_text()
        py_src = (root / "driver.py").read_text()
    except OSError:
        major_minor = tuple(int(x) for x in re.findall(r"\d+", triton_version())[:2])
        new = major_minor >= (3, 7)
        return TensorDescLaunch(new, not new, f"Triton {triton_version()} (launcher sources "
                                              "unreadable: decided by version)")
    clears, doubled = launch_rules_from_sources(c_src, py_src)
    return TensorDescLaunch(clears, doubled, str(root))


def launch_rules_from_sources(c_src: str, py_src: str) -> tuple[bool, bool]:
    """``(clears_small_tensor_bit21, fp4_padded_tail_doubled)`` read from the texts of Triton's
    ``backends/nvidia/driver.c`` and ``driver.py`` (see :class:`TensorDescLaunch`)."""
    clears = bool(re.search(r"~\s*\(\s*1llu\s*<<\s*21\s*\)", c_src))
    m = re.search(r"def make_tensordesc_arg\(.*?(?=\ndef |\nclass |\Z)", py_src, re.S)
    body = m.group(0) if m else ""
    # 3.9 doubles a copy (expanded_shape) and returns the original shape; 3.6 doubles shape itself
    doubled = "fp4_padded" in body and "expanded_shape" not in body
    return clears, doubled
