"""SQLite schema migrations: a database written by an older plait opens, keeps its runs and
goes on numbering their journals where they stopped."""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from plait.core.canonical import dumps
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import IntentWrite, ManifestWrite, Record, RecordWrite, RunInfo, SqliteStore
from plait.store.schema import migrations
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


def test_a_read_only_open_of_an_old_file_is_refused_and_leaves_it_as_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    version_3_database(path)
    with pytest.raises(PlaitError) as caught:
        SqliteStore(str(path), read_only=True)
    assert caught.value.code == "E020"
    assert str(caught.value) == (
        f"PLAIT-E020 storage error on {path}: database schema version 3 is older than this"
        f" plait ({SCHEMA_VERSION}) and cannot be migrated on a read-only open; open it once"
        " with write access"
    )
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(3,)]
    finally:
        conn.close()
    SqliteStore(str(path)).close()  # a writable open migrates it; read-only opens then work
    store = SqliteStore(str(path), read_only=True)
    try:
        assert [i.seq for i in store.load_journal("r1").intents] == [1]
    finally:
        store.close()


def test_an_open_waits_for_another_process_migrating_the_file_for_longer_than_its_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 5 copies the whole journal: on a large file another process holds the write
    lock for longer than one busy timeout. An opener waits for it and finds the file
    migrated, instead of failing with 'database is locked'."""
    path = tmp_path / "old.db"
    version_3_database(path)
    other = sqlite3.connect(path, isolation_level=None)  # the other process, mid-migration
    other.execute("PRAGMA journal_mode = WAL")  # as plait keeps every file
    other.execute("BEGIN IMMEDIATE")
    for statements in MIGRATIONS[3:]:
        for statement in statements:
            other.execute(statement)
    other.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))

    locks = threading.Semaphore(0)  # one release per lock attempt of the opener
    migrated = threading.Event()
    attempts: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)

        def trace(sql: str) -> None:
            if sql == "BEGIN IMMEDIATE":
                attempts.append(sql)
                locks.release()
                if len(attempts) == 2:  # it waits again: let the other process finish first
                    migrated.wait()

        conn.set_trace_callback(trace)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    opened: list[SqliteStore | BaseException] = []

    def open_store() -> None:
        try:
            opened.append(SqliteStore(str(path), busy_timeout_ms=1))
        except BaseException as exc:
            opened.append(exc)
        finally:
            locks.release()

    opener = threading.Thread(target=open_store)
    opener.start()
    assert locks.acquire(timeout=60)  # its first attempt
    assert locks.acquire(timeout=60)  # its second one (or its end, if it gave up)
    other.execute("COMMIT")
    other.close()
    migrated.set()
    opener.join()
    (store,) = opened
    assert isinstance(store, SqliteStore), store
    try:
        (version,) = store._conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        assert version == SCHEMA_VERSION
        assert [r.seq for r in store.load_journal("r1").records] == [2]
    finally:
        store.close()


_KILL_AT = """
import os, signal, sqlite3, sys
connect = sqlite3.connect
def killed_at(*args, **kwargs):
    conn = connect(*args, **kwargs)
    def trace(sql):
        if sql.startswith(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGKILL)
    conn.set_trace_callback(trace)
    return conn
sqlite3.connect = killed_at
from plait.store import SqliteStore
SqliteStore(sys.argv[1])
"""


@pytest.mark.parametrize("statement", ["DROP TABLE journal", "ALTER TABLE journal_5", "COMMIT"])
def test_a_process_killed_mid_migration_leaves_the_file_at_its_old_version(
    tmp_path: Path, statement: str
) -> None:
    """SIGKILL in the middle of the migration (after the journal copy, before the commit):
    the file stays at version 3 with every row, and the next open migrates it."""
    path = tmp_path / "old.db"
    version_3_database(path)
    script = tmp_path / "kill_at.py"
    script.write_text(_KILL_AT)
    done = subprocess.run(
        [sys.executable, str(script), str(path), statement], capture_output=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(3,)]
        assert conn.execute("SELECT seq, item FROM journal ORDER BY seq").fetchall() == [
            (1, "intent"),
            (2, "record"),
        ]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    store = SqliteStore(str(path))
    try:
        (version,) = store._conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        assert version == SCHEMA_VERSION
        assert [i.seq for i in store.load_journal("r1").intents] == [1]
    finally:
        store.close()


SHIPPED_MIGRATIONS = {
    "sqlite": "28f05814ca0d33fd5666f35f37e7315f8e66ad3948be51ff72bca8aa8c073480",
    "postgres": "2ac779fe3d0746a565b97c361d2bd38cbf8f3abc437476fda5912c49a7690361",
}
"""SHA-256 of every shipped migration's statements, per dialect: a database migrated by
any earlier plait must meet exactly these again (SQLite keeps each CREATE's text)."""


def test_the_shipped_migrations_are_never_edited_only_appended_to():
    for dialect, pinned in SHIPPED_MIGRATIONS.items():
        shipped = migrations(dialect)
        text = json.dumps(shipped[: {"sqlite": 5, "postgres": 3}[dialect]])
        assert hashlib.sha256(text.encode()).hexdigest() == pinned, dialect
    assert len(migrations("sqlite")) == SCHEMA_VERSION


def test_a_store_with_rows_older_plait_cannot_read_is_past_their_version(tmp_path: Path):
    # Packed checkpoints, shared manifests and Merkle digests came with migration 11, so
    # a plait of version 10 or less refuses the store (E020) instead of misreading them.
    store = SqliteStore(str(tmp_path / "p.db"))
    try:
        conn = store._conn
        assert SCHEMA_VERSION >= 11
        forms = conn.execute("SELECT form, since FROM row_forms ORDER BY form").fetchall()
        assert forms == [("merkle-digest", 11), ("packed-checkpoint", 11), ("shared-manifest", 11)]
    finally:
        store.close()
