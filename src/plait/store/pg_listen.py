"""``PostgresListener``: a worker's wait for ``LISTEN plait_runs`` notifications.

``PostgresStore.notify_runnable`` and ``set_wake`` notify NOTIFY_CHANNEL; a worker's
listener thread waits on it so an idle worker claims new work at once. The listener owns
one connection of its own, outside the pool (a LISTEN is per session).
"""

from __future__ import annotations

import selectors
import socket
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg

from plait.core.errors import PlaitError

Connection = psycopg.Connection[Any]

NOTIFY_CHANNEL = "plait_runs"
"""The channel workers LISTEN on: a run was enqueued, answered or is otherwise due."""

StorageError = Callable[[psycopg.Error, str], PlaitError]
"""The store's wording of a psycopg error as PLAIT-E020 (exception, what was being done)."""


class PostgresListener:
    """A dedicated connection that LISTENs on NOTIFY_CHANNEL (``PostgresStore.listen``).

    ``wait`` blocks on the connection's socket and on a wake-up socket together, so
    ``interrupt`` (from another thread) ends a wait at once: a worker that stops does not
    wait for the rest of a listening slice.
    """

    def __init__(self, conn: Connection, storage_error: StorageError) -> None:
        self._conn = conn
        self._storage_error = storage_error
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector = selectors.DefaultSelector()
        try:
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            # One that came with LISTEN's answer was read already: the socket will not say.
            self._pending = any(True for _ in conn.notifies(timeout=0.0))
            self._selector.register(conn.fileno(), selectors.EVENT_READ, "db")
            self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        except psycopg.Error as exc:
            self.close()
            raise storage_error(exc, "cannot listen") from exc

    def wait(self, timeout_s: float) -> bool:
        """Block until a notification arrives (True), ``timeout_s`` passes or ``interrupt``
        is called (False). Notifications that queued up meanwhile are drained too, so one
        burst of enqueues wakes a worker once. A lost connection is PLAIT-E020.
        """
        if self._pending:
            self._pending = False
            return True
        try:
            ready = {key.data for key, _ in self._selector.select(max(timeout_s, 0.0))}
            if "wake" in ready:
                with suppress(OSError):
                    while self._wake_r.recv(64):
                        pass
                return False
            if "db" not in ready:
                return False
            # Readable: notifications, or the server hanging up (which raises here).
            return any(True for _ in self._conn.notifies(timeout=0.0))
        except psycopg.Error as exc:
            raise self._storage_error(exc, "listening") from exc

    def interrupt(self) -> None:
        """End the current (or next) ``wait`` at once; safe from any thread."""
        with suppress(OSError):
            self._wake_w.send(b"!")

    def close(self) -> None:
        with suppress(Exception):
            self._selector.close()
        for sock in (self._wake_r, self._wake_w):
            sock.close()
        self._conn.close()
