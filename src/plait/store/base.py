"""The store contract: ``Store``, what the driver persists through, and ``WorkStore``, what
workers and ``plait gc`` need on top of it (docs/architecture.md §11).

SQLite (``sqlite.py``) and PostgreSQL (``postgres.py``) implement both in full and pass
the same conformance suite (``tests/store``); where a back end has nothing to do (SQLite
has no notifications) its method says so and does nothing, so no caller ever probes a
store for a method. The protocols speak only the values of ``records.py`` and canonical
JSON; no SQL, row or connection ever leaves a store. Every failure a user can meet is a
``PlaitError`` with its code: E016 duplicate run id, E017 unknown run id, E010 corrupted
checkpoint, E020 storage error, E021 lease lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from plait.core.canonical import JSON
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store.lease import LeaseClaim
from plait.store.records import (
    CheckpointMeta,
    Journal,
    JournalItem,
    LeaseOwner,
    Record,
    RunInfo,
    ScheduleRow,
    TokenRow,
    Write,
)

if TYPE_CHECKING:  # run_pages reads rows through sql, which imports this module
    from plait.store.rows import JournalRows
    from plait.store.run_pages import RunPage, RunQuery


@runtime_checkable
class Store(Protocol):
    """Runs, their manifests, their journal and their leases; every write is one transaction."""

    def create_run(
        self,
        info: RunInfo,
        manifest: JSON,
        conversation: str | None = None,
        *,
        lease: LeaseClaim | None = None,
    ) -> int | None:
        """Add a run with its original manifest; PLAIT-E016 if the run id exists. With
        ``conversation``, the run is that conversation's next turn (same transaction).
        With ``lease``, the run's lease is taken in the same transaction, as
        ``acquire_lease`` would (one transaction to start driving a run, not two): its
        token is returned; without, None."""
        ...

    def conversation_runs(self, conversation: str | None = None) -> list[tuple[str, RunInfo]]:
        """``(conversation, run)`` of every turn of ``conversation`` (of every one when
        None), by conversation then turn order; runs deleted by ``gc`` are left out."""
        ...

    def get_run(self, run_id: str) -> RunInfo:
        """The run's row; PLAIT-E017 for an unknown run id."""
        ...

    def list_runs(self, status: str | None = None) -> list[RunInfo]:
        """Runs newest first, optionally only those with ``status``."""
        ...

    def page_runs(self, query: RunQuery) -> RunPage:
        """One page of the runs ``query`` matches, newest first (``run_pages.py``)."""
        ...

    def journal_page(self, run_id: str, before_seq: int | None, limit: int) -> list[JournalItem]:
        """Up to ``limit`` journal items before ``before_seq`` (None: the newest), newest
        first; PLAIT-E017 for an unknown run id."""
        ...

    def manifests(self, run_id: str) -> list[JSON]:
        """The original manifest first, then every supersession in order; PLAIT-E017."""
        ...

    def acquire_lease(
        self,
        run_id: str,
        owner: LeaseOwner,
        now_ms: int,
        ttl_ms: int,
        owner_alive: Callable[[LeaseOwner], bool],
    ) -> int:
        """Take the run's lease and return a fencing token, strictly increasing per run.

        A free or expired lease (``expires_ms <= now_ms``), or one whose holder is on the
        claimant's host and not alive (``owner_alive`` does that IO for the store), is
        taken over; a lease held by a live owner is PLAIT-E021 naming the holder.
        """
        ...

    def renew_lease(self, run_id: str, token: int, now_ms: int, ttl_ms: int) -> None:
        """Extend the lease to ``now_ms + ttl_ms``; PLAIT-E021 if ``token`` is not current."""
        ...

    def release_lease(self, run_id: str, token: int) -> None:
        """Give the lease up; a no-op when ``token`` is not current."""
        ...

    def commit(
        self, run_id: str, token: int | None, writes: Sequence[Write], *, release: bool = False
    ) -> None:
        """Apply ``writes`` in order in ONE transaction, numbering journal items per run.
        With ``release`` (and a token), the lease is given up in that transaction too, as
        ``release_lease`` would after it (the end of a drive: one transaction, not two).

        With a token, the lease's current token must equal it (checked in the same
        transaction), else PLAIT-E021 and nothing is written; ``None`` is an unleased write
        (respond, cancel, send). A storage failure is PLAIT-E020 with nothing written.
        """
        ...

    def load_journal(self, run_id: str, after_seq: int = 0) -> Journal:
        """Every intent, result, record and checkpoint meta of the run (those after
        ``after_seq`` only, for a reader following a run as it grows); PLAIT-E017."""
        ...

    def journal_rows(self, run_id: str) -> JournalRows:
        """Every journal row of the run in seq order, read in one query, each parsed only
        when its reader asks for it (verify; ``JournalRows`` says how a corrupt row still
        raises what ``load_journal`` raises); PLAIT-E017 for an unknown run."""
        ...

    def settled(self, run_id: str, keys: Sequence[JournalKey]) -> set[JournalKey]:
        """Which of ``keys`` have a journaled result (an answered ask, a finished child):
        looked up by key, without reading the journal. An unknown run has none."""
        ...

    def records_after(self, run_id: str, after_seq: int, kinds: Sequence[str]) -> list[Record]:
        """Records of these kinds journaled after ``after_seq`` (a driver polls for cancels).

        ``kinds`` never holds ``feed``: a driver writes one every wave and never looks it
        up by kind, so a store need not index it (``load_journal`` has every record).
        The answer may be the journal as of this store's last commit to the run, when that
        commit came just before (PostgreSQL reads it in the commit's own round trip): a
        record another connection journals in between is found by the poll after the
        next commit.
        """
        ...

    def read_checkpoint(self, run_id: str, seq: int) -> bytes:
        """The exact canonical bytes of checkpoint ``seq``; PLAIT-E010 if they fail their hash."""
        ...

    def read_checkpoints(self, run_id: str, first: int, last: int) -> dict[int, bytes]:
        """The exact canonical bytes of every checkpoint with ``first <= seq <= last``, by
        seq, read together (``verify`` compares a whole run); PLAIT-E017, E010 as
        ``read_checkpoint``."""
        ...

    def latest_checkpoint(self, run_id: str) -> CheckpointMeta | None:
        """The last checkpoint written, or None; PLAIT-E017 for an unknown run."""
        ...

    def checkpoint_beside(self, run_id: str, seq: int, *, later: bool) -> CheckpointMeta | None:
        """The nearest checkpoint after journal ``seq`` (``later``) or before it, or None."""
        ...

    def stored_bytes(self, run_id: str | None = None) -> int:
        """Payload bytes held for one run (nodes it wrote first included), or for all runs."""
        ...

    def set_wake(self, run_id: str, wake_ms: int | None, *, replace: bool = False) -> None:
        """Record when the run wants driving again (a hint for ``claim_work``, no lease).

        By default the earlier of the stored time and ``wake_ms`` is kept (None keeps the
        stored one); ``replace`` stores ``wake_ms`` as given (None clears it). Where the
        back end has notifications, listening workers are told when ``wake_ms`` is set.
        """
        ...

    def wake_of(self, run_id: str) -> int | None:
        """The run's recorded wake time (None when nothing is due); PLAIT-E017."""
        ...

    def notify_runnable(self, run_id: str) -> None:
        """Tell listening workers (``WorkStore.listen``) that ``run_id`` may be claimable
        now; a no-op on a back end without notifications (its workers poll)."""
        ...

    def close(self) -> None:
        """Release the connection; the store is unusable afterwards."""
        ...


