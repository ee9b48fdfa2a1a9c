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
from plait.server.auth import Access, Caller
from plait.server.confinement import Confinement
from plait.server.deltas import DeltaHub
from plait.server.drivers import ServerDrivers
from plait.server.limits import DEFAULT_MAX_BODY_BYTES
from plait.server.tokens import find_token
from plait.store import open_store
from plait.store.records import TokenRow

DEFAULT_POLL_S = 0.25
DEFAULT_HEARTBEAT_S = 15.0


def never_stopping() -> bool:
    """A server run by someone else's ASGI server: its streams end only when runs settle."""
    return False


@dataclass(frozen=True)
class ServerSettings:
    """The store URL, who may call and as whom, how the event stream polls, whether the
    server is shutting down, the largest request body it reads, its own drivers, the
    hub that hands the deltas of the turns they drive to the event streams, and which
    workflow files and model overrides requests may name."""

    db: str
    access: Access
    poll_s: float = DEFAULT_POLL_S
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    stopping: Callable[[], bool] = never_stopping
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    drivers: ServerDrivers = field(default_factory=lambda: ServerDrivers("", ""))
    deltas: DeltaHub = field(default_factory=DeltaHub)
    confinement: Confinement = field(default_factory=lambda: Confinement.of(None))

    def find_token(self, token: str) -> TokenRow | None:
        """The principal's token row ``token`` is (``plait token add``), read from the store
        at every request, so a revoked token is refused at once."""
        store = open_store(self.db)
        try:
            return find_token(store, token)
        finally:
            store.close()

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


async def current_caller(request: Request) -> Caller:
    """Who sent the request: ``bodies.ApiRoute`` found out before the route runs."""
    caller: Caller = request.state.caller
    return caller


CallerOf = Annotated[Caller, Depends(current_caller)]
"""A route's caller: its role and the principal it acts as (``auth.Caller``)."""
