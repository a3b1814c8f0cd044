"""Assembling candidate PTX with ptxas, and reading what ptxas says.

ptxas resolution order: the ``ptxas`` setting (``AILOWER_PTXAS``) -> the ptxas bundled in Triton's
wheel for the arch -> ``ptxas`` on PATH. The one used is recorded in the result. A setting that does
not point at an executable is an error, never a silent fallback.

With Triton's bundled ptxas we pass exactly Triton's flags (``_triton_compat.toolchain``), so
Triton's own PTX assembles to the same cubin as the reference.

ptxas' ``-v`` report gives registers, static shared memory, barriers, stack frame and spills. Its
error/warning/info lines become structured diagnostics with PTX line numbers, including the C75xx
info lines where ptxas silently repairs wgmma misuse (C7519 missing ``wgmma.fence``, C7517/C7514
register use before ``wgmma.wait_group``, C7520 lane-predicated wgmma;
``docs/ptx_rules.md`` section 8).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

try:
    import resource as _resource  # POSIX: the ptxas memory limit
except ImportError:  # pragma: no cover - Windows
    _resource = None

from harness import _triton_compat as compat
from harness.errors import PtxasNotFound, UsageError

__all__ = ["PtxasDiagnostic", "AssemblyResult", "resolve_ptxas", "assemble", "WGMMA_REPAIR_CODES"]

WGMMA_REPAIR_CODES = frozenset({"C7514", "C7517", "C7519", "C7520"})
"""ptxas info codes meaning it changed the program to repair wgmma misuse (docs/ptx_rules.md
section 8)."""

PtxasSource = Literal["setting", "triton", "path"]


class PtxasDiagnostic(BaseModel):
    """One ptxas message.

    Attributes:
        severity: ``fatal`` | ``error`` | ``warning`` | ``info``.
        code: ptxas' advisory code such as ``C7519``, when given.
        line: PTX line number (1-based), when given.
        message: the text after the severity.
    """

    model_config = ConfigDict(frozen=True)

    severity: Literal["fatal", "error", "warning", "info"]
    code: str | None = None
    line: int | None = None
    message: str

    def render(self, filename: str = "candidate.ptx") -> str:
        """``file:line: severity[code]: message``."""
        loc = f"{filename}:{self.line}: " if self.line else f"{filename}: "
        code = f"[{self.code}]" if self.code else ""
        return f"{loc}{self.severity}{code}: {self.message}"


class AssemblyResult(BaseModel):
    """What ptxas produced for one PTX module.

    Attributes:
        ok: ptxas exited 0 and wrote a cubin.
        cubin: the binary (None on failure).
        arch: ``--gpu-name``.
        ptxas_path, ptxas_source, ptxas_version: which ptxas ran and why it was chosen.
        command: the exact command line (a repro).
        seconds: wall time of the ptxas run.
        registers: registers per thread.
        shared_bytes: static shared memory per CTA, bytes (dynamic shared memory is a launch setting).
        barriers: named barriers used.
        stack_frame, spill_stores, spill_loads: bytes.
        diagnostics: every error/warning/info line, in order (per-function property lines excluded).
        returncode: ptxas exit status (-1 when it timed out).
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    cubin: bytes | None = None
    arch: str
    ptxas_path: str
    ptxas_source: PtxasSource
    ptxas_version: str
    command: list[str]
    seconds: float
    registers: int | None = None
    shared_bytes: int | None = None
    barriers: int | None = None
    stack_frame: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    diagnostics: list[PtxasDiagnostic] = Field(default_factory=list)
    returncode: int

    @property
    def errors(self) -> list[PtxasDiagnostic]:
        """Fatal and error diagnostics."""
        return [d for d in self.diagnostics if d.severity in ("fatal", "error")]

    @property
    def repairs(self) -> list[PtxasDiagnostic]:
        """Info lines where ptxas silently changed the program (C7514/C7517/C7519/C7520)."""
        return [d for d in self.diagnostics if d.code in WGMMA_REPAIR_CODES]

    def summary(self, source: str | None = None, filename: str = "candidate.ptx") -> str:
        """A concise multi-line rendering for logs and model feedback; with the PTX ``source``,
        each diagnostic that has a line is followed by that source line. Diagnostics name
        ``filename`` (the user's file for ``ailower eval``)."""
        head = (f"ptxas {self.ptxas_version} ({self.ptxas_source}) for {self.arch}: "
                + ("ok" if self.ok else f"FAILED (exit {self.returncode})"))
        if self.ok:
            head += (f"; {self.registers} registers, {self.shared_bytes or 0} B static smem, "
                     f"{self.stack_frame or 0} B stack, {self.spill_stores or 0}/{self.spill_loads or 0}"
                     " B spill stores/loads")
        src = source.splitlines() if source else []
        lines = [head]
        for d in self.diagnostics:
            if d.severity == "info" and not d.code:
                continue
            lines.append(d.render(filename))
            if d.line and 0 < d.line <= len(src):
                lines.append(f"    | {src[d.line - 1].strip()}")
        return "\n".join(lines)


