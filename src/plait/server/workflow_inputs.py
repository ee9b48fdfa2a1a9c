"""``GET /workflows/input?path=FILE``: what the console's "Start a run" form is built from.

A workflow has no input schema of its own: its input is the context its entry node (the
first) starts from, so the form follows the entry tool's ``input_schema`` when it has
one; otherwise (null) the console asks for the input as JSON. The server checks the
input when the run starts, as ``plait run --input`` does.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from plait.server.bodies import ApiRoute
from plait.server.replies import CanonicalJSON
from plait.server.settings import Settings
from plait.workflow import load_workflow

router = APIRouter(default_response_class=CanonicalJSON, route_class=ApiRoute)


@router.get("/workflows/input")
def workflow_input(settings: Settings, path: str) -> Any:
    """``{"workflow", "entry", "input_schema"}`` of a workflow file of the folder the server
    serves (anything else is refused unopened, like ``/workflows/graph``)."""
    wf = load_workflow(settings.confinement.workflow(path), require_model=False)
    entry = wf.nodes[0] if wf.nodes else None
    schema = None
    if entry is not None and entry.tool is not None and entry.tool in wf.tools:
        found = wf.tools[entry.tool].input_schema
        schema = dict(found) if found is not None else None
    return {
        "workflow": wf.name,
        "entry": entry.id if entry is not None else None,
        "input_schema": schema,
    }
