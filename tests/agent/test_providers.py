"""Provider tests against a real loopback HTTP server speaking each wire format.

Each test scripts the server's replies (see :mod:`fake_llm_server`), drives a provider through
:meth:`propose` with a recording tool executor, and checks both the :class:`Proposal` and what the
SDK actually sent (prompts, tool schemas, tool results and their ids, where the key went).
Nothing leaves 127.0.0.1; retries and timeouts are kept to fractions of a second.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

try:
    from tests.agent.fake_llm_server import (
        FakeLLMServer, Reply, anthropic_message, error_reply, function_call, openai_completion,
        text_block, tool_use)
except ImportError:  # run from tests/agent without the repo root on sys.path
    from fake_llm_server import (  # type: ignore[no-redef]
        FakeLLMServer, Reply, anthropic_message, error_reply, function_call, openai_completion,
        text_block, tool_use)

from agent.prompts import NO_SUBMIT_NOTE, feedback_prompt, initial_prompt, system_prompt
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import ProposalContext, ProviderAuthError
from agent.providers.openai import OpenAIProvider
from agent.tools import (TOOL_SCHEMAS, anthropic_tools, candidate_from_submit, openai_tools,
                         validate_tool_args)
from kernels.abi import ABIParam, KernelABI
from kernels.suite.vector_add import SPEC

KEY = "sk-test-SECRET-0123456789abcdef"
PTX = (".version 8.7\n.target sm_90a\n.address_size 64\n"
       ".visible .entry vector_add_kernel() { ret; }\n")
PTX2 = PTX.replace("ret;", "// faster\n ret;")


# ---- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ambient credentials, endpoints, headers or proxies may leak into a test."""
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
                "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_PROFILE", "ANTHROPIC_CONFIG_DIR",
                "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_CUSTOM_HEADERS", "OPENAI_ORG_ID",
                "OPENAI_PROJECT_ID", "OPENAI_ADMIN_KEY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def make_ctx(**kw: Any) -> ProposalContext:
    """A small task for ``vector_add`` on sm_90a with a hand-written ABI."""
    cfg = SPEC.configs()[0]
    ptr = dict(ptx_type="u64", size=8, is_pointer=True)
    abi = KernelABI(
        entry="vector_add_kernel",
        params=(
            ABIParam(name="vector_add_kernel_param_0", **ptr, source="pointer", spec_param="x_ptr"),
            ABIParam(name="vector_add_kernel_param_1", **ptr, source="pointer", spec_param="y_ptr"),
            ABIParam(name="vector_add_kernel_param_2", **ptr, source="pointer",
                     spec_param="out_ptr"),
            ABIParam(name="vector_add_kernel_param_3", ptx_type="u32", size=4, source="scalar",
                     spec_param="n_elements"),
            ABIParam(name="vector_add_kernel_param_4", **ptr, source="global_scratch"),
            ABIParam(name="vector_add_kernel_param_5", **ptr, source="profile_scratch"),
        ),
        threads=32 * cfg.num_warps, arch="sm_90a")
    fields: dict[str, Any] = dict(
        spec=SPEC, arch="sm_90a", config=cfg, constexprs=SPEC.constexprs(cfg), abi=abi,
        triton_source="@triton.jit\ndef vector_add_kernel(...): ...",
        ttgir="#blocked = ... tt.func public @vector_add_kernel",
        reference_ptx=".version 8.7\n.target sm_90a\n.address_size 64\n// triton ptx")
    fields.update(kw)
    return ProposalContext(**fields)


