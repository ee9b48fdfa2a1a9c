"""The PostgreSQL schema as an append-only list of migrations, applied when a store opens.

It mirrors ``sqlite_schema.py`` table for table and column for column (``rows.py`` maps
both), with PostgreSQL types: ``BIGINT`` for every integer, ``BYTEA`` for node bytes, and
an identity column ``runs.row_order`` standing in for SQLite's implicit ``rowid`` (the
tie-break of ``list_runs``). Tables are created in the first schema of the connection's
``search_path``, so one database can hold several plait installations
(``?options=-c%20search_path%3Dmine``).

A database records the number of migrations it has had in ``schema_version``; opening
applies the missing ones in one transaction, under an advisory lock (per database) so
that processes opening the same empty database at once migrate it exactly once; a
database that a newer plait has migrated further is refused (PLAIT-E020). DDL is
transactional in PostgreSQL: a migration is applied entirely or not at all. Never edit or
reorder a migration that has shipped: append a new one. This module holds DDL only.
"""

from __future__ import annotations

from typing import Any

import psycopg

from plait.core.errors import PlaitError

_STATUSES = (
    "'queued','running','parked','completed','failed','stalled','canceled','budget_exhausted'"
)

MIGRATION_LOCK = 0x706C_6169_745F_7363  # "plait_sc": the advisory lock key, per database

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: runs, manifests, the journal, content-addressed nodes, leases.
    (
        f"""CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            workflow TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ({_STATUSES})),
            principal TEXT NOT NULL,
            parent_run_id TEXT,
            created_ms BIGINT NOT NULL,
            updated_ms BIGINT NOT NULL,
            outcome TEXT,
            last_seq BIGINT NOT NULL DEFAULT 0,
            row_order BIGINT GENERATED ALWAYS AS IDENTITY
        )""",
        "CREATE INDEX runs_by_created ON runs (created_ms, row_order)",
        "CREATE INDEX runs_by_status ON runs (status, created_ms, row_order)",
        # seq 0 is the original manifest; a supersession takes the next journal seq.
        """CREATE TABLE manifests (
            run_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        # One row per journal item; payload is the canonical text of an encoded form
        # (chunks.py): small values inline, large ones a reference into nodes.
        """CREATE TABLE journal (
            run_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            item TEXT NOT NULL CHECK (item IN ('intent', 'result', 'checkpoint', 'record')),
            journal_key TEXT,
            executor TEXT,
            record_kind TEXT,
            superstep BIGINT,
            clock_ms BIGINT,
            idempotency_key TEXT,
            journal_bytes BIGINT,
            sha256 TEXT,
            size BIGINT,
            payload TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE UNIQUE INDEX journal_intent_keys ON journal (run_id, journal_key)
            WHERE item = 'intent'""",
        """CREATE UNIQUE INDEX journal_result_keys ON journal (run_id, journal_key)
            WHERE item = 'result'""",
        # run_id is the run whose commit first stored the node (for stored_bytes).
        """CREATE TABLE nodes (
            hash TEXT PRIMARY KEY,
            data BYTEA NOT NULL,
            run_id TEXT NOT NULL
        )""",
        """CREATE TABLE leases (
            run_id TEXT PRIMARY KEY,
            host TEXT,
            pid BIGINT,
            started_ms BIGINT,
            token BIGINT NOT NULL,
            expires_ms BIGINT NOT NULL
        )""",
    ),
    # 2: workers (ARCHITECTURE.md §11). wake_ms: when a parked (or budget-exhausted) run
    # wants driving again: its earliest timer or ask expiry, or "now" once an answer, a
    # cancel or a budget raise is journaled; NULL while nothing is due. The partial index
    # keeps claiming cheap however many finished runs the table holds.
    (
        "ALTER TABLE runs ADD COLUMN wake_ms BIGINT",
        """CREATE INDEX runs_unfinished ON runs (created_ms, row_order)
            WHERE status IN ('queued', 'running', 'parked', 'budget_exhausted')""",
    ),
    # 3: a driver polls for cancels and steering messages between waves: find the
    # records of a kind after a seq without scanning the run's whole journal.
    (
        """CREATE INDEX journal_records ON journal (run_id, record_kind, seq)
            WHERE item = 'record'""",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes and understands."""

Connection = psycopg.Connection[Any]


def schema_version(conn: Connection) -> int:
    """The database's version; 0 for a database plait has never migrated (an empty one)."""
    row = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def migrate(conn: Connection, where: str) -> None:
    """Bring the database up to SCHEMA_VERSION; ``conn`` must be in autocommit mode.

    Reads first without any lock, so an up-to-date database opens on a read-only
    connection (a standby, ``default_transaction_read_only``) and costs nothing more.
    """
    version = schema_version(conn)
    _refuse_newer(version, where)
    if version == SCHEMA_VERSION:
        return
    # A session lock taken BEFORE the transaction: a transaction begun before another
    # process's migration committed may still see the catalog without its tables.
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        with conn.transaction():
            version = schema_version(conn)  # another process may have migrated meanwhile
            _refuse_newer(version, where)
            if version == SCHEMA_VERSION:
                return
            if version == 0:
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    conn.execute(statement)
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))
    finally:
        if not conn.broken:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def _refuse_newer(version: int, where: str) -> None:
    if version > SCHEMA_VERSION:
        raise PlaitError(
            "E020",
            f"storage error on {where}: database schema version {version} is newer than "
            f"this plait ({SCHEMA_VERSION}); upgrade plait",
        )
