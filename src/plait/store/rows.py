"""The row layout of the runs and journal tables, shared by every SQL back end.

A write becomes a tuple of column values here and a row becomes a record here, so SQLite
and PostgreSQL store exactly the same thing. Payloads are turned into text by the
``encode`` callable the store passes in (chunks.py, with the store's own caches) and
back by ``decode``; this module never runs SQL and never sees a connection.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from json.encoder import encode_basestring as _quote
from typing import Any

from plait.core.canonical import JSON, digest, dumps, loads
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store.chunks import (
    SMALL_LIMIT,
    WHOLE_PREFIX,
    Cut,
    RowEncoder,
    WholeShape,
    decode_row,
    kept_whole,
    kept_whole_part,
    whole_text,
)
from plait.store.packed import pack
from plait.store.records import (
    CheckpointMeta,
    CheckpointWrite,
    IntentRecord,
    IntentWrite,
    Journal,
    ManifestWrite,
    Record,
    RecordWrite,
    ResultRecord,
    ResultWrite,
    RunInfo,
    StatusWrite,
    Write,
)

RUN_COLUMNS = ("run_id", "workflow", "status", "principal", "parent_run_id", "created_ms",
               "updated_ms", "outcome")  # fmt: skip
"""Columns of a run row as ``run_row``/``run_from_row`` order them."""

JOURNAL_COLUMNS = ("item", "journal_key", "executor", "record_kind", "superstep", "clock_ms",
                   "idempotency_key", "journal_bytes", "sha256", "size", "payload")  # fmt: skip
"""Columns of a journal row after ``(run_id, seq)``, as ``write_row`` orders them."""

Row = tuple[Any, ...]

RAW_COLUMNS = ("seq", "item", "journal_key", "executor", "superstep", "size", "payload")
"""Columns of a journal row as ``JournalRows`` holds it: what a replay of the run reads
(a checkpoint's payload is read as NULL: its bytes are read on demand). Two columns hold
another column for one item, which never sets theirs (``MAY_BE_SET``): a record's
``record_kind`` in ``journal_key`` (``KIND``), a checkpoint's ``sha256`` in ``executor``
(``SHA256``); every column fetched costs each row its conversion (``RAW_SELECT``)."""
SEQ, ITEM, KEY, EXECUTOR, SUPERSTEP, SIZE, PAYLOAD = range(len(RAW_COLUMNS))
KIND = KEY
"""A record's ``record_kind``, where an intent's or a result's key is."""
SHA256 = EXECUTOR
"""A checkpoint's ``sha256``, where an intent's executor is."""
RAW_SELECT = (
    "seq, item, CASE WHEN item = 'record' THEN record_kind ELSE journal_key END,"
    " CASE WHEN item = 'checkpoint' THEN sha256 ELSE executor END, superstep, size,"
    " CASE WHEN item = 'checkpoint' THEN NULL ELSE payload END"
)
"""The select list of ``RAW_COLUMNS``, in SQL either back end reads."""

MAY_BE_SET: dict[str, tuple[bool, ...]] = {
    "intent": (True, True, True, False, True, True, True, False, False, False, True),
    "result": (True, True, False, False, False, True, False, True, False, False, True),
    "checkpoint": (True, False, False, False, True, False, False, False, True, True, True),
    "record": (True, False, False, True, False, False, False, False, False, False, True),
}
"""Per journal item, which JOURNAL_COLUMNS ``write_row`` may set: the others are always
None (a store may write them as NULL literals without looking at the row)."""


def run_row(info: RunInfo) -> Row:
    outcome = None if info.outcome is None else dumps(info.outcome)
    return (info.run_id, info.workflow, info.status, info.principal, info.parent_run_id,
            info.created_ms, info.updated_ms, outcome)  # fmt: skip


def run_from_row(row: Row) -> RunInfo:
    outcome = None if row[7] is None else loads(row[7])
    return RunInfo(row[0], row[1], row[2], row[3], row[4], row[5], row[6], outcome)


def write_row(write: Write, encode: RowEncoder) -> Row:
    """What one write becomes, tagged by its first element.

    ``intent``/``result``/``checkpoint``/``record``: the JOURNAL_COLUMNS values;
    ``status``: (status, outcome text, updated_ms); ``manifest``: (payload,).
    """
    if isinstance(write, IntentWrite):
        return ("intent", key_text(write.key), write.executor, None, write.superstep,
                write.clock_ms, write.idempotency_key, None, None, None,
                encode(write.input, write.input_cut))  # fmt: skip
    if isinstance(write, ResultWrite):
        return ("result", key_text(write.key), None, None, None, write.clock_ms, None,
                write.journal_bytes, None, None,
                encode(write.outcome, write.outcome_cut))  # fmt: skip
    if isinstance(write, CheckpointWrite):
        cut = write.cut
        if cut is not None:  # epoch 3: cut by the core, digested by its Merkle root
            payload = cut.root
            if cut.nodes:
                encode(None, Cut(cut.root, cut.nodes))
            elif write.at_rest and payload.startswith(WHOLE_PREFIX):  # kept whole: deflated
                payload = pack(payload[len(WHOLE_PREFIX) : -1].encode("utf-8"))
            return ("checkpoint", None, None, None, write.superstep, None, None, None,
                    cut.digest, cut.size, payload)  # fmt: skip
        assert write.data is not None
        text = write.data.decode("utf-8")
        if write.value is None and len(text) <= SMALL_LIMIT:
            # a checkpoint is an object: kept whole like any, deflated when at rest
            payload = pack(write.data) if write.at_rest else whole_text(text)
        else:
            payload = encode(loads(text) if write.value is None else write.value, text)
        return ("checkpoint", None, None, None, write.superstep, None, None, None,
                digest(write.data), len(write.data), payload)  # fmt: skip
    if isinstance(write, RecordWrite):
        return ("record", None, None, write.kind, None, None, None, None, None, None,
                encode(write.body, write.text))  # fmt: skip
    if isinstance(write, StatusWrite):
        outcome = None if write.outcome is None else dumps(write.outcome)
        return ("status", write.status, outcome, write.updated_ms)
    if isinstance(write, ManifestWrite):
        return ("manifest", encode(write.manifest, None))
    raise TypeError(f"not a store write: {write!r}")


def add_row(journal: Journal, seq: int, row: Row, decode: Callable[[str], JSON]) -> None:
    """Append the record a journal row (JOURNAL_COLUMNS values) stands for; a row that does
    not decode raises as ``JournalRows.check`` does."""
    item, key_text, executor, record_kind, superstep, clock_ms = row[:6]
    idempotency_key, journal_bytes, sha, size, payload = row[6:]
    if item == "intent":
        key = key_of(key_text)
        journal.intents.append(
            IntentRecord(seq, key, executor, decode(payload), superstep, clock_ms, idempotency_key)
        )
    elif item == "result":
        key = key_of(key_text)
        journal.results[key] = ResultRecord(seq, key, decode(payload), clock_ms, journal_bytes)
    elif item == "checkpoint":
        journal.checkpoints.append(CheckpointMeta(seq, superstep, sha, size))
    elif item == "record":
        journal.records.append(Record(seq, record_kind, decode(payload)))
    else:
        raise ValueError(f"unknown journal item {item!r} at seq {seq}")


def corrupted_journal(run_id: str, exc: ValueError) -> PlaitError:
    """PLAIT-E010 for a journal row that does not decode (``ChunkError``,
    ``CanonicalJSONError``, a malformed key)."""
    return PlaitError("E010", f"journal of run '{run_id}' is corrupted: {exc}")


class JournalRows:
    """A run's journal as its rows (``RAW_COLUMNS``, in seq order), each row's payload
    parsed only when its reader asks for its value: a replay (verify) reaches most rows
    once, in order, and compares some of them as text without parsing them at all.

    Reading lazily must not change what a corrupt row does: reading the whole journal at
    once (``load_journal``) raises PLAIT-E010 for the first row in seq order that does not
    decode, before anything else. So a reader calls ``check`` before it reports anything,
    and when anything it does raises: ``check`` decodes every row not read yet, in seq
    order, and raises what ``load_journal`` raises for the first that does not decode.

    A payload kept whole (``chunks.whole_text``: nearly every row) is parsed from its own
    text: text that starts as one decodes, or fails to, without reading any node
    (``chunks.decode`` of an object tagged ``j`` reads none). Any other payload may name
    nodes: the store decoded it in its read (``cut``, by row index: its value, or what
    decoding it raised, raised again only when the row is read or checked).
    """

    __slots__ = ("_cut", "_read", "checkpoints", "intents", "records", "result_keys",
                 "results", "rows", "run_id")  # fmt: skip

    def __init__(self, run_id: str, rows: list[Row], cut: dict[int, JSON | Exception]) -> None:
        self.run_id = run_id
        self.rows = rows
        self._cut = cut
        self._read: set[int] = set()
        """Rows whose payload is known to decode (and key, for an intent or a result)."""
        self.checkpoints: list[int] = []
        """Indexes in ``rows`` of the checkpoints, of the records, in seq order."""
        self.records: list[int] = []
        self.intents: dict[JournalKey, int] = {}
        """By key, the index of its intent, of its result (the last row, as ``Journal``)."""
        self.results: dict[JournalKey, int] = {}
        self.result_keys: dict[str, JournalKey] = {}
        """The keys of ``results`` by their ``journal_key`` text (a feed names them so)."""
        try:
            self._sort_rows()
        except Exception:
            self.check()
            raise

    def _sort_rows(self) -> None:
        checkpoints, records, intents = self.checkpoints, self.records, self.intents
        results, result_keys, read = self.results, self.result_keys, self._read
        for index, row in enumerate(self.rows):
            item = row[ITEM]
            if item == "checkpoint":
                checkpoints.append(index)
                read.add(index)  # read as NULL: nothing to decode (``_check_row``)
            elif item == "record":
                records.append(index)
            elif item == "intent":
                intents[key_of(row[KEY])] = index
            elif item == "result":
                text = row[KEY]
                key = result_keys[text] = key_of(text)
                results[key] = index

    def value(self, index: int) -> JSON:
        """The value of row ``index``'s payload (its key was parsed already)."""
        value = self._payload(index)
        self._read.add(index)
        return value

    def _payload(self, index: int) -> JSON:
        if index in self._cut:
            value = self._cut[index]
            if isinstance(value, Exception):
                raise value
            return value
        return decode_row(self.rows[index][PAYLOAD], _no_node_read)

    def whole_text(self, index: int) -> str | None:
        """The text of row ``index``'s value when the row keeps it whole (``whole_text``):
        its canonical JSON as the writer made it; None for a value kept otherwise."""
        return kept_whole(self.rows[index][PAYLOAD])

    def whole_text_part(self, index: int, shape: WholeShape) -> str | None:
        """``whole_text(index)`` between the head and tail of ``shape`` when it starts and
        ends with them (``chunks.kept_whole_part``), else None."""
        return kept_whole_part(self.rows[index][PAYLOAD], shape)

    def keeps_text(self, index: int, text: str) -> bool:
        """Whether ``whole_text(index) == text``, without taking the row's text out."""
        payload: str | None = self.rows[index][PAYLOAD]
        return payload == WHOLE_PREFIX + text + "}"  # whole_text(text), without its call

    def read_as_text(self, index: int) -> None:
        """Row ``index`` was read from its ``whole_text`` alone, which its reader found
        decodes (to the value it stands for): ``check`` need not decode it."""
        self._read.add(index)

    def check(self, indexes: range | None = None) -> None:
        """Decode every row not read yet (of ``indexes`` only, when given), in seq order:
        PLAIT-E010 (or what else ``load_journal`` would raise) for the first that does
        not decode."""
        read, rows = self._read, self.rows
        try:
            for index in range(len(rows)) if indexes is None else indexes:
                if index not in read:
                    self._check_row(index, rows[index])
                    read.add(index)
        except ValueError as exc:
            raise corrupted_journal(self.run_id, exc) from exc

    def checked_elsewhere(self, indexes: range) -> None:
        """Rows ``indexes`` were checked by another process, on a copy of these rows
        (verify on every core): ``check`` need not decode them again."""
        self._read.update(indexes)

    def _check_row(self, index: int, row: Row) -> None:
        """Decode row ``index`` as ``add_row`` decodes its record, key first."""
        item = row[ITEM]
        if item == "intent" or item == "result":
            key_of(row[KEY])
            self._payload(index)
        elif item == "record":
            self._payload(index)
        elif item != "checkpoint":
            raise ValueError(f"unknown journal item {item!r} at seq {row[SEQ]}")


def _no_node_read(digest: str) -> bytes:
    raise AssertionError(f"a payload kept whole named node {digest}: chunks.decode changed")


@lru_cache(maxsize=4096)
def key_of(text: str) -> JournalKey:
    """The key a ``journal_key`` column holds; remembered, as an intent and its result
    hold the same key (keys are immutable, so sharing one is safe)."""
    return JournalKey.from_json(loads(text))


@lru_cache(maxsize=4096)
def key_text(key: JournalKey) -> str:
    """A key's ``journal_key`` column text; remembered, as an intent and its result write
    the same key.

    Written field by field in the canonical encoder's key order, with its own string
    form (``encode_basestring``) and an ``int``'s own text: a new key each superstep, and
    this costs a fraction of building ``to_json()``'s dict and encoding it. A field of any
    other type (a bool, a non-string) is left to the encoder, which says what it is."""
    run_id, task_path, node, attempt, effect_seq, kind = key
    if type(attempt) is int and type(effect_seq) is int:
        try:
            return (
                f'{{"attempt":{attempt},"effect_seq":{effect_seq},"kind":{_quote(kind)},'
                f'"node":{_quote(node)},"run_id":{_quote(run_id)},'
                f'"task_path":{_quote(task_path)}}}'
            )
        except TypeError:
            pass  # a field that is not a string
    return dumps(key.to_json())
