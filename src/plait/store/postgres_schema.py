"""Applying ``schema.py``'s migrations to a PostgreSQL database when a store opens.

Tables are created in the first schema of the connection's ``search_path``, so one
database can hold several plait installations (``?options=-c%20search_path%3Dmine``).

A database records the number of migrations it has had in ``schema_version``; opening
applies the missing ones in one transaction, under an advisory lock (per database) so
that processes opening the same empty database at once migrate it exactly once; a
database that a newer plait has migrated further is refused (PLAIT-E020). DDL is
transactional in PostgreSQL: a migration is applied entirely or not at all. This module
runs DDL only.
"""

from __future__ import annotations

from typing import Any

import psycopg

from plait.core.errors import PlaitError
from plait.store.schema import migrations

MIGRATION_LOCK = 0x706C_6169_745F_7363  # "plait_sc": the advisory lock key, per database

MIGRATIONS = migrations("postgres")
"""Each migration's statements, as ``schema.py`` writes them for PostgreSQL."""

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
