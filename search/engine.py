"""The search itself: build legal candidates, check them statically, select them on the GPU.

Two stages, each a :func:`search.halving.successive_halving` over one pool of arms:

1. **Triton configs**: the autotuned baseline plus legal configs beyond the autotune space
   (:func:`search.space.expand_space`), compiled by Triton (in parallel processes), checked with
   :func:`search.space.legal_after_compile`, assembled by ptxas and verified.
2. **PTX passes** on the best Triton PTX of stage 1: every pass of :mod:`search.ptx_passes` that
   applies, then the pairwise composition of the passes that beat their input.

An arm enters the GPU rounds only when ptxas assembles it and the verifier reports no error. On
the GPU each round is one worker job (:mod:`harness.gpu.worker`, ``autotune`` mode: each arm is
checked against the float64 reference on a fresh seed, then timed interleaved with the baseline
and compared with it at the bench size); an arm that is wrong in any round is out for good.

Public API: :class:`Arm`, :class:`SearchEngine`, :class:`SearchOutcome`, :func:`precompile`.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import verifier
from harness import Candidate, GPUEvaluator, ReferenceArtifacts, assemble, compile_reference
from harness.errors import ReferenceCompileError
from harness.evaluate import kernel_under_test, reference_under_test
from kernels.spec import Config, KernelSpec
from search.halving import HalvingResult, Measurement, successive_halving
from search.ptx_passes import PASSES, PassContext, apply_passes, approx_allowed
from search.space import expand_space, legal_after_compile

__all__ = ["Arm", "SearchEngine", "SearchOutcome", "precompile", "pass_context", "SMALL_BUDGET_S",
           "CLEAR_WIN", "MAX_REFINE_STEPS"]

MAX_REFINE_STEPS = 3
"""At most this many local-search steps around a winning config (see ``SearchEngine._refine``)."""

CLEAR_WIN = 0.97
"""A config whose time is under this fraction of the baseline's is searched around once more even
when the budget is spent (one round of at most ``refine_configs`` configs)."""

SMALL_BUDGET_S = 15.0
"""Below this budget (seconds) configs and PTX passes share one halving (passes on the baseline's
PTX); above it the passes are applied to the best config of a first halving."""


@dataclass
class Arm:
    """One candidate of the search.

    Attributes:
        id: short unique id (``c3``, ``c3+ld.nc``).
        candidate: PTX and launch settings.
        cubin: assembled by ptxas with Triton's flags.
        config: the Triton config its PTX came from.
        transform: what produced it, for reports: ``baseline``, ``triton[BLOCK_M=256,...]``,
            ``triton[...]+ld.nc+maxnreg=168``.
        passes: the PTX passes applied, in order.
        registers, spill_bytes: from ptxas.
    """

    id: str
    candidate: Candidate
    cubin: bytes
    config: Config
    transform: str
    passes: tuple[str, ...] = ()
    registers: int | None = None
    spill_bytes: int = 0


@dataclass
class SearchOutcome:
    """What a search produced.

    Attributes:
        ranking: arms, best first (the baseline among them), with their time ratio to the
            baseline from the last round that measured them (None without a GPU).
        arms: every arm that passed the static checks, by id.
        rejected: arm id or config key -> why it never reached the GPU.
        stages: per stage, the halving record (None without a GPU).
        gpu: whether selection ran on a GPU.
        seconds: wall time per phase.
        note: e.g. "selection needs a GPU".
    """

    ranking: list[tuple[Arm, float | None]]
    arms: dict[str, Arm] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    stages: dict[str, HalvingResult | None] = field(default_factory=dict)
    gpu: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def table(self) -> list[dict[str, Any]]:
        """One row per ranked arm: id, transformation, ratio (candidate/baseline time), speedup."""
        return [{"id": a.id, "transform": a.transform, "ratio": r,
                 "speedup": (1.0 / r) if r else None, "registers": a.registers}
                for a, r in self.ranking]


def _compile_task(spec_json: str, arch: str, cfg_json: str, cache_dir: str | None,
                  max_ptx_version: int) -> tuple[str, str | None]:
    from harness import ReferenceCompileError as RCE
    from harness import compile_reference as cr

    spec = KernelSpec.model_validate_json(spec_json)
    cfg = Config.model_validate_json(cfg_json)
    try:
        cr(spec, arch, cfg, cache_dir=Path(cache_dir) if cache_dir else None,
           max_ptx_version=max_ptx_version)
    except RCE as exc:
        return cfg.key(), str(exc)[:300]
    return cfg.key(), None


def precompile(jobs: Sequence[tuple[KernelSpec, Config]], arch: str, cache_dir: Path, *,
               workers: int, max_ptx_version: int = 90) -> dict[str, str]:
    """Compile configs into the reference cache in ``workers`` spawned processes.

    Args:
        jobs: ``(spec, config)`` pairs.
        arch: target.
        cache_dir: the reference-compile cache (later :func:`harness.compile_reference` calls hit it).
        workers: processes (1: compile in this process).
        max_ptx_version: passed to the compile.

    Returns:
        ``"spec:config" -> error`` for the configs Triton could not compile.
    """
    errors: dict[str, str] = {}
    if workers <= 1:
        for spec, cfg in jobs:
            try:
                compile_reference(spec, arch, cfg, cache_dir=cache_dir, max_ptx_version=max_ptx_version)
            except ReferenceCompileError as exc:
                errors[f"{spec.name}:{cfg.key()}"] = str(exc)[:300]
        return errors
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futs = {pool.submit(_compile_task, spec.model_dump_json(), arch, cfg.model_dump_json(),
                            str(cache_dir), max_ptx_version): spec.name for spec, cfg in jobs}
        for fut in cf.as_completed(futs):
            key, err = fut.result()
            if err:
                errors[f"{futs[fut]}:{key}"] = err
    return errors


def pass_context(spec: KernelSpec, art: ReferenceArtifacts, registers: int | None) -> PassContext:
    """The :class:`PassContext` of a compiled config: input pointer params (role ``in``),
    launch shape, ptxas register count and whether approximate math is allowed (every output's
    tolerance at least fp16's)."""
    roles = {p.name: p.role for p in spec.params}
    inputs = frozenset(p.name for p in art.abi.params
                       if p.source == "pointer" and roles.get(p.spec_param or "") == "in")
    tols = [(spec.tolerance(p.dtype).rtol, spec.tolerance(p.dtype).max_norm_err)  # type: ignore[arg-type]
            for p in spec.outputs()]
    return PassContext(input_params=inputs, threads=art.abi.threads,
                       dynamic_smem=art.abi.dynamic_smem, registers=registers,
                       approx_ok=approx_allowed(tols))


class SearchEngine:
    """Searches one kernel on one target.

    Args:
        spec: the kernel.
        arch: the target (``sm_90a``).
        baseline: the autotuned baseline's artifacts (the contract and arm ``base``).
        evaluator: GPU job runner; None = no GPU (candidates are built and checked statically).
        cache_dir: reference-compile cache.
        max_ptx_version: for Triton compiles.
        ptxas: the ``AILOWER_PTXAS`` setting.
        workers: compile processes.
        log: progress sink.
    """

    def __init__(self, spec: KernelSpec, arch: str, baseline: ReferenceArtifacts, *,
                 evaluator: GPUEvaluator | None = None, cache_dir: Path | None = None,
                 max_ptx_version: int = 90, ptxas: str | None = None, workers: int = 1,
                 log: Callable[[str], None] = lambda s: None):
        self.spec, self.arch, self.baseline = spec, arch, baseline
        self.evaluator, self.cache_dir = evaluator, cache_dir
        self.max_ptx_version, self.ptxas, self.workers, self.log = max_ptx_version, ptxas, workers, log
        self.arms: dict[str, Arm] = {}
        self.rejected: dict[str, str] = {}
        self._arts: dict[str, ReferenceArtifacts] = {}
        self._base_errors: set[str] | None = None

    # ---- building arms ------------------------------------------------------------------------
    def _candidate(self, art: ReferenceArtifacts, ptx: str, origin: str) -> Candidate:
        return Candidate.with_triton_launch(ptx, art.abi, art.config.meta, origin)

    def _verifier_errors(self, ptx: str, threads: int) -> set[str]:
        rep = verifier.verify(ptx, arch=self.arch, abi=self.baseline.abi, threads=threads,
                              filename="candidate.ptx")
        return {f"{f.rule}:{f.message[:80]}" for f in rep.findings if str(f.severity).endswith("error")}

    def check_many(self, items: Sequence[tuple[str, ReferenceArtifacts, str, str, tuple[str, ...]]]
                   ) -> list[Arm]:
        """:meth:`check` for several ``(id, artifacts, ptx, transform, passes)``; ptxas runs in
        ``workers`` threads (it is a subprocess), the verifier in this thread."""
        if not items:
            return []
        with cf.ThreadPoolExecutor(max_workers=max(1, self.workers)) as pool:
            asms = list(pool.map(lambda it: assemble(it[2], self.arch, ptxas=self.ptxas), items))
        out = []
        for (arm_id, art, ptx, transform, passes), a in zip(items, asms):
            arm = self.check(arm_id, art, ptx, transform, passes, assembled=a)
            if arm is not None:
                out.append(arm)
        return out

    def check(self, arm_id: str, art: ReferenceArtifacts, ptx: str, transform: str,
              passes: tuple[str, ...] = (), assembled: Any = None) -> Arm | None:
        """Assemble and verify one candidate; register it as an arm, or record why not."""
        a = assembled if assembled is not None else assemble(ptx, self.arch, ptxas=self.ptxas)
        if not a.ok or a.cubin is None:
            self.rejected[arm_id] = "ptxas: " + "; ".join(d.message for d in a.errors)[:300]
            return None
        errs = self._verifier_errors(ptx, art.abi.threads)
        if errs:
            self.rejected[arm_id] = "verifier: " + "; ".join(sorted(errs))[:300]
            return None
        arm = Arm(id=arm_id, candidate=self._candidate(art, ptx, f"search:{transform}"),
                  cubin=a.cubin, config=art.config, transform=transform, passes=passes,
                  registers=a.registers, spill_bytes=int(getattr(a, "spill_stores", 0) or 0))
        self.arms[arm_id] = arm
        self._arts[arm_id] = art
        return arm

    def config_arms(self, limit: int) -> list[Arm]:
        """The baseline arm plus up to ``limit`` legal configs beyond the autotune space."""
        t = time.perf_counter()
        out = []
        base = self.check("base", self.baseline, self.baseline.ptx, "baseline")
        if base is None:
            raise ReferenceCompileError(f"the baseline of {self.spec.name} does not pass ptxas and the "
                                        f"verifier: {self.rejected.get('base')}")
        out.append(base)
        cands = expand_space(self.spec, around=self.baseline.config, limit=limit)
        out += self._build_configs(cands, prefix="c")
        self.log(f"  {self.spec.name}: {len(out) - 1} legal configs beyond the autotune space "
                 f"({len(cands)} proposed) in {time.perf_counter() - t:.1f} s")
        return out

    def refine_arms(self, around: Arm, limit: int) -> list[Arm]:
        """Up to ``limit`` arms from configs neighbouring ``around``'s config that were not tried
        yet (the next round of a local search around the current winner); neighbours that Triton
        cannot compile, that overflow shared memory or fail the static checks do not count."""
        tried = {a.config.key() for a in self.arms.values()} | set(self.rejected)
        cands = [(c, w) for c, w in expand_space(self.spec, around=around.config, limit=limit * 4)
                 if c.key() not in tried]
        used = [int(m.group(1)) for k in [*self.arms, *self.rejected]
                if (m := re.fullmatch(r"r(\d+)", k))]
        n = max(used, default=-1) + 1  # ids stay unique when some neighbours were skipped
        out: list[Arm] = []
        i = 0
        # configs that fail to compile or to fit do not count: build until `limit` arms exist,
        # compiling at most 2 * limit neighbours
        while len(out) < limit and i < min(len(cands), 2 * limit):
            chunk = cands[i:min(i + limit - len(out), 2 * limit)]
            out += self._build_configs(chunk, prefix="r", start=n + i)
            i += len(chunk)
        return out

    def _build_configs(self, cands: Sequence[tuple[Config, str]], *, prefix: str,
                       start: int = 0) -> list[Arm]:
        # a spawned pool costs a few seconds of imports per process: worth it beyond a few configs
        if self.cache_dir is not None and self.workers > 1 and len(cands) > 4:
            errs = precompile([(self.spec, c) for c, _ in cands], self.arch, self.cache_dir,
                              workers=min(self.workers, len(cands)),
                              max_ptx_version=self.max_ptx_version)
            for k, e in errs.items():
                self.rejected[k.split(":", 1)[-1]] = e
        items = []
        batch: set[str] = set()
        for i, (cfg, why) in enumerate(cands, start=start):
            if cfg.key() in self.rejected:
                continue  # Triton already failed on it in the pool
            try:
                art = compile_reference(self.spec, self.arch, cfg, cache_dir=self.cache_dir,
                                        max_ptx_version=self.max_ptx_version)
            except ReferenceCompileError as exc:
                self.rejected[cfg.key()] = str(exc)[:300]
                continue
            ok, why_not = legal_after_compile(art.abi, self.baseline.abi)
            if not ok and "shared memory" in why_not and cfg.num_stages > 2:
                art, why_not = self._fewer_stages(cfg, why_not)
                ok = art is not None
            if not ok or art is None:
                self.rejected[cfg.key()] = why_not
                continue
            if art.config.key() in batch:
                continue  # a repaired config equal to another of this batch
            batch.add(art.config.key())
            items.append((f"{prefix}{i}", art, art.ptx, f"triton[{art.config.key()}]", ()))
        return self.check_many(items)

    def _fewer_stages(self, cfg: Config, why: str) -> tuple[ReferenceArtifacts | None, str]:
        """Repair a config whose pipeline overflows shared memory: the same tiles with one
        software-pipeline stage fewer at a time, down to 2 (each stage holds one copy of every
        pipelined operand tile). Returns the first legal compile, or None and why not."""
        tried = {a.config.key() for a in self.arms.values()} | set(self.rejected)
        for stages in range(cfg.num_stages - 1, 1, -1):
            c = cfg.model_copy(update={"num_stages": stages})
            if c.key() in tried:
                continue        # an arm already, or rejected: try one stage fewer
            try:
                art = compile_reference(self.spec, self.arch, c, cache_dir=self.cache_dir,
                                        max_ptx_version=self.max_ptx_version)
            except ReferenceCompileError as exc:
                return None, f"{why}; with num_stages={stages}: {str(exc)[:200]}"
            ok, why_c = legal_after_compile(art.abi, self.baseline.abi)
            if ok:
                self.log(f"  {self.spec.name}: {cfg.key()} over the shared-memory limit; "
                         f"kept with num_stages={stages}")
                return art, ""
            if "shared memory" not in why_c:
                return None, f"{why}; with num_stages={stages}: {why_c}"
        return None, why

    def pass_arms(self, parent: Arm, names: Sequence[str] | None = None) -> list[Arm]:
        """Every applicable PTX pass (or the named ones) on ``parent``'s PTX, as checked arms."""
        art = self._arts[parent.id]
        ctx = pass_context(self.spec, art, parent.registers)
        items = []
        for name in names if names is not None else list(PASSES):
            res = apply_passes(parent.candidate.ptx, [name], ctx)
            if res is None:
                continue
            items.append((f"{parent.id}+{name}", art, res, f"{parent.transform}+{name}",
                          parent.passes + (name,)))
        return self.check_many(items)

    def compose(self, parent: Arm, names: Sequence[str]) -> Arm | None:
        """``parent`` with several passes applied in order, as a checked arm (None if illegal)."""
        art = self._arts[parent.id]
        res = apply_passes(parent.candidate.ptx, names, pass_context(self.spec, art, parent.registers))
        if res is None:
            return None
        tag = "+".join(names)
        return self.check(f"{parent.id}+{tag}", art, res, f"{parent.transform}+{tag}",
                          parent.passes + tuple(names))

    # ---- GPU selection ------------------------------------------------------------------------
    def measure(self, ids: Sequence[str], rnd: int, reps: int) -> dict[str, Measurement]:
        """One round on the GPU: correctness on seed ``100 + rnd`` and interleaved timing.

        The baseline is launched as the job's reference; every other arm as a candidate with
        its own launch settings and the baseline's ABI. A hang or crash takes the arm that
        caused it out and the round is run again without it.
        """
        assert self.evaluator is not None
        spec, ev = self.spec, self.evaluator
        remaining = list(ids)
        out: dict[str, Measurement] = {}
        for _attempt in range(3):
            kuts = []
            for i in remaining:
                arm = self.arms[i]
                if i == "base":
                    kuts.append(reference_under_test(spec, self.baseline, label="base"))
                    continue
                c = arm.candidate
                kuts.append(kernel_under_test(
                    spec, self.baseline.abi, arm.cubin, label=i, role="candidate",
                    config=self.baseline.config, threads=c.threads, dynamic_smem=c.dynamic_smem,
                    cluster=c.cluster_dims, meta=c.meta, global_scratch_bytes=c.global_scratch_size,
                    global_scratch_align=c.global_scratch_align))
            res = ev.run(ev.request(spec, "autotune", kuts, seeds=[100 + rnd], min_reps=reps,
                                    max_reps=reps))
            runs = {k.label: k for k in res.kernels}
            if res.status in ("hang", "crash"):
                bad = [k.label for k in res.kernels if k.status in ("hang", "crash")]
                if not bad or "base" in bad:
                    for i in remaining:
                        out[i] = Measurement(False, message=f"{res.status}: {res.message[:200]}")
                    return out
                for b in bad:
                    out[b] = Measurement(False, message=f"{res.status}: {res.message[:200]}")
                remaining = [i for i in remaining if i not in bad]
                continue
            base = runs.get("base")
            base_ms = base.timing.median_ms if base and base.timing and base.status == "ok" else None
            for i in remaining:
                k = runs.get(i)
                if k is None or k.status != "ok" or k.timing is None:
                    out[i] = Measurement(False, message=(f"{k.status}: {k.message}" if k else
                                                         f"no result ({res.status}: {res.message[:200]})"))
                    continue
                out[i] = Measurement(True, ratio=(k.timing.median_ms / base_ms) if base_ms else None,
                                     median_ms=k.timing.median_ms)
            return out
        for i in remaining:
            out.setdefault(i, Measurement(False, message="gave up after repeated hangs/crashes"))
        return out

    # ---- the whole search -------------------------------------------------------------------
    def _refine(self, h: HalvingResult, out: SearchOutcome, ranking: dict[str, float],
                left: Callable[[], float], reps: int, limit: int) -> str | None:
        """When a Triton config beat the baseline, search its neighbourhood (a local search).

        Each step builds up to ``limit`` untried neighbours of the current best config and runs a
        halving over them and it; it repeats from the new best while the new best is at least 1%
        faster than the previous one, time is left and fewer than :data:`MAX_REFINE_STEPS` steps
        ran. The first step also runs past the budget (one bounded round) when the winner is a
        clear win (time ratio under :data:`CLEAR_WIN`). Stages are recorded as ``refine``,
        ``refine2``, ... Returns the id of the best config arm afterwards (None when no config
        beat the baseline or no time or nothing new was left).
        """
        def best_config(hr: HalvingResult) -> str:
            return next((a for a, _ in hr.ranking if a == "base" or not self.arms[a].passes), "base")

        best = best_config(h)
        ratios = dict(h.ranking)
        clear_win = ratios.get(best, 1.0) < CLEAR_WIN
        if best == "base" or limit <= 0 or (left() <= 0 and not clear_win):
            return None
        for step in range(MAX_REFINE_STEPS):
            if step and left() <= 0:
                break
            new = self.refine_arms(self.arms[best], limit)
            if not new:
                break
            hr = successive_halving([best, *[a.id for a in new]], "base", self.measure,
                                    budget_s=max(left() * 0.5, 1.0), reps0=reps, min_keep=1,
                                    max_rounds=4 if left() > 0 else 1)
            out.stages["refine" if step == 0 else f"refine{step + 1}"] = hr
            ranking.update(dict(hr.ranking))
            r = dict(hr.ranking)
            nb = best_config(hr)
            if nb == "base":
                return "base"   # re-measured, the earlier winner lost to the baseline
            improved = nb != best and r.get(nb, 1.0) < r.get(best, 1.0) * 0.99
            best = nb if nb != best else best
            if not improved:
                break
        return best

    def run(self, *, budget_s: float, max_configs: int = 24, passes: bool = True,
            eta: float = 3.0, reps0: int = 10, refine_configs: int = 6) -> SearchOutcome:
        """Search within ``budget_s`` seconds of wall time (compiles included).

        Stages: a halving over the configs (with the PTX passes on the baseline's PTX when the
        budget is under :data:`SMALL_BUDGET_S`); when a config beat the baseline, a second round
        of up to ``refine_configs`` configs around it (a local search); then, with a larger
        budget, the PTX passes on the best config and the composition of the two best passes.

        Without a GPU every arm is built and checked, and the ranking lists the baseline first
        and then the arms in the order they were built, with ratio None (``note`` says that
        selection needs a GPU).
        """
        t0 = time.monotonic()
        out = SearchOutcome(ranking=[], gpu=self.evaluator is not None)
        cfg_arms = self.config_arms(max_configs)
        out.seconds["configs"] = time.monotonic() - t0
        if self.evaluator is None:
            pass_arms = self.pass_arms(self.arms["base"]) if passes else []
            out.ranking = [(a, None) for a in [*cfg_arms, *pass_arms]]
            out.arms, out.rejected = dict(self.arms), dict(self.rejected)
            out.note = ("no GPU: candidates were proposed and checked (ptxas, verifier) but "
                        "selection needs a GPU")
            return out
        left = lambda: budget_s - (time.monotonic() - t0)  # noqa: E731
        ranking: dict[str, float] = {}
        if budget_s < SMALL_BUDGET_S or not passes:
            # one pool: configs and the passes on the baseline PTX, one halving
            p_arms = self.pass_arms(self.arms["base"]) if passes else []
            h = successive_halving([a.id for a in [*cfg_arms, *p_arms]], "base", self.measure,
                                   budget_s=max(left(), 1.0), eta=eta, reps0=reps0)
            out.stages["configs+passes" if passes else "configs"] = h
            ranking.update(dict(h.ranking))
            self._refine(h, out, ranking, left, reps0 * 2, refine_configs)
        else:
            h1 = successive_halving([a.id for a in cfg_arms], "base", self.measure,
                                    budget_s=max(left() * 0.45, 1.0), eta=eta, reps0=reps0)
            out.stages["configs"] = h1
            out.seconds["config_rounds"] = time.monotonic() - t0 - out.seconds["configs"]
            ranking.update(dict(h1.ranking))
            best_id = self._refine(h1, out, ranking, left, reps0 * 2, refine_configs) or \
                next((a for a, _ in h1.ranking), "base")
            t = time.monotonic()
            parent = self.arms[best_id]
            p_arms = self.pass_arms(parent)
            out.seconds["pass_build"] = time.monotonic() - t
            if p_arms:
                ids = [parent.id, *[a.id for a in p_arms]]
                h2 = successive_halving(ids, "base", self.measure, budget_s=max(left() * 0.75, 1.0),
                                        eta=eta, reps0=reps0 * 2)
                out.stages["passes"] = h2
                ranking.update(dict(h2.ranking))
                # compose the two best passes that each beat their parent
                pr = dict(h2.ranking)
                parent_r = pr.get(parent.id)
                winners = [a for a, r in h2.ranking if a not in ("base", parent.id)
                           and parent_r is not None and r < parent_r * 0.99]
                if len(winners) >= 2 and left() > 0:
                    combo = self.compose(parent, [*self.arms[winners[0]].passes[len(parent.passes):],
                                                  *self.arms[winners[1]].passes[len(parent.passes):]])
                    if combo is not None:
                        h3 = successive_halving([combo.id, winners[0]], "base", self.measure,
                                                budget_s=1.0, eta=eta, reps0=reps0 * 4, max_rounds=1)
                        out.stages["compose"] = h3
                        ranking.update(dict(h3.ranking))
        ranked = sorted(ranking.items(), key=lambda x: x[1])
        out.ranking = [(self.arms[a], r) for a, r in ranked]
        out.arms, out.rejected = dict(self.arms), dict(self.rejected)
        out.seconds["total"] = time.monotonic() - t0
        return out