_DIAG_RE = re.compile(
    r"^ptxas[\w.-]*\s+(?:(?P<file>[^,\n]+?), line (?P<line>\d+); )?"
    r"(?P<sev>fatal|error|warning|info)\s*:\s*(?:\((?P<code>C\d+)\)\s*)?(?P<msg>.*)$")
_REGS_RE = re.compile(r"Used (\d+) registers")
_BARS_RE = re.compile(r"used (\d+) barriers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PROPERTY_MSGS = ("bytes gmem", "Compiling entry function", "Function properties for", "Used ",
                  "Compile time =")


def resolve_ptxas(arch: str, setting: str | os.PathLike | None = None) -> tuple[str, PtxasSource, str]:
    """Find the ptxas to use for ``arch``.

    Returns:
        ``(path, source, cuda_version)`` where source is ``setting``, ``triton`` or ``path``.

    Raises:
        PtxasNotFound: the setting names no executable, or no ptxas exists anywhere.
        UsageError: unknown arch.
    """
    try:
        compat.arch_capability(arch)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if setting:
        p = Path(setting)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise PtxasNotFound(f"AILOWER_PTXAS={setting!s} is not an executable file")
        try:
            return str(p), "setting", compat.ptxas_version_of(str(p))
        except (OSError, subprocess.SubprocessError) as exc:
            raise PtxasNotFound(f"AILOWER_PTXAS={setting!s} does not run: {exc}") from None
    try:
        tc = compat.toolchain(arch)
        if Path(tc.ptxas_path).is_file():
            return tc.ptxas_path, "triton", tc.ptxas_version
    except (ImportError, RuntimeError, OSError, subprocess.SubprocessError):
        pass  # no usable Triton wheel: fall through to PATH, which is the documented order
    found = shutil.which("ptxas")
    if found:
        try:
            return found, "path", compat.ptxas_version_of(found)
        except (OSError, subprocess.SubprocessError) as exc:
            raise PtxasNotFound(f"ptxas on PATH ({found}) does not run: {exc}") from None
    raise PtxasNotFound("no ptxas: AILOWER_PTXAS is unset, Triton's wheel has none, none on PATH")


def parse_ptxas_output(text: str) -> tuple[list[PtxasDiagnostic], dict[str, int]]:
    """Split ptxas stderr into diagnostics and resource numbers (registers, smem, spills, ...)."""
    diags: list[PtxasDiagnostic] = []
    res: dict[str, int] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if m := _FRAME_RE.search(line):
            res["stack_frame"], res["spill_stores"], res["spill_loads"] = map(int, m.groups())
            continue
        m = _DIAG_RE.match(line)
        if not m:
            continue
        msg = m.group("msg").strip()
        if m.group("sev") == "info" and not m.group("code"):
            if r := _REGS_RE.search(msg):
                res["registers"] = int(r.group(1))
            if r := _BARS_RE.search(msg):
                res["barriers"] = int(r.group(1))
            if r := _SMEM_RE.search(msg):
                res["shared_bytes"] = int(r.group(1))
            if any(p in msg for p in _PROPERTY_MSGS):
                continue
        diags.append(PtxasDiagnostic(severity=m.group("sev"), code=m.group("code"),
                                     line=int(m.group("line")) if m.group("line") else None,
                                     message=msg))
    return diags, res


#: address-space limit of a ptxas run (MiB) unless ``AILOWER_PTXAS_MEMORY_MB`` says otherwise:
#: ptxas 13.0 grows without bound on some PTX (a ``setmaxnreg`` kernel calling a ``.func``:
#: 14 GB in 10 minutes) and candidates are untrusted; the suite's largest kernels assemble
#: within 256 MiB (2026-12-04, ptxas 12.8 and 13.0). Read here, not through
#: ``common.settings``: the harness also runs inside the server's boxes, which hold only the
#: harness, kernels, agent, verifier and emulator packages.
PTXAS_MEMORY_MB = 4096
PTXAS_MEMORY_ENV = "AILOWER_PTXAS_MEMORY_MB"


