"""The agent loop: propose -> assemble -> verify -> evaluate -> feedback, within an iteration budget.

A failed candidate gets a verdict, not an exception: ptxas errors, verifier errors, a wrong
result, a hang or a crash are recorded with their diagnostics, fed back to the provider, and the
loop goes on (``style.md`` section 4). Only ailower bugs and tool failures (no ptxas, Triton cannot
compile the reference) propagate.

The best valid candidate is kept: with a GPU, the correct candidate with the highest speedup over
the autotuned baseline; without one, the first candidate that passes assembly and verification
(GPU evaluation is then reported as skipped, with the reason). Every step is appended to a JSONL
transcript.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

import verifier
from agent.providers.base import Proposal, ProposalContext, Provider
from harness import (
    AssemblyResult,
    Baseline,
    Candidate,
    EvalResult,
    GPUEvaluator,
    ReferenceArtifacts,
    assemble,
    autotune,
    compile_space,
    evaluate_candidate,
    race_gate,
)
from harness.errors import ReferenceCompileError
from kernels.spec import KernelSpec

__all__ = ["LoopOptions", "IterationRecord", "LoweringResult", "lower", "Transcript", "build_report"]

Verdict = Literal["accepted", "rejected-provider", "rejected-assembly", "rejected-verifier",
                  "rejected-evaluation", "static-only"]


class LoopOptions(BaseModel):
    """Knobs of one lowering run.

    Attributes:
        iterations: proposals to request (the iteration budget).
        gpu: evaluate on the GPU (None: when one is present and matches ``arch``).
        ptxas: the ``AILOWER_PTXAS`` setting.
        cache_dir: reference-compile cache.
        max_ptx_version: PTX ISA cap for the reference compile.
        seeds: correctness seeds (>= 3).
        max_tool_calls: per proposal, for model providers.
        race_gate: run compute-sanitizer racecheck/synccheck on an accepted candidate about to
            become the best (skipped, with a note, where the toolkit lacks compute-sanitizer).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    iterations: int = Field(default=4, ge=1, le=1000)
    gpu: bool | None = None
    ptxas: str | None = None
    cache_dir: Path | None = None
    max_ptx_version: int = 90
    seeds: tuple[int, ...] = (0, 1, 2)
    max_tool_calls: int = 16
    race_gate: bool = True


class IterationRecord(BaseModel):
    """What happened to one proposal.

    Attributes:
        iteration: 1-based.
        origin: who proposed it.
        verdict: accepted (valid and, with a GPU, correct), or the stage that rejected it;
            ``static-only`` = passed assembly and verification, GPU evaluation skipped.
        candidate_digest: :meth:`Candidate.digest`, when there was a candidate.
        provider_error: the provider's error text, when it produced no candidate.
        assembly: ptxas result summary (``ok``, registers, diagnostics ...) without the cubin.
        verifier: the verifier report as a dict.
        evaluation: the GPU evaluation result as a dict.
        speedup: baseline median / candidate median.
        feedback: the text sent back to the provider.
        seconds: wall time per stage.
    """

    iteration: int
    origin: str = ""
    verdict: Verdict
    candidate_digest: str | None = None
    provider_error: str | None = None
    provider_error_kind: str | None = None
    assembly: dict[str, Any] | None = None
    verifier: dict[str, Any] | None = None
    evaluation: dict[str, Any] | None = None
    emulation: dict[str, Any] | None = None
    speedup: float | None = None
    feedback: str = ""
    seconds: dict[str, float] = Field(default_factory=dict)


class LoweringResult(BaseModel):
    """The outcome of :func:`lower`.

    Attributes:
        kernel, spec_id, arch, provider: what was lowered, how.
        started_at: ISO timestamp (UTC).
        reference: per-config compile info and the baseline (config, ABI, timing).
        gpu: whether GPU evaluation ran; ``gpu_note`` says why not when it did not.
        iterations: every iteration's record.
        best_iteration: index into ``iterations`` of the best valid candidate, or None.
        best_candidate: that candidate (PTX and launch settings).
        best_cubin: its cubin (excluded from JSON dumps).
        stop_reason: ``budget`` (iterations spent) | ``exhausted`` | ``budget: <token or cost
            budget exceeded ...>`` | ``fatal provider error: ...``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kernel: str
    spec_id: str
    arch: str
    provider: str
    started_at: str
    reference: dict[str, Any]
    gpu: bool
    gpu_note: str = ""
    iterations: list[IterationRecord] = Field(default_factory=list)
    best_iteration: int | None = None
    best_candidate: Candidate | None = None
    best_cubin: bytes | None = Field(default=None, exclude=True)
    stop_reason: str = "budget"

    @property
    def best(self) -> IterationRecord | None:
        """The best iteration's record, or None."""
        return None if self.best_iteration is None else self.iterations[self.best_iteration]