class Listener(Protocol):
    """A worker's wait for notifications (``WorkStore.listen``)."""

    def wait(self, timeout_s: float) -> bool:
        """Block until a notification arrives (True), ``timeout_s`` passes or ``interrupt``
        is called (False); PLAIT-E020 when the connection is lost."""
        ...

    def interrupt(self) -> None:
        """End the current (or next) ``wait`` at once; safe from any thread."""
        ...

    def close(self) -> None: ...


POLLED_KINDS = ("cancel", "inbox")
"""The record kinds a driver polls for between waves (``Store.records_after``): a store
may answer the first poll of a drive from the commit before it, as it does the later ones."""


def never_dead(owner: LeaseOwner) -> bool:
    """A claim that cannot tell whether a holder's process is gone takes only free,
    released or expired leases."""
    return True


@runtime_checkable
class WorkStore(Store, Protocol):
    """What workers (``plait worker``) and ``plait gc`` need beyond ``Store``."""

    def claim_work(
        self,
        owner: LeaseOwner,
        now_ms: int,
        ttl_ms: int,
        limit: int = 1,
        exclude: Sequence[str] = (),
        owner_alive: Callable[[LeaseOwner], bool] = never_dead,
    ) -> list[tuple[str, int]]:
        """Claim up to ``limit`` runs a worker should drive now: (run id, fencing token).

        A top-level run (children are driven by their parent's drive) whose lease is
        free, released or expired qualifies when it is ``queued``; ``running`` with a
        lease row (its driver died or gave up: a run being started has none yet); or
        ``parked``/``budget_exhausted`` with ``wake_ms <= now_ms`` (an answer, an expiry,
        a due timer, a cancel or a budget raise). So does a ``running`` one whose lease a
        process on the claimant's host holds that ``owner_alive`` finds gone. Oldest
        first; the leases are taken and the wake times cleared (queued, parked and
        budget-exhausted runs marked running) in the same transaction, and concurrent
        claimants never claim one run twice. ``exclude``: run ids not to claim.
        """
        ...

    def claimed_run(self, run_id: str) -> tuple[list[JSON], Journal]:
        """What a worker reads of a run it claimed before driving it: ``manifests`` and
        ``load_journal`` (PostgreSQL: in one statement)."""
        ...

    def open_connections(self, count: int) -> None:
        """Have ``count`` connections open now (at most the store's pool holds), so that a
        worker's first drives do not wait for them; nothing where none is ever opened."""
        ...

    def listen(self) -> Listener | None:
        """A connection of its own waiting for ``notify_runnable``/``set_wake`` (close it
        when done), or None when the back end has no notifications (workers poll)."""
        ...

    def gc(self, before_ms: int, now_ms: int) -> list[str]:
        """Delete finished runs last updated before ``before_ms``: their ids, sorted.

        A top-level run qualifies when it is finished (completed, failed, stalled,
        canceled, budget_exhausted), nothing wants it driven (a budget-exhausted run with
        a wake time may go on: its budget was raised; no other finished run is driven
        again) and no live lease is held on it; it goes with its child runs, and only when
        every one of them qualifies too (a raised budget-exhausted child keeps the tree:
        ``raise_budget`` gives a child its own wake time). Parked, queued and running
        runs are never touched. Its journal, manifests, lease, schedule slot and run row
        are deleted in one transaction; the content-addressed nodes stay (see
        ``plait.driver.worker.collect_garbage``).
        """
        ...


