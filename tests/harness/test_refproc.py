"""The bench-size float64 reference in a capped child process (``harness.refproc``): the same
arrays as in-process, bf16/fp8 inputs carried unchanged, and a reference over its memory or time
budget is a clear error (any candidate can make the worker compute one: docs/harness.md,
"Float64 arbitration at the bench size")."""

from __future__ import annotations

import numpy as np
import pytest

import kernels
from harness.inputs import make_inputs, reference_outputs
from harness.refproc import ReferenceBudgetError, bench_reference


@pytest.mark.parametrize("name", ["vector_add", "conv2d.fp8"])
def test_child_reference_equals_the_in_process_one(name, tmp_path):
    spec = kernels.get(name)
    inputs = make_inputs(spec, "verify", 5)
    got = bench_reference(spec, "verify", inputs, workdir=tmp_path)
    want = reference_outputs(spec, "verify", inputs)
    assert got is not None and want is not None and got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == np.float64 and np.array_equal(got[k], want[k])
    assert not list(tmp_path.iterdir()), "the temporary folder is removed"


def test_memory_cap_is_a_clear_error():
    spec = kernels.get("softmax")
    inputs = make_inputs(spec, "bench", 1)
    with pytest.raises(ReferenceBudgetError, match=r"softmax at the bench size ran out of memory "
                                                   r"\(address space capped at 0\.3 GiB\)"):
        bench_reference(spec, "bench", inputs, max_bytes=300 << 20)


def test_time_cap_is_a_clear_error():
    spec = kernels.get("softmax")
    inputs = make_inputs(spec, "bench", 1)
    with pytest.raises(ReferenceBudgetError, match=r"took longer than 0\.05 s"):
        bench_reference(spec, "bench", inputs, timeout_s=0.05)
