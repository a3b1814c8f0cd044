"""``/v1/lowerings``: submit, list, inspect, stream, fetch artifacts, cancel."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials
from fastapi.sse import EventSourceResponse, ServerSentEvent
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from server import jobs as J
from server.bodies import JsonDepthRoute, defer_body_refusal, raise_body_refusal
from server.db import TERMINAL, ApiKey, Job, JobArtifact, as_utc, utcnow
from server.deps import (ApiKeyDep, SessionDep, auth_gate, bearer,
                         check_body_size, get_api_key)
from server.errors import ApiError, error_responses
from server.refusals import REFUSALS, WINDOW
from server.schemas import (
    Budget,
    LoweringCreate,
    LoweringCreated,
    LoweringPublic,
    LoweringsPublic,
    Status,
)
from server.submit import validate_submission

router = APIRouter(prefix="/v1/lowerings", tags=["lowerings"], route_class=JsonDepthRoute)



def to_public(job: Job, artifacts: list[str]) -> LoweringPublic:
    """The API view of ``job``. A finished job's ``progress.stage`` is its terminal status and
    its ``progress.best_iteration`` the best candidate's 1-based iteration (as in ``best`` and
    the SSE ``done`` event), whatever stage its runner reported last."""
    summary = job.summary or {}
    progress = dict(job.progress or {})
    if job.status in TERMINAL:
        progress["stage"] = job.status
        progress["best_iteration"] = (summary.get("best") or {}).get("iteration")
    return LoweringPublic(
        id=job.id, status=job.status, kernel=job.kernel, arch=job.arch, provider=job.provider,
        model=job.model, budget=Budget.model_validate(job.request.get("budget") or {}),
        created_at=as_utc(job.created_at), started_at=as_utc(job.started_at),
        finished_at=as_utc(job.finished_at), attempts=job.attempts,
        cancel_requested=job.cancel_requested, progress=progress,
        best=summary.get("best"), stop_reason=summary.get("stop_reason"),
        gpu=summary.get("gpu"), gpu_note=summary.get("gpu_note"), error=job.error,
        artifacts=artifacts)


def _own_job(session, key, job_id: str) -> Job:
    job = session.get(Job, job_id) if len(job_id) <= 36 else None
    if job is None or job.key_id != key.key_id:
        raise ApiError(404, "not-found", f"no lowering {job_id!r}", loc=["path", "id"])
    return job


def own_job(id: str, session: SessionDep, key: ApiKeyDep) -> Job:
    """Dependency: the caller's job ``id`` (404 ``not-found`` for an unknown id or another key's
    job). A dependency, so that it runs before a streaming response starts."""
    return _own_job(session, key, id)


OwnJobDep = Annotated[Job, Depends(own_job)]


_open_streams: dict[str, int] = {}
_open_streams_lock = threading.Lock()


def stream_job(id: str, request: Request,
               creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
               _gate: Annotated[None, Depends(auth_gate)]) -> Iterator[str]:
    """Dependency of the SSE route: authenticate and check ownership in a short session of its
    own, closed before the stream starts (a stream must not hold a pooled connection for its
    whole life), then hold one of the key's ``max_streams_per_key`` stream slots until the
    response has ended (a yield dependency: its exit runs after the stream). Yields the job id.

    Raises:
        ApiError: 401/404 as for the other routes; 429 ``too-many-streams`` (``Retry-After``)
            when the key already holds ``max_streams_per_key`` open streams.
    """
    with request.app.state.sessionmaker() as s:
        key = get_api_key(request, s, None, creds)
        job_id = _own_job(s, key, id).id
    cap = request.app.state.server_settings.max_streams_per_key
    with _open_streams_lock:
        n = _open_streams.get(key.key_id, 0)
        if n >= cap:
            raise ApiError(429, "too-many-streams", f"this key already holds {n} open event "
                           f"streams (limit {cap}); close one or resume later with "
                           "Last-Event-ID", loc=["path", "id"], headers={"Retry-After": "5"})
        _open_streams[key.key_id] = n + 1
    try:
        yield job_id
    finally:
        with _open_streams_lock:
            left = _open_streams.get(key.key_id, 1) - 1
            if left > 0:
                _open_streams[key.key_id] = left
            else:
                _open_streams.pop(key.key_id, None)


def last_event_id(last_event_id: Annotated[str | None, Header(max_length=20)] = None) -> int | None:
    """Dependency: the ``Last-Event-ID`` header as an event id (422 before the stream starts)."""
    if last_event_id is None:
        return None
    if not re.fullmatch(r"[0-9]{1,19}", last_event_id.strip()):
        raise ApiError(422, "validation-error", "Last-Event-ID must be a non-negative integer "
                       f"event id, got {last_event_id[:20]!r}", loc=["header", "Last-Event-ID"])
    return int(last_event_id)


def _artifact_names(session, job_id: str) -> list[str]:
    return sorted(session.scalars(select(JobArtifact.name).where(JobArtifact.job_id == job_id)))


@router.post("", status_code=202, response_model=LoweringCreated,
             responses=error_responses(400, 401, 409, 413, 422, 429, 503),
             summary="Submit a lowering")
@defer_body_refusal
def create_lowering(body: LoweringCreate, request: Request, response: Response,
                    session: SessionDep, key: SubmitKeyDep,
                    idempotency_key: Annotated[str | None, Header(max_length=200)] = None
                    ) -> LoweringCreated:
    """Queue a lowering of a suite kernel or a submitted spec; returns ``202`` with its id.

    A repeated ``Idempotency-Key`` with the same body returns the first job; with a different
    body, ``409``. ``429`` (with ``Retry-After``) when the key's submissions per minute or
    concurrent jobs are at their limit; refused submissions (4xx) count against the rate.
    """
    ss = request.app.state.server_settings
    payload = body.model_dump(mode="json")
    rhash = J.request_hash(payload)
    if idempotency_key is not None:
        old = session.scalar(select(Job).where(Job.key_id == key.key_id,
                                               Job.idempotency_key == idempotency_key))
        if old is not None:
            if old.request_hash != rhash:
                raise ApiError(409, "idempotency-conflict", "this Idempotency-Key was used with a "
                               "different request body", loc=["header", "Idempotency-Key"])
            return _created(old, request)
    kernel, untrusted = validate_submission(body, ss, key.max_source_bytes)
    _release_connection(session, key)  # hold no pooled connection while waiting for the lock
    with _key_lock(key.key_id):
        return _admit(body, request, session, key, payload, rhash, idempotency_key, kernel,
                      untrusted)


def _rate_window(session, key: ApiKey, now) -> list:
    """Times of the key's jobs created and submissions refused in the rolling minute, oldest
    first (:mod:`server.refusals`)."""
    jobs = session.scalars(select(Job.created_at).where(
        Job.key_id == key.key_id, Job.created_at > now - WINDOW)).all()
    return sorted([as_utc(t) for t in jobs] + REFUSALS.since(key.key_id, now - WINDOW))


def _check_rate(window: list, key: ApiKey, now) -> None:
    """429 ``rate-limited`` (with ``Retry-After``) when ``window`` holds ``rate_per_minute``."""
    if len(window) >= key.rate_per_minute:
        oldest = window[-key.rate_per_minute]
        wait = max(1, math.ceil(60 - (now - oldest).total_seconds()))
        raise ApiError(429, "rate-limited", f"{key.rate_per_minute} submissions per minute "
                       f"(refused ones included) allowed for this key; retry in {wait} s",
                       headers={"Retry-After": str(wait)})


def refusals_counted(request: Request, key: ApiKeyDep) -> ApiKey:
    """Dependency of the submit route, right after authentication and before anything of the
    request is validated (headers included: an ``Idempotency-Key`` over 200 characters was a 422
    that never counted, because the dependency setting the hook declared that header itself):
    from here on a 4xx answer counts as a refused submission of this key (the error handlers
    call ``request.state.on_refusal``)."""
    request.state.on_refusal = lambda: REFUSALS.record(key.key_id)
    return key


def rate_checked_key(request: Request, session: SessionDep,
                     key: Annotated[ApiKey, Depends(refusals_counted)],
                     idempotency_key: Annotated[str | None, Header(max_length=200)] = None
                     ) -> ApiKey:
    """Dependency of the submit route, before the body is validated (after
    :func:`refusals_counted`): a key at its rate is answered 429 at once, before its body is
    checked (except the replay of an ``Idempotency-Key`` the key already used, which
    returns its job as before)."""
    now = utcnow()
    replay = idempotency_key is not None and session.scalar(select(Job.id).where(
        Job.key_id == key.key_id, Job.idempotency_key == idempotency_key)) is not None
    if not replay:
        _check_rate(_rate_window(session, key, now), key, now)
    _release_connection(session, key)
    return key


def _release_connection(session, key: ApiKey) -> None:
    """End the session's read transaction, so that its pooled connection is not held while the
    request waits (for the key's lock in :func:`create_lowering`: 40 parallel submits of one
    key holding 15 pooled connections while the lock holder needs one waited out the pool
    timeout). ``key`` is detached first, so that the rollback does not expire it (its columns
    stay loaded; reading them later needs no connection)."""
    if key in session:
        session.expunge(key)
    session.rollback()


async def submit_key(request: Request,
                     key: Annotated[ApiKey, Depends(rate_checked_key)]) -> ApiKey:
    """The submitting key, rate-checked, with its ``max_body_bytes`` enforced (413), then the
    body's encoding/depth/syntax refusal if it has one (:mod:`server.bodies`; counted, like
    every refusal from here on)."""
    key = await check_body_size(request, key)
    raise_body_refusal(request)
    return key


SubmitKeyDep = Annotated[ApiKey, Depends(submit_key)]


_key_locks: dict[str, threading.Lock] = {}
_key_locks_guard = threading.Lock()


def _key_lock(key_id: str) -> threading.Lock:
    """The process-wide lock that makes a key's limit check and job insert one atomic step
    (40 parallel submits with a limit of 4 admit exactly 4). Across processes on PostgreSQL the
    ``SELECT ... FOR UPDATE`` of the key row in :func:`_admit` does the same."""
    with _key_locks_guard:
        return _key_locks.setdefault(key_id, threading.Lock())


def _admit(body: LoweringCreate, request: Request, session, key, payload: dict, rhash: str,
           idempotency_key: str | None, kernel: str, untrusted: bool) -> LoweringCreated:
    """Check the key's rate and concurrency limits and insert the job, in one transaction."""
    session.rollback()  # start a fresh transaction: the reads below must see every commit
    session.execute(select(ApiKey.id).where(ApiKey.key_id == key.key_id).with_for_update())
    now = utcnow()
    try:
        _check_rate(_rate_window(session, key, now), key, now)
    except ApiError:
        session.rollback()
        raise
    active = session.scalar(select(func.count()).select_from(Job).where(
        Job.key_id == key.key_id, Job.status.in_(("queued", "running"))))
    if active >= key.max_concurrent:
        session.rollback()
        raise ApiError(429, "too-many-jobs", f"this key has {active} queued or running jobs; the "
                       f"limit is {key.max_concurrent}", headers={"Retry-After": "5"})
    cap = request.app.state.server_settings.max_queued_per_key
    queued = session.scalar(select(func.count()).select_from(Job).where(
        Job.key_id == key.key_id, Job.status == "queued"))
    if queued >= cap:  # a server-wide ceiling, whatever a key's own max_concurrent says
        session.rollback()
        raise ApiError(429, "too-many-jobs", f"this key has {queued} queued jobs; the server "
                       f"allows {cap} per key", headers={"Retry-After": "5"})
    job = Job(id=str(uuid.uuid4()), key_id=key.key_id, status="queued", kernel=kernel,
              arch=body.arch, provider=body.provider, model=body.model, request=payload,
              request_hash=rhash, idempotency_key=idempotency_key, untrusted_source=untrusted,
              created_at=now, progress={"stage": "queued"})
    session.add(job)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        old = session.scalar(select(Job).where(Job.key_id == key.key_id,
                                               Job.idempotency_key == idempotency_key))
        if old is None or old.request_hash != rhash:
            raise ApiError(409, "idempotency-conflict", "this Idempotency-Key was used with a "
                           "different request body", loc=["header", "Idempotency-Key"]) from None
        return _created(old, request)
    J.add_event(session, job.id, "queued", {"kernel": kernel, "arch": body.arch,
                                            "provider": body.provider,
                                            "iterations": body.budget.iterations})
    return _created(job, request)


