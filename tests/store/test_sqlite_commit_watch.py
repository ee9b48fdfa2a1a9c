"""Polling for cancels between waves on SQLite without a read transaction.

A driver asks ``records_after`` between every two waves. The store answers "nothing new"
without asking SQLite for its data version while the WAL index's header shows that
nobody but itself committed since it last asked (``store/wal_index.py``); any commit by
another connection, before or after the store's own, sends it back to SQLite, so a
cancel is never missed.
"""

from __future__ import annotations

import fcntl
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from plait.store import RecordWrite, RunInfo, SqliteStore
from plait.store.base import POLLED_KINDS
from support.leased_waves import RUN, leased, wave


def _polls(store: SqliteStore, waves: range, token: int) -> list[str]:
    """The statements the store runs for these waves' commits and the polls after each."""
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        for n in waves:
            store.commit(RUN, token, wave(n))
            assert store.records_after(RUN, 0, POLLED_KINDS) == []
    finally:
        store._conn.set_trace_callback(None)
    return statements


def test_polls_between_the_stores_own_waves_ask_sqlite_nothing(tmp_path: Path) -> None:
    store, token = leased(tmp_path / "a.db")
    try:
        assert store.records_after(RUN, 0, POLLED_KINDS) == []  # asks once
        statements = _polls(store, range(2, 12), token)
    finally:
        store.close()
    assert not [s for s in statements if "data_version" in s], statements
    assert len(statements) == 10  # one fenced INSERT a wave, nothing for the polls


def _cancel(path: Path) -> None:
    """A cancel journaled by another connection (as ``plait cancel`` in another process)."""
    other = SqliteStore(path)
    try:
        other.commit(RUN, None, [RecordWrite("cancel", {"by": "bob", "reason": "stop"})])
    finally:
        other.close()


def test_a_cancel_committed_just_before_the_stores_own_wave_is_found(tmp_path: Path) -> None:
    """The store's own commit follows another's: the header's count moved by two, not
    one, so the next poll asks SQLite and reads the cancel."""
    path = tmp_path / "a.db"
    store, token = leased(path)
    try:
        assert store.records_after(RUN, 0, POLLED_KINDS) == []
        _cancel(path)
        store.commit(RUN, token, wave(2))
        found = store.records_after(RUN, 0, POLLED_KINDS)
    finally:
        store.close()
    assert [(r.kind, r.body["by"]) for r in found] == [("cancel", "bob")]


def test_a_cancel_committed_after_the_stores_own_wave_is_found(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store, token = leased(path)
    try:
        _polls(store, range(2, 4), token)
        _cancel(path)
        found = store.records_after(RUN, 0, POLLED_KINDS)
    finally:
        store.close()
    assert [r.kind for r in found] == ["cancel"]


def test_a_commit_of_any_other_connection_sends_the_poll_back_to_sqlite(
    tmp_path: Path,
) -> None:
    """Even one that journals nothing the poll looks for: the store cannot tell what it
    wrote without asking."""
    path = tmp_path / "a.db"
    store, token = leased(path)
    try:
        _polls(store, range(2, 4), token)
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("UPDATE runs SET updated_ms = updated_ms + 1 WHERE run_id = ?", (RUN,))
        raw.close()
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        assert store.records_after(RUN, 0, POLLED_KINDS) == []
        store._conn.set_trace_callback(None)
    finally:
        store.close()
    assert any("data_version" in s for s in statements)


def test_a_database_in_memory_polls_as_before() -> None:
    store = SqliteStore(":memory:")
    try:
        store.create_run(RunInfo(RUN, "wf", "running", "alice", None, 1, 1), {"m": 1})
        assert store.records_after(RUN, 0, POLLED_KINDS) == []
        store.commit(RUN, None, [RecordWrite("cancel", {"by": "bob", "reason": "stop"})])
        assert store.records_after(RUN, 0, POLLED_KINDS)[0].kind == "cancel"
    finally:
        store.close()


_DMS_LOCK_AT = 128
"""The byte of the ``-shm`` file every process using the WAL index holds a shared lock on
(SQLite's "dead-man switch": without it, the next process to open the database rebuilds
the index under the ones using it)."""

_LOCK_HELD = """
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDWR)
query = struct.pack("@hhqqi", fcntl.F_WRLCK, os.SEEK_SET, int(sys.argv[2]), 1, 0)
print(struct.unpack("@hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, query))[0])
"""


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc and POSIX locks as Linux has them")
def test_opening_a_store_keeps_every_lock_sqlite_holds_on_the_wal_index(tmp_path: Path) -> None:
    """The poll reads the header through SQLite's own descriptor: opening and closing one
    of its own would drop every lock this process holds on the file (POSIX), and another
    process would find the WAL index unused."""
    path = tmp_path / "a.db"
    first, second = SqliteStore(path), SqliteStore(path)
    try:
        second.records_after(RUN, 0, POLLED_KINDS)
        shm = f"{path}-shm"
        held = subprocess.run(
            [sys.executable, "-c", _LOCK_HELD, shm, str(_DMS_LOCK_AT)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    finally:
        second.close()
        first.close()
    assert int(held.stdout) == fcntl.F_RDLCK  # this process's shared lock, still there
