"""What one ``step`` call works with, and the few primitives every part of it shares.

The graph walk (``step``), the LLM loop (``llm_loop``) and later features emit
effects and fail nodes the same way; they do it through these functions so
there is one way to journal an intent and one way to fail fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plait.core.canonical import JSON
from plait.core.env import Reducer, StepEnv
from plait.core.events import Command, Dispatch, WriteIntent
from plait.core.keys import JournalKey
from plait.core.node_states import Move, NodeState, move
from plait.core.pending import TaskState
from plait.core.state import OpenPhase, SchedulerState


@dataclass(slots=True)
class StepContext:
    """The inputs of one ``step`` call and the commands it has produced so far."""

    env: StepEnv
    state: SchedulerState
    reduce: Reducer
    commands: list[Command]
    inputs: bool = False
    """A steering message arrived in this call (a parked run must checkpoint it)."""
    turn_failures: dict[str, str] = field(default_factory=dict)
    """The failed turn each LLM loop re-sends in this call, by flow key: named if the
    loop then reaches its bound (a scripted model that ran out says so)."""
    idle_answers: list[tuple[str, int]] = field(default_factory=list)
    """Loops whose final answer (flow key, turn) found steering messages waiting: settled
    once every event is applied, in node order, so which loop takes the messages never
    depends on which answer arrived first."""
    task_failures: dict[int, str] = field(default_factory=dict)
    """The Send task path whose failure this call recorded as ``failed``, by node: of
    tasks failing in one batch, the lowest path names the failure, whatever the order."""
    noted: dict[tuple[int, str], int] = field(default_factory=dict)
    """(superstep, record field) -> its length when this call first noted into it: what
    loops ending in one batch note goes in node order (``note_ended``)."""


def emit_effect(
    s: StepContext, phase: OpenPhase, key: JournalKey, executor: str, value: Any
) -> None:
    """Make ``key`` outstanding: journal its intent, then dispatch it."""
    phase.outstanding.add(key)
    state = s.state
    s.commands.append(WriteIntent(key, executor, value, state.superstep, state.clock_ms))
    s.commands.append(Dispatch(key, executor, value))


def fail_node(state: SchedulerState, node: int, detail: str) -> None:
    """Fail-fast: the lowest failing node index wins, whatever the arrival order."""
    move(state, node, Move.FAILED)
    if state.failed is None or node < state.failed[0]:
        state.failed = (node, detail)


def fail_task(s: StepContext, node: int, path: str, detail: str) -> None:
    """Fail-fast for a Send task: as ``fail_node``; between tasks of one node failing in
    the same batch of events, the lowest task path names the failure."""
    state = s.state
    mine = s.task_failures.get(node)
    if state.failed is not None and state.failed[0] == node and mine is not None and path < mine:
        state.failed = None  # this call's own choice, made before a lower path arrived
    fail_node(state, node, detail)
    if state.failed == (node, detail):
        s.task_failures[node] = path


def note_ended(s: StepContext, field_name: str, entries: list[Any], entry: dict[str, Any]) -> None:
    """Append to a decision-record list what governance decided for a loop that ends:
    loops ending in one batch of events note in node order, whatever order their results
    arrived in; what earlier batches noted keeps its place."""
    mark = s.noted.setdefault((s.state.superstep, field_name), len(entries))
    plan = s.env.plan

    def rank(e: dict[str, Any]) -> tuple[int, str]:
        return (plan.index[e["node"]], str(e.get("task_path", "")))

    at = len(entries)
    while at > mark and rank(entries[at - 1]) > rank(entry):
        at -= 1
    entries.insert(at, entry)


def finish_task(s: StepContext, phase: OpenPhase, path: str, result: JSON) -> None:
    """A task finished with ``result``; the last task of its target settles the target."""
    state = s.state
    task = state.send_tasks[path]
    task.state = TaskState.DONE
    phase.send_results[path] = result
    node = task.node
    if state.node_state[node] == NodeState.DISPATCHED and all(
        t.state == TaskState.DONE for t in state.send_tasks.values() if t.node == node
    ):
        move(state, node, Move.DRAINED)
        phase.results.setdefault(node, None)
