"""The deltas of turns this server drives, handed to the event streams that watch their runs.

The server's drivers (and ``POST /runs/{id}/resume``) drive runs in threads of their
own; each event stream (``GET /runs/{id}/events``) runs on the server's event loop. A
``DeltaHub`` is the one place they meet: a driver tells it every delta of a streamed
turn, and it puts a copy on the queue of each stream subscribed to that run, through
the stream's loop (``call_soon_threadsafe``). A driver streams a turn only while some
stream listens to its run (``listening``), so a run nobody watches sends the plain
request. Deltas are observational: a subscriber that falls ``MAX_QUEUED`` deltas behind
misses the rest of them (the journal events are unaffected), and nothing here is
journaled or kept after the turn.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from plait.driver.deltas import TurnDelta

MAX_QUEUED = 10_000
"""Deltas one subscriber may have waiting before later ones are dropped for it."""


@dataclass(eq=False)
class Subscription:
    """One event stream's queue of deltas of ``run_id``."""

    run_id: str
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[TurnDelta] = field(default_factory=asyncio.Queue)

    def offer(self, delta: TurnDelta) -> None:
        if self.queue.qsize() < MAX_QUEUED:
            self.queue.put_nowait(delta)

    def drain(self) -> list[TurnDelta]:
        """Every delta waiting now, without waiting for more."""
        taken = []
        while not self.queue.empty():
            taken.append(self.queue.get_nowait())
        return taken


class DeltaHub:
    """Who listens to which run; a ``DeltaObserver`` for the drivers of this server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: dict[str, list[Subscription]] = {}

    def subscribe(self, run_id: str) -> Subscription:
        """A queue of the run's deltas from now on (call it on the stream's event loop)."""
        sub = Subscription(run_id, asyncio.get_running_loop())
        with self._lock:
            self._subscribers.setdefault(run_id, []).append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            subs = self._subscribers.get(sub.run_id, [])
            if sub in subs:
                subs.remove(sub)
            if not subs:
                self._subscribers.pop(sub.run_id, None)

    def listening(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._subscribers

    def __call__(self, delta: TurnDelta) -> None:
        with self._lock:
            subs = list(self._subscribers.get(delta.run_id, ()))
        for sub in subs:
            try:
                sub.loop.call_soon_threadsafe(sub.offer, delta)
            except RuntimeError:  # that stream's loop has closed: nobody reads it any more
                self.unsubscribe(sub)
