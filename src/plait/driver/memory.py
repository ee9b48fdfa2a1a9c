"""An in-memory journal: runs a workflow in process without persistence.

Useful for tests and quick scripts; ``plait.store`` journals provide the same
records durably. The records kept here (checkpoints, intents, results) are what
the determinism tests compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plait.core.events import EmitEnvelope, Event, WriteCheckpoint, WriteIntent
from plait.core.keys import JournalKey, idempotency_key
from plait.core.outcomes import EffectOutcome
from plait.core.state import SchedulerState


@dataclass
class MemoryJournal:
    intents: list[WriteIntent] = field(default_factory=list)
    results: dict[JournalKey, EffectOutcome] = field(default_factory=dict)
    feeds: list[list[Event]] = field(default_factory=list)
    checkpoints: list[bytes] = field(default_factory=list)
    envelopes: list[EmitEnvelope] = field(default_factory=list)
    commits: int = 0

    def intent(self, command: WriteIntent) -> str:
        self.intents.append(command)
        return idempotency_key(command.key, command.input)

    def journaled_result(self, key: JournalKey) -> EffectOutcome | None:
        return self.results.get(key)

    def result(self, key: JournalKey, outcome: EffectOutcome, clock_ms: int) -> None:
        self.results[key] = outcome

    def feed(self, events: list[Event]) -> None:
        self.feeds.append(list(events))

    def checkpoint(self, command: WriteCheckpoint) -> None:
        self.checkpoints.append(command.canonical())

    def envelope(self, command: EmitEnvelope) -> None:
        self.envelopes.append(command)

    def finish(self, state: SchedulerState) -> None:
        pass

    def commit(self) -> None:
        self.commits += 1
