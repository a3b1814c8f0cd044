"""``/v1/kernels`` (public), ``/v1/verify``, ``/healthz`` and ``/metrics``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from server.deps import BodyLimitedKeyDep, SessionDep
from server.errors import ApiError, error_responses
from server.schemas import KernelInfo, KernelsPublic, VerifyRequest, VerifyResponse

kernels_router = APIRouter(prefix="/v1/kernels", tags=["kernels"])
verify_router = APIRouter(prefix="/v1/verify", tags=["verify"])
ops_router = APIRouter(tags=["ops"])


@kernels_router.get("", response_model=KernelsPublic, summary="The kernel suite")
def list_kernels() -> KernelsPublic:
    """The suite kernels a lowering may name (no API key needed)."""
    from kernels import all_specs

    data = [KernelInfo(name=s.name, description=s.description, sizes=s.sizes,
                       configs=len(s.configs()), grid=[str(g) for g in s.grid])
            for s in all_specs()]
    return KernelsPublic(data=data, count=len(data))


@verify_router.post("", response_model=VerifyResponse, responses=error_responses(400, 401, 413, 422),
                    summary="Verify PTX (synchronous)")
def verify_ptx(body: VerifyRequest, key: BodyLimitedKeyDep) -> VerifyResponse:
    """Run the static PTX verifier on ``ptx`` for ``arch``; ``413`` above the key's PTX limit."""
    import verifier
    from verifier.errors import VerifierUsageError

    size = len(body.ptx.encode())
    if size > key.max_ptx_bytes:
        raise ApiError(413, "ptx-too-large", f"the PTX is {size} bytes; this key's limit is "
                       f"{key.max_ptx_bytes}", loc=["body", "ptx"])
    try:
        rep = verifier.verify(body.ptx, arch=body.arch, threads=body.threads, filename="input.ptx")
    except VerifierUsageError as exc:
        raise ApiError(422, "verifier-usage", str(exc), loc=["body"]) from None
    d = rep.to_dict()
    return VerifyResponse(ok=rep.ok, findings=d.get("findings", []), rendered=rep.render("full"),
                          report=d)


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
