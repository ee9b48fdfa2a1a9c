"""What the SQL back ends share: statements written once, and the reads built on them.

SQLite and PostgreSQL store the same tables (``schema.py``), rows (``rows.py``) and
lease rule (``lease.py``); the statements that are the same in both modulo placeholders
live here, written with ``?`` and turned into ``%s`` by the ``Dialect``, with the reads
and small writes that run them on a connection the caller holds (inside the caller's
transaction). Each back end keeps only what truly differs: how it connects and commits,
how it claims work, collects garbage, polls for records and measures bytes.

Rules: parameterized SQL only; this module never opens, commits or rolls back a
transaction and never maps a driver's exception (the back end does, to PLAIT-E020);
it never reads the clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from plait.core.canonical import JSON, dumpb
from plait.core.canonical import digest as sha256_hex
from plait.core.errors import PlaitError
from plait.core.merkle import merkle_digest
from plait.store.base import JournalMarks, corrupted_checkpoint, unknown_run
from plait.store.chunks import (
    WHOLE_PREFIX,
    HashMemo,
    RowEncoder,
    collecting_encoder,
)
from plait.store.lease import LeaseRow, stale_token
from plait.store.manifest_rows import manifest_payload
from plait.store.packed import PACKED_PREFIX, unpack
from plait.store.records import CheckpointMeta, Journal, LeaseOwner, RunInfo
from plait.store.rows import (
    JOURNAL_COLUMNS,
    RAW_SELECT,
    RUN_COLUMNS,
    JournalRows,
    add_row,
    corrupted_journal,
    run_from_row,
)


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """A ``sqlite3`` or ``psycopg`` connection: both run a statement the same way."""

    def execute(self, sql: str, params: Any = ..., /) -> Cursor: ...


class NodeReader(Protocol):
    """Decodes payloads within one read (``node_reads.py``)."""

    def prefetch(self, payloads: Iterable[str]) -> None: ...

    def decode(self, payload: str) -> JSON: ...


@dataclass(frozen=True)
class Dialect:
    """How one back end spells what differs in a shared statement."""

    name: str
    row_order: str
    """The insertion-order tie-break of runs: SQLite's ``rowid``, PostgreSQL's column."""

    def q(self, sql: str) -> str:
        """A shared statement (``?`` placeholders) in this dialect."""
        return sql if self.name == "sqlite" else _percent_s(sql)


@lru_cache(maxsize=256)
def _percent_s(sql: str) -> str:
    return sql.replace("?", "%s")


SQLITE = Dialect("sqlite", "rowid")
POSTGRES = Dialect("postgres", "row_order")

FINISHED = ("completed", "failed", "stalled", "canceled", "budget_exhausted")
"""Statuses ``gc`` may delete (never queued, running or parked)."""

KNOWN_LIMIT = 1 << 21
"""Node hashes a store remembers as stored before the set is forgotten."""

WATCH_LIMIT = 256
"""Runs whose between-wave ``records_after`` poll a store remembers (drivers polling now)."""

RUN_LIST = ", ".join(RUN_COLUMNS)
JOURNAL_ROWS = (
    f"SELECT seq, {', '.join(JOURNAL_COLUMNS[:-1])},"
    # a journal lists checkpoints by hash and size; their bytes are read on demand
    " CASE WHEN item = 'checkpoint' THEN NULL ELSE payload END FROM journal"
    " WHERE run_id = ? AND seq > ?"
)
"""A run's journal rows after a seq, unordered (``SELECT_ROWS`` orders them)."""
SELECT_ROWS = JOURNAL_ROWS + " ORDER BY seq"
RAW_ROWS = f"SELECT {RAW_SELECT} FROM journal WHERE run_id = ?"
"""A run's journal rows as ``JournalRows`` holds them, unordered: only the columns a replay
reads (every column a row carries costs its fetch)."""
JOURNAL_MARKS = (
    "SELECT group_concat(seq) FILTER (WHERE item = 'checkpoint'),"
    " group_concat(seq) FILTER (WHERE record_kind = 'feed'),"
    " group_concat(record_kind) FILTER (WHERE record_kind <> 'feed'),"
    " group_concat(payload) FILTER (WHERE record_kind = 'feed')"
    " FROM journal WHERE run_id = ? AND item IN ('checkpoint', 'record')"
)
"""``RangeReads.journal_marks`` in one row (``marks_of``): a run's checkpoints' seqs, its
feeds' seqs, its other records' kinds, its feeds' payloads (a few hundred bytes each; a
checkpoint's is not read), each joined with commas. One row of four texts, not a row per
checkpoint and record: each column of each row fetched costs Python's ``sqlite3`` ~1 k
instructions (the GIL released and taken around it, a tuple, a string), SQLite's
concatenation a few dozen (``FILTER``: ~20% fewer than ``CASE``)."""
RAW_RANGE = RAW_ROWS + " AND seq >= ? AND seq <= ? ORDER BY seq"
"""``RAW_ROWS`` of a seq range, in order (verify on every core: each process its own)."""
LAST_SEQ = 2**63 - 1
"""The greatest seq a database column holds: the end of a range read to the end."""
LEASE_LIST = "host, pid, started_ms, token, expires_ms"
UPSERT_LEASE = (
    "INSERT INTO leases (run_id, host, pid, started_ms, token, expires_ms)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET"
    " host = excluded.host, pid = excluded.pid, started_ms = excluded.started_ms,"
    " token = excluded.token, expires_ms = excluded.expires_ms"
)
INSERT_MANIFEST = "INSERT INTO manifests (run_id, seq, payload) VALUES (?, ?, ?)"


