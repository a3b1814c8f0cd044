"""Compiling untrusted Triton source in a separate, limited process.

The child (:mod:`server._compile_child`) runs ``python -I`` (no user site, no ``PYTHON*``
variables) with an **empty environment** (no provider keys, nothing inherited), in its own session
(so the whole process group can be killed), with ``RLIMIT_CPU`` (CPU seconds), ``RLIMIT_AS``
(address space), ``RLIMIT_FSIZE`` (256 MiB per file) and ``RLIMIT_CORE`` = 0, and a wall-clock
limit enforced by the parent. It compiles every config of the spec into a per-job cache folder;
the job runner then finds every config there and never imports the source itself.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SandboxLimits", "SandboxResult", "SandboxError", "compile_untrusted"]

_BOOTSTRAP = ("import json,sys;r=sys.stdin.readline();sys.path[:0]=json.loads(r);"
              "from server._compile_child import main;main()")


class SandboxError(RuntimeError):
    """The sandboxed compile failed, ran out of a limit, or answered garbage (message says which)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of the compile process: CPU seconds, address space in MiB, wall seconds."""

    cpu_s: int = 300
    memory_mb: int = 8192
    wall_s: float = 600.0


@dataclass
class SandboxResult:
    """What the sandboxed compile produced: the config keys compiled and Triton's failures."""

    compiled: list[str]
    failures: list[str]
    expected: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Every config of the autotune space compiled."""
        return not self.failures and sorted(self.compiled) == sorted(self.expected)


def _parent_death_signal() -> None:
    """Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: die with the parent (no orphan after a crash)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)


def _limits(lim: SandboxLimits):
    def apply() -> None:
        os.setsid()
        _parent_death_signal()
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_s, lim.cpu_s + 5))
        mem = lim.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def compile_untrusted(spec: dict[str, Any], arch: str, *, cache_dir: Path, home: Path,
                      max_ptx_version: int, limits: SandboxLimits) -> SandboxResult:
    """Compile ``spec`` (a KernelSpec as JSON data, source given as text) in the sandbox.

    Args:
        spec: the KernelSpec's JSON form (already validated by :mod:`server.source_check`).
        arch: the target (``sm_90a`` ...).
        cache_dir: the reference-compile cache the job will read.
        home: the child's working folder and ``HOME`` (Triton's own cache goes below it).
        max_ptx_version: as for :func:`harness.compile_reference`.
        limits: CPU, memory and wall limits.

    Raises:
        SandboxError: the child was killed (a limit), exited non-zero, or its answer is unreadable.
    """
    home.mkdir(parents=True, exist_ok=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    paths = [p for p in sys.path if p]
    root = str(Path(__file__).resolve().parent.parent)
    if root not in paths:
        paths.insert(0, root)
    req = json.dumps({"spec": spec, "arch": arch, "cache_dir": str(cache_dir), "home": str(home),
                      "max_ptx_version": max_ptx_version})
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-I", "-c", _BOOTSTRAP], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={}, cwd=str(home),
                            preexec_fn=_limits(limits), close_fds=True)
    try:
        out, err = proc.communicate((json.dumps(paths) + "\n" + req).encode(),
                                    timeout=limits.wall_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise SandboxError(f"the sandboxed compile ran past its wall-clock limit "
                           f"({limits.wall_s:g} s) and was killed") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    elapsed = time.monotonic() - t0
    tail = err.decode(errors="replace")[-2000:]
    if proc.returncode != 0:
        sig = -proc.returncode if proc.returncode < 0 else None
        why = {signal.SIGXCPU: f"CPU-time limit ({limits.cpu_s} s)",
               signal.SIGKILL: "killed (memory or CPU limit)"}.get(sig, f"exit status {proc.returncode}")
        raise SandboxError(f"the sandboxed compile failed: {why}; stderr: {tail}")
    lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith("{")]
    try:
        data = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise SandboxError(f"the sandboxed compile gave no answer; stderr: {tail}") from None
    if "error" in data:
        raise SandboxError(f"the sandboxed compile failed: {data['error']}")
    return SandboxResult(compiled=list(data["compiled"]), failures=list(data["failures"]),
                         expected=list(data["expected"]), seconds=elapsed)