def _created(job: Job, request: Request) -> LoweringCreated:
    return LoweringCreated(id=job.id, status=job.status, url=f"/v1/lowerings/{job.id}",
                           events_url=f"/v1/lowerings/{job.id}/events")


@router.get("", response_model=LoweringsPublic, responses=error_responses(401, 422),
            summary="List the caller's lowerings")
def list_lowerings(session: SessionDep, key: ApiKeyDep,
                   status: Annotated[Status | None, Query()] = None,
                   kernel: Annotated[str | None, Query(max_length=200)] = None,
                   limit: Annotated[int, Query(ge=1, le=100)] = 20,
                   offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0) -> LoweringsPublic:
    """The caller's jobs, newest first, filtered by ``status`` and ``kernel``; ``count`` is the
    total number of matches."""
    q = select(Job).where(Job.key_id == key.key_id)
    if status is not None:
        q = q.where(Job.status == status)
    if kernel is not None:
        q = q.where(Job.kernel == kernel)
    count = session.scalar(select(func.count()).select_from(q.subquery()))
    rows = session.scalars(q.order_by(Job.created_at.desc(), Job.id).limit(limit).offset(offset))
    data = [to_public(j, _artifact_names(session, j.id)) for j in rows]
    return LoweringsPublic(data=data, count=count or 0, limit=limit, offset=offset)


