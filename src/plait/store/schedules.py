"""Schedules in the SQL back ends: the statements both write, run on the caller's connection.

A schedule row holds its spec and its cursor (``next_ms``, the next slot not yet
decided); ``fire_slot`` is the one transaction that starts a slot's run: it checks the
cursor has not passed the slot (under the schedule row's lock on PostgreSQL, under
SQLite's write lock), inserts the slot row (``schedule_slots``' primary key makes a slot
fire once whatever races), the run row and its manifest, and moves the cursor on.

Rules as ``sql.py``: parameterized SQL only; this module never opens, commits or rolls
back a transaction (the back end does) and never reads the clock.
"""

from __future__ import annotations

from typing import Any

from plait.core.canonical import dumps, loads
from plait.core.errors import PlaitError
from plait.store.records import ScheduleRow
from plait.store.sql import Connection, Dialect

UNFINISHED = ("queued", "running", "parked")
"""Statuses of a previous run that make ``overlap: skip`` pass a slot over."""

COLUMNS = (
    "name, spec, paused, next_ms, created_ms, updated_ms, last_slot_ms, last_run_id, last_error"
)


def unknown_schedule(name: str) -> PlaitError:
    """PLAIT-E017, as for an unknown run id."""
    return PlaitError("E017", f"unknown schedule '{name}'")


def row_of(values: Any) -> ScheduleRow:
    name, spec, paused, next_ms, created, updated, last_slot, last_run, last_error = values
    decoded = loads(spec)
    assert isinstance(decoded, dict)
    return ScheduleRow(
        name, decoded, bool(paused), int(next_ms), int(created), int(updated),
        None if last_slot is None else int(last_slot), last_run, last_error,
    )  # fmt: skip


def insert(conn: Connection, d: Dialect, row: ScheduleRow) -> None:
    """Add a schedule (the caller checked its name is free)."""
    conn.execute(
        d.q(f"INSERT INTO schedules ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        (row.name, dumps(row.spec), int(row.paused), row.next_ms, row.created_ms,
         row.updated_ms, row.last_slot_ms, row.last_run_id, row.last_error),
    )  # fmt: skip


def replace_spec(conn: Connection, d: Dialect, row: ScheduleRow) -> None:
    """A changed spec and cursor for an existing schedule (``schedule sync``)."""
    conn.execute(
        d.q("UPDATE schedules SET spec = ?, next_ms = ?, updated_ms = ? WHERE name = ?"),
        (dumps(row.spec), row.next_ms, row.updated_ms, row.name),
    )


def get(conn: Connection, d: Dialect, name: str, *, lock: bool = False) -> ScheduleRow | None:
    suffix = " FOR UPDATE" if lock and d.name == "postgres" else ""
    found = conn.execute(
        d.q(f"SELECT {COLUMNS} FROM schedules WHERE name = ?{suffix}"), (name,)
    ).fetchone()
    return None if found is None else row_of(found)


def all_rows(conn: Connection) -> list[ScheduleRow]:
    return [
        row_of(r) for r in conn.execute(f"SELECT {COLUMNS} FROM schedules ORDER BY name").fetchall()
    ]


def due(conn: Connection, d: Dialect, now_ms: int) -> tuple[list[ScheduleRow], int | None]:
    """Schedules not paused whose next slot has come, and the earliest next slot after now."""
    rows = conn.execute(
        d.q(
            f"SELECT {COLUMNS} FROM schedules WHERE paused = 0 AND next_ms <= ?"
            " ORDER BY next_ms, name"
        ),
        (now_ms,),
    ).fetchall()
    upcoming = conn.execute(
        d.q("SELECT MIN(next_ms) FROM schedules WHERE paused = 0 AND next_ms > ?"), (now_ms,)
    ).fetchone()
    return [row_of(r) for r in rows], None if upcoming[0] is None else int(upcoming[0])


def set_paused(
    conn: Connection, d: Dialect, name: str, paused: bool, next_ms: int | None, now_ms: int
) -> None:
    """Pause, or resume with a new cursor; PLAIT-E017 for an unknown schedule."""
    conn.execute(
        d.q(
            "UPDATE schedules SET paused = ?, next_ms = COALESCE(?, next_ms), updated_ms = ?"
            " WHERE name = ?"
        ),
        (int(paused), next_ms, now_ms, name),
    )


def delete(conn: Connection, d: Dialect, name: str) -> None:
    """The schedule and its slot rows (its runs stay)."""
    conn.execute(d.q("DELETE FROM schedule_slots WHERE schedule = ?"), (name,))
    conn.execute(d.q("DELETE FROM schedules WHERE name = ?"), (name,))


def advance(
    conn: Connection, d: Dialect, name: str, cursor_ms: int, next_ms: int, error: str | None,
    now_ms: int,
) -> bool:  # fmt: skip
    """Move the cursor from ``cursor_ms`` to ``next_ms`` (slots passed over), only if no
    one moved it meanwhile; ``error`` says why a slot could not start (else kept)."""
    cursor = conn.execute(
        d.q(
            "UPDATE schedules SET next_ms = ?, updated_ms = ?, last_error = COALESCE(?, last_error)"
            " WHERE name = ? AND next_ms = ? RETURNING name"
        ),
        (next_ms, now_ms, error, name, cursor_ms),
    ).fetchone()
    return cursor is not None


def previous_unfinished(conn: Connection, d: Dialect, run_id: str | None) -> bool:
    """Whether the schedule's previous run is still queued, running or parked."""
    if run_id is None:
        return False
    found = conn.execute(d.q("SELECT status FROM runs WHERE run_id = ?"), (run_id,)).fetchone()
    return found is not None and found[0] in UNFINISHED


def insert_slot(conn: Connection, d: Dialect, name: str, slot_ms: int, run_id: str) -> bool:
    """The slot's row; False when the slot was fired already."""
    return (
        conn.execute(
            d.q(
                "INSERT INTO schedule_slots (schedule, slot_ms, run_id) VALUES (?, ?, ?)"
                " ON CONFLICT (schedule, slot_ms) DO NOTHING RETURNING run_id"
            ),
            (name, slot_ms, run_id),
        ).fetchone()
        is not None
    )


def fired(
    conn: Connection, d: Dialect, name: str, slot_ms: int, next_ms: int, run_id: str | None,
    now_ms: int,
) -> None:  # fmt: skip
    """The cursor past a slot that started ``run_id`` (None: passed over for overlap)."""
    if run_id is None:
        conn.execute(
            d.q("UPDATE schedules SET next_ms = ?, updated_ms = ? WHERE name = ?"),
            (next_ms, now_ms, name),
        )
        return
    conn.execute(
        d.q(
            "UPDATE schedules SET next_ms = ?, last_slot_ms = ?, last_run_id = ?,"
            " last_error = NULL, updated_ms = ? WHERE name = ?"
        ),
        (next_ms, slot_ms, run_id, now_ms, name),
    )


def slots(conn: Connection, d: Dialect, name: str | None) -> list[tuple[str, int, str]]:
    """(schedule, slot_ms, run_id) of fired slots, by schedule then slot."""
    if name is None:
        rows = conn.execute(
            "SELECT schedule, slot_ms, run_id FROM schedule_slots ORDER BY schedule, slot_ms"
        ).fetchall()
    else:
        rows = conn.execute(
            d.q(
                "SELECT schedule, slot_ms, run_id FROM schedule_slots WHERE schedule = ?"
                " ORDER BY slot_ms"
            ),
            (name,),
        ).fetchall()
    return [(str(r[0]), int(r[1]), str(r[2])) for r in rows]
