"""How every API route reads a request: who asks first, then the body and the path.

The token is checked before the body is read, so a request without it is PLAIT-E029
(401) whatever it carries, and so is the role: a token whose role may not take the
route's action (``roles.ROUTE_ACTIONS``) is PLAIT-E033 (403) before anything is read.
Bodies are read as strictly as the CLI reads ``--input``:
FastAPI's own parser keeps the last of two equal keys and accepts NaN; a body that names a
key twice, holds NaN/Infinity or text no UTF-8 can store is refused here (PLAIT-E019,
400) before any route sees it, so nothing a person sent ambiguously reaches a journal.
A body over the server's limit (16 MiB unless ``plait serve --max-body-bytes`` says
otherwise) is refused (PLAIT-E019, 413) without being read to its end, so no request can
make the server hold, or a journal keep, more than that at once.
Path parameters (run and ask ids) arrive URL-encoded (``paths.EncodedSegments``) and are
decoded here, so an id holding a ``/`` is one segment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from plait.core.canonical import CanonicalJSONError, dumpb, loads
from plait.core.errors import PlaitError
from plait.server.paths import decoded
from plait.server.replies import error_reply
from plait.server.roles import action_of
from plait.server.settings import ServerSettings

PAYLOAD_TOO_LARGE = 413


class ApiRoute(APIRoute):
    """An API route: token first, then a canonical JSON body (see the module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        action = action_of(next(iter(self.methods or {"GET"})), self.path)

        async def checked(request: Request) -> Response:
            settings: ServerSettings = request.app.state.plait
            header = request.headers.get("authorization")
            if settings.access.admits(header):  # the trusted token: no store read
                caller = settings.access.caller(header, settings.find_token)
            else:
                caller = await asyncio.to_thread(
                    settings.access.caller, header, settings.find_token
                )
            caller.may(action)
            request.state.caller = caller
            params = request.scope.get("path_params", {})
            request.scope["path_params"] = {key: decoded(value) for key, value in params.items()}
            body = await read_body(request, settings.max_body_bytes)
            if body is None:
                too_large = PlaitError(
                    "E019",
                    f"request body: over the server's limit of {settings.max_body_bytes}"
                    " bytes (plait serve --max-body-bytes)",
                )
                return error_reply(too_large, PAYLOAD_TOO_LARGE)
            if body and "json" in request.headers.get("content-type", ""):
                try:
                    dumpb(loads(body, unique_keys=True))
                except CanonicalJSONError as exc:
                    raise PlaitError("E019", f"request body: not valid JSON: {exc}") from None
            return await handle(request)

        return checked


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request's body, kept by the request for the route to read again; None, read no
    further, once it is over ``limit`` bytes (its Content-Length says so, or its chunks
    add up past it)."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    body = b"".join(chunks)
    request._body = body  # what Request.body() returns from now on (FastAPI's own idiom)
    return body
