"""The SQLite schema as an append-only list of migrations, applied when a store opens.

A database records the number of migrations it has had in ``schema_version``; opening
applies the missing ones in one transaction, and refuses (PLAIT-E020) a database that a
newer plait has migrated further. Never edit or reorder a migration that has shipped:
append a new one. This module holds DDL only; it never reads or writes run data.
"""

from __future__ import annotations

import sqlite3

from plait.core.errors import PlaitError

_STATUSES = (
    "'queued','running','parked','completed','failed','stalled','canceled','budget_exhausted'"
)

_JOURNAL_COLUMNS = (
    "run_id, seq, item, journal_key, executor, record_kind, superstep, clock_ms,"
    " idempotency_key, journal_bytes, sha256, size, payload"
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: runs, manifests, the journal, content-addressed nodes, leases.
    (
        f"""CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            workflow TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ({_STATUSES})),
            principal TEXT NOT NULL,
            parent_run_id TEXT,
            created_ms INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL,
            outcome TEXT,
            last_seq INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX runs_by_created ON runs (created_ms)",
        "CREATE INDEX runs_by_status ON runs (status, created_ms)",
        # seq 0 is the original manifest; a supersession takes the next journal seq.
        """CREATE TABLE manifests (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        # One row per journal item; payload is the canonical text of an encoded form
        # (chunks.py): small values inline, large ones a reference into nodes.
        """CREATE TABLE journal (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            item TEXT NOT NULL CHECK (item IN ('intent', 'result', 'checkpoint', 'record')),
            journal_key TEXT,
            executor TEXT,
            record_kind TEXT,
            superstep INTEGER,
            clock_ms INTEGER,
            idempotency_key TEXT,
            journal_bytes INTEGER,
            sha256 TEXT,
            size INTEGER,
            payload TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        """CREATE UNIQUE INDEX journal_intent_keys ON journal (run_id, journal_key)
            WHERE item = 'intent'""",
        """CREATE UNIQUE INDEX journal_result_keys ON journal (run_id, journal_key)
            WHERE item = 'result'""",
        # run_id is the run whose commit first stored the node (for stored_bytes).
        """CREATE TABLE nodes (
            hash TEXT PRIMARY KEY,
            data BLOB NOT NULL,
            run_id TEXT NOT NULL
        )""",
        """CREATE TABLE leases (
            run_id TEXT PRIMARY KEY,
            host TEXT,
            pid INTEGER,
            started_ms INTEGER,
            token INTEGER NOT NULL,
            expires_ms INTEGER NOT NULL
        )""",
    ),
    # 2: workers (ARCHITECTURE.md §11). wake_ms: when a parked (or budget-exhausted) run
    # wants driving again: its earliest timer or ask expiry, or "now" once an answer, a
    # cancel or a budget raise is journaled; NULL while nothing is due. The partial index
    # keeps claiming cheap however many finished runs the table holds.
    (
        "ALTER TABLE runs ADD COLUMN wake_ms INTEGER",
        """CREATE INDEX runs_unfinished ON runs (created_ms)
            WHERE status IN ('queued', 'running', 'parked', 'budget_exhausted')""",
    ),
    # 3: a driver polls for cancels and steering messages between waves: find the
    # records of a kind after a seq without scanning the run's whole journal.
    (
        """CREATE INDEX journal_records ON journal (run_id, record_kind, seq)
            WHERE item = 'record'""",
    ),
    # 4: fewer pages written per wave. One unique index for intents and results (a wave
    # writes both), feed records (one per wave, never searched by kind) kept out of the
    # records index, and runs.last_seq no longer maintained: a commit takes the next seq
    # from the journal and manifests themselves (see SqliteStore.commit).
    (
        "DROP INDEX journal_intent_keys",
        "DROP INDEX journal_result_keys",
        """CREATE UNIQUE INDEX journal_effect_keys ON journal (run_id, journal_key, item)
            WHERE journal_key IS NOT NULL""",
        "DROP INDEX journal_records",
        """CREATE INDEX journal_records ON journal (run_id, record_kind, seq)
            WHERE item = 'record' AND record_kind <> 'feed'""",
    ),
    # 5: the journal's CHECK on item written as comparisons. SQLite evaluates a CHECK's
    # IN (...) list by building a temporary table for every row inserted, which cost more
    # than the rest of a wave's inserts; OR-ed comparisons are evaluated in place. A CHECK
    # cannot be altered, so the table is rebuilt (same columns, rows and indexes).
    (
        """CREATE TABLE journal_5 (
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            item TEXT NOT NULL CHECK (item = 'intent' OR item = 'result'
                                      OR item = 'checkpoint' OR item = 'record'),
            journal_key TEXT,
            executor TEXT,
            record_kind TEXT,
            superstep INTEGER,
            clock_ms INTEGER,
            idempotency_key TEXT,
            journal_bytes INTEGER,
            sha256 TEXT,
            size INTEGER,
            payload TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        ) WITHOUT ROWID""",
        f"INSERT INTO journal_5 ({_JOURNAL_COLUMNS}) SELECT {_JOURNAL_COLUMNS} FROM journal",
        "DROP TABLE journal",
        "ALTER TABLE journal_5 RENAME TO journal",
        """CREATE UNIQUE INDEX journal_effect_keys ON journal (run_id, journal_key, item)
            WHERE journal_key IS NOT NULL""",
        """CREATE INDEX journal_records ON journal (run_id, record_kind, seq)
            WHERE item = 'record' AND record_kind <> 'feed'""",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes and understands."""

MIGRATION_WAITS = 120
"""Busy timeouts (5 s each by default: ten minutes) an opener waits for another process
that is migrating the same file before it gives up (PLAIT-E020 ``database is locked``)."""


def schema_version(conn: sqlite3.Connection) -> int:
    """The database's version; 0 for a database plait has never migrated (an empty file)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def migrate(conn: sqlite3.Connection, where: str) -> None:
    """Bring the database up to SCHEMA_VERSION; ``conn`` must be in autocommit mode.

    Reads first without a write lock, so an up-to-date database on read-only media opens;
    an older one opened read-only is refused (PLAIT-E020) with nothing changed.
    """
    version = schema_version(conn)
    _refuse_newer(version, where)
    if version == SCHEMA_VERSION:
        return
    if not _lock_for_migration(conn, where):
        return  # another process migrated the file while this one waited
    try:
        version = schema_version(conn)  # another process may have migrated meanwhile
        _refuse_newer(version, where)
        if version == 0:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        for statements in MIGRATIONS[version:]:
            for statement in statements:
                conn.execute(statement)
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error) and _code(exc) == sqlite3.SQLITE_READONLY:
            raise PlaitError(
                "E020",
                f"storage error on {where}: database schema version {version} is older than"
                f" this plait ({SCHEMA_VERSION}) and cannot be migrated on a read-only open;"
                " open it once with write access",
            ) from exc
        raise


def _lock_for_migration(conn: sqlite3.Connection, where: str) -> bool:
    """Take the write lock to migrate; False if another process migrated the file meanwhile.

    Another process migrating a large file holds the lock for longer than one busy timeout
    (migration 5 copies the whole journal), so a busy lock is waited for again, up to
    ``MIGRATION_WAITS`` busy timeouts, for as long as the file is still at an old version.
    """
    for attempt in range(MIGRATION_WAITS):
        try:
            conn.execute("BEGIN IMMEDIATE")
            return True
        except sqlite3.OperationalError as exc:
            if _code(exc) != sqlite3.SQLITE_BUSY or attempt == MIGRATION_WAITS - 1:
                raise
        version = schema_version(conn)
        _refuse_newer(version, where)
        if version == SCHEMA_VERSION:
            return False
    raise AssertionError("unreachable")


def _code(exc: sqlite3.Error) -> int:
    """The primary SQLite result code of an error (extended codes folded)."""
    return int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def _refuse_newer(version: int, where: str) -> None:
    if version > SCHEMA_VERSION:
        raise PlaitError(
            "E020",
            f"storage error on {where}: database schema version {version} is newer than "
            f"this plait ({SCHEMA_VERSION}); upgrade plait",
        )
