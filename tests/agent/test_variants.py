"""Plan, then K variants per turn, through both wire formats and the real loop (static path).

A scripted model hands in three variants in one turn (patches on the best candidate so far):
one that ptxas rejects, one the verifier rejects (the entry renamed), one valid. The valid one
becomes the turn's candidate and seeds the next turn (the next turn's edits apply to it); the
feedback names the others' failures; token and cost caps stop variant turns; K is enforced; a
replay of the transcript rebuilds every variant byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import kernels
from agent.loop import LoopOptions, Transcript, build_report, lower
from agent.providers.budget import Budget, BudgetedProvider
from agent.providers.replay import ReplayProvider
from agent.tools import candidates_from_submit, submit_defaults
from agent.workspace import Workspace
from harness.reference import compile_reference
from tests.agent.fake_llm_server import FakeLLMServer
from tests.agent.test_patch_replay import WIRES, Anthropic

MARK = "// ailower variant"


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    cache = tmp_path_factory.mktemp("variant-cache")
    spec = kernels.get("vector_add")
    return spec, compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=cache), cache


def _three(ptx: str) -> list[dict[str, Any]]:
    """Variant 1 fails ptxas, variant 2 fails the verifier (renamed entry), variant 3 is valid."""
    assert ptx.count("\tret;") == 1 and ptx.count(".entry vector_add_kernel(") == 1
    return [
        {"edits": [{"search": "\tret;", "replace": "\tbogus.op.b32 %r1, %r1;\n\tret;"}],
         "notes": "ptxas fails"},
        {"edits": [{"search": ".entry vector_add_kernel(",
                    "replace": ".entry vector_add_kernel_renamed("}], "notes": "verifier fails"},
        {"edits": [{"search": ".address_size 64", "replace": f".address_size 64\n{MARK} 3"}],
         "notes": "valid"},
    ]


def _script(wire: Any, ptx: str) -> list[Any]:
    turn2 = [
        # applies to the seeded best (variant 3 of turn 1): its search text exists only there
        {"edits": [{"search": f"{MARK} 3", "replace": f"{MARK} 3b"}]},
        {"base": "reference",
         "edits": [{"search": ".address_size 64", "replace": f".address_size 64\n{MARK} r"}]},
    ]
    return [
        wire.turn(("t1", "submit", {"threads": 128, "plan": "try three small edits",
                                    "variants": _three(ptx)})),
        wire.turn(("t2", "submit", {"threads": 128, "plan": "build on the best",
                                    "variants": turn2})),
    ]


@pytest.mark.parametrize("wire", WIRES)
def test_three_variants_one_valid_seeds_the_next_turn_and_replays(wire, ref, tmp_path):
    spec, art, cache = ref
    ptx = art.ptx
    tx = tmp_path / "transcript.jsonl"
    with FakeLLMServer(_script(wire, ptx)) as srv:
        res = lower(spec, "sm_90a", wire.provider(srv.url),
                    LoopOptions(iterations=2, cache_dir=cache, variants=3),
                    transcript=Transcript(tx))
    it1, it2 = res.iterations
    assert [v.verdict for v in it1.variants] == ["rejected-assembly", "rejected-verifier",
                                                  "static-only"]
    assert it1.plan == "try three small edits" and it1.chosen_variant == 3
    assert it1.verdict == "static-only"
    assert "bogus.op" in it1.variants[0].summary
    assert "E1" in it1.variants[1].summary
    # the feedback (the next turn's prompt) names the others' failures
    prompt2 = json.dumps(srv.requests[1].json["messages"][-1])
    assert "variant 1: rejected-assembly" in prompt2 and "bogus.op" in prompt2
    assert "variant 2: rejected-verifier" in prompt2 and "E1" in prompt2
    assert "variant 3 is this turn's candidate" in prompt2
    # the K=3 schema went out on the wire
    tools = json.dumps(srv.requests[0].json["tools"])
    assert '"variants"' in tools and '"maxItems": 3' in tools
    # turn 2: variant 1's edit applied to the seeded best, variant 2 to Triton's PTX
    v3 = ptx.replace(".address_size 64", f".address_size 64\n{MARK} 3", 1)
    assert res.best_iteration == 0 and res.best_candidate.ptx == v3
    assert [v.verdict for v in it2.variants] == ["static-only", "static-only"]
    ws = Workspace(ptx)
    ws.best = v3
    want = candidates_from_submit({"threads": 128, "variants": [
        {"ptx": v3.replace(f"{MARK} 3", f"{MARK} 3b")},
        {"ptx": ptx.replace(".address_size 64", f".address_size 64\n{MARK} r", 1)}]},
        ws, "x", defaults=submit_defaults(_Ctx(art)), max_variants=3)
    assert [v.candidate_digest for v in it2.variants] == [c.digest() for c in want.candidates]

    # the report and the transcript record the plan and every variant
    rep = build_report(res)["iterations"][0]
    assert rep["plan"] == "try three small edits" and rep["chosen_variant"] == 3
    assert [v["verdict"] for v in rep["variants"]] == ["rejected-assembly", "rejected-verifier",
                                                        "static-only"]
    rows = [json.loads(line) for line in tx.read_text().splitlines()]
    its = [r for r in rows if r.get("event") == "iteration"]
    assert [len(r["variants"]) for r in its] == [3, 2] and its[0]["plan"] == it1.plan
    subs = [r for r in rows if r.get("type") == "submit"]
    assert [s["plan"] for s in subs] == ["try three small edits", "build on the best"]
    recorded = [[v["digest"] for v in s["variants"]] for s in subs]
    assert recorded == [[v.candidate_digest for v in it.variants] for it in (it1, it2)]

    # replay: offline, the same variants byte for byte (digests cover the PTX and launch)
    # (K=1 in the replaying run: the recording enforced its K, replay rebuilds what it recorded)
    res2 = lower(spec, "sm_90a", ReplayProvider(tx), LoopOptions(iterations=5, cache_dir=cache))
    assert [[v.candidate_digest for v in it.variants] for it in res2.iterations] == recorded
    assert [[v.verdict for v in it.variants] for it in res2.iterations] == \
        [[v.verdict for v in it.variants] for it in (it1, it2)]
    assert res2.best_candidate.ptx == v3 and res2.stop_reason == "exhausted"


class _Ctx:
    """The two fields :func:`submit_defaults` reads."""

    def __init__(self, art: Any):
        self.abi, self.config = art.abi, art.config


@pytest.mark.parametrize("wire", WIRES)
def test_more_than_k_variants_is_an_invalid_submit(wire, ref):
    spec, art, cache = ref
    four = _three(art.ptx) + [{}]
    script = [wire.turn(("t1", "submit", {"threads": 128, "variants": four}))]
    with FakeLLMServer(script) as srv:
        res = lower(spec, "sm_90a", wire.provider(srv.url),
                    LoopOptions(iterations=1, cache_dir=cache, variants=3))
    rec = res.iterations[0]
    assert rec.verdict == "rejected-provider"
    assert "submit.variants: at most 3 variants per turn, got 4" in rec.provider_error


@pytest.mark.parametrize("wire", WIRES)
def test_token_budget_stops_variant_turns(wire, ref):
    spec, art, cache = ref
    script = [wire.turn(("t1", "submit", {"threads": 128, "variants": _three(art.ptx)})),
              wire.turn(("t2", "submit", {"threads": 128, "variants": _three(art.ptx)}))]
    with FakeLLMServer(script) as srv:
        # 15 tokens per API call (fake server defaults): the second turn is refused before it starts
        prov = BudgetedProvider(wire.provider(srv.url), Budget(max_tokens=15))
        res = lower(spec, "sm_90a", prov, LoopOptions(iterations=5, cache_dir=cache, variants=3))
    assert len(srv.requests) == 1 and len(res.iterations) == 1
    assert len(res.iterations[0].variants) == 3
    assert res.stop_reason == "budget: token budget exceeded: 15 tokens used of 15"


def test_cost_cap_stops_variant_turns(ref):
    spec, art, cache = ref
    script = [Anthropic.turn(("t1", "submit", {"threads": 128, "variants": _three(art.ptx)})),
              Anthropic.turn(("t2", "submit", {"threads": 128, "variants": _three(art.ptx)}))]
    with FakeLLMServer(script) as srv:
        # 10 in + 5 out tokens at $3/$15 per million = 105 micro-USD per call
        prov = BudgetedProvider(Anthropic.provider(srv.url),
                                Budget(max_cost_usd=0.0001, price_in=3.0, price_out=15.0))
        res = lower(spec, "sm_90a", prov, LoopOptions(iterations=5, cache_dir=cache, variants=3))
    assert len(srv.requests) == 1 and len(res.iterations) == 1
    assert res.stop_reason.startswith("budget: cost budget exceeded: $0.0001 spent of $0.0001")


def test_variant_argument_errors_name_the_variant(ref):
    spec, art, cache = ref
    ws = Workspace(art.ptx)
    d = submit_defaults(_Ctx(art))
    with pytest.raises(ValueError, match=r"submit.variants\[1\]: give ptx or edits, not both"):
        candidates_from_submit({"threads": 128, "variants": [{"ptx": art.ptx, "edits": [
            {"search": "a", "replace": "b"}]}]}, ws, "x", defaults=d, max_variants=2)
    with pytest.raises(ValueError, match=r"submit.variants\[2\]: edits\[1\]: search text not found"):
        candidates_from_submit({"threads": 128, "variants": [{}, {"edits": [
            {"search": "no such text", "replace": "b"}]}]}, ws, "x", defaults=d, max_variants=2)
    with pytest.raises(ValueError, match=r"submit.variants\[1\].threads: must be <= 1024"):
        candidates_from_submit({"threads": 128, "variants": [{"threads": 4096}]}, ws, "x",
                               defaults=d, max_variants=2)
    with pytest.raises(ValueError, match=r"K=1"):
        candidates_from_submit({"threads": 128, "variants": [{}]}, ws, "x", defaults=d)
    # a variant never changes the conversation's current candidate
    assert ws.current == art.ptx


def test_the_best_reaches_a_provider_behind_a_duck_typed_wrapper(ref):
    """Campaign and server meters wrap the provider without subclassing Provider (no seed): the
    loop looks through ``inner`` so the next turn's edits still apply to the best."""
    spec, art, cache = ref

    from agent.providers.base import Provider

    class Meter:  # like campaign.execute.UsageMeter
        def __init__(self, inner):
            self.inner, self.name = inner, inner.name

        def propose(self, ctx, feedback, tools):
            return self.inner.propose(ctx, feedback, tools)

    class Capped(Meter, Provider):  # like server.runner.CostCappedProvider: the no-op seed
        pass

    for wrap in (Meter, lambda p: Capped(Meter(p))):
        with FakeLLMServer(_script(Anthropic, art.ptx)) as srv:
            res = lower(spec, "sm_90a", wrap(Anthropic.provider(srv.url)),
                        LoopOptions(iterations=2, cache_dir=cache, variants=3))
        assert [v.verdict for v in res.iterations[1].variants] == ["static-only", "static-only"]
