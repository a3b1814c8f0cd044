"""The autotune job's timing synchronises often enough that queued work stays well inside the
hang timeout (H200, 2026-12-02: Triton's persistent ``fast.gemm_ws`` on 4 CTAs takes 58 ms a
launch; the search provider's rounds queued 16 of them per config and read as a hang of the
baseline). A fake device: launches advance a clock, ``_sync`` records the work queued since the
last one."""

from __future__ import annotations

import pytest

from harness.timing import stats
from tests.harness.test_pipeline_context import _FakeCtx


def _worker(monkeypatch, launch_ms: float, n_kernels: int, hang_timeout_s: float):
    import harness.gpu.worker as w

    monkeypatch.setattr(w, "cached_inputs", lambda *a, **k: {})
    monkeypatch.setattr(w, "bench_seed", lambda i, cache: i)
    monkeypatch.setattr(w, "stats", stats)
    wk = object.__new__(w.Worker)
    ctx = _FakeCtx(launch_ms)
    ctx.clock = 0.0
    wk.ctx = ctx
    kuts = [type("K", (), {"label": f"k{i}", "role": "reference"})() for i in range(n_kernels)]
    wk.req = type("R", (), {"kernels": kuts, "max_reps": 64, "min_reps": 16,
                            "timing_budget_s": 60.0, "hang_timeout_s": hang_timeout_s,
                            "input_cache": None})()
    wk.runs = {k.label: type("Run", (), {"status": "ok", "timing": None})() for k in kuts}
    wk.spec = None
    queued = [0.0]
    gaps: list[float] = []

    def launch(kut, size, bufs, scratch, kernel=None):
        ctx.clock += launch_ms
        queued[0] += launch_ms

    def sync(label):
        gaps.append(queued[0])
        queued[0] = 0.0

    wk._stage = lambda *a: None
    wk._bufset = lambda size, inputs, align: type("BS", (), {"bufs": {}, "pristine": {}})()
    wk._prep_timed = lambda *a: None
    wk._scratch = lambda *a: None
    wk._launch = launch
    wk._sync = sync
    return wk, gaps


@pytest.mark.parametrize("launch_ms, n_kernels", [(58.0, 10), (0.1, 10), (300.0, 3)])
def test_queued_work_between_synchronisations_stays_under_a_quarter_of_the_hang_timeout(
        monkeypatch, launch_ms, n_kernels):
    wk, gaps = _worker(monkeypatch, launch_ms, n_kernels, hang_timeout_s=10.0)
    wk.timing_autotune(None)
    assert gaps, "never synchronised"
    # one round of every kernel may exceed the quarter on its own; more than that may not
    assert max(gaps) <= max(0.25 * 10.0e3, launch_ms * n_kernels) + 1e-9, max(gaps)
    assert all(r.timing is not None for r in wk.runs.values())


def test_short_launches_still_synchronise_every_16_rounds(monkeypatch):
    wk, gaps = _worker(monkeypatch, 0.1, 2, hang_timeout_s=10.0)
    wk.timing_autotune(None)
    assert max(gaps) == pytest.approx(16 * 2 * 0.1)
