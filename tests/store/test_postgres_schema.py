"""PostgreSQL schema migrations: a database an older plait wrote opens in place, keeps its
runs verifiable, and goes on."""

from __future__ import annotations

import os
from typing import Any

import pytest

from plait import Runtime, Workflow
from plait.core.errors import PlaitError
from plait.store.records import LeaseOwner, RecordWrite, RunInfo

try:
    import psycopg
    from psycopg import errors as pg_errors

    from plait.store import postgres_schema
    from plait.store.base import POLLED_KINDS
    from plait.store.postgres import PostgresStore
except ImportError as missing:  # the optional extra plait[postgres] is not installed
    if os.environ.get("PLAIT_REQUIRE_POSTGRES") == "1":
        raise
    pytest.skip(f"PostgreSQL tests need psycopg: {missing}", allow_module_level=True)

RT: dict[str, Runtime] = {}


def step(n: int = 0) -> dict[str, Any]:
    if n == 2 and "cancel" in RT:
        RT.pop("cancel").cancel("canceled", reason="stop", by="ops")
    return {"n": n + 1}


def finish() -> dict[str, Any]:
    return {"finished": True}


LOOP = (
    Workflow.new("loop")
    .node("step", tool=step)
    .node("finish", tool=finish)
    .edge("step", "step", when="n < 5", max_cycles=10)
    .edge("step", "finish", when="n >= 5")
)


def one_value(url: str, query: str) -> Any:
    with psycopg.connect(url) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


NEW_COLUMNS = ("ALTER TABLE runs ADD COLUMN polled_seq BIGINT NOT NULL DEFAULT 0,"
               " ADD COLUMN lease_token BIGINT",)  # fmt: skip
"""Migration 13's columns alone: this plait keeps them (see ``as_of_version``)."""
OWNER = LeaseOwner("host-a", 1, 1)


