"""Waiting, in a PostgreSQL test, until another thread's statement waits on a lock."""

from __future__ import annotations

import threading

import psycopg


def wait_until_blocked(url: str, thread: threading.Thread, where: str = "") -> None:
    """Return once a backend waits on a lock (``where``: more of its conditions on
    ``pg_stat_activity``, e.g. ``AND query LIKE '...'``) or ``thread`` has ended. Watched
    from a connection of its own, in autocommit: a transaction sees ``pg_stat_activity``
    as it first read it."""
    query = f"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' {where}"
    with psycopg.connect(url, autocommit=True) as watch:
        while thread.is_alive():
            row = watch.execute(query).fetchone()
            if row is not None and row[0]:
                return
            thread.join(0.01)