class Tools:
    """A recording :data:`ToolExecutor`: returns ``<name> ok #n``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name: str, args: dict[str, Any]) -> str:
        self.calls.append((name, args))
        return f"{name} ok #{len(self.calls)}"


# ---- the two wire formats behind one test interface ---------------------------------------------
class AnthropicWire:
    name = "anthropic"

    @staticmethod
    def provider(url: str, **kw: Any) -> AnthropicProvider:
        kw.setdefault("max_retries", 0)
        kw.setdefault("timeout", 5.0)
        return AnthropicProvider("claude-fake", api_key=KEY, base_url=url, **kw)

    @staticmethod
    def calls(*calls: tuple[str, str, Any], text: str | None = None) -> Reply:
        blocks = ([text_block(text)] if text else []) + [tool_use(*c) for c in calls]
        return anthropic_message(blocks, "tool_use")

    @staticmethod
    def text(text: str) -> Reply:
        return anthropic_message([text_block(text)], "end_turn")

    @staticmethod
    def refusal() -> Reply:
        return anthropic_message([], "refusal")

    @staticmethod
    def path() -> str:
        return "/v1/messages"

    @staticmethod
    def system(body: dict[str, Any]) -> str:
        sys_ = body["system"]
        return sys_ if isinstance(sys_, str) else "".join(b["text"] for b in sys_)

    @staticmethod
    def user_texts(body: dict[str, Any]) -> list[str]:
        out = []
        for m in body["messages"]:
            if m["role"] == "user":
                c = m["content"]
                out += [c] if isinstance(c, str) else [b["text"] for b in c if b["type"] == "text"]
        return out

    @staticmethod
    def tool_names(body: dict[str, Any]) -> list[str]:
        return [t["name"] for t in body["tools"]]

    @staticmethod
    def tool_schema(body: dict[str, Any], name: str) -> dict[str, Any]:
        return next(t["input_schema"] for t in body["tools"] if t["name"] == name)

    @staticmethod
    def tool_results(body: dict[str, Any]) -> dict[str, str]:
        """tool_use_id -> content of every tool_result in the request."""
        out = {}
        for m in body["messages"]:
            if m["role"] == "user" and isinstance(m["content"], list):
                for b in m["content"]:
                    if b["type"] == "tool_result":
                        out[b["tool_use_id"]] = b["content"]
        return out

    @staticmethod
    def tool_call_ids(body: dict[str, Any]) -> list[str]:
        return [b["id"] for m in body["messages"] if m["role"] == "assistant"
                for b in m["content"] if b["type"] == "tool_use"]


class OpenAIWire:
    name = "openai"

    @staticmethod
    def provider(url: str, **kw: Any) -> OpenAIProvider:
        kw.setdefault("max_retries", 0)
        kw.setdefault("timeout", 5.0)
        return OpenAIProvider("gpt-fake", api_key=KEY, base_url=url + "/v1", **kw)

    @staticmethod
    def calls(*calls: tuple[str, str, Any], text: str | None = None) -> Reply:
        return openai_completion(content=text, tool_calls=[function_call(*c) for c in calls])

    @staticmethod
    def text(text: str) -> Reply:
        return openai_completion(content=text)

    @staticmethod
    def refusal() -> Reply:
        return openai_completion(refusal="I can't help with that.")

    @staticmethod
    def path() -> str:
        return "/v1/chat/completions"

    @staticmethod
    def system(body: dict[str, Any]) -> str:
        return next(m["content"] for m in body["messages"] if m["role"] == "system")

    @staticmethod
    def user_texts(body: dict[str, Any]) -> list[str]:
        return [m["content"] for m in body["messages"] if m["role"] == "user"]

    @staticmethod
    def tool_names(body: dict[str, Any]) -> list[str]:
        return [t["function"]["name"] for t in body["tools"]]

    @staticmethod
    def tool_schema(body: dict[str, Any], name: str) -> dict[str, Any]:
        return next(t["function"]["parameters"] for t in body["tools"]
                    if t["function"]["name"] == name)

    @staticmethod
    def tool_results(body: dict[str, Any]) -> dict[str, str]:
        return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}

    @staticmethod
    def tool_call_ids(body: dict[str, Any]) -> list[str]:
        return [c["id"] for m in body["messages"] if m["role"] == "assistant"
                for c in m.get("tool_calls") or []]


WIRES = [pytest.param(AnthropicWire, id="anthropic"), pytest.param(OpenAIWire, id="openai")]


def assert_no_key_leak(server: FakeLLMServer, proposal: Any) -> None:
    """The key is sent only in the auth header and never recorded in the transcript."""
    assert KEY not in json.dumps(proposal.events, default=str)
    assert KEY not in (proposal.error or "")
    for req in server.requests:
        assert KEY.encode() not in req.raw
        carriers = [k for k, v in req.headers.items() if KEY in v]
        assert carriers and set(carriers) <= {"authorization", "x-api-key"}, carriers


# ---- the happy path ------------------------------------------------------------------------------
@pytest.mark.parametrize("wire", WIRES)
def test_compile_then_submit(wire: Any) -> None:
    ctx = make_ctx()
    script = [wire.calls(("call_1", "compile", {"ptx": PTX}), text="Let me check it."),
              wire.calls(("call_2", "submit", {"ptx": PTX, "threads": 128, "notes": "baseline"}))]
    tools = Tools()
    with FakeLLMServer(script) as srv:
        prov = wire.provider(srv.url)
        p = prov.propose(ctx, None, tools)

    assert p.error is None and p.error_kind is None
    c = p.candidate
    assert c is not None and c.ptx == PTX and c.threads == 128
    assert c.meta == {"BLOCK_SIZE": 1024}  # omitted: the reference meta
    assert c.origin.startswith(f"{wire.name}:")
    assert tools.calls == [("compile", {"ptx": PTX})]
    assert p.usage == {"input_tokens": 20, "output_tokens": 10}

    # Wire: path, prompts, tool schemas, and the tool result sent back with the right id.
    assert [r.path for r in srv.requests] == [wire.path()] * 2
    first, second = (r.json for r in srv.requests)
    sig = ctx.abi.signature_text()
    assert sig in wire.system(first) or sig in wire.user_texts(first)[0]
    assert sig in wire.user_texts(first)[0]
    assert "sm_90a" in wire.system(first) and "sm_90a" in wire.user_texts(first)[0]
    # no GPU: no evaluate
    assert wire.tool_names(first) == ["compile", "verify", "submit", "patch", "show"]
    assert wire.tool_schema(first, "submit")["required"] == ["threads"]  # ptx: current candidate
    assert wire.tool_results(first) == {}
    assert wire.tool_results(second) == {"call_1": "compile ok #1"}
    assert wire.tool_call_ids(second) == ["call_1"]
    assert first["model"] == second["model"]

    kinds = [e["type"] for e in p.events]
    for k in ("system", "prompt", "request", "response", "tool_call", "tool_result", "usage",
              "submit"):
        assert k in kinds, k
    assert_no_key_leak(srv, p)


@pytest.mark.parametrize("wire", WIRES)
def test_conversation_continues_with_feedback(wire: Any) -> None:
    """The next turn answers the submit call by id, then gives the outcome as feedback."""
    ctx = make_ctx(gpu_available=True)
    script = [wire.calls(("s1", "submit", {"ptx": PTX, "threads": 128})),
              wire.calls(("e1", "evaluate", {"ptx": PTX2, "threads": 128,
                                             "meta": {"BLOCK_SIZE": 1024}})),
              wire.calls(("s2", "submit", {"ptx": PTX2, "threads": 256,
                                           "meta": {"BLOCK_SIZE": 2048}, "dynamic_smem": 0,
                                           "cluster_dims": [1, 1, 1]}))]
    tools = Tools()
    with FakeLLMServer(script) as srv:
        prov = wire.provider(srv.url)
        p1 = prov.propose(ctx, None, tools)
        p2 = prov.propose(ctx, "correct; 1.23 ms vs Triton 1.20 ms", tools)
    assert p1.candidate is not None and p2.candidate is not None
    assert p2.candidate.threads == 256 and p2.candidate.meta == {"BLOCK_SIZE": 2048}
    assert tools.calls == [("evaluate", {"ptx": PTX2, "threads": 128,
                                         "meta": {"BLOCK_SIZE": 1024}})]
    first, second, third = (r.json for r in srv.requests)
    assert "evaluate" in wire.tool_names(first)
    assert "s1" in wire.tool_results(second)
    assert "1.23 ms" in wire.user_texts(second)[-1]
    assert feedback_prompt("correct; 1.23 ms vs Triton 1.20 ms") in wire.user_texts(second)[-1]
    assert wire.tool_results(third)["e1"] == "evaluate ok #1"
    assert wire.tool_call_ids(third) == ["s1", "e1"]
    # The initial prompt is sent once and kept in the history.
    assert sum(initial_prompt(ctx) in t for t in wire.user_texts(third)) == 1
    assert_no_key_leak(srv, p2)


# ---- malformed output ----------------------------------------------------------------------------
@pytest.mark.parametrize("wire", WIRES)
def test_text_only_is_bad_output_and_the_model_is_told(wire: Any) -> None:
    ctx = make_ctx()
    script = [wire.text("Here is my PTX: .version 8.7 ..."),
              wire.calls(("s1", "submit", {"ptx": PTX, "threads": 128}))]
    with FakeLLMServer(script) as srv:
        prov = wire.provider(srv.url)
        p1 = prov.propose(ctx, None, Tools())
        p2 = prov.propose(ctx, "no candidate", Tools())
    assert p1.candidate is None and p1.error_kind == "bad_output"
    assert "without calling submit" in (p1.error or "")
    assert p2.candidate is not None
    assert NO_SUBMIT_NOTE in wire.user_texts(srv.requests[1].json)[-1]


@pytest.mark.parametrize("wire", WIRES)
def test_submit_without_ptx_submits_the_current_candidate(wire: Any) -> None:
    """Omitted ptx = the current candidate: Triton's PTX at first, then the last PTX passed."""
    ctx = make_ctx()
    script = [wire.calls(("s1", "submit", {"threads": 128})),
              wire.calls(("c1", "compile", {"ptx": PTX}), ("c2", "verify", {})),
              wire.calls(("s2", "submit", {"threads": 128}))]
    tools = Tools()
    with FakeLLMServer(script) as srv:
        prov = wire.provider(srv.url)
        p1 = prov.propose(ctx, None, tools)
        p2 = prov.propose(ctx, "feedback", tools)
    assert p1.candidate is not None and p1.candidate.ptx == ctx.reference_ptx
    assert p2.candidate is not None and p2.candidate.ptx == PTX
    assert tools.calls == [("compile", {"ptx": PTX}), ("verify", {"ptx": PTX})]


