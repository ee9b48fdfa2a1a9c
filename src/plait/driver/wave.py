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
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from plait.core.canonical import JSON
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
from plait.core.outcomes import EffectOutcome, outcome_kind
from plait.core.state import SchedulerState
from plait.core.step import step
from plait.driver.clock import Clock
from plait.workflow.plan_hash import plan_hash

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


@dataclass
class RunResult:
    """Where a drive stopped: finished (with an outcome) or parked (with asks)."""

    run_id: str
    status: str
    outcome: JSON | None
    context: dict[str, Any]
    spent: dict[str, int]
    asks: list[dict[str, Any]] = field(default_factory=list)
    folds: int = 0
    redelivered: int = 0
    plan_hash: str | None = None
    """The plan the run is pinned to, by meaning (``workflow.plan_hash``)."""
    migrated_from: list[str] = field(default_factory=list)
    """The versions (``plan_hash``) it lived on before, oldest first (``plait migrate``)."""
    schedule: dict[str, Any] | None = None
    """``{"name", "slot_ms"}`` for a run a schedule started (``plait schedule``)."""

    def on_version(self, manifest: dict[str, Any]) -> RunResult:
        """This result naming the version ``manifest`` pins and the ones it migrated from
        (and the schedule slot that started it)."""
        self.plan_hash = plan_hash(manifest["workflow"])
        self.migrated_from = list(manifest.get("migrated_from", ()))
        self.schedule = manifest.get("schedule")
        return self

    @staticmethod
    def of(state: SchedulerState, asks: Sequence[dict[str, Any]] = ()) -> RunResult:
        outcome = state.outcome()
        if outcome is not None:
            status = outcome_kind(outcome)
        elif state.is_parked():
            status = "parked"
        else:
            status = "running"
        spent = state.spent.to_json()
        spent["elapsed_ms"] = state.elapsed_ms + spent["wall_ms"]
        return RunResult(
            run_id=state.run_id,
            status=status,
            outcome=outcome,
            context=state.context,
            spent=spent,
            asks=list(asks),
            folds=state.folds,
        )

    def to_json(self) -> dict[str, Any]:
        """The CONTRACT.md shape of ``run``/``resume``/``fork``/``show`` output."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "outcome": contract_outcome(self.outcome),
            "context": self.context,
            "asks": self.asks,
            "spent": self.spent,
            "folds": self.folds,
        } | self._versions()

    def _versions(self) -> dict[str, Any]:
        """``plan_hash`` once known, and ``migrated_from`` for a run that was migrated."""
        out: dict[str, Any] = {} if self.plan_hash is None else {"plan_hash": self.plan_hash}
        out |= {"migrated_from": self.migrated_from} if self.migrated_from else {}
        return out | ({"schedule": self.schedule} if self.schedule is not None else {})


def contract_outcome(outcome: JSON | None) -> dict[str, Any] | None:
    """``"Completed"`` / ``{"Failed": {...}}`` as ``{"kind": "failed", "node": ..., ...}``."""
    if outcome is None:
        return None
    kind = outcome_kind(outcome)
    fields = {} if isinstance(outcome, str) else dict(next(iter(outcome.values())))
    if kind == "canceled" and "detail" not in fields:
        # CONTRACT.md's outcome says what happened in ``detail``; by and reason stay too.
        reason = fields.get("reason")
        fields["detail"] = f"canceled by {fields.get('by')}" + (f": {reason}" if reason else "")
    return {"kind": kind, **fields}


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
        settled: list[EffectOutcome | None] = [known for _, known, _ in wave]
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
