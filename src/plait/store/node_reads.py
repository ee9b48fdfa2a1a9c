"""Reading content-addressed nodes back for ``chunks.decode``, the way each back end should.

A store decodes a row's payload with a reader made for one read transaction: ``prefetch``
is told the payloads about to be decoded, ``decode`` turns one into its value, checking
every node's bytes against their hash (a mismatch or a missing node is ``ChunkError``).
``NodeFetcher`` reads one node per query (SQLite: a local read costs less than a batch);
``NodeBatcher`` fetches a missing node together with every node its bytes name, level by
level (PostgreSQL: one round trip per tree level, not per node). Neither writes anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from plait.core.canonical import JSON
from plait.core.canonical import digest as sha256_hex
from plait.store.chunks import ChunkError, decode_row

_FETCH_BATCH = 5_000  # node hashes per ``= ANY(%s)`` query
_NODE_NAME = re.compile(rb'"([0-9a-f]{64})"')  # how an encoded form names a node
_ROOT_NAME = re.compile(r'"([0-9a-f]{64})"')


def _checked(digest: str, data: bytes | None) -> bytes:
    if data is None:
        raise ChunkError(f"node {digest} is missing")
    if sha256_hex(data) != digest:
        raise ChunkError(f"sha256 mismatch in node {digest}")
    return data


class NodeFetcher:
    """Node bytes one query at a time, through a SQLite connection (``?`` placeholders)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._parsed: dict[str, JSON] = {}

    def prefetch(self, payloads: Iterable[str]) -> None:
        """Nothing to do ahead: each node is read when ``decode`` needs it."""

    def decode(self, payload: str) -> JSON:
        return decode_row(payload, self._node, cache=self._parsed)

    def _node(self, digest: str) -> bytes:
        row = self._conn.execute("SELECT data FROM nodes WHERE hash = ?", (digest,)).fetchone()
        return _checked(digest, None if row is None else bytes(row[0]))


NODE_CACHE_BYTES = 4 << 20
"""Node bytes a ``NodeCache`` holds before it forgets them all."""


class NodeCache:
    """Node bytes kept across reads (a PostgreSQL store's manifests: the runs of one
    workflow share most of theirs, and a worker reads one per run it claims), and the
    canonical text each referenced node decoded to (``DecodedTexts``): a run's manifest
    parses its workflow from that text, instead of fetching, checking and walking it.

    Nodes are content-addressed: a hash names the same bytes forever, so it names the
    same decoded value too; ``decode`` checks a node's bytes when it walks them. A text is
    a str, so no reader can change what the next one gets: each parses fresh containers.
    Forgotten wholesale past ``limit`` bytes (node bytes and texts together). Not locked:
    readers copy what they take (``get``), a dict's single updates are atomic, and an
    update lost to a race costs one read again.
    """

    def __init__(self, limit: int = NODE_CACHE_BYTES) -> None:
        self.nodes: dict[str, bytes] = {}
        self.absent: set[str] = set()
        """Names in a payload's text that were no node's when looked up (a manifest's tool
        file digests): a prefetch does not look them up again; ``decode`` would."""
        self.texts: dict[str, str] = {}
        self._limit = limit
        self._size = 0

    def get(self, wanted: set[str]) -> dict[str, bytes]:
        """The bytes held of ``wanted`` (a copy: the holder may forget them meanwhile)."""
        nodes = self.nodes
        return {name: data for name in wanted if (data := nodes.get(name)) is not None}

    def add(self, found: dict[str, bytes], absent: set[str]) -> None:
        """Hold ``found``; ``absent``: names a prefetch guessed that are no node's."""
        self._make_room(sum(len(data) for data in found.values()) + 64 * len(absent))
        self.nodes.update(found)
        self.absent |= absent

    def text_of(self, digest: str) -> str | None:
        """The canonical text of the value the node ``digest`` decoded to, if held."""
        return self.texts.get(digest)

    def keep_text(self, digest: str, text: str) -> None:
        """Hold ``text``, what the node ``digest`` decoded to (``decode`` checked it)."""
        self._make_room(len(text) + 64)
        self.texts[digest] = text

    def _make_room(self, size: int) -> None:
        """Forget everything when ``size`` more bytes would pass the limit; count them."""
        if self._size + size > self._limit:
            self.nodes.clear()
            self.absent = set()
            self.texts.clear()
            self._size = 0
        self._size += size


class NodeBatcher:
    """Node bytes fetched in batches through a PostgreSQL connection: a round trip per level.

    Nodes name their children by hash, so fetching one node also fetches every node its
    bytes name, level after level. A 64-hex string in user data that happens to name a
    node costs a read, never a wrong value: ``decode`` interprets, this only prefetches,
    and every node's bytes are checked against their hash when ``decode`` asks for them.
    """

    def __init__(self, conn: Any, shared: NodeCache | None = None) -> None:
        self._conn = conn
        self._shared = shared
        self._bytes: dict[str, bytes] = {}
        self._absent: set[str] = set()
        self._parsed: dict[str, JSON] = {}

    def prefetch(self, payloads: Iterable[str]) -> None:
        """Fetch every node the encoded payloads need, and the nodes those need (not those
        whose decoded text the shared cache holds: ``decode`` does not walk them)."""
        texts = {} if self._shared is None else self._shared.texts
        names = {name for text in payloads for name in _ROOT_NAME.findall(text)}
        self._fetch({name for name in names if name not in texts}, guess=True)

    def decode(self, payload: str) -> JSON:
        return decode_row(payload, self._node, cache=self._parsed, texts=self._shared)

    def _node(self, digest: str) -> bytes:
        data = self._bytes.get(digest)
        if data is None and digest not in self._absent:
            self._fetch({digest})
            data = self._bytes.get(digest)
        return _checked(digest, data)

    def _fetch(self, wanted: set[str], guess: bool = False) -> None:
        """Read ``wanted`` and the nodes they name, level by level. ``guess``: names taken
        from text (``prefetch``), which the shared cache may know are no node's; ``decode``
        asking for one reads it all the same."""
        shared = self._shared
        wanted -= self._bytes.keys() | self._absent
        while wanted:
            kept = {} if shared is None else shared.get(wanted)
            unknown = wanted - kept.keys()
            if guess and shared is not None:
                unknown -= shared.absent
            batch = sorted(unknown)
            found: dict[str, bytes] = {}
            for start in range(0, len(batch), _FETCH_BATCH):
                rows = self._conn.execute(
                    "SELECT hash, data FROM nodes WHERE hash = ANY(%s)",
                    (batch[start : start + _FETCH_BATCH],),
                ).fetchall()
                found.update((name, bytes(data)) for name, data in rows)
            if shared is not None:
                shared.add(found, set(batch) - found.keys() if guess else set())
            self._absent |= set(batch) - found.keys()
            found.update(kept)
            self._bytes.update(found)
            wanted = {
                name.decode("ascii") for data in found.values() for name in _NODE_NAME.findall(data)
            }
            wanted -= self._bytes.keys() | self._absent