@router.get("/{id}", response_model=LoweringPublic, responses=error_responses(401, 404),
            summary="One lowering's status, progress and best candidate")
def get_lowering(id: str, session: SessionDep, key: ApiKeyDep) -> LoweringPublic:
    """Status (queued / running / succeeded / failed / cancelled), progress, the best candidate's
    verdicts and speedup, error details, and the artifacts available."""
    job = _own_job(session, key, id)
    return to_public(job, _artifact_names(session, job.id))


@router.post("/{id}/cancel", response_model=LoweringPublic, status_code=202,
             responses={**error_responses(401, 404),
                        200: {"model": LoweringPublic,
                              "description": "The job had already finished: nothing changed"}},
             summary="Cancel a lowering")
def cancel_lowering(id: str, session: SessionDep, key: ApiKeyDep,
                    response: Response) -> LoweringPublic:
    """A queued job is cancelled at once; a running one is stopped by its worker within about a
    second (``cancel_requested`` is set meanwhile): 202. Cancelling a finished job changes
    nothing and answers 200 with the job as it is."""
    job = _own_job(session, key, id)
    if job.status in TERMINAL:
        response.status_code = 200
        return to_public(job, _artifact_names(session, job.id))
    if job.status == "queued" and not J.cancel_queued(session, job):
        session.refresh(job)
    if job.status == "running":
        J.request_cancel(session, job)
    session.refresh(job)
    return to_public(job, _artifact_names(session, job.id))