def test_openai_invalid_json_arguments_is_bad_output() -> None:
    ctx = make_ctx()
    script = [OpenAIWire.calls(("s1", "submit", '{"ptx": ".version 8.7", "threads": 12'))]
    with FakeLLMServer(script) as srv:
        p = OpenAIWire.provider(srv.url).propose(ctx, None, Tools())
    assert p.candidate is None and p.error_kind == "bad_output"
    assert "not valid JSON" in (p.error or "")


def test_anthropic_non_object_input_is_bad_output() -> None:
    ctx = make_ctx()
    script = [AnthropicWire.calls(("s1", "submit", "ptx goes here"))]
    with FakeLLMServer(script) as srv:
        p = AnthropicWire.provider(srv.url).propose(ctx, None, Tools())
    assert p.candidate is None and p.error_kind == "bad_output"


@pytest.mark.parametrize("wire", WIRES)
def test_invalid_tool_args_are_reported_back_within_the_turn(wire: Any) -> None:
    """A bad compile call gets an error tool result; the model fixes it and submits."""
    ctx = make_ctx()
    bad = '{"ptx": 5}' if wire is OpenAIWire else {"ptx": 5}
    script = [wire.calls(("c1", "compile", bad)),
              wire.calls(("c2", "compile", {"ptx": PTX})),
              wire.calls(("s1", "submit", {"ptx": PTX, "threads": 128}))]
    tools = Tools()
    with FakeLLMServer(script) as srv:
        p = wire.provider(srv.url).propose(ctx, None, tools)
    assert p.candidate is not None
    assert tools.calls == [("compile", {"ptx": PTX})]
    assert "compile.ptx" in wire.tool_results(srv.requests[1].json)["c1"]


