"""Starting a run: validate, pin its definition in a manifest, write it (§5.1).

A run's manifest pins its definition at start (plan, executors, tools and their
schemas, budgets, what its MCP servers offered, the engine epoch), so resume, verify
and fork never depend on the workflow file as it is later.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plait.driver.admission import check_input, check_model
from plait.driver.defaults import ENGINE_EPOCH, lease_ttl
from plait.driver.host import Host
from plait.driver.inprocess import new_run_id
from plait.driver.owner import owner_alive, this_process
from plait.driver.parts_check import check_parts
from plait.driver.run_ids import check_run_id
from plait.store.lease import LeaseClaim
from plait.store.records import RunInfo

if TYPE_CHECKING:
    from plait.tools.mcp import McpPool
    from plait.workflow.run_definition import RunDefinition


@dataclass(frozen=True, slots=True)
class Created:
    """A run just written: its id, the definition it pinned, when, and its manifest."""

    run_id: str
    definition: RunDefinition
    now_ms: int
    manifest: dict[str, Any]
    mcp: McpPool | None = None
    """The MCP servers listed for the catalogue, still running for the run's first drive
    (``running`` runs only; the drive stops them)."""
    token: int | None = None
    """The run's lease, taken with its creation (``running`` runs stored by
    ``Store.create_run``): the first drive writes under it instead of acquiring one."""


def check_new_run(run_id: str | None, input: Any) -> None:
    """A run id and input from a person (not a child's, made by its parent): PLAIT-E019
    before anything else is looked at."""
    check_run_id(run_id)
    check_input(input)


async def create_run(
    host: Host,
    definition: RunDefinition,
    input: Any,
    run_id: str | None,
    parent: str | None,
    status: str,
    *,
    write: Callable[[RunInfo, dict[str, Any]], None] | None = None,
    now: int | None = None,
    extra: dict[str, Any] | None = None,
    conversation: str | None = None,
) -> Created:
    """Pin and write a new run with ``status`` (``running`` to drive it here, ``queued``
    for a worker). Nothing is written when a check refuses it. ``write`` stores the run
    instead of ``Store.create_run`` (a schedule's slot, in the same transaction), ``now``
    is its start time instead of the clock's (the slot's); ``extra`` joins the manifest
    (``schedule``); ``conversation``: the run is that conversation's next turn."""
    check_model(definition, host.model, driven=status == "running")
    # What its MCP servers offer, pinned (§4); a run driven here keeps them running.
    from plait.tools.mcp import pool_for

    pool = pool_for(definition.workflow) if status == "running" else None
    try:
        args = (input, run_id, parent, status, write, now, extra, pool, conversation)
        made = await _create(host, definition, *args)
    except BaseException:
        if pool is not None:
            await pool.aclose()
        raise
    return made


async def _create(
    host: Host,
    definition: RunDefinition,
    input: Any,
    run_id: str | None,
    parent: str | None,
    status: str,
    write: Callable[[RunInfo, dict[str, Any]], None] | None,
    now: int | None,
    extra: dict[str, Any] | None,
    pool: McpPool | None,
    conversation: str | None,
) -> Created:
    check_parts(input)  # before anything is written: a refused part loses nothing
    definition, catalogue = await host.definitions.with_catalogue(definition, pool)
    run_id = run_id or new_run_id()
    now = host.clock() if now is None else now
    manifest: dict[str, Any] = {
        "engine_epoch": ENGINE_EPOCH,
        "run_id": run_id,
        "workflow": definition.pinned,
        "source": definition.source,
        "input": input,
        "principal": host.principal,
    }
    if catalogue:
        manifest["mcp_catalogue"] = catalogue
    manifest.update(extra or {})
    manifest["tool_schemas"] = definition.tool_schemas  # verify needs no tool module
    sources = definition.tool_sources()  # tool code is live: what the run started with
    if sources:  # (show warns when one changed since)
        manifest["tool_sources"] = sources
    info = RunInfo(run_id, definition.name, status, host.principal, parent, now, now)
    token = None
    if write is not None:
        write(info, manifest)
    elif status == "running":  # driven here next: its lease is taken with it
        claim = LeaseClaim(this_process(), host.clock(), lease_ttl(), owner_alive)
        token = host.store.create_run(info, manifest, conversation, lease=claim)
    else:
        host.store.create_run(info, manifest, conversation)
    return Created(run_id, definition, now, manifest, pool, token)