def as_of_version(url: str, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database of schema ``version`` (11 or 12) holding the runs ``done`` (completed),
    ``canceled`` (its cancel journaled by another runtime mid-run) and ``held`` (queued,
    its lease held by OWNER with token 1), as that plait left them. They are written by
    this plait, which keeps ``runs.polled_seq`` and ``runs.lease_token`` (migration 13):
    the columns are there while they are written, then dropped and the version set back.
    The rows written are the ones the older plait wrote."""
    with monkeypatch.context() as old:
        old.setattr(
            postgres_schema, "MIGRATIONS", (*postgres_schema.MIGRATIONS[:version], NEW_COLUMNS)
        )
        old.setattr(postgres_schema, "SCHEMA_VERSION", version + 1)
        with Runtime(url, principal="p") as rt:
            assert rt.run_sync(LOOP, {"n": 0}, run_id="done").status == "completed"
            RT["cancel"] = rt
            assert rt.run_sync(LOOP, {"n": 0}, run_id="canceled").status == "canceled"
            rt.store.create_run(RunInfo("held", "loop", "queued", "p", None, 1, 1), {})
            assert rt.store.acquire_lease("held", OWNER, 1, 60_000, lambda o: True) == 1
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN polled_seq, DROP COLUMN lease_token")
        conn.execute("UPDATE schema_version SET version = %s", (version,))


def test_a_version_11_database_is_migrated_in_place_and_its_runs_verify_and_go_on(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_of_version(postgres_url, 11, monkeypatch)
    assert one_value(postgres_url, "SELECT version FROM schema_version") == 11
    journal = one_value(postgres_url, "SELECT relfilenode FROM pg_class WHERE relname = 'journal'")

    with Runtime(postgres_url, principal="p") as rt:
        assert rt.verify("done").verified
        assert rt.verify("canceled").verified
        assert rt.run_sync(LOOP, {"n": 0}, run_id="after").status == "completed"
        assert rt.verify("after").verified
        store = rt.store
        assert isinstance(store, PostgresStore)
        # The cancel journaled before the upgrade is found through the rebuilt index.
        [cancel] = store.records_after("canceled", 0, ("cancel", "inbox"))
        assert cancel.kind == "cancel" and cancel.body == {"by": "ops", "reason": "stop"}
    assert one_value(postgres_url, "SELECT version FROM schema_version") == len(
        postgres_schema.MIGRATIONS
    )
    # The journal was not rewritten (only its partial indexes were built again).
    assert (
        one_value(postgres_url, "SELECT relfilenode FROM pg_class WHERE relname = 'journal'")
        == journal
    )

    # Integrity as before: a status or a journal item no plait writes is refused.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with pytest.raises(pg_errors.CheckViolation):
            conn.execute("UPDATE runs SET status = 'lost' WHERE run_id = 'done'")
        with pytest.raises(pg_errors.CheckViolation):
            conn.execute("UPDATE journal SET item = 'note' WHERE run_id = 'done' AND seq = 1")


def test_feed_records_are_kept_out_of_the_records_index_and_never_polled(
    postgres_url: str,
) -> None:
    with Runtime(postgres_url, principal="p") as rt:
        assert rt.run_sync(LOOP, {"n": 0}, run_id="r1").status == "completed"
        store = rt.store
        assert isinstance(store, PostgresStore)
        with pytest.raises(ValueError, match="feed"):
            store.records_after("r1", 0, ("feed",))
    index = one_value(
        postgres_url,
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'journal_records'"
        " AND schemaname = current_schema()",
    )
    assert index.endswith("AND (record_kind <> 'feed'::text))")


def test_a_version_12_database_gets_each_runs_polled_seq_and_lease_and_its_runs_go_on(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 13 backfills ``runs.polled_seq`` from the journal and ``runs.lease_token``
    from the held leases: the poll after a commit to an upgraded run finds the cancel
    journaled before the upgrade (with the column left at 0 it would answer "nothing"
    without reading the journal), and the holder of a lease taken before the upgrade
    commits with its token (with no token copied, PLAIT-E021), a stale one still not."""
    as_of_version(postgres_url, 12, monkeypatch)
    with Runtime(postgres_url, principal="p") as rt:
        store = rt.store
        assert isinstance(store, PostgresStore)
        [cancel] = [r for r in store.load_journal("canceled").records if r.kind == "cancel"]
        assert one_value(postgres_url, "SELECT polled_seq FROM runs WHERE run_id = 'canceled'") == (
            cancel.seq
        )
        assert one_value(postgres_url, "SELECT polled_seq FROM runs WHERE run_id = 'done'") == 0
        store.commit("canceled", None, [RecordWrite("clock", {"ms": 1})])
        assert store.records_after("canceled", cancel.seq - 1, POLLED_KINDS) == [cancel]
        store.commit("done", None, [RecordWrite("inbox", {"message": "hi"})])
        assert [r.kind for r in store.records_after("done", 0, POLLED_KINDS)] == ["inbox"]
        assert one_value(postgres_url, "SELECT lease_token FROM runs WHERE run_id = 'held'") == 1
        assert one_value(postgres_url, "SELECT lease_token FROM runs WHERE run_id = 'done'") is None
        with pytest.raises(PlaitError) as stale:
            store.commit("held", 2, [RecordWrite("clock", {"ms": 1})])
        assert stale.value.code == "E021" and "host-a" in str(stale.value)
        store.commit("held", 1, [RecordWrite("clock", {"ms": 1})], release=True)
        assert one_value(postgres_url, "SELECT lease_token FROM runs WHERE run_id = 'held'") is None
    assert one_value(postgres_url, "SELECT version FROM schema_version") == len(
        postgres_schema.MIGRATIONS
    )


def test_polled_seq_follows_the_kinds_drivers_poll_for() -> None:
    """Migration 13 computed ``runs.polled_seq`` for these kinds: changing POLLED_KINDS
    needs a migration that computes it again."""
    [backfill] = [s for s in postgres_schema.MIGRATIONS[12] if "polled_seq = polled" in s]
    assert POLLED_KINDS == ("cancel", "inbox")
    assert "record_kind IN ('cancel', 'inbox')" in backfill
