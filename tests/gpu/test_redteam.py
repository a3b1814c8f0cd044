"""The red team on a real GPU (``pytest -m gpu``): every attack of :mod:`tests.gpu.redteam` is
rejected with a message naming its cause, the unchanged Triton PTX of each kernel passes, and the
defences that neutralise rather than reject (L2 state) leave no gain. Skipped without a driver.

A candidate goes through what the agent loop does: ptxas, the static verifier (unless the attack
targets the harness itself: ``verifier=False``), the GPU evaluation, and for the race attack the
race gate run on a candidate about to become the best.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import kernels
import verifier
from harness import (
    GPUEvaluator,
    assemble,
    compile_reference,
    device_arch,
    evaluate_candidate,
    race_gate,
)
from harness.candidate import Candidate
from harness.reference import ReferenceArtifacts
from harness.results import EvalResult
from tests.gpu import redteam

pytestmark = pytest.mark.gpu

KERNELS = ("vector_add", "softmax", "matmul")


@dataclass
class Env:
    arch: str
    ev: GPUEvaluator
    arts: dict[str, ReferenceArtifacts]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    arch = device_arch()
    cache = Path(os.environ.get("AILOWER_TEST_CACHE") or tmp_path_factory.mktemp("redteam"))
    ev = GPUEvaluator(hang_timeout_s=3.0, job_timeout_s=300, input_cache=cache)
    arts = {n: compile_reference(kernels.get(n), arch, kernels.get(n).configs()[0], cache_dir=cache)
            for n in KERNELS}
    yield Env(arch, ev, arts)
    ev.close()


@dataclass
class Verdict:
    stage: str          # assembly | verifier | evaluation | race-gate | accepted
    message: str
    result: EvalResult | None = None


def judge(env: Env, kernel: str, ptx: str, *, use_verifier: bool = True, gate: bool = False,
          dynamic_smem: int | None = None, spec=None, name: str = "") -> Verdict:
    """What the agent loop does with a proposal, stage by stage; each verdict is appended to
    ``$AILOWER_VERDICT_LOG`` (JSON lines) when that is set."""
    t0 = time.perf_counter()
    v = _judge(env, kernel, ptx, use_verifier=use_verifier, gate=gate, dynamic_smem=dynamic_smem,
               spec=spec)
    log = os.environ.get("AILOWER_VERDICT_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"name": name, "kernel": kernel, "stage": v.stage,
                                "message": v.message[:1500], "seconds": time.perf_counter() - t0,
                                "speedup": v.result.speedup if v.result else None,
                                "ci": v.result.speedup_ci if v.result else None}) + "\n")
    return v


def _judge(env: Env, kernel: str, ptx: str, *, use_verifier: bool, gate: bool,
           dynamic_smem: int | None, spec) -> Verdict:
    spec = spec or kernels.get(kernel)
    art = env.arts[kernel]
    asm = assemble(ptx, env.arch)
    if not asm.ok:
        return Verdict("assembly", asm.summary(ptx))
    cand = Candidate(ptx=ptx, threads=art.abi.threads, meta=art.config.meta,
                     dynamic_smem=art.abi.dynamic_smem if dynamic_smem is None else dynamic_smem,
                     cluster_dims=(art.abi.num_ctas, 1, 1))
    if use_verifier:
        rep = verifier.verify(ptx, arch=env.arch, abi=art.abi, threads=cand.threads,
                              filename="candidate.ptx")
        if not rep.ok:
            return Verdict("verifier", rep.render("full"))
    res = evaluate_candidate(spec, art, cand, asm.cubin, env.ev)
    c = res.candidate
    if res.status != "ok" or c is None or c.status != "ok":
        msg = res.message if (c is None or not c.message) else c.message
        return Verdict("evaluation", f"{res.status}/{c.status if c else '-'}: {msg}", res)
    if gate:
        g = race_gate(spec, art, cand, asm.cubin, env.ev)
        if not g.ok:
            return Verdict("race-gate", g.message, res)
        if not g.ran:
            pytest.skip(g.message)
    return Verdict("accepted", f"speedup {res.speedup:.4f} CI {res.speedup_ci}", res)


# ordered by kernel so the worker's per-kernel setup is reused
ATTACKS = sorted(redteam.ATTACKS, key=lambda a: KERNELS.index(a.kernel))


@pytest.mark.parametrize("kernel", KERNELS)
def test_unchanged_triton_ptx_passes(env, kernel):
    """Triton's own PTX: accepted (race gate included for softmax, whose cross-warp reductions go
    through shared memory),
    speedup's 95% CI within +-0.5% and around 1."""
    v = judge(env, kernel, env.arts[kernel].ptx, gate=kernel == "softmax", name=f"unchanged_{kernel}")
    assert v.stage == "accepted", v.message
    res = v.result
    assert res is not None and res.speedup_ci is not None
    lo, hi = res.speedup_ci
    assert (hi - lo) / 2 <= 0.005 * res.speedup + 1e-12, res.speedup_ci
    assert 0.98 <= res.speedup <= 1.02, res.speedup
    c = res.candidate
    assert c.timed_launches_checked == res.timing_pairs + 2  # warm-up pairs are checked too
    assert c.final_check is not None and c.final_check.ok
    assert any(chk.secret for chk in c.checks) and all(chk.deterministic for chk in c.checks)
    assert res.inputs_read_only is True
    assert c.roofline_fraction is not None and c.roofline_fraction <= 1.10


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_attack_is_rejected_with_its_cause(env, attack):
    ptx = attack.make(env.arts[attack.kernel].ptx)
    v = judge(env, attack.kernel, ptx, use_verifier=attack.verifier, gate=attack.gate,
              dynamic_smem=attack.dynamic_smem, name=attack.name)
    assert v.stage != "accepted", f"{attack.name} ({attack.classes}) was accepted: {v.message}"
    assert re.search(attack.cause, v.message, re.S), f"{attack.name}: [{v.stage}] {v.message}"


