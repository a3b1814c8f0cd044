"""``--backend ray``: the campaign's cells as Ray tasks on an existing cluster.

The driver connects with ``ray.init(address=...)`` (https://docs.ray.io/en/latest/ray-core/
starting-ray.html), asks one ``num_gpus=1`` probe task for the cluster's GPU arch when the cluster
has GPUs, and submits one task per claimable cell: ``num_gpus=1`` for cells of that arch (Ray pins
the task to its GPU through ``CUDA_VISIBLE_DEVICES``), ``num_cpus=1`` for static cells. Each task
claims *its* cell in the same database (compare-and-set, :meth:`CampaignStore.claim` with
``cell_id``), runs it with :func:`campaign.execute.run_cell` and records it, exactly like a local
worker; a task whose cell was taken meanwhile does nothing. The database must be reachable from
every node (a shared SQLite file on one host, PostgreSQL across hosts) and ailower importable on
every node (the driver adds its own source folder to the tasks' ``PYTHONPATH``).

Assumes one GPU arch per cluster (the probe's); cells of other archs run the static path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from campaign.execute import CampaignOptions
from campaign.runner import ProgressState, follow, progress_state
from campaign.store import CampaignRow, CampaignStore

__all__ = ["run_ray"]

_ROOT = str(Path(__file__).resolve().parents[1])


def _probe_arch() -> str | None:
    from harness import device_arch

    return device_arch()


def _cell_task(payload: dict[str, Any], cell_id: int, campaign_id: int, gpu_arch: str | None,
               static_reasons: dict[str, str]) -> dict[str, Any]:
    """Claim ``cell_id`` and run it (inside a Ray worker process)."""
    from campaign.execute import CampaignOptions, run_cell
    from campaign.store import CampaignStore, owner_id

    opts = CampaignOptions.model_validate(payload)
    store = CampaignStore(opts.db_url, lease_s=opts.lease_s, max_attempts=opts.max_attempts)
    camp = store.campaign_by_id(campaign_id)
    if camp is None:
        return {"cell": cell_id, "status": "skipped", "why": "no such campaign"}
    owner = owner_id()
    store.release_dead(campaign_id)
    probe = store.cell(cell_id)
    if probe is None:
        return {"cell": cell_id, "status": "skipped", "why": "no such cell"}
    gpu = gpu_arch is not None and probe.arch == gpu_arch
    if gpu:  # Ray gave this task one GPU; check that it is the arch the cell targets
        dev = _probe_arch()
        if dev != probe.arch:
            gpu = False
            static_reasons = {**static_reasons,
                              probe.arch: f"the Ray task's GPU is {dev}, not {probe.arch}"}
    cell = store.claim(campaign_id, owner, cell_id=cell_id, mode="gpu" if gpu else "static",
                       static_reasons=static_reasons)
    if cell is None:
        return {"cell": cell_id, "status": "skipped", "why": "claimed elsewhere or finished"}
    out = run_cell(store, cell, owner, opts, campaign=camp.name, iterations=camp.iterations,
                   gpu=gpu)
    out.pop("error", None)
    return out


def run_ray(store: CampaignStore, camp: CampaignRow, opts: CampaignOptions, archs: list[str], *,
            address: str | None, on_progress: Callable[[ProgressState], None],
            on_note: Callable[[str], None] = lambda s: None, no_gpu: bool = False,
            poll_s: float = 0.5) -> ProgressState:
    """Run the campaign's claimable cells as Ray tasks; returns the final progress state.

    Raises:
        RuntimeError: ``ray`` is not installed (``pip install ray``) or the cluster cannot be
            reached (the message names the address).
    """
    try:
        import ray
    except ImportError:
        raise RuntimeError("--backend ray needs the 'ray' package (pip install ray)") from None
    env = {"PYTHONPATH": _ROOT + (os.pathsep + os.environ["PYTHONPATH"]
                                  if os.environ.get("PYTHONPATH") else "")}
    for k in ("AILOWER_DATA_DIR", "AILOWER_DB_URL", "AILOWER_PTXAS"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    try:
        ray.init(address=address, runtime_env={"env_vars": env}, log_to_driver=False,
                 include_dashboard=False, ignore_reinit_error=True)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RuntimeError(f"--ray-address {address}: cannot connect to the Ray cluster: "
                           f"{exc}") from None
    try:
        res = ray.cluster_resources()
        on_note(f"Ray cluster {address}: {res.get('CPU', 0):g} CPU, {res.get('GPU', 0):g} GPU")
        gpu_arch = None
        if res.get("GPU", 0) >= 1 and not no_gpu:
            gpu_arch = ray.get(ray.remote(num_gpus=1)(_probe_arch).remote())
        reasons = {}
        for a in archs:
            if a != gpu_arch:
                reasons[a] = ("--no-gpu" if no_gpu else
                              f"the Ray cluster has no {a} GPU "
                              f"({'GPU arch ' + gpu_arch if gpu_arch else 'no GPU'})")
        for a, why in reasons.items():
            on_note(f"{a}: static path only (compile, assemble, verify): {why}")
        released = store.release_dead(camp.id)
        if released:
            on_note(f"released {len(released)} cell(s) held by dead workers: {released}")
        payload = opts.model_dump(mode="json")
        gpu_task = ray.remote(num_gpus=1, num_cpus=1, max_retries=0)(_cell_task)
        cpu_task = ray.remote(num_cpus=1, max_retries=0)(_cell_task)
        refs = []
        for c in store.cells(camp.id, status="pending"):
            task = gpu_task if gpu_arch is not None and c.arch == gpu_arch else cpu_task
            refs.append(task.remote(payload, c.id, camp.id, gpu_arch, reasons))
        pending = list(refs)
        since = time.time()
        errors: list[str] = []

        def alive() -> bool:
            nonlocal pending
            if not pending:
                return False
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
            for r in ready:
                try:
                    ray.get(r)
                except ray.exceptions.RayError as exc:  # a task's worker died: say so
                    errors.append(str(exc).splitlines()[0])
            return bool(pending)

        parallel = max(1, int(res.get("CPU", 1)))
        st = follow(store, camp, alive, on_progress, parallel=parallel, since=since,
                    poll_s=poll_s)
        for e in errors:
            on_note(f"a Ray task failed: {e}")
        return st if refs else progress_state(store, camp, since=since, parallel=1, seen=set())
    finally:
        ray.shutdown()
