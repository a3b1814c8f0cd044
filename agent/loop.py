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
from agent.feedback import eval_feedback
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

__all__ = ["LoopOptions", "IterationRecord", "VariantRecord", "LoweringResult", "lower", "Transcript", "build_report",
           "make_context"]

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
        ptx_filename: the name ptxas and verifier diagnostics give the candidate (``ailower eval``
            passes the user's file).
        race_gate: run compute-sanitizer racecheck/synccheck on an accepted candidate about to
            become the best (skipped, with a note, where the toolkit lacks compute-sanitizer).
        variants: ``K``, candidates a model turn may hand in (1..8, :data:`agent.tools.MAX_VARIANTS`).
        profile: profile timed, correct candidates and the baseline with Nsight Compute (one
            bench-size launch each; skipped with the reason where ncu is unavailable).
        knowledge_tokens: token budget of the prompt's knowledge-base section (0: none).
        pipeline: once the loop is done, evaluate the best accepted candidate again with the
            pipeline-context timing (a producer writes its inputs, a consumer reads its outputs;
            :class:`harness.PipelineTiming`) into the result's ``pipeline`` (GPU runs only).
        max_configs: with a GPU, autotune at most this many configs of the spec's space (the
            narrow space's configs first, then every k-th of the rest:
            :func:`harness.suite_baseline.capped_configs`); None: all. The report's
            ``reference.autotune_space`` gives ``configs`` tuned and ``space_configs``.
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
    ptx_filename: str = Field(default="candidate.ptx", min_length=1)
    variants: int = Field(default=1, ge=1, le=8)
    profile: bool = True
    knowledge_tokens: int = Field(default=2500, ge=0, le=20000)
    pipeline: bool = False
    max_configs: int | None = Field(default=None, ge=1)


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
        plan: the turn's one-line plan (variant turns).
        variants: every variant's record (variant turns; the fields above then describe the
            chosen variant, or variant 1 when none passed).
        chosen_variant: index of the variant that became the turn's candidate, or None.
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
    plan: str | None = None
    variants: list["VariantRecord"] = Field(default_factory=list)
    chosen_variant: int | None = None


class VariantRecord(BaseModel):
    """What happened to one variant of a multi-variant turn.

    Attributes:
        index: 1-based position in the turn's ``variants``.
        candidate_digest: :meth:`Candidate.digest`.
        verdict: as :attr:`IterationRecord.verdict`.
        summary: one line: why it failed (ptxas error, verifier finding, evaluation) or how it
            did.
        assembly, verifier, emulation, evaluation: as in :class:`IterationRecord`.
        speedup: baseline time / variant time (the full evaluation's, else the joint job's).
    """

    index: int
    candidate_digest: str
    verdict: Verdict
    summary: str = ""
    assembly: dict[str, Any] | None = None
    verifier: dict[str, Any] | None = None
    emulation: dict[str, Any] | None = None
    evaluation: dict[str, Any] | None = None
    speedup: float | None = None


IterationRecord.model_rebuild()


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
        pipeline: with ``LoopOptions.pipeline``, the best candidate's pipeline-context timing
            (:class:`harness.PipelineTiming` as JSON) or ``{"error": why}``; None otherwise.
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
    pipeline: dict[str, Any] | None = None

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


#: wall-clock limit of one emulated-correctness run, s; a candidate that exceeds it is rejected
#: (a timeout proves nothing: an infinite loop must not pass as "static-only")
EMULATION_TIME_LIMIT_S = 60.0


