"""``GET /runs/{id}/events``: a run's journal as server-sent events, as it grows.

One event per journal item, in ``seq`` order: ``intent``, ``result``, ``checkpoint``
(its metadata, not its bytes) and ``record`` (clock readings, answers, cancels, ...),
each with ``id: <seq>`` so a client resumes with ``?after=SEQ`` or ``Last-Event-ID``.
The stream ends with an ``end`` event once the run is parked or finished and every
item journaled up to then was sent; a client reconnects to follow it further. When the
server stops, the stream of a run still moving closes without ``end`` (a server waits
for its responses to finish before it exits, and that could take forever).

Between them come ``delta`` events (no ``id``: they are not journal items and are not
sent again to a client that reconnects): the pieces of the model turn in flight, as the
provider streams them, for turns this server drives (``server.deltas``). A ``delta``
is ``{"run_id", "node", "call_id", "turn", "kind": "text|tool_call|thinking", "text"}``
(``index`` and ``name`` for a tool call's argument pieces); the turn's ``result`` event
follows with the completed answer, the only thing journaled.

Events are observational only (docs/architecture.md §12): the stream reads the store and
never writes it, so a slow or vanished subscriber cannot change a run. The store is
polled between batches (``ServerSettings.poll_s``), each read in a worker thread so
the event loop never waits on the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse

from plait.core.canonical import dumps
from plait.core.errors import PlaitError
from plait.driver.effect_passes import Pass, effect_passes
from plait.server.bodies import ApiRoute
from plait.server.deltas import DeltaHub, Subscription
from plait.server.settings import ServerSettings, Settings
from plait.store import open_store
from plait.store.base import Store
from plait.store.records import CheckpointMeta, IntentRecord, JournalItem, ResultRecord

router = APIRouter(route_class=ApiRoute)

SETTLED = frozenset({"parked", "completed", "failed", "stalled", "canceled", "budget_exhausted"})
"""Statuses a run stays in until someone acts: the stream ends there."""


def item_json(item: JournalItem, passes: dict[int, Pass] | None = None) -> dict[str, Any]:
    """A journal item as an event's data; ``type`` says which kind of item it is. An
    intent that ``passes`` places (``driver.effect_passes``) says its loop pass and its
    try within it (``generation``, ``pass_attempt``)."""
    if isinstance(item, IntentRecord):
        placed = None if passes is None else passes.get(item.seq)
        where = {} if placed is None else {
            "generation": placed.generation, "pass_attempt": placed.attempt
        }  # fmt: skip
        return where | {
            "seq": item.seq,
            "type": "intent",
            "key": item.key.to_json(),
            "executor": item.executor,
            "superstep": item.superstep,
            "clock_ms": item.clock_ms,
            "idempotency_key": item.idempotency_key,
            "input": item.input,
        }
    if isinstance(item, ResultRecord):
        return {
            "seq": item.seq,
            "type": "result",
            "key": item.key.to_json(),
            "clock_ms": item.clock_ms,
            "journal_bytes": item.journal_bytes,
            "outcome": item.outcome,
        }
    if isinstance(item, CheckpointMeta):
        return {
            "seq": item.seq,
            "type": "checkpoint",
            "superstep": item.superstep,
            "sha256": item.sha256,
            "size": item.size,
        }
    return {"seq": item.seq, "type": "record", "kind": item.kind, "body": item.body}


def frame(event: str, data: dict[str, Any], seq: int | None = None) -> str:
    """One server-sent event; canonical JSON holds no raw newline, so data is one line."""
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {event}\ndata: {dumps(data)}\n\n"


def batch(store: Store, run_id: str, after: int) -> tuple[str, list[JournalItem], dict[int, Pass]]:
    """The run's status, then every item after ``after``, and the loop pass of each of
    its effects that a checkpoint places.

    The status is read first: when it says parked or finished, every item written
    before it got there is in the items read after it.
    """
    status = store.get_run(run_id).status
    items = store.load_journal(run_id, after_seq=after).items()  # what is new only
    return status, items, passes_of(store, run_id, items)


def passes_of(store: Store, run_id: str, items: list[JournalItem]) -> dict[int, Pass]:
    """``effect_passes`` for ``items``, with the nodes of the plan the run lives on."""
    if not any(isinstance(item, IntentRecord) for item in items):
        return {}
    nodes = [str(node["id"]) for node in store.manifests(run_id)[-1]["workflow"]["nodes"]]
    return effect_passes(store, run_id, nodes, items)


async def journal_events(
    settings: ServerSettings,
    store: Store,
    run_id: str,
    after: int,
    hub: DeltaHub | None = None,
) -> AsyncIterator[str]:
    """Frames for every item after ``after``, polling until the run settles, with the
    deltas ``hub`` hands over in between; closes ``store``."""
    sub = hub.subscribe(run_id) if hub is not None else None
    try:
        idle = 0.0
        while True:
            status, items, passes = await asyncio.to_thread(batch, store, run_id, after)
            # Drained after the read: a turn's deltas were offered before its result was
            # committed, and the loop runs those offers before it resumes this read.
            for delta in sub.drain() if sub is not None else ():
                yield frame("delta", delta.to_json())
            for item in items:
                data = item_json(item, passes)
                yield frame(data["type"], data, item.seq)
                after = item.seq
            if status in SETTLED:
                yield frame("end", {"run_id": run_id, "status": status, "after": after})
                return
            if settings.stopping():
                return  # no `end`: the client reconnects with Last-Event-ID and goes on
            if items:
                idle = 0.0
                continue
            if idle >= settings.heartbeat_s:
                idle = 0.0
                yield ": still here\n\n"  # a comment: keeps proxies from closing an idle stream
            async for delta_frame in _deltas_until_poll(sub, settings.poll_s):
                yield delta_frame
            idle += settings.poll_s
    finally:
        if hub is not None and sub is not None:
            hub.unsubscribe(sub)
        store.close()


async def _deltas_until_poll(sub: Subscription | None, poll_s: float) -> AsyncIterator[str]:
    """Wait ``poll_s`` for the next store read, sending each delta the moment it comes."""
    if sub is None:
        await asyncio.sleep(poll_s)
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + poll_s
    while (left := deadline - loop.time()) > 0:
        try:
            delta = await asyncio.wait_for(sub.queue.get(), left)
        except TimeoutError:
            return
        yield frame("delta", delta.to_json())
        for more in sub.drain():
            yield frame("delta", more.to_json())


MAX_SEQ = 2**63 - 1
"""The largest seq a store can hold (a 64-bit integer): past it there is nothing to send."""


def start_seq(after: int | None, last_event_id: str | None) -> int:
    """Where the stream starts: ``?after=``, else ``Last-Event-ID``, else the beginning.

    Seqs start at 1 and fit 64 bits: a seq past any a store can hold means "after
    everything", one below 1 the beginning (a store would refuse to compare with either).
    """
    if after is not None:
        return max(0, min(after, MAX_SEQ))
    if last_event_id is None or not last_event_id.strip():
        return 0
    try:
        return max(0, min(int(last_event_id.strip()), MAX_SEQ))
    except ValueError:
        raise PlaitError(
            "E019", f"Last-Event-ID {last_event_id!r}: expected a journal seq (an integer)"
        ) from None


@router.get("/runs/{run_id}/events")
async def events(
    settings: Settings,
    run_id: str,
    after: int | None = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Any:
    """The run's journal from ``after`` on, as ``text/event-stream``."""
    first = start_seq(after, last_event_id)
    store = await asyncio.to_thread(open_store, settings.db)
    try:
        await asyncio.to_thread(store.get_run, run_id)  # PLAIT-E017 before the stream opens
    except BaseException:
        store.close()
        raise
    return StreamingResponse(
        journal_events(settings, store, run_id, first, settings.deltas),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
