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

from collections.abc import Awaitable, Callable

import numpy as np
from fastapi import Request, Response
from fastapi.routing import APIRoute

from server.errors import ApiError

__all__ = ["json_depth", "JsonDepthRoute"]

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
    """An :class:`~fastapi.routing.APIRoute` that refuses a ``POST``/``PUT``/``PATCH`` body
    nested deeper than the server's ``max_json_depth`` (422 ``json-too-deep``, ``loc``
    ``["body"]``) before the body is parsed. The body is read once (FastAPI's body-size limit
    applies to that read) and cached on the request for the route's own parsing."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        """The route's handler, preceded by the depth check."""
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            if request.method in _BODY_METHODS:
                limit = request.app.state.server_settings.max_json_depth
                body = await request.body()
                # cheap bound first: a body with few brackets cannot nest deeper than their count
                few = body.count(b"[") + body.count(b"{") <= limit
                depth = 0 if few else json_depth(body)
                if depth > limit:
                    raise ApiError(422, "json-too-deep", f"the request body nests {depth} levels "
                                   f"of arrays and objects; this server's limit is {limit} "
                                   "(AILOWER_SERVER_MAX_JSON_DEPTH)", loc=["body"])
            return await handler(request)

        return checked