@dataclass(frozen=True)
class JournalMarks:
    """What ``RangeReads.journal_marks`` reads of a run's journal: the seqs of its
    checkpoints and of its feed records (each ascending), the kinds of its other records,
    and every feed's payload as stored, joined by commas (a name with no comma in it that
    is found in them is in one payload)."""

    checkpoints: list[int]
    feeds: list[int]
    kinds: frozenset[str]
    feed_texts: str


@runtime_checkable
class RangeReads(Protocol):
    """What lets verify on every core (``driver/verify_cores.py``) have each process read
    only its own rows, a forked child on a connection of its own. Optional: a store
    without it has the parent read the whole journal before it forks."""

    def reopens(self) -> bool:
        """Whether a forked process can open this store's database afresh (``reopen``):
        not an in-memory one."""
        ...

    def reopen(self) -> RangeReads:
        """A new read-only store on the same database, for a forked child: it uses no
        connection, cursor or lock of this one (SQLite forbids carrying a connection
        across a fork; opening one after it is fine)."""
        ...

    def journal_marks(self, run_id: str) -> JournalMarks:
        """The seqs of the run's checkpoints and feeds, the kinds of its other records, and
        its feeds' payloads as stored (what tells a plain run from its feeds' texts), and
        no other payload: what verify plans its segments by before it forks. An unknown
        run has none."""
        ...

    def journal_range(self, run_id: str, first_seq: int, last_seq: int | None) -> JournalRows:
        """``journal_rows`` of the rows with ``first_seq <= seq <= last_seq`` (None: to
        the end) only; PLAIT-E017 for an unknown run."""
        ...

    def read_checkpoint(self, run_id: str, seq: int) -> bytes:
        """As ``Store.read_checkpoint``."""
        ...

    def read_checkpoints(self, run_id: str, first: int, last: int) -> dict[int, bytes]:
        """As ``Store.read_checkpoints``."""
        ...


