"""A SQLite store folds its WAL into the database file from a thread of its own (store/wal.py),
so no wave's commit waits for a checkpoint; SQLite's automatic checkpoint is the backstop."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from plait.store import RecordWrite, RunInfo, SqliteStore
from plait.store.wal import BACKSTOP_PAGES, CHECKPOINT_EVERY


def _store_with_run(path: Path) -> SqliteStore:
    store = SqliteStore(str(path))
    store.create_run(RunInfo("r1", "wf", "running", "alice", None, 1, 1), {})
    return store


def test_the_thread_checkpoints_after_enough_commits_and_the_data_reaches_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "p.db"
    store = _store_with_run(path)
    try:
        checkpointer = store._checkpointer
        assert checkpointer is not None and checkpointer._thread is None  # started on need
        before = path.stat().st_size
        for i in range(CHECKPOINT_EVERY):
            store.commit("r1", None, [RecordWrite("inbox", {"message": "x" * 2000, "i": i})])
        assert checkpointer.wait(1, timeout_s=60), "no checkpoint after CHECKPOINT_EVERY commits"
        assert path.stat().st_size > before  # the WAL's pages were copied into the file
        # The store's own connection checkpoints only as a backstop.
        (pages,) = store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        assert pages == BACKSTOP_PAGES
        assert len(store.load_journal("r1").records) == CHECKPOINT_EVERY
    finally:
        store.close()
    assert checkpointer._thread is None
    # Everything is in the database file once the store is closed.
    conn = sqlite3.connect(path)
    try:
        (rows,) = conn.execute("SELECT COUNT(*) FROM journal WHERE run_id = 'r1'").fetchone()
        assert rows == CHECKPOINT_EVERY
    finally:
        conn.close()


def test_few_commits_start_no_thread_and_close_stops_a_started_one(tmp_path: Path) -> None:
    store = _store_with_run(tmp_path / "p.db")
    checkpointer = store._checkpointer
    assert checkpointer is not None
    store.commit("r1", None, [RecordWrite("inbox", {"message": "hi"})])
    assert checkpointer._thread is None
    for _ in range(CHECKPOINT_EVERY):
        store.commit("r1", None, [RecordWrite("inbox", {"message": "hi"})])
    thread = checkpointer._thread
    assert thread is not None
    store.close()
    assert not thread.is_alive()


def test_read_only_and_in_memory_stores_have_no_checkpointer(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    _store_with_run(path).close()
    read_only = SqliteStore(str(path), read_only=True)
    memory = SqliteStore(":memory:")
    try:
        assert read_only._checkpointer is None and memory._checkpointer is None
    finally:
        read_only.close()
        memory.close()


def test_the_thread_checkpoints_the_store_file_after_the_process_changed_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store opened by a relative path: the thread connects later, to the same file."""
    monkeypatch.chdir(tmp_path)
    store = _store_with_run(Path("p.db"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    try:
        monkeypatch.chdir(elsewhere)
        checkpointer = store._checkpointer
        assert checkpointer is not None
        for _ in range(CHECKPOINT_EVERY):
            store.commit("r1", None, [RecordWrite("inbox", {"message": "hi"})])
        assert checkpointer.wait(1, timeout_s=60)
        assert not (elsewhere / "p.db").exists()
    finally:
        store.close()
