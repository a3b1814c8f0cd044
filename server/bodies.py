"""A maximum nesting depth for JSON request bodies, checked on the raw bytes before parsing.

A submitted spec nested 900 deep passed ``json.loads`` and the schema (``spec`` is a free-form
mapping until it is built) and then broke pydantic's serializer (``Circular reference detected
(depth exceeded)``, an unhandled 500); deeper bodies reach the recursion limits of every recursive
walk after it (issue 17). No request of the API nests deeper than about 8 (a spec's
``params[i].written[j]`` is at depth 6), so :class:`JsonDepthRoute` refuses a body deeper than
``AILOWER_SERVER_MAX_JSON_DEPTH`` (default 32) with 422 ``json-too-deep`` before FastAPI parses it.

:func:`json_depth` works on the bytes in time linear in their length, with no recursion: escape
pairs (``\\\\x``) are removed, then string literals, then every byte but ``[]{}``; the depth is the
largest prefix sum of +1 per opening and -1 per closing bracket (NumPy). For a body that is not
valid JSON the number is only an estimate; the parser refuses such a body anyway.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable

import numpy as np
from fastapi import Request, Response
from fastapi.routing import APIRoute

from server.errors import ApiError

__all__ = ["json_depth", "JsonDepthRoute", "defer_body_refusal",
           "raise_body_refusal"]

_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in JSON text ``body`` (``0`` for a scalar,
    ``1`` for ``[1, 2]``, ``2`` for ``{"a": []}``), without parsing it.

    Args:
        body: UTF-8 JSON bytes (UTF-8 never puts a quote, backslash or bracket byte inside a
            multi-byte character, so scanning bytes is exact for valid JSON).

    Returns:
        The depth; for invalid JSON, that of its bracket structure outside strings.
    """
    # escape pairs out, left to right: first the escaped backslashes, then escaped quotes (a run
    # of k backslashes keeps k % 2, which pairs with the byte after it); every quote left then
    # opens or closes a string, so the text outside strings is every other piece between quotes
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(None, _NOT_BRACKET)
    if not brackets:
        return 0
    a = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((a == ord("[")) | (a == ord("{")), 1, -1).astype(np.int64)
    return max(0, int(np.cumsum(steps).max()))


class JsonDepthRoute(APIRoute):
    """An :class:`~fastapi.routing.APIRoute` that checks a ``POST``/``PUT``/``PATCH`` body before
    FastAPI parses it: a body that ``json.loads`` would decode as anything but UTF-8 (it also
    accepts UTF-16 and UTF-32, whose bytes hide quotes and brackets from :func:`json_depth`: a
    UTF-16 body nested 900 deep behind a U+2200, bytes ``00 22``, passed and was a 500) is
    refused with 422 ``json-not-utf8`` (RFC 8259 section 8.1: JSON exchanged between systems is
    UTF-8), one nested deeper than the server's ``max_json_depth`` with 422 ``json-too-deep``,
    and one that is not JSON with 422 ``json-invalid`` (``loc`` ``["body"]``). The body is read
    once (FastAPI's body-size limit applies to that read) and parsed once (the result is cached
    on the request for the route's own parsing).

    A route whose endpoint has ``defer_body_refusal = True`` (the submit route) does not get the
    refusal at once: it is kept in ``request.state.body_refusal`` for a dependency that raises it
    after the key is authenticated and rate-checked (:func:`raise_body_refusal`), so that
    malformed bodies count against the key's rate like every other refused submission."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        """The route's handler, preceded by the encoding, depth and syntax checks."""
        handler = super().get_route_handler()
        defer = getattr(self.endpoint, "defer_body_refusal", False)

        async def checked(request: Request) -> Response:
            if request.method in _BODY_METHODS:
                refusal = await _body_refusal(request)
                if refusal is not None:
                    if not defer:
                        raise refusal
                    request.state.body_refusal = refusal
                    request._json = None  # Starlette's parse cache: FastAPI sees no body
            return await handler(request)

        return checked


def defer_body_refusal(endpoint):
    """Decorator (below ``@router.post``): :class:`JsonDepthRoute` keeps this endpoint's body
    refusals for :func:`raise_body_refusal` instead of answering them at once."""
    endpoint.defer_body_refusal = True
    return endpoint


def raise_body_refusal(request: Request) -> None:
    """Raise the refusal :class:`JsonDepthRoute` kept for this request, if any (a dependency of
    routes with ``defer_body_refusal``, placed after authentication and the rate check)."""
    refusal = getattr(request.state, "body_refusal", None)
    if refusal is not None:
        raise refusal


async def _body_refusal(request: Request) -> ApiError | None:
    """The 422 for a body that is not UTF-8, nests too deep, or is not JSON; ``None`` when it is
    fine or empty, or is not declared JSON (FastAPI does not parse it then either)."""
    body = await request.body()
    ctype = request.headers.get("content-type", "")
    if not body or (ctype and "json" not in ctype.split(";")[0].lower()):
        return None
    enc = json.detect_encoding(body)
    if enc not in ("utf-8", "utf-8-sig"):
        return ApiError(422, "json-not-utf8", f"the request body looks like {enc}, not UTF-8; "
                        "JSON bodies must be UTF-8 (RFC 8259 section 8.1)", loc=["body"])
    limit = request.app.state.server_settings.max_json_depth
    # cheap bound first: a body with few brackets cannot nest deeper than their count
    few = body.count(b"[") + body.count(b"{") <= limit
    depth = 0 if few else json_depth(body)
    if depth > limit:
        return ApiError(422, "json-too-deep", f"the request body nests {depth} levels of arrays "
                        f"and objects; this server's limit is {limit} "
                        "(AILOWER_SERVER_MAX_JSON_DEPTH)", loc=["body"])
    try:
        parsed = await request.json()  # cached on the request: FastAPI does not parse it again
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, int digits, bad UTF-8
        return ApiError(422, "json-invalid", f"the request body is not valid JSON: "
                        f"{str(exc)[:200]}", loc=["body"])
    if _SURROGATE.search(body):  # exact check only when a surrogate may be there
        try:
            json.dumps(parsed, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return ApiError(422, "json-invalid", "the request body holds a lone UTF-16 "
                            "surrogate (\\ud800-\\udfff not in a pair), which is no character "
                            "and cannot be encoded", loc=["body"])
    return None


# a surrogate escape, or the bytes of a surrogate code point (json.loads decodes bytes with
# 'surrogatepass'): a lone one in a string passed json.loads and then made every str.encode()
# after it raise (a source text with one was an unhandled 500)
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
