"""Errors of the harness, split by who must act.

::

    HarnessError                     base; never raised for a bad *candidate* (that is a diagnostic)
    ├── ToolError                    a tool or the machine failed: ptxas, Triton, the CUDA driver
    │   ├── PtxasNotFound            no ptxas at the configured path, in Triton's wheel or on PATH
    │   ├── ReferenceCompileError    Triton could not compile the reference for a config
    │   ├── GPUUnavailable           no CUDA driver or device where one is needed
    │   └── WorkerError              the evaluation worker process failed for a harness reason
    └── UsageError                   the caller passed something invalid (bad arch, bad option)

Every error has a stable kebab-case ``code``, carries its fields, and pickles (``__reduce__``) so it
can cross the worker-process boundary.
"""

from __future__ import annotations

__all__ = [
    "HarnessError",
    "ToolError",
    "PtxasNotFound",
    "ReferenceCompileError",
    "GPUUnavailable",
    "WorkerError",
    "UsageError",
]


class HarnessError(Exception):
    """Base class; ``code`` is a stable kebab-case id, ``hint`` one line on what to do."""

    code = "harness-error"
    hint = ""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        if hint:
            self.hint = hint

    def __reduce__(self):
        return (type(self), (self.message, self.hint))

    def __str__(self) -> str:
        return f"{self.message}" + (f" (hint: {self.hint})" if self.hint else "")


class ToolError(HarnessError):
    """A tool (ptxas, Triton, the driver) failed for a reason that is not the candidate's fault."""

    code = "tool-error"


class PtxasNotFound(ToolError):
    """No usable ptxas: not at ``AILOWER_PTXAS``, not in Triton's wheel, not on PATH."""

    code = "ptxas-not-found"
    hint = "set AILOWER_PTXAS to a CUDA ptxas binary, or install the triton wheel"


class ReferenceCompileError(ToolError):
    """Triton failed to compile the reference kernel for one config (message holds its error)."""

    code = "reference-compile-error"


class GPUUnavailable(ToolError):
    """No CUDA driver or no device: GPU evaluation cannot run here."""

    code = "gpu-unavailable"
    hint = "run on a host with an NVIDIA GPU and driver; static stages still work without one"


class WorkerError(ToolError):
    """The evaluation worker failed for a harness reason (protocol error, unexpected exit)."""

    code = "worker-error"


class UsageError(HarnessError):
    """The caller passed an invalid value (unknown arch, unsupported parameter kind, ...)."""

    code = "usage-error"
