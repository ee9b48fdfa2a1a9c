"""Routes of ``plait schedule``: add, list, pause, resume, delete and sync schedules.

Each answers with the object ``plait schedule VERB --json`` prints (``driver.scheduling``
builds both). A workflow file is a file of the folder the server serves, as for ``POST /runs``.
The server's drivers (and ``plait worker`` processes) fire the slots.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from plait.driver import scheduling
from plait.server.bodies import ApiRoute
from plait.server.commands import Body
from plait.server.replies import CanonicalJSON
from plait.server.settings import Settings
from plait.workflow.schedule_spec import make_spec

router = APIRouter(default_response_class=CanonicalJSON, route_class=ApiRoute)


class AddSchedule(Body):
    name: str
    workflow: str
    cron: str | None = None
    every: str | None = None
    input: Any = None
    timezone: str | None = None
    overlap: str | None = None
    catch_up: str | None = None


class SyncSchedules(Body):
    workflow: str


@router.get("/schedules")
def list_schedules(settings: Settings) -> Any:
    """``plait schedule list``: ``{"schedules": [...]}``."""
    with settings.runtime() as rt:
        return scheduling.list_schedules(rt)


@router.post("/schedules")
def add_schedule(settings: Settings, body: AddSchedule) -> Any:
    """``plait schedule add``: ``{"name", "accepted": true, "next_ms"}``."""
    source = scheduling.checked_workflow(str(settings.confinement.workflow(body.workflow)))
    given = body.model_dump(exclude={"name", "workflow"})
    spec = make_spec(body.name, source, **given)
    with settings.runtime() as rt:
        return scheduling.add_schedule(rt, spec)


@router.post("/schedules/sync")
def sync_schedules(settings: Settings, body: SyncSchedules) -> Any:
    """``plait schedule sync FILE``: the file's ``schedules:`` registered."""
    with settings.runtime() as rt:
        path = settings.confinement.workflow(body.workflow)
        return scheduling.sync_schedules(rt, str(path))


@router.post("/schedules/{name}/pause")
def pause_schedule(settings: Settings, name: str) -> Any:
    with settings.runtime() as rt:
        return scheduling.pause_schedule(rt, name)


@router.post("/schedules/{name}/resume")
def resume_schedule(settings: Settings, name: str) -> Any:
    with settings.runtime() as rt:
        return scheduling.resume_schedule(rt, name)


@router.delete("/schedules/{name}")
def delete_schedule(settings: Settings, name: str) -> Any:
    with settings.runtime() as rt:
        return scheduling.delete_schedule(rt, name)