@runtime_checkable
class ScheduleStore(Protocol):
    """Schedules (``plait schedule``) and the slots workers fire (``store/schedules.py``)."""

    def put_schedule(self, row: ScheduleRow, *, replace: bool = False) -> bool:
        """Add a schedule (True), or with ``replace`` change an existing one's spec and
        next slot (False); PLAIT-E016 when the name is taken and ``replace`` is not set."""
        ...

    def get_schedule(self, name: str) -> ScheduleRow:
        """The schedule; PLAIT-E017 for an unknown name."""
        ...

    def list_schedules(self) -> list[ScheduleRow]:
        """Every schedule, by name."""
        ...

    def pause_schedule(self, name: str, paused: bool, next_ms: int | None, now_ms: int) -> None:
        """Pause it, or resume it from ``next_ms``; PLAIT-E017 for an unknown name."""
        ...

    def delete_schedule(self, name: str) -> None:
        """Delete it and its slot rows (its runs stay); PLAIT-E017 for an unknown name."""
        ...

    def due_schedules(self, now_ms: int) -> tuple[list[ScheduleRow], int | None]:
        """Schedules not paused whose next slot is at or before ``now_ms``, and the
        earliest next slot of the others (None when there is none)."""
        ...

    def advance_schedule(
        self, name: str, cursor_ms: int, next_ms: int, error: str | None, now_ms: int
    ) -> bool:
        """Move the schedule's next slot from ``cursor_ms`` to ``next_ms`` unless someone
        moved it meanwhile (False); ``error`` is kept as its last error."""
        ...

    def fire_slot(
        self,
        name: str,
        slot_ms: int,
        next_ms: int,
        *,
        overlap_skip: bool,
        info: RunInfo,
        manifest: JSON,
        now_ms: int,
    ) -> str:
        """In ONE transaction: unless the schedule's next slot is past ``slot_ms`` (or it
        is paused or gone: ``TAKEN``) or, with ``overlap_skip``, its last run is not
        finished (``OVERLAPPED``, the slot passed over), insert the slot row, the run
        ``info`` with its ``manifest``, and move the next slot to ``next_ms`` (``FIRED``).
        A run id that exists already is PLAIT-E016 with nothing written."""
        ...

    def schedule_slots(self, name: str | None = None) -> list[tuple[str, int, str]]:
        """Fired slots (schedule, slot_ms, run_id), of one schedule or all."""
        ...


@runtime_checkable
class TokenStore(Protocol):
    """API tokens (``plait token``): a principal's role and its token's digest
    (``store/tokens.py``); the token itself is never stored."""

    def put_token(self, row: TokenRow) -> bool:
        """Store a principal's token, replacing the one it had; True when it had none."""
        ...

    def token_by_digest(self, digest: str) -> TokenRow | None:
        """The token whose SHA-256 is ``digest``, or None."""
        ...

    def list_tokens(self) -> list[TokenRow]:
        """Every principal's token row, by principal."""
        ...

    def revoke_token(self, principal: str) -> bool:
        """Delete the principal's token (refused at once); whether it had one."""
        ...


def unknown_run(run_id: str) -> PlaitError:
    """PLAIT-E017, worded the same by every back end."""
    return PlaitError("E017", f"unknown run id '{run_id}'")


def corrupted_checkpoint(run_id: str, seq: int, what: str) -> PlaitError:
    """PLAIT-E010 for a checkpoint whose bytes no longer hash to what was recorded."""
    return PlaitError("E010", f"checkpoint {seq} of run {run_id} is corrupted: {what}")
