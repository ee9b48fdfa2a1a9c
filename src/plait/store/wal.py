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
"""

from __future__ import annotations

import os
import sqlite3
import threading
from urllib.parse import quote

CHECKPOINT_EVERY = 128
"""Commits between two background checkpoints (a wave writes about six WAL pages)."""

BACKSTOP_PAGES = 10_000
"""``wal_autocheckpoint`` of a store's own connection: the committing thread checkpoints
only once the WAL holds this many pages (40 MB with 4 KB pages)."""


THREAD_NAME = "plait-wal-checkpoint"
"""How the checkpointing thread's name starts (``verify_cores`` knows it holds no lock a
forked child would take: it only calls SQLite, on its own connection)."""


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
                try:
                    if conn is None:  # mode=rw: never create a file that went away
                        uri = f"file:{quote(self._path)}?mode=rw"
                        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    with self._ran:
                        self.checkpoints += 1
                        self._ran.notify_all()
                except sqlite3.Error:
                    # The backstop checkpoints instead; try again at the next call.
                    if conn is not None:
                        conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()
