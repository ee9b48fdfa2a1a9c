"""The lease rule every store applies inside its transaction (docs/architecture.md §5.7).

One function decides whether a claimant may take a run's lease, so SQLite and PostgreSQL
cannot drift apart. It never touches a database or the clock: the caller reads the lease
row and the time, and supplies ``owner_alive`` (the only IO, done by the driver). One
case is also written as SQL: a worker's claim on PostgreSQL, where the claimant cannot
tell a holder is gone (``never_dead``), applies it in its one statement
(``claims.PG_CLAIM_AND_LEASE``: no row -> 1, released or expired -> the next token, else
kept); the conformance suite's claim tests hold both stores to the same answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from plait.core.errors import PlaitError
from plait.store.records import LeaseOwner


@dataclass(frozen=True)
class LeaseRow:
    """A run's lease as stored: ``holder`` is None once released; ``token`` never goes back."""

    holder: LeaseOwner | None
    token: int
    expires_ms: int


@dataclass(frozen=True)
class LeaseClaim:
    """A lease to take in the same transaction as another write (a new run's creation):
    what ``Store.acquire_lease`` is given, so the same rule decides it."""

    owner: LeaseOwner
    now_ms: int
    ttl_ms: int
    owner_alive: Callable[[LeaseOwner], bool]


def may_take_over(
    run_id: str,
    current: LeaseRow | None,
    claimant: LeaseOwner,
    now_ms: int,
    owner_alive: Callable[[LeaseOwner], bool],
) -> int:
    """The token the claimant gets, or PLAIT-E021 naming the live holder.

    Free, released or expired leases are taken; so is one held by a process on the
    claimant's own host that no longer exists (resume right after a crash). A live holder
    keeps its lease, even when it is the claimant itself: a second driver in the same
    process must not fence out the first.
    """
    if current is None:
        return 1
    holder = current.holder
    if holder is None or current.expires_ms <= now_ms:
        return current.token + 1
    if holder.host == claimant.host and not owner_alive(holder):
        return current.token + 1
    raise PlaitError(
        "E021",
        f"run '{run_id}' is leased by pid {holder.pid} on host '{holder.host}' "
        f"(started_ms {holder.started_ms}) until {current.expires_ms}",
    )


def stale_token(run_id: str, token: int, current: LeaseRow | None) -> PlaitError:
    """The error for a write or renewal whose token is no longer the run's current one."""
    if current is None or current.holder is None:
        now = "the lease is not held"
    else:
        now = (
            f"token {current.token} is held by pid {current.holder.pid} on '{current.holder.host}'"
        )
    return PlaitError("E021", f"lease lost on run '{run_id}': token {token} is not current ({now})")