def _emulate(spec: KernelSpec, arch: str, art: ReferenceArtifacts, ptx: str,
             launch: dict[str, Any], *, filename: str = "candidate.ptx",
             ref_outputs: dict[str, Any] | None = None, cache_dir: Any = None,
             max_ptx_version: int = 90):
    """Emulated correctness on the CPU (no GPU for ``arch`` here): :func:`emulator.run_kernel` at
    the spec's ``verify`` size with the candidate's launch settings.

    A spec with size constexprs (:meth:`kernels.KernelSpec.size_constexprs`: ``N_CTX`` with
    ``value: N``) has one compile per size, and ``art`` is the bench variant. Triton's own
    kernel (``ptx == art.ptx``) is then emulated as its ``verify`` variant, compiled here with
    the verify values (``cache_dir``/``max_ptx_version`` as the lowering's reference compile).
    Any other PTX was written against the bench values, so it is emulated at the ``bench``
    size (a representative CTA subset when the grid is large) and the message says why.

    Without a float64 reference in the spec, Triton's own kernel (``art``, the baseline) is
    emulated once on the same inputs (kept in ``ref_outputs``, a per-lowering cache) and every
    candidate, search arms with other meta-parameters included, must agree with its outputs
    under the spec's tolerance. When Triton's kernel itself cannot be emulated, the candidate's
    run is reported ``unsupported`` (correctness unchecked: never ranked as emulation-passed).
    """
    from emulator import run_kernel

    size, why = "verify", ""
    run_art, run_ptx = art, ptx
    variant = spec.size_constexprs(art.config)
    if variant:
        vart = None
        if ptx == art.ptx:
            from harness import ReferenceCompileError, compile_reference
            try:
                vart = compile_reference(spec, arch, art.config, cache_dir=cache_dir,
                                         max_ptx_version=max_ptx_version, size="verify")
            except ReferenceCompileError as exc:
                why = (f"the verify variant did not compile ({str(exc)[:300]}), so the bench "
                       f"variant is emulated at the bench size; ")
                size = "bench"
        if vart is not None:
            run_art, run_ptx = vart, vart.ptx
            launch = {**launch, "threads": vart.abi.threads,
                      "dynamic_smem": vart.abi.dynamic_smem,
                      "global_scratch_size": vart.abi.global_scratch_size}
        elif not why:
            size = "bench"
            why = (f"the spec's size constexpr(s) {', '.join(variant)} differ between sizes and "
                   f"this PTX is compiled for the bench values, so it is emulated at the bench "
                   f"size; ")
    expected = None
    ref_failed = None  # Triton's own kernel, when it could not be emulated as the reference
    if spec.reference is None:
        cache = ref_outputs if ref_outputs is not None else {}
        key = f"{arch}|{art.config.key()}|{size}"
        if key not in cache:
            got: dict[str, Any] = {}
            ref = run_kernel(run_art.ptx, spec, arch, size=size, config=art.config,
                             threads=run_art.abi.threads,
                             dynamic_smem=run_art.abi.dynamic_smem,
                             global_scratch_size=run_art.abi.global_scratch_size,
                             time_limit_s=EMULATION_TIME_LIMIT_S, race=False,
                             filename="triton-reference.ptx", capture=got)
            cache[key] = got if ref.status == "ok" else ref
        if isinstance(cache[key], dict):
            expected = cache[key]
        else:
            ref_failed = cache[key]
    res = run_kernel(run_ptx, spec, arch, size=size, config=art.config,
                     meta=launch.get("meta") or None,
                     threads=int(launch.get("threads") or run_art.abi.threads),
                     dynamic_smem=int(launch.get("dynamic_smem") or run_art.abi.dynamic_smem),
                     global_scratch_size=int(launch.get("global_scratch_size",
                                                        run_art.abi.global_scratch_size)),
                     time_limit_s=EMULATION_TIME_LIMIT_S, filename=filename, expected=expected)
    if why:
        res = res.model_copy(update={"message": why + res.message})
    if ref_failed is None or res.status != "ok":
        return res
    return res.model_copy(update={
        "status": "unsupported",
        "message": (f"ran to completion, but correctness is unchecked: the spec has no float64 "
                    f"reference and Triton's own kernel could not be emulated as the reference "
                    f"({ref_failed.status}: {ref_failed.message[:300]})")})


