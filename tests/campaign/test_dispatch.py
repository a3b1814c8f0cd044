"""GPU/static dispatch of the local backend: one worker per visible GPU, pinned with
CUDA_VISIBLE_DEVICES, for the cells of that GPU's arch; static workers for the other archs.

This host has no GPU, so the GPU list is replaced by a pretend device (index 3, sm_89): the GPU
worker really starts and claims the sm_89 cell, and its GPU evaluation fails (no driver), which
must be recorded on the cell as a failure, not lost."""

from __future__ import annotations

import pytest

from campaign import runner
from campaign.execute import CampaignOptions
from campaign.plan import cells_for, select_kernels
from campaign.store import CampaignStore

pytestmark = pytest.mark.timeout(300)


def test_gpu_workers_are_pinned_and_other_archs_run_static(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "visible_gpus",
                        lambda: ([runner.GPU(index="3", arch="sm_89", name="pretend")], "1 GPU(s)"))
    spawned = []
    real_spawn = runner._spawn

    def spy(args, payload, env, log):
        spawned.append((args, env.get("CUDA_VISIBLE_DEVICES")))
        return real_spawn(args, payload, env, log)

    monkeypatch.setattr(runner, "_spawn", spy)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    store = CampaignStore(url)
    cells = cells_for(select_kernels(["vector_add"]), ["sm_89", "sm_100a"], [("triton", "")])
    camp, _ = store.ensure_campaign("d", 1, cells, {})
    opts = CampaignOptions(db_url=url, data_dir=tmp_path, cache_dir=tmp_path / "cache",
                           job_timeout_s=60)
    notes = []
    st = runner.run_local(store, camp, opts, ["sm_89", "sm_100a"], cpu_workers=2, no_gpu=False,
                          on_progress=lambda s: None, on_note=notes.append, poll_s=0.2)
    gpu = [(a, e) for a, e in spawned if "gpu" in a]
    static = [(a, e) for a, e in spawned if "static" in a]
    assert gpu and all(e == "3" and a[a.index("--arch") + 1] == "sm_89" for a, e in gpu)
    # one static worker: only one static cell; it never sees a GPU nor takes sm_89 cells
    assert len(static) == 1 and static[0][1] == ""
    assert static[0][0][static[0][0].index("--exclude-arch") + 1] == "sm_89"
    assert any("sm_100a: static path only" in n and "3: pretend sm_89" in n for n in notes)
    assert any("GPU worker on CUDA_VISIBLE_DEVICES=3" in n for n in notes)
    by_arch = {c.arch: c for c in store.cells(camp.id)}
    s100 = by_arch["sm_100a"]
    assert (s100.status, s100.mode) == ("done", "static")
    assert s100.static_reason.startswith("no sm_100a GPU on this host")
    s89 = by_arch["sm_89"]
    assert s89.mode == "gpu" and s89.static_reason is None
    # recorded, not lost: the harness could not run the autotune job without a CUDA driver
    assert s89.status == "failed" and s89.error["type"] == "WorkerError", s89.error
    assert "autotune of vector_add" in s89.error["message"]
    assert st.done == 1 and st.failed == 1
