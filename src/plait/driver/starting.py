"""Starting a run: validate, pin its definition in a manifest, write it (§5.1).

A run's manifest pins its definition at start (plan, executors, tools and their
schemas, budgets, what its MCP servers offered, the engine epoch), so resume, verify
and fork never depend on the workflow file as it is later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plait.driver.admission import check_input, check_model
from plait.driver.defaults import ENGINE_EPOCH
from plait.driver.environment import tool_schemas
from plait.driver.host import Host
from plait.driver.inprocess import new_run_id
from plait.driver.run_ids import check_run_id
from plait.store.records import RunInfo
from plait.tools.mcp import fetch_catalogue
from plait.workflow.pinning import with_catalogue

if TYPE_CHECKING:
    from plait.workflow import Workflow


@dataclass(frozen=True, slots=True)
class Created:
    """A run just written: its id, the definition it pinned, when, and its manifest."""

    run_id: str
    workflow: Workflow
    now_ms: int
    manifest: dict[str, Any]


async def create_run(
    host: Host,
    workflow: Workflow,
    input: Any,
    run_id: str | None,
    parent: str | None,
    status: str,
) -> Created:
    """Validate, pin and write a new run with ``status`` (``running`` to drive it here,
    ``queued`` for a worker). Nothing is written when a check refuses it."""
    if parent is None:
        check_run_id(run_id)  # a child's id is PARENT~…, made here
        check_input(input)
    workflow.plan()  # validate before anything is written
    check_model(workflow, host.model, driven=status == "running")
    catalogue = await fetch_catalogue(workflow)  # what its MCP servers offer, pinned (§4)
    workflow = with_catalogue(workflow, catalogue)
    run_id = run_id or new_run_id()
    now = host.clock()
    manifest: dict[str, Any] = {
        "engine_epoch": ENGINE_EPOCH,
        "run_id": run_id,
        "workflow": workflow.to_manifest(),
        "source": str(workflow.source.resolve()) if workflow.source else None,
        "input": input,
        "principal": host.principal,
    }
    if catalogue:
        manifest["mcp_catalogue"] = catalogue
    manifest["tool_schemas"] = tool_schemas(workflow)  # verify needs no tool module
    info = RunInfo(run_id, workflow.name, status, host.principal, parent, now, now)
    host.store.create_run(info, manifest)
    return Created(run_id, workflow, now, manifest)
