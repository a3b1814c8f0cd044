"""The harness: reference compile (Triton, no GPU), ptxas assembly, GPU evaluation.

Public API (re-exported here; submodules starting with ``_`` are private):

* :func:`compile_reference`, :func:`compile_space`, :class:`ReferenceArtifacts`
* :class:`Candidate`
* :func:`assemble`, :func:`resolve_ptxas`, :class:`AssemblyResult`, :class:`PtxasDiagnostic`
* :class:`GPUEvaluator`, :func:`autotune`, :func:`evaluate_candidate`, :func:`gpu_available`,
  :class:`Baseline`, :class:`EvalResult`, :class:`KernelRun`, :func:`race_gate`,
  :class:`RaceGateResult`
* :func:`compare`, :class:`CompareResult`, :func:`make_inputs`, :func:`reference_outputs`
* the errors of :mod:`harness.errors`
"""

from harness._triton_compat import SUPPORTED_ARCHS, toolchain, triton_version
from harness.candidate import Candidate
from harness.correctness import CompareResult, compare
from harness.errors import (
    GPUUnavailable,
    HarnessError,
    PtxasNotFound,
    ReferenceCompileError,
    ToolError,
    UsageError,
    WorkerError,
)
from harness.evaluate import (
    Baseline,
    GPUEvaluator,
    RaceGateResult,
    autotune,
    device_arch,
    evaluate_candidate,
    gpu_available,
    race_gate,
)
from harness.inputs import make_inputs, reference_outputs
from harness.ptxas import AssemblyResult, PtxasDiagnostic, assemble, resolve_ptxas
from harness.reference import ReferenceArtifacts, compile_reference, compile_space
from harness.results import EvalResult, KernelRun, PipelineTiming, SeedCheck

__all__ = [
    "SUPPORTED_ARCHS", "toolchain", "triton_version", "Candidate", "CompareResult", "compare",
    "GPUUnavailable", "HarnessError", "PtxasNotFound", "ReferenceCompileError", "ToolError",
    "UsageError", "WorkerError", "Baseline", "GPUEvaluator", "RaceGateResult", "race_gate",
    "autotune", "evaluate_candidate",
    "gpu_available", "device_arch", "make_inputs", "reference_outputs", "AssemblyResult", "PtxasDiagnostic",
    "assemble", "resolve_ptxas", "ReferenceArtifacts", "compile_reference", "compile_space",
    "EvalResult", "KernelRun", "PipelineTiming", "SeedCheck",
]
