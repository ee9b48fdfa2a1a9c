"""The values that cross the store boundary: what a driver writes and what it reads back.

Every back end (SQLite and PostgreSQL) speaks exactly these types, so the driver
never sees a row, a cursor or a column name. Writes are handed to ``Store.commit`` as one
ordered batch; the read side mirrors them with the per-run sequence number (``seq``) each
was given. These are plain frozen values: this module never touches a database, and
payloads are opaque JSON the store never interprets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from plait.core.canonical import JSON
from plait.core.keys import JournalKey
from plait.core.merkle import CheckpointCut
from plait.store.chunks import Cut

RUN_STATUSES: tuple[str, ...] = (
    "queued",
    "running",
    "parked",
    "completed",
    "failed",
    "stalled",
    "canceled",
    "budget_exhausted",
)
"""Every status a run row may hold."""


def _check_status(status: str) -> None:
    if status not in RUN_STATUSES:
        raise ValueError(f"unknown run status {status!r} (expected one of {RUN_STATUSES})")


@dataclass(frozen=True)
class LeaseOwner:
    """Who drives a run: a process on a host, told apart from a later one by its start time."""

    host: str
    pid: int
    started_ms: int


@dataclass(frozen=True)
class RunInfo:
    """One run's row: identity, status and final outcome (None until it finishes)."""

    run_id: str
    workflow: str
    status: str
    principal: str
    parent_run_id: str | None
    created_ms: int
    updated_ms: int
    outcome: JSON | None = None

    def __post_init__(self) -> None:
        _check_status(self.status)


# --- writes: what a driver hands to Store.commit, applied in order in one transaction ---
#
# A driver builds four of these every superstep, and verify reads four journal records
# (below) a superstep. The ``__init__`` dataclass writes for a frozen class sets each field
# through ``object.__setattr__`` (about 1.8k instructions a field); the hand-written ones
# of these eight classes fill the instance's ``__dict__`` in one call, which halves that.
# They stay frozen (assignment still raises) and take the same arguments;
# ``tests/store/test_rows_read.py`` checks each sets exactly its fields.


@dataclass(frozen=True)
class IntentWrite:
    """An effect about to be dispatched; journaled before the dispatch.

    ``input_cut``, when given, must be ``input`` as ``chunks.encode_text`` cuts it (the
    driver cut it already for the idempotency key): the store writes it as it is.
    """

    key: JournalKey
    executor: str
    input: JSON
    superstep: int
    clock_ms: int
    idempotency_key: str
    input_cut: Cut | None = field(default=None, repr=False, compare=False)

    def __init__(
        self,
        key: JournalKey,
        executor: str,
        input: JSON,
        superstep: int,
        clock_ms: int,
        idempotency_key: str,
        input_cut: Cut | None = None,
    ) -> None:
        self.__dict__.update(key=key, executor=executor, input=input, superstep=superstep,
                             clock_ms=clock_ms, idempotency_key=idempotency_key,
                             input_cut=input_cut)  # fmt: skip


@dataclass(frozen=True)
class ResultWrite:
    """An effect's outcome (``{"Completed": ...}`` or ``{"Failed": ...}``), once per key.

    ``outcome_cut``, when given, must be ``outcome`` as ``chunks.encode_text`` cuts it
    (as ``IntentWrite.input_cut``).
    """

    key: JournalKey
    outcome: JSON
    clock_ms: int
    journal_bytes: int
    outcome_cut: Cut | None = field(default=None, repr=False, compare=False)

    def __init__(
        self,
        key: JournalKey,
        outcome: JSON,
        clock_ms: int,
        journal_bytes: int,
        outcome_cut: Cut | None = None,
    ) -> None:
        self.__dict__.update(key=key, outcome=outcome, clock_ms=clock_ms,
                             journal_bytes=journal_bytes, outcome_cut=outcome_cut)  # fmt: skip


@dataclass(frozen=True)
class CheckpointWrite:
    """The canonical JSON bytes of one checkpoint; read back byte for byte.

    ``value``, when given, must be the value ``data`` encodes (a checkpoint is an object,
    never null): it spares the store parsing a large ``data`` again on the hot path (a
    small one is stored from ``data`` itself). A value that does not match is caught when
    the checkpoint is read (PLAIT-E010), not when written.
    """

    superstep: int
    data: bytes | None
    value: JSON | None = field(default=None, repr=False, compare=False)
    cut: CheckpointCut | None = field(default=None, repr=False, compare=False)
    """From engine epoch 3 (``data`` None): the checkpoint as the core cut it; the row
    holds its root, digest (the Merkle root's SHA-256) and size, its nodes go in with it."""
    at_rest: bool = field(default=False, compare=False)
    """The checkpoint a run parks with: a small one is stored deflated (``packed.py``)."""

    def __init__(
        self,
        superstep: int,
        data: bytes | None,
        value: JSON | None = None,
        cut: CheckpointCut | None = None,
        at_rest: bool = False,
    ) -> None:
        self.__dict__.update(superstep=superstep, data=data, value=value, cut=cut,
                             at_rest=at_rest)  # fmt: skip


