"""The MCP session's two sides without the SDK: budgets, an idle client, a client that goes away.

:class:`McpSession` drives the real loop (vector_add, static path) through :class:`McpProvider`;
the run function is :func:`agent.loop.lower` itself, so what the session does is what the loop
records.
"""

from __future__ import annotations

import queue
import time

import pytest

import kernels
from agent.loop import LoopOptions, lower
from agent.providers.mcp import McpProvider, McpSession, SessionError


def _session(ref_cache, *, idle: float = 60.0, **opts):
    spec = kernels.get("vector_add")
    prov = McpProvider("unit-client", idle_timeout_s=idle)
    out: dict = {}

    def run(p):
        res = lower(spec, "sm_90a", p, LoopOptions(cache_dir=ref_cache, **opts))
        out["result"] = res
        return {"run_id": 0, "stop_reason": res.stop_reason,
                "best_verdict": res.best.verdict if res.best else None,
                "last_feedback": res.iterations[-1].feedback if res.iterations else ""}

    s = McpSession(prov, run, kernel=spec.name, arch="sm_90a", wait_s=120)
    s.start()
    return s, out


def test_tool_budget_and_turns(ref_cache):
    s, out = _session(ref_cache, iterations=2, max_tool_calls=2)
    assert "registers" in s.tool("compile", {})
    s.tool("show", {"what": "ptx", "max_lines": 3})
    with pytest.raises(SessionError, match="budget of 2 tool calls per turn is spent"):
        s.tool("verify", {})
    with pytest.raises(SessionError, match=r"invalid submit: submit.threads: must be <= 1024"):
        s.submit({"threads": 4096})  # the turn stays open
    text = s.submit({"threads": 128})
    assert "Turn 2 is open" in text and "verifier: no errors" in text
    s.tool("compile", {})  # a new turn: a new budget
    final = s.submit({"threads": 128})
    assert "The run is over (budget)" in final and s.done is not None
    with pytest.raises(SessionError, match="the session is over"):
        s.tool("compile", {})
    assert [r.verdict for r in out["result"].iterations] == ["static-only", "static-only"]
    assert out["result"].provider == "mcp"


def test_an_idle_client_ends_the_run(ref_cache):
    s, out = _session(ref_cache, idle=0.5, iterations=3)
    t0 = time.monotonic()
    while s.done is None and time.monotonic() - t0 < 60:
        time.sleep(0.1)
        try:
            kind, payload = s.provider.outbox.get_nowait()
        except queue.Empty:  # still waiting
            continue
        if kind == "done":
            s.done = payload
    assert s.done is not None and s.done["stop_reason"] == "exhausted"
    assert out["result"].iterations == []


def test_a_client_that_goes_away_stops_the_run(ref_cache):
    s, out = _session(ref_cache, iterations=3)
    s.tool("compile", {})
    s.close(timeout_s=60)
    assert out["result"].stop_reason == "exhausted"
    assert s._thread is not None and not s._thread.is_alive()
