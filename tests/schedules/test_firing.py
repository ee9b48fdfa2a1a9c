"""Workers fire schedule slots: exactly once per slot, catch-up, overlap (SQLite and PostgreSQL).

Time is a clock the test moves (``Runtime(clock=...)``), never a sleep: each ``Worker``
reads it, so "a second passes" is one assignment, and a worker finds a slot exactly as
late as the test says. Competing workers are real: each has its own store connection and
runs its loop in a thread of its own, against one SQLite file or one PostgreSQL schema.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Runtime
from plait.driver import scheduling, verbs
from plait.driver.worker import Worker
from plait.workflow.schedule_spec import make_spec, slot_run_id
from workers.support import wait_for

FLOW_DIR = Path(__file__).parent / "flow"
TICK = FLOW_DIR / "tick.yaml"
WAIT = FLOW_DIR / "wait.yaml"
T0 = 1_800_000_000_000  # a whole second, minute and hour (ms)
SECOND, HOUR = 1000, 3_600_000


class Clock:
    """A clock the test moves; every runtime of a test reads the same one."""

    def __init__(self, now: int) -> None:
        self.now = now
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return self.now

    def set(self, now: int) -> None:
        with self._lock:
            self.now = now


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/plait.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def rt(db: str, clock: Clock) -> Iterator[Runtime]:
    runtime = Runtime(db, clock=clock, principal="scheduler")
    yield runtime
    runtime.close()


def add(rt: Runtime, name: str, flow: Path = TICK, **timing: Any) -> None:
    spec = make_spec(name, str(flow.resolve()), **timing)
    scheduling.add_schedule(rt, spec)


def drain(db: str, clock: Clock) -> dict[str, Any]:
    """One worker that fires what is due and drives every runnable run, then returns."""
    with Runtime(db, clock=clock, principal="scheduler") as runtime:
        return Worker(runtime, once=True).run().to_json()


def fired(rt: Runtime, name: str) -> list[int]:
    """The slots of ``name`` that started a run, relative to T0."""
    return [slot - T0 for _, slot, _ in scheduling.schedules_of(rt).schedule_slots(name)]


def test_every_second_under_three_competing_workers_fires_each_slot_exactly_once(
    db: str, clock: Clock, rt: Runtime
) -> None:
    add(rt, "tick", every="1s", overlap="allow")
    runtimes = [Runtime(db, clock=clock, principal="scheduler") for _ in range(3)]
    workers = [Worker(r, poll_ms=5, concurrency=2) for r in runtimes]
    threads = [threading.Thread(target=w.run) for w in workers]
    for thread in threads:
        thread.start()
    slots = 25
    try:
        for step in range(1, slots + 1):
            # Found on time, at varying lateness within the slot's second.
            clock.set(T0 + step * SECOND + (step * 37) % 900)
            wait_for(lambda s=step: len(fired(rt, "tick")) >= s, f"slot {step} to fire", 60)
        runs = {slot_run_id("tick", T0 + k * SECOND) for k in range(1, slots + 1)}
        wait_for(
            lambda: all(rt.store.get_run(r).status == "completed" for r in runs),
            "every scheduled run to complete",
            60,
        )
    finally:
        for worker in workers:
            worker.stop()
        for thread in threads:
            thread.join(60)
        for runtime in runtimes:
            runtime.close()
    assert fired(rt, "tick") == [k * SECOND for k in range(1, slots + 1)]  # none missed
    listed = verbs.runs_object(rt, None)["runs"]
    assert len(listed) == slots  # one run per slot, none twice
    for run in listed:
        slot = run["schedule"]["slot_ms"]
        assert run["schedule"]["name"] == "tick"
        assert run["run_id"] == slot_run_id("tick", slot)
        assert run["created_ms"] == slot  # the slot is the run's start time
        assert run["status"] == "completed"
    shown = rt.show(slot_run_id("tick", T0 + SECOND)).to_json()
    assert shown["schedule"] == {"name": "tick", "slot_ms": T0 + SECOND}


@pytest.mark.parametrize(
    ("catch_up", "expected"),
    [("none", [1, 10]), ("one", [1, 9, 10])],
)
def test_catch_up_after_downtime_fires_the_on_time_slot_and_per_policy_the_last_missed(
    db: str, clock: Clock, rt: Runtime, catch_up: str, expected: list[int]
) -> None:
    add(rt, "tick", every="1s", catch_up=catch_up, overlap="allow")
    clock.set(T0 + SECOND)
    drain(db, clock)
    clock.set(T0 + 10 * SECOND + 500)  # slots 2..10 came while no worker ran
    drain(db, clock)
    assert fired(rt, "tick") == [k * SECOND for k in expected]
    clock.set(T0 + 11 * SECOND)
    drain(db, clock)
    assert fired(rt, "tick")[-1] == 11 * SECOND  # and on from there


@pytest.mark.parametrize(("catch_up", "expected"), [("none", []), ("one", [2 * HOUR])])
def test_a_slot_found_later_than_its_grace_is_missed(
    db: str, clock: Clock, rt: Runtime, catch_up: str, expected: list[int]
) -> None:
    add(rt, "hourly", cron="0 * * * *", catch_up=catch_up)
    clock.set(T0 + 2 * HOUR + 30 * 60 * SECOND)  # slots 1h and 2h passed; 2h is 30 min late
    drain(db, clock)
    assert fired(rt, "hourly") == expected
    row = scheduling.schedules_of(rt).get_schedule("hourly")
    assert row.next_ms == T0 + 3 * HOUR  # missed slots are never looked at again
    drain(db, clock)
    assert fired(rt, "hourly") == expected


def test_overlap_skip_passes_slots_over_while_the_last_run_is_unfinished(
    db: str, clock: Clock, rt: Runtime
) -> None:
    add(rt, "waits", WAIT, every="1m", overlap="skip")
    clock.set(T0 + 60 * SECOND)
    drain(db, clock)
    first = slot_run_id("waits", T0 + 60 * SECOND)
    assert rt.store.get_run(first).status == "parked"
    clock.set(T0 + 120 * SECOND)
    drain(db, clock)
    assert fired(rt, "waits") == [60 * SECOND]  # slot 2 passed over, not queued
    ask = rt.asks(first)[0]["ask_id"]
    rt.respond(first, ask, {"ok": True})
    drain(db, clock)
    assert rt.store.get_run(first).status == "completed"
    clock.set(T0 + 180 * SECOND)
    drain(db, clock)
    assert fired(rt, "waits") == [60 * SECOND, 180 * SECOND]


def test_overlap_allow_starts_a_run_per_slot_whatever_the_last_one_does(
    db: str, clock: Clock, rt: Runtime
) -> None:
    add(rt, "waits", WAIT, every="1m", overlap="allow")
    for minute in (1, 2, 3):
        clock.set(T0 + minute * 60 * SECOND)
        drain(db, clock)
    assert fired(rt, "waits") == [60 * SECOND, 120 * SECOND, 180 * SECOND]
    statuses = {run["status"] for run in verbs.runs_object(rt, None)["runs"]}
    assert statuses == {"parked"}


def test_a_paused_schedule_fires_nothing_and_resumes_from_the_next_slot(
    db: str, clock: Clock, rt: Runtime
) -> None:
    add(rt, "tick", every="1m")
    assert scheduling.pause_schedule(rt, "tick") == {
        "name": "tick",
        "accepted": True,
        "paused": True,
    }
    clock.set(T0 + 5 * 60 * SECOND + 1)
    drain(db, clock)
    assert fired(rt, "tick") == []
    resumed = scheduling.resume_schedule(rt, "tick")
    assert resumed["next_ms"] == T0 + 6 * 60 * SECOND  # the paused slots are not caught up
    clock.set(T0 + 6 * 60 * SECOND)
    drain(db, clock)
    assert fired(rt, "tick") == [6 * 60 * SECOND]


def test_a_slot_whose_file_is_gone_is_passed_over_with_its_error_kept(
    db: str, clock: Clock, rt: Runtime, tmp_path: Path
) -> None:
    flow = tmp_path / "tick.yaml"
    flow.write_text(TICK.read_text().replace("ticktools:tick", "json:dumps"))
    add(rt, "gone", flow, every="1m")
    flow.unlink()
    clock.set(T0 + 60 * SECOND)
    report = drain(db, clock)
    assert report["driven"] == 0
    row = scheduling.schedules_of(rt).get_schedule("gone")
    assert row.next_ms == T0 + 120 * SECOND
    assert row.last_error is not None and "PLAIT-E004" in row.last_error
    assert fired(rt, "gone") == []


def test_the_scheduled_run_carries_its_schedule_in_show_and_runs(
    db: str, clock: Clock, rt: Runtime
) -> None:
    add(rt, "tick", every="1m", input={"n": 41})
    clock.set(T0 + 60 * SECOND)
    drain(db, clock)
    run_id = slot_run_id("tick", T0 + 60 * SECOND)
    assert run_id == "tick@2027-01-15T08:01:00Z"
    shown = rt.show(run_id).to_json()
    assert shown["schedule"] == {"name": "tick", "slot_ms": T0 + 60 * SECOND}
    assert shown["context"]["ticked"] == 42
    (run,) = verbs.runs_object(rt, None)["runs"]
    assert run["schedule"] == {"name": "tick", "slot_ms": T0 + 60 * SECOND}
    forked = rt.fork_sync(run_id).to_json()
    assert "schedule" not in forked  # a fork is not a slot's run


def test_with_overlap_skip_an_on_time_slot_makes_the_catch_up_run_needless(
    db: str, clock: Clock, rt: Runtime
) -> None:
    add(rt, "tick", every="1s", catch_up="one", overlap="skip")
    clock.set(T0 + 10 * SECOND + 500)  # slots 1..9 missed, 10 on time
    drain(db, clock)
    assert fired(rt, "tick") == [10 * SECOND]
