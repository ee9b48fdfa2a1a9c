"""Routes that read runs back: ``runs``, ``show``, ``trace``, ``verify``, ``asks``, ``graph``,
and ``me`` (who the request's token is).

Each answers with the object ``plait VERB --json`` prints. Routes are plain functions:
FastAPI runs them in its thread pool, so store calls never block the event loop.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from plait.driver import verbs
from plait.driver.run_listing import DEFAULT_LIMIT, Filters, asks_page_object, runs_page_object
from plait.server.bodies import ApiRoute
from plait.server.replies import CanonicalJSON
from plait.server.settings import CallerOf, Settings
from plait.workflow import load_workflow
from plait.workflow.chart import graph_object, pinned_chart

router = APIRouter(default_response_class=CanonicalJSON, route_class=ApiRoute)


@router.get("/me")
def me(caller: CallerOf) -> Any:
    """Who the request's token is: ``{"principal", "role"}`` (principal null for the
    server's own token when ``plait serve --as`` does not bind it)."""
    return caller.me()


@router.get("/runs")
def runs(
    settings: Settings,
    status: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    workflow: str | None = None,
    q: str | None = None,
    since: int | None = None,
    sort: str | None = None,
    order: str | None = None,
    updated_since: int | None = None,
) -> Any:
    """``plait runs [--status S]``; with any of ``limit``, ``cursor``, ``workflow``, ``q``,
    ``since``, ``sort``, ``order`` or ``updated_since``, one page of them
    (``driver.run_listing``) with its ``next_cursor``."""
    verbs.check_run_status(status, option="status")
    asked = (limit, cursor, workflow, q, since, sort, order, updated_since)
    paged = any(value is not None for value in asked)
    with settings.runtime() as rt:
        if not paged:
            return verbs.runs_object(rt, status, option="status")
        filters = Filters(
            DEFAULT_LIMIT if limit is None else limit,
            status,
            workflow,
            q,
            since,
            cursor,
            sort or "created",
            order or "desc",
            updated_since,
        )
        return runs_page_object(rt, filters, verbs.run_row(rt))


@router.get("/runs/{run_id}")
def show(settings: Settings, run_id: str) -> Any:
    """``plait show RUN_ID``."""
    with settings.runtime() as rt:
        _, shown = verbs.show_object(rt, run_id)
    return shown


@router.get("/runs/{run_id}/trace")
def trace(settings: Settings, run_id: str) -> Any:
    """``plait trace RUN_ID``."""
    with settings.runtime() as rt:
        return verbs.trace_object(rt, run_id)


@router.post("/runs/{run_id}/verify")
def verify(settings: Settings, run_id: str) -> Any:
    """``plait verify RUN_ID``: the report, ``verified`` true or false (HTTP 200 either way)."""
    with settings.runtime() as rt:
        return verbs.verify_report(rt, run_id)


@router.get("/asks")
def asks(settings: Settings, limit: int | None = None, cursor: str | None = None) -> Any:
    """``plait asks``: the pending asks of every parked run; with ``limit`` or ``cursor``,
    those of one page of parked runs, longest waiting first (``driver.run_listing``), with
    its ``next_cursor``."""
    with settings.runtime() as rt:
        if limit is None and cursor is None:
            return verbs.asks_object(rt, None)
        return asks_page_object(rt, limit, cursor)


@router.get("/runs/{run_id}/asks")
def run_asks(settings: Settings, run_id: str) -> Any:
    """``plait asks RUN_ID``: the pending asks of one run and its child runs."""
    with settings.runtime() as rt:
        return verbs.asks_object(rt, run_id)


@router.get("/runs/{run_id}/graph")
def run_graph(settings: Settings, run_id: str) -> Any:
    """The graph of the version the run lives on (its file is not read again)."""
    with settings.runtime() as rt:
        manifest = rt.store.manifests(run_id)[-1]
    return graph_object(pinned_chart(manifest["workflow"]))


@router.get("/workflows/graph")
def workflow_graph(settings: Settings, path: str) -> Any:
    """``plait graph WORKFLOW --json``, for a workflow file of the folder the server serves."""
    return graph_object(load_workflow(settings.confinement.workflow(path), require_model=False))