class Transcript:
    """Appends JSON lines (one event each, with a UTC timestamp) to ``path``; None keeps nothing."""

    def __init__(self, path: Path | None):
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: dict[str, Any]) -> None:
        if self.path is None:
            return
        row = {"ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **event}
        with self.path.open("a") as f:
            f.write(json.dumps(row, default=str) + "\n")


def _assembly_dict(a: AssemblyResult) -> dict[str, Any]:
    return a.model_dump(mode="json", exclude={"cubin"})


def _eval_feedback(res: EvalResult) -> str:
    if res.status in ("hang", "crash"):
        return f"GPU evaluation: {res.status.upper()}: {res.message}"
    if res.status == "error":
        return f"GPU evaluation could not run (harness error): {res.message[:500]}"
    c = res.candidate
    lines = []
    if c is None:
        return "GPU evaluation: no candidate result"
    lines.append(f"GPU evaluation on {res.device.name if res.device else 'GPU'}: candidate {c.status}"
                 + (f": {c.message}" if c.message else ""))
    for chk in c.checks:
        for name, cmp in chk.vs_reference.items():
            lines.append(f"  seed {'(secret)' if chk.secret else chk.seed} {name} vs Triton: max|err| {cmp.max_abs_err:.3g}, "
                         f"normalized {cmp.norm_err:.3g}" + ("" if cmp.ok else f" FAIL ({cmp.reason})"))
    ref = next((k for k in res.kernels if k.role == "reference"), None)
    if c.timing and ref and ref.timing:
        lines.append(f"  time: candidate {c.timing.median_ms:.4f} ms (IQR {c.timing.iqr_ms:.4f}), "
                     f"reference {ref.timing.median_ms:.4f} ms; speedup {res.speedup:.3f}x"
                     + (f" (95% CI {res.speedup_ci[0]:.3f}-{res.speedup_ci[1]:.3f})"
                        if res.speedup_ci else "") + "; "
                     f"roofline fraction {c.roofline_fraction:.2f} ({c.roofline_bound}-bound)")
    if c.registers is not None:
        lines.append(f"  registers {c.registers}, static smem {c.static_smem} B, local {c.local_bytes} B")
    return "\n".join(lines)


#: wall-clock limit of one emulated-correctness run, s; a candidate that exceeds it is rejected
#: (a timeout proves nothing: an infinite loop must not pass as "static-only")
EMULATION_TIME_LIMIT_S = 60.0


def _emulate(spec: KernelSpec, arch: str, art: ReferenceArtifacts, ptx: str,
             launch: dict[str, Any]):
    """Emulated correctness on the CPU (no GPU for ``arch`` here): :func:`emulator.run_kernel` at
    the spec's ``verify`` size with the candidate's launch settings."""
    from emulator import run_kernel

    return run_kernel(ptx, spec, arch, config=art.config, meta=launch.get("meta") or None,
                      threads=int(launch.get("threads") or art.abi.threads),
                      dynamic_smem=int(launch.get("dynamic_smem") or art.abi.dynamic_smem),
                      global_scratch_size=art.abi.global_scratch_size,
                      time_limit_s=EMULATION_TIME_LIMIT_S,
                      filename="candidate.ptx")


def _context(spec: KernelSpec, arch: str, art: ReferenceArtifacts, refs: list[ReferenceArtifacts],
             gpu: bool, max_tool_calls: int) -> ProposalContext:
    return ProposalContext(
        spec=spec, arch=arch, config=art.config, constexprs=spec.constexprs(art.config),
        abi=art.abi, triton_source=spec.source.kernel_text(), ttgir=art.ttgir, llir=art.llir,
        reference_ptx=art.ptx, reference_cubin=art.cubin, configs=tuple(spec.configs()), gpu_available=gpu,
        max_tool_calls=max_tool_calls)


def lower(spec: KernelSpec, arch: str, provider: Provider, options: LoopOptions, *,
          evaluator: GPUEvaluator | None = None, transcript: Transcript | None = None,
          on_event: Callable[[str, dict[str, Any]], None] | None = None) -> LoweringResult:
    """Lower ``spec`` to PTX for ``arch`` with ``provider``.

    Args:
        spec: the kernel.
        arch: ``sm_89`` | ``sm_90a`` | ``sm_100a`` (``sm_80`` also compiles).
        provider: the candidate source.
        options: see :class:`LoopOptions`.
        evaluator: runs GPU jobs; None disables GPU evaluation.
        transcript: JSONL sink.
        on_event: ``(kind, data)`` listener for progress (CLI, server).

    Raises:
        ReferenceCompileError: Triton compiled no config of the autotune space.
        harness.PtxasNotFound: no ptxas.
        harness.WorkerError: the GPU autotune found no correct config.
    """
    tx = transcript or Transcript(None)
    emit = on_event or (lambda kind, data: None)

    def event(kind: str, **data: Any) -> None:
        tx.write({"event": kind, **data})
        emit(kind, data)

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    refs, failures = compile_space(spec, arch, cache_dir=options.cache_dir,
                                   max_ptx_version=options.max_ptx_version)
    event("reference_compiled", configs=len(refs), failures=[str(f) for f in failures],
          seconds=time.perf_counter() - t0)
    if not refs:
        raise ReferenceCompileError(f"Triton compiled none of the {len(failures)} configs of "
                                    f"{spec.name} for {arch}: {failures[0] if failures else ''}")
    gpu = evaluator is not None and options.gpu is not False
    baseline: Baseline | None = None
    reference: dict[str, Any] = {
        "triton_version": refs[0].triton_version,
        "configs": [{"config": a.config.key(), "compile_s": a.compile_s, "cache_hit": a.cache_hit,
                     "shared": a.abi.dynamic_smem, "threads": a.abi.threads} for a in refs],
        "compile_failures": [str(f) for f in failures]}
    art = refs[0]
    if gpu:
        t = time.perf_counter()
        baseline = autotune(spec, refs, evaluator)  # type: ignore[arg-type]
        art = baseline.artifacts
        runs = {k.label: k for k in baseline.result.kernels}
        reference["autotune"] = [
            {"config": k.label, "status": k.status, "message": k.message,
             "median_ms": k.timing.median_ms if k.timing else None,
             "iqr_ms": k.timing.iqr_ms if k.timing else None,
             "roofline_fraction": k.roofline_fraction} for k in runs.values()]
        reference["device"] = baseline.result.device.model_dump() if baseline.result.device else None
        event("baseline", config=art.config.key(), seconds=time.perf_counter() - t,
              median_ms=runs[baseline.result.best].timing.median_ms)  # type: ignore[index,union-attr]
    reference["baseline"] = {"config": art.config.key(), "abi": art.abi.model_dump(),
                             "autotuned": baseline is not None}
    result = LoweringResult(kernel=spec.name, spec_id=spec.identity(), arch=arch,
                            provider=provider.name, started_at=started, reference=reference, gpu=gpu)
    ctx = _context(spec, arch, art, refs, gpu, options.max_tool_calls)

    def run_tool(name: str, args: dict[str, Any]) -> str:
        ptx = args.get("ptx", "")
        if name == "compile":
            return assemble(ptx, arch, ptxas=options.ptxas).summary(ptx)
        if name == "verify":
            rep = verifier.verify(ptx, arch=arch, abi=art.abi, threads=args.get("threads"),
                                  filename="candidate.ptx")
            return rep.render("full") or "verifier: no findings"
        if name == "evaluate":
            if not gpu:
                emu = _emulate(spec, arch, art, ptx, args)
                return "evaluate: no GPU on this host; " + emu.summary()
            a = assemble(ptx, arch, ptxas=options.ptxas)
            if not a.ok:
                return a.summary(ptx)
            cand = Candidate(ptx=ptx, threads=int(args.get("threads", art.abi.threads)),
                             meta={**art.config.meta, **(args.get("meta") or {})},
                             dynamic_smem=int(args.get("dynamic_smem", art.abi.dynamic_smem)))
            res = evaluate_candidate(spec, art, cand, a.cubin, evaluator,  # type: ignore[arg-type]
                                     seeds=options.seeds)
            return _eval_feedback(res)
        raise ValueError(f"unknown tool {name!r}")

    feedback: str | None = None
    best_speed = -1.0
    best_static_rank = 0  # static path: 2 emulation passed, 1 not emulated
    for i in range(1, options.iterations + 1):
        times: dict[str, float] = {}
        t = time.perf_counter()
        prop: Proposal = provider.propose(ctx, feedback, run_tool)
        times["propose"] = time.perf_counter() - t
        for ev in prop.events:
            tx.write({"event": "provider", "iteration": i, **ev})
        if prop.candidate is None:
            if prop.error_kind in ("exhausted", "budget"):
                # a token/cost budget says which one and by how much
                result.stop_reason = ("exhausted" if prop.error_kind == "exhausted"
                                      else f"budget: {prop.error}")
                event("stop", reason=result.stop_reason, iteration=i)
                break
            rec = IterationRecord(iteration=i, verdict="rejected-provider",
                                  provider_error=prop.error, provider_error_kind=prop.error_kind,
                                  feedback=f"no candidate: {prop.error}", seconds=times)
            result.iterations.append(rec)
            event("iteration", **rec.model_dump(mode="json"))
            feedback = rec.feedback
            if prop.error_kind == "auth":
                result.stop_reason = f"fatal provider error: {prop.error}"
                break
            continue
        cand = prop.candidate
        rec = IterationRecord(iteration=i, origin=cand.origin, verdict="rejected-assembly",
                              candidate_digest=cand.digest())
        t = time.perf_counter()
        asm = assemble(cand.ptx, arch, ptxas=options.ptxas)
        times["assemble"] = time.perf_counter() - t
        rec.assembly = _assembly_dict(asm)
        t = time.perf_counter()
        rep = verifier.verify(cand.ptx, arch=arch, abi=art.abi, threads=cand.threads,
                              filename="candidate.ptx")
        times["verify"] = time.perf_counter() - t
        rec.verifier = rep.to_dict()
        parts = [asm.summary(cand.ptx)]
        rendered = rep.render("full")
        parts.append("verifier: " + ("no errors" if rep.ok else "REJECTED") + (
            "\n" + rendered if rendered else ""))
        if not asm.ok:
            rec.verdict = "rejected-assembly"
        elif not rep.ok:
            rec.verdict = "rejected-verifier"
        elif not gpu:
            rec.verdict = "static-only"
            t = time.perf_counter()
            emu = _emulate(spec, arch, art, cand.ptx, cand.model_dump())
            times["emulate"] = time.perf_counter() - t
            rec.emulation = emu.model_dump(mode="json")
            parts.append("GPU evaluation skipped: no GPU on this host; " + emu.summary())
            # unsupported / memory: not emulated (no verdict on the candidate either way)
            if emu.status not in ("ok", "unsupported", "memory") or (
                    emu.status == "ok" and not emu.ok):
                rec.verdict = "rejected-evaluation"
        else:
            t = time.perf_counter()
            res = evaluate_candidate(spec, art, cand, asm.cubin, evaluator,  # type: ignore[arg-type]
                                     seeds=options.seeds)
            times["evaluate"] = time.perf_counter() - t
            rec.evaluation = res.model_dump(mode="json")
            parts.append(_eval_feedback(res))
            c = res.candidate
            if res.status == "ok" and c is not None and c.status == "ok" and res.speedup:
                rec.verdict = "accepted"
                rec.speedup = res.speedup
                if options.race_gate and res.speedup > best_speed:  # about to become the best
                    g = race_gate(spec, art, cand, asm.cubin, evaluator)  # type: ignore[arg-type]
                    rec.evaluation["race_gate"] = g.model_dump()
                    parts.append(f"race gate: {g.message}")
                    if not g.ok:
                        rec.verdict, rec.speedup = "rejected-evaluation", None
            else:
                rec.verdict = "rejected-evaluation"
        rec.seconds = times
        rec.feedback = "\n".join(parts)
        result.iterations.append(rec)
        event("iteration", **rec.model_dump(mode="json", exclude={"evaluation"}),
              evaluation_status=(rec.evaluation or {}).get("status"))
        feedback = rec.feedback
        better = False
        if rec.verdict == "accepted" and (rec.speedup or 0) > best_speed:
            best_speed, better = rec.speedup or 0.0, True
        elif rec.verdict == "static-only":
            # without a GPU: a candidate whose emulated correctness passed outranks one the
            # emulator could not run (an unsupported instruction proves nothing: a wrong kernel
            # could add one on purpose); among equals the first stays the best
            rank = 2 if (rec.emulation or {}).get("status") == "ok" else 1
            if rank > best_static_rank:
                best_static_rank, better = rank, True
        if better:
            result.best_iteration = len(result.iterations) - 1
            result.best_candidate = cand
            result.best_cubin = asm.cubin
    event("done", best_iteration=result.best_iteration, stop_reason=result.stop_reason,
          seconds=time.perf_counter() - t0)
    return result


def build_report(result: LoweringResult) -> dict[str, Any]:
    """The ``report.json`` document: reference, best candidate, its assembly, verifier findings and
    evaluation, plus a one-line summary of every iteration."""
    best = result.best
    return {
        "kernel": result.kernel,
        "spec_id": result.spec_id,
        "arch": result.arch,
        "provider": result.provider,
        "started_at": result.started_at,
        "gpu": result.gpu,
        "gpu_note": result.gpu_note,
        "stop_reason": result.stop_reason,
        "reference": result.reference,
        "candidate": None if result.best_candidate is None else {
            **result.best_candidate.model_dump(mode="json", exclude={"ptx"}),
            "digest": result.best_candidate.digest(), "iteration": best.iteration if best else None},
        "assembly": best.assembly if best else None,
        "verifier": best.verifier if best else None,
        "evaluation": best.evaluation if best else None,
        "speedup": best.speedup if best else None,
        "iterations": [
            {"iteration": r.iteration, "origin": r.origin, "verdict": r.verdict,
             "speedup": r.speedup, "provider_error": r.provider_error,
             "candidate_digest": r.candidate_digest, "seconds": r.seconds,
             "feedback": r.feedback} for r in result.iterations],
    }