def ptxas_memory_mb() -> int:
    """The ptxas address-space limit in MiB (0: none): ``AILOWER_PTXAS_MEMORY_MB``, else
    :data:`PTXAS_MEMORY_MB`.

    Raises:
        UsageError: the variable is not a whole number >= 0.
    """
    raw = os.environ.get(PTXAS_MEMORY_ENV)
    if raw is None or not raw.strip():
        return PTXAS_MEMORY_MB
    try:
        mb = int(raw)
    except ValueError:
        mb = -1
    if mb < 0:
        raise UsageError(f"{PTXAS_MEMORY_ENV}={raw!r}: not a whole number of MiB >= 0 "
                         f"(0 switches the limit off)")
    return mb


def _run_limited(cmd: list[str], timeout_s: float, memory_mb: int) -> tuple[int, str]:
    """Run ptxas with an address-space limit of ``memory_mb`` MiB (0: none): ``RLIMIT_AS`` set
    on the child right after it starts (``resource.prlimit``, Linux; a ``preexec_fn`` is not
    safe in a threaded server). Returns (returncode, stderr + stdout); -1 on timeout."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if memory_mb and hasattr(_resource, "prlimit"):
        lim = memory_mb << 20
        try:
            _soft, hard = _resource.prlimit(proc.pid, _resource.RLIMIT_AS)
            if hard != _resource.RLIM_INFINITY and hard < lim:
                lim = hard  # already bounded tighter (a server box): keep that bound
            _resource.prlimit(proc.pid, _resource.RLIMIT_AS, (lim, lim))
        except ProcessLookupError:
            pass  # it already exited: nothing left to limit
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return -1, f"ptxas fatal   : timed out after {timeout_s:.0f} s"
    log = err + out
    if proc.returncode != 0 and memory_mb and "Memory allocation failure" in log:
        log += (f"ptxas fatal   : stopped at its memory limit of {memory_mb} MiB "
                f"(AILOWER_PTXAS_MEMORY_MB)\n")
    return proc.returncode, log


def assemble(ptx: str, arch: str, *, ptxas: str | os.PathLike | None = None,
             extra_flags: tuple[str, ...] = (), timeout_s: float = 120.0,
             memory_mb: int | None = None) -> AssemblyResult:
    """Assemble ``ptx`` for ``arch`` into a cubin.

    A PTX error is reported in the result (``ok=False`` with diagnostics), never raised; so is
    a ptxas run that reaches its time or memory limit (the PTX is untrusted: ptxas 13.0 grows
    to 14 GB on some kernels that combine ``setmaxnreg`` with a ``call`` of a ``.func``).

    Args:
        ptx: the module text.
        arch: ``sm_89`` | ``sm_90a`` | ``sm_100a`` | ``sm_80``.
        ptxas: the ``AILOWER_PTXAS`` setting (None: Triton's bundled, then PATH).
        extra_flags: more ptxas flags.
        timeout_s: wall-clock limit for ptxas, seconds.
        memory_mb: address-space limit of the ptxas process (``RLIMIT_AS``, MiB; 0: none;
            None: :func:`ptxas_memory_mb`, 4096 by default). Applied on Linux
            (``resource.prlimit``; never above a limit the process already has); elsewhere
            only the time limit holds.

    Raises:
        PtxasNotFound: no ptxas could be found (see :func:`resolve_ptxas`).
        UsageError: unknown arch; a bad ``AILOWER_PTXAS_MEMORY_MB``.
    """
    path, source, version = resolve_ptxas(arch, ptxas)
    if memory_mb is None:
        memory_mb = ptxas_memory_mb()
    flags = list(compat.toolchain(arch).ptxas_flags) if source == "triton" else ["-lineinfo", "-v"]
    with tempfile.TemporaryDirectory(prefix="ailower-ptxas-") as tmp:
        src, out = Path(tmp) / "candidate.ptx", Path(tmp) / "candidate.cubin"
        src.write_text(ptx)
        cmd = [path, *flags, *extra_flags, f"--gpu-name={arch}", str(src), "-o", str(out)]
        t0 = time.perf_counter()
        rc, log = _run_limited(cmd, timeout_s, memory_mb)
        seconds = time.perf_counter() - t0
        diags, res = parse_ptxas_output(log)
        cubin = out.read_bytes() if rc == 0 and out.exists() else None
    shown = [c if not c.startswith(tmp) else Path(c).name for c in cmd]
    return AssemblyResult(ok=cubin is not None, cubin=cubin, arch=arch, ptxas_path=path,
                          ptxas_source=source, ptxas_version=version, command=shown,
                          seconds=seconds, diagnostics=diags, returncode=rc, **res)