@pytest.mark.parametrize("wire", WIRES)
def test_tool_budget(wire: Any) -> None:
    ctx = make_ctx(max_tool_calls=2)
    script = [wire.calls(("c1", "compile", {"ptx": PTX})),
              wire.calls(("c2", "compile", {"ptx": PTX}), ("c3", "verify", {"ptx": PTX})),
              wire.calls(("s1", "submit", {"ptx": PTX, "threads": 128}))]
    tools = Tools()
    with FakeLLMServer(script) as srv:
        prov = wire.provider(srv.url)
        p1 = prov.propose(ctx, None, tools)
        p2 = prov.propose(ctx, "no candidate", tools)
    assert p1.error_kind == "bad_output" and "budget" in (p1.error or "")
    assert len(tools.calls) == 2
    results = wire.tool_results(srv.requests[2].json)
    assert results["c2"] == "compile ok #2" and "budget" in results["c3"]
    assert p2.candidate is not None


# ---- refusals and HTTP errors --------------------------------------------------------------------
@pytest.mark.parametrize("wire", WIRES)
def test_refusal(wire: Any) -> None:
    with FakeLLMServer([wire.refusal()]) as srv:
        p = wire.provider(srv.url).propose(make_ctx(), None, Tools())
    assert p.candidate is None and p.error_kind == "refused"


@pytest.mark.parametrize("wire", WIRES)
def test_rate_limited_without_retries(wire: Any) -> None:
    script = [error_reply(429, "slow down", {"retry-after": "7"}, "rate_limit_error")]
    with FakeLLMServer(script) as srv:
        p = wire.provider(srv.url, max_retries=0).propose(make_ctx(), None, Tools())
    assert p.error_kind == "rate_limited" and p.retry_after == 7.0
    assert len(srv.requests) == 1
    assert_no_key_leak(srv, p)


