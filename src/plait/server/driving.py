"""Routes that start and drive runs: start one (``plait run``), ``resume`` and ``fork``.

``POST /runs`` writes the run as queued and answers 202 at once: the server's drivers
(``drivers.ServerDrivers``), or ``plait worker`` processes, drive it. ``?wait=SECONDS``
waits that long for the run to park or finish (200 with its run object; 202 with the
queued or running object when it has not). ``resume`` and ``fork`` drive in the
request's worker thread on an event loop of its own (as the CLI does), so a long drive
never blocks the server's loop, and answer once the run finishes or parks.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import Field

from plait.driver.runtime import Runtime
from plait.driver.wave import RunResult
from plait.server.bodies import ApiRoute
from plait.server.commands import Acting, ceilings
from plait.server.events import SETTLED
from plait.server.replies import CanonicalJSON
from plait.server.settings import CallerOf, ServerSettings, Settings
from plait.workflow import load_workflow

router = APIRouter(default_response_class=CanonicalJSON, route_class=ApiRoute)


class Start(Acting):
    workflow: str = Field(description="A workflow file of the folder the server serves.")
    input: Any = None
    model: str | None = None
    run_id: str | None = None
    conversation: str | None = Field(
        default=None, description="Start the run as the next turn of this conversation."
    )
    detach: bool = Field(default=False, description="Kept for old clients: every start is queued.")


class Fork(Acting):
    at: int | None = None
    workflow: str | None = None
    budget: dict[str, Any] = Field(default_factory=dict)
    edits: dict[str, Any] = Field(default_factory=dict, alias="set")


MAX_WAIT_S = 3600.0
"""The longest ``?wait=`` a start may ask for: a request is not a way to hold a run."""


@router.post("/runs", status_code=202)
def start(
    settings: Settings,
    caller: CallerOf,
    body: Start,
    response: Response,
    wait: Annotated[float | None, Query(ge=0, le=MAX_WAIT_S)] = None,
) -> Any:
    """``plait run WORKFLOW --detach``: the queued run's object (202); with ``?wait=S``,
    the run object once it parks or finishes within S seconds (200), else as it is (202)."""
    principal = caller.acting_as(body.principal)
    path = settings.confinement.workflow(body.workflow)
    wf = load_workflow(path, settings.confinement.model(body.model))
    with settings.runtime(principal, durability=wf.durability) as rt:
        enqueued = rt.enqueue(wf, body.input, run_id=body.run_id, conversation=body.conversation)
        queued = asyncio.run(enqueued)
        settings.drivers.wake()
        if wait is None or body.detach:
            return queued.to_json()
        result = settled_within(settings, rt, queued.run_id, wait)
    if result.status in SETTLED:
        response.status_code = 200
    return result.to_json()


def settled_within(settings: ServerSettings, rt: Runtime, run_id: str, wait_s: float) -> RunResult:
    """The run as it is once it parks or finishes, or after ``wait_s`` seconds. The status
    is read again as soon as a drive of this server ends, and every ``poll_s`` (at least
    every 50 ms) for a driver elsewhere (``plait worker``, another server)."""
    deadline = time.monotonic() + wait_s
    while True:
        seen = settings.drivers.drives_ended()
        remaining = deadline - time.monotonic()
        if rt.store.get_run(run_id).status in SETTLED or remaining <= 0:
            return rt.show(run_id)
        settings.drivers.wait_for_drive(seen, min(remaining, max(settings.poll_s, 0.05)))


@router.post("/runs/{run_id}/resume")
def resume(settings: Settings, caller: CallerOf, run_id: str) -> Any:
    """``plait resume RUN_ID``: drive on from the last checkpoint (a finished run reports
    its outcome again)."""
    with settings.runtime(caller.principal, driving=True) as rt:
        return asyncio.run(rt.resume(run_id)).to_json()


@router.post("/runs/{run_id}/fork")
def fork(settings: Settings, caller: CallerOf, run_id: str, body: Fork | None = None) -> Any:
    """``plait fork RUN_ID``: a new run from a checkpoint, made by the acting principal with
    ``set``'s context edits; the base run is never touched."""
    body = body or Fork()
    principal = caller.acting_as(body.principal)
    wf = load_workflow(settings.confinement.workflow(body.workflow)) if body.workflow else None
    budgets = ceilings(body.budget)
    with settings.runtime(principal) as rt:
        fork = rt.fork(run_id, at=body.at, workflow=wf, budgets=budgets or None, edits=body.edits)
        return asyncio.run(fork).to_json()
