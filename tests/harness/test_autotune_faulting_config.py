"""autotune: a config that faults or hangs the worker is dropped and the job runs again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import harness.evaluate as E
from harness.errors import WorkerError
from harness.results import EvalResult, KernelRun


class _FakeEvaluator:
    """Scripted worker: any job holding a label of ``faulty`` crashes on the first of them."""

    def __init__(self, faulty: set[str], status: str = "crash"):
        self.faulty, self.status, self.jobs = faulty, status, []

    def request(self, spec, job, kuts, **kw):
        return [k.label for k in kuts]

    def run(self, labels):
        self.jobs.append(list(labels))
        bad = [lab for lab in labels if lab in self.faulty]
        if bad:
            return EvalResult(status=self.status, message=f"CUDA_ERROR_ILLEGAL_ADDRESS while running {bad[0]}",
                              kernels=[KernelRun(label=bad[0], role="reference", status=self.status,
                                                 message="a memory fault")])
        return EvalResult(status="ok", best=labels[-1],
                          kernels=[KernelRun(label=lab, role="reference", status="ok") for lab in labels])


@pytest.fixture
def refs(monkeypatch):
    monkeypatch.setattr(E, "reference_under_test",
                        lambda spec, a: SimpleNamespace(label=f"triton [{a.name}]", role="reference"))
    return [SimpleNamespace(name=f"c{i}") for i in range(4)]


@pytest.mark.parametrize("status", ["crash", "hang"])
def test_faulting_configs_are_dropped_and_the_rest_tuned(refs, status):
    ev = _FakeEvaluator({"triton [c1]", "triton [c3]"}, status)
    base = E.autotune(SimpleNamespace(name="k"), refs, ev)
    assert base.artifacts is refs[2]  # the fastest of the configs that ran (not refs[len(kuts)-1])
    assert ev.jobs == [["triton [c0]", "triton [c1]", "triton [c2]", "triton [c3]"],
                       ["triton [c0]", "triton [c2]", "triton [c3]"], ["triton [c0]", "triton [c2]"]]
    kept = {k.label: k.status for k in base.result.kernels}
    assert kept == {"triton [c0]": "ok", "triton [c2]": "ok", "triton [c1]": status,
                    "triton [c3]": status}


def test_every_config_faulting_is_an_error(refs):
    ev = _FakeEvaluator({f"triton [c{i}]" for i in range(4)})
    with pytest.raises(WorkerError, match="found no correct config"):
        E.autotune(SimpleNamespace(name="k"), refs, ev)
    assert len(ev.jobs) == 4


def test_a_crash_that_names_no_config_is_not_retried(refs):
    class _Dies(_FakeEvaluator):
        def run(self, labels):
            self.jobs.append(list(labels))
            return EvalResult(status="crash", message="the worker died (signal 9)")
    ev = _Dies(set())
    with pytest.raises(WorkerError, match="signal 9"):
        E.autotune(SimpleNamespace(name="k"), refs, ev)
    assert len(ev.jobs) == 1
