"""A wake-up a signal handler may give: a byte written to a socket pair, no lock taken.

A worker's main thread sleeps between claims and is woken by finished drives, by the
server and by ``SIGTERM``. ``threading.Event`` would do for the threads, but not for the
handler: Python runs a handler in the main thread between two bytecodes, possibly while
that thread holds the Event's own lock (inside ``wait`` or ``clear``), and ``set`` would
then wait for it forever. Writing to a non-blocking socket takes no Python lock, so it
is safe from anywhere; the byte stays readable until ``clear``, as an Event stays set.
"""

from __future__ import annotations

import contextlib
import select
import socket


class Wakeup:
    """``set``/``clear``/``wait`` of a ``threading.Event``, safe in a signal handler."""

    def __init__(self) -> None:
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)

    def set(self) -> None:
        # Full (it is set already) or closed (the loop is over): nothing to wake.
        with contextlib.suppress(OSError):
            self._write.send(b"\0")

    def clear(self) -> None:
        try:
            while self._read.recv(4096):
                pass
        except OSError:
            pass  # drained (would block) or closed

    def wait(self, timeout: float) -> bool:
        """Sleep until set or ``timeout`` seconds pass; whether it is set."""
        try:
            readable, _, _ = select.select([self._read], [], [], max(timeout, 0.0))
        except (OSError, ValueError):
            return True  # closed: nothing will wake it any more
        return bool(readable)

    def close(self) -> None:
        self._read.close()
        self._write.close()
