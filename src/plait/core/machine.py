"""What one ``step`` call works with, and the few primitives every part of it shares.

The graph walk (``step``), the LLM loop (``llm_loop``) and later features emit
effects and fail nodes the same way; they do it through these functions so
there is one way to journal an intent and one way to fail fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plait.core.env import Reducer, StepEnv
from plait.core.events import Command, Dispatch, WriteIntent
from plait.core.keys import JournalKey
from plait.core.state import DONE_FAILED, OpenPhase, SchedulerState


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
    state.node_state[node] = DONE_FAILED
    if state.failed is None or node < state.failed[0]:
        state.failed = (node, detail)
