"""Driving one run under a lease: from its start, a checkpoint, or its input again.

``drive_run`` takes the lease (or uses a worker's), builds the core's environment and
the executors, settles what the world decided while the run waited (answers, expiries,
due timers, finished children), drives waves until the run finishes or parks, and
records when a worker should wake it. Where the drive starts is an ``Origin``: a new
run, a restart from the input (no checkpoint yet), or a checkpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from plait.core.errors import PlaitError
from plait.core.events import CancelSeen, ClockReading, Event, InputReceived
from plait.core.keys import JournalKey
from plait.core.merkle import ChunkMemo
from plait.core.state import SchedulerState
from plait.driver.admission import budgets_of, check_pinned_model
from plait.driver.answers import pending_asks
from plait.driver.children import Runs, cancel_children, child_runner, settle_children
from plait.driver.crash import CrashPoint
from plait.driver.defaults import check_epoch, lease_ttl, retry_sleep_limit
from plait.driver.dispatcher import Dispatcher, dispatcher_for
from plait.driver.durable import DurableJournal
from plait.driver.environment import make_env
from plait.driver.host import Host
from plait.driver.owner import owner_alive, this_process
from plait.driver.settle import settlements
from plait.driver.telemetry import run_trace
from plait.driver.wake import backoff_sleep_ms, set_wake, wake_time
from plait.driver.wave import RunResult, drive
from plait.store.base import POLLED_KINDS
from plait.store.records import Journal, StatusWrite

if TYPE_CHECKING:
    from plait.tools.mcp import McpPool
    from plait.workflow.run_definition import RunDefinition


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run driven from its ``Start`` event for the first time."""


@dataclass(frozen=True, slots=True)
class Restart:
    """A run that never checkpointed, driven again from its input (§5.4)."""


@dataclass(frozen=True, slots=True)
class FromCheckpoint:
    """A run driven on from the checkpoint at journal ``seq``, whose state is ``state``."""

    seq: int
    state: SchedulerState


Origin = NewRun | Restart | FromCheckpoint
"""Where a drive starts; a resumed drive's first feed names its checkpoint (§5.4)."""


def first_feed(origin: Origin) -> dict[str, Any]:
    """What the drive's first feed record says of where it started."""
    if isinstance(origin, FromCheckpoint):
        return {"resume_from": origin.seq}
    if isinstance(origin, Restart):
        return {"resume_from": None}
    return {}


@dataclass(frozen=True, slots=True)
class Drive:
    """One drive of one run: what to feed the core first and where it starts.

    ``token``: a lease already held (a worker's claim), else one is acquired; either is
    released at the end. ``existing``: the run's journal read under that held lease
    (else it is read once the lease is taken)."""

    run_id: str
    definition: RunDefinition
    events: list[Event]
    manifest: dict[str, Any]
    origin: Origin
    token: int | None = None
    existing: Journal | None = None
    mcp: McpPool | None = None
    """MCP servers already running for this run (started to list the catalogue)."""