@pytest.mark.parametrize("wire", WIRES)
def test_rate_limited_then_retried_by_the_sdk(wire: Any) -> None:
    script = [error_reply(429, "slow down", {"retry-after-ms": "1500", "retry-after": "2"},
                          "rate_limit_error"),
              wire.calls(("s1", "submit", {"ptx": PTX, "threads": 128}))]
    with FakeLLMServer(script) as srv:
        p = wire.provider(srv.url, max_retries=1).propose(make_ctx(), None, Tools())
    assert p.candidate is not None and p.error is None
    assert len(srv.requests) == 2
    # the SDK waited the server's retry-after-ms (1.5 s), not its own first backoff (<= 0.5 s):
    # a lower bound between the two arrivals, which load cannot break (sleeps never end early)
    gap = srv.requests[1].at - srv.requests[0].at
    assert 1.45 <= gap < 30, gap


@pytest.mark.parametrize("wire", WIRES)
def test_timeout(wire: Any) -> None:
    script = [Reply({"never": "sent"}, delay=60.0)]  # cut short when the server stops
    t0 = time.monotonic()
    with FakeLLMServer(script) as srv:
        p = wire.provider(srv.url, timeout=0.5, max_retries=0).propose(make_ctx(), None, Tools())
        waited = time.monotonic() - t0
    assert p.error_kind == "timeout"
    assert waited < 30, waited  # the client gave up long before the 60 s reply (load-proof margin)


@pytest.mark.parametrize("wire", WIRES)
def test_unauthorized(wire: Any) -> None:
    script = [error_reply(401, "invalid x-api-key", err_type="authentication_error")]
    with FakeLLMServer(script) as srv:
        p = wire.provider(srv.url).propose(make_ctx(), None, Tools())
    assert p.error_kind == "auth" and "401" in (p.error or "")
    assert_no_key_leak(srv, p)


@pytest.mark.parametrize("wire", WIRES)
def test_server_error_is_bad_output(wire: Any) -> None:
    script = [error_reply(500, "boom", {"x-should-retry": "false"}, "api_error")]
    with FakeLLMServer(script) as srv:
        p = wire.provider(srv.url).propose(make_ctx(), None, Tools())
    assert p.error_kind == "bad_output" and "500" in (p.error or "")


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("body", [{"unexpected": True}, "this is not json", {"choices": [],
                                                                            "content": "x"}])
def test_malformed_response_body(wire: Any, body: Any) -> None:
    with FakeLLMServer([Reply(body)]) as srv:
        p = wire.provider(srv.url).propose(make_ctx(), None, Tools())
    assert p.candidate is None and p.error_kind == "bad_output"


@pytest.mark.parametrize("wire", WIRES)
def test_error_turn_is_resumed(wire: Any) -> None:
    """After a failed request the next turn extends the unanswered user message."""
    script = [error_reply(429, "slow down", {"retry-after": "0"}),
              wire.calls(("s1", "submit", {"ptx": PTX, "threads": 128}))]
    with FakeLLMServer(script) as srv:
        prov = wire.provider(srv.url)
        p1 = prov.propose(make_ctx(), None, Tools())
        p2 = prov.propose(make_ctx(), "please try again", Tools())
    assert p1.error_kind == "rate_limited" and p2.candidate is not None
    body = srv.requests[1].json
    roles = [m["role"] for m in body["messages"] if m["role"] != "system"]
    assert roles == ["user"]
    users = wire.user_texts(body)
    assert initial_prompt(make_ctx()) in users[0] and "please try again" in users[-1]