def race_verdict(gate: Any, emulate: Callable[[], Any]) -> tuple[bool, str]:
    """(passes, note) of the race gate's result ``gate`` (:class:`harness.RaceGateResult`).

    A gate that passed passes; one that failed fails, except where racecheck reported hazards in
    a kernel it is known to misjudge (``gate.racecheck_unreliable``, a barrier with a thread count
    below the CTA's: :mod:`harness.racecheck_limits`): there the emulator's happens-before
    analysis decides, on the candidate at the verify size (``emulate()``, an
    :class:`emulator.EmulationResult`): it passes only when the emulation ran to completion,
    the outputs match and no happens-before error was found. Emulation that is unsupported,
    faults, times out or finds a race leaves racecheck's verdict (rejected). The note says which.
    """
    if gate.ok:
        return True, ""
    if not gate.racecheck_unreliable:
        return False, ""
    emu = emulate()
    if emu.status == "ok" and emu.ok:
        return True, (f"racecheck's hazards overruled: {gate.racecheck_unreliable}; the emulator's "
                      f"happens-before analysis finds no race at the verify size "
                      f"({emu.summary()[:200]})")
    return False, (f"racecheck's hazards stand: {gate.racecheck_unreliable}, but emulation did "
                   f"not clear the kernel ({emu.status}: {emu.summary()[:300]})")