async def drive_run(host: Host, runs: Runs, request: Drive) -> RunResult:
    """Drive ``request`` under a lease until the run finishes or parks."""
    run_id, definition, manifest, origin = (
        request.run_id,
        request.definition,
        request.manifest,
        request.origin,
    )
    store = host.store
    resumed = not isinstance(origin, NewRun)
    claimed = request.token is not None  # a worker's claim marked the run running
    held = request.token
    existing = request.existing
    tools: Dispatcher | None = None
    trace = run_trace(host.telemetry, run_id, definition.name, resumed=resumed)
    try:
        epoch = check_epoch(run_id, manifest)
        if resumed:
            check_pinned_model(run_id, manifest, host.model)
        ttl = lease_ttl()
        now = host.clock()
        if held is None:
            host.release_unreleased(run_id)  # a drive of ours that ended with the store away
            held = store.acquire_lease(run_id, this_process(), now, ttl, owner_alive)
            if resumed:
                set_wake(store, run_id, None, replace=True)  # this drive settles what is due
        if resumed and existing is None:
            existing = store.load_journal(run_id)  # read under the lease
        memo = ChunkMemo()  # what this drive's checkpoints already cut (epoch 3)
        env = replace(make_env(definition, budgets_of(manifest, existing), epoch=epoch),
                      checkpoint_memo=memo)  # fmt: skip
        if isinstance(origin, FromCheckpoint):
            state = origin.state
            if state.run_id != run_id:
                raise PlaitError(
                    "E010", f"checkpoint belongs to run '{state.run_id}', not '{run_id}'"
                )
        else:
            state = SchedulerState.new(run_id, env.plan)
        if (
            resumed
            and (not claimed or state.is_terminal())
            and store.get_run(run_id).status != "running"
        ):
            # queued, parked or budget-exhausted until now: a worker that dies while
            # driving it leaves a running run with a lapsing lease, which another worker
            # takes over.
            store.commit(run_id, held, [StatusWrite("running", None, now)])
        journal = DurableJournal(
            store,
            run_id,
            held,
            now,
            existing=existing,
            on_dangling=definition.on_dangling,
            crash=CrashPoint.from_env(),
            first_feed=first_feed(origin),
            lease_ttl_ms=ttl,
            max_checkpoint_bytes=host.max_checkpoint_bytes,
            checkpoint_memo=memo,
        )
        llm_keys = forked_llm_keys(host, manifest)
        llm_keys += [i.key for i in existing.intents if i.key.kind == "llm"] if existing else []
        children = child_runner(host, runs, run_id, definition)
        tools = dispatcher_for(definition, llm_keys, children, host.model, host.deltas, request.mcp)
        execute = trace.driving(state, tools, journal.redelivered)
        results = dict(existing.results) if existing else {}
        settled_children = await settle_children(state, env, children, journal, now, results)
        events = [*request.events, *settled_children, *settlements(state, results, journal, now)]
        polled = poller(host, run_id, existing)

        def poll() -> list[Event]:
            if not state.pending_asks:
                return polled()  # nothing waits (every wave of most runs): no clock reading
            # Retry waits that came due while other effects ran are settled with the
            # wave's results, not only once the run parks (§3.5b).
            now = host.clock()
            due = settlements(state, results, journal, now, only_backoff=True)
            return [*polled(), *([ClockReading(now), *due] if due else [])]

        while True:
            result = await drive(
                env, state, events, journal, execute, host.clock, host.observer, poll, trace.watch
            )
            if result.status != "parked":
                break
            now = host.clock()
            due = settlements(state, results, journal, now)
            sleep_ms = None if due else backoff_sleep_ms(state, now, retry_sleep_limit())
            if sleep_ms is not None:
                # A short retry wait (§3.5b) is slept here. The park's checkpoint is
                # committed: a crash meanwhile leaves a run whose lease lapses, which a
                # worker takes over.
                await asyncio.sleep(sleep_ms / 1000)
                now = host.clock()
                due = settlements(state, results, journal, now)
            if not due:
                break  # waiting for a human, or for a timer that is not due yet
            events = [ClockReading(now), *due]
        if result.status == "parked":
            # its own and its children's (§3.9); its own from the state the drive parked
            # in, which its last checkpoint holds (the asks it answered meanwhile aside,
            # which ``pending_asks`` leaves out as journaled anyway)
            result.asks = pending_asks(store, run_id, state, now_ms=host.clock())
        if journal.released:
            held = None  # a finished run's last wave gave it up (``DurableJournal.finish``)
        elif not journal.finished:  # (a finished run's status went with its outcome)
            journal.status(state)
        wake = wake_time(store, state) if result.status == "parked" else None
        if held is not None and result.status != "failed" and wake is None:
            # Nothing left to do under the lease: the last commit gives it up (one
            # transaction, not two). A failed run cancels its children first, and a run
            # with a wake time records it, both still holding the lease.
            journal.commit(release=True)
            held = None
        journal.commit()
        if result.status == "failed":
            await cancel_children(host, runs, run_id)
        if wake is not None:  # when a worker should drive it on (§8 timers)
            set_wake(store, run_id, wake)
        trace.end(result)
    except BaseException as exc:
        trace.end(None, exc)
        raise
    finally:
        try:
            if tools is not None:
                await tools.aclose()  # stops the drive's MCP servers
            elif request.mcp is not None:
                await request.mcp.aclose()
        finally:
            if held is not None:
                host.release_lease(run_id, held)
    result.redelivered = len(journal.redelivered)
    result.on_version(manifest)
    return result


def poller(host: Host, run_id: str, existing: Journal | None) -> Callable[[], list[Event]]:
    """Between waves: cancels and steering messages journaled since the drive began."""
    items = existing.items() if existing else []
    after = max((item.seq for item in items), default=0)
    records_after = host.store.records_after

    def poll() -> list[Event]:
        nonlocal after
        found = records_after(run_id, after, POLLED_KINDS)
        if not found:
            return []  # every wave of most runs
        events: list[Event] = []
        for record in found:
            after = record.seq
            if record.kind == "cancel":
                events.append(CancelSeen(record.body["by"], record.body["reason"]))
            else:
                events.append(InputReceived(record.body["message"]))
        return events

    return poll


def forked_llm_keys(host: Host, manifest: dict[str, Any]) -> list[JournalKey]:
    """The LLM effects a fork's history holds before its fork point, oldest first: the
    base run's up to the checkpoint forked from (and its own base's). A scripted
    model's n-th response goes on from there, as the run's own turns would."""
    fork_of = manifest.get("fork_of")
    if not isinstance(fork_of, dict) or fork_of.get("seq") is None:
        return []
    base = str(fork_of["run_id"])
    if not host.exists(base):
        return []  # collected since (plait gc): the fork's own turns are all it has
    inherited = forked_llm_keys(host, host.manifest(base))
    journal = host.store.load_journal(base)
    seq = int(fork_of["seq"])
    return inherited + [i.key for i in journal.intents if i.key.kind == "llm" and i.seq < seq]
