"""The journal's INSERT statements on SQLite: a wave's rows in one statement.

A wave's rows have the same shape (which columns are set) from one superstep to the next,
so each shape's statement is built once and reused, unset columns written as NULL literals
instead of bound (``sqlite3`` binds a None through its adapter lookup). ``insert_fenced`` is
the same rows' INSERT as its own transaction, made only while a lease token holds the run
(``SqliteStore._commit_fenced``), with the run id, the seqs and the items written once.
"""

from __future__ import annotations

import sqlite3
from operator import itemgetter
from typing import Any

from plait.store.rows import JOURNAL_COLUMNS, MAY_BE_SET, Row

_ROW_COLUMNS = ("run_id", "seq", *JOURNAL_COLUMNS)
_INSERT_COLUMNS = ", ".join(_ROW_COLUMNS)
ROWS_PER_INSERT = 32
"""Rows per INSERT statement: a wave of many effects takes several."""
_INSERT_SHAPES = 256
"""Statements remembered by shape (which columns of which row are set)."""
Shape = tuple[str | tuple[bool, ...], ...]
"""A batch's shape, row by row: the journal item of a row whose NULL columns are known
from its item alone (``rows.MAY_BE_SET``), else which of its columns are set."""
_inserts: dict[Shape, str] = {}
"""INSERT statements by the shape of a batch (see ``insert_rows``)."""
_MASKS: dict[str, tuple[bool, ...]] = {
    item: (True, True, *columns) for item, columns in MAY_BE_SET.items()
}
"""Per journal item, which row values (``run_id``, ``seq`` and the journal columns) are
bound; the others are always None, written as NULL literals."""
_BOUND = {
    item: itemgetter(*[i for i, bound in enumerate(mask) if bound]) for item, mask in _MASKS.items()
}
"""Per journal item, the bound values of a row (picked in C, not by a Python loop)."""
_PICK_OP = {
    item: itemgetter(*[i for i, bound in enumerate(columns) if bound and i > 0])
    for item, columns in MAY_BE_SET.items()
}
"""Per journal item, the values a ``write_row`` op binds (its item is a literal)."""
_fenced: dict[tuple[str, ...], str] = {}
"""``insert_fenced``'s statements by the items of a batch."""


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


def insert_fenced(
    conn: sqlite3.Connection, run_id: str, last: int, ops: list[Row], token: int
) -> int:
    """Insert the journal rows of ``ops`` (``write_row``'s, at most ``ROWS_PER_INSERT``) at
    the seqs after ``last`` in one autocommitted statement if ``token`` holds the run's
    lease; the number of rows inserted (0: it does not, or an op is no journal row).

    The statement of a batch's shape (its items, in order) binds the run id, ``last`` and
    the token once (numbered parameters ``?1``-``?3``; the n-th row's seq is ``?2 + n``)
    and writes each row's item as a literal, so per row only what its op sets is picked
    and bound: picking and binding a run id, a seq and an item for every row cost about
    as much Python as the statement's own binding."""
    shape: list[str] = []
    values: list[Any] = [run_id, last, token]
    for op in ops:
        item = op[0]
        pick = _PICK_OP.get(item)
        if pick is None:
            return 0  # a status or a manifest: not a row of this statement
        shape.append(item)
        values += pick(op)
    key = tuple(shape)
    fenced = _fenced.get(key)
    sql = _fenced_statement(key) if fenced is None else fenced
    return int(conn.execute(sql, values).rowcount)


def _fenced_statement(shape: tuple[str, ...]) -> str:
    """``insert_fenced``'s statement for ``shape``, remembered."""
    rows: list[str] = []
    bound = 3
    for n, item in enumerate(shape):
        columns = ["?1", f"?2 + {n + 1}", f"'{item}'"]
        for present in MAY_BE_SET[item][1:]:
            if present:
                bound += 1
                columns.append(f"?{bound}")
            else:
                columns.append("NULL")
        rows.append("(" + ", ".join(columns) + ")")
    sql = (
        f"INSERT INTO journal ({_INSERT_COLUMNS}) SELECT * FROM (VALUES {', '.join(rows)})"
        " WHERE EXISTS (SELECT 1 FROM leases WHERE run_id = ?1 AND token = ?3"
        " AND host IS NOT NULL)"
    )
    if len(_fenced) >= _INSERT_SHAPES:
        _fenced.clear()  # wave shapes seen long ago: rebuilt if they come back
    _fenced[shape] = sql
    return sql


def _shape(batch: list[Row]) -> tuple[Shape, list[Any]]:
    """The batch's shape and the values its statement binds.

    A row's NULL columns follow from its item (``rows.MAY_BE_SET``): one of those columns
    set anyway would be bound as None, which stores the same NULL, so the statement never
    has to look at each value. A wave's rows have some 50 columns, and looking at each in
    Python cost more than the INSERT's own binding."""
    shape: list[str | tuple[bool, ...]] = []
    values: list[Any] = []
    bound = _BOUND
    for row in batch:
        item = row[2]
        pick = bound.get(item)
        if pick is None:  # not a journal item write_row makes: look at each value
            shape.append(tuple([value is not None for value in row]))
            values.extend([value for value in row if value is not None])
        else:
            shape.append(item)
            values.extend(pick(row))
    return tuple(shape), values


def _values(shape: Shape) -> str:
    masks = [_MASKS[row] if type(row) is str else row for row in shape]
    return ", ".join(
        "(" + ", ".join("?" if present else "NULL" for present in mask) + ")" for mask in masks
    )


def _remember(shape: Shape, sql: str) -> str:
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
