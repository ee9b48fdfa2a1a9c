"""Resuming a run: from its last checkpoint, with what was journaled but not yet fed.

One read of the journal gives the last checkpoint and the cancels, steering messages
and budget raises journaled since the last feed (counted, not dated: a cancel journaled
while another process drove the run is still unfed when that drive's later feeds were
written). A finished run reports its outcome again and drives nothing (§5.4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plait.core.events import (
    BudgetRaised,
    CancelSeen,
    ClockReading,
    Event,
    InputReceived,
    Start,
)
from plait.core.state import SchedulerState
from plait.driver.admission import check_model, raised_ceilings
from plait.driver.checkpoints import read_state
from plait.driver.children import Runs, cancel_children
from plait.driver.driving import Drive, FromCheckpoint, Origin, Restart, drive_run
from plait.driver.feeds import FEED
from plait.driver.host import Host
from plait.driver.wave import RunResult
from plait.store.records import Journal, StatusWrite

if TYPE_CHECKING:
    from plait.workflow.run_definition import RunDefinition

_UNFED = {"cancel": "cancel", "inbox": "input", "budget_raise": "budget_raised"}
"""Record kinds fed to the core on a later drive -> their name in a feed's events."""


async def resume_run(
    host: Host,
    runs: Runs,
    run_id: str,
    pin: Callable[[dict[str, Any]], RunDefinition],
    manifest: dict[str, Any] | None,
    token: int | None,
    journal: Journal | None = None,
) -> RunResult:
    """Continue ``run_id`` from its last checkpoint (see ``Runtime.resume``) with the
    definition ``pin`` gives for its manifest (read here unless given, as its journal). A
    lease already held (``token``) goes to the drive, or is given up here when nothing is
    driven (a finished run, an error before driving)."""
    driving = False
    try:
        manifest = manifest if manifest is not None else host.manifest(run_id)
        definition = pin(manifest)
        journal = journal if journal is not None else host.store.load_journal(run_id)
        meta = journal.checkpoints[-1] if journal.checkpoints else None
        now = host.clock()
        origin: Origin
        if meta is None:  # never checkpointed: start again, with all that was journaled
            events: list[Event] = [
                ClockReading(now),
                Start(manifest["input"]),
                *unfed_events(journal, restart=True),
            ]
            origin = Restart()
        else:
            state = read_state(host.store, run_id, meta.seq)
            events = [ClockReading(now), *unfed_events(journal)]
            if state.is_terminal() and not any(isinstance(e, BudgetRaised) for e in events):
                if state.failed is not None:  # a crash may have come before (§3.5)
                    await cancel_children(host, runs, run_id)
                if token is not None:
                    give_status_back(host, run_id, state, token)
                finished = RunResult.of(state)
                return finished.on_version(manifest)
            origin = FromCheckpoint(meta.seq, state)
        check_model(definition, host.model)  # a worker's too: refused, it fails nothing
        existing = journal if token is not None else None
        driving = True
        return await drive_run(
            host, runs, Drive(run_id, definition, events, manifest, origin, token, existing)
        )
    finally:
        if token is not None and not driving:
            host.release_lease(run_id, token)


def give_status_back(host: Host, run_id: str, state: SchedulerState, token: int) -> None:
    """A claim marks the run running; when there is nothing to drive (a finished run
    woken by a cancel or a message, a budget-exhausted one with nothing raised) it gets
    back the status its state holds, with its last update as it was (gc's age)."""
    info = host.store.get_run(run_id)
    if info.status == "running":
        result = RunResult.of(state)
        host.store.commit(
            run_id, token, [StatusWrite(result.status, result.outcome, info.updated_ms)]
        )


def unfed_events(journal: Journal, *, restart: bool = False) -> list[Event]:
    """Cancels, steering messages and budget raises journaled but not yet fed to the core.

    ``restart``: the run starts again from its input (no checkpoint), so everything
    journaled is unfed.
    """
    fed = dict.fromkeys(_UNFED.values(), 0)
    for record in [] if restart else journal.records:
        if record.kind == FEED:
            for item in record.body["events"]:
                for name in fed:
                    if name in item:
                        fed[name] += 1
    seen = dict.fromkeys(_UNFED.values(), 0)
    events: list[Event] = []
    for record in journal.records:
        if record.kind not in _UNFED:
            continue
        name = _UNFED[record.kind]
        seen[name] += 1
        if seen[name] <= fed[name]:
            continue
        if name == "cancel":
            events.append(CancelSeen(record.body["by"], record.body["reason"]))
        elif name == "input":
            events.append(InputReceived(record.body["message"]))
        else:
            events.append(BudgetRaised(raised_ceilings(record.body)))
    return events
