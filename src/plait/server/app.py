"""``create_app``: the FastAPI application ``plait serve`` runs.

Every API route needs a bearer token — the server's, or a principal's from ``plait token
add`` — whose role allows it (``bodies.ApiRoute`` checks both before it reads anything
else, ``roles.py`` says which role may do what); only the console page does not. Workflow
files and model overrides a request names are confined (``confinement.py``). Errors
answer with the CLI's error object and a status from ``errors.STATUS``. Routes match the
path as sent, segments still URL-encoded (``paths.EncodedSegments``), so a run id holding
``/`` is one segment.
The interactive API docs are off: the API is documented in docs/server.md, and those
pages would load their script from a CDN.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from plait.driver.defaults import default_db, default_principal
from plait.driver.worker import DEFAULT_POLL_MS
from plait.server import (
    commands,
    console,
    conversations,
    drawing,
    driving,
    errors,
    events,
    journal_pages,
    reading,
    schedules,
    workflow_inputs,
)
from plait.server.auth import Access
from plait.server.confinement import Confinement
from plait.server.deltas import DeltaHub
from plait.server.drivers import DEFAULT_CONCURRENCY, ServerDrivers, log_to_stderr
from plait.server.limits import DEFAULT_MAX_BODY_BYTES
from plait.server.paths import EncodedSegments
from plait.server.settings import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_POLL_S,
    ServerSettings,
    never_stopping,
)


def create_app(
    token: str,
    *,
    db: str | None = None,
    principal: str | None = None,
    bound: bool = False,
    poll_s: float = DEFAULT_POLL_S,
    heartbeat_s: float = DEFAULT_HEARTBEAT_S,
    stopping: Callable[[], bool] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    workers: int = 0,
    worker_concurrency: int = DEFAULT_CONCURRENCY,
    worker_poll_ms: int = DEFAULT_POLL_MS,
    log: Callable[[str], None] = log_to_stderr,
    workflows: str | os.PathLike[str] | None = None,
    allow_models: tuple[str, ...] = (),
) -> FastAPI:
    """The API on store ``db`` (default ``$PLAIT_DB``, else ``.plait/plait.db``), behind ``token``.

    ``principal``: who requests act as when they name nobody (default ``$PLAIT_PRINCIPAL``,
    else the OS user); ``bound``: the token always acts as ``principal`` (``auth.Access``).
    ``poll_s``: how often an event stream reads the store while a run moves. ``stopping``:
    whether the server is shutting down (an event stream of a moving run then closes,
    else it would hold the shutdown until the run settles). ``max_body_bytes``: a larger
    request body is refused (PLAIT-E019, 413) without being read to its end.
    ``workers``: driver loops run with the app's lifespan (``drivers.ServerDrivers``),
    each driving up to ``worker_concurrency`` runs and claiming at least every
    ``worker_poll_ms``; 0 (the default here; ``plait serve`` runs 1) leaves queued and
    woken runs to ``plait worker`` processes. ``log`` takes the drivers' log lines.
    ``workflows``: the only folder whose workflow files requests may start, graph or fork
    onto (default: the current folder); ``allow_models``: the prefixes a request's model
    override may start with (default: none; ``confinement.Confinement``).
    """
    if not token:
        raise ValueError("create_app needs a non-empty token")
    access = Access(token, principal or default_principal(), bound)
    confinement = Confinement.of(workflows, allow_models)
    url = db or default_db()
    hub = DeltaHub()
    drivers = ServerDrivers(
        url,
        access.principal,
        workers=workers,
        concurrency=worker_concurrency,
        poll_ms=worker_poll_ms,
        log=log,
        deltas=hub,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(drivers.start)
        try:
            yield
        finally:  # the drives in flight finish or park first, as `plait worker`'s do
            await asyncio.to_thread(drivers.stop)

    app = FastAPI(
        title="plait",
        summary="Durable AI agent workflows: the verbs of the plait CLI over HTTP.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )
    app.state.plait = ServerSettings(
        url,
        access,
        poll_s,
        heartbeat_s,
        stopping or never_stopping,
        max_body_bytes,
        drivers,
        hub,
        confinement,
    )
    errors.install(app)
    api = (
        reading,
        journal_pages,
        drawing,
        workflow_inputs,
        commands,
        driving,
        events,
        schedules,
        conversations,
    )
    for module in api:  # each through ApiRoute
        app.include_router(module.router)
    app.include_router(console.router)
    app.add_middleware(EncodedSegments)
    return app
