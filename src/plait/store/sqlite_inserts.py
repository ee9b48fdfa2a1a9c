"""The journal's INSERT statements on SQLite: a wave's rows in one statement.

A wave's rows have the same shape (which columns are set) from one superstep to the next,
so each shape's statement is built once and reused, unset columns written as NULL literals
instead of bound (``sqlite3`` binds a None through its adapter lookup). ``insert_fenced`` is
the same INSERT as its own transaction, made only while a lease token holds the run
(``SqliteStore._commit_fenced``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from plait.store.rows import JOURNAL_COLUMNS, Row

_ROW_COLUMNS = ("run_id", "seq", *JOURNAL_COLUMNS)
_INSERT_COLUMNS = ", ".join(_ROW_COLUMNS)
ROWS_PER_INSERT = 32
"""Rows per INSERT statement: a wave of many effects takes several."""
_INSERT_SHAPES = 256
"""Statements remembered by shape (which columns of which row are set)."""
_inserts: dict[tuple[tuple[bool, ...], ...], str] = {}
"""INSERT statements by the shape of a batch: which columns of each row are set (see
``insert_rows``)."""


def insert_rows(conn: sqlite3.Connection, rows: list[Row]) -> None:
    """Insert journal rows, a wave's rows in one statement, binding only what is set.

    Most columns of a row are NULL (an intent has no sha256, a checkpoint no key), and
    ``sqlite3`` binds each None parameter through its adapter lookup (about 6% of a
    durable loop's superstep); an unset column is a NULL literal in the statement
    instead. A wave's rows have the same shape from one superstep to the next, so the
    statement for that shape is built once and reused (sqlite3 caches its compiled form).
    """
    for start in range(0, len(rows), ROWS_PER_INSERT):
        batch = rows[start : start + ROWS_PER_INSERT]
        shape, values = _shape(batch)
        sql = _inserts.get(shape)
        if sql is None:
            sql = _remember(
                shape, f"INSERT INTO journal ({_INSERT_COLUMNS}) VALUES {_values(shape)}"
            )
        conn.execute(sql, values)


def insert_fenced(conn: sqlite3.Connection, rows: list[Row], run_id: str, token: int) -> int:
    """Insert ``rows`` (at most ``ROWS_PER_INSERT``) in one autocommitted statement if
    ``token`` holds the run's lease; the number of rows inserted (0: it does not)."""
    shape, values = _shape(rows)
    key = (*shape, ())  # not a shape of ``insert_rows``: the fenced form of the same shape
    sql = _inserts.get(key)
    if sql is None:
        sql = _remember(
            key,
            f"INSERT INTO journal ({_INSERT_COLUMNS}) SELECT * FROM (VALUES {_values(shape)})"
            " WHERE EXISTS (SELECT 1 FROM leases WHERE run_id = ? AND token = ?"
            " AND host IS NOT NULL)",
        )
    values.append(run_id)
    values.append(token)
    return int(conn.execute(sql, values).rowcount)


def _shape(batch: list[Row]) -> tuple[tuple[tuple[bool, ...], ...], list[Any]]:
    """Which columns of each row are set, and the values of those that are."""
    shape = tuple([tuple([value is not None for value in row]) for row in batch])
    return shape, [value for row in batch for value in row if value is not None]


def _values(shape: tuple[tuple[bool, ...], ...]) -> str:
    return ", ".join(
        "(" + ", ".join("?" if present else "NULL" for present in mask) + ")" for mask in shape
    )


def _remember(shape: tuple[tuple[bool, ...], ...], sql: str) -> str:
    if len(_inserts) >= _INSERT_SHAPES:
        _inserts.clear()  # wave shapes seen long ago: rebuilt if they come back
    _inserts[shape] = sql
    return sql


def first_duplicate(conn: sqlite3.Connection, run_id: str, rows: list[tuple[Any, ...]]) -> Row:
    """The op of a failed batch whose intent/result key is stored already (for the message)."""
    seen: set[tuple[str, str]] = set()
    for row in rows:
        op = row[2:]
        if op[0] in ("intent", "result"):
            if (op[0], op[1]) in seen:
                return tuple(op)
            seen.add((op[0], op[1]))
            hit = conn.execute(
                "SELECT 1 FROM journal WHERE run_id = ? AND item = ? AND journal_key = ?"
                " AND seq < ?",
                (run_id, op[0], op[1], row[1]),
            ).fetchone()
            if hit is not None:
                return tuple(op)
    return tuple(rows[0][2:])
