"""The batch: plan a campaign, start its workers (local processes or Ray tasks), follow progress.

Local backend. One worker process per visible GPU whose arch the campaign targets, pinned with
``CUDA_VISIBLE_DEVICES=<that GPU>``; cells of archs with no matching GPU go to ``cpu_workers``
static worker processes (compile, assemble, verify; each such cell records why it had no GPU).
Workers claim cells from the database themselves (:meth:`CampaignStore.claim`), so any number of
batches, hosts or Ray tasks can share a campaign. Before workers start, claims held by dead
processes are released (:meth:`CampaignStore.release_dead`); a worker that dies mid-cell is
replaced (its cell is claimed again) while attempts remain.

Progress is read from the database every ``poll_s`` seconds and handed to a listener as
:class:`ProgressState` (the CLI renders it with rich, or prints JSON lines).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaign.execute import CampaignOptions
from campaign.store import CampaignRow, CampaignStore, CellRow, as_utc, utcnow

__all__ = ["GPU", "visible_gpus", "static_reasons", "ProgressState", "progress_state",
           "run_local", "follow"]

_ROOT = str(Path(__file__).resolve().parents[1])


@dataclass(frozen=True)
class GPU:
    """A visible GPU: ``index`` is what ``CUDA_VISIBLE_DEVICES`` names; ``arch`` its target."""

    index: str
    arch: str
    name: str = ""


def visible_gpus() -> tuple[list[GPU], str]:
    """The GPUs this process may use (``CUDA_VISIBLE_DEVICES`` respected), read with the CUDA
    driver API through ctypes (no CUDA context is created).

    Returns:
        ``(gpus, note)``: note says why the list is empty (no driver, no device).
    """
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return [], "no CUDA driver (libcuda.so.1 not found)"
    if lib.cuInit(0) != 0:
        return [], "cuInit failed: the driver found no usable GPU"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return [], "the CUDA driver reports no device"
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    labels = [x.strip() for x in env.split(",")] if env else [str(i) for i in range(count.value)]
    gpus = []
    for ordinal in range(count.value):
        dev = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            continue
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76 (cuda.h)
        lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
        lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(name, 256, dev)
        arch = f"sm_{major.value}{minor.value}" + ("a" if major.value >= 9 else "")
        gpus.append(GPU(index=labels[ordinal] if ordinal < len(labels) else str(ordinal),
                        arch=arch, name=name.value.decode(errors="replace")))
    return gpus, f"{len(gpus)} GPU(s)"


def static_reasons(archs: list[str], gpus: list[GPU], note: str, no_gpu: bool) -> dict[str, str]:
    """arch -> why cells of that arch run the static path (archs with a matching GPU omitted)."""
    have = {g.arch for g in gpus}
    seen = ", ".join(f"{g.index}: {g.name or '?'} {g.arch}" for g in gpus) or note
    out = {}
    for a in archs:
        if no_gpu:
            out[a] = "--no-gpu"
        elif a not in have:
            out[a] = f"no {a} GPU on this host ({seen})"
    return out


@dataclass
class ProgressState:
    """A snapshot of a campaign (what the progress display shows).

    Attributes:
        total, done, failed, pending, running: cell counts.
        running_cells: ``(kernel, arch, provider/model, mode, seconds so far)`` per running cell.
        eta_s: estimated seconds left (mean finished-cell time x cells left / parallelism), or
            None before a cell of this batch finished.
        best: ``(speedup, kernel, arch, provider/model)`` of the fastest verified candidate so far.
        new_cells: cells finished since the previous snapshot (for JSON lines).
    """

    campaign: str
    total: int = 0
    done: int = 0
    failed: int = 0
    pending: int = 0
    running: int = 0
    running_cells: list[tuple[str, str, str, str, float]] = field(default_factory=list)
    eta_s: float | None = None
    best: tuple[float, str, str, str] | None = None
    new_cells: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` progress line."""
        return {"event": "progress", "campaign": self.campaign, "total": self.total,
                "done": self.done, "failed": self.failed, "pending": self.pending,
                "running": [{"kernel": k, "arch": a, "provider": p, "mode": m,
                             "seconds": round(s, 1)} for k, a, p, m, s in self.running_cells],
                "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
                "best": None if self.best is None else {
                    "speedup": self.best[0], "kernel": self.best[1], "arch": self.best[2],
                    "provider": self.best[3]},
                "elapsed_s": round(self.elapsed_s, 1)}