class _Checks:
    """The gates one candidate goes through (assembly, verifier, emulation or GPU evaluation,
    race gate, ncu profile), shared by single-candidate and variant turns."""

    def __init__(self, spec: KernelSpec, arch: str, art: ReferenceArtifacts, options: LoopOptions,
                 evaluator: GPUEvaluator | None,
                 profiles: Callable[[Candidate, bytes], tuple[Any, str]]):
        self.spec, self.arch, self.art, self.options = spec, arch, art, options
        self.evaluator, self.profiles = evaluator, profiles
        self.ref_outputs: dict[str, Any] = {}  # Triton's own outputs, emulated (no f64 reference)

    def static(self, cand: Candidate, times: dict[str, float], key: str = ""
               ) -> tuple[AssemblyResult, Any, list[str]]:
        """Assemble and verify; returns (assembly, verifier report, feedback parts)."""
        t = time.perf_counter()
        asm = assemble(cand.ptx, self.arch, ptxas=self.options.ptxas)
        times[f"assemble{key}"] = time.perf_counter() - t
        t = time.perf_counter()
        rep = verifier.verify(cand.ptx, arch=self.arch, abi=self.art.abi, threads=cand.threads,
                              filename=self.options.ptx_filename)
        times[f"verify{key}"] = time.perf_counter() - t
        parts = [asm.summary(cand.ptx, filename=self.options.ptx_filename)]
        rendered = rep.render("full")
        parts.append("verifier: " + ("no errors" if rep.ok else "REJECTED") + (
            "\n" + rendered if rendered else ""))
        return asm, rep, parts

    def emulate(self, cand: Candidate, times: dict[str, float], key: str = ""
                ) -> tuple[Any, bool, str]:
        """Emulated correctness (no GPU); returns (result, passed-or-unsupported, text)."""
        t = time.perf_counter()
        emu = _emulate(self.spec, self.arch, self.art, cand.ptx, cand.model_dump(),
                       filename=self.options.ptx_filename, ref_outputs=self.ref_outputs,
                       cache_dir=self.options.cache_dir,
                       max_ptx_version=self.options.max_ptx_version)
        times[f"emulate{key}"] = time.perf_counter() - t
        # unsupported / memory: not emulated (no verdict on the candidate either way)
        ok = emu.status in ("ok", "unsupported", "memory") and not (emu.status == "ok" and not emu.ok)
        return emu, ok, "GPU evaluation skipped: no GPU on this host; " + emu.summary()

    def feedback(self, res: EvalResult, cand: Candidate, cubin: bytes) -> str:
        """:func:`agent.feedback.eval_feedback` with ncu profiles of a timed, correct run."""
        c = res.candidate
        prof, note = None, ""
        if res.status == "ok" and c is not None and c.status == "ok" and c.timing is not None:
            prof, note = self.profiles(cand, cubin)
        return eval_feedback(res, prof, note)

    def gpu(self, cand: Candidate, cubin: bytes, times: dict[str, float], best_speed: float,
            key: str = "") -> tuple[str, float | None, dict[str, Any], list[str]]:
        """Full GPU evaluation (+ race gate for a new best); returns (verdict, speedup,
        evaluation dict, feedback parts)."""
        ev = self.evaluator
        assert ev is not None
        t = time.perf_counter()
        res = evaluate_candidate(self.spec, self.art, cand, cubin, ev, seeds=self.options.seeds)
        times[f"evaluate{key}"] = time.perf_counter() - t
        evaluation = res.model_dump(mode="json")
        parts = [self.feedback(res, cand, cubin)]
        c = res.candidate
        if not (res.status == "ok" and c is not None and c.status == "ok" and res.speedup):
            return "rejected-evaluation", None, evaluation, parts
        if self.options.race_gate and res.speedup > best_speed:  # about to become the best
            g = race_gate(self.spec, self.art, cand, cubin, ev)
            evaluation["race_gate"] = g.model_dump()
            parts.append(f"race gate: {g.message}")
            ok, note = race_verdict(g, lambda: self.emulate(cand, times, key)[0])
            if note:
                evaluation["race_gate"]["emulation"] = note
                parts.append(f"race gate: {note}")
            if not ok:
                return "rejected-evaluation", None, evaluation, parts
        return "accepted", res.speedup, evaluation, parts

    def joint(self, survivors: list[tuple[int, Candidate, bytes]]) -> dict[int, tuple[bool, float | None, str]]:
        """One worker job: the baseline and every survivor, correctness on the run's seeds and
        interleaved timing (as a search round: a variant that hangs or crashes the worker is
        taken out and the job runs again without it, three attempts at most); returns index ->
        (correct, time ratio baseline/variant, message)."""
        from harness.evaluate import kernel_under_test, reference_under_test

        ev = self.evaluator
        assert ev is not None
        out: dict[int, tuple[bool, float | None, str]] = {}
        remaining = list(survivors)
        for _attempt in range(3):  # a hang or crash takes its variant out; the rest run again
            kuts = [reference_under_test(self.spec, self.art, label="base")]
            for j, c, cubin in remaining:
                kuts.append(kernel_under_test(
                    self.spec, self.art.abi, cubin, label=f"variant {j}", role="candidate",
                    config=self.art.config, threads=c.threads, dynamic_smem=c.dynamic_smem,
                    cluster=c.cluster_dims, meta=c.meta,
                    global_scratch_bytes=c.global_scratch_size,
                    global_scratch_align=c.global_scratch_align))
            res = ev.run(ev.request(self.spec, "autotune", kuts, seeds=list(self.options.seeds),
                                    min_reps=10, max_reps=100))
            if res.status not in ("hang", "crash"):
                break
            bad = {k.label for k in res.kernels if k.status in ("hang", "crash")}
            culprits = [j for j, _c, _b in remaining if f"variant {j}" in bad]
            if not culprits:  # the baseline, or nobody named: every variant fails
                for j, _c, _b in remaining:
                    out[j] = (False, None, f"{res.status}: {res.message[:200]}")
                return out
            for j in culprits:
                out[j] = (False, None, f"{res.status}: {res.message[:200]}")
            remaining = [x for x in remaining if x[0] not in culprits]
            if not remaining:
                return out
        else:
            for j, _c, _b in remaining:
                out[j] = (False, None, "gave up after repeated hangs/crashes")
            return out
        runs = {k.label: k for k in res.kernels}
        base = runs.get("base")
        base_ms = base.timing.median_ms if base and base.timing and base.status == "ok" else None
        for j, _c, _b in remaining:
            k = runs.get(f"variant {j}")
            if k is None or k.status != "ok" or k.timing is None:
                why = (f"{k.status}: {k.message}" if k is not None
                       else f"no result ({res.status}: {res.message[:200]})")
                out[j] = (False, None, why)
                continue
            ratio = base_ms / k.timing.median_ms if base_ms and k.timing.median_ms > 0 else None
            out[j] = (True, ratio, f"correct; {k.timing.median_ms:.4f} ms"
                      + (f", {ratio:.3f}x the baseline in the joint job" if ratio else ""))
        return out


