"""The emulator on Triton 3.9's own PTX (sm_90a and sm_100a) of its kernel set in the styles of
public repositories (tests/emulator/realk): every entry runs and matches the float64 reference
with no HB error. Triton's PTX is correct: any "unsupported", "fault" or mismatch is an emulator
defect. Regressions: ``init: zeros`` outputs are zero-filled as on the GPU (atomics), and the
mixed-precision ``sub.rn.f32.f16`` of sm_100a LayerNorm is computed per the PTX ISA."""

from __future__ import annotations

import pytest

from emulator import run_kernel
from kernels.spec import Config
from tests.emulator import realk

# small sizes (1-4 CTAs) so that each case takes seconds; the constexprs baked into the PTX are
# those of the bench size, the spec's scalars and grid follow these dims
DIMS = {
    "realk_atomic_sum": {"B": 3, "N": 3000},
    "realk_cumsum": {"B": 2, "N": 1000},
    "realk_gemm": {"M": 128, "N": 200, "K": 128},
    "realk_attn_fwd": {"BH": 1, "S": 160, "D": 64},
    "realk_rope": {"T": 3, "H": 16, "D": 128},
    "realk_layernorm": {"M": 3, "N": 1000},
    "realk_small_dot_bwd": {"NB": 2, "T": 16, "D": 16},
    "realk_short_softmax": {"M": 3, "N": 24},
    "realk_argmax": {"M": 4, "N": 700},
    "realk_running_max": {"M": 2, "N": 1000},
    "realk_histogram": {"N": 3000, "NBINS": 64},
    "realk_persistent_gemm": {"M": 256, "N": 128, "K": 64},
    "realk_causal_attn": {"BH": 1, "S": 192, "D": 64},
}


def _run(name: str, arch: str, spec=None, **kw):
    text, meta = realk.fixture(name, arch)
    spec = spec or realk.specs()[name]
    return run_kernel(text, spec, arch, dims=DIMS[name], config=Config(**meta["config"]),
                      dynamic_smem=meta["dynamic_smem"],
                      global_scratch_size=meta["global_scratch_size"],
                      filename=f"{name}_{arch}.ptx", **kw)


def test_every_kernel_of_the_set_has_a_case():
    assert set(DIMS) == set(realk.specs())


@pytest.mark.parametrize("arch", realk.ARCHS)
@pytest.mark.parametrize("name", sorted(DIMS))
def test_triton39_ptx_matches_reference(name, arch):
    res = _run(name, arch)
    assert res.status == "ok", res.summary()
    assert not [f for f in res.findings if f.severity == "error"], res.summary()
    assert res.outputs and all(c.ok for c in res.outputs.values()), res.summary()


def test_init_zeros_output_is_zero_filled_like_the_gpu_worker():
    # atomics accumulate into the output: with the sentinel fill (0xFF bytes = NaN) every sum
    # would be NaN; the spec's `init: zeros` must give the GPU worker's zero fill
    name = "realk_atomic_sum"
    res = _run(name, "sm_90a")
    assert res.ok and res.outputs["out_ptr"].ok, res.summary()
    spec = realk.specs()[name]
    params = tuple(p.model_copy(update={"init": "sentinel"}) if p.name == "out_ptr" else p
                   for p in spec.params)
    bad = _run(name, "sm_90a", spec=spec.model_copy(update={"params": params}))
    assert bad.status == "mismatch", bad.summary()


def test_output_fill_byte_is_the_one_definition():
    from harness.inputs import output_fill_byte
    spec = realk.specs()["realk_atomic_sum"]
    out = next(p for p in spec.params if p.name == "out_ptr")
    assert output_fill_byte(out, 0xFF) == 0 and output_fill_byte(out, 0x7F) == 0
    sent = out.model_copy(update={"init": "sentinel"})
    assert output_fill_byte(sent, 0xFF) == 0xFF and output_fill_byte(sent, 0x7F) == 0x7F
    with pytest.raises(ValueError, match="x_ptr"):
        output_fill_byte(spec.params[0], 0xFF)


