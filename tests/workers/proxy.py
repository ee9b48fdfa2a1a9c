"""A TCP proxy between plait and the test PostgreSQL server: the server goes away, for real.

The tests point a run's connection string at the proxy and then break the path to the
server the ways a network or a server restart does, without touching the shared server:

- ``go_away()``: every connection is dropped and new ones are refused (the listening
  socket closes, so a client gets "connection refused" at once);
- ``come_back()``: the proxy listens again, on the same port;
- ``drop_connections()``: every connection is dropped but new ones are accepted (what a
  pooled connection sees when the server restarts between two runs);
- ``cut_at(marker, forward=...)``: the one connection whose next client chunk contains
  ``marker`` (``b"COMMIT"``) is cut there, with the chunk either dropped (the server never
  sees it: the transaction rolls back) or forwarded (the server runs it; its answer never
  reaches the client, which cannot tell whether it happened).

Threads only: one accepting thread per listening period, two pumping threads per link.
Closing a socket another thread is blocked on is done with ``shutdown`` first, which
wakes that thread on Linux.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

_CHUNK = 65536


def _ephemeral_low() -> int:
    """The first port the kernel hands out to outgoing connections (never bound here)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


@dataclass
class Cut:
    """One armed cut: ``done`` once it happened."""

    marker: bytes
    forward: bool
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(eq=False)
class _Link:
    client: socket.socket
    server: socket.socket
    muted: bool = False  # the client side is cut: what the server says is dropped

    def close(self) -> None:
        _close(self.client)
        _close(self.server)


class Proxy:
    """Listens on 127.0.0.1:``port`` and relays every connection to ``target``."""

    def __init__(self, target: tuple[str, int] = ("127.0.0.1", 5432)) -> None:
        self.target = target
        self.accepted = 0
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._cut: Cut | None = None
        self._listener: socket.socket | None = None
        # A port below the ephemeral range: no outgoing connection takes it while the
        # proxy is away, so come_back() can listen on it again.
        low = _ephemeral_low()
        for _ in range(200):
            port = random.randrange(10_000, max(low, 10_001))
            try:
                self._start(_listen(port))
            except OSError:
                continue
            self.port = port
            break
        else:
            raise RuntimeError("the proxy found no free port below the ephemeral range")

    def url(self, url: str) -> str:
        """``url`` (a ``postgresql://`` URL) going through this proxy instead."""
        parts = urlsplit(url)
        login, _, _ = parts.netloc.rpartition("@")
        netloc = f"{login}@" if login else ""
        return urlunsplit(
            (parts.scheme, f"{netloc}127.0.0.1:{self.port}", parts.path, parts.query, "")
        )

    # --- breaking things ---

    def go_away(self) -> None:
        """Refuse new connections and drop every open one."""
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            _close(listener)
        self.drop_connections()

    def come_back(self) -> None:
        """Listen again on the same port."""
        with self._lock:
            if self._listener is not None:
                return
        self._start(_listen(self.port))

    def drop_connections(self) -> int:
        """Drop every open connection (new ones are still accepted); how many there were."""
        with self._lock:
            links, self._links = self._links, set()
        for link in links:
            link.close()
        return len(links)

    def cut_at(self, marker: bytes, *, forward: bool) -> Cut:
        """Cut the connection whose next client chunk contains ``marker`` (once)."""
        cut = Cut(marker, forward)
        with self._lock:
            self._cut = cut
        return cut

    def open_links(self) -> int:
        with self._lock:
            return len(self._links)

    def close(self) -> None:
        self.go_away()

    # --- relaying ---

    def _start(self, listener: socket.socket) -> None:
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # go_away() closed it
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client, server)
            with self._lock:
                if self._listener is not listener:  # went away meanwhile
                    link.close()
                    return
                self._links.add(link)
                self.accepted += 1
            threading.Thread(target=self._upstream, args=(link,), daemon=True).start()
            threading.Thread(target=self._downstream, args=(link,), daemon=True).start()

    def _take_cut(self, data: bytes) -> Cut | None:
        with self._lock:
            cut = self._cut
            if cut is None or cut.marker not in data:
                return None
            self._cut = None
            return cut

    def _upstream(self, link: _Link) -> None:
        """Client -> server, cutting where armed."""
        try:
            while data := link.client.recv(_CHUNK):
                cut = self._take_cut(data)
                if cut is None:
                    link.server.sendall(data)
                    continue
                link.muted = True
                if cut.forward:
                    link.server.sendall(data)  # the server runs it; the answer is dropped
                    _close(link.client)
                else:
                    link.close()  # never seen by the server: its transaction rolls back
                cut.done.set()
                return
        except OSError:
            pass
        if not link.muted:
            link.close()

    def _downstream(self, link: _Link) -> None:
        """Server -> client (dropped once the client side is cut)."""
        try:
            while data := link.server.recv(_CHUNK):
                if not link.muted:
                    link.client.sendall(data)
        except OSError:
            pass
        link.close()
        with self._lock:
            self._links.discard(link)