class KnownNodes:
    """The nodes a store knows are stored, so it never cuts or sends one twice.

    Remembered only after the commit that stored them succeeded; forgotten wholesale
    past KNOWN_LIMIT (a node cut again is inserted with "ignore if present").
    """

    def __init__(self) -> None:
        self._known: set[str] = set()
        self._memo = HashMemo()

    def encoder(self, nodes: dict[str, bytes]) -> RowEncoder:
        """value -> payload text; the nodes it needs (and the store lacks) go into ``nodes``."""
        return collecting_encoder(nodes, self._known, self._memo)

    def manifest(self, manifest: JSON, nodes: dict[str, bytes]) -> str:
        """A run's original manifest -> its row's payload, the fields runs of one workflow
        share as nodes of their own (``manifest_rows.py``); its nodes go into ``nodes``."""
        return manifest_payload(manifest, self.encoder(nodes), nodes, self._known)

    def remember(self, nodes: dict[str, bytes]) -> None:
        """Only after a commit succeeded: these nodes are stored, never cut again."""
        if len(self._known) + len(nodes) > KNOWN_LIMIT:
            self._known.clear()
        self._known.update(nodes)


# --- runs ---


def get_run(conn: Connection, d: Dialect, run_id: str) -> RunInfo:
    """The run's row; PLAIT-E017 for an unknown run id."""
    row = conn.execute(d.q(f"SELECT {RUN_LIST} FROM runs WHERE run_id = ?"), (run_id,)).fetchone()
    if row is None:
        raise unknown_run(run_id)
    return run_from_row(row)


def list_runs(conn: Connection, d: Dialect, status: str | None) -> list[RunInfo]:
    """Runs newest first (insertion order breaks ties), optionally only those with ``status``."""
    order = f" ORDER BY created_ms DESC, {d.row_order} DESC"
    if status is None:
        rows = conn.execute(f"SELECT {RUN_LIST} FROM runs{order}").fetchall()
    else:
        where = d.q(" WHERE status = ?")
        rows = conn.execute(f"SELECT {RUN_LIST} FROM runs{where}{order}", (status,)).fetchall()
    return [run_from_row(row) for row in rows]


