"""Folding a SQLite store's WAL back into its database file, off the committing thread.

In WAL mode every commit appends its pages to the ``-wal`` file. By default the commit
that takes the WAL past 1000 pages also copies the WAL back into the database file and
waits for the disk (an automatic checkpoint), so one wave in a few hundred pays for all
of them, fsync included. A store instead asks a thread of its own, on its own
connection, for a PASSIVE checkpoint every ``every`` commits: it runs beside the driver
(SQLite lets it read the WAL and write the database while the writer appends, and never
makes either wait), and the wave that would have paid goes on at once. SQLite's
automatic checkpoint stays on at ``BACKSTOP_PAGES`` for when the thread falls behind or
is not there (a process forked from one whose thread had started).

Nothing here decides what is durable: a commit is durable once it is in the WAL,
checkpointed or not.

A process that forks a child which opens the database afresh (verify on every core)
forks while every checkpointer is between two calls into SQLite (``idle``): a child
inherits whatever SQLite mutex another thread holds at the fork, and would wait on it
forever.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from urllib.parse import quote

CHECKPOINT_EVERY = 128
"""Commits between two background checkpoints (a wave writes about six WAL pages)."""

BACKSTOP_PAGES = 10_000
"""``wal_autocheckpoint`` of a store's own connection: the committing thread checkpoints
only once the WAL holds this many pages (40 MB with 4 KB pages)."""


THREAD_NAME = "plait-wal-checkpoint"
"""How the checkpointing thread's name starts (``verify_cores`` knows it holds no lock a
forked child would take: it only calls SQLite, on its own connection)."""


_STARTED: weakref.WeakSet[WalCheckpointer] = weakref.WeakSet()
"""Every checkpointer of this process whose thread has started."""


@contextlib.contextmanager
def idle() -> Iterator[None]:
    """Hold every checkpointer of this process between two calls into SQLite (one running
    is waited for): a process forked meanwhile inherits no SQLite mutex held by one."""
    with contextlib.ExitStack() as stack:
        for checkpointer in list(_STARTED):
            stack.enter_context(checkpointer.in_sqlite)
        yield


class WalCheckpointer:
    """Checkpoints one database file from a daemon thread, started on first need."""

    def __init__(self, path: str, every: int = CHECKPOINT_EVERY) -> None:
        # Absolute now: the thread connects later, perhaps after the process changed folder.
        self._path = os.path.abspath(path)
        self._every = every
        self._commits = 0
        self._due = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._ran = threading.Condition()
        self.in_sqlite = threading.Lock()
        """Held by the thread while it calls SQLite (``idle``)."""
        self.checkpoints = 0
        """Checkpoints the thread has completed."""

    def committed(self) -> None:
        """Called after each committed write transaction of the store's connection."""
        self._commits += 1
        if self._commits < self._every:
            return
        self._commits = 0
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(
                target=self._run, name=f"{THREAD_NAME} {self._path}", daemon=True
            )
            _STARTED.add(self)
            self._thread.start()
        self._due.set()

    def wait(self, checkpoints: int, timeout_s: float) -> bool:
        """Block until the thread has completed ``checkpoints`` checkpoints (False: it had
        not within ``timeout_s``). For tests and tools; a store never waits."""
        with self._ran:
            return self._ran.wait_for(lambda: self.checkpoints >= checkpoints, timeout_s)

    def close(self) -> None:
        """Stop the thread, after the checkpoint it may be running."""
        self._closed = True
        self._due.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._due.wait()
                self._due.clear()
                if self._closed:
                    return
                with self.in_sqlite:
                    conn = self._checkpoint(conn)
        finally:
            if conn is not None:
                with self.in_sqlite:
                    conn.close()

    def _checkpoint(self, conn: sqlite3.Connection | None) -> sqlite3.Connection | None:
        """One PASSIVE checkpoint, on ``conn`` or a new connection; the connection to
        keep (None after a failure: the backstop checkpoints instead, and the next call
        connects again)."""
        try:
            if conn is None:  # mode=rw: never create a file that went away
                uri = f"file:{quote(self._path)}?mode=rw"
                conn = sqlite3.connect(uri, uri=True, isolation_level=None)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            if conn is not None:
                conn.close()
            return None
        with self._ran:
            self.checkpoints += 1
            self._ran.notify_all()
        return conn
