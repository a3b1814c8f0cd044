"""``ailower mcp``: the agent loop's tools over the Model Context Protocol (stdio).

A coding agent (Claude Code, Codex CLI, Cursor, ...) registers ``ailower mcp`` as an MCP server
and gets these tools (official ``mcp`` SDK, :class:`mcp.server.mcpserver.MCPServer`):

* ``list_kernels``, ``start_lowering`` (kernel or spec file, arch, iterations, K variants),
  ``runs`` (recorded runs, or one run with its iterations and transcript path),
  ``leaderboard`` (finished campaign cells);
* inside a lowering: ``show``, ``patch``, ``compile``, ``verify``, ``evaluate``, ``submit``
  (the loop's tools, same arguments as for a chat model; ``submit`` returns the outcome of the
  candidate, which is the loop's feedback) and ``finish`` (end the run now).

A session is a recorded run (:mod:`agent.providers.mcp`): provider ``mcp``, the client's name
as its model, the loop's gates, budgets and transcript, written like ``ailower lower`` writes
them (``--out`` folder, then the run database) and replayable with ``--provider replay``. Bad
arguments come back as MCP tool errors (``isError``), never as a crash; stdout carries only the
protocol (progress goes to stderr). Without a GPU ``evaluate`` says so and runs the emulator, as
the loop does.

``register(app)`` adds the command.
"""

# No ``from __future__ import annotations`` here: the SDK reads the tool functions' annotations
# at registration, and ``Context`` is imported inside build_server (mcp loads only for this
# command), so string annotations could not be resolved.


import json
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register", "mcp_command", "build_server"]

_ARCHS = ("sm_89", "sm_90a", "sm_100a")


class _State:
    """The server's one lowering session (one at a time per server process)."""

    def __init__(self) -> None:
        self.session: Any = None
        self.lock = threading.Lock()


def _client_name(ctx: Any) -> str:
    """The MCP client's ``clientInfo.name`` (and version), or ``unknown-client``."""
    for path in (("session", "client_params", "client_info"),
                 ("request_context", "session", "client_params", "client_info")):
        obj = ctx
        for attr in path:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        if obj is not None and getattr(obj, "name", None):
            ver = getattr(obj, "version", None)
            return f"{obj.name}/{ver}" if ver else str(obj.name)
    return "unknown-client"


def _load_spec(kernel: str) -> Any:
    from kernels import get, load_spec, names

    from agent.providers.mcp import SessionError

    if kernel.endswith((".yaml", ".yml", ".json")):
        return load_spec(kernel)
    if kernel not in names():
        raise SessionError(f"kernel: no suite kernel {kernel!r}; list_kernels lists them")
    return get(kernel)


def _run_fn(spec: Any, arch: str, iterations: int, variants: int, out: Path, no_gpu: bool,
            profile: bool) -> Any:
    """The body of a session's run thread: the loop with the MCP provider, recorded like
    ``ailower lower`` records a run. Progress goes to stderr."""

    from agent.loop import LoopOptions
    from agent.store import RunStore
    from ailower._run import execute_run, select_evaluator
    from common.settings import get_settings
    from harness import device_arch

    def run(provider: Any) -> dict[str, Any]:
        settings = get_settings()
        store = RunStore(settings.database_url)
        evaluator, note = select_evaluator(arch, device_arch(), no_gpu=no_gpu, settings=settings)
        opts = LoopOptions(iterations=iterations, gpu=evaluator is not None, ptxas=settings.ptxas,
                           cache_dir=settings.cache_dir, max_ptx_version=settings.max_ptx_version,
                           variants=variants, profile=profile)
        from ailower._common import err
        try:
            result, report, run_id, folder = execute_run(
                spec, arch, provider, opts, evaluator=evaluator, gpu_note=note, out_dir=out,
                model=provider.model, store=store, console=err, print_result=lambda r: None)
        finally:
            if evaluator is not None and hasattr(evaluator, "close"):
                evaluator.close()
        best = result.best
        return {"run_id": run_id, "stop_reason": result.stop_reason,
                "best_verdict": best.verdict if best else None,
                "best_speedup": best.speedup if best else None,
                "last_feedback": result.iterations[-1].feedback if result.iterations else "",
                "folder": str(folder) if folder else None, "gpu_note": note}

    return run