# ---- construction --------------------------------------------------------------------------------
def test_missing_keys_raise_auth_error() -> None:
    with pytest.raises(ProviderAuthError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider("claude-fake")
    with pytest.raises(ProviderAuthError, match="OPENAI_API_KEY"):
        OpenAIProvider("gpt-fake")


def test_keys_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert KEY not in repr(AnthropicProvider("claude-fake"))
    assert KEY not in repr(OpenAIProvider("gpt-fake", base_url="http://127.0.0.1:9/v1"))


# ---- tools ---------------------------------------------------------------------------------------
def test_tool_schemas_render_for_both_wires() -> None:
    assert set(TOOL_SCHEMAS) == {"compile", "verify", "evaluate", "submit", "patch", "show"}
    a = {t["name"]: t for t in anthropic_tools()}
    o = {t["function"]["name"]: t for t in openai_tools()}
    assert a.keys() == o.keys() == TOOL_SCHEMAS.keys()
    for name, schema in TOOL_SCHEMAS.items():
        assert a[name]["input_schema"] == schema["parameters"] == o[name]["function"]["parameters"]
        assert schema["parameters"]["additionalProperties"] is False
    no_gpu = [t["name"] for t in anthropic_tools(gpu_available=False)]
    assert no_gpu == ["compile", "verify", "submit", "patch", "show"]


@pytest.mark.parametrize("name,args,field", [
    ("compile", {}, "compile.ptx"),
    ("compile", {"ptx": ""}, "compile.ptx"),
    ("compile", {"ptx": PTX, "foo": 1}, "compile.foo"),
    ("verify", {"ptx": PTX, "threads": 0}, "verify.threads"),
    ("verify", {"ptx": PTX, "threads": True}, "verify.threads"),
    ("evaluate", {"ptx": PTX, "threads": 128}, "evaluate.meta"),
    ("evaluate", {"ptx": PTX, "threads": 128, "meta": {"B": "x"}}, "evaluate.meta.B"),
    ("evaluate", {"ptx": PTX, "threads": 128, "meta": {}, "dynamic_smem": -1},
     "evaluate.dynamic_smem"),
    ("submit", {"ptx": PTX}, "submit.threads"),
    ("submit", {"ptx": PTX, "threads": 2048}, "submit.threads"),
    ("submit", {"ptx": PTX, "threads": 128, "cluster_dims": [2, 1]}, "submit.cluster_dims"),
    ("submit", {"ptx": PTX, "threads": 128, "cluster_dims": [2, 0, 1]}, "submit.cluster_dims[1]"),
    ("submit", {"ptx": PTX, "threads": 128, "notes": 3}, "submit.notes"),
    ("nope", {}, "unknown tool"),
])
def test_validate_tool_args_names_the_field(name: str, args: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        validate_tool_args(name, args)


def test_candidate_from_submit() -> None:
    c = candidate_from_submit({"ptx": PTX, "threads": 256.0, "meta": {"BLOCK_SIZE": 2048},
                               "cluster_dims": [2, 1, 1], "global_scratch_size": 384,
                               "notes": "x"}, "test:model")
    assert (c.threads, c.meta, c.cluster_dims, c.global_scratch_size, c.origin) == \
        (256, {"BLOCK_SIZE": 2048}, (2, 1, 1), 384, "test:model")
    d = candidate_from_submit({"ptx": PTX, "threads": 128}, "o",
                              defaults={"meta": {"BLOCK_SIZE": 1024}, "dynamic_smem": 4096})
    assert d.meta == {"BLOCK_SIZE": 1024} and d.dynamic_smem == 4096
    with pytest.raises(ValueError, match="submit.threads"):
        candidate_from_submit({"ptx": PTX, "threads": "many"}, "o")


# ---- prompts -------------------------------------------------------------------------------------
def test_prompts_are_deterministic_and_complete() -> None:
    ctx = make_ctx()
    assert system_prompt(ctx) == system_prompt(make_ctx())
    text = initial_prompt(ctx)
    assert text == initial_prompt(make_ctx())
    for needle in (ctx.abi.signature_text(), "sm_90a", ctx.triton_source, ctx.ttgir,
                   ctx.reference_ptx, "BLOCK_SIZE=1024", "cdiv(N, BLOCK_SIZE)",
                   "grid = (1025, 1, 1)", "grid = (65536, 1, 1)", "global_scratch",
                   "profile_scratch", "Threads per CTA: 128", "Dynamic shared memory: 0 bytes",
                   "x_ptr", "n_elements", "role=out"):
        assert needle in text, needle
    sys_ = system_prompt(ctx)
    assert "submit" in sys_ and "No GPU" in sys_ and ".version" in sys_
    assert "evaluate" in system_prompt(make_ctx(gpu_available=True))


@pytest.mark.parametrize("wire", WIRES)
def test_connection_refused_maps_to_timeout(wire: Any) -> None:
    """A dead endpoint is a transient transport failure, reported like a timeout."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = wire.provider(f"http://127.0.0.1:{port}").propose(make_ctx(), None, Tools())
    assert p.error_kind == "timeout" and "connection" in (p.error or "")


def test_anthropic_overloaded_maps_to_rate_limited() -> None:
    script = [error_reply(529, "overloaded", {"x-should-retry": "false"}, "overloaded_error")]
    with FakeLLMServer(script) as srv:
        p = AnthropicWire.provider(srv.url).propose(make_ctx(), None, Tools())
    assert p.error_kind == "rate_limited" and "overloaded" in (p.error or "")