def join_conversation(conn: Connection, d: Dialect, conversation: str, run_id: str) -> None:
    """Make ``run_id`` the next turn of ``conversation`` (in the run's creating transaction)."""
    conn.execute(
        d.q(
            "INSERT INTO conversation_runs (conversation, position, run_id)"
            " SELECT ?, COALESCE(MAX(position), 0) + 1, ? FROM conversation_runs"
            " WHERE conversation = ?"
        ),
        (conversation, run_id, conversation),
    )


def conversation_runs(
    conn: Connection, d: Dialect, conversation: str | None
) -> list[tuple[str, RunInfo]]:
    """``Store.conversation_runs``: turns joined with their run rows, in order."""
    columns = ", ".join(f"r.{c}" for c in RUN_COLUMNS)
    query = (
        f"SELECT c.conversation, {columns} FROM conversation_runs c"
        " JOIN runs r ON r.run_id = c.run_id"
    )
    order = " ORDER BY c.conversation, c.position"
    if conversation is None:
        rows = conn.execute(query + order).fetchall()
    else:
        where = d.q(" WHERE c.conversation = ?")
        rows = conn.execute(query + where + order, (conversation,)).fetchall()
    return [(row[0], run_from_row(row[1:])) for row in rows]


def run_exists(conn: Connection, d: Dialect, run_id: str) -> bool:
    return (
        conn.execute(d.q("SELECT 1 FROM runs WHERE run_id = ?"), (run_id,)).fetchone() is not None
    )


def require_run(conn: Connection, d: Dialect, run_id: str) -> None:
    """PLAIT-E017 if there is no such run."""
    if not run_exists(conn, d, run_id):
        raise unknown_run(run_id)


# --- leases and wake times ---


def lease_from(values: Sequence[Any]) -> LeaseRow | None:
    """(host, pid, started_ms, token, expires_ms) -> LeaseRow; None when no lease row."""
    host, pid, started_ms, token, expires_ms = values
    if token is None:
        return None
    holder = None if host is None else LeaseOwner(host, pid, started_ms)
    return LeaseRow(holder, token, expires_ms)


def lease_row(conn: Connection, d: Dialect, run_id: str) -> LeaseRow | None:
    """The run's lease as stored, None when it never had one."""
    row = conn.execute(
        d.q(f"SELECT {LEASE_LIST} FROM leases WHERE run_id = ?"), (run_id,)
    ).fetchone()
    return None if row is None else lease_from(row)


def check_token(conn: Connection, d: Dialect, run_id: str, token: int) -> None:
    """PLAIT-E021 naming the holder unless ``token`` is the run's current, held lease."""
    current = lease_row(conn, d, run_id)
    if current is None or current.holder is None or current.token != token:
        raise stale_token(run_id, token, current)


def upsert_lease(
    conn: Connection,
    d: Dialect,
    run_id: str,
    owner: LeaseOwner,
    token: int,
    expires_ms: int,
) -> None:
    """Give ``owner`` the run's lease with ``token`` (decided by ``lease.may_take_over``)."""
    conn.execute(
        d.q(UPSERT_LEASE), (run_id, owner.host, owner.pid, owner.started_ms, token, expires_ms)
    )


def release_lease(conn: Connection, d: Dialect, run_id: str, token: int) -> None:
    """Give the lease up; a no-op when ``token`` is not current."""
    conn.execute(
        d.q(
            "UPDATE leases SET host = NULL, pid = NULL, started_ms = NULL, expires_ms = 0"
            " WHERE run_id = ? AND token = ? AND host IS NOT NULL"
        ),
        (run_id, token),
    )


def set_wake(conn: Connection, d: Dialect, run_id: str, wake_ms: int | None, replace: bool) -> None:
    """Store the run's wake time: as given with ``replace``, else the earlier one."""
    if replace:
        conn.execute(d.q("UPDATE runs SET wake_ms = ? WHERE run_id = ?"), (wake_ms, run_id))
    elif wake_ms is not None:
        conn.execute(
            d.q(
                "UPDATE runs SET wake_ms = ? WHERE run_id = ? AND (wake_ms IS NULL OR wake_ms > ?)"
            ),
            (wake_ms, run_id, wake_ms),
        )


