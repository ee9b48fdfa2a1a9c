"""The ``Store`` protocol: the one interface the driver persists through (ARCHITECTURE.md §11).

SQLite (``sqlite.py``) implements it now and PostgreSQL will later; both must pass the
same conformance suite (``tests/store``). The protocol speaks only the values of
``records.py`` and canonical JSON; no SQL, row or connection ever leaves a store. Every
failure a user can meet is a ``PlaitError`` with its code: E016 duplicate run id, E017
unknown run id, E010 corrupted checkpoint, E020 storage error, E021 lease lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from plait.core.canonical import JSON
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store.records import CheckpointMeta, Journal, LeaseOwner, Record, RunInfo, Write


@runtime_checkable
class Store(Protocol):
    """Runs, their manifests, their journal and their leases; every write is one transaction."""

    def create_run(self, info: RunInfo, manifest: JSON) -> None:
        """Add a run with its original manifest; PLAIT-E016 if the run id exists."""
        ...

    def get_run(self, run_id: str) -> RunInfo:
        """The run's row; PLAIT-E017 for an unknown run id."""
        ...

    def list_runs(self, status: str | None = None) -> list[RunInfo]:
        """Runs newest first, optionally only those with ``status``."""
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

    def commit(self, run_id: str, token: int | None, writes: Sequence[Write]) -> None:
        """Apply ``writes`` in order in ONE transaction, numbering journal items per run.

        With a token, the lease's current token must equal it (checked in the same
        transaction), else PLAIT-E021 and nothing is written; ``None`` is an unleased write
        (respond, cancel, send). A storage failure is PLAIT-E020 with nothing written.
        """
        ...

    def load_journal(self, run_id: str, after_seq: int = 0) -> Journal:
        """Every intent, result, record and checkpoint meta of the run (those after
        ``after_seq`` only, for a reader following a run as it grows); PLAIT-E017."""
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

    def latest_checkpoint(self, run_id: str) -> CheckpointMeta | None:
        """The last checkpoint written, or None; PLAIT-E017 for an unknown run."""
        ...

    def stored_bytes(self, run_id: str | None = None) -> int:
        """Payload bytes held for one run (nodes it wrote first included), or for all runs."""
        ...

    def close(self) -> None:
        """Release the connection; the store is unusable afterwards."""
        ...


def unknown_run(run_id: str) -> PlaitError:
    """PLAIT-E017, worded the same by every back end."""
    return PlaitError("E017", f"unknown run id '{run_id}'")


def corrupted_checkpoint(run_id: str, seq: int, what: str) -> PlaitError:
    """PLAIT-E010 for a checkpoint whose bytes no longer hash to what was recorded."""
    return PlaitError("E010", f"checkpoint {seq} of run {run_id} is corrupted: {what}")
