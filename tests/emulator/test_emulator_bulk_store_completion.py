"""Bulk stores and reductions to global memory (red team rounds 13/14, fixtures in
``tests/verifier/fixtures/redteam14``): their global writes are async-proxy writes performed
at completion. A generic ``st.global`` before a reduction into the same bytes needs
``fence.proxy.async.global`` (HB4); one bulk reduction after another needs nothing (both are
the async proxy's); a semaphore released after ``wait_group.read`` does not publish the
writes (HB1)."""

from __future__ import annotations

from pathlib import Path

import emulator

RT14 = Path(__file__).parents[1] / "verifier" / "fixtures" / "redteam14"
SECOND_REDUCE = """    cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%rd9], [%r6], 4096;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
"""


def _errors(text: str, name: str) -> list[str]:
    checks = emulator.check_default_launch(text, arch="sm_90a", filename=name)
    assert all(c.status == "ok" for c in checks), [c.render() for c in checks]
    return [f.rule for c in checks for f in c.findings if f.severity == "error"]


def test_a_generic_store_before_a_bulk_reduction_into_it_needs_a_proxy_fence():
    text = (RT14 / "bulkreduce_bias_noglobalfence_bug.ptx").read_text()
    assert _errors(text, "bug.ptx") == ["HB4"]


def test_a_bulk_reduction_after_another_one_into_the_same_bytes_is_not_hb4():
    text = (RT14 / "bulkreduce_bias_ok.ptx").read_text()
    anchor = "    cp.async.bulk.wait_group 0;\n"
    assert text.count(anchor) == 1
    twice = text.replace(anchor, anchor + SECOND_REDUCE)
    assert _errors(twice, "ok.ptx") == []


def test_a_semaphore_released_after_wait_group_read_races_with_the_stores_writes():
    bug = (RT14 / "splitk_bulkstore_sem_readonly_bug.ptx").read_text()
    ok = (RT14 / "splitk_bulkstore_sem_ok.ptx").read_text()
    assert "HB1" in _errors(bug, "bug.ptx")
    assert _errors(ok, "ok.ptx") == []


# ---- faults that are properties of the code become findings of the default launch -------
def _launch(text: str, name: str):
    checks = emulator.check_default_launch(text, arch="sm_100a", filename=name)
    return [(f.rule, f.severity) for c in checks for f in c.findings], \
        [c.status for c in checks]


def test_an_alloc_of_96_columns_computed_from_constants_is_a_ta1_error():
    text = (RT14 / "tmem_alloc_ncols_reg_bug.ptx").read_text()
    found, status = _launch(text, "k.ptx")
    assert ("TA1", "error") in found and status == ["fault"]


def test_an_alloc_whose_column_count_comes_from_a_parameter_is_left_to_the_launch():
    # the same fault with the count loaded from a parameter: a default value may have caused
    # it, so it is "could not complete" (give the value in --launch), not an error
    text = (RT14 / "tmem_alloc_ncols_reg_bug.ptx").read_text()
    text = text.replace(".param .u64 pout)", ".param .u64 pout, .param .u32 pcols)")
    anchor = "  shl.b32 %r8, %r8, 5;\n"
    assert anchor in text
    text = text.replace(anchor, anchor + "  ld.param.u32 %r8, [pcols];\n"
                                         "  add.u32 %r8, %r8, 32;\n")
    found, status = _launch(text, "k.ptx")
    assert not any(sev == "error" for _, sev in found) and status == ["fault"], found
