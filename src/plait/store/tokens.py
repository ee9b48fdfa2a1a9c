"""API tokens in the SQL back ends: the statements both run, on the caller's connection.

A row maps a principal to its role and the SHA-256 of its token (``server/tokens.py``
makes tokens and decides what a role may do); the token itself is never stored. One
token per principal: adding a principal's token again replaces it (the old one stops
working at once), revoking deletes the row.

Rules as ``sql.py``: parameterized SQL only; this module never opens, commits or rolls
back a transaction (the back end does) and never reads the clock.
"""

from __future__ import annotations

from typing import Any

from plait.store.records import TokenRow
from plait.store.sql import Connection, Dialect

COLUMNS = "principal, role, digest, created_ms"


def _row(values: Any) -> TokenRow:
    principal, role, digest, created = values
    return TokenRow(principal, role, digest, int(created))


def put(conn: Connection, d: Dialect, row: TokenRow) -> bool:
    """Store ``row``, replacing the principal's token; True when it had none."""
    removed = conn.execute(d.q("DELETE FROM tokens WHERE principal = ?"), (row.principal,))
    conn.execute(
        d.q(f"INSERT INTO tokens ({COLUMNS}) VALUES (?, ?, ?, ?)"),
        (row.principal, row.role, row.digest, row.created_ms),
    )
    return not getattr(removed, "rowcount", 0)


def by_digest(conn: Connection, d: Dialect, digest: str) -> TokenRow | None:
    found = conn.execute(
        d.q(f"SELECT {COLUMNS} FROM tokens WHERE digest = ?"), (digest,)
    ).fetchone()
    return None if found is None else _row(found)


def all_rows(conn: Connection) -> list[TokenRow]:
    rows = conn.execute(f"SELECT {COLUMNS} FROM tokens ORDER BY principal").fetchall()
    return [_row(r) for r in rows]


def delete(conn: Connection, d: Dialect, principal: str) -> bool:
    """Remove the principal's token; whether it had one."""
    gone = conn.execute(d.q("DELETE FROM tokens WHERE principal = ?"), (principal,))
    return bool(getattr(gone, "rowcount", 0))
