"""Reading runs and journals a page at a time, for lists that may hold 10,000 runs and
journals of 100,000 items (the console, ``GET /runs?limit``, ``plait runs --limit``).

Pages are keyset pages: a runs page goes on after the ``(sort time, row order)`` of the
last run it showed (the sort time is ``created_ms`` or ``updated_ms``, as the query
sorts), a journal page before the smallest ``seq`` it showed, so each page is one indexed
range read however deep it is (``runs_by_created``, ``runs_by_updated``,
``runs_by_status``, ``runs_by_status_updated``, ``runs_by_workflow`` and the journal's
``(run_id, seq)`` key), and runs created while a reader pages on never shift the pages it
has not read yet (sorted by update, a run that moves is listed where it now sorts).
"""

from __future__ import annotations

from dataclasses import dataclass

from plait.store.records import JournalItem, RunInfo
from plait.store.rows import JOURNAL_COLUMNS, RUN_COLUMNS, run_from_row
from plait.store.sql import Connection, Dialect, NodeReader, journal_of

MAX_PAGE = 1000
"""The most rows one page holds, whatever the caller asks for."""

SORT_COLUMNS = {"created": "created_ms", "updated": "updated_ms"}
"""What a runs page may be sorted by, and the column each sorts on."""


@dataclass(frozen=True)
class RunQuery:
    """Which runs a page lists: filters, its order, and where the page starts (``after``,
    the ``(sort time, order)`` of the last run of the page before)."""

    limit: int = 50
    status: str | None = None
    workflow: str | None = None
    text: str | None = None
    """Part of a run id, workflow name or principal (case-sensitive)."""
    since_ms: int | None = None
    """Only runs created at or after this time."""
    updated_since_ms: int | None = None
    """Only runs updated at or after this time."""
    sort: str = "created"
    """``created`` or ``updated`` (``SORT_COLUMNS``)."""
    descending: bool = True
    after: tuple[int, int] | None = None


@dataclass(frozen=True)
class RunPage:
    """One page of runs in the query's order; ``next`` is where the next page starts
    (None: last)."""

    runs: list[RunInfo]
    next: tuple[int, int] | None


def page_runs(conn: Connection, d: Dialect, query: RunQuery) -> RunPage:
    """One page of runs matching ``query`` in its order (insertion order breaks ties)."""
    column = SORT_COLUMNS[query.sort]
    where: list[str] = []
    params: list[object] = []
    if query.status is not None:
        where.append("status = ?")
        params.append(query.status)
    if query.workflow is not None:
        where.append("workflow = ?")
        params.append(query.workflow)
    if query.since_ms is not None:
        where.append("created_ms >= ?")
        params.append(query.since_ms)
    if query.updated_since_ms is not None:
        where.append("updated_ms >= ?")
        params.append(query.updated_since_ms)
    if query.text:
        pattern = "%" + _like_escaped(query.text) + "%"
        where.append(
            "(run_id LIKE ? ESCAPE '\\' OR workflow LIKE ? ESCAPE '\\'"
            " OR principal LIKE ? ESCAPE '\\')"
        )
        params += [pattern, pattern, pattern]
    beyond, direction = ("<", "DESC") if query.descending else (">", "ASC")
    if query.after is not None:
        where.append(f"({column} {beyond} ? OR ({column} = ? AND {d.row_order} {beyond} ?))")
        params += [query.after[0], query.after[0], query.after[1]]
    limit = max(1, min(query.limit, MAX_PAGE))
    sql = f"SELECT {', '.join(RUN_COLUMNS)}, {d.row_order} FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {column} {direction}, {d.row_order} {direction} LIMIT ?"
    rows = conn.execute(d.q(sql), (*params, limit + 1)).fetchall()
    shown = rows[:limit]
    runs = [run_from_row(row[:-1]) for row in shown]
    more = len(rows) > limit and shown
    at = RUN_COLUMNS.index(column)
    return RunPage(runs, (int(shown[-1][at]), int(shown[-1][-1])) if more else None)


def _like_escaped(text: str) -> str:
    """``text`` matched literally inside a LIKE pattern."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def journal_page(
    conn: Connection,
    d: Dialect,
    run_id: str,
    before_seq: int | None,
    limit: int,
    reader: NodeReader,
) -> list[JournalItem]:
    """Up to ``limit`` journal items of the run before ``before_seq`` (None: the newest),
    newest first; PLAIT-E017 for an unknown run."""
    limit = max(1, min(limit, MAX_PAGE))
    columns = ", ".join(JOURNAL_COLUMNS)
    if before_seq is None:
        sql = f"SELECT seq, {columns} FROM journal WHERE run_id = ? ORDER BY seq DESC LIMIT ?"
        params: tuple[object, ...] = (run_id, limit)
    else:
        sql = (
            f"SELECT seq, {columns} FROM journal WHERE run_id = ? AND seq < ?"
            " ORDER BY seq DESC LIMIT ?"
        )
        params = (run_id, before_seq, limit)
    rows = conn.execute(d.q(sql), params).fetchall()
    return list(reversed(journal_of(conn, d, run_id, rows, reader).items()))