def build_server(*, idle_timeout_s: float = 3600.0) -> Any:
    """The MCP server with ailower's tools (see the module docstring).

    Args:
        idle_timeout_s: a turn waiting longer than this for the client ends its run.

    Returns:
        A :class:`mcp.server.mcpserver.MCPServer`.
    """
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from agent.providers.mcp import McpProvider, McpSession, SessionError

    state = _State()
    server = MCPServer(
        name="ailower", title="ailower: Triton kernels to verified, measured PTX",
        instructions=(
            "Lower a Triton kernel to PTX: call start_lowering(kernel, arch), read the task it "
            "returns, use show/patch/compile/verify/evaluate, then submit; submit returns the "
            "outcome (ptxas, verifier, correctness, timings) and opens the next turn until the "
            "iteration budget is spent. runs lists the recorded runs."))

    def active() -> Any:
        s = state.session
        if s is None:
            raise ToolError("no lowering in progress: call start_lowering first")
        return s

    def call(fn: Any, *args: Any) -> str:
        try:
            return fn(*args)
        except SessionError as exc:
            raise ToolError(str(exc)) from None

    def args_of(**kw: Any) -> dict[str, Any]:
        return {k: v for k, v in kw.items() if v is not None}

    @server.tool(description="List the suite kernels ailower can lower (name, description).")
    def list_kernels() -> str:
        import kernels

        rows = []
        for n in kernels.names():
            s = kernels.get(n)
            rows.append({"name": n, "description": s.description or ""})
        return json.dumps(rows, indent=1)

    @server.tool(description=(
        "Start lowering a kernel (suite name or KernelSpec YAML/JSON path) for arch sm_89, "
        "sm_90a or sm_100a: compiles Triton's reference, opens turn 1 and returns the task "
        "(system prompt, then the first user prompt). iterations: the turn budget; variants: K "
        "candidates per submit; out: folder for the run's files."))
    def start_lowering(kernel: str, ctx: Context, arch: str = "sm_90a", iterations: int = 4,
                       variants: int = 1, out: str | None = None, no_gpu: bool = False,
                       profile: bool = True) -> str:
        from agent.prompts import initial_prompt, system_prompt

        if arch not in _ARCHS:
            raise ToolError(f"arch: one of {', '.join(_ARCHS)}, got {arch!r}")
        if not 1 <= iterations <= 1000:
            raise ToolError(f"iterations: 1..1000, got {iterations}")
        if not 1 <= variants <= 8:
            raise ToolError(f"variants: 1..8, got {variants}")
        with state.lock:
            if state.session is not None and state.session.done is None:
                raise ToolError(f"a lowering of {state.session.kernel} is in progress: submit "
                                "until it ends, or call finish")
            spec = call(_load_spec, kernel)
            folder = Path(out) if out else Path("ailower-out") / f"mcp-{spec.name}-{arch}"
            prov = McpProvider(_client_name(ctx), idle_timeout_s=idle_timeout_s)
            sess = McpSession(prov, _run_fn(spec, arch, iterations, variants, folder, no_gpu,
                                            profile), kernel=spec.name, arch=arch)
            call(sess.start)
            state.session = sess
        c = prov.ctx
        assert c is not None
        return (f"Lowering {spec.name} for {arch} as client {prov.model}: turn 1 of "
                f"{iterations} is open (K={variants}; files in {folder}).\n\n"
                f"# System prompt\n{system_prompt(c)}\n\n# Task\n{initial_prompt(c)}")

    @server.tool(description=(
        "Show numbered lines of ttgir, llir, ptx (Triton's), sass, source, or your current "
        "candidate; at most 400 lines per call, page with start_line."))
    def show(what: str, start_line: int | None = None, max_lines: int | None = None) -> str:
        return call(active().tool, "show", args_of(what=what, start_line=start_line,
                                                   max_lines=max_lines))

    @server.tool(description=(
        "Edit the current candidate with exact search/replace pairs (each search must occur "
        "once); base: current (default), reference (Triton's PTX) or best (the best valid "
        "candidate so far)."))
    def patch(edits: list[dict[str, str]], base: str | None = None) -> str:
        return call(active().tool, "patch", args_of(edits=edits, base=base))

    @server.tool(description="Assemble PTX (default: the current candidate) with ptxas for the "
                             "target; returns errors, or registers, spills and shared memory.")
    def compile(ptx: str | None = None) -> str:  # noqa: A001 (the loop's tool name)
        return call(active().tool, "compile", args_of(ptx=ptx))

    @server.tool(description="Run ailower's static PTX verifier (entry signature, launch "
                             "contract, PTX rules) on PTX (default: the current candidate).")
    def verify(ptx: str | None = None, threads: int | None = None) -> str:
        return call(active().tool, "verify", args_of(ptx=ptx, threads=threads))

    @server.tool(description=(
        "Run the candidate on the GPU against the float64 reference and time it next to "
        "Triton (roofline fractions and an Nsight Compute table where available); without a "
        "GPU it says so and checks correctness in the emulator."))
    def evaluate(threads: int, meta: dict[str, int], ptx: str | None = None,
                 dynamic_smem: int | None = None) -> str:
        return call(active().tool, "evaluate", args_of(ptx=ptx, threads=threads, meta=meta,
                                                       dynamic_smem=dynamic_smem))

    @server.tool(description=(
        "Hand in this turn's candidate (default ptx: the current candidate); returns its "
        "outcome and opens the next turn, or ends the run after the last. With K > 1: plan "
        "(one line) and variants (each {ptx} or {edits, base?} plus optional threads/meta/"
        "dynamic_smem/notes)."))
    def submit(threads: int, ptx: str | None = None, meta: dict[str, int] | None = None,
               dynamic_smem: int | None = None, cluster_dims: list[int] | None = None,
               global_scratch_size: int | None = None, notes: str | None = None,
               plan: str | None = None, variants: list[dict[str, Any]] | None = None) -> str:
        return call(active().submit, args_of(
            threads=threads, ptx=ptx, meta=meta, dynamic_smem=dynamic_smem,
            cluster_dims=cluster_dims, global_scratch_size=global_scratch_size, notes=notes,
            plan=plan, variants=variants))

    @server.tool(description="End the lowering now; it is recorded with what it has.")
    def finish() -> str:
        s = active()
        summary = call(s.finish)
        return McpSession._final(summary)

    @server.tool(description=(
        "Recorded runs, newest first (kernel filter, limit); with run_id: that run with its "
        "iterations, its files and transcript path."))
    def runs(kernel: str | None = None, limit: int = 20, run_id: int | None = None) -> str:
        from agent.store import RunStore, run_summary
        from common.settings import get_settings

        store = RunStore(get_settings().database_url)
        if run_id is not None:
            row = store.get(run_id)
            if row is None:
                raise ToolError(f"run_id: no run #{run_id}")
            out = run_summary(row, iterations=True)
            files = (row.report or {}).get("files") or {}
            out["files"] = files
            return json.dumps(out, indent=1, default=str)
        if not 1 <= limit <= 500:
            raise ToolError(f"limit: 1..500, got {limit}")
        return json.dumps([run_summary(r) for r in store.runs(kernel=kernel, limit=limit)],
                          indent=1, default=str)

    @server.tool(description="The leaderboard of finished campaign cells: per kernel x arch, "
                             "autotuned Triton vs the best verified candidate (JSON).")
    def leaderboard(arch: str | None = None) -> str:
        from common.settings import get_settings
        from campaign.leaderboard import LeaderboardError, build_leaderboard
        from campaign.plan import PlanError, parse_archs
        from campaign.store import CampaignStore

        try:
            archs = parse_archs([arch]) if arch else None
            lb = build_leaderboard(CampaignStore(get_settings().database_url), archs=archs)
        except (LeaderboardError, PlanError) as exc:
            raise ToolError(str(exc)) from None
        if not lb.entries:
            return "no finished campaign cells yet: run `ailower suite run ...` first"
        return json.dumps(lb.model_dump(mode="json"), indent=1)

    server._ailower_state = state  # type: ignore[attr-defined]  (closed by mcp_command)
    return server


def mcp_command(
    idle_timeout: Annotated[float, typer.Option(
        min=1.0, help="seconds a turn waits for the client before its run ends")] = 3600.0,
) -> None:
    """Serve ailower's tools over MCP on stdio (register it with a coding agent)."""
    server = build_server(idle_timeout_s=idle_timeout)
    try:
        server.run("stdio")
    finally:
        sess = server._ailower_state.session
        if sess is not None:
            sess.close()


def register(app: typer.Typer) -> None:
    """Add ``ailower mcp`` to ``app``."""
    app.command("mcp")(mcp_command)