def wake_of(conn: Connection, d: Dialect, run_id: str) -> int | None:
    """The run's recorded wake time (None when nothing is due); PLAIT-E017."""
    row = conn.execute(d.q("SELECT wake_ms FROM runs WHERE run_id = ?"), (run_id,)).fetchone()
    if row is None:
        raise unknown_run(run_id)
    return None if row[0] is None else int(row[0])


def gc_selection(tree: Iterable[Sequence[Any]]) -> list[str]:
    """The runs of ``tree`` (run_id, root, deletable) whose whole tree is deletable."""
    rows = list(tree)
    blocked = {root for _, root, deletable in rows if not deletable}
    return sorted({run_id for run_id, root, _ in rows if root not in blocked})


# --- manifests, the journal and checkpoints ---


def manifests(conn: Connection, d: Dialect, run_id: str, reader: NodeReader) -> list[JSON]:
    """The original manifest first, then every supersession; PLAIT-E017, E010."""
    rows = conn.execute(
        d.q("SELECT payload FROM manifests WHERE run_id = ? ORDER BY seq"), (run_id,)
    ).fetchall()
    if not rows:
        require_run(conn, d, run_id)
    return decoded_manifests(run_id, [row[0] for row in rows], reader)


def decoded_manifests(run_id: str, payloads: list[str], reader: NodeReader) -> list[JSON]:
    """The manifests rows' ``payloads`` (in seq order) decoded; PLAIT-E010."""
    reader.prefetch(payloads)
    try:
        return [reader.decode(payload) for payload in payloads]
    except ValueError as exc:  # ChunkError, CanonicalJSONError, a malformed key
        raise PlaitError("E010", f"manifest of run '{run_id}' is corrupted: {exc}") from exc


def load_journal(
    conn: Connection, d: Dialect, run_id: str, after_seq: int, reader: NodeReader
) -> Journal:
    """Every journal item of the run after ``after_seq``; PLAIT-E017, E010."""
    rows = conn.execute(d.q(SELECT_ROWS), (run_id, after_seq)).fetchall()
    return journal_of(conn, d, run_id, rows, reader)


def journal_of(
    conn: Connection, d: Dialect, run_id: str, rows: Sequence[Any], reader: NodeReader
) -> Journal:
    """The journal items ``rows`` (``seq`` then JOURNAL_COLUMNS) hold; PLAIT-E017 when
    there are none and the run does not exist, E010 for a row that does not decode."""
    if not rows:
        require_run(conn, d, run_id)
    journal = Journal(run_id)
    reader.prefetch(row[-1] for row in rows if row[1] != "checkpoint")
    try:
        for row in rows:
            add_row(journal, row[0], row[1:], reader.decode)
    except ValueError as exc:  # ChunkError, CanonicalJSONError, a malformed key
        raise corrupted_journal(run_id, exc) from exc
    return journal


def journal_rows_of(
    conn: Connection, d: Dialect, run_id: str, rows: list[Any], reader: NodeReader
) -> JournalRows:
    """The journal ``rows`` (``RAW_COLUMNS``, in seq order) hold, read lazily; PLAIT-E017
    when there are none and the run does not exist. Payloads not kept whole may name
    nodes: they are decoded now, in the store's read, as ``load_journal`` decodes them
    (each row its own fresh value), what decoding one raised kept for when it is read."""
    if not rows:
        require_run(conn, d, run_id)
    decoded: dict[int, JSON | Exception] = {}
    if all_kept_whole([payload for row in rows if (payload := row[-1]) is not None]):
        return JournalRows(run_id, rows, decoded)  # small values only: nothing to decode
    cut = [
        (index, payload)
        for index, row in enumerate(rows)
        # not keeps_whole(payload), inline: its call costs a row ~0.4 k instructions
        if (payload := row[-1]) is not None
        and not (payload[:_WHOLE_PREFIX_LENGTH] == WHOLE_PREFIX and payload[-1] == "}")
    ]
    if cut:
        reader.prefetch(payload for _, payload in cut)
        for index, payload in cut:
            try:
                decoded[index] = reader.decode(payload)
            except Exception as exc:  # raised again when the row is read or checked
                decoded[index] = exc
    return JournalRows(run_id, rows, decoded)


