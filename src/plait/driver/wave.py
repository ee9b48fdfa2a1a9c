"""The wave cadence (docs/architecture.md §5.2), shared by every way of driving a run.

Call ``step``; perform its commands in order (journal intents, collect
dispatches, journal checkpoints, note envelopes); commit the journal once;
only then execute the wave's effects concurrently; wait for *every* one; take
*one* clock reading; journal the results in dispatch order and feed
``[ClockReading, EffectResolved...]`` in dispatch order. Feeding results in
arrival order would make the state depend on thread timing; this cadence is
what makes ``verify`` possible.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Protocol

from plait.core.env import StepEnv
from plait.core.events import (
    ClockReading,
    Dispatch,
    EffectResolved,
    EmitEnvelope,
    Event,
    Finish,
    WriteCheckpoint,
    WriteIntent,
)
from plait.core.keys import JournalKey
from plait.core.outcomes import EffectOutcome
from plait.core.state import SchedulerState
from plait.core.step import step
from plait.driver.clock import Clock
from plait.driver.run_result import RunResult as RunResult

_BESIDE_OTHERS: ContextVar[bool] = ContextVar("plait_beside_others", default=False)
"""True inside an effect that runs beside others: a child run driven by a subgraph effect
of a wave with several live effects. None of that child's effects is ever alone."""


async def _beside_others(run: Awaitable[EffectOutcome | None]) -> EffectOutcome | None:
    _BESIDE_OTHERS.set(True)  # gather runs each effect in a task of its own context
    return await run


class Executor(Protocol):
    """Runs one dispatched effect. ``alone``: it is the only live effect on the event loop
    (the wave's only one, in a run no sibling effect runs beside), so a blocking tool may
    run inline instead of on the thread pool (nothing waits beside it)."""

    def __call__(
        self, dispatch: Dispatch, idempotency_key: str, alone: bool
    ) -> Awaitable[EffectOutcome | None]: ...


class Journal(Protocol):
    """Where a driven run's records go; ``commit`` makes everything since the last one durable."""

    def feed(self, events: list[Event]) -> None: ...
    def intent(self, command: WriteIntent) -> str:
        """Journal (or adopt) an intent; returns its idempotency key."""
        ...

    def journaled_result(self, key: JournalKey) -> EffectOutcome | None: ...
    def result(self, key: JournalKey, outcome: EffectOutcome, clock_ms: int) -> None: ...
    def checkpoint(self, command: WriteCheckpoint) -> None: ...
    def envelope(self, command: EmitEnvelope) -> None: ...
    def finish(self, state: SchedulerState) -> None: ...
    def commit(self) -> None: ...


Observer = Callable[[SchedulerState, int], None]
"""Called after every step with the state and the number of effects about to run."""

WaveEffect = tuple[Dispatch, str, EffectOutcome | None]
"""One effect of a wave: its dispatch, its idempotency key, and the result the journal
already holds (the effect is replayed, not executed) or None."""

Watch = Callable[[SchedulerState, list[Event], list[WaveEffect]], None]
"""Called after every step's commit, before any effect of the wave runs, with the events
that step was fed and the wave's effects (a tracer: ``plait.driver.telemetry``)."""


async def drive(
    env: StepEnv,
    state: SchedulerState,
    events: list[Event],
    journal: Journal,
    execute: Executor,
    clock: Clock,
    observer: Observer | None = None,
    poll: Callable[[], list[Event]] | None = None,
    watch: Watch | None = None,
) -> RunResult:
    """Drive a run until it finishes or parks; every intent is committed before its dispatch.

    ``poll`` is asked between waves for what arrived from outside (a cancel, a steering
    message); what it returns is fed with the wave's results and journaled with them.
    ``observer`` and ``watch`` only look: what they do never reaches the journal.
    """
    asks: list[dict[str, Any]] = []
    while True:
        journal.feed(events)
        outcome = step(env, state, events)
        wave: list[tuple[JournalKey, EffectOutcome | None, Dispatch]] = []
        idempotency: dict[JournalKey, str] = {}
        finished = False
        for command in outcome.commands:
            if isinstance(command, WriteIntent):
                idempotency[command.key] = journal.intent(command)
            elif isinstance(command, Dispatch):
                wave.append((command.key, journal.journaled_result(command.key), command))
            elif isinstance(command, WriteCheckpoint):
                journal.checkpoint(command)
            elif isinstance(command, EmitEnvelope):
                journal.envelope(command)
                asks.extend(command.asks)
            elif isinstance(command, Finish):
                finished = True
        if finished:
            journal.finish(state)
        journal.commit()
        if observer is not None:
            observer(state, len(wave))
        if watch is not None:
            watch(state, events, [(d, idempotency[d.key], known) for _, known, d in wave])
        if finished or not wave:
            return RunResult.of(state, asks)
        settled: list[EffectOutcome | None]
        if len(wave) == 1:  # most waves: their one effect, without two lists to find it
            _, known, d = wave[0]
            alone = not _BESIDE_OTHERS.get()
            settled = [known if known is not None else await execute(d, idempotency[d.key], alone)]
            live = []
        else:
            settled = [known for _, known, _ in wave]
            live = [i for i, (_, known, _) in enumerate(wave) if known is None]
        if len(live) == 1:
            d = wave[live[0]][2]
            alone = not _BESIDE_OTHERS.get()
            settled[live[0]] = await execute(d, idempotency[d.key], alone)
        elif live:
            runs = [
                _beside_others(execute(wave[i][2], idempotency[wave[i][2].key], False))
                for i in live
            ]
            for i, result in zip(live, await asyncio.gather(*runs), strict=True):
                settled[i] = result
        now = clock()
        events = [ClockReading(now)]
        if poll is not None:
            events.extend(poll())
        for (key, known, _), outcome_or_none in zip(wave, settled, strict=True):
            if outcome_or_none is None:
                continue  # settles later (a child run that parked): the run parks on it
            if known is None:
                journal.result(key, outcome_or_none, now)
            events.append(EffectResolved(key, outcome_or_none))