def _seed(provider: Any, ptx: str) -> None:
    """Tell the provider its best valid candidate (:meth:`Provider.seed`). Wrappers that hold the
    real provider as ``inner`` without forwarding ``seed`` (campaign's usage meter, the server's
    cost cap) are looked through; a provider without a seed of its own is left alone."""
    p = provider
    for _ in range(8):
        own = getattr(type(p), "seed", None)
        if own is not None and own is not Provider.seed:  # a real seed (not the no-op default)
            p.seed(ptx)
            return
        p = getattr(p, "inner", None)
        if p is None:
            return


def _first_line(parts: list[str], verdict: str) -> str:
    """The line of a rejected variant's feedback that says why (ptxas error, verifier finding)."""
    lines = "\n".join(parts).splitlines()
    for n, ln in enumerate(lines):
        s = ln.strip()
        hit = ((verdict == "rejected-assembly" and ("error" in s.lower() or "fatal" in s.lower()))
               or (verdict == "rejected-verifier" and " error[" in f" {s}"))
        if hit:
            nxt = lines[n + 1].strip() if n + 1 < len(lines) else ""
            src = nxt.split("|", 1)[1].strip() if "|" in nxt else ""
            return s + (f" ({src})" if src else "")
    return lines[0] if lines else verdict


def _one_turn(i: int, cand: Candidate, checks: _Checks, times: dict[str, float],
              best_speed: float) -> tuple[IterationRecord, tuple[Candidate, bytes] | None]:
    """Gates and feedback of a turn with one candidate."""
    rec = IterationRecord(iteration=i, origin=cand.origin, verdict="rejected-assembly",
                          candidate_digest=cand.digest())
    asm, rep, parts = checks.static(cand, times)
    rec.assembly, rec.verifier = _assembly_dict(asm), rep.to_dict()
    if not asm.ok:
        rec.verdict = "rejected-assembly"
    elif not rep.ok:
        rec.verdict = "rejected-verifier"
    elif checks.evaluator is None:
        emu, ok, text = checks.emulate(cand, times)
        rec.emulation = emu.model_dump(mode="json")
        parts.append(text)
        rec.verdict = "static-only" if ok else "rejected-evaluation"
    else:
        rec.verdict, rec.speedup, rec.evaluation, more = checks.gpu(cand, asm.cubin, times,
                                                                    best_speed)
        parts += more
    rec.seconds = times
    rec.feedback = "\n".join(parts)
    return rec, ((cand, asm.cubin) if rec.verdict in ("accepted", "static-only") else None)


