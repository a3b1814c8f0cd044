"""``/v1/kernels`` (public), ``/v1/verify``, ``/healthz`` and ``/metrics``."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from server.bodies import JsonDepthRoute
from server.deps import BodyLimitedKeyDep, SessionDep
from server.errors import ApiError, error_responses
from server.schemas import KernelInfo, KernelsPublic, VerifyRequest, VerifyResponse

kernels_router = APIRouter(prefix="/v1/kernels", tags=["kernels"], route_class=JsonDepthRoute)
verify_router = APIRouter(prefix="/v1/verify", tags=["verify"], route_class=JsonDepthRoute)
ops_router = APIRouter(tags=["ops"], route_class=JsonDepthRoute)


@kernels_router.get("", response_model=KernelsPublic, summary="The kernel suite")
def list_kernels() -> KernelsPublic:
    """The suite kernels a lowering may name (no API key needed)."""
    from kernels import all_specs

    data = [KernelInfo(name=s.name, description=s.description, sizes=s.sizes,
                       configs=len(s.configs()), grid=[str(g) for g in s.grid])
            for s in all_specs()]
    return KernelsPublic(data=data, count=len(data))


_VERIFY_OUT_CAP = 64 << 20


def _verify_limits(cpu_s: int, memory_mb: int):
    def apply() -> None:
        os.setsid()
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PDEATHSIG
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 2))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@verify_router.post("", response_model=VerifyResponse,
                    responses=error_responses(400, 401, 413, 422, 429),
                    summary="Verify PTX (synchronous)")
async def verify_ptx(body: VerifyRequest, request: Request,
                     key: BodyLimitedKeyDep) -> VerifyResponse | Response:
    """Run the static PTX verifier on ``ptx`` for ``arch``.

    Bounds: ``413`` above the key's PTX byte limit or the server's ``verify_max_lines``; the
    verifier runs in a child process (``server._verify_child``) with CPU and memory rlimits,
    at most ``verify_concurrency`` at once per server process and ``verify_per_key`` per key
    (``429`` beyond), and is killed
    after ``verify_wall_s`` seconds (``422`` ``ptx-too-complex``) or as soon as the client
    disconnects.
    """
    ss = request.app.state.server_settings
    size = len(body.ptx.encode())
    if size > key.max_ptx_bytes:
        raise ApiError(413, "ptx-too-large", f"the PTX is {size} bytes; this key's limit is "
                       f"{key.max_ptx_bytes}", loc=["body", "ptx"])
    n_lines = body.ptx.count("\n") + 1
    if n_lines > ss.verify_max_lines:
        raise ApiError(413, "ptx-too-large", f"the PTX has {n_lines} lines; the limit is "
                       f"{ss.verify_max_lines}", loc=["body", "ptx"])
    sem: asyncio.Semaphore = request.app.state.verify_slots
    mine = _verify_by_key.get(key.key_id, 0)
    if mine >= ss.verify_per_key:  # one key must not hold every slot of the shared pool
        raise ApiError(429, "verify-busy", f"this key already runs {mine} verification(s) "
                       f"(limit {ss.verify_per_key}); retry when it has finished",
                       headers={"Retry-After": "2"})
    if sem.locked():
        raise ApiError(429, "verify-busy", f"{ss.verify_concurrency} verifications are running "
                       "on this server; retry shortly", headers={"Retry-After": "2"})
    _verify_by_key[key.key_id] = mine + 1  # the event loop is the only writer: no lock needed
    try:
        return await _verify_in_child(body, request, sem)
    finally:
        left = _verify_by_key.get(key.key_id, 1) - 1
        if left > 0:
            _verify_by_key[key.key_id] = left
        else:
            _verify_by_key.pop(key.key_id, None)


_verify_by_key: dict[str, int] = {}


async def _verify_in_child(body: VerifyRequest, request: Request,
                           sem: asyncio.Semaphore) -> VerifyResponse | Response:
    ss = request.app.state.server_settings
    async with sem:
        root = str(Path(__file__).resolve().parents[2])
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": root,
               "HOME": os.environ.get("HOME", "/")}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server._verify_child", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env, cwd=root,
            preexec_fn=_verify_limits(int(ss.verify_wall_s) + 5, ss.verify_memory_mb))
        req = json.dumps({"ptx": body.ptx, "arch": body.arch, "threads": body.threads}).encode()

        async def run() -> bytes:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(req)
            await proc.stdin.drain()
            proc.stdin.close()
            out = await proc.stdout.read(_VERIFY_OUT_CAP + 1)
            await proc.wait()
            return out

        task = asyncio.ensure_future(run())
        t0 = time.monotonic()
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=0.2)
                if task.done():
                    break
                if time.monotonic() - t0 > ss.verify_wall_s:
                    raise ApiError(422, "ptx-too-complex", f"verification stopped after "
                                   f"{ss.verify_wall_s:g} s: the PTX is too complex for the "
                                   "synchronous endpoint", loc=["body", "ptx"])
                if await request.is_disconnected():
                    return Response(status_code=499)  # nobody is listening any more
            out = task.result()
        finally:
            _kill(proc)
            if not task.done():
                task.cancel()
            await proc.wait()
    if proc.returncode != 0 or len(out) > _VERIFY_OUT_CAP:
        raise ApiError(422, "ptx-too-complex", f"the verifier stopped (exit status "
                       f"{proc.returncode}: CPU or memory limit) on this PTX", loc=["body", "ptx"])
    data = json.loads(out)
    if "usage_error" in data:
        raise ApiError(422, "verifier-usage", data["usage_error"], loc=["body"])
    return VerifyResponse(ok=data["ok"], findings=data["findings"], rendered=data["rendered"],
                          report=data["report"])


@ops_router.get("/healthz", summary="Liveness and readiness")
def healthz(request: Request, session: SessionDep) -> dict:
    """``{"status": "ok", "database": true, "slots": N, "gpus": [...]}``; the database is pinged."""
    session.execute(text("SELECT 1"))
    pool = request.app.state.pool
    return {"status": "ok", "database": True, "slots": pool.n if pool else 0,
            "gpus": pool.gpus if pool else []}


@ops_router.get("/metrics", response_class=Response, summary="Prometheus metrics",
                responses={200: {"content": {"text/plain": {}}}})
def metrics(request: Request) -> Response:
    """Prometheus text format: queue depth, jobs by state, per-stage latency histograms
    (``ailower_stage_seconds{stage="evaluate"}`` is the evaluation latency)."""
    return Response(generate_latest(request.app.state.metrics_registry),
                    media_type=CONTENT_TYPE_LATEST)
