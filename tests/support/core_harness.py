"""A pure test driver for the core: the wave cadence of §5.2 with scripted effects.

Effects are answered by plain functions of (node id, attempt, input); a
``permute`` hook reorders each wave's results before they are fed, which is
how the permutation-determinism property is tested.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from plait.core.env import Budgets, NodeExecutor, StepEnv
from plait.core.events import (
    CancelSeen,
    ClockReading,
    Command,
    Dispatch,
    EffectResolved,
    Event,
    Finish,
    ResponseSettled,
    Start,
    WriteCheckpoint,
)
from plait.core.outcomes import Completed, EffectOutcome, Failed
from plait.core.pending import PendingAsk
from plait.core.plan import EdgeSpec, NodeSpec, Plan, build_plan
from plait.core.state import SchedulerState
from plait.core.step import step

Effect = Callable[[str, int, Any], EffectOutcome]


def ok(result: Any = None) -> Completed:
    return Completed(result)


def fail(cause: str = "ExecutorError", detail: str = "boom") -> Failed:
    return Failed(cause, detail)


def make_plan(
    nodes: Sequence[str | tuple[str, int]],
    edges: Sequence[tuple[Any, ...]],
    reducers: dict[str, str] | None = None,
) -> Plan:
    """Nodes as ids (or (id, retries)); edges as (src, dst[, when[, max_cycles]])."""
    specs = [NodeSpec(n) if isinstance(n, str) else NodeSpec(n[0], retries=n[1]) for n in nodes]
    edge_specs = [EdgeSpec(*e) for e in edges]
    return build_plan(specs, edge_specs, reducers or {})


def make_env(plan: Plan, budgets: Budgets | None = None) -> StepEnv:
    executors = tuple(NodeExecutor("tool", n.id) for n in plan.nodes)
    return StepEnv(plan=plan, executors=executors, budgets=budgets or Budgets())


@dataclass
class Trace:
    state: SchedulerState
    checkpoints: list[bytes] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)
    outcome: Any = None

    def runs(self, node: str) -> int:
        return Counter(d.key.node for d in self.dispatches)[node]


def drive(
    env: StepEnv,
    effect: Effect,
    input: Any = None,
    *,
    permute: Callable[[list[EffectResolved]], list[EffectResolved]] | None = None,
    cancel_after_wave: int | None = None,
    clock_step: int = 10,
    max_waves: int = 100_000,
) -> Trace:
    state = SchedulerState.new("run-test", env.plan)
    trace = Trace(state)
    clock = 1_000
    events: list[Event] = [ClockReading(clock), Start(input)]
    for wave_no in range(max_waves):
        wave = _recorded(trace, step(env, state, events).commands)
        if trace.outcome is not None or not wave:
            return trace
        clock += clock_step
        resolved = [EffectResolved(d.key, effect(d.key.node, d.key.attempt, d.input)) for d in wave]
        if permute is not None:
            resolved = permute(resolved)
        events = [ClockReading(clock)]
        if cancel_after_wave is not None and wave_no == cancel_after_wave:
            events.append(CancelSeen("alice", "enough"))
        events.extend(resolved)
    raise AssertionError("run did not finish")


def _recorded(trace: Trace, commands: list[Command]) -> list[Dispatch]:
    """Note one step's checkpoints, outcome and dispatches in ``trace``; the dispatches."""
    wave: list[Dispatch] = []
    for command in commands:
        if isinstance(command, Dispatch):
            wave.append(command)
        elif isinstance(command, WriteCheckpoint):
            trace.checkpoints.append(command.data)
        elif isinstance(command, Finish):
            trace.outcome = command.outcome
    trace.dispatches.extend(wave)
    return wave


def drive_waves(
    env: StepEnv,
    effect: Callable[[Dispatch], EffectOutcome],
    input: Any = None,
    *,
    answer: Callable[[PendingAsk], EffectOutcome] | None = None,
    permute: Callable[[list[Event]], list[Event]] | None = None,
    before: dict[int, list[Event]] | None = None,
    clock_step: int = 10,
    max_waves: int = 10_000,
) -> Trace:
    """Like ``drive``, with effects answered from the whole ``Dispatch`` and, while the run
    is parked, every pending ask answered at once by ``answer`` (one batch of
    ``ResponseSettled``, reordered by ``permute`` like a wave's results). ``before[n]``:
    events fed ahead of the n-th batch (a steering message, say)."""
    state = SchedulerState.new("run-test", env.plan)
    trace = Trace(state)
    clock = 1_000
    events: list[Event] = [ClockReading(clock), Start(input)]
    for wave_no in range(max_waves):
        wave = _recorded(trace, step(env, state, events).commands)
        if trace.outcome is not None:
            return trace
        clock += clock_step
        batch: list[Event]
        if wave:
            batch = [EffectResolved(d.key, effect(d)) for d in wave]
        elif answer is not None and state.pending_asks:
            batch = [ResponseSettled(a, answer(e)) for a, e in sorted(state.pending_asks.items())]
        else:
            return trace
        extra = (before or {}).get(wave_no, [])
        events = [ClockReading(clock), *extra, *(permute(batch) if permute is not None else batch)]
    raise AssertionError("run did not finish")
