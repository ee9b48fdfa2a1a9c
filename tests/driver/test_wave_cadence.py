"""The driver's wave cadence on a real SQLite file (docs/architecture.md §5.2, §3.3, §3.5a).

One wave's effects run at the same time; their results are journaled and fed in
dispatch order whatever order they finish in; each wave takes exactly one clock
reading; and a tool's timeout (raised, or overrunning ``timeout_s``) is a Timeout.
No test sleeps: concurrency is proven with a barrier, order is forced with events.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from plait import Runtime, Workflow
from plait.core.keys import JournalKey
from plait.workflow import load_workflow

WAIT_S = 5.0
"""How long a tool waits for its partner before giving up (only reached when broken)."""


def start() -> dict:
    return {"started": True}


def feeds(rt: Runtime, run_id: str) -> list[list[dict[str, Any]]]:
    return [r.body["events"] for r in rt.store.load_journal(run_id).records if r.kind == "feed"]


def results_in_journal_order(rt: Runtime, run_id: str) -> list[Any]:
    results = rt.store.load_journal(run_id).results.values()
    return sorted(results, key=lambda r: r.seq)


def resolved_nodes(feed: list[dict[str, Any]]) -> list[str]:
    return [JournalKey.from_json(item["resolved"]).node for item in feed if "resolved" in item]


class CountingClock:
    """A clock that counts its readings and never repeats one."""

    def __init__(self) -> None:
        self.readings: list[int] = []

    def __call__(self) -> int:
        value = 1_700_000_000_000 + 1_000 * len(self.readings)
        self.readings.append(value)
        return value


@pytest.fixture
def db(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/plait.db"


# --- one wave runs concurrently, and is journaled and fed in dispatch order ---------------


def test_one_waves_effects_run_concurrently_and_settle_in_dispatch_order(db):
    barrier = threading.Barrier(2)
    second_finished = threading.Event()
    finished: list[str] = []

    def first() -> dict:
        barrier.wait(timeout=WAIT_S)  # passes only if `second` is running at the same time
        second_finished.wait(timeout=WAIT_S)  # and finishes only after `second` did
        finished.append("first")
        return {"first": 1}

    def second() -> dict:
        barrier.wait(timeout=WAIT_S)
        finished.append("second")
        second_finished.set()
        return {"second": 2}

    wf = (
        Workflow.new("wave")
        .node("start", tool=start)
        .node("first", tool=first)
        .node("second", tool=second)
        .edge("start", "first")
        .edge("start", "second")
    )
    with Runtime(db, clock=CountingClock(), principal="alice", telemetry=False) as rt:
        result = rt.run_sync(wf, {})

        assert result.status == "completed", result.outcome
        assert finished == ["second", "first"]  # the higher index finished first
        assert result.context == {"started": True, "first": 1, "second": 2}
        results = results_in_journal_order(rt, result.run_id)
        assert [r.key.node for r in results] == ["start", "first", "second"]
        assert all("Completed" in r.outcome for r in results)
        wave_feed = feeds(rt, result.run_id)[2]
        assert resolved_nodes(wave_feed) == ["first", "second"]
        assert [e["node"] for e in rt.trace(result.run_id)] == ["start", "first", "second"]
        assert rt.verify(result.run_id, workflow=wf).verified


# --- one clock reading per wave ---------------------------------------------------------------


def fan_workflow() -> Workflow:
    def left() -> dict:
        return {"left": 1}

    def right() -> dict:
        return {"right": 2}

    def join(left: int, right: int) -> dict:
        return {"sum": left + right}

    return (
        Workflow.new("fan")
        .node("start", tool=start)
        .node("left", tool=left)
        .node("right", tool=right)
        .node("join", tool=join)
        .edge("start", "left")
        .edge("start", "right")
        .edge("left", "join")
        .edge("right", "join")
    )


def assert_one_clock_per_feed(rt: Runtime, run_id: str) -> list[int]:
    batches = feeds(rt, run_id)
    assert [len(resolved_nodes(b)) for b in batches] == [0, 1, 2, 1]
    clocks = [[item["clock"] for item in batch if "clock" in item] for batch in batches]
    assert all(len(c) == 1 for c in clocks), clocks
    assert "clock" in batches[0][0] and "start" in batches[0][1]
    for batch in batches[1:]:
        assert "clock" in batch[0]  # [ClockReading, EffectResolved...]
    # Each result carries the clock of the one reading its wave took.
    by_node = {r.key.node: r.clock_ms for r in results_in_journal_order(rt, run_id)}
    for batch, (reading,) in zip(batches[1:], clocks[1:], strict=True):
        assert {by_node[node] for node in resolved_nodes(batch)} == {reading}
    return [c[0] for c in clocks]


CHILD_TOOLS = """
import asyncio
import time
from pathlib import Path


