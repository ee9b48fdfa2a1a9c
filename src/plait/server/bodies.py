"""Request bodies read as strictly as the CLI reads ``--input``: canonical JSON only.

FastAPI's own parser keeps the last of two equal keys and accepts NaN; a body that names a
key twice, holds NaN/Infinity or text no UTF-8 can store is refused here (PLAIT-E019,
400) before any route sees it, so nothing a person sent ambiguously reaches a journal.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from plait.core.canonical import CanonicalJSONError, dumpb, loads
from plait.core.errors import PlaitError


class CanonicalBodyRoute(APIRoute):
    """A route whose JSON body must be canonical JSON (see the module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def checked(request: Request) -> Response:
            body = await request.body()  # kept by the request: the route reads it again
            if body and "json" in request.headers.get("content-type", ""):
                try:
                    dumpb(loads(body, unique_keys=True))
                except CanonicalJSONError as exc:
                    raise PlaitError("E019", f"request body: not valid JSON: {exc}") from None
            return await handle(request)

        return checked