def all_kept_whole(payloads: list[Any]) -> bool:
    """Whether every one of ``payloads`` keeps its value whole (``chunks.keeps_whole``), as
    every row of a journal of small values does: asked of the texts joined, in C, not of
    each row in Python (a call and two slices: ~2.3 k instructions a row, ~0.7 k so).

    The texts are joined with NULs once none holds a NUL (``in``: memchr). Then each NUL in
    the join stands between two texts, and every text keeps whole exactly when each NUL
    stands between a ``}`` and a ``{"j":`` (one occurrence of ``_WHOLE_JOIN`` per NUL: they
    cannot overlap) and the join starts as a whole text starts and ends as one ends; a text
    too short for its prefix or its ``}`` meets a NUL or an end there, which neither
    holds. Anything else answers False (a text holding a NUL, an empty text, a payload not
    a text): the caller then asks each row (``keeps_whole``'s test). A journal holding
    values cut into nodes pays this test on top of its rows' (~0.35 k instructions a row)."""
    if not payloads:
        return True
    try:
        if "\0" in "".join(payloads):
            return False
        joined = "\0".join(payloads)
    except TypeError:  # a payload that is not a text (a blob written by hand)
        return False
    return (
        joined.count(_WHOLE_JOIN) == len(payloads) - 1
        and joined[:_WHOLE_PREFIX_LENGTH] == WHOLE_PREFIX
        and joined[-1] == "}"
    )


_WHOLE_JOIN = "}\0" + WHOLE_PREFIX
"""What stands around each NUL joining texts that all keep whole (``all_kept_whole``)."""
_WHOLE_PREFIX_LENGTH = len(WHOLE_PREFIX)


def marks_of(row: tuple[str | None, str | None, str | None, str | None]) -> JournalMarks:
    """The marks ``JOURNAL_MARKS``'s row holds (every column NULL for an unknown run). The
    seqs are sorted here: SQL leaves the order of ``group_concat`` unsaid."""
    checkpoints, feeds, kinds, texts = row
    other = frozenset(() if kinds is None else kinds.split(","))
    return JournalMarks(_seqs(checkpoints), _seqs(feeds), other, texts or "")


def _seqs(text: str | None) -> list[int]:
    """The seqs ``group_concat`` joined with commas, ascending: read as one JSON array
    (a third of the instructions of ``int`` on each piece of the split text)."""
    seqs: list[int] = [] if text is None else json.loads(f"[{text}]")
    seqs.sort()
    return seqs


def read_checkpoint(
    conn: Connection, d: Dialect, run_id: str, seq: int, reader: NodeReader
) -> bytes:
    """The exact canonical bytes of checkpoint ``seq``; PLAIT-E010 if they fail their hash."""
    row = conn.execute(
        d.q(
            "SELECT sha256, size, payload FROM journal"
            " WHERE run_id = ? AND seq = ? AND item = 'checkpoint'"
        ),
        (run_id, seq),
    ).fetchone()
    if row is None:
        require_run(conn, d, run_id)
        raise PlaitError("E010", f"run '{run_id}' has no checkpoint at seq {seq}")
    sha, size, payload = row
    return _checkpoint_bytes(run_id, seq, sha, size, payload, reader)


def read_checkpoints(
    conn: Connection, d: Dialect, run_id: str, first: int, last: int, reader: NodeReader
) -> dict[int, bytes]:
    """The exact canonical bytes of every checkpoint with ``first <= seq <= last``, by seq,
    in one query (what ``verify`` compares its replay with); PLAIT-E017, E010 as
    ``read_checkpoint``. One reader serves them all, so a node that several checkpoints
    share is read and hash-checked once."""
    rows = conn.execute(
        d.q(
            "SELECT seq, sha256, size, payload FROM journal"
            " WHERE run_id = ? AND item = 'checkpoint' AND seq >= ? AND seq <= ? ORDER BY seq"
        ),
        (run_id, first, last),
    ).fetchall()
    if not rows:
        require_run(conn, d, run_id)
    reader.prefetch(row[3] for row in rows if not row[3].startswith(_WHOLE))
    return {
        seq: _checkpoint_bytes(run_id, seq, sha, size, payload, reader)
        for seq, sha, size, payload in rows
    }


