"""``GET /runs/{id}/drawing``: the run's plan laid out (``workflow.layout``) with each
node's and edge's live state, for the console to draw as SVG without a layout library.

Node state is the scheduler's at the latest checkpoint (``Waiting``, ``Dispatched``,
``AwaitingClient``, ``DoneOk``, ``DoneFailed``, ``Dead``...), ``generation`` its loop
pass (0 the first; a pass of a loop is a new generation, not a retry), and ``attempt``
its try within the current generation (1 the first, 0 before it ran). An edge is
``fired`` (with how often), ``dead``, or ``pending``. ``shown`` is the run object as of
its latest checkpoint (status, outcome, context, spent): what ``GET /runs/{id}`` answers
without ``governance`` and ``activity``, which read the whole journal of a long run.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from plait.core.node_states import EdgeRes
from plait.core.state import SchedulerState
from plait.server.bodies import ApiRoute
from plait.server.replies import CanonicalJSON
from plait.server.settings import Settings
from plait.store.base import Store
from plait.store.run_pages import MAX_PAGE, RunQuery
from plait.workflow.chart import pinned_chart
from plait.workflow.layout import Layout, lay_out

router = APIRouter(default_response_class=CanonicalJSON, route_class=ApiRoute)


@router.get("/runs/{run_id}/drawing")
def drawing(settings: Settings, run_id: str) -> Any:
    """The layout of the version the run lives on, with live states."""
    with settings.runtime() as rt:
        view = rt.view(run_id)
        pinned = view.manifest["workflow"]
        state = view.state
        info = view.info
        budgets = view.manifest.get("budgets")
        children = child_runs(rt.store, run_id)
        shown = view.show().to_json()  # from the latest checkpoint: no journal read
    drawn = drawing_object(lay_out(pinned_chart(pinned)), state)
    schemas = ask_schemas(pinned)
    for node in drawn["nodes"]:
        if node["id"] in schemas:
            node["schema"] = schemas[node["id"]]
    run = {
        "workflow": info.workflow,
        "principal": info.principal,
        "parent_run_id": info.parent_run_id,
        "created_ms": info.created_ms,
        "updated_ms": info.updated_ms,
        "children": children,
    }
    return drawn | {"run": run, "budgets": budgets, "shown": shown}


def child_runs(store: Store, run_id: str) -> list[dict[str, Any]]:
    """The run's own child runs (ids ``RUN_ID~...``, parent ``RUN_ID``), newest first, at
    most one page: the console links them, as each child links its parent."""
    page = store.page_runs(RunQuery(limit=MAX_PAGE, text=run_id + "~"))
    return [
        {"run_id": i.run_id, "status": i.status} for i in page.runs if i.parent_run_id == run_id
    ]


def ask_schemas(pinned: dict[str, Any]) -> dict[str, Any]:
    """The answer schema of each ask node that has one, by node id (the console's forms)."""
    schemas = {}
    for entry in pinned.get("nodes", ()):
        spec = (entry.get("executor") or {}).get("spec") or {}
        if entry.get("kind") == "ask" and spec.get("output_schema") is not None:
            schemas[str(entry.get("id"))] = spec["output_schema"]
    return schemas


def drawing_object(layout: Layout, state: SchedulerState | None) -> dict[str, Any]:
    nodes = []
    for i, placed in enumerate(layout.nodes):
        node: dict[str, Any] = {
            "id": placed.id,
            "kind": placed.kind,
            "x": placed.x,
            "y": placed.y,
            "w": placed.w,
            "h": placed.h,
            "state": "Waiting",
            "generation": 0,
            "attempt": 0,
        }
        if state is not None and i < len(state.node_state):
            node["state"] = str(state.node_state[i])
            node["generation"] = state.node_gen[i]
            node["attempt"] = state.attempt[i] - state.attempt_base[i]
        nodes.append(node)
    index = {placed.id: i for i, placed in enumerate(layout.nodes)}
    edges = []
    for path in layout.edges:
        fired = 0
        status = "pending"
        if state is not None and path.index < len(state.edge_fired):
            fired = state.edge_fired[path.index]
            resolution = state.in_res[index[path.dst]].get(path.index)
            if resolution == EdgeRes.DEAD:
                status = "dead"
            elif fired or resolution == EdgeRes.FIRED:
                status = "fired"
        edges.append(
            {
                "from": path.src,
                "to": path.dst,
                "d": path.d,
                "label": path.label,
                "loop": path.loop,
                "state": status,
                "fired": fired,
            }
        )
    return {"width": layout.width, "height": layout.height, "nodes": nodes, "edges": edges}
