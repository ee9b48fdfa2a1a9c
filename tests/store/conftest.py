"""Store fixtures: every conformance test runs once per back end.

A back end is a ``Backend``: it opens stores on one database and knows how to break that
database the ways the tests need (fill the disk, corrupt a node, pretend a newer plait
migrated it). Adding PostgreSQL means adding a ``PostgresBackend`` and its name to
``BACKENDS``; the tests themselves do not change.

The PostgreSQL back end gives every test an empty schema of the session's database
(``postgres_url`` in tests/conftest.py); it skips when no server answers, or fails under
``PLAIT_REQUIRE_POSTGRES=1``. psycopg is imported only by the PostgreSQL back end.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import pytest

from plait.store import SqliteStore, Store
from plait.store.sqlite_schema import SCHEMA_VERSION

BACKENDS = ["sqlite", "postgres"]


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

    def tamper_checkpoint_payload(self, run_id: str, seq: int, old: str, new: str) -> None:
        """Replace ``old`` with ``new`` in a checkpoint row's payload text."""
        ...

    def tamper_journal_key(self, run_id: str, seq: int, old: str, new: str) -> None:
        """Replace ``old`` with ``new`` in a journal row's ``journal_key`` text."""
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

    def tamper_checkpoint_payload(self, run_id: str, seq: int, old: str, new: str) -> None:
        with self._raw() as conn:
            conn.execute(
                "UPDATE journal SET payload = replace(payload, ?, ?) WHERE run_id = ? AND seq = ?",
                (old, new, run_id, seq),
            )

    def tamper_journal_key(self, run_id: str, seq: int, old: str, new: str) -> None:
        with self._raw() as conn:
            conn.execute(
                "UPDATE journal SET journal_key = replace(journal_key, ?, ?)"
                " WHERE run_id = ? AND seq = ?",
                (old, new, run_id, seq),
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


class PostgresBackend:
    """One empty schema of the session database (its URL selects it via ``search_path``)."""

    name = "postgres"

    def __init__(self, url: str, read_only_url: str) -> None:
        self.url = url
        self.read_only_url = read_only_url

    def open(self) -> Store:
        from plait.store.postgres import PostgresStore

        return PostgresStore(self.url)

    def open_read_only(self) -> Store:
        """Every transaction of this store's sessions is read-only, as on a standby."""
        from plait.store.postgres import PostgresStore

        PostgresStore(self.url).close()  # migrated first, as a deployed database would be
        return PostgresStore(self.read_only_url)

    def fill_disk(self, store: Store) -> None:
        """Inserts from now on fail with SQLSTATE 53100 (disk_full), as the server would."""
        with self._raw() as conn:
            conn.execute(
                "CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " RAISE EXCEPTION 'could not extend file: No space left on device'"
                " USING ERRCODE = 'disk_full'; END $$"
            )
            for table in ("runs", "manifests", "journal", "nodes", "leases"):
                conn.execute(
                    f"CREATE TRIGGER disk_full BEFORE INSERT ON {table}"
                    " FOR EACH STATEMENT EXECUTE FUNCTION disk_full()"
                )

    def corrupt_nodes(self, marker: bytes) -> int:
        with self._raw() as conn:
            rows = conn.execute("SELECT hash, data FROM nodes").fetchall()
            hit = [(bytes(data).replace(marker, marker[::-1]), h) for h, data in rows]
            hit = [(data, h) for data, h in hit if marker[::-1] in data]
            conn.cursor().executemany("UPDATE nodes SET data = %s WHERE hash = %s", hit)
            return len(hit)

    def tamper_checkpoint_hash(self, run_id: str, seq: int) -> None:
        with self._raw() as conn:
            conn.execute(
                "UPDATE journal SET sha256 = %s WHERE run_id = %s AND seq = %s",
                ("0" * 64, run_id, seq),
            )

    def tamper_checkpoint_payload(self, run_id: str, seq: int, old: str, new: str) -> None:
        with self._raw() as conn:
            conn.execute(
                "UPDATE journal SET payload = replace(payload, %s, %s)"
                " WHERE run_id = %s AND seq = %s",
                (old, new, run_id, seq),
            )

    def tamper_journal_key(self, run_id: str, seq: int, old: str, new: str) -> None:
        with self._raw() as conn:
            conn.execute(
                "UPDATE journal SET journal_key = replace(journal_key, %s, %s)"
                " WHERE run_id = %s AND seq = %s",
                (old, new, run_id, seq),
            )

    def claim_newer_schema(self) -> None:
        from plait.store.postgres_schema import SCHEMA_VERSION as PG_SCHEMA_VERSION

        self.open().close()
        with self._raw() as conn:
            conn.execute("UPDATE schema_version SET version = %s", (PG_SCHEMA_VERSION + 1,))

    @contextmanager
    def _raw(self) -> Iterator[Any]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            yield conn


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return SqliteBackend(tmp_path / "plait.db")
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        server = request.getfixturevalue("postgres")
        return PostgresBackend(url, server.with_options(url, "default_transaction_read_only=on"))
    raise AssertionError(f"no back end {request.param!r}")


@pytest.fixture
def store(backend: Backend) -> Iterator[Store]:
    opened = backend.open()
    yield opened
    opened.close()
