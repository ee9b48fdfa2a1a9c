"""What a drive commits, and in how many transactions (docs/architecture.md §5.7).

A run's final status is written with its outcome, in the commit of its last wave, and a
run that did not fail gives its lease up in that same commit: a three-step run is one
commit per wave, nothing after. A failed run still cancels its children under the lease,
so it gives the lease up after that commit.
"""

from __future__ import annotations

from typing import Any

import pytest

from plait import Runtime, Workflow
from plait.store import LeaseOwner


def first(n: int) -> dict:
    return {"a": n + 1}


def second(a: int) -> dict:
    return {"b": a * 2}


def third(b: int) -> dict:
    return {"c": b + 1}


def broken(b: int) -> dict:
    raise ValueError("no")


def three(last: Any = third) -> Workflow:
    return (
        Workflow.new("three")
        .node("first", tool=first)
        .node("second", tool=second)
        .node("third", tool=last)
        .edge("first", "second")
        .edge("second", "third")
    )


class Spy:
    """The store's commits (their write kinds, and whether they released) and releases."""

    def __init__(self, rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
        self.commits: list[tuple[list[str], bool]] = []
        self.releases = 0
        store = rt.store
        commit, release = store.commit, store.release_lease

        def spy_commit(run_id: str, token: Any, writes: Any, *, release: bool = False) -> None:
            kinds = [getattr(w, "kind", type(w).__name__) for w in writes]
            self.commits.append((kinds, release))
            commit(run_id, token, writes, release=release)

        def spy_release(run_id: str, token: int) -> None:
            self.releases += 1
            release(run_id, token)

        monkeypatch.setattr(store, "commit", spy_commit)
        monkeypatch.setattr(store, "release_lease", spy_release)


@pytest.fixture
def rt(tmp_path) -> Runtime:
    with Runtime(f"sqlite:///{tmp_path}/plait.db") as runtime:
        yield runtime


def test_a_finished_run_writes_its_status_and_gives_its_lease_up_in_its_last_wave(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(rt, monkeypatch)
    result = rt.run_sync(three(), {"n": 1})
    assert result.status == "completed"
    assert len(spy.commits) == 4  # one per wave: the first intent, then a result each
    last, released = spy.commits[-1]
    assert released and "outcome" in last and "StatusWrite" in last
    assert [released for _, released in spy.commits] == [False, False, False, True]
    assert spy.releases == 0
    assert rt.store.get_run(result.run_id).status == "completed"
    other = LeaseOwner("elsewhere", 1, 1)  # the lease is free: anyone may take it
    assert rt.store.acquire_lease(result.run_id, other, 0, 1_000, lambda o: True) == 2


def test_a_failed_run_writes_its_status_with_its_outcome_and_releases_after(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy(rt, monkeypatch)
    result = rt.run_sync(three(broken), {"n": 1})
    assert result.status == "failed"
    last, released = spy.commits[-1]
    assert not released and "outcome" in last and "StatusWrite" in last
    assert not any("StatusWrite" in kinds for kinds, _ in spy.commits[:-1])
    assert spy.releases == 1  # after its children were canceled, under the lease
    assert rt.store.get_run(result.run_id).status == "failed"
