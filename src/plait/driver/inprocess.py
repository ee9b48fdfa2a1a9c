"""Run a workflow in this process with an in-memory journal (no persistence)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from plait.core.events import ClockReading, Event, Start
from plait.core.state import SchedulerState
from plait.driver.blocking import run_blocking
from plait.driver.clock import Clock, clock_from_env
from plait.driver.dispatcher import dispatcher_for
from plait.driver.environment import make_env
from plait.driver.memory import MemoryJournal
from plait.driver.telemetry import run_trace
from plait.driver.wave import RunResult, drive
from plait.tools.mcp import pool_for
from plait.workflow.plan_hash import plan_hash
from plait.workflow.run_definition import Definitions, definition_of

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from plait.workflow import Workflow


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex[:16]}"


async def run_in_memory(
    workflow: Workflow,
    input: Any = None,
    *,
    run_id: str | None = None,
    clock: Clock | None = None,
    journal: MemoryJournal | None = None,
    telemetry: bool | TracerProvider | None = None,
) -> RunResult:
    """Run ``workflow`` to completion (or a park) without persisting anything.

    ``telemetry``: OpenTelemetry spans, as ``Runtime(telemetry=...)``."""
    pool = pool_for(workflow)  # listed the catalogue, then serves the run's calls
    try:
        definition, _ = await Definitions().with_catalogue(definition_of(workflow), pool)
    except BaseException:
        if pool is not None:
            await pool.aclose()
        raise
    env = make_env(definition)
    run_id = run_id or new_run_id()
    clock = clock or clock_from_env()
    state = SchedulerState.new(run_id, env.plan)
    journal = journal if journal is not None else MemoryJournal()
    now = clock()
    events: list[Event] = [ClockReading(now), Start(input)]
    dispatcher = dispatcher_for(definition, mcp=pool)
    trace = run_trace(telemetry, run_id, definition.name, resumed=False)
    try:
        execute = trace.driving(state, dispatcher, ())
        result = await drive(env, state, events, journal, execute, clock, watch=trace.watch)
        result.plan_hash = plan_hash(definition.pinned)
        trace.end(result)
        return result
    except BaseException as exc:
        trace.end(None, exc)
        raise
    finally:
        await dispatcher.aclose()  # stops the run's MCP servers


def run_sync(workflow: Workflow, input: Any = None, **kwargs: Any) -> RunResult:
    """Synchronous ``run_in_memory`` for scripts and tests."""
    return run_blocking(run_in_memory(workflow, input, **kwargs))
