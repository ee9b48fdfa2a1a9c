"""Store fixtures: every conformance test runs once per back end.

A back end is a ``Backend``: it opens stores on one database and knows how to break that
database the ways the tests need (fill the disk, corrupt a node, pretend a newer plait
migrated it). Adding PostgreSQL means adding a ``PostgresBackend`` and its name to
``BACKENDS``; the tests themselves do not change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import pytest

from plait.store import SqliteStore, Store
from plait.store.sqlite_schema import SCHEMA_VERSION

BACKENDS = ["sqlite"]


class Backend(Protocol):
    name: str

    def open(self) -> Store:
        """A new store object on this back end's one database."""
        ...

    def open_read_only(self) -> Store:
        """A store that may read the database but whose writes the database refuses."""
        ...

    def fill_disk(self, store: Store) -> None:
        """From now on, any write that needs more space fails as if the disk were full."""
        ...

    def corrupt_nodes(self, marker: bytes) -> int:
        """Flip bytes of every stored node containing ``marker``; returns how many."""
        ...

    def tamper_checkpoint_hash(self, run_id: str, seq: int) -> None:
        """Overwrite the SHA-256 recorded for a checkpoint."""
        ...

    def claim_newer_schema(self) -> None:
        """Mark the database as migrated by a plait newer than this one."""
        ...


class SqliteBackend:
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self) -> Store:
        return SqliteStore(self.path)

    def open_read_only(self) -> Store:
        SqliteStore(self.path).close()  # migrated first, as a deployed database would be
        return SqliteStore(self.path, read_only=True)

    def fill_disk(self, store: Store) -> None:
        assert isinstance(store, SqliteStore)
        conn = store._conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {int(pages)}")

    def corrupt_nodes(self, marker: bytes) -> int:
        with self._raw() as conn:
            rows = conn.execute("SELECT hash, data FROM nodes").fetchall()
            hit = [(bytes(data).replace(marker, marker[::-1]), h) for h, data in rows]
            hit = [(data, h) for data, h in hit if marker[::-1] in data]
            conn.executemany("UPDATE nodes SET data = ? WHERE hash = ?", hit)
            return len(hit)

    def tamper_checkpoint_hash(self, run_id: str, seq: int) -> None:
        with self._raw() as conn:
            conn.execute(
                "UPDATE journal SET sha256 = ? WHERE run_id = ? AND seq = ?",
                ("0" * 64, run_id, seq),
            )

    def claim_newer_schema(self) -> None:
        SqliteStore(self.path).close()
        with self._raw() as conn:
            conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))

    @contextmanager
    def _raw(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path)
        try:
            yield conn
            conn.commit()
        finally:
            conn.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return SqliteBackend(tmp_path / "plait.db")
    raise AssertionError(f"no back end {request.param!r}")


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    opened = backend.open()
    yield opened
    opened.close()
