"""The GPU path of a variant turn and of the profiled feedback, with a scripted evaluator.

No GPU here: :class:`ScriptedEvaluator` is a :class:`~harness.GPUEvaluator` whose ``run``
answers each worker request with timings it computes from the request (which kernels, which
labels), so the loop's GPU code runs for real: the baseline autotune, the joint job of the
survivors interleaved with the baseline, the full evaluation of the fastest correct variant,
and the Nsight Compute profiles, collected through a stand-in ``ncu`` executable (a shell
script printing a CSV in ncu's raw-page layout) found through ``AILOWER_NCU``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kernels
from agent.loop import LoopOptions, lower
from harness import GPUEvaluator
from harness.correctness import CompareResult
from harness.results import DeviceSummary, EvalResult, KernelRun, SeedCheck
from harness.timing import TimingStats
from tests.agent.fake_llm_server import FakeLLMServer
from tests.agent.test_patch_replay import Anthropic
from tests.agent.test_variants import MARK, _three

DATA = Path(__file__).parent / "data"
DEVICE = DeviceSummary(name="NVIDIA H200", cc=(9, 0), sm_count=132, l2_bytes=52428800,
                       smem_optin_bytes=232448, driver_version=12080, copy_gbps=4103.6,
                       peak_tflops=66.9)


def _run(label: str, role: str, ms: float, req) -> KernelRun:
    ok = CompareResult(ok=True, n=1, n_nonfinite=0, n_ref_nonfinite=0, n_bad=0,
                       max_abs_err=0.0, norm_err=0.0)
    return KernelRun(label=label, role=role, status="ok", registers=26, static_smem=0,
                     local_bytes=0,
                     timing=TimingStats(n=50, median_ms=ms, q1_ms=ms, q3_ms=ms, iqr_ms=0.0,
                                        min_ms=ms, mean_ms=ms),
                     achieved_gbps=req.bytes / (ms * 1e-3) / 1e9,
                     achieved_tflops=req.flops / (ms * 1e-3) / 1e12,
                     checks=[SeedCheck(seed=s, sentinel=255, vs_reference={"out": ok})
                             for s in req.seeds] if role == "candidate" else [])


class ScriptedEvaluator(GPUEvaluator):
    """Answers jobs without a GPU: the baseline takes 0.100 ms, a kernel whose label names a
    variant takes ``times[variant]`` ms, the single candidate of an evaluate job 0.080 ms."""

    def __init__(self, times: dict[int, float]):
        super().__init__()
        self.times = times
        self.jobs: list[tuple[str, list[str]]] = []

    def run(self, req):  # noqa: D102 - see the class docstring
        labels = [k.label for k in req.kernels]
        self.jobs.append((req.job, labels))
        runs = []
        for k in req.kernels:
            if k.role == "reference":
                ms = 0.100
            elif k.label.startswith("variant "):
                ms = self.times[int(k.label.split()[1])]
            else:
                ms = 0.080
            runs.append(_run(k.label, k.role, ms, req))
        res = EvalResult(status="ok", device=DEVICE, kernels=runs, stage="done")
        if req.job == "autotune":
            res.best = min(runs, key=lambda r: r.timing.median_ms).label
        else:
            res.speedup, res.speedup_ci = 0.100 / 0.080, (1.24, 1.26)
        return res

    def close(self):  # no worker process
        return None


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    script = tmp_path / "ncu"
    script.write_text("#!/bin/sh\ncat > /dev/null\ncat " + str(DATA / "ncu_softmax_candidate.csv")
                      + "\n")
    script.chmod(0o755)
    monkeypatch.setenv("AILOWER_NCU", str(script))
    return script


def test_variant_turn_on_the_gpu_path_evaluates_survivors_in_one_job(ref_cache, fake_ncu):
    spec = kernels.get("vector_add")
    from harness.reference import compile_reference

    art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=ref_cache)
    # variant 4 (valid, a second comment) is faster than variant 3 in the joint job
    four = _three(art.ptx) + [{"edits": [{"search": ".address_size 64",
                                          "replace": f".address_size 64\n{MARK} 4"}]}]
    ev = ScriptedEvaluator({3: 0.090, 4: 0.070})
    script = [Anthropic.turn(("t1", "submit", {"threads": 128, "plan": "p", "variants": four}))]
    with FakeLLMServer(script) as srv:
        res = lower(spec, "sm_90a", Anthropic.provider(srv.url),
                    LoopOptions(iterations=1, cache_dir=ref_cache, variants=4, race_gate=False),
                    evaluator=ev)
    it = res.iterations[0]
    assert [v.verdict for v in it.variants] == ["rejected-assembly", "rejected-verifier",
                                                 "rejected-evaluation", "accepted"]
    assert it.chosen_variant == 4 and it.verdict == "accepted"
    assert it.speedup == pytest.approx(1.25)  # the full evaluation's
    assert it.variants[2].speedup == pytest.approx(0.100 / 0.090)  # the joint job's
    assert "not evaluated in full (a faster variant was)" in it.variants[2].summary
    # jobs: the baseline autotune, ONE joint job with the baseline and both survivors, then
    # the full evaluation of the winner
    kinds = [(job, labels) for job, labels in ev.jobs]
    assert kinds[1] == ("autotune", ["base", "variant 3", "variant 4"])
    assert kinds[2][0] == "evaluate" and len(kinds) == 3
    assert res.best_candidate.ptx == art.ptx.replace(".address_size 64",
                                                     f".address_size 64\n{MARK} 4", 1)
    fb = it.feedback
    assert "- variant 1: rejected-assembly" in fb and "- variant 2: rejected-verifier" in fb
    assert "roofline candidate: compute" in fb and "closer bound: memory" in fb
    assert "Nsight Compute (one bench-size launch, --clock-control none):" in fb
    assert "DRAM throughput %" in fb and "81.37" in fb


def test_evaluate_tool_without_ncu_says_ncu_unavailable(ref_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("AILOWER_NCU", str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    import harness.profile as hp

    monkeypatch.setattr(hp, "find_ncu", lambda: None)
    spec = kernels.get("vector_add")
    ev = ScriptedEvaluator({})
    script = [Anthropic.turn(("e1", "evaluate", {"threads": 128, "meta": {}})),
              Anthropic.turn(("s1", "submit", {"threads": 128}))]
    with FakeLLMServer(script) as srv:
        res = lower(spec, "sm_90a", Anthropic.provider(srv.url),
                    LoopOptions(iterations=1, cache_dir=ref_cache, race_gate=False),
                    evaluator=ev)
    tool_result = Anthropic.results(srv.requests[1].json)["e1"]
    assert "roofline candidate: compute" in tool_result
    assert "ncu unavailable: no ncu found" in tool_result
    assert res.iterations[0].verdict == "accepted"


class PluginEvaluator:
    """An evaluator plug-in (``ailower.evaluators``): duck-typed, no local GPU worker."""

    def __init__(self) -> None:
        self._inner = ScriptedEvaluator({})
        self.request, self.run = self._inner.request, self._inner.run


def test_a_plugin_evaluator_is_not_profiled(ref_cache, fake_ncu):
    spec = kernels.get("vector_add")
    script = [Anthropic.turn(("s1", "submit", {"threads": 128}))]
    with FakeLLMServer(script) as srv:
        res = lower(spec, "sm_90a", Anthropic.provider(srv.url),
                    LoopOptions(iterations=1, cache_dir=ref_cache, race_gate=False),
                    evaluator=PluginEvaluator())
    fb = res.iterations[0].feedback
    assert res.iterations[0].verdict == "accepted" and "roofline candidate" in fb
    assert "ncu unavailable: the evaluator (PluginEvaluator) is not a local GPU worker" in fb


class HangingEvaluator(ScriptedEvaluator):
    """The joint job hangs on variant 4 while it is in the job."""

    def run(self, req):  # noqa: D102
        labels = [k.label for k in req.kernels]
        if req.job == "autotune" and "variant 4" in labels:
            self.jobs.append((req.job, labels))
            return EvalResult(status="hang", message="variant 4 did not finish", device=DEVICE,
                              kernels=[KernelRun(label="variant 4", role="candidate",
                                                 status="hang")])
        return super().run(req)


def test_a_variant_that_hangs_the_joint_job_is_taken_out(ref_cache):
    spec = kernels.get("vector_add")
    from harness.reference import compile_reference

    art = compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=ref_cache)
    four = _three(art.ptx) + [{"edits": [{"search": ".address_size 64",
                                          "replace": f".address_size 64\n{MARK} 4"}]}]
    ev = HangingEvaluator({3: 0.090, 4: 0.070})
    script = [Anthropic.turn(("t1", "submit", {"threads": 128, "variants": four}))]
    with FakeLLMServer(script) as srv:
        res = lower(spec, "sm_90a", Anthropic.provider(srv.url),
                    LoopOptions(iterations=1, cache_dir=ref_cache, variants=4, race_gate=False,
                                profile=False), evaluator=ev)
    it = res.iterations[0]
    assert [j for j in ev.jobs if j[0] == "autotune"][1:] == [
        ("autotune", ["base", "variant 3", "variant 4"]), ("autotune", ["base", "variant 3"])]
    assert it.variants[3].verdict == "rejected-evaluation"
    assert it.variants[3].summary.startswith("hang: variant 4 did not finish")
    assert it.chosen_variant == 3 and it.verdict == "accepted"
    assert "ncu profiling off" in it.feedback