_WHOLE = WHOLE_PREFIX
"""How a checkpoint kept whole starts its payload: the rest is its canonical text (``}``
closes it), so its bytes are read without parsing and encoding the value again."""


def _checkpoint_bytes(
    run_id: str, seq: int, sha: str, size: int, payload: str, reader: NodeReader
) -> bytes:
    """A checkpoint row's bytes, checked against the size and digest the row records;
    PLAIT-E010. The digest is the SHA-256 of the payload, the root naming its nodes by
    hash (engine epoch 3, ``core.merkle``), or of the whole bytes (epochs 1 and 2); a
    cut checkpoint is also checked node by node as it is decoded. A checkpoint at rest is
    stored deflated (``packed.py``): its digest is the one its whole payload would have."""
    if payload.startswith(PACKED_PREFIX):
        try:
            data = unpack(payload)
        except ValueError as exc:
            raise corrupted_checkpoint(run_id, seq, str(exc)) from exc
        whole = _WHOLE + data.decode("utf-8", "replace") + "}"
        if len(data) != size or not (sha256_hex(data) == sha or merkle_digest(whole) == sha):
            raise corrupted_checkpoint(run_id, seq, "sha256 mismatch")
        return data
    merkle = merkle_digest(payload) == sha
    if payload.startswith(_WHOLE) and payload.endswith("}"):
        data = payload[len(_WHOLE) : -1].encode("utf-8")
        if len(data) == size and (merkle or sha256_hex(data) == sha):
            return data  # else decoded below, as any payload, to say what is wrong
    try:
        reader.prefetch([payload])
        data = dumpb(reader.decode(payload))
    except ValueError as exc:  # ChunkError, CanonicalJSONError, a malformed key
        raise corrupted_checkpoint(run_id, seq, str(exc)) from exc
    if len(data) != size or not (merkle or sha256_hex(data) == sha):
        raise corrupted_checkpoint(run_id, seq, "sha256 mismatch")
    return data


def checkpoint_beside(
    conn: Connection, d: Dialect, run_id: str, seq: int, *, later: bool
) -> CheckpointMeta | None:
    """The nearest checkpoint after journal ``seq`` (``later``) or before it, or None: a
    short range read on the journal's ``(run_id, seq)`` key (a checkpoint ends each
    superstep)."""
    beyond, order = (">", "ASC") if later else ("<", "DESC")
    row = conn.execute(
        d.q(
            "SELECT seq, superstep, sha256, size FROM journal WHERE run_id = ?"
            f" AND item = 'checkpoint' AND seq {beyond} ? ORDER BY seq {order} LIMIT 1"
        ),
        (run_id, seq),
    ).fetchone()
    return None if row is None else CheckpointMeta(*row)


def latest_checkpoint(conn: Connection, d: Dialect, run_id: str) -> CheckpointMeta | None:
    """The last checkpoint written, or None; PLAIT-E017 for an unknown run."""
    row = conn.execute(
        d.q(
            "SELECT seq, superstep, sha256, size FROM journal"
            " WHERE run_id = ? AND item = 'checkpoint' ORDER BY seq DESC LIMIT 1"
        ),
        (run_id,),
    ).fetchone()
    if row is None:
        require_run(conn, d, run_id)
        return None
    return CheckpointMeta(*row)


def duplicate_key(where: str, run_id: str, item: str, key: str) -> PlaitError:
    """PLAIT-E020 for an intent or result whose journal key the run already has."""
    article = "an" if item == "intent" else "a"
    return PlaitError(
        "E020",
        f"storage error on {where}: run '{run_id}' already has {article} {item}"
        f" for journal key {key}",
    )