def _variant_turn(i: int, prop: Proposal, checks: _Checks, times: dict[str, float],
                  best_speed: float) -> tuple[IterationRecord, tuple[Candidate, bytes] | None]:
    """Gates and feedback of a turn with K variants: each is assembled and verified; the
    survivors run emulated (no GPU) or in one worker job interleaved with the baseline; the
    fastest correct one is evaluated in full (secret seed, CI, race gate) and, if it passes, is
    the turn's candidate. The others' outcomes are summarised in the feedback."""
    cands = prop.variants
    recs: list[VariantRecord] = []
    full: dict[int, list[str]] = {}
    cubins: dict[int, bytes] = {}
    for j, c in enumerate(cands, 1):
        asm, rep, parts = checks.static(c, times, f"[{j}]")
        vr = VariantRecord(index=j, candidate_digest=c.digest(), verdict="rejected-assembly",
                           assembly=_assembly_dict(asm), verifier=rep.to_dict())
        if not asm.ok:
            vr.verdict = "rejected-assembly"
        elif not rep.ok:
            vr.verdict = "rejected-verifier"
        else:
            vr.verdict = "static-only"  # survivor, until evaluated
            cubins[j] = asm.cubin
        if vr.verdict != "static-only":
            vr.summary = _first_line(parts, vr.verdict)
        full[j] = parts
        recs.append(vr)
    survivors = [(r.index, cands[r.index - 1], cubins[r.index]) for r in recs
                 if r.verdict == "static-only"]
    chosen: int | None = None
    if checks.evaluator is None:
        best_rank = 0
        for j, c, _b in survivors:
            emu, ok, text = checks.emulate(c, times, f"[{j}]")
            vr = recs[j - 1]
            vr.emulation = emu.model_dump(mode="json")
            full[j].append(text)
            vr.verdict = "static-only" if ok else "rejected-evaluation"
            vr.summary = text.removeprefix("GPU evaluation skipped: no GPU on this host; ")
            rank = (2 if emu.status == "ok" else 1) if ok else 0
            if rank > best_rank:
                best_rank, chosen = rank, j
    elif survivors:
        t = time.perf_counter()
        joint = checks.joint(survivors)
        times["evaluate[joint]"] = time.perf_counter() - t
        order = sorted((j for j in joint if joint[j][0]),
                       key=lambda j: (-(joint[j][1] or 0.0), j))
        for j, (ok, ratio, msg) in joint.items():
            vr = recs[j - 1]
            vr.summary = msg
            vr.verdict = "rejected-evaluation" if not ok else "static-only"
            vr.speedup = ratio
        for j in order:  # the fastest correct one is evaluated in full
            c = cands[j - 1]
            vr = recs[j - 1]
            vr.verdict, vr.speedup, vr.evaluation, more = checks.gpu(c, cubins[j], times,
                                                                     best_speed, f"[{j}]")
            full[j] += more
            if vr.verdict == "accepted":
                chosen = j
                break
            vr.summary = "failed the full evaluation: " + _first_line(more, "")
        for j in order:
            if recs[j - 1].verdict == "static-only":  # correct in the joint job, not confirmed
                recs[j - 1].verdict = "rejected-evaluation"
                recs[j - 1].summary += "; not evaluated in full (a faster variant was)"
    pick = chosen if chosen is not None else recs[0].index
    top = recs[pick - 1]
    rec = IterationRecord(iteration=i, origin=cands[pick - 1].origin, verdict=top.verdict,
                          candidate_digest=top.candidate_digest, assembly=top.assembly,
                          verifier=top.verifier, evaluation=top.evaluation,
                          emulation=top.emulation, speedup=top.speedup, plan=prop.plan,
                          variants=recs, chosen_variant=chosen)
    lines = [f"plan: {prop.plan}" if prop.plan else "plan: (none given)",
             f"{len(cands)} variants this turn:"]
    for r in recs:
        lines.append(f"- variant {r.index}: {r.verdict}" + (f": {r.summary}" if r.summary else ""))
    if chosen is not None:
        lines += ["", f"variant {chosen} is this turn's candidate; its full outcome:",
                  *full[chosen]]
    else:
        lines += ["", "no variant passed; the outcome of variant 1 in full:", *full[1]]
    rec.seconds = times
    rec.feedback = "\n".join(lines)
    return rec, ((cands[chosen - 1], cubins[chosen]) if chosen is not None else None)


def make_context(spec: KernelSpec, arch: str, art: ReferenceArtifacts, gpu: bool,
                 options: LoopOptions) -> ProposalContext:
    """The :class:`ProposalContext` the loop hands its provider for ``art`` (the baseline's
    artifacts): the same one ``ailower prompt`` renders.

    Raises:
        ValueError: ``arch`` has no knowledge-base facts while ``options.knowledge_tokens`` > 0.
    """
    from agent.knowledge import knowledge_section

    knowledge = (knowledge_section(spec, arch, art.ttgir, options.knowledge_tokens)
                 if options.knowledge_tokens and arch in _KNOWN_ARCHS else "")
    return _context(spec, arch, art, [], gpu, options.max_tool_calls, options.variants,
                    knowledge)


_KNOWN_ARCHS = ("sm_89", "sm_90a", "sm_100a")


