"""Applying ``schema.py``'s migrations to a SQLite file when a store opens.

A database records the number of migrations it has had in ``schema_version``; opening
applies the missing ones in one transaction, and refuses (PLAIT-E020) a database that a
newer plait has migrated further. Another process migrating the same file is waited for.
This module runs DDL only; it never reads or writes run data.
"""

from __future__ import annotations

import sqlite3

from plait.core.errors import PlaitError
from plait.store.schema import migrations

MIGRATIONS = migrations("sqlite")
"""Each migration's statements, as ``schema.py`` writes them for SQLite."""

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
