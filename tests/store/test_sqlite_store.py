"""What only the SQLite back end promises: its file, its pragmas, its URLs, its locking."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from plait.core.errors import PlaitError
from plait.store import RecordWrite, RunInfo, SqliteStore, Store, open_store
from plait.store.sqlite_schema import SCHEMA_VERSION


def make_run(store: Store, run_id: str = "r1") -> None:
    store.create_run(RunInfo(run_id, "wf", "running", "alice", None, 1, 1), {"m": 1})


def code_of(action: object) -> str:
    assert callable(action)
    with pytest.raises(PlaitError) as caught:
        action()
    return caught.value.code


def test_the_file_is_in_wal_mode_with_synchronous_by_durability(tmp_path: Path) -> None:
    normal = SqliteStore(tmp_path / "a.db")
    strict = SqliteStore(tmp_path / "b.db", durability="strict")
    try:
        assert normal._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert normal._conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert strict._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        normal.close()
        strict.close()


def test_an_unknown_durability_is_e020(tmp_path: Path) -> None:
    assert code_of(lambda: SqliteStore(tmp_path / "a.db", durability="paranoid")) == "E020"


def test_an_empty_file_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


def test_reopening_a_migrated_database_changes_nothing(tmp_path: Path) -> None:
    first = SqliteStore(tmp_path / "a.db")
    make_run(first)
    first.close()
    again = SqliteStore(tmp_path / "a.db")
    assert again.get_run("r1").run_id == "r1"
    again.close()


def test_a_file_that_is_not_a_database_is_e020(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    assert code_of(lambda: SqliteStore(path)) == "E020"


def test_a_locked_database_is_e020_once_the_busy_timeout_passes(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = SqliteStore(path, busy_timeout_ms=0)
    make_run(store)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(PlaitError) as caught:
            store.commit("r1", None, [RecordWrite("clock", {"ms": 1})])
        assert caught.value.code == "E020"
        assert "locked" in str(caught.value)
    finally:
        other.execute("ROLLBACK")
        other.close()
    store.commit("r1", None, [RecordWrite("clock", {"ms": 1})])  # usable again
    store.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_a_read_only_file_is_e020(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = SqliteStore(path)
    make_run(store)
    store.close()
    for name in os.listdir(tmp_path):
        os.chmod(tmp_path / name, 0o444)
    os.chmod(tmp_path, 0o555)
    try:

        def write() -> None:
            again = SqliteStore(path)
            try:
                again.commit("r1", None, [RecordWrite("clock", {"ms": 1})])
            finally:
                again.close()

        assert code_of(write) == "E020"
    finally:
        os.chmod(tmp_path, 0o755)


def test_two_store_objects_share_one_numbering(tmp_path: Path) -> None:
    driver, responder = SqliteStore(tmp_path / "a.db"), SqliteStore(tmp_path / "a.db")
    make_run(driver)
    driver.commit("r1", None, [RecordWrite("clock", {"ms": 1})])
    responder.commit("r1", None, [RecordWrite("answer", {"v": 1})])
    driver.commit("r1", None, [RecordWrite("clock", {"ms": 2})])
    assert [(r.seq, r.kind) for r in driver.load_journal("r1").records] == [
        (1, "clock"),
        (2, "answer"),
        (3, "clock"),
    ]
    driver.close()
    responder.close()


def test_a_closed_store_is_e020(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "a.db")
    store.close()
    assert code_of(lambda: store.list_runs()) == "E020"


# --- open_store ---


def test_open_store_reads_relative_absolute_and_bare_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for url, expected in [
        ("sqlite:///rel/one.db", tmp_path / "rel" / "one.db"),
        (f"sqlite:///{tmp_path}/abs/two.db", tmp_path / "abs" / "two.db"),
        ("bare/three.db", tmp_path / "bare" / "three.db"),
        (str(tmp_path / "deep" / "er" / "four.db"), tmp_path / "deep" / "er" / "four.db"),
    ]:
        store = open_store(url)
        assert isinstance(store, SqliteStore)
        store.close()
        assert expected.is_file(), url


def test_open_store_passes_durability_on(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "a.db"), durability="strict")
    assert isinstance(store, SqliteStore) and store.durability == "strict"
    store.close()


def test_an_in_memory_database_works_for_scripts() -> None:
    store = open_store("sqlite:///:memory:")
    make_run(store)
    assert store.get_run("r1").run_id == "r1"
    store.close()


@pytest.mark.parametrize("url", ["mysql://localhost/plait", "sqlite://relative.db", "sqlite:///"])
def test_unsupported_urls_are_e020(url: str) -> None:
    assert code_of(lambda: open_store(url)) == "E020"
