"""One error body for every failure, ``{type, message, loc, url}`` (pydantic's shape), built by
handlers registered on the app (``style.md`` section 5)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = ["ApiError", "install_handlers", "error_responses", "note_refusal"]

DOCS = "https://github.com/ailower/ailower/blob/main/docs/rest.md"
"""Where every error type is documented: ``{DOCS}#error-{type}`` (``docs/rest.md``, "Errors")."""


class ApiError(Exception):
    """An error answer: HTTP ``status``, kebab-case ``type``, ``message``, optional ``loc`` and
    headers (``Retry-After``)."""

    def __init__(self, status: int, type: str, message: str, *, loc: list[Any] | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.type, self.message = status, type, message
        self.loc, self.headers = loc or [], headers or {}


def _body(type: str, message: str, loc: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": type, "message": message, "loc": loc or [], "url": f"{DOCS}#error-{type}",
            **extra}


def note_refusal(request: Request, status: int) -> None:
    """Count a 4xx answer (but 401 and 429) against the caller's rate limit, where a route set
    ``request.state.on_refusal`` (the submit route: :mod:`server.refusals`)."""
    hook = getattr(request.state, "on_refusal", None)
    if hook is not None and 400 <= status < 500 and status not in (401, 429):
        hook()


def install_handlers(app: FastAPI) -> None:
    """Register the handlers for :class:`ApiError`, request validation and HTTP errors."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        note_refusal(request, exc.status)
        return JSONResponse(_body(exc.type, exc.message, exc.loc), status_code=exc.status,
                            headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        note_refusal(request, 422)
        errs = exc.errors()
        first = errs[0] if errs else {}
        detail = [{"type": e.get("type"), "loc": [str(x) for x in e.get("loc", ())],
                   "msg": str(e.get("msg"))} for e in errs[:20]]
        return JSONResponse(_body("validation-error", str(first.get("msg", "invalid request")),
                                  [str(x) for x in first.get("loc", ())], detail=detail),
                            status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        note_refusal(request, exc.status_code)
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:  # Starlette names only the first matching route's methods
            import re

            allowed: set[str] = set()
            for template, ops in request.app.openapi().get("paths", {}).items():
                rx = "^" + re.sub(r"\\{[^/}]+\\}", "[^/]+", re.escape(template)) + "$"
                if re.match(rx, request.url.path):
                    allowed |= {m.upper() for m in ops}
            if allowed:
                headers["Allow"] = ", ".join(sorted(allowed))
        names = {404: "not-found", 405: "method-not-allowed", 413: "body-too-large",
                 401: "unauthorized", 400: "bad-request"}
        return JSONResponse(_body(names.get(exc.status_code, f"http-{exc.status_code}"),
                                  str(exc.detail)), status_code=exc.status_code,
                            headers=headers or None)


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries with the shared error body for ``codes``."""
    from server.schemas import ErrorBody

    text = {400: "Bad request", 401: "Missing, malformed, unknown or revoked API key",
            404: "No such job (or not the caller's)", 409: "Conflict",
            413: "Body, PTX or source too large", 422: "Invalid request",
            429: "Rate or concurrency limit (see Retry-After)",
            503: "Kernel source not accepted on this host (no isolation), or key checks saturated"}
    schema = {"$ref": "#/components/schemas/ErrorBody"}
    return {c: {"model": ErrorBody, "description": text.get(c, "Error"),
                "content": {"application/json": {"schema": schema}}} for c in codes}