_ARTIFACT_FILES = {"ptx": "ptx", "cubin": "cubin", "report": "json", "transcript": "jsonl"}


@router.get("/{id}/artifacts/{name}", responses={
    **error_responses(401, 404),
    200: {"content": {"text/plain": {}, "application/json": {}, "application/octet-stream": {},
                      "application/x-ndjson": {}},
          "description": "the artifact's bytes"}},
    response_class=Response, summary="Fetch an artifact")
def get_artifact(id: str, name: Literal["ptx", "cubin", "report", "transcript"],
                 request: Request, session: SessionDep, key: ApiKeyDep) -> Response:
    """``ptx`` (the best PTX), ``cubin``, ``report`` (report.json) or ``transcript``
    (transcript.jsonl). ``404`` until the job has produced it."""
    job = _own_job(session, key, id)
    art = session.scalar(select(JobArtifact).where(JobArtifact.job_id == job.id,
                                                   JobArtifact.name == name))
    if art is None:
        raise ApiError(404, "artifact-not-found", f"lowering {job.id} has no {name!r} artifact "
                       f"(status {job.status})", loc=["path", "name"])
    root = J.job_dir(request.app.state.settings.data_dir, job.id).resolve()
    path = Path(art.path).resolve()
    if root not in path.parents:
        raise ApiError(404, "artifact-not-found", f"artifact {name!r} is outside the job folder",
                       loc=["path", "name"])
    try:
        data = path.read_bytes()
    except OSError:
        raise ApiError(404, "artifact-not-found", f"artifact {name!r} is missing on disk",
                       loc=["path", "name"]) from None
    if hashlib.sha256(data).hexdigest() != art.sha256:
        raise ApiError(409, "artifact-changed", f"artifact {name!r} does not match its recorded "
                       "SHA-256", loc=["path", "name"])
    fname = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', job.kernel)[:100]}.{_ARTIFACT_FILES[name]}"
    return Response(data, media_type=art.media_type,
                    headers={"Content-Disposition": f'attachment; filename="{fname}"',
                             "X-Content-SHA256": art.sha256})


