"""Campaign test helpers: the CLI in a subprocess, and a database holding a real static campaign
plus GPU-like cells.

CI has no GPU, so GPU cells here are TEST FIXTURES: each is a real static lowering (the agent loop
with the triton provider, really compiled, assembled and verified for sm_90a) whose best iteration
gets a *synthetic* evaluation (timings, roofline fractions, seed checks) before it is recorded
through the real store API (:meth:`CampaignStore.claim` / :meth:`CampaignStore.finish`). Their
device is named ``TEST FIXTURE (synthetic timings)`` so they cannot be mistaken for measurements.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_DEVICE = "TEST FIXTURE (synthetic timings)"


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """A clean environment for the CLI: its own data dir (and database), this worktree first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AILOWER_")}
    # the fast, deterministic provider unless a test names one (the default is `search`)
    env.update({"AILOWER_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1", "COLUMNS": "200",
                "AILOWER_PROVIDER": "triton",
                "PYTHONPATH": str(ROOT) + (os.pathsep + env["PYTHONPATH"]
                                           if env.get("PYTHONPATH") else "")})
    env.update(extra)
    return env


def cli(args: list[str], data_dir: Path, timeout: float = 300, **extra: str
        ) -> subprocess.CompletedProcess:
    """Run ``ailower ARGS`` to completion."""
    return subprocess.run([sys.executable, "-c", "from ailower.cli import main; main()", *args],
                          cwd=str(ROOT), env=cli_env(data_dir, **extra), capture_output=True,
                          text=True, timeout=timeout)


def db_url(data_dir: Path) -> str:
    """The default database of ``data_dir``."""
    return f"sqlite:///{data_dir / 'ailower.db'}"


def synthetic_eval(ref_ms: tuple[float, float, float], cand_ms: tuple[float, float, float],
                   ref_roof: float, cand_roof: float) -> dict[str, Any]:
    """A TEST FIXTURE evaluation result (``EvalResult`` JSON shape): timings are (q1, median, q3)
    in ms, three passing seed checks for the candidate."""
    def run(label: str, role: str, t: tuple[float, float, float], roof: float) -> dict[str, Any]:
        q1, med, q3 = t
        return {"label": label, "role": role, "status": "ok", "message": "",
                "checks": [{"seed": s, "sentinel": 255, "ok": True} for s in (0, 1, 2)],
                "timing": {"n": 50, "median_ms": med, "q1_ms": q1, "q3_ms": q3,
                           "iqr_ms": q3 - q1, "min_ms": q1 * 0.99, "mean_ms": med},
                "roofline_fraction": roof, "roofline_bound": "memory"}
    return {"status": "ok", "message": "", "device": {"name": FIXTURE_DEVICE},
            "kernels": [run("reference", "reference", ref_ms, ref_roof),
                        run("candidate", "candidate", cand_ms, cand_roof)],
            "speedup": ref_ms[1] / cand_ms[1],
            "speedup_ci": [0.99 * ref_ms[1] / cand_ms[1], 1.01 * ref_ms[1] / cand_ms[1]]}