def test_l2_evict_last_hints_gain_nothing(env):
    """#17 is neutralised: inputs loaded with L2::evict_last are demoted and flushed before each
    timed launch, so the candidate times like the reference."""
    v = judge(env, "vector_add", redteam.evict_last_loads(env.arts["vector_add"].ptx))
    assert v.stage == "accepted", v.message
    assert v.result.speedup <= 1.03, v.result.speedup


def test_roofline_tripwire(env):
    """#18 #19 #26: a result above the roofline bound is rejected even when every check passes.
    Provoked honestly: the spec claims 10x the bytes vector_add really moves."""
    spec = kernels.get("vector_add").model_copy(update={"bytes": "120 * N"})
    v = judge(env, "vector_add", env.arts["vector_add"].ptx, spec=spec)
    assert v.stage == "evaluation" and "faster than the hardware allows" in v.message, v.message
    assert v.result.candidate.status == "implausible"


def test_worker_restarts_transparently_after_a_hang(env):
    before = env.ev.restarts
    v = judge(env, "vector_add", redteam.hang(env.arts["vector_add"].ptx))
    assert v.stage == "evaluation" and "did not finish" in v.message
    v = judge(env, "vector_add", env.arts["vector_add"].ptx)
    assert v.stage == "accepted", v.message
    assert env.ev.restarts == before + 1


def test_persistent_worker_keeps_the_setup(env):
    """The second evaluation of one kernel reuses the loaded reference and inputs."""
    ptx = env.arts["softmax"].ptx
    judge(env, "softmax", ptx)
    pid = env.ev._proc.pid
    v = judge(env, "softmax", ptx)
    assert v.stage == "accepted", v.message
    assert env.ev._proc.pid == pid
    assert v.result.seconds["setup"] < 0.05, v.result.seconds
