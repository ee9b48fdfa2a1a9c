"""Settling what the world decides while a run is parked: answers, expiries, due timers.

Called by the driver when it (re)starts a run and whenever the run parks: each
pending ask with a journaled answer, each ask past its expiry (Failed/Timeout,
never retried) and each timer whose wake time has passed becomes a
``ResponseSettled`` event, its result journaled first when the driver decides it.
"""

from __future__ import annotations

from collections.abc import Mapping

from plait.core.events import Event, ResponseSettled
from plait.core.keys import JournalKey
from plait.core.outcomes import Completed, EffectOutcome, Failed, outcome_from_json
from plait.core.state import SchedulerState
from plait.driver.durable import DurableJournal
from plait.store.records import ResultRecord


def settlements(
    state: SchedulerState,
    results: Mapping[JournalKey, ResultRecord],
    journal: DurableJournal,
    now_ms: int,
    *,
    only_backoff: bool = False,
) -> list[Event]:
    """The ``ResponseSettled`` events due now, in ask-id order (``only_backoff``: of retry
    waits alone, which a drive settles between waves too)."""
    events: list[Event] = []
    if not state.pending_asks or state.is_terminal():
        return events  # nothing waits on the world (every wave of most runs)
    for ask_id, entry in sorted(state.pending_asks.items()):
        if only_backoff and not entry.backoff:
            continue
        key = entry.key
        outcome: EffectOutcome
        record = results.get(key)
        if record is not None:
            outcome = outcome_from_json(record.outcome)
        elif entry.is_ask and _expired(entry.expires_at, now_ms):
            outcome = Failed("Timeout", f"ask expired at {entry.expires_at} (unix s)")
            journal.result(key, outcome, now_ms)
        elif entry.wake_ms is not None and entry.wake_ms <= now_ms:
            outcome = Completed(None)
            journal.result(key, outcome, now_ms)
        else:
            continue
        events.append(ResponseSettled(ask_id, outcome))
    return events


def _expired(expires_at: int | None, now_ms: int) -> bool:
    return expires_at is not None and now_ms // 1000 > expires_at