def record_fixture_gpu_cell(store: Any, camp: Any, cell_key: Any, *, cache_dir: Path,
                            ref_ms: tuple[float, float, float],
                            cand_ms: tuple[float, float, float], ref_roof: float,
                            cand_roof: float, tokens: dict[str, int] | None = None,
                            price: tuple[float, float] | None = None) -> int:
    """Lower ``cell_key``'s kernel statically for real, attach a synthetic evaluation to its best
    iteration (TEST FIXTURE) and record it as a finished GPU cell; returns the run id."""
    from agent.loop import LoopOptions, build_report, lower
    from agent.providers.triton import TritonProvider
    from campaign.plan import load_target
    from campaign.store import owner_id
    from campaign.summary import cell_summary

    spec = load_target(cell_key.spec_ref)
    result = lower(spec, cell_key.arch, TritonProvider(cache_dir=cache_dir),
                   LoopOptions(iterations=1, cache_dir=cache_dir))
    assert result.best is not None, f"{spec.name}: the static lowering found no valid candidate"
    ev = synthetic_eval(ref_ms, cand_ms, ref_roof, cand_roof)
    rec = result.best
    rec.evaluation, rec.verdict, rec.speedup = ev, "accepted", ev["speedup"]
    result.gpu, result.provider = True, cell_key.provider
    result.reference["baseline"]["autotuned"] = True
    result.reference["device"] = {"name": FIXTURE_DEVICE}
    report = build_report(result)
    report["test_fixture"] = "synthetic timings; not a measurement"
    owner = owner_id()
    cid = next(c.id for c in store.cells(camp.id) if (c.kernel, c.arch, c.provider, c.model)
               == (cell_key.kernel, cell_key.arch, cell_key.provider, cell_key.model))
    cell = store.claim(camp.id, owner, cell_id=cid, mode="gpu")
    assert cell is not None
    summary = cell_summary(result, report, mode="gpu", static_reason=None, usage=tokens,
                           price_per_mtok=price)
    run_id = store.finish(cell.id, owner, result=result, report=report, summary=summary,
                          model=cell_key.model or None, out_dir=None, seconds=0.0)
    assert run_id is not None
    return run_id


FIXTURE_GPU = [
    # kernel, provider, model, ref (q1, med, q3) ms, cand (q1, med, q3) ms, roofline ref, cand
    ("vector_add", "triton", "", (0.098, 0.100, 0.102), (0.079, 0.080, 0.081), 0.80, 0.99),
    ("relu.fp16", "triton", "", (0.049, 0.050, 0.051), (0.0495, 0.0505, 0.0515), 0.70, 0.69),
    ("softmax", "triton", "", (0.195, 0.200, 0.205), (0.245, 0.250, 0.255), 0.60, 0.48),
    ("vector_add", "openai", "fixture-model", (0.098, 0.100, 0.102), (0.0495, 0.050, 0.0505),
     0.80, 1.00),
    ("softmax", "openai", "fixture-model", (0.195, 0.200, 0.205), (0.180, 0.182, 0.184),
     0.60, 0.66),
]
"""TEST FIXTURE values (synthetic). Expected outcomes: win, tie, loss, win, win."""

STATIC_KERNELS = ["vector_add", "relu.fp16", "softmax"]


@pytest.fixture(scope="session")
def board_db(tmp_path_factory) -> Path:
    """A data dir whose database holds a real static campaign (``static``: STATIC_KERNELS x
    sm_89 x triton, run with the CLI) and the GPU-like TEST FIXTURE campaign ``fixture-gpu``
    (sm_90a; :data:`FIXTURE_GPU`)."""
    from campaign.plan import cells_for, select_kernels
    from campaign.store import CampaignStore

    d = tmp_path_factory.mktemp("board")
    r = cli(["suite", "run", *STATIC_KERNELS, "--arch", "sm_89", "--iterations", "1",
             "--campaign", "static", "--cpu-workers", "2", "--json"], d)
    assert r.returncode == 0, r.stdout + r.stderr
    store = CampaignStore(db_url(d))
    targets = {t.name: t for t in select_kernels(STATIC_KERNELS)}
    keys = []
    for k, p, m, *_ in FIXTURE_GPU:
        keys += [c for c in cells_for([targets[k]], ["sm_90a"], [(p, m)])]
    camp, added = store.ensure_campaign("fixture-gpu", 1, keys, {"test_fixture": True})
    assert added == len(FIXTURE_GPU)
    for key, (k, p, m, ref, cand, rr, cr) in zip(keys, FIXTURE_GPU):
        record_fixture_gpu_cell(store, camp, key, cache_dir=d / "cache", ref_ms=ref,
                                cand_ms=cand, ref_roof=rr, cand_roof=cr,
                                tokens={"input_tokens": 120_000, "output_tokens": 30_000}
                                if p == "openai" else None,
                                price=(3.0, 15.0) if p == "openai" else None)
    store.engine.dispose()
    return d
