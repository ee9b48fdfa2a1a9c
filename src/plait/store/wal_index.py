"""Whether anybody committed to a SQLite database since a moment this connection marked,
read from the WAL index's header without a read transaction.

A driver asks its store between every two waves whether a cancel or a steering message
arrived (``SqliteStore.records_after``). ``PRAGMA data_version`` answers it, but opens and
closes a read transaction to do so: two file-lock system calls and the WAL index's read
marks, ~3 µs at every superstep, which the hand-written floor of issue #22 never pays.

In WAL mode every commit, by any connection of any process, rewrites the header at the
start of the WAL index (the ``-shm`` file; its layout is documented at
https://sqlite.org/walformat.html) and counts itself in it (``iChange``). So:

- the header byte for byte as it was when the data version was last asked: nobody
  committed since, and the version is the same (``version``);
- right after this connection's own commit, a count exactly one past the one marked:
  that commit was the only one, and a connection's own commits leave its data version as
  it was (``committed``).

The header is read with ``pread`` on SQLite's own descriptor of the ``-shm`` file, found
in ``/proc/self/fd``: never on a descriptor of our own. POSIX drops every lock a process
holds on a file when it closes *any* descriptor of that file, so opening and closing the
``-shm`` here would silently release the locks SQLite's connections of this process hold
on it (the dead-man switch among them: another process would then rebuild the WAL index
under them, and fail with "locking protocol"). SQLite keeps that descriptor open while any
of this process's connections to the database is, so it is read only while the store's
own connection is open. Anything else (no ``/proc``, no such descriptor, the header moved,
the count jumped, a database in memory or opened read-only) and the store asks SQLite, as
it always did.
"""

from __future__ import annotations

import os
import struct

HEADER_BYTES = 48
"""The first of the header's two copies (SQLite writes the second, then the first: a
reader that sees the first changed sees a commit that is, or is about to be, visible)."""

_CHANGE = struct.Struct("=I")
"""``iChange``, the header's commit count: 4 bytes at offset 8, in the machine's order."""

_CHANGE_AT = 8

_OPEN_FILES = "/proc/self/fd"


def sqlite_descriptor(path: str) -> int | None:
    """The descriptor this process holds open on ``path`` (SQLite's, for a WAL index its
    connections use), found by name without opening anything; None when there is none or
    no ``/proc`` to look in."""
    try:
        names = os.listdir(_OPEN_FILES)
    except OSError:
        return None
    for name in names:
        try:
            if os.readlink(f"{_OPEN_FILES}/{name}") == path:
                return int(name)
        except (OSError, ValueError):
            continue
    return None


class CommitWatch:
    """The WAL index header of one database, as a store's connection last saw it."""

    __slots__ = ("_fd", "_seen", "_version")

    def __init__(self) -> None:
        self._fd: int | None = None
        self._seen: bytes | None = None
        self._version = 0

    def open(self, database: str) -> None:
        """Find SQLite's descriptor of ``database``'s WAL index (once a connection of this
        process uses it); without one, every question goes to SQLite."""
        self._fd = sqlite_descriptor(os.path.realpath(database) + "-shm")

    def version(self, header: bytes | None) -> int | None:
        """The data version last asked (``asked``) when the header is still ``header``
        (``header()``, read now): nobody committed since; else None: ask SQLite."""
        if header is None or header != self._seen:
            return None
        return self._version

    def header(self) -> bytes | None:
        """The header now: read it *before* asking SQLite, so a commit in between leaves
        a header that differs from the one marked (``asked``)."""
        if self._fd is None:
            return None
        try:
            data = os.pread(self._fd, HEADER_BYTES, 0)
        except OSError:
            return None
        return data if len(data) == HEADER_BYTES else None

    def asked(self, header: bytes | None, version: int) -> None:
        """SQLite gave ``version`` for the data version after ``header`` was read."""
        self._seen = header
        self._version = version

    def committed(self) -> None:
        """Right after a commit of this connection: the mark moves past it when it was
        the only commit since the mark, else is dropped."""
        seen = self._seen
        if seen is None:
            return
        now = self.header()
        if now is not None and _CHANGE.unpack_from(now, _CHANGE_AT)[0] == (
            (_CHANGE.unpack_from(seen, _CHANGE_AT)[0] + 1) & 0xFFFFFFFF
        ):
            self._seen = now
        else:
            self._seen = None

    def close(self) -> None:
        """Stop reading (the descriptor is SQLite's: it is never closed here)."""
        self._fd = None
        self._seen = None
