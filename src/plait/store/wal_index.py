"""Whether anybody committed to a SQLite database since a moment this connection marked,
read from the WAL index's header without a read transaction.

A driver asks its store between every two waves whether a cancel or a steering message
arrived (``SqliteStore.records_after``). ``PRAGMA data_version`` answers it, but opens and
closes a read transaction to do so: two file-lock system calls and the WAL index's read
marks, ~3 µs at every superstep, which the hand-written floor of issue #22 never pays.

In WAL mode every commit, by any connection of any process, rewrites the header at the
start of the WAL index (the ``-shm`` file every connection maps; its layout is documented
at https://sqlite.org/walformat.html) and counts itself in it (``iChange``). So:

- the header byte for byte as it was when the data version was last asked: nobody
  committed since, and the version is the same (``version``);
- right after this connection's own commit, a count exactly one past the one marked:
  that commit was the only one, and a connection's own commits leave its data version as
  it was (``committed``).

Anything else (the header moved, the count jumped, no ``-shm`` file to map, a database in
memory or opened read-only) and the store asks SQLite, as it always did. The header is
read, never written; it is mapped only while the store's own connection is open, which
keeps the file from being truncated under the map (SQLite truncates it only when it opens
the first connection of all).
"""

from __future__ import annotations

import mmap
import os
import struct

HEADER_BYTES = 48
"""The first of the header's two copies (SQLite writes the second, then the first: a
reader that sees the first changed sees a commit that is, or is about to be, visible)."""

_CHANGE = struct.Struct("=I")
"""``iChange``, the header's commit count: 4 bytes at offset 8, in the machine's order."""

_CHANGE_AT = 8


class CommitWatch:
    """The WAL index header of one database, as a store's connection last saw it."""

    __slots__ = ("_map", "_seen", "_version")

    def __init__(self) -> None:
        self._map: mmap.mmap | None = None
        self._seen: bytes | None = None
        self._version = 0

    def open(self, database: str) -> None:
        """Map ``database``'s WAL index (once its connection is in WAL mode); without
        one (no file, too short, no mmap here), every question goes to SQLite."""
        try:
            fd = os.open(database + "-shm", os.O_RDONLY)
        except OSError:
            return
        try:
            if os.fstat(fd).st_size >= mmap.PAGESIZE:
                self._map = mmap.mmap(fd, mmap.PAGESIZE, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            self._map = None
        finally:
            os.close(fd)

    def version(self) -> int | None:
        """The data version last asked (``asked``) when nobody committed since; else None:
        ask SQLite."""
        if self._seen is None or self._map is None:
            return None
        return self._version if self._map[:HEADER_BYTES] == self._seen else None

    def header(self) -> bytes | None:
        """The header now: read it *before* asking SQLite, so a commit in between leaves
        a header that differs from the one marked (``asked``)."""
        return None if self._map is None else self._map[:HEADER_BYTES]

    def asked(self, header: bytes | None, version: int) -> None:
        """SQLite gave ``version`` for the data version after ``header`` was read."""
        self._seen = header
        self._version = version

    def committed(self) -> None:
        """Right after a commit of this connection: the mark moves past it when it was
        the only commit since the mark, else is dropped."""
        seen, view = self._seen, self._map
        if seen is None or view is None:
            return
        now = view[:HEADER_BYTES]
        after = _CHANGE.unpack_from(now, _CHANGE_AT)[0]
        if after == (_CHANGE.unpack_from(seen, _CHANGE_AT)[0] + 1) & 0xFFFFFFFF:
            self._seen = now
        else:
            self._seen = None

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        self._seen = None