def _context(spec: KernelSpec, arch: str, art: ReferenceArtifacts, refs: list[ReferenceArtifacts],
             gpu: bool, max_tool_calls: int, max_variants: int = 1, knowledge: str = ""
             ) -> ProposalContext:
    return ProposalContext(
        spec=spec, arch=arch, config=art.config, constexprs=spec.constexprs(art.config),
        abi=art.abi, triton_source=spec.source.kernel_text(), ttgir=art.ttgir, llir=art.llir,
        reference_ptx=art.ptx, reference_cubin=art.cubin, configs=tuple(spec.configs()), gpu_available=gpu,
        max_tool_calls=max_tool_calls, max_variants=max_variants, knowledge=knowledge)


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
    gpu = evaluator is not None and options.gpu is not False
    tuned = spec.configs()
    if gpu:  # the GPU autotunes every config of the space (at most ``max_configs`` of them)
        from harness.suite_baseline import capped_space

        tuned = capped_space(spec, options.max_configs)
        refs, failures = compile_space(spec, arch, cache_dir=options.cache_dir, configs=tuned,
                                       max_ptx_version=options.max_ptx_version)
    else:
        # nothing is autotuned without a GPU: the baseline is the first config that compiles (as
        # before), and a provider compiles the others when it wants them; a widened space
        # (issue 22: up to 224 configs) would otherwise cost minutes of CPU per static lowering
        refs, failures = [], []
        for cfg in spec.configs():
            ok, bad = compile_space(spec, arch, cache_dir=options.cache_dir, configs=[cfg],
                                    max_ptx_version=options.max_ptx_version)
            failures += bad
            if ok:
                refs = ok
                break
    event("reference_compiled", configs=len(refs), failures=[str(f) for f in failures],
          seconds=time.perf_counter() - t0)
    if not refs:
        raise ReferenceCompileError(f"Triton compiled none of the {len(failures)} configs of "
                                    f"{spec.name} for {arch}: {failures[0] if failures else ''}")
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
    from kernels.registry import space_of

    # the autotune space the baseline was tuned over: ``wide`` (the suite default, at least the
    # usual Triton grid per kind), ``narrow`` (the spaces before issue 22) or ``custom``
    reference["autotune_space"] = {"space": space_of(spec) or "custom",
                                   "configs": len(tuned), "space_configs": len(spec.configs())}
    reference["baseline"] = {"config": art.config.key(), "abi": art.abi.model_dump(),
                             "autotuned": baseline is not None}
    result = LoweringResult(kernel=spec.name, spec_id=spec.identity(), arch=arch,
                            provider=provider.name, started_at=started, reference=reference, gpu=gpu)
    ctx = make_context(spec, arch, art, gpu, options)
    ref_emulated: dict[str, Any] = {}  # Triton's own outputs, emulated (specs without reference)

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
                emu = _emulate(spec, arch, art, ptx, args, ref_outputs=ref_emulated,
                               cache_dir=options.cache_dir,
                               max_ptx_version=options.max_ptx_version)
                return "evaluate: no GPU on this host; " + emu.summary()
            a = assemble(ptx, arch, ptxas=options.ptxas)
            if not a.ok:
                return a.summary(ptx)
            cand = Candidate(ptx=ptx, threads=int(args.get("threads", art.abi.threads)),
                             meta={**art.config.meta, **(args.get("meta") or {})},
                             dynamic_smem=int(args.get("dynamic_smem", art.abi.dynamic_smem)))
            res = evaluate_candidate(spec, art, cand, a.cubin, evaluator,  # type: ignore[arg-type]
                                     seeds=options.seeds)
            return checks.feedback(res, cand, a.cubin)
        raise ValueError(f"unknown tool {name!r}")

    base_profile: list[Any] = []  # the baseline's ncu report, profiled once

    def profiles(cand: Candidate, cubin: bytes) -> tuple[Any, str]:
        """(candidate, baseline) ncu reports of one bench-size launch, or (None, why not)."""
        if not options.profile:
            return None, "ncu profiling off (LoopOptions.profile)"
        if not isinstance(evaluator, GPUEvaluator):  # a plug-in evaluator: no local worker
            return None, (f"ncu unavailable: the evaluator ({type(evaluator).__name__}) is not "
                          "a local GPU worker")
        from harness.profile import profile_launch

        if not base_profile:
            base_profile.append(profile_launch(spec, art, None, None, evaluator))
        return (profile_launch(spec, art, cand, cubin, evaluator), base_profile[0]), ""

    checks = _Checks(spec, arch, art, options, evaluator if gpu else None, profiles)
    checks.ref_outputs = ref_emulated  # one emulation of Triton's kernel per lowering

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
        if prop.variants:
            rec, chosen = _variant_turn(i, prop, checks, times, best_speed)
        else:
            rec, chosen = _one_turn(i, cand, checks, times, best_speed)
        result.iterations.append(rec)
        event("iteration", **rec.model_dump(
            mode="json", exclude={"evaluation": True, "variants": {"__all__": {"evaluation"}}}),
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
        if better and chosen is not None:
            result.best_iteration = len(result.iterations) - 1
            result.best_candidate, result.best_cubin = chosen
            _seed(provider, chosen[0].ptx)
    if options.pipeline and gpu and result.best_candidate is not None and \
            result.best_cubin is not None and (result.best and result.best.speedup):
        t = time.perf_counter()
        res = evaluate_candidate(spec, art, result.best_candidate, result.best_cubin,
                                 evaluator, seeds=options.seeds,  # type: ignore[arg-type]
                                 pipeline=True)
        c = res.candidate
        if res.pipeline is not None and res.status == "ok" and c is not None and c.status == "ok":
            result.pipeline = res.pipeline.model_dump(mode="json")
        else:  # not timed, or wrong in the context (its output depended on the launch history)
            result.pipeline = {"error": f"{res.status}/{c.status if c else 'no candidate'}: "
                                        f"{res.message or (c.message if c else '')}"[:300]}
        event("pipeline", seconds=time.perf_counter() - t, **result.pipeline)
    best = result.best  # the event names the 1-based iteration, as every other view does
    event("done", best_iteration=best.iteration if best is not None else None,
          stop_reason=result.stop_reason,
          seconds=time.perf_counter() - t0)
    return result


def is_triton_own(origin: str | None) -> bool:
    """Whether a candidate of this ``origin`` is Triton's own PTX for one of the spec's configs,
    unmodified (``triton:<config>``, ``search:baseline``, ``search:triton[<config>]``)."""
    o = origin or ""
    return (o.startswith("triton:") or o == "search:baseline"
            or (o.startswith("search:triton[") and o.endswith("]") and "+" not in o))


def reference_suspect(result: LoweringResult) -> str | None:
    """A hint when Triton's own PTX fails the spec's correctness check, else None.

    Triton's own compile of the kernel is the reference implementation: when every such
    candidate that was evaluated (on the GPU or in the emulator) was rejected, and none passed,
    the spec (roles, dtypes, shapes, sizes, distributions) or its NumPy reference is the likely
    culprit, not the candidates."""
    own = [r for r in result.iterations if is_triton_own(r.origin)]
    failed = [r for r in own if r.verdict == "rejected-evaluation"]
    if not failed or any(r.verdict in ("accepted", "static-only") for r in own):
        return None
    return (f"Triton's own PTX fails the reference check ({len(failed)} of {len(own)} of its "
            f"configs, e.g. iteration {failed[0].iteration}, {failed[0].origin}): the spec or its "
            "reference is probably wrong (check the parameters' roles, dtypes and shapes, the "
            "sizes and the reference function)")


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
        "pipeline": result.pipeline,
        "iterations": [
            {"iteration": r.iteration, "origin": r.origin, "verdict": r.verdict,
             "speedup": r.speedup, "provider_error": r.provider_error,
             "candidate_digest": r.candidate_digest, "seconds": r.seconds,
             "feedback": r.feedback,
             **({"plan": r.plan, "chosen_variant": r.chosen_variant,
                 "variants": [{"index": v.index, "verdict": v.verdict,
                               "candidate_digest": v.candidate_digest, "summary": v.summary,
                               "speedup": v.speedup} for v in r.variants]}
                if r.variants else {})} for r in result.iterations],
    }
