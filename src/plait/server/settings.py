"""What one server is configured with, and the Runtime each request works through.

Every request opens its own ``Runtime`` on the server's store and closes it when done,
in the thread that serves it: requests share nothing but the database, exactly as
separate ``plait`` commands would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from plait.driver.runtime import Runtime
from plait.server.auth import Access
from plait.server.deltas import DeltaHub
from plait.server.drivers import ServerDrivers
from plait.server.limits import DEFAULT_MAX_BODY_BYTES

DEFAULT_POLL_S = 0.25
DEFAULT_HEARTBEAT_S = 15.0


def never_stopping() -> bool:
    """A server run by someone else's ASGI server: its streams end only when runs settle."""
    return False


@dataclass(frozen=True)
class ServerSettings:
    """The store URL, who may call and as whom, how the event stream polls, whether the
    server is shutting down, the largest request body it reads, its own drivers, and the
    hub that hands the deltas of the turns they drive to the event streams."""

    db: str
    access: Access
    poll_s: float = DEFAULT_POLL_S
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    stopping: Callable[[], bool] = never_stopping
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    drivers: ServerDrivers = field(default_factory=lambda: ServerDrivers("", ""))
    deltas: DeltaHub = field(default_factory=DeltaHub)

    @contextmanager
    def runtime(
        self, principal: str | None = None, durability: str | None = None, *, driving: bool = False
    ) -> Iterator[Runtime]:
        """A Runtime on the server's store acting as ``principal``, closed afterwards;
        ``driving``: it drives runs here, so its turns stream to the event streams."""
        rt = Runtime(
            self.db,
            principal=principal or self.access.principal,
            durability=durability,
            deltas=self.deltas if driving else None,
        )
        try:
            yield rt
        finally:
            rt.close()


async def current(request: Request) -> ServerSettings:
    settings: ServerSettings = request.app.state.plait
    return settings


Settings = Annotated[ServerSettings, Depends(current)]