def inner(folder: str) -> dict:
    Path(folder, "inner-started").touch()
    deadline = time.monotonic() + 5  # only reached when broken
    while not Path(folder, "sibling-ran").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"inner_saw_sibling": Path(folder, "sibling-ran").exists()}


async def sibling(folder: str) -> dict:
    deadline = time.monotonic() + 5  # only reached when broken
    while not Path(folder, "inner-started").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    Path(folder, "sibling-ran").touch()
    return {"sibling": True}


def start() -> dict:
    return {}
"""


def test_a_child_runs_tool_does_not_block_the_effects_beside_its_subgraph(tmp_path, db):
    """A child run's only effect is alone in the child's wave, not on the event loop: the
    parent's other effects of that wave (an async tool here) must run while it blocks.
    Run inline, it stalled them: a quick sibling with `timeout_s` failed with Timeout."""
    (tmp_path / "sync_tools.py").write_text(CHILD_TOOLS)
    (tmp_path / "child.yaml").write_text(
        "name: child\nnodes: [{id: inner, tool: inner}]\n"
        'tools: {inner: {python: "sync_tools:inner"}}\n'
    )
    (tmp_path / "parent.yaml").write_text(
        "name: parent\n"
        "nodes:\n"
        "  - {id: start, tool: start}\n"
        "  - {id: sub, workflow: child.yaml}\n"  # dispatched before the sibling
        "  - {id: beside, tool: sibling}\n"
        "edges: [{from: start, to: sub}, {from: start, to: beside}]\n"
        "tools:\n"
        '  start: {python: "sync_tools:start"}\n'
        '  sibling: {python: "sync_tools:sibling", timeout_s: 30}\n'
    )
    with Runtime(db, clock=CountingClock(), principal="alice", telemetry=False) as rt:
        result = rt.run_sync(load_workflow(tmp_path / "parent.yaml"), {"folder": str(tmp_path)})
    assert result.status == "completed", result.outcome
    assert result.context["inner_saw_sibling"] is True
    assert result.context["sibling"] is True


def test_each_wave_feeds_exactly_one_clock_reading(db):
    clock = CountingClock()
    with Runtime(db, clock=clock, principal="alice", telemetry=False) as rt:
        result = rt.run_sync(fan_workflow(), {})
        assert result.status == "completed" and result.context["sum"] == 3

        fed = assert_one_clock_per_feed(rt, result.run_id)
        assert fed == sorted(set(fed))  # distinct readings: the two-effect wave took one
        assert set(fed) <= set(clock.readings)


def test_plait_now_ms_pins_the_one_reading_of_every_wave(db, monkeypatch):
    monkeypatch.setenv("PLAIT_NOW_MS", "1767225600000")
    with Runtime(db, principal="alice", telemetry=False) as rt:
        result = rt.run_sync(fan_workflow(), {})
        assert result.status == "completed"

        assert assert_one_clock_per_feed(rt, result.run_id) == [1_767_225_600_000] * 4


# --- timeouts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "cause"),
    [(TimeoutError("upstream took too long"), "Timeout"), (ValueError("bad"), "ExecutorError")],
)
def test_a_python_tool_raising_timeout_error_is_recorded_as_timeout(db, raised, cause):
    def flaky() -> dict:
        raise raised

    wf = Workflow.new("raise").node("flaky", tool=flaky)
    with Runtime(db, clock=CountingClock(), principal="alice", telemetry=False) as rt:
        result = rt.run_sync(wf, {})

        [entry] = rt.trace(result.run_id)
        assert entry["status"] == "failed"
        assert entry["failure"]["cause"] == cause
        assert str(raised) in entry["failure"]["detail"]
        assert result.outcome["Failed"]["node"] == "flaky"
        assert result.outcome["Failed"]["detail"].startswith(f"{cause}: ")


@pytest.fixture
def never_set() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # lets the abandoned tool thread end


def test_a_sync_tool_overrunning_timeout_s_is_recorded_as_timeout(db, never_set):
    def stuck() -> dict:
        never_set.wait(timeout=60)
        return {"late": True}

    wf = Workflow.new("stuck").tool(stuck, timeout_s=0.05).node("stuck", tool=stuck)

    async def run(rt: Runtime) -> Any:
        try:
            return await rt.start(wf, {})
        finally:
            # The thread cannot be killed: release it before asyncio.run joins the pool.
            never_set.set()

    with Runtime(db, clock=CountingClock(), principal="alice", telemetry=False) as rt:
        result = asyncio.run(run(rt))

        assert result.status == "failed"
        [entry] = rt.trace(result.run_id)
        assert entry["failure"]["cause"] == "Timeout"
        assert "late" not in result.context  # the late result is discarded
        [record] = results_in_journal_order(rt, result.run_id)
        assert record.outcome["Failed"]["cause"] == "Timeout"