def _who(c: CellRow) -> str:
    return c.provider + (f":{c.model}" if c.model else "")


def cell_event(c: CellRow) -> dict[str, Any]:
    """The ``--json`` line of a finished cell."""
    s = c.summary or {}
    return {"event": "cell", "cell": c.id, "kernel": c.kernel, "arch": c.arch,
            "provider": _who(c), "status": c.status, "mode": c.mode,
            "static_reason": c.static_reason, "run_id": c.run_id, "attempts": c.attempts,
            "seconds": c.seconds, "speedup": s.get("speedup"), "valid": s.get("valid"),
            "verifier_errors": (s.get("verifier") or {}).get("errors_all_iterations"),
            "error": (c.error or {}).get("message")}


def progress_state(store: CampaignStore, camp: CampaignRow, *, since: float, parallel: int,
                   seen: set[int]) -> ProgressState:
    """Read a snapshot of ``camp`` from the database; ``seen`` (ids already reported) is updated.

    ``since`` (``time.time()`` at batch start) selects the cells whose durations feed the ETA.
    """
    cells = store.cells(camp.id)
    st = ProgressState(campaign=camp.name, total=len(cells), elapsed_s=time.time() - since)
    now = utcnow()
    durations = []
    for c in cells:
        if c.status == "done":
            st.done += 1
        elif c.status == "failed":
            st.failed += 1
        elif c.status == "pending":
            st.pending += 1
        else:
            st.running += 1
            claimed = as_utc(c.claimed_at)
            st.running_cells.append((c.kernel, c.arch, _who(c), c.mode or "?",
                                     (now - claimed).total_seconds() if claimed else 0.0))
        if c.status in ("done", "failed"):
            fin = as_utc(c.finished_at)
            if fin is not None and fin.timestamp() >= since and c.seconds is not None:
                durations.append(c.seconds)
            if c.id not in seen:
                seen.add(c.id)
                st.new_cells.append(cell_event(c))
            sp = (c.summary or {}).get("speedup")
            if c.status == "done" and sp and (st.best is None or sp > st.best[0]):
                st.best = (float(sp), c.kernel, c.arch, _who(c))
    left = st.pending + st.running
    if durations and left:
        st.eta_s = sum(durations) / len(durations) * left / max(1, parallel)
    elif not left:
        st.eta_s = 0.0
    return st


def _spawn(args: list[str], payload: dict[str, Any], env: dict[str, str], log: Path
           ) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(env)
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    with log.open("ab") as f:
        p = subprocess.Popen([sys.executable, "-m", "campaign.worker", "--parent",
                              str(os.getpid()), *args], stdin=subprocess.PIPE,
                             stdout=f, stderr=subprocess.STDOUT, env=env, cwd=_ROOT)
    assert p.stdin is not None
    p.stdin.write(json.dumps(payload).encode())
    p.stdin.close()
    return p


def follow(store: CampaignStore, camp: CampaignRow, alive: Callable[[], bool],
           on_progress: Callable[[ProgressState], None], *, parallel: int, since: float,
           poll_s: float = 0.5) -> ProgressState:
    """Report progress until ``alive()`` turns False; returns the last snapshot."""
    seen = {c.id for c in store.cells(camp.id) if c.status in ("done", "failed")}
    while True:
        running = alive()
        st = progress_state(store, camp, since=since, parallel=parallel, seen=seen)
        on_progress(st)
        if not running:
            return st
        time.sleep(poll_s)


