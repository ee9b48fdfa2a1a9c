"""SQLite schema migrations: a database written by an older plait opens, keeps its runs and
goes on numbering their journals where they stopped."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from plait.core.canonical import dumps
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import IntentWrite, ManifestWrite, Record, RecordWrite, RunInfo, SqliteStore
from plait.store.sqlite_schema import MIGRATIONS, SCHEMA_VERSION

KEY = JournalKey("r1", "", "a", 1, 0, "tool")


def version_3_database(path: Path) -> None:
    """A file as plait wrote it at schema version 3: one run, a manifest, two journal rows."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for statements in MIGRATIONS[:3]:
        for statement in statements:
            conn.execute(statement)
    conn.execute("INSERT INTO schema_version (version) VALUES (3)")
    conn.execute(
        "INSERT INTO runs (run_id, workflow, status, principal, parent_run_id, created_ms,"
        " updated_ms, outcome, last_seq) VALUES ('r1', 'wf', 'running', 'alice', NULL, 1, 1,"
        " NULL, 2)"
    )
    conn.execute("INSERT INTO manifests (run_id, seq, payload) VALUES ('r1', 0, '{\"j\":{}}')")
    key = dumps(KEY.to_json())
    conn.execute(
        "INSERT INTO journal (run_id, seq, item, journal_key, executor, superstep, clock_ms,"
        " idempotency_key, payload) VALUES ('r1', 1, 'intent', ?, 'tool:a', 1, 5, 'idem',"
        " '{\"j\":{}}')",
        (key,),
    )
    conn.execute(
        "INSERT INTO journal (run_id, seq, item, record_kind, payload)"
        ' VALUES (\'r1\', 2, \'record\', \'cancel\', \'{"j":{"by":"bob","reason":""}}\')'
    )
    conn.close()


def test_a_version_3_database_is_migrated_and_its_journal_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    version_3_database(path)
    store = SqliteStore(str(path))
    try:
        (version,) = store._conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        assert version == SCHEMA_VERSION
        store.commit("r1", None, [RecordWrite("inbox", {"message": "hi"})])
        journal = store.load_journal("r1")
        assert [i.seq for i in journal.intents] == [1]
        assert journal.records == [
            Record(2, "cancel", {"by": "bob", "reason": ""}),
            Record(3, "inbox", {"message": "hi"}),
        ]
        assert [r.seq for r in store.records_after("r1", 0, ("cancel", "inbox"))] == [2, 3]
        # The intent keys stay unique across the migration.
        with pytest.raises(PlaitError) as caught:
            store.commit("r1", None, [IntentWrite(KEY, "tool:a", {}, 1, 6, "idem")])
        assert caught.value.code == "E020" and "already has an intent" in str(caught.value)
    finally:
        store.close()


def test_a_manifest_supersession_takes_a_seq_no_journal_row_reuses(tmp_path: Path) -> None:
    """Seqs come from the journal and the manifests together (runs.last_seq is not kept)."""
    store = SqliteStore(str(tmp_path / "p.db"))
    try:
        store.create_run(RunInfo("r1", "wf", "running", "alice", None, 1, 1), {"m": 0})
        store.commit("r1", None, [RecordWrite("inbox", {"message": "a"})])
        store.commit("r1", None, [ManifestWrite({"m": 1})])
        store.commit("r1", None, [RecordWrite("inbox", {"message": "b"})])
        seqs = [r.seq for r in store.load_journal("r1").records]
        assert seqs == [1, 3]
        assert len(store.manifests("r1")) == 2
    finally:
        store.close()


def test_the_rebuilt_journal_keeps_its_rows_indexes_and_item_check(tmp_path: Path) -> None:
    """Migration 5 rebuilds the journal table (its CHECK on item, see sqlite_schema):
    rows, the unique effect keys and the records index come through, and an item that
    is none of the four is still refused."""
    path = tmp_path / "old.db"
    version_3_database(path)
    SqliteStore(str(path)).close()
    conn = sqlite3.connect(path)
    try:
        indexes = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'journal'"
                " AND sql IS NOT NULL"
            )
        }
        assert indexes == {"journal_effect_keys", "journal_records"}
        assert conn.execute("SELECT seq, item FROM journal ORDER BY seq").fetchall() == [
            (1, "intent"),
            (2, "record"),
        ]
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            conn.execute(
                "INSERT INTO journal (run_id, seq, item, payload) VALUES ('r1', 9, 'bogus', '{}')"
            )
    finally:
        conn.close()
