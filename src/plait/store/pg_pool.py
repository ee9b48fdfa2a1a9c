"""``Pool``: the PostgreSQL store's own small connection pool.

A connection taken from it is checked without a round trip: one whose socket has
something to read while idle was closed by the server (a restart, a terminated backend, a
cut network path) and is replaced on the spot by a new one. A server that is down is
therefore an error at once, with what connecting said ("connection refused"), not a wait
for a pool to reconnect. Connecting happens in the calling thread. The pool never runs a
statement and never retries one: after a lost connection nobody can tell whether a commit
was applied, and the journal (read again by resume) is the one that knows.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import psycopg
from psycopg import pq

Connection = psycopg.Connection[Any]

MAX_IDLE_S = 300.0
"""A pooled connection unused for longer is closed rather than trusted (a NAT or firewall
may have dropped it without telling either end)."""

MAX_LIFETIME_S = 3600.0
"""A pooled connection older than this is closed when it comes back (failover, DNS)."""


class PoolError(psycopg.OperationalError):
    """The pool has no connection to give: it is closed, or all stayed busy."""


class Pool:
    """Up to ``size`` connections shared by threads, opened when needed.

    ``get`` hands out the most recently returned idle connection that still looks alive
    (checked without a round trip, see ``_alive``), closing the ones that do not, and
    opens a new one (``connect``) when none is left and fewer than ``size`` exist; when
    ``size`` are checked out it waits up to ``timeout`` seconds for one to come back.
    Connecting happens in the calling thread: its error is the caller's error. ``put``
    keeps a connection only if it is idle, unbroken and not too old.
    """

    def __init__(self, connect: Callable[[], Connection], size: int, timeout: float) -> None:
        self._connect = connect
        self._size = size
        self._timeout = timeout
        self._idle: list[tuple[Connection, float, float]] = []  # (conn, opened, last used)
        self._opened: dict[int, float] = {}  # id(conn) -> when it was opened
        self._count = 0  # connections that exist or are being opened
        self._closed = False
        self._cond = threading.Condition()

    def get(self) -> Connection:
        dead: list[Connection] = []
        try:
            with self._cond:
                conn = self._take(dead)
        finally:
            for gone in dead:  # the server closed them: closing cannot block on it
                discard(gone)
        return conn if conn is not None else self._open_reserved()

    def _open_reserved(self) -> Connection:
        """A new connection in the slot ``_take`` or ``fill`` reserved (given back if
        connecting fails)."""
        try:
            conn = self._connect()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._opened[id(conn)] = time.monotonic()
        return conn

    def _take(self, dead: list[Connection]) -> Connection | None:
        """An idle live connection, or None with a slot reserved for a new one (locked)."""
        deadline: float | None = None
        while True:
            if self._closed:
                raise PoolError("the store is closed")
            while self._idle:
                conn, _, used = self._idle.pop()
                if alive(conn, used):
                    return conn
                self._count -= 1
                self._opened.pop(id(conn), None)
                dead.append(conn)
            if self._count < self._size:
                self._count += 1
                return None
            now = time.monotonic()
            deadline = now + self._timeout if deadline is None else deadline
            if now >= deadline or not self._cond.wait(deadline - now):
                if self._idle or self._count < self._size:
                    continue
                raise PoolError(f"all {self._size} connections stayed busy for {self._timeout:g} s")

    def fill(self, count: int) -> None:
        """Open connections until ``count`` (at most ``size``) exist, and pool them idle:
        a worker that starts opens them before its first claims, not during them. Those
        checked out count; a connecting error is the caller's."""
        while True:
            with self._cond:
                if self._closed or self._count >= min(count, self._size):
                    return
                self._count += 1  # reserved, as ``get`` reserves a slot it fills
            self.put(self._open_reserved())

    def adopt(self, conn: Connection) -> None:
        """Pool a connection opened elsewhere (counted against ``size``; it must fit)."""
        with self._cond:
            assert self._count < self._size
            self._count += 1
            self._opened[id(conn)] = time.monotonic()
        self.put(conn)

    def put(self, conn: Connection) -> None:
        """Take a connection back (every ``get`` is paired with one ``put``)."""
        now = time.monotonic()
        with self._cond:
            opened = self._opened.get(id(conn), now)
            keep = (
                not self._closed
                and not conn.closed
                and not conn.broken
                and conn.pgconn.transaction_status == pq.TransactionStatus.IDLE
                and now - opened < MAX_LIFETIME_S
            )
            if keep:
                self._opened[id(conn)] = opened
                self._idle.append((conn, opened, now))
            else:
                self._opened.pop(id(conn), None)
                self._count -= 1
            self._cond.notify()
        if not keep:
            discard(conn)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            for conn, _, _ in idle:
                self._opened.pop(id(conn), None)
            self._cond.notify_all()
        for conn, _, _ in idle:
            discard(conn)


def alive(conn: Connection, used: float) -> bool:
    """Whether an idle pooled connection may be used, without a round trip.

    An idle connection has nothing to read: when its socket is readable (or hung up) the
    server has closed it, or told it why it is about to (a restart, an idle timeout, a
    terminated backend, a proxy that went away). One unused for MAX_IDLE_S is not trusted.
    """
    if conn.closed or conn.broken or time.monotonic() - used > MAX_IDLE_S:
        return False
    try:
        fd = conn.pgconn.socket
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLPRI)
            return not poller.poll(0)
        readable, _, _ = select.select([fd], [], [], 0)
        return not readable
    except (OSError, ValueError, psycopg.Error):
        return False


def discard(conn: Connection) -> None:
    with suppress(Exception):
        conn.close()
