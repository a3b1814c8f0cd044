"""Large-kernel tools through real SDKs and the loop: patch, show, token/cost budgets, replay.

Scripted multi-turn sessions against the loopback fake servers, in both wire formats (Anthropic
Messages and OpenAI Chat Completions); the agent loop runs for real on the static path (Triton
reference compile, ptxas, verifier; no GPU).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

import kernels
from agent.loop import LoopOptions, Transcript, lower
from agent.providers.anthropic import AnthropicProvider
from agent.providers.budget import Budget, BudgetedProvider, BudgetError, price_for, wrap_budget
from agent.providers.openai import OpenAIProvider
from agent.providers.replay import ReplayError, ReplayProvider
from agent.workspace import PatchError, Workspace, show_text
from harness.reference import compile_reference
from tests.agent.fake_llm_server import (
    FakeLLMServer,
    anthropic_message,
    function_call,
    openai_completion,
    text_block,
    tool_use,
)

KEY = "sk-test-0123456789abcdef"
MARK = "// ailower test: patched"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


class Anthropic:
    @staticmethod
    def provider(url: str) -> AnthropicProvider:
        return AnthropicProvider("claude-fake", api_key=KEY, base_url=url, max_retries=0,
                                 timeout=10.0)

    @staticmethod
    def turn(*calls: tuple[str, str, Any]) -> Any:
        return anthropic_message([text_block("working")] + [tool_use(*c) for c in calls],
                                 "tool_use")

    @staticmethod
    def results(body: dict[str, Any]) -> dict[str, str]:
        return {b["tool_use_id"]: b["content"] for m in body["messages"] if m["role"] == "user"
                and isinstance(m["content"], list) for b in m["content"]
                if b["type"] == "tool_result"}


class OpenAI:
    @staticmethod
    def provider(url: str) -> OpenAIProvider:
        return OpenAIProvider("gpt-fake", api_key=KEY, base_url=url + "/v1", max_retries=0,
                              timeout=10.0)

    @staticmethod
    def turn(*calls: tuple[str, str, Any]) -> Any:
        return openai_completion(content="working", tool_calls=[function_call(*c) for c in calls])

    @staticmethod
    def results(body: dict[str, Any]) -> dict[str, str]:
        return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


WIRES = [pytest.param(Anthropic, id="anthropic"), pytest.param(OpenAI, id="openai")]


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    cache = tmp_path_factory.mktemp("patch-cache")
    spec = kernels.get("vector_add")
    return spec, compile_reference(spec, "sm_90a", spec.configs()[0], cache_dir=cache), cache


def _session(wire: Any, ptx: str) -> list[Any]:
    """Two turns: (1) show, patch, ambiguous patch, compile and submit without resending the PTX;
    (2) a patch that is not found, a good one, verify, submit."""
    first_ld = next(ln for ln in ptx.splitlines() if "ld.global" in ln).strip()
    assert sum("ld.global" in ln for ln in ptx.splitlines()) >= 2
    return [
        wire.turn(("a1", "show", {"what": "ptx", "start_line": 1, "max_lines": 5}),
                  ("a2", "patch", {"edits": [{"search": ".address_size 64",
                                              "replace": f".address_size 64\n{MARK} 1"}]}),
                  ("a3", "patch", {"edits": [{"search": "ld.global", "replace": "ld.global"}]})),
        wire.turn(("a4", "compile", {})),
        wire.turn(("a5", "submit", {"threads": 128, "notes": "comment only"})),
        # turn 2
        wire.turn(("b1", "patch", {"edits": [{"search": "no such line\nat all",
                                              "replace": "x"}]}),
                  ("b2", "patch", {"edits": [{"search": f"{MARK} 1", "replace": f"{MARK} 2"},
                                             {"search": first_ld,
                                              "replace": f"{first_ld}\n{MARK} 3"}]})),
        wire.turn(("b3", "verify", {"threads": 128})),
        wire.turn(("b4", "submit", {"threads": 128})),
    ]


@pytest.mark.parametrize("wire", WIRES)
def test_patch_session_through_the_loop_then_replay_reproduces_the_bytes(wire, ref, tmp_path):
    spec, art, cache = ref
    ptx = art.ptx
    tx = tmp_path / "transcript.jsonl"
    with FakeLLMServer(_session(wire, ptx)) as srv:
        res = lower(spec, "sm_90a", wire.provider(srv.url),
                    LoopOptions(iterations=2, cache_dir=cache), transcript=Transcript(tx))
    assert [r.verdict for r in res.iterations] == ["static-only", "static-only"], \
        [r.feedback for r in res.iterations]
    bodies = [r.json for r in srv.requests]
    assert len(bodies) == 6
    results = {}
    for b in bodies:
        results.update(wire.results(b))
    # show: numbered lines and the paging hint
    assert results["a1"].startswith("ptx: lines 1-5 of ") and "(more: start_line=6)" in \
        results["a1"] and "1| " in results["a1"]
    assert results["a2"].startswith("patched: 1 edit(s) applied at line(s) ")
    assert "search text is ambiguous: it occurs" in results["a3"] and "at lines" in results["a3"]
    assert "registers" in results["a4"]  # ptxas assembled the patched current candidate
    assert "search text not found in the current candidate" in results["b1"]
    assert "patched: 2 edit(s)" in results["b2"]
    # the model never sent PTX, yet the candidates are the reference with the patches
    first = ptx.replace(".address_size 64", f".address_size 64\n{MARK} 1", 1)
    ld = next(ln for ln in ptx.splitlines() if "ld.global" in ln).strip()
    second = first.replace(f"{MARK} 1", f"{MARK} 2").replace(ld, f"{ld}\n{MARK} 3", 1)
    # the model never sent a PTX module: every assistant message is free of one
    said = [json.dumps(m) for b in bodies for m in b["messages"] if m["role"] == "assistant"]
    assert said and not any(".visible .entry" in m for m in said)
    digests = [r.candidate_digest for r in res.iterations]
    assert res.best_candidate.ptx in (first, second)

    # replay: offline (the server is gone), same candidates, byte for byte
    rp = ReplayProvider(tx)
    res2 = lower(spec, "sm_90a", rp, LoopOptions(iterations=5, cache_dir=cache),
                 transcript=Transcript(tmp_path / "replayed.jsonl"))
    assert [r.candidate_digest for r in res2.iterations] == digests
    assert res2.stop_reason == "exhausted"
    sha = lambda s: hashlib.sha256(s.encode()).hexdigest()  # noqa: E731
    assert sha(res2.best_candidate.ptx) == sha(res.best_candidate.ptx)
    rec = [json.loads(line) for line in tx.read_text().splitlines()]
    subs = [e for e in rec if e.get("type") == "submit"]
    assert [s["digest"] for s in subs] == digests


def test_replay_detects_a_different_task(ref, tmp_path):
    spec, art, cache = ref
    tx = tmp_path / "t.jsonl"
    with FakeLLMServer(_session(Anthropic, art.ptx)) as srv:
        lower(spec, "sm_90a", Anthropic.provider(srv.url), LoopOptions(iterations=2, cache_dir=cache),
              transcript=Transcript(tx))
    # tamper with the recording: the replayed patch now makes other bytes
    text = tx.read_text().replace(f"{MARK} 1", f"{MARK} X")
    tx.write_text(text)
    res = lower(spec, "sm_90a", ReplayProvider(tx), LoopOptions(iterations=1, cache_dir=cache))
    assert res.iterations[0].verdict == "rejected-provider"
    assert "rebuilt candidate" in res.iterations[0].provider_error
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"event": "provider", "iteration": 1}\nnot json\n')
    with pytest.raises(ReplayError, match=r"bad.jsonl:2: not JSON"):
        ReplayProvider(bad)
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"event": "done"}\n')
    with pytest.raises(ReplayError, match="no provider events"):
        ReplayProvider(empty)


@pytest.mark.parametrize("wire", WIRES)
def test_token_budget_stops_the_loop_with_its_reason(wire, ref):
    spec, art, cache = ref
    # each reply reports 10 input + 5 output tokens (fake server defaults): 15 per API call
    script = [wire.turn(("c1", "compile", {})), wire.turn(("s1", "submit", {"threads": 128})),
              wire.turn(("c2", "compile", {})), wire.turn(("s2", "submit", {"threads": 128}))]
    with FakeLLMServer(script) as srv:
        prov = BudgetedProvider(wire.provider(srv.url), Budget(max_tokens=40))
        res = lower(spec, "sm_90a", prov, LoopOptions(iterations=5, cache_dir=cache))
    # turn 1: 30 tokens; turn 2: one call (45 >= 40), then the guard stops the turn's next call
    assert len(srv.requests) == 3
    assert res.stop_reason == "budget: token budget exceeded: 45 tokens used of 40"
    assert [r.verdict for r in res.iterations] == ["static-only"]


def test_cost_budget_and_price_table(ref):
    spec, art, cache = ref
    table = {"claude-fake": [3.0, 15.0], "gpt-*": [1.0, 2.0], "gpt-fake-x*": [5.0, 5.0]}
    assert price_for("claude-fake", table) == (3.0, 15.0)
    assert price_for("gpt-fake-x1", table) == (5.0, 5.0)  # longest prefix wins
    assert price_for("other", table) is None

    class S:
        max_tokens_total = None
        max_cost_usd = 0.0002
        price_per_mtok = table

    script = [Anthropic.turn(("s1", "submit", {"threads": 128})),
              Anthropic.turn(("s2", "submit", {"threads": 128})),
              Anthropic.turn(("s3", "submit", {"threads": 128}))]
    with FakeLLMServer(script) as srv:
        prov = wrap_budget(Anthropic.provider(srv.url), S(), "claude-fake")
        res = lower(spec, "sm_90a", prov, LoopOptions(iterations=5, cache_dir=cache))
    # per call: 10 * $3 + 5 * $15 per million = 105 micro-USD; two turns reach 210 >= 200
    assert len(srv.requests) == 2
    assert res.stop_reason.startswith("budget: cost budget exceeded: $0.0002 spent of $0.0002")
    assert prov.cost_usd == pytest.approx(210e-6) and prov.tokens == 30
    S.price_per_mtok = {}
    with pytest.raises(BudgetError, match="no price for model .claude-fake."):
        wrap_budget(Anthropic.provider("http://127.0.0.1:9"), S(), "claude-fake")


def test_workspace_patch_errors_leave_the_candidate_unchanged():
    ws = Workspace("a\nb\nc\nb\n")
    with pytest.raises(PatchError, match=r"edits\[2\]: search text is ambiguous: it occurs 2 "
                                         r"times, at lines 2, 4"):
        ws.patch([{"search": "a", "replace": "A"}, {"search": "b", "replace": "B"}])
    assert ws.current == "a\nb\nc\nb\n"
    with pytest.raises(PatchError, match=r"not found .*first line 'c' occurs at line\(s\) 3"):
        ws.patch([{"search": "c\nd", "replace": ""}])
    assert ws.patch([{"search": "c\nb", "replace": "C"}]).startswith("patched: 1 edit(s) applied "
                                                                     "at line(s) 3")
    assert ws.current == "a\nb\nC\n"
    ws.patch([{"search": "a", "replace": "Z"}], base="reference")
    assert ws.current == "Z\nb\nc\nb\n"
    # a model cannot grow its candidate without bound by patching
    from agent.workspace import MAX_CANDIDATE_BYTES
    with pytest.raises(PatchError, match="over the 16777216-byte limit"):
        ws.patch([{"search": "Z", "replace": "x" * (MAX_CANDIDATE_BYTES + 1)}])
    assert ws.current == "Z\nb\nc\nb\n"


def test_show_sass_and_missing_tools(ref, monkeypatch):
    spec, art, cache = ref

    class Ctx:
        ttgir, llir, reference_ptx, triton_source = art.ttgir, art.llir, art.ptx, "src"
        reference_cubin = art.cubin

    ws = Workspace(art.ptx)
    assert show_text(Ctx, ws, "llir").startswith("llir: lines 1-")
    from agent import workspace
    # Triton's wheel bundles cuobjdump and nvdisasm (triton_toolchain.md section 1)
    assert workspace.find_cuobjdump() is not None and workspace.find_nvdisasm() is not None
    out = show_text(Ctx, ws, "sass", max_lines=400)
    assert "vector_add_kernel" in out and re.search(r"\bLDG\.E", out), out[:500]
    monkeypatch.setattr(workspace, "find_cuobjdump", lambda: None)
    out = show_text(Ctx, ws, "sass", max_lines=400)  # nvdisasm instead
    assert re.search(r"\bLDG\.E", out), out[:500]
    monkeypatch.setattr(workspace, "find_nvdisasm", lambda: None)
    with pytest.raises(ValueError, match="SASS is unavailable on this host: no cuobjdump or "
                                         "nvdisasm"):
        show_text(Ctx, ws, "sass")
    with pytest.raises(ValueError, match=r"show.start_line: 99999 is past the end"):
        show_text(Ctx, ws, "ptx", start_line=99999)
