"""The cell store (claims, leases, dead owners, atomic finish) and campaign planning."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from campaign.plan import PlanError, cells_for, parse_archs, parse_providers, select_kernels
from campaign.store import CampaignStore, CellKey, CellRow, owner_alive, owner_id, utcnow


def _keys(n: int, arch: str = "sm_89") -> list[CellKey]:
    return [CellKey(kernel=f"k{i}", spec_ref=f"suite:k{i}", spec_id="0" * 16, arch=arch,
                    provider="triton") for i in range(n)]


@pytest.fixture
def store(tmp_path):
    s = CampaignStore(f"sqlite:///{tmp_path / 'db.sqlite'}", lease_s=30, max_attempts=2)
    yield s
    s.engine.dispose()


def test_ensure_campaign_is_idempotent_and_refuses_another_budget(store):
    camp, added = store.ensure_campaign("c", 2, _keys(3), {})
    assert added == 3
    camp2, added2 = store.ensure_campaign("c", 2, _keys(5), {})
    assert camp2.id == camp.id and added2 == 2 and len(store.cells(camp.id)) == 5
    from agent.store import StoreError

    with pytest.raises(StoreError, match="--iterations 3 differs"):
        store.ensure_campaign("c", 3, _keys(1), {})
    changed = [CellKey(kernel="k0", spec_ref="suite:k0", spec_id="1" * 16, arch="sm_89",
                       provider="triton")]
    with pytest.raises(StoreError, match="changed since the campaign was planned"):
        store.ensure_campaign("c", 2, changed, {})


def test_claim_respects_arch_filters_and_records_the_static_reason(store):
    camp, _ = store.ensure_campaign("c", 1, _keys(1, "sm_90a") + _keys(1, "sm_89")[:1], {})
    me = owner_id()
    c = store.claim(camp.id, me, exclude_archs=["sm_90a"], mode="static",
                    static_reasons={"sm_89": "no sm_89 GPU"})
    assert c is not None and c.arch == "sm_89" and c.static_reason == "no sm_89 GPU"
    assert c.status == "running" and c.attempts == 1 and c.owner == me
    assert store.claim(camp.id, me, exclude_archs=["sm_90a"], mode="static") is None
    g = store.claim(camp.id, me, archs=["sm_90a"], mode="gpu")
    assert g is not None and g.mode == "gpu" and g.static_reason is None


def _claim_all(url: str, campaign_id: int, q) -> None:
    s = CampaignStore(url, lease_s=30)
    got = []
    while True:
        c = s.claim(campaign_id, owner_id(), mode="static")
        if c is None:
            break
        got.append(c.id)
    q.put(got)


def test_concurrent_claims_hand_out_each_cell_once(store):
    camp, _ = store.ensure_campaign("c", 1, _keys(40), {})
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_claim_all, args=(store.url, camp.id, q)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    ids = [i for g in got for i in g]
    assert sorted(ids) == sorted(c.id for c in store.cells(camp.id))  # each cell exactly once


def test_owner_alive_tells_live_dead_and_foreign_owners():
    assert owner_alive(owner_id()) is True
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = owner_id(p.pid)
    p.wait()
    assert owner_alive(dead) is False
    host, pid, start = owner_id().rsplit(":", 2)
    assert owner_alive(f"{host}:{pid}:{int(start) + 1}") is False  # a recycled pid
    assert owner_alive("another-host.example:1:1") is None  # only its lease can tell


def test_release_dead_uses_liveness_here_and_leases_elsewhere(store):
    camp, _ = store.ensure_campaign("c", 1, _keys(4), {})
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = owner_id(p.pid)
    p.wait()
    owners = [owner_id(), dead, "another-host.example:1:1", "another-host.example:2:2"]
    for o in owners:
        assert store.claim(camp.id, o, mode="static") is not None
    with store.Session() as s:  # the last foreign owner's lease lapsed a minute ago
        s.execute(update(CellRow).where(CellRow.owner == owners[3])
                  .values(lease_until=utcnow() - timedelta(seconds=60)))
        s.commit()
    released = store.release_dead(camp.id)
    by_owner = {c.id: c for c in store.cells(camp.id)}
    assert sorted(released) == sorted(c.id for c in by_owner.values()
                                      if c.status == "pending")
    status = {o: next(c.status for c in store.cells(camp.id) if c.id == i)
              for o, i in zip(owners, sorted(by_owner))}
    assert status == {owners[0]: "running", dead: "pending", owners[2]: "running",
                      owners[3]: "pending"}


def test_a_cell_out_of_attempts_fails_as_worker_lost(store):
    camp, _ = store.ensure_campaign("c", 1, _keys(1), {})
    for _ in range(2):  # max_attempts = 2: claimed twice by processes that died
        p = subprocess.Popen([sys.executable, "-c", "pass"])
        o = owner_id(p.pid)
        p.wait()
        assert store.claim(camp.id, o, mode="static") is not None
        store.release_dead(camp.id)
    (c,) = store.cells(camp.id)
    assert c.status == "failed" and c.error["type"] == "worker-lost" and c.attempts == 2


def test_finish_by_a_former_owner_writes_nothing(store, tmp_path):
    from agent.loop import LoweringResult
    from agent.store import RunRow

    camp, _ = store.ensure_campaign("c", 1, _keys(1), {})
    c = store.claim(camp.id, "another-host.example:1:1", mode="static")
    res = LoweringResult(kernel="k0", spec_id="0" * 16, arch="sm_89", provider="triton",
                         started_at="", reference={}, gpu=False)
    assert store.finish(c.id, "another-host.example:9:9", result=res, report={}, summary={},
                        model=None, out_dir=None, seconds=1.0) is None
    with store.Session() as s:
        assert s.scalar(select(func.count()).select_from(RunRow)) == 0  # rolled back
    run_id = store.finish(c.id, "another-host.example:1:1", result=res, report={}, summary={},
                          model=None, out_dir=None, seconds=1.0)
    assert run_id is not None and store.cell(c.id).run_id == run_id
    assert store.claim(camp.id, owner_id(), mode="static") is None  # done: never claimed again


def test_selectors_families_globs_and_errors():
    assert len(select_kernels(["all"])) == 32
    common = {t.name.split(".")[0] for t in select_kernels(["common"])}
    papers = {t.name.split(".")[0] for t in select_kernels(["papers"])}
    assert len(common) == 12 and len(papers) == 10 and not common & papers
    assert [t.name for t in select_kernels(["gemm"])] == ["gemm.fp16", "gemm.fp8"]
    assert [t.name for t in select_kernels(["flash_att*", "flash_attention.causal"])] == \
           ["flash_attention.causal", "flash_attention.noncausal"]
    from kernels.registry import names
    fast = [t.name for t in select_kernels(["fast"])]
    assert fast == names("fast") and len(fast) >= 9 and all(n.startswith("fast.") for n in fast)
    assert not set(fast) & {t.name for t in select_kernels(["all"])}  # "all" is the study's suite
    assert [t.name for t in select_kernels(["fast.gemm_ws"])] == ["fast.gemm_ws"]
    assert {t.name for t in select_kernels(["fast.gemm_*"])} == {n for n in fast
                                                                if n.startswith("fast.gemm_")}
    assert select_kernels(["fast.gemm_ws"])[0].spec_ref == "suite:fast.gemm_ws"
    with pytest.raises(PlanError, match="matches no suite kernel"):
        select_kernels(["nothing_*"])
    with pytest.raises(PlanError, match="'bogus' is no suite kernel"):
        select_kernels(["bogus"])
    with pytest.raises(PlanError, match="sm_75"):
        parse_archs(["sm_89,sm_75"])
    assert parse_archs(["sm_89,sm_90a", "sm_89"]) == ["sm_89", "sm_90a"]
    known = ("triton", "openai")
    assert parse_providers(["triton", "openai:llama3:8b"], known) == \
           [("triton", ""), ("openai", "llama3:8b")]
    with pytest.raises(PlanError, match="needs a model"):
        parse_providers(["openai"], known)
    with pytest.raises(PlanError, match="unknown provider"):
        parse_providers(["gpt"], known)
    cells = cells_for(select_kernels(["relu"]), ["sm_89", "sm_100a"], [("triton", "")])
    assert len(cells) == 4 and {c.arch for c in cells} == {"sm_89", "sm_100a"}


def test_spec_file_selector(tmp_path):
    from kernels.registry import get

    spec = get("vector_add")
    src = spec.source.source_text()
    (tmp_path / "k.py").write_text(src)
    data = spec.model_dump(mode="json")
    data["name"] = "my_add"
    data["source"] = {"path": "k.py", "function": spec.source.function}
    data.pop("reference", None)
    import yaml

    (tmp_path / "my.yaml").write_text(yaml.safe_dump(data))
    (t,) = select_kernels([str(tmp_path / "my.yaml")])
    assert t.name == "my_add" and t.spec_ref == f"file:{tmp_path / 'my.yaml'}"


def test_precompile_fills_the_cache_the_cells_use(tmp_path):
    from campaign.precompile import precompile
    from harness import compile_space
    from kernels.registry import get

    n, bad = precompile([("suite:relu.fp16", "sm_90a"), ("suite:relu.fp16", "sm_90a")],
                        tmp_path, workers=2, inputs=False)  # bench inputs: 100s of MB
    spec = get("relu.fp16")
    assert (n, bad) == (len(spec.configs()), [])
    refs, failures = compile_space(spec, "sm_90a", cache_dir=tmp_path)
    assert not failures and all(a.cache_hit for a in refs)
    assert not (tmp_path / "inputs").exists()


def test_heartbeat_renews_the_lease_and_notices_a_lost_claim(tmp_path):
    import time

    from campaign.execute import Heartbeat
    from campaign.store import as_utc

    st = CampaignStore(f"sqlite:///{tmp_path / 'hb.sqlite'}", lease_s=0.6)
    camp, _ = st.ensure_campaign("c", 1, _keys(1), {})
    me = owner_id()
    c = st.claim(camp.id, me, mode="static")
    first = as_utc(c.lease_until)
    def wait_for(cond, limit_s: float = 30.0) -> bool:
        """Poll ``cond`` until true (bounded): a loaded machine may run the thread late."""
        end = time.monotonic() + limit_s
        while not cond():
            if time.monotonic() > end:
                return False
            time.sleep(0.05)
        return True

    with Heartbeat(st, c.id, me) as hb:  # renews every lease_s / 3 from its own thread
        assert wait_for(lambda: as_utc(st.cell(c.id).lease_until) > first + timedelta(seconds=0.3))
        assert not hb.lost
        assert st.release_dead(camp.id) == []  # alive here, and its lease is current
        with st.Session() as s:  # another worker took the cell over
            s.execute(update(CellRow).where(CellRow.id == c.id).values(owner="x:1:1"))
            s.commit()
        assert wait_for(lambda: hb.lost)
    st.engine.dispose()


def test_a_live_owner_that_stopped_renewing_loses_the_cell(store):
    camp, _ = store.ensure_campaign("c", 1, _keys(1), {})
    me = owner_id()  # alive, on this host
    c = store.claim(camp.id, me, mode="static")
    assert store.release_dead(camp.id) == []
    with store.Session() as s:
        s.execute(update(CellRow).where(CellRow.id == c.id)
                  .values(lease_until=utcnow() - timedelta(seconds=1)))
        s.commit()
    assert store.release_dead(camp.id) == [c.id]
    assert store.renew(c.id, me) is False  # the former owner finds out at its next heartbeat
