"""A journal backed by a store: group commit, intent adoption, redelivery notes, leases.

The records of one wave (its feed, the results it produced, a checkpoint if a
superstep closed, the next wave's intents) are buffered and committed in one
transaction, fenced by the run's lease token, before any effect of the next
wave is dispatched (docs/architecture.md §5.2, §5.7).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from plait.core.errors import PlaitError
from plait.core.events import ClockReading, EmitEnvelope, Event, WriteCheckpoint, WriteIntent
from plait.core.keys import JournalKey, call_id, idempotency_key
from plait.core.merkle import ChunkMemo
from plait.core.outcomes import EffectOutcome, journal_bytes, outcome_from_json
from plait.core.state import SchedulerState
from plait.driver.crash import CrashPoint
from plait.driver.defaults import DEFAULT_MAX_CHECKPOINT_BYTES, MAX_CHECKPOINT_ENV
from plait.driver.feeds import FEED, encode_events, feed_text, outcome_text, wave_feed
from plait.driver.wave import RunResult
from plait.store.base import Store
from plait.store.chunks import SMALL_LIMIT, WHOLE_PREFIX, Cut, HashMemo, encode_text
from plait.store.records import (
    CheckpointWrite,
    IntentWrite,
    Journal,
    RecordWrite,
    ResultWrite,
    StatusWrite,
    Write,
)

_new_tuple = tuple.__new__

_CUT_LIMIT = 1 << 20
"""Node hashes a journal remembers as stored before it forgets them all."""


def checkpoint_too_large(
    run_id: str, superstep: int, size: int, limit: int, then: str
) -> PlaitError:
    """PLAIT-E015: a checkpoint over the limit is refused before memory or the database
    gives out (a 300 MB tool result, a context that grows every step). ``then`` says what
    was (not) written and how the run goes on."""
    return PlaitError(
        "E015",
        f"run '{run_id}': the checkpoint of superstep {superstep} is {size} bytes of canonical"
        f" JSON, over the limit of {limit} bytes ({MAX_CHECKPOINT_ENV}, default"
        f" {DEFAULT_MAX_CHECKPOINT_BYTES}); {then}. Keep large payloads out of the context"
        f" (store them elsewhere and keep a reference), or raise {MAX_CHECKPOINT_ENV}",
    )


class DurableJournal:
    """The wave driver's journal for one leased run."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        token: int,
        clock_ms: int,
        *,
        existing: Journal | None = None,
        on_dangling: str = "redeliver",
        crash: CrashPoint | None = None,
        first_feed: dict[str, Any] | None = None,
        lease_ttl_ms: int = 30_000,
        max_checkpoint_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES,
        checkpoint_memo: ChunkMemo | None = None,
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._token = token
        self._clock_ms = clock_ms
        intents = existing.intents if existing else []
        self._intents = {i.key for i in intents}
        self._idempotency = {i.key: i.idempotency_key for i in intents}
        self._memo = HashMemo()  # transcript entries are cut once, not at every turn
        self._cut: set[str] = set()  # nodes of committed intent inputs: never cut again
        self._cutting: list[str] = []
        self._results = dict(existing.results) if existing else {}
        self._on_dangling = on_dangling
        self._crash = crash
        self._pending: list[Write] = []
        self._new_intents = 0
        self._first_feed = dict(first_feed or {})
        """What the drive's first feed record says of where it started (``driving.first_feed``)."""
        self.redelivered: list[JournalKey] = []
        self._ttl = lease_ttl_ms
        self._renewed_at = clock_ms
        self._max_checkpoint = max_checkpoint_bytes
        self._checkpoint_memo = checkpoint_memo
        self._finishing = False  # the next commit is the finished run's last: it releases
        self.finished = False
        """The run finished: its final status is written (``finish``) with its outcome."""
        self.released = False
        """The lease was given up in a commit (the drive's last)."""
        """The memo the core cuts this drive's epoch-3 checkpoints with (``StepEnv``): it
        holds what earlier cuts handed out, so it is forgotten when a wave may not have
        reached the store (dropped, or its commit failed)."""

    def feed(self, events: list[Event]) -> None:
        """Journal the batch of events the next step is fed (with the wave's other rows)."""
        wave = None if self._first_feed else wave_feed(events)
        if wave is not None:  # a wave's results (every feed but a drive's first, mostly)
            unix_ms = events[0].unix_ms  # type: ignore[union-attr]
            if unix_ms > self._clock_ms:
                self._clock_ms = unix_ms
            self._pending.append(RecordWrite(FEED, *wave))
            return
        encoded = encode_events(events)
        body: dict[str, Any] = {"events": encoded}
        text = None if self._first_feed else feed_text(events, encoded)
        body.update(self._first_feed)
        self._first_feed = {}
        for event in events:
            if type(event) is ClockReading:
                self._clock_ms = max(self._clock_ms, event.unix_ms)
        self._pending.append(RecordWrite(FEED, body, text))

    def intent(self, command: WriteIntent) -> str:
        key = command.key
        if key in self._intents:
            idem = self._idempotency[key]  # what was journaled, as the executor first saw it
            if key not in self._results:
                if self._on_dangling == "fail":
                    raise PlaitError(
                        "E008",
                        f"run '{self._run_id}': effect {call_id(key)[:16]} of node '{key.node}'"
                        f" (attempt {key.attempt}, seq {key.effect_seq}) was dispatched but has"
                        " no journaled result, and the run asked for on_dangling: fail",
                    )
                self.redelivered.append(key)
                self._pending.append(
                    RecordWrite("redelivery", {"key": key.to_json(), "idempotency_key": idem})
                )
            return idem
        cut = self._cut_now(command.input)
        idem = idempotency_key(key, command.input, identity=cut.identity())
        self._intents.add(key)
        self._idempotency[key] = idem
        self._new_intents += 1
        write = IntentWrite(  # positional: a call with keywords costs more
            key, command.executor, command.input, command.superstep, command.clock_ms, idem, cut
        )
        self._pending.append(write)
        return idem

    def _cut_now(self, value: Any, text: str | None = None) -> Cut:
        """Encode ``value`` for the store now: it may share objects the next step changes.
        ``text``, if the caller has it, is ``value``'s canonical text."""
        if text is not None and len(text) <= SMALL_LIMIT and type(value) is dict:
            # kept whole, as ``encode_text`` keeps it (a result: nearly every one)
            return _new_tuple(Cut, (WHOLE_PREFIX + text + "}", {}))
        root, nodes = encode_text(value, known=self._cut, memo=self._memo, text=text)
        if nodes:
            self._cutting.extend(nodes)
        return _new_tuple(Cut, (root, nodes))  # Cut(root, nodes) without its Python __new__

    def journaled_result(self, key: JournalKey) -> EffectOutcome | None:
        record = self._results.get(key)
        return None if record is None else outcome_from_json(record.outcome)

    def result(self, key: JournalKey, outcome: EffectOutcome, clock_ms: int) -> None:
        if self._crash is not None:
            self._crash.passed("result")
        value = outcome.to_json()
        cut = self._cut_now(value, outcome_text(outcome))
        self._pending.append(ResultWrite(key, value, clock_ms, journal_bytes(outcome), cut))

    def checkpoint(self, command: WriteCheckpoint) -> None:
        if command.size > self._max_checkpoint:  # the wave is dropped, not committed
            self._pending, self._cutting = [], []
            self._forget_cuts()
            raise checkpoint_too_large(
                self._run_id,
                command.superstep,
                command.size,
                self._max_checkpoint,
                "nothing of its wave was journaled (not its effects' results either):"
                " the run resumes from its last checkpoint",
            )
        self._pending.append(
            CheckpointWrite(command.superstep, command.data, command.value, command.cut)
        )

    def _forget_cuts(self) -> None:
        if self._checkpoint_memo is not None:
            self._checkpoint_memo.clear()

    def envelope(self, command: EmitEnvelope) -> None:
        # Announcing asks is how a run parks: the checkpoint it parks with (the step
        # emits it just before this) is kept at rest, deflated (``store/packed.py``).
        self._pending = [
            replace(w, at_rest=True) if type(w) is CheckpointWrite else w for w in self._pending
        ]
        self._pending.append(RecordWrite("envelope", {"asks": list(command.asks)}))

    def finish(self, state: SchedulerState) -> None:
        """The run's outcome, and with it its final status: the drive's last commit (the
        wave's) writes both, and gives the lease up unless the run failed (its children
        are canceled first, under the lease): one transaction, not two (§5.7)."""
        result = RunResult.of(state)
        self._pending.append(
            RecordWrite("outcome", {"outcome": result.outcome, "spent": result.spent})
        )
        self._pending.append(StatusWrite(result.status, result.outcome, self._clock_ms))
        self._finishing = result.status != "failed"
        self.finished = True

    def status(self, state: SchedulerState) -> None:
        """Record where the run now stands (running, parked or its final status)."""
        result = RunResult.of(state)
        self._pending.append(StatusWrite(result.status, result.outcome, self._clock_ms))

    def commit(self, *, release: bool = False) -> None:
        """The pending writes in one transaction; with ``release`` the drive's last one,
        which gives the lease up in the same transaction."""
        if not self._pending:
            if release:
                self._store.release_lease(self._run_id, self._token)
            return
        release = release or self._finishing
        writes, self._pending = self._pending, []
        cutting, self._cutting = self._cutting, []
        try:
            self._store.commit(self._run_id, self._token, writes, release=release)
        except BaseException:
            self._forget_cuts()  # its checkpoint's nodes may not be stored
            raise
        if len(self._cut) + len(cutting) > _CUT_LIMIT:
            self._cut.clear()  # forgetting only costs cutting those nodes again
        self._cut.update(cutting)
        if not release and self._clock_ms - self._renewed_at >= self._ttl // 3:
            # A long run keeps its lease; a driver that lost it fails here or at its next commit.
            self._store.renew_lease(self._run_id, self._token, self._clock_ms, self._ttl)
            self._renewed_at = self._clock_ms
        if release:
            self.released, self._finishing = True, False
        if self._crash is not None and self._new_intents:
            self._crash.passed("intent", self._new_intents)
        self._new_intents = 0
