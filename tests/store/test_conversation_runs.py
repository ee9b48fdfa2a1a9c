"""Conversation membership in both SQL back ends: a run joins its conversation in the
transaction that creates it, turns keep their order, a duplicate run id joins nothing,
and ``gc`` takes a deleted run out of its conversation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.core.errors import PlaitError
from plait.store import RunInfo, StatusWrite, open_store


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'p.db'}"
    else:
        url = str(request.getfixturevalue("postgres_url"))
    opened = open_store(url)
    yield opened
    opened.close()


def add(store: Any, run_id: str, created: int, conversation: str | None) -> None:
    info = RunInfo(run_id, "wf", "running", "alice", None, created, created)
    store.create_run(info, {"m": run_id}, conversation)


def test_runs_join_their_conversation_in_order(store: Any) -> None:
    add(store, "b-first", 5, "c1")
    add(store, "a-second", 5, "c1")  # same time, smaller id: the position orders them
    add(store, "other", 1, "c2")
    add(store, "alone", 1, None)

    assert [(c, r.run_id) for c, r in store.conversation_runs()] == [
        ("c1", "b-first"),
        ("c1", "a-second"),
        ("c2", "other"),
    ]
    assert [r.run_id for _, r in store.conversation_runs("c2")] == ["other"]
    assert store.conversation_runs("none") == []


def test_a_duplicate_run_id_joins_nothing(store: Any) -> None:
    add(store, "r1", 1, "c1")
    with pytest.raises(PlaitError) as taken:
        add(store, "r1", 2, "c2")

    assert taken.value.code == "E016"
    assert store.conversation_runs("c2") == []


def test_gc_takes_a_deleted_run_out_of_its_conversation(store: Any) -> None:
    add(store, "old", 1, "c1")
    add(store, "new", 1, "c1")
    store.commit("old", None, [StatusWrite("completed", None, 1)])

    assert store.gc(before_ms=2, now_ms=10) == ["old"]
    assert [r.run_id for _, r in store.conversation_runs("c1")] == ["new"]
    add(store, "newer", 3, "c1")  # positions go on after the deleted turn
    assert [r.run_id for _, r in store.conversation_runs("c1")] == ["new", "newer"]


def test_two_turns_created_at_once_on_postgres_refuse_the_second_with_e031(
    postgres_url: str,
) -> None:
    """The race ``MAX(position) + 1`` allows: a turn that read the same last position as
    one committing meanwhile loses on the key, as E031 naming its run, and writes nothing."""
    import threading

    import psycopg

    from support.pg_locks import wait_until_blocked

    store = open_store(postgres_url)
    try:
        add(store, "t1", 1, "c1")
        with psycopg.connect(postgres_url, autocommit=True) as rival:
            rival.execute("BEGIN")
            rival.execute(
                "INSERT INTO conversation_runs (conversation, position, run_id)"
                " VALUES ('c1', 2, 'rival')"
            )
            outcome: list[BaseException] = []

            def second_turn() -> None:
                try:
                    add(store, "t2", 2, "c1")
                except BaseException as exc:  # handed to the test's thread
                    outcome.append(exc)

            racer = threading.Thread(target=second_turn)
            racer.start()
            # Commit only once the second turn's insert waits on the rival's key.
            wait_until_blocked(
                postgres_url, racer, "AND query LIKE 'INSERT INTO conversation_runs%'"
            )
            rival.execute("COMMIT")
            racer.join()
        (raised,) = outcome
        assert isinstance(raised, PlaitError) and raised.code == "E031"
        assert "'t2'" in raised.detail
        with pytest.raises(PlaitError) as unknown:
            store.get_run("t2")
        assert unknown.value.code == "E017"  # nothing of the losing turn was written
    finally:
        store.close()