def run_local(store: CampaignStore, camp: CampaignRow, opts: CampaignOptions, archs: list[str],
              *, cpu_workers: int, no_gpu: bool,
              on_progress: Callable[[ProgressState], None], poll_s: float = 0.5,
              on_note: Callable[[str], None] = lambda s: None,
              precompile_workers: int = 0) -> ProgressState:
    """Run the campaign's claimable cells with local worker processes; returns the final state.

    With GPU workers and ``precompile_workers`` > 0, a background thread warms the
    reference-compile cache for the queued GPU cells (:func:`campaign.precompile.precompile`).

    Rounds: start workers, wait for them; if cells became claimable again (a worker died and its
    claim was released) and some worker died, start another round (at most ``max_attempts``).
    """
    gpus, note = ([], "--no-gpu") if no_gpu else visible_gpus()
    gpus = [g for g in gpus if g.arch in archs]
    reasons = static_reasons(archs, gpus, note, no_gpu)
    gpu_archs = sorted({g.arch for g in gpus})
    for a, why in reasons.items():
        on_note(f"{a}: static path only (compile, assemble, verify): {why}")
    for g in gpus:
        on_note(f"{g.arch}: GPU worker on CUDA_VISIBLE_DEVICES={g.index} ({g.name})")
    payload = {"options": opts.model_dump(mode="json"), "static_reasons": reasons}
    logs = opts.data_dir / "campaigns" / "_logs"
    since = time.time()
    procs: list[subprocess.Popen] = []
    st: ProgressState | None = None
    finished = threading.Event()
    warm: threading.Thread | None = None
    if gpus and precompile_workers > 0:
        queued = [(c.spec_ref, c.arch) for c in store.cells(camp.id, status="pending")
                  if c.arch in gpu_archs]

        def _warm() -> None:
            from campaign.precompile import precompile

            t = time.time()
            try:
                n, bad = precompile(queued, opts.cache_dir, workers=precompile_workers,
                                    max_ptx_version=opts.max_ptx_version, stop=finished.is_set)
            except Exception as exc:  # a warm-up failure costs time, not results: say so
                on_note(f"precompile stopped: {type(exc).__name__}: {exc}")
                return
            on_note(f"precompile: {n} reference configs ready in {time.time() - t:.1f} s"
                    + (f"; {len(bad)} failed to compile (their cells report it)" if bad else ""))

        if queued:
            warm = threading.Thread(target=_warm, daemon=True, name="precompile")
            warm.start()
    for _round in range(opts.max_attempts + 1):
        released = store.release_dead(camp.id)
        if released:
            on_note(f"released {len(released)} cell(s) held by dead workers: {released}")
        procs = []
        env = dict(os.environ)
        for g in gpus:
            if store.claimable(camp.id) and any(c.arch == g.arch for c in store.cells(
                    camp.id, status="pending")):
                e = dict(env, CUDA_VISIBLE_DEVICES=g.index)
                procs.append(_spawn(["--campaign-id", str(camp.id), "--mode", "gpu",
                                     "--arch", g.arch], payload, e,
                                    logs / f"{camp.id}-gpu{g.index}.log"))
        n_static = min(cpu_workers, store.claimable(camp.id, exclude_archs=gpu_archs))
        e = dict(env, CUDA_VISIBLE_DEVICES="")  # static workers never touch a GPU
        ex = [a for g in gpu_archs for a in ("--exclude-arch", g)]
        for i in range(n_static):
            procs.append(_spawn(["--campaign-id", str(camp.id), "--mode", "static", *ex],
                                payload, e, logs / f"{camp.id}-static{i}.log"))
        if not procs:
            break
        st = follow(store, camp, lambda: any(p.poll() is None for p in procs), on_progress,
                    parallel=len(procs), since=since, poll_s=poll_s)
        crashed = [p for p in procs if p.returncode != 0]
        if not crashed:
            break
        on_note(f"{len(crashed)} worker(s) exited with status "
                f"{', '.join(str(p.returncode) for p in crashed)}; logs in {logs}")
    finished.set()
    if warm is not None:
        warm.join(timeout=60)
    if st is None:
        st = progress_state(store, camp, since=since, parallel=1, seen=set())
    return st
