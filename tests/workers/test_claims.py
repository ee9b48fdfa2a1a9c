"""What a worker claims, wakes, fences and collects, on both stores, in this process.

``claim_work``'s rule (queued; running with a dead or released lease; parked with a due
wake time; top-level runs only), the wake times ``Runtime`` records (answers, timers,
ask expiries, budget raises), fencing of a drive under a token that was taken over, and
``gc``'s rule (finished trees only, none in which a raised budget_exhausted run, child or
claimed, may still go on). The multi-process behaviour is in test_workers.py.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import PlaitError, Runtime, Workflow
from plait.driver.worker import Worker, collect_garbage, retry_delay_s
from plait.store import open_store
from plait.store.records import LeaseOwner, RecordWrite, RunInfo, StatusWrite
from workers.support import (
    ASK_FLOW,
    FLOW,
    SPENDS_FLOW,
    SPENT_FLOW,
    T0,
    TIMER_FLOW,
    enqueue,
    executions,
)

A = LeaseOwner("host-a", 1, 1)
B = LeaseOwner("host-b", 2, 2)
TTL = 1_000
HOUR = 3_600_000


@pytest.fixture
def store(db: str) -> Iterator[Any]:
    opened = open_store(db)
    yield opened
    opened.close()


def add_run(store: Any, run_id: str, status: str, created: int, parent: str | None = None) -> None:
    store.create_run(RunInfo(run_id, "wf", status, "p", parent, created, created), {"input": None})


def test_claim_work_takes_exactly_the_runs_a_worker_should_drive(store: Any) -> None:
    add_run(store, "queued", "queued", 1)
    add_run(store, "starting", "running", 2)  # being started: no lease row yet
    add_run(store, "crashed", "running", 3)
    add_run(store, "parked", "parked", 4)
    add_run(store, "answered", "parked", 5)
    add_run(store, "later", "parked", 6)
    add_run(store, "done", "completed", 7)
    add_run(store, "queued~child", "queued", 8, parent="queued")
    add_run(store, "held", "queued", 9)
    store.acquire_lease("crashed", B, 0, TTL, lambda owner: True)
    store.acquire_lease("held", B, 0, 10 * TTL, lambda owner: True)
    store.set_wake("answered", 50)
    store.set_wake("later", 10 * TTL)
    store.set_wake("done", 50)
    # At TTL/2 "crashed" still holds a live lease.
    assert [r for r, _ in store.claim_work(A, TTL // 2, TTL, limit=10)] == ["queued", "answered"]
    assert store.wake_of("answered") is None  # the claim cleared it
    assert store.wake_of("later") == 10 * TTL
    # Those leases are live now; "crashed"'s has expired: taken over with the next token.
    assert store.claim_work(A, TTL, TTL, limit=10) == [("crashed", 2)]
    # A claim marks queued and parked runs running: should their worker die, the run is
    # taken over once the lease lapses, as "answered" is here.
    assert store.get_run("answered").status == "running"
    assert store.get_run("queued").status == "running"
    assert store.claim_work(B, 10 * TTL, TTL, limit=10, exclude=["queued"]) == [
        ("crashed", 3),
        ("answered", 2),
        ("later", 1),
        ("held", 2),
    ]
    assert store.claim_work(B, 12 * TTL, TTL) == [("queued", 2)]  # oldest first


def test_a_run_whose_driver_died_on_this_host_is_claimed_at_once(store: Any) -> None:
    """§5.7: a claimant on the holder's host takes over as soon as that process is gone,
    not when its lease lapses; a live holder, or one on another host, keeps the run."""
    dead_driver, live_driver = LeaseOwner("host-a", 10, 10), LeaseOwner("host-a", 11, 11)
    add_run(store, "orphan", "running", 1)
    add_run(store, "driven", "running", 2)
    add_run(store, "elsewhere", "running", 3)
    add_run(store, "queued", "queued", 4)
    for run_id, holder in (("orphan", dead_driver), ("driven", live_driver), ("elsewhere", B)):
        store.acquire_lease(run_id, holder, 0, 10 * TTL, lambda owner: True)

    def alive(owner: LeaseOwner) -> bool:
        return owner != dead_driver

    assert store.claim_work(A, TTL, TTL, limit=10) == [("queued", 1)]  # leases still live
    assert store.claim_work(A, TTL, TTL, limit=10, owner_alive=alive) == [("orphan", 2)]
    assert store.get_run("orphan").status == "running"
    assert store.claim_work(A, TTL, TTL, limit=10, owner_alive=alive) == []  # A holds it now


def test_set_wake_keeps_the_earlier_time_unless_replaced(store: Any) -> None:
    add_run(store, "r", "parked", 1)
    assert store.wake_of("r") is None
    store.set_wake("r", 500)
    store.set_wake("r", 900)
    store.set_wake("r", None)
    assert store.wake_of("r") == 500
    store.set_wake("r", 100)
    assert store.wake_of("r") == 100
    store.set_wake("r", None, replace=True)
    assert store.wake_of("r") is None
    with pytest.raises(PlaitError) as err:
        store.wake_of("nope")
    assert err.value.code == "E017"


def run_worker(db: str, now: int) -> dict[str, Any]:
    with Runtime(db, principal="tester", clock=lambda: now) as rt:
        return Worker(rt, once=True, concurrency=3).run().to_json()


def test_a_worker_drives_queued_runs_and_wakes_answered_and_due_ones(
    db: str, tmp_path: Path
) -> None:
    count = str(tmp_path / "c")
    enqueue(db, FLOW, {"line": {"count_file": count, "n": 1}}, clock=T0)
    enqueue(db, ASK_FLOW, {"asks": {"count_file": count, "n": 1}}, clock=T0)
    enqueue(db, TIMER_FLOW, {"naps": {"count_file": count, "n": 1}}, clock=T0)
    first = run_worker(db, T0)
    assert first["statuses"] == {"completed": 1, "parked": 2} and first["errors"] == []
    assert run_worker(db, T0)["driven"] == 0  # nothing is due: parked runs stay put
    with Runtime(db, principal="other", clock=lambda: T0 + 10) as rt:
        assert rt.store.wake_of("naps") == T0 + 60_000  # the timer's wake time
        [ask] = rt.asks("asks")
        rt.respond("asks", ask["ask_id"], {"b": 3})
        assert rt.store.wake_of("asks") == T0 + 10
    assert run_worker(db, T0 + 10)["statuses"] == {"completed": 1}  # the answered one
    assert run_worker(db, T0 + 59_999)["driven"] == 0
    assert run_worker(db, T0 + 60_000)["statuses"] == {"completed": 1}  # the timer is due
    with Runtime(db, principal="tester", clock=lambda: T0) as rt:
        assert {i.run_id: i.status for i in rt.store.list_runs()} == {
            "line": "completed",
            "asks": "completed",
            "naps": "completed",
        }
        assert rt.show("asks").context["c"] == 4
        for run_id in ("line", "asks", "naps"):
            assert rt.verify(run_id).verified
    assert set(executions(Path(count)).values()) == {1}


def test_an_expired_ask_wakes_its_run(db: str, tmp_path: Path) -> None:
    flow = tmp_path / "ask.yaml"
    flow.write_text(ASK_FLOW.read_text() + "asks: {ttl_s: 60}\n")
    (tmp_path / "workertools.py").write_text((FLOW.parent / "workertools.py").read_text())
    enqueue(db, flow, {"e": {"count_file": str(tmp_path / "c"), "n": 1}}, clock=T0)
    assert run_worker(db, T0)["statuses"] == {"parked": 1}
    with Runtime(db, principal="tester", clock=lambda: T0) as rt:
        wake = rt.store.wake_of("e")
    assert wake is not None and T0 + 60_000 < wake <= T0 + 62_000
    assert run_worker(db, wake - 1)["driven"] == 0
    report = run_worker(db, wake)
    assert report["statuses"] == {"failed": 1}, report  # the ask timed out: the run fails


def test_a_drive_under_a_token_that_was_taken_over_writes_nothing(db: str, tmp_path: Path) -> None:
    enqueue(db, FLOW, {"f": {"count_file": str(tmp_path / "c"), "n": 1}}, clock=T0)
    with Runtime(db, principal="tester", clock=lambda: T0) as rt:
        [(_, stale)] = rt.store.claim_work(A, T0, TTL)
        [(_, fresh)] = rt.store.claim_work(B, T0 + TTL, TTL)  # A's lease expired
        assert fresh == stale + 1
        before = rt.store.load_journal("f")
        with pytest.raises(PlaitError) as err:
            asyncio.run(rt.resume("f", token=stale))
        assert err.value.code == "E021"
        after = rt.store.load_journal("f")
        assert (after.records, after.intents) == (before.records, before.intents)
        assert rt.store.get_run("f").status == "running"  # since the claim
        assert not (tmp_path / "c").exists()  # fenced before any effect was dispatched
        assert asyncio.run(rt.resume("f", token=fresh)).status == "completed"
        assert rt.verify("f").verified


def test_gc_takes_whole_finished_trees_only(db: str, tmp_path: Path) -> None:
    with Runtime(db, principal="tester", clock=lambda: T0) as rt:
        store = rt.store
        for run_id in ("old", "tree", "busy", "raised", "leased"):
            add_run(store, run_id, "running", 0)
            status = "budget_exhausted" if run_id == "raised" else "completed"
            store.commit(run_id, None, [RecordWrite("x", {}), StatusWrite(status, None, 0)])
        add_run(store, "tree~a", "running", 0, parent="tree")
        store.commit("tree~a", None, [StatusWrite("failed", None, 0)])
        add_run(store, "busy~a", "parked", 0, parent="busy")  # a parked child keeps its tree
        store.set_wake("raised", 0)  # a worker is about to drive it on (budget raised)
        store.acquire_lease("leased", B, T0, TTL, lambda owner: True)
        add_run(store, "parked", "parked", 0)
        add_run(store, "queued", "queued", 0)
        assert collect_garbage(rt, 60_000) == {"deleted": 3, "runs": ["old", "tree", "tree~a"]}
        assert collect_garbage(rt, 60_000) == {"deleted": 0, "runs": []}
        remaining = {info.run_id for info in store.list_runs()}
        assert remaining == {"busy", "busy~a", "raised", "leased", "parked", "queued"}
        with pytest.raises(PlaitError):
            store.load_journal("old")
    with Runtime(db, principal="tester", clock=lambda: 0) as rt:
        assert collect_garbage(rt, 0) == {"deleted": 0, "runs": []}  # nothing older than now


def test_gc_keeps_a_tree_whose_budget_exhausted_child_was_raised(db: str, tmp_path: Path) -> None:
    """A child that exhausts its budget fails its parent's node: the parent ends failed,
    the child budget_exhausted. Once the child's budget is raised, ``resume CHILD``
    continues it (no worker does: the parent is finished), so gc keeps the tree until
    then, although the raise's wake time went to the failed root."""
    count = str(tmp_path / "c")
    enqueue(db, SPENDS_FLOW, {"p": {"count_file": count, "n": 1}}, clock=T0)
    assert run_worker(db, T0)["statuses"] == {"failed": 1}
    with Runtime(db, principal="tester", clock=lambda: T0) as rt:
        [child] = [i.run_id for i in rt.store.list_runs() if i.parent_run_id == "p"]
        assert rt.store.get_run(child).status == "budget_exhausted"
        rt.raise_budget(child, {"max_supersteps": 10})
    later = T0 + 2 * HOUR
    with Runtime(db, principal="tester", clock=lambda: later) as rt:
        assert collect_garbage(rt, HOUR) == {"deleted": 0, "runs": []}
    assert run_worker(db, later)["driven"] == 0  # only top-level runs are claimed
    with Runtime(db, principal="tester", clock=lambda: later) as rt:
        resumed = asyncio.run(rt.resume(child))
        assert (resumed.status, resumed.context["b"]) == ("completed", 4)
        assert rt.store.get_run("p").status == "failed"  # the parent's node failed for good
        assert rt.verify(child).verified
    with Runtime(db, principal="tester", clock=lambda: later + 2 * HOUR) as rt:
        assert collect_garbage(rt, HOUR) == {"deleted": 2, "runs": sorted(["p", child])}