@router.get("/{id}/events", response_class=EventSourceResponse,
            responses=error_responses(401, 404), summary="Stream a lowering's events (SSE)")
async def stream_events(id: str, request: Request,
                        job_id: Annotated[str, Depends(stream_job)],
                        resume: Annotated[int | None, Depends(last_event_id)] = None,
                        after: Annotated[int | None, Query(ge=0, le=2**62)] = None
                        ) -> AsyncIterator[ServerSentEvent]:
    """Server-Sent Events: ``queued``, ``claimed``, ``started``, ``reference_compiled``,
    ``baseline``, one ``iteration`` per proposal (proposal origin and digest, ptxas result,
    verifier findings, evaluation status, speedup), ``requeued``, ``stop``, ``done`` and a final
    ``succeeded`` / ``failed`` / ``cancelled``; then an ``end`` event and the stream closes.
    Each event's id is its number in the job's own event log (1, 2, ...): reconnect with
    ``Last-Event-ID`` (or ``?after=ID``) to resume. Revoking the key ends the stream within a
    second (an ``end`` event with ``"reason": "key-revoked"``)."""
    start = max(after or 0, resume or 0)
    maker = request.app.state.sessionmaker
    limit_s = request.app.state.server_settings.max_stream_s

    def fetch(cursor: int) -> tuple[list, str, bool]:
        with maker() as s:
            evs = J.events_after(s, job_id, cursor)
            status, revoked = s.execute(
                select(Job.status, ApiKey.revoked_at).join(ApiKey, ApiKey.key_id == Job.key_id)
                .where(Job.id == job_id)).one()
            return ([(e.seq, e.kind, e.data, e.attempt, as_utc(e.created_at)) for e in evs],
                    status, revoked is not None)

    t0 = time.monotonic()
    cursor = start
    while True:
        evs, status, revoked = await run_in_threadpool(fetch, cursor)
        if revoked:  # the key was revoked while its stream was open: close it now
            yield ServerSentEvent(event="end", raw_data=json.dumps({"status": status,
                                                                    "reason": "key-revoked"}))
            return
        for eid, kind, data, attempt, ts in evs:
            cursor = eid
            yield ServerSentEvent(id=str(eid), event=kind,
                                  raw_data=json.dumps({"kind": kind, "attempt": attempt,
                                                       "ts": ts.isoformat(), "data": data},
                                                      default=str))
        if not evs and status in TERMINAL:
            yield ServerSentEvent(event="end", raw_data=json.dumps({"status": status}))
            return
        if not evs:
            if time.monotonic() - t0 > limit_s or await request.is_disconnected():
                return
            await asyncio.sleep(0.25)
