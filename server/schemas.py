"""Wire schemas of the ``/v1`` API (never the tables; public models never carry secrets).

Naming follows ``style.md`` section 5: ``LoweringCreate`` (the request body), ``LoweringPublic``
(one job), ``LoweringsPublic`` (a page), plus the verifier, kernel and error bodies.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Budget", "LoweringCreate", "LoweringCreated", "LoweringPublic", "LoweringsPublic",
           "VerifyRequest", "VerifyResponse", "KernelInfo", "KernelsPublic", "ErrorBody",
           "Status", "ARCHS", "PROVIDERS", "ARTIFACTS"]

Status = Literal["queued", "running", "succeeded", "failed", "cancelled"]
Arch = Literal["sm_89", "sm_90a", "sm_100a"]
ARCHS = ("sm_89", "sm_90a", "sm_100a")
PROVIDERS = ("triton", "anthropic", "openai")
ARTIFACTS = ("ptx", "cubin", "report", "transcript")


_STRICT = ConfigDict(extra="forbid", strict=True)


class Budget(BaseModel):
    """A job's budget.

    Attributes:
        iterations: proposals to request (1 .. the server's ``max_iterations``).
        wall_time_s: the job is stopped (failed, ``budget-exceeded``) after this many seconds of
            running.
        max_cost_usd: for paid providers: stop proposing once the tokens spent reach this cost,
            priced with the server's ``price_per_mtok``.
    """

    model_config = _STRICT  # ``iterations: true`` or ``"4"`` is a 422, not 1 or 4

    iterations: int = Field(default=4, ge=1, le=1000)
    wall_time_s: float = Field(default=900.0, gt=0, le=86_400)
    max_cost_usd: float | None = Field(default=None, gt=0, le=100_000)


class LoweringCreate(BaseModel):
    """``POST /v1/lowerings`` body: what to lower, for which arch, with which provider.

    Give exactly one of ``kernel`` (a suite name, ``GET /v1/kernels``) or ``spec`` (a KernelSpec
    whose ``source`` carries the Triton module as ``text``; ``module``/``path`` sources and a NumPy
    ``reference`` are refused for submitted specs).
    """

    model_config = _STRICT

    kernel: str | None = Field(default=None, min_length=1, max_length=100,
                               pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    spec: dict[str, Any] | None = None
    arch: Arch = "sm_90a"
    provider: Literal["triton", "search", "expert", "anthropic", "openai"] = "triton"
    model: str | None = Field(default=None, min_length=1, max_length=200)
    budget: Budget = Budget()

    @model_validator(mode="after")
    def _one_kernel(self) -> "LoweringCreate":
        if (self.kernel is None) == (self.spec is None):
            raise ValueError("give exactly one of 'kernel' (a suite name) or 'spec'")
        return self


class LoweringCreated(BaseModel):
    """The ``202`` answer: the job's id and where to watch it."""

    id: str
    status: Status
    url: str
    events_url: str


class LoweringPublic(BaseModel):
    """One job as the API shows it.

    Attributes:
        progress: ``{"stage", "iteration", "iterations", "best_iteration", "attempt"}``.
        best: the best candidate's iteration, origin, verdict, assembly/verifier verdicts,
            evaluation status and speedup (None until there is one).
        error: ``{"type", "message"}`` for a failed job.
        artifacts: names of the artifacts available now.
    """

    id: str
    status: Status
    kernel: str
    arch: str
    provider: str
    model: str | None
    budget: Budget
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempts: int
    cancel_requested: bool
    progress: dict[str, Any]
    best: dict[str, Any] | None
    stop_reason: str | None
    gpu: bool | None
    gpu_note: str | None
    error: dict[str, Any] | None
    artifacts: list[str]


class LoweringsPublic(BaseModel):
    """A page of the caller's jobs, newest first; ``count`` counts every match."""

    data: list[LoweringPublic]
    count: int
    limit: int
    offset: int


class VerifyRequest(BaseModel):
    """``POST /v1/verify`` body: PTX text and the target arch (``threads`` for the E3 check)."""

    model_config = _STRICT

    ptx: str = Field(min_length=1)
    arch: Arch = "sm_90a"
    threads: int | None = Field(default=None, ge=1, le=1024)


class VerifyResponse(BaseModel):
    """The verifier's report: ``ok`` (no error findings), the findings and the rendered text."""

    ok: bool
    findings: list[dict[str, Any]]
    rendered: str
    report: dict[str, Any]


class KernelInfo(BaseModel):
    """A suite kernel: name, description, sizes, number of autotune configs, grid."""

    name: str
    description: str
    sizes: dict[str, dict[str, int]]
    configs: int
    grid: list[str]


class KernelsPublic(BaseModel):
    """The suite."""

    data: list[KernelInfo]
    count: int


class ErrorBody(BaseModel):
    """Every error answer: ``type`` (kebab-case code), ``message``, ``loc`` (where), ``url``."""

    type: str
    message: str
    loc: list[str | int] = Field(default_factory=list)
    url: str | None = None
    detail: list[dict[str, Any]] | None = None
