"""``ailower mcp`` through the official SDK's stdio client: tools, a session, its run record.

The client launches ``python -m ailower mcp`` as a subprocess (stdio transport), lists the
tools, starts a lowering of softmax, patches Triton's PTX, verifies, submits (without a GPU:
the static path with emulated correctness), finishes, and finds the run in ``ailower runs`` with
provider ``mcp``, the client's name as model and its transcript, which replays byte for byte.
Malformed tool calls get MCP tool errors and the server keeps serving.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

import kernels
from agent.loop import LoopOptions, lower
from agent.providers.replay import ReplayProvider

mcp = pytest.importorskip("mcp")

TOOLS = {"list_kernels", "start_lowering", "runs", "leaderboard", "show", "patch", "compile",
         "verify", "evaluate", "submit", "finish"}
MARK = "// ailower mcp test"


def _text(res) -> str:
    return "\n".join(c.text for c in res.content if getattr(c, "type", "") == "text")


async def _session(data: Path, out: Path) -> dict:
    from mcp import Client, Implementation, StdioServerParameters

    env = {**os.environ, "AILOWER_DATA_DIR": str(data), "PYTHONPATH": str(Path.cwd()),
           "CUDA_VISIBLE_DEVICES": ""}
    params = StdioServerParameters(command=sys.executable, args=["-m", "ailower", "mcp",
                                                                 "--idle-timeout", "120"],
                                   env=env, cwd=str(Path.cwd()))
    seen: dict = {}
    async with Client(params, client_info=Implementation(name="pytest-client", version="1.0"),
                      read_timeout_seconds=300) as c:
        seen["tools"] = {t.name for t in (await c.list_tools()).tools}
        # before a lowering: an MCP tool error, not a crash
        r = await c.call_tool("verify", {})
        seen["no_session"] = (r.is_error, _text(r))
        r = await c.call_tool("start_lowering", {"kernel": "softmax", "arch": "sm_90a",
                                                 "iterations": 2, "out": str(out),
                                                 "no_gpu": True})
        assert not r.is_error, _text(r)
        seen["task"] = _text(r)
        threads = int(re.search(r"Threads per CTA: (\d+)", seen["task"]).group(1))
        r = await c.call_tool("patch", {"edits": [{"search": ".address_size 64",
                                                   "replace": f".address_size 64\n{MARK}"}]})
        seen["patch"] = _text(r)
        r = await c.call_tool("verify", {"threads": threads})
        seen["verify"] = (r.is_error, _text(r))
        r = await c.call_tool("show", {"what": "candidate", "start_line": 1, "max_lines": 8})
        seen["show"] = _text(r)
        # malformed calls: wrong types, unknown fields, bad edits, a missing required argument
        bad = []
        for name, args in (("patch", {"edits": "not a list"}),
                           ("patch", {"edits": [{"search": "no such text", "replace": "x"}]}),
                           ("submit", {"ptx": 3}),
                           ("show", {"what": "everything"}),
                           ("evaluate", {"threads": "many", "meta": {}})):
            r = await c.call_tool(name, args)
            bad.append((r.is_error, _text(r)))
        seen["bad"] = bad
        try:
            r = await c.call_tool("no_such_tool", {})
            seen["unknown"] = (r.is_error, _text(r))
        except mcp.shared.exceptions.MCPError as exc:  # a JSON-RPC error is an MCP error too
            seen["unknown"] = (True, str(exc))
        r = await c.call_tool("submit", {"threads": threads, "notes": "comment only"})
        seen["submit"] = (r.is_error, _text(r))
        r = await c.call_tool("finish", {})
        seen["finish"] = (r.is_error, _text(r))
        r = await c.call_tool("runs", {"limit": 5})
        seen["runs"] = json.loads(_text(r))
        r = await c.call_tool("runs", {"run_id": seen["runs"][0]["id"]})
        seen["run"] = json.loads(_text(r))
        r = await c.call_tool("list_kernels", {})
        seen["kernels"] = json.loads(_text(r))
        r = await c.call_tool("leaderboard", {})
        seen["leaderboard"] = (r.is_error, _text(r))
    return seen


def test_mcp_client_lowers_softmax_and_finds_the_run(data_dir, tmp_path):
    out = tmp_path / "out"
    seen = anyio.run(_session, data_dir, out)
    assert seen["tools"] >= TOOLS
    assert seen["no_session"][0] and "call start_lowering first" in seen["no_session"][1]
    assert "turn 1 of 2 is open" in seen["task"] and "# Task" in seen["task"]
    assert "## Target facts and transformations for sm_90a" in seen["task"]
    assert seen["patch"].startswith("patched: 1 edit(s) applied")
    assert not seen["verify"][0] and "error[" not in seen["verify"][1]
    assert MARK in seen["show"]
    assert all(err for err, _ in seen["bad"]), seen["bad"]
    assert "search text not found" in seen["bad"][1][1]
    assert "edits" in seen["bad"][0][1] and "valid list" in seen["bad"][0][1]
    assert "threads" in seen["bad"][2][1] and "ptx" in seen["bad"][2][1]
    assert "show.what: one of ttgir" in seen["bad"][3][1]
    assert "threads" in seen["bad"][4][1]
    assert seen["unknown"][0] and "no_such_tool" in seen["unknown"][1]
    err, text = seen["submit"]
    assert not err and "GPU evaluation skipped: no GPU on this host" in text
    assert "Turn 2 is open" in text
    err, text = seen["finish"]
    assert not err and re.search(r"recorded as run #\d+: best static-only", text), text
    run = seen["runs"][0]
    assert run["kernel"] == "softmax" and run["provider"] == "mcp"
    assert run["model"] == "pytest-client/1.0" and run["best_verdict"] == "static-only"
    assert [it["verdict"] for it in seen["run"]["iterations"]] == ["static-only"]
    transcript = Path(seen["run"]["files"]["transcript"])
    assert transcript.is_file() and transcript.parent == out
    assert any(k["name"] == "softmax" for k in seen["kernels"])
    assert not seen["leaderboard"][0]

    # the CLI sees the same run
    from ailower.cli import app

    r = CliRunner().invoke(app, ["runs", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert rows[0]["id"] == run["id"] and rows[0]["provider"] == "mcp"

    # the transcript replays: same candidate, byte for byte
    rows = [json.loads(x) for x in transcript.read_text().splitlines()]
    calls = [x["name"] for x in rows if x.get("type") == "tool_call"]
    assert calls[:3] == ["patch", "verify", "show"] and "submit" in calls
    digest = next(x["digest"] for x in rows if x.get("type") == "submit")
    res = lower(kernels.get("softmax"), "sm_90a", ReplayProvider(transcript),
                LoopOptions(iterations=3, cache_dir=data_dir / "cache"))
    assert res.iterations[0].candidate_digest == digest
    assert MARK in res.best_candidate.ptx