@dataclass(frozen=True)
class RecordWrite:
    """An ordered administrative record (clock, answer, cancel, inbox, ...); opaque here.

    ``text``, when given, must be ``body``'s canonical JSON text (the driver writes a
    wave's feed as text): the store keeps it as it is instead of encoding ``body`` again.
    """

    kind: str
    body: JSON
    text: str | None = field(default=None, repr=False, compare=False)

    def __init__(self, kind: str, body: JSON, text: str | None = None) -> None:
        self.__dict__.update(kind=kind, body=body, text=text)


@dataclass(frozen=True)
class StatusWrite:
    """A change of the run row's status (and outcome); takes no place in the journal order."""

    status: str
    outcome: JSON | None
    updated_ms: int

    def __post_init__(self) -> None:
        _check_status(self.status)


@dataclass(frozen=True)
class ManifestWrite:
    """A manifest supersession (e.g. raised budgets); the original manifest comes first."""

    manifest: JSON


Write: TypeAlias = (
    IntentWrite | ResultWrite | CheckpointWrite | RecordWrite | StatusWrite | ManifestWrite
)


# --- read side: the journal as stored, every item carrying its seq ---


@dataclass(frozen=True)
class IntentRecord:
    """A journaled intent."""

    seq: int
    key: JournalKey
    executor: str
    input: JSON
    superstep: int
    clock_ms: int
    idempotency_key: str

    def __init__(
        self,
        seq: int,
        key: JournalKey,
        executor: str,
        input: JSON,
        superstep: int,
        clock_ms: int,
        idempotency_key: str,
    ) -> None:
        self.__dict__.update(seq=seq, key=key, executor=executor, input=input,
                             superstep=superstep, clock_ms=clock_ms,
                             idempotency_key=idempotency_key)  # fmt: skip


@dataclass(frozen=True)
class ResultRecord:
    seq: int
    key: JournalKey
    outcome: JSON
    clock_ms: int
    journal_bytes: int

    def __init__(
        self, seq: int, key: JournalKey, outcome: JSON, clock_ms: int, journal_bytes: int
    ) -> None:
        self.__dict__.update(seq=seq, key=key, outcome=outcome, clock_ms=clock_ms,
                             journal_bytes=journal_bytes)  # fmt: skip


@dataclass(frozen=True)
class CheckpointMeta:
    """Where a checkpoint sits and what its bytes hash to; read the bytes separately."""

    seq: int
    superstep: int
    sha256: str
    size: int

    def __init__(self, seq: int, superstep: int, sha256: str, size: int) -> None:
        self.__dict__.update(seq=seq, superstep=superstep, sha256=sha256, size=size)


@dataclass(frozen=True)
class Record:
    seq: int
    kind: str
    body: JSON

    def __init__(self, seq: int, kind: str, body: JSON) -> None:
        self.__dict__.update(seq=seq, kind=kind, body=body)


JournalItem: TypeAlias = IntentRecord | ResultRecord | Record | CheckpointMeta


@dataclass(frozen=True)
class Journal:
    """Everything journaled for one run; ``items()`` gives the one total order."""

    run_id: str
    intents: list[IntentRecord] = field(default_factory=list)
    results: dict[JournalKey, ResultRecord] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    checkpoints: list[CheckpointMeta] = field(default_factory=list)

    def items(self) -> list[JournalItem]:
        """Intents, results, records and checkpoint metas merged in ``seq`` order."""
        merged: list[JournalItem] = [
            *self.intents,
            *self.results.values(),
            *self.records,
            *self.checkpoints,
        ]
        merged.sort(key=lambda item: item.seq)
        return merged


@dataclass(frozen=True)
class ScheduleRow:
    """One schedule as stored: its spec (canonical JSON, ``workflow.schedule_spec``), whether
    it is paused, its next slot, and what its last slot did."""

    name: str
    spec: dict[str, Any]
    paused: bool
    next_ms: int
    created_ms: int
    updated_ms: int
    last_slot_ms: int | None = None
    last_run_id: str | None = None
    last_error: str | None = None


FIRED, TAKEN, OVERLAPPED = "fired", "taken", "overlap"
"""What ``fire_slot`` did with a slot: started its run; found it taken (another worker
fired it, or moved the schedule past it, paused or deleted it); skipped it because the
schedule's previous run is not finished (``overlap: skip``)."""


@dataclass(frozen=True)
class TokenRow:
    """One principal's API token as stored: never the token, only its SHA-256 (hex)."""

    principal: str
    role: str
    digest: str
    created_ms: int
