"""PostgreSQL schema migrations: a database an older plait wrote opens in place, keeps its
runs verifiable, and goes on."""

from __future__ import annotations

import os
from typing import Any

import pytest

from plait import Runtime, Workflow

try:
    import psycopg
    from psycopg import errors as pg_errors

    from plait.store import postgres_schema
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


def test_a_version_11_database_is_migrated_in_place_and_its_runs_verify_and_go_on(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as old:  # the plait of schema version 11
        old.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:11])
        old.setattr(postgres_schema, "SCHEMA_VERSION", 11)
        with Runtime(postgres_url, principal="p") as rt:
            assert rt.run_sync(LOOP, {"n": 0}, run_id="done").status == "completed"
            RT["cancel"] = rt
            assert rt.run_sync(LOOP, {"n": 0}, run_id="canceled").status == "canceled"
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
    assert one_value(postgres_url, "SELECT version FROM schema_version") == 12
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
