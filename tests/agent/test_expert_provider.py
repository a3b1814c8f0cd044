"""The ``expert`` provider: the corpus's PTX byte for byte, then the baseline; ``none`` elsewhere."""

from __future__ import annotations

import pytest

import kernels
from agent.loop import LoopOptions, lower
from agent.providers.expert import ExpertProvider
from harness import compile_reference
from kernels.expert import entries as expert_entries


def _corpus(tmp_path, ref_cache, kernel="vector_add", arch="sm_90a"):
    spec = kernels.get(kernel)
    art = compile_reference(spec, arch, spec.configs()[0], cache_dir=ref_cache)
    # the reference PTX with a marker comment: a distinct text that must arrive unchanged
    ptx = art.ptx.replace(".address_size 64", ".address_size 64\n// expert marker\t \n", 1)
    d = tmp_path / kernel / arch
    d.mkdir(parents=True)
    (d / "kernel.ptx").write_bytes(ptx.encode())
    (d / "NOTES.md").write_text("test entry\n")
    meta = ", ".join(f"{k}: {v}" for k, v in spec.configs()[0].meta.items())
    (d / "launch.yaml").write_text(
        f"kernel: {kernel}\narch: {arch}\nentry: {art.abi.entry}\nthreads: {art.abi.threads}\n"
        f"meta: {{{meta}}}\nsummary: the reference with a comment\n")
    return ptx


def test_expert_proposes_the_corpus_ptx_then_the_baseline(tmp_path, ref_cache):
    ptx = _corpus(tmp_path, ref_cache)
    res = lower(kernels.get("vector_add"), "sm_90a", ExpertProvider(corpus=tmp_path),
                LoopOptions(iterations=5, cache_dir=ref_cache))
    assert [r.origin for r in res.iterations] == ["expert:vector_add/sm_90a",
                                                  f"triton:{kernels.get('vector_add').configs()[0].key()}"]
    assert res.stop_reason == "exhausted" and res.provider == "expert"
    assert res.best_iteration == 0 and res.best_candidate.ptx == ptx  # byte for byte
    assert res.iterations[0].verdict == "static-only"
    assert res.iterations[0].emulation["status"] == "ok"


def test_expert_says_none_without_an_entry_and_proposes_nothing(tmp_path, ref_cache):
    _corpus(tmp_path, ref_cache)
    res = lower(kernels.get("relu.fp16"), "sm_90a", ExpertProvider(corpus=tmp_path),
                LoopOptions(iterations=5, cache_dir=ref_cache))
    assert len(res.iterations) == 1 and res.best_candidate is None
    rec = res.iterations[0]
    assert rec.verdict == "rejected-provider"
    assert rec.provider_error.startswith("none: no expert candidate for relu.fp16 on sm_90a")
    assert res.stop_reason == "exhausted"
    # the leaderboard cell says "none", not just "no valid candidate"
    from agent.loop import build_report
    from campaign.html import _matrix_cell
    from campaign.leaderboard import Entry
    from campaign.summary import cell_summary

    summ = cell_summary(res, build_report(res), mode="static", static_reason="no GPU")
    assert summ["valid"] is False and summ["provider_note"] == rec.provider_error
    e = Entry(kernel="relu.fp16", base="relu", family="common", arch="sm_90a", provider="expert",
              who="expert", campaign="c", cell_id=1, status="done", outcome="invalid",
              provider_note=summ["provider_note"])
    assert _matrix_cell(e)[0].startswith("none")


def test_a_malformed_entry_is_reported_not_proposed(tmp_path, ref_cache):
    _corpus(tmp_path, ref_cache)
    ly = tmp_path / "vector_add" / "sm_90a" / "launch.yaml"
    ly.write_text(ly.read_text().replace("threads:", "threads: 0\nthreadz:"))
    res = lower(kernels.get("vector_add"), "sm_90a", ExpertProvider(corpus=tmp_path),
                LoopOptions(iterations=5, cache_dir=ref_cache))
    assert len(res.iterations) == 1 and res.best_candidate is None
    assert "launch.yaml:threads" in res.iterations[0].provider_error


@pytest.mark.parametrize("kernel,arch", [(e.kernel, e.arch) for e in expert_entries()])
def test_the_real_corpus_is_proposed_byte_for_byte(kernel, arch, ref_cache):
    from agent.loop import make_context
    from kernels.expert import find

    spec = kernels.get(kernel)
    art = compile_reference(spec, arch, spec.configs()[0], cache_dir=ref_cache)
    ctx = make_context(spec, arch, art, False, LoopOptions(cache_dir=ref_cache))
    prov = ExpertProvider()
    first = prov.propose(ctx, None, lambda n, a: "")
    entry = find(kernel, arch)
    assert first.candidate.ptx == entry.ptx == (entry.folder / "kernel.ptx").read_text()
    assert first.candidate.threads == entry.launch.threads
    assert first.candidate.global_scratch_size == entry.launch.global_scratch_size
    assert first.candidate.origin == f"expert:{kernel}/{arch}"
    second = prov.propose(ctx, "feedback", lambda n, a: "")
    assert second.candidate.ptx == art.ptx and second.candidate.origin.startswith("triton:")
    assert prov.propose(ctx, "feedback", lambda n, a: "").error_kind == "exhausted"


def test_campaigns_and_the_rest_service_know_the_expert_provider(tmp_path):
    from campaign.execute import CampaignOptions, known_providers, make_provider
    from server.schemas import LoweringCreate

    assert "expert" in known_providers()
    opts = CampaignOptions(db_url="sqlite://", data_dir=tmp_path, cache_dir=tmp_path)
    prov = make_provider("expert", "", opts)
    assert isinstance(prov, ExpertProvider) and prov.cache_dir == tmp_path
    assert LoweringCreate(kernel="softmax", provider="expert").provider == "expert"


@pytest.mark.slow
def test_the_loop_emulates_a_candidate_with_its_own_global_scratch(ref_cache):
    """The expert gemm builds its TMA descriptors in 512 B of global scratch per CTA while
    Triton's baseline needs none: emulated with the baseline's size (0, a NULL pointer) it
    faults at its first tensormap write; the loop must pass the candidate's own size."""
    res = lower(kernels.get("gemm.fp8"), "sm_90a", ExpertProvider(),
                LoopOptions(iterations=1, cache_dir=ref_cache))
    rec = res.iterations[0]
    assert rec.origin == "expert:gemm.fp8/sm_90a" and res.best_candidate.global_scratch_size == 512
    assert rec.emulation["status"] == "ok", rec.emulation