def test_cta_subset_compares_only_what_the_emulated_ctas_wrote():
    from emulator.machine import representative_order
    # gemm 384 x 384: 3 x 3 tiles of 128; a budget of 4 CTAs runs the grid's corners
    spec = realk.specs()["realk_gemm"]
    text, meta = realk.fixture("realk_gemm", "sm_90a")
    kw = dict(dims={"M": 384, "N": 384, "K": 64}, config=Config(**meta["config"]),
              dynamic_smem=meta["dynamic_smem"], filename="g.ptx")
    res = run_kernel(text, spec, "sm_90a", max_ctas=4, **kw)
    assert res.ok, res.summary()
    assert res.ctas_total == 9 and res.ctas_emulated == 4
    assert res.emulated_ctas == sorted(representative_order((9, 1, 1))[:4].tolist())
    assert "4 of 9 CTAs emulated" in res.subset_reason and "CTA budget" in res.subset_reason
    # 4 tiles of 128 x 128 compared, out of 384 x 384; the rest is not counted as checked
    assert res.checked_elements["c_ptr"] == (4 * 128 * 128, 384 * 384)
    assert res.outputs["c_ptr"].ok
    assert "subset" in res.summary()


def test_cta_subset_of_an_atomic_output_is_not_checked():
    # every CTA adds into the same rows: a subset cannot check the sums
    res = _run("realk_atomic_sum", "sm_90a", max_ctas=2)
    assert res.status == "timeout" and not res.ok
    assert "atomics" in res.message and res.ctas_emulated == 2


def test_representative_order_starts_with_the_corners_and_covers_the_grid():
    from emulator.machine import representative_order
    o = representative_order((4, 3, 2))
    assert sorted(o.tolist()) == list(range(24))
    corners = {x + 4 * (y + 3 * z) for x in (0, 3) for y in (0, 2) for z in (0, 1)}
    assert set(o[:8].tolist()) == corners


def test_a_deadline_inside_a_later_batch_reports_the_complete_ctas(monkeypatch):
    # rope, 64 CTAs: the first batch (2 CTAs) completes, the deadline then falls inside the
    # second: its CTAs are dropped and the run is a subset of the 2, not a timeout
    from emulator.machine import Machine, _Fault
    orig, calls = Machine._run_batch, []

    def batch(self, ids):
        calls.append(len(ids))
        orig(self, ids)  # its writes land in memory, as a batch cut mid-way leaves them
        if len(calls) == 2:
            raise _Fault("timeout", "emulation exceeded 60 s (at x.ptx:1:1)")

    monkeypatch.setattr(Machine, "_run_batch", batch)
    text, meta = realk.fixture("realk_rope", "sm_90a")
    res = run_kernel(text, realk.specs()["realk_rope"], "sm_90a", config=Config(**meta["config"]),
                     dynamic_smem=meta["dynamic_smem"], filename="r.ptx")
    assert res.ok, res.summary()
    assert res.ctas_total == 64 and res.ctas_emulated == calls[0] == 2 and calls[1] > 0
    assert f"inside a batch of {calls[1]} further CTAs, which were dropped" in res.subset_reason
    # only the 2 complete CTAs' elements are compared (the dropped batch's are not marked)
    (k, total), = res.checked_elements.values()
    assert 0 < k < total


def test_batch_sizing_fits_a_fixed_cost_per_batch():
    from emulator.machine import _fit, _next_batch
    # every batch costs 2 s of steps plus 0.01 s per CTA
    costs = [(2, 2.02), (16, 2.16)]
    a, b = _fit(costs)
    assert abs(a - 2.0) < 1e-6 and abs(b - 0.01) < 1e-6
    assert _next_batch(costs, 110, 254, 50.0) == 110  # the rest fits in one batch
    assert _next_batch(costs, 110, 254, 3.0) == 0  # no batch fits half of 3 s
    # after one batch only, the cautious bound (all cost per CTA) and at most 8x as large
    assert _next_batch([(2, 2.0)], 126, 254, 100.0) == 16
    assert _next_batch([(2, 2.0)], 126, 254, 10.0) == 5  # 1 s per CTA, half of 10 s
