"""Routes that drive runs: start one (``plait run``), ``resume`` and ``fork``.

A drive runs in the request's worker thread on an event loop of its own (as the CLI
runs it), so a long run never blocks the server's loop; the request answers with the
run object when the run finishes or parks. ``detach`` writes a queued run for a
worker (``plait worker``) instead and answers at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from pydantic import Field

from plait.server.bodies import ApiRoute
from plait.server.commands import Acting, ceilings
from plait.server.replies import CanonicalJSON
from plait.server.settings import Settings
from plait.workflow import load_workflow

router = APIRouter(default_response_class=CanonicalJSON, route_class=ApiRoute)


class Start(Acting):
    workflow: str = Field(description="A workflow file on the server's disk.")
    input: Any = None
    model: str | None = None
    run_id: str | None = None
    detach: bool = False


class Fork(Acting):
    at: int | None = None
    workflow: str | None = None
    budget: dict[str, Any] = Field(default_factory=dict)
    edits: dict[str, Any] = Field(default_factory=dict, alias="set")


@router.post("/runs")
def start(settings: Settings, body: Start) -> Any:
    """``plait run WORKFLOW``: the run object once it finishes or parks (or is queued)."""
    wf = load_workflow(body.workflow, body.model)
    principal = settings.access.acting_as(body.principal)
    with settings.runtime(principal, durability=wf.durability) as rt:
        if body.detach:
            result = asyncio.run(rt.enqueue(wf, body.input, run_id=body.run_id))
        else:
            result = asyncio.run(rt.start(wf, body.input, run_id=body.run_id))
    return result.to_json()


@router.post("/runs/{run_id}/resume")
def resume(settings: Settings, run_id: str) -> Any:
    """``plait resume RUN_ID``: drive on from the last checkpoint (a finished run reports
    its outcome again)."""
    with settings.runtime() as rt:
        return asyncio.run(rt.resume(run_id)).to_json()


@router.post("/runs/{run_id}/fork")
def fork(settings: Settings, run_id: str, body: Fork | None = None) -> Any:
    """``plait fork RUN_ID``: a new run from a checkpoint, made by the acting principal with
    ``set``'s context edits; the base run is never touched."""
    body = body or Fork()
    wf = load_workflow(body.workflow) if body.workflow else None
    budgets = ceilings(body.budget)
    principal = settings.access.acting_as(body.principal)
    with settings.runtime(principal) as rt:
        fork = rt.fork(run_id, at=body.at, workflow=wf, budgets=budgets or None, edits=body.edits)
        return asyncio.run(fork).to_json()
