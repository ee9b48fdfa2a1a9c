"""How every API route reads a request: who asks first, then the body and the path.

The token is checked before the body is read, so a request without it is PLAIT-E029
(401) whatever it carries. Bodies are read as strictly as the CLI reads ``--input``:
FastAPI's own parser keeps the last of two equal keys and accepts NaN; a body that names a
key twice, holds NaN/Infinity or text no UTF-8 can store is refused here (PLAIT-E019,
400) before any route sees it, so nothing a person sent ambiguously reaches a journal.
Path parameters (run and ask ids) arrive URL-encoded (``paths.EncodedSegments``) and are
decoded here, so an id holding a ``/`` is one segment.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from plait.core.canonical import CanonicalJSONError, dumpb, loads
from plait.core.errors import PlaitError
from plait.server.paths import decoded
from plait.server.settings import ServerSettings


class ApiRoute(APIRoute):
    """An API route: token first, then a canonical JSON body (see the module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def checked(request: Request) -> Response:
            settings: ServerSettings = request.app.state.plait
            settings.access.check(request.headers.get("authorization"))
            params = request.scope.get("path_params", {})
            request.scope["path_params"] = {key: decoded(value) for key, value in params.items()}
            body = await request.body()  # kept by the request: the route reads it again
            if body and "json" in request.headers.get("content-type", ""):
                try:
                    dumpb(loads(body, unique_keys=True))
                except CanonicalJSONError as exc:
                    raise PlaitError("E019", f"request body: not valid JSON: {exc}") from None
            return await handle(request)

        return checked
