"""A schedule whose slots come while the store cannot be written catches up per policy.

PostgreSQL goes away for real: the worker's connection string points at a TCP proxy
(``workers.proxy``) that drops every connection and refuses new ones, then listens again.
A SQLite file cannot go away under a process that has it open; what a worker can meet is
a file it cannot write: another connection holds its write lock (``BEGIN EXCLUSIVE``), so
every write of the worker fails with "database is locked" (PLAIT-E020) until it lets go.
In both cases the worker keeps trying every poll, and the clock (moved by the test) passes
slots meanwhile; once the store is back, ``catch_up`` decides which of them run.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from plait import Runtime
from plait.driver import scheduling
from plait.driver.worker import Worker
from plait.store.sqlite import SqliteStore
from plait.workflow.schedule_spec import make_spec
from schedules.test_firing import SECOND, T0, TICK, Clock
from workers.support import wait_for

Outage = tuple[Callable[[Clock], Runtime], Callable[[], None], Callable[[], None]]


@pytest.fixture(params=["sqlite", "postgres"])
def outage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Outage]:
    """(a runtime on a store that can go away, go away, come back)."""
    if request.param == "sqlite":
        path = tmp_path / "plait.db"
        SqliteStore(path).close()  # the schema, before anyone holds the lock
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

        def sqlite_runtime(clock: Clock) -> Runtime:
            store = SqliteStore(path, busy_timeout_ms=20)
            return Runtime(f"sqlite:///{path}", store=store, clock=clock, principal="s")

        yield (
            sqlite_runtime,
            lambda: holder.execute("BEGIN EXCLUSIVE"),
            lambda: holder.execute("COMMIT"),
        )
        holder.close()
        return
    from workers.proxy import Proxy

    url = str(request.getfixturevalue("postgres_url"))
    postgres = request.getfixturevalue("postgres")
    target = urlsplit(postgres.admin_url)
    relay = Proxy((target.hostname or "127.0.0.1", target.port or 5432))
    through = relay.url(url)

    def pg_runtime(clock: Clock) -> Runtime:
        return Runtime(through, clock=clock, principal="s")

    yield pg_runtime, relay.go_away, relay.come_back
    relay.close()


@pytest.mark.parametrize(("catch_up", "expected"), [("none", [1, 4]), ("one", [1, 3, 4])])
def test_slots_that_came_while_the_store_was_away_are_caught_up_per_policy(
    outage: Outage, catch_up: str, expected: list[int]
) -> None:
    open_runtime, go_away, come_back = outage
    clock = Clock(T0)
    rt = open_runtime(clock)
    scheduling.add_schedule(
        rt, make_spec("tick", str(TICK.resolve()), every="1s", catch_up=catch_up, overlap="allow")
    )
    lines: list[str] = []
    failures = threading.Semaphore(0)

    def log(line: str) -> None:
        lines.append(line)
        if "storage error" in line:
            failures.release()

    worker_rt = open_runtime(clock)
    worker = Worker(worker_rt, poll_ms=10, log=log)
    thread = threading.Thread(target=worker.run)
    thread.start()
    store: Any = scheduling.schedules_of(rt)

    def fired() -> list[int]:
        return [(slot - T0) // SECOND for _, slot, _ in store.schedule_slots("tick")]

    try:
        clock.set(T0 + SECOND)
        wait_for(lambda: fired() == [1], "slot 1", 60)
        wait_for(lambda: rt.store.get_run("tick@2027-01-15T08:00:01Z").status == "completed",
                 "the first run", 60)  # fmt: skip
        go_away()
        try:
            for second in (2, 3):
                clock.set(T0 + second * SECOND)
                assert failures.acquire(timeout=60), "the worker never met the outage"
            clock.set(T0 + 4 * SECOND + 500)  # slot 4 is on time when the store is back
            assert failures.acquire(timeout=60)
        finally:
            come_back()
        wait_for(lambda: len(fired()) == len(expected), "the catch-up", 60)
        wait_for(lambda: all(r.status == "completed" for r in rt.store.list_runs()), "the runs", 60)
    finally:
        worker.stop()
        thread.join(60)
        worker_rt.close()
    assert fired() == expected
    assert any("storage error" in line for line in lines)
    rt.close()