def test_gc_keeps_a_raised_run_whose_claiming_worker_died(db: str, tmp_path: Path) -> None:
    """A worker claimed a raised budget_exhausted run and died before driving it: the
    claim consumed the wake time, but the run is running under a lease that lapses, so
    gc keeps it and the next worker takes it over."""
    enqueue(db, SPENT_FLOW, {"r": {"count_file": str(tmp_path / "c"), "n": 1}}, clock=T0)
    assert run_worker(db, T0)["statuses"] == {"budget_exhausted": 1}
    with Runtime(db, principal="tester", clock=lambda: T0) as rt:
        rt.raise_budget("r", {"max_supersteps": 10})
        assert [run_id for run_id, _ in rt.store.claim_work(A, T0, TTL)] == ["r"]
    later = T0 + 2 * HOUR
    with Runtime(db, principal="tester", clock=lambda: later) as rt:
        assert collect_garbage(rt, HOUR) == {"deleted": 0, "runs": []}
    assert run_worker(db, later)["statuses"] == {"completed": 1}


def test_gc_keeps_a_raised_run_whose_claimed_drive_was_refused(db: str) -> None:
    """A worker cannot drive a run started from Python (no file: PLAIT-E010). Its refused
    claim leaves the raised run running with a released lease, for another claimant or
    a ``resume`` from Python, never for gc."""

    def step() -> dict[str, int]:
        return {"n": 1}

    wf = Workflow.new("py").node("a", tool=step).node("b", tool=step).edge("a", "b")
    wf = wf.budget(max_supersteps=1)
    with Runtime(db, principal="tester", clock=lambda: T0) as rt:
        assert rt.run_sync(wf, {}, run_id="py").status == "budget_exhausted"
        rt.raise_budget("py", {"max_supersteps": 10})
    [error] = run_worker(db, T0)["errors"]
    assert error["code"] == "PLAIT-E010"
    later = T0 + 2 * HOUR
    with Runtime(db, principal="tester", clock=lambda: later) as rt:
        assert collect_garbage(rt, HOUR) == {"deleted": 0, "runs": []}
        assert asyncio.run(rt.resume("py", workflow=wf)).status == "completed"


