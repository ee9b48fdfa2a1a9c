"""Run and ask ids as path segments: an id may hold a ``/``, sent URL-encoded (``%2F``).

Starlette routes on the decoded path, where ``/runs/team%2Fr1`` has become
``/runs/team/r1`` (no route, or worse, another route: ``/runs/x%2Fasks`` would be the
asks of run ``x``). ``EncodedSegments`` routes on the path as sent instead, each segment
still URL-encoded, and ``decoded`` turns a matched path parameter back into the id.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from starlette.types import ASGIApp, Receive, Scope, Send


def encoded_path(raw_path: bytes) -> str:
    """The path with each segment URL-encoded one way (``%72uns`` is ``runs``)."""
    segments = raw_path.decode("latin-1").split("/")
    return "/".join(quote(unquote(segment), safe="") for segment in segments)


def decoded(value: str) -> str:
    """A path parameter matched on the encoded path, as the id it names."""
    return unquote(value)


class EncodedSegments:
    """ASGI middleware: route on the encoded path (see the module docstring).

    It acts only when the server gave the path as sent (``raw_path``) and the app is not
    mounted under a prefix (``root_path``), which the raw path would also hold.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and not scope.get("root_path"):
            scope = {**scope, "path": encoded_path(raw)}
        await self.app(scope, receive, send)