def test_a_claimed_budget_exhausted_run_with_nothing_raised_goes_back_as_it_was(
    db: str, tmp_path: Path
) -> None:
    """A cancel journaled for a budget_exhausted run wakes it, but there is nothing to
    drive: the claimed drive gives it back its status and last update (the claim had
    marked it running), so nobody claims it again and gc takes it."""
    enqueue(db, SPENT_FLOW, {"r": {"count_file": str(tmp_path / "c"), "n": 1}}, clock=T0)
    assert run_worker(db, T0)["statuses"] == {"budget_exhausted": 1}
    with Runtime(db, principal="tester", clock=lambda: T0 + 10) as rt:
        rt.cancel("r", "late")
        [(_, token)] = rt.store.claim_work(A, T0 + 10, TTL)
        assert asyncio.run(rt.resume("r", token=token)).status == "budget_exhausted"
        info = rt.store.get_run("r")
        assert (info.status, info.updated_ms) == ("budget_exhausted", T0)
        assert rt.store.claim_work(A, T0 + 20, TTL) == []
    with Runtime(db, principal="tester", clock=lambda: T0 + 2 * HOUR) as rt:
        assert collect_garbage(rt, HOUR) == {"deleted": 1, "runs": ["r"]}


@pytest.mark.parametrize("code", ["E006", "E008", "E010", "E015", "E026"])
def test_a_refusal_met_on_every_attempt_is_never_retried_by_the_same_worker(code: str):
    # E015 most of all: each attempt would run the refused wave's effects again.
    assert retry_delay_s(code, 1) == math.inf


def test_other_failures_back_off_doubling_up_to_a_minute():
    delays = [retry_delay_s(code, n) for code, n in (("E021", 1), ("E020", 2), ("internal", 9))]
    assert delays == [2.0, 4.0, 60.0]


def test_a_worker_without_the_providers_key_leaves_the_run_for_one_that_has_it(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flow = tmp_path / "agent.yaml"
    flow.write_text(
        "name: keyed\nnodes: [{id: agent, instruction: Go.}]\nllm: {model: openai:gpt-4o-mini}\n"
    )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    enqueue(db, flow, {"keyed": {}}, clock=T0)  # queued: the worker's environment counts

    report = run_worker(db, T0)

    assert [(e["run_id"], e["code"]) for e in report["errors"]] == [("keyed", "PLAIT-E006")]
    assert "OPENAI_API_KEY" in report["errors"][0]["message"]
    with Runtime(db, principal="tester") as rt:
        assert rt.store.get_run("keyed").status != "failed"
        assert rt.store.load_journal("keyed").intents == []  # no turn was taken
