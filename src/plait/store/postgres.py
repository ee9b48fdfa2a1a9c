"""``PostgresStore``: the shared store for many processes and workers (ARCHITECTURE.md §11).

The same contract as ``SqliteStore`` over PostgreSQL (psycopg 3, through a small
connection pool of its own), storing exactly the same rows (``rows.py``), payload encoding
(``chunks.py``) and lease rule (``lease.py``).

Theory of operation:

- Every write is one transaction. ``commit`` is ONE statement (``_COMMIT``), sent in one
  round trip and run as an implicit transaction (autocommit): it locks the run row and,
  with a token, the lease row (``FOR UPDATE``), so the fencing token is checked in the
  same transaction as the writes; only when it is current does it reserve the seqs the
  batch takes (``UPDATE runs ... RETURNING``, which also applies the status write) and
  insert the journal rows, manifests and nodes numbered from them (nodes with
  ``ON CONFLICT DO NOTHING`` in hash order: two commits sharing nodes cannot deadlock).
  A stale token (PLAIT-E021, naming the holder) or an unknown run (PLAIT-E017) writes
  nothing; a key already journaled fails the statement, which writes nothing either.
- Locks are always taken in the order run row -> lease row (``renew``/``release`` take
  only the lease row), so no two plait transactions wait on each other in a cycle.
- ``claim_runnable`` picks runnable runs whose lease is free or expired with
  ``FOR UPDATE SKIP LOCKED`` and takes their leases in the same transaction: concurrent
  workers never claim a run twice and never wait on each other.
- ``synchronous_commit`` is forced ``on`` for every connection whatever the ``durability``:
  a journal must not lose a committed wave when the server crashes. ``durability`` only
  changes something on SQLite; it is accepted (and validated) here for symmetry.
- Node reads are batched: decoding fetches a missing node together with every node its
  bytes name, level by level (one round trip per tree level, not per node).

- Connections come from a small pool of its own (``_Pool``). A connection taken from it is
  checked without a round trip: one whose socket has something to read while idle was
  closed by the server (a restart, a terminated backend, a cut network path) and is
  replaced on the spot by a new one. A server that is down is therefore an error at once,
  with what connecting said ("connection refused"), not a wait for a pool to reconnect.
  A statement is never retried: after a lost connection nobody can tell whether a commit
  was applied, and the journal (read again by resume) is the one that knows.

Rules: parameterized SQL only; JSON only, never pickle; every ``psycopg`` error leaves this
module as PLAIT-E020 ``storage error on postgresql://<host>/<db>: <what it was doing>: ...``
(never the password) with its transaction rolled back; it never reads the clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from plait.core.canonical import JSON, dumpb, dumps, loads
from plait.core.canonical import digest as sha256_hex
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store.base import WorkStore, corrupted_checkpoint, never_dead, unknown_run
from plait.store.chunks import ChunkError, HashMemo, RowEncoder, collecting_encoder, decode
from plait.store.lease import LeaseRow, may_take_over, stale_token
from plait.store.pg_listen import NOTIFY_CHANNEL, PostgresListener
from plait.store.pg_pool import Connection, Pool, PoolError
from plait.store.postgres_schema import migrate
from plait.store.records import CheckpointMeta, Journal, LeaseOwner, Record, RunInfo, Write
from plait.store.rows import (
    JOURNAL_COLUMNS,
    RUN_COLUMNS,
    Row,
    add_row,
    key_text,
    run_from_row,
    run_row,
    write_row,
)

DURABILITIES = ("normal", "strict")
"""Accepted for symmetry with SQLite; PostgreSQL always commits with synchronous_commit on."""

CONNECT_TIMEOUT_S = 5
"""Seconds to wait for the server when the URL does not say (``connect_timeout``)."""

_WATCH_LIMIT = 256
"""Runs whose between-wave poll a store remembers (drivers polling right now)."""

_KNOWN_LIMIT = 1 << 21  # node hashes remembered as stored before the set is forgotten
_FETCH_BATCH = 5_000  # node hashes per ``= ANY(%s)`` query

_RUN_COLUMNS = ", ".join(RUN_COLUMNS)
_INSERT_RUN = (
    f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({', '.join('%s' for _ in RUN_COLUMNS)})"
    " ON CONFLICT (run_id) DO NOTHING RETURNING run_id"
)
_SELECT_ROWS = (
    f"SELECT seq, {', '.join(JOURNAL_COLUMNS)} FROM journal"
    " WHERE run_id = %s AND seq > %s ORDER BY seq"
)
_INSERT_NODES = (
    "INSERT INTO nodes (hash, data, run_id) VALUES (%s, %s, %s) ON CONFLICT (hash) DO NOTHING"
)
_INSERT_MANIFEST = "INSERT INTO manifests (run_id, seq, payload) VALUES (%s, %s, %s)"
_LEASE_COLUMNS = "host, pid, started_ms, token, expires_ms"

# Lock the run row, then its lease row (always in that order), without writing either.
# The run row is locked in a CTE of its own: in one join, the lease subquery's lock would
# come first.
_LOCK_LEASE = (
    "WITH r AS MATERIALIZED (SELECT run_id FROM runs WHERE run_id = %s FOR UPDATE)"
    f" SELECT r.run_id, {_LEASE_COLUMNS} FROM r LEFT JOIN LATERAL"
    f" (SELECT {_LEASE_COLUMNS} FROM leases WHERE leases.run_id = r.run_id FOR UPDATE) l"
    " ON true"
)
_INTEGER_COLUMNS = ("superstep", "clock_ms", "journal_bytes", "size")  # the rest are text
_JOURNAL_RECORD = ", ".join(  # a journal row as ``_commit_params`` sends it
    ["pos bigint"]
    + [f"{c} {'bigint' if c in _INTEGER_COLUMNS else 'text'}" for c in JOURNAL_COLUMNS]
)
_JOURNAL_KEYS = ("pos", *JOURNAL_COLUMNS)
# A whole commit in one statement, so one round trip and one implicit transaction
# (autocommit): lock the run row, then (with a token) its lease row; if the token is the
# lease's current one (or none was given), reserve the seqs the batch takes and apply the
# status write (one UPDATE of the run row: a statement may not update a row twice); then
# insert the journal rows, manifests and nodes (in hash order: two commits sharing nodes
# cannot deadlock) numbered from the reserved base; nothing is inserted when nothing was
# reserved. The answer says whether the run exists, the base (NULL: the token was not
# current) and the lease as it was found, for PLAIT-E017/E021 without another query.
# The rows travel as JSON (``_commit_params``) and the scalars as text, typed by the casts
# here, so the parameter types never depend on the write mix and the statement psycopg
# prepares serves every commit (one more with node bytes, a binary bytea[]).
_COMMIT = (
    "WITH run AS MATERIALIZED ("
    "  SELECT run_id FROM runs WHERE run_id = %(run_id)s FOR UPDATE),"
    " lease AS MATERIALIZED ("
    f"  SELECT {_LEASE_COLUMNS} FROM run CROSS JOIN LATERAL (SELECT {_LEASE_COLUMNS}"
    "   FROM leases WHERE leases.run_id = run.run_id AND %(token)s::bigint IS NOT NULL"
    "   FOR UPDATE) l),"
    " reserved AS ("
    "  UPDATE runs SET last_seq = last_seq + %(n)s::bigint,"
    "   status = COALESCE(%(status)s::text, status),"
    "   outcome = CASE WHEN %(status)s::text IS NULL THEN outcome ELSE %(outcome)s::text END,"
    "   updated_ms = COALESCE(%(updated_ms)s::bigint, updated_ms)"
    "  WHERE run_id = %(run_id)s AND (%(token)s::bigint IS NULL OR EXISTS (SELECT 1 FROM lease"
    "   WHERE lease.token = %(token)s::bigint AND lease.host IS NOT NULL))"
    "  RETURNING last_seq - %(n)s::bigint AS base),"
    " journal_rows AS ("
    f"  INSERT INTO journal (run_id, seq, {', '.join(JOURNAL_COLUMNS)})"
    f"  SELECT %(run_id)s, reserved.base + w.pos, {', '.join('w.' + c for c in JOURNAL_COLUMNS)}"
    f"  FROM reserved CROSS JOIN json_to_recordset(%(journal)s::json) AS w ({_JOURNAL_RECORD})),"
    " manifest_rows AS ("
    "  INSERT INTO manifests (run_id, seq, payload)"
    "  SELECT %(run_id)s, reserved.base + m.pos, m.payload FROM reserved"
    "  CROSS JOIN json_to_recordset(%(manifests)s::json) AS m (pos bigint, payload text)),"
    " node_rows AS ("
    "  INSERT INTO nodes (hash, data, run_id) SELECT n.hash, n.data, %(run_id)s FROM reserved"
    "  CROSS JOIN unnest(%(hash)s::text[], %(data)b::bytea[]) AS n (hash, data)"
    "  ORDER BY n.hash ON CONFLICT (hash) DO NOTHING)"
    " SELECT EXISTS (SELECT 1 FROM run), (SELECT base FROM reserved),"
    # The last record of the kinds a driver polls for between waves (records_after), as
    # of this statement: the poll after the commit needs no round trip of its own.
    "  (SELECT max(seq) FROM journal WHERE run_id = %(run_id)s AND item = 'record'"
    "   AND record_kind = ANY(%(watched)s::text[])),"
    f" {', '.join('l.' + c for c in _LEASE_COLUMNS.split(', '))}"
    " FROM (VALUES (1)) AS one (x) LEFT JOIN lease l ON true"
)
_UPSERT_LEASE = (
    "INSERT INTO leases (run_id, host, pid, started_ms, token, expires_ms)"
    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET"
    " host = excluded.host, pid = excluded.pid, started_ms = excluded.started_ms,"
    " token = excluded.token, expires_ms = excluded.expires_ms"
)
# Runnable runs whose lease is free or expired, oldest first; rows another transaction
# holds (a commit, another claimant) are skipped, not waited for.
_CLAIMABLE = (
    "SELECT r.run_id FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id"
    " WHERE r.status = ANY(%s) AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= %s)"
    " ORDER BY r.created_ms, r.row_order LIMIT %s FOR UPDATE OF r SKIP LOCKED"
)
FINISHED = ("completed", "failed", "stalled", "canceled", "budget_exhausted")
"""Statuses ``gc`` may delete (never queued, running or parked)."""

# What a worker should drive now (``claim_work``): top-level runs with a free, released or
# expired lease that are queued, running with a lease row (their driver is gone), or
# parked/budget-exhausted with a wake time that has come. The status list matches the
# ``runs_unfinished`` partial index.
_CLAIM_WORK = (
    "SELECT r.run_id FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id"
    " WHERE r.status IN ('queued', 'running', 'parked', 'budget_exhausted')"
    " AND r.parent_run_id IS NULL AND r.run_id <> ALL(%(exclude)s)"
    " AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= %(now)s)"
    " AND (r.status = 'queued' OR (r.status = 'running' AND l.run_id IS NOT NULL)"
    "      OR r.wake_ms <= %(now)s)"
    " ORDER BY r.created_ms, r.row_order LIMIT %(limit)s FOR UPDATE OF r SKIP LOCKED"
)
# Running top-level runs whose unexpired lease a process on the claimant's host holds: a
# claimant that can tell that process is gone (ARCHITECTURE.md §5.7) takes them at once,
# as ``plait resume`` does, instead of waiting for the lease to lapse.
# Read without a lock: most are live (this host's own drives), and locking them would make
# another claimant's SKIP LOCKED pass over them meanwhile (a `--once` worker would find
# nothing to do). Only those whose holder is gone are locked (_LOCK_ORPHANS) and taken.
_CLAIM_ORPHANS = (
    "SELECT r.run_id, l.host, l.pid, l.started_ms FROM runs r JOIN leases l"
    " ON l.run_id = r.run_id WHERE r.status = 'running' AND r.parent_run_id IS NULL"
    " AND r.run_id <> ALL(%(exclude)s) AND l.host = %(host)s AND l.expires_ms > %(now)s"
    " ORDER BY r.created_ms, r.row_order"
)
_LOCK_ORPHANS = (
    "SELECT run_id FROM runs WHERE run_id = ANY(%s) AND status = 'running'"
    " ORDER BY created_ms, row_order FOR UPDATE SKIP LOCKED"
)
# A claimed run's wake time is consumed; a queued, parked or budget-exhausted one is
# running from now on: a worker that dies, or whose drive is refused (PLAIT-E010, a run
# started from Python), before the drive settles what was due leaves a running run whose
# lease lapses or was given up, which the next claim takes over. Left budget-exhausted
# without its wake time, a raised run would be claimed by nobody and deleted by gc. A
# budget-exhausted run keeps its last update: a drive that finds nothing raised (a cancel
# or message woke it) gives it back its status as it was (``Runtime.resume``).
_CLAIMED = (
    "UPDATE runs SET wake_ms = NULL, status = CASE WHEN status IN"
    " ('queued', 'parked', 'budget_exhausted') THEN 'running' ELSE status END,"
    " updated_ms = CASE WHEN status IN ('queued', 'parked') THEN %s ELSE updated_ms END"
    " WHERE run_id = ANY(%s)"
)
# Finished top-level runs old enough for gc, with nothing due and no live lease. Of the
# finished statuses only budget_exhausted is ever driven again (once raised): a wake time
# on any other (a cancel, message or answer journaled as or after the run finished) wants
# nothing, and must not keep the run forever.
_GC_ROOTS = (
    "SELECT r.run_id FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id"
    " WHERE r.parent_run_id IS NULL AND r.status = ANY(%(finished)s)"
    " AND r.updated_ms < %(before)s AND (r.wake_ms IS NULL OR r.status <> 'budget_exhausted')"
    " AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= %(now)s)"
    " ORDER BY r.run_id FOR UPDATE OF r SKIP LOCKED"
)
# Every run of those trees (children name their parent), and whether gc may delete it.
_GC_TREE = (
    "WITH RECURSIVE tree (run_id, root) AS ("
    "  SELECT id, id FROM unnest(%(roots)s::text[]) AS roots (id)"
    "  UNION ALL SELECT c.run_id, t.root FROM runs c JOIN tree t ON c.parent_run_id = t.run_id)"
    " SELECT t.run_id, t.root, c.status IN ('completed', 'failed', 'stalled', 'canceled',"
    "  'budget_exhausted') AND (c.wake_ms IS NULL OR c.status <> 'budget_exhausted')"
    "  AND (l.run_id IS NULL OR l.host IS NULL OR l.expires_ms <= %(now)s)"
    " FROM tree t JOIN runs c ON c.run_id = t.run_id LEFT JOIN leases l ON l.run_id = t.run_id"
)
_STORED_BYTES = (
    "SELECT (SELECT COALESCE(SUM(octet_length(payload)), 0) FROM journal{w})"
    " + (SELECT COALESCE(SUM(octet_length(payload)), 0) FROM manifests{w})"
    " + (SELECT COALESCE(SUM(octet_length(data)), 0) FROM nodes{w})"
)
_STORED_BYTES_ALL = _STORED_BYTES.format(w="")
_STORED_BYTES_RUN = _STORED_BYTES.format(w=" WHERE run_id = %(run_id)s")

_COMMIT_UNKNOWN = (
    "the commit may or may not have been applied: resume the run once the server is back"
)

_NODE_NAME = re.compile(rb'"([0-9a-f]{64})"')  # how an encoded form names a node
_ROOT_NAME = re.compile(r'"([0-9a-f]{64})"')


class PostgresStore:
    """The ``Store`` protocol over a PostgreSQL database, through a connection pool."""

    def __init__(
        self,
        url: str,
        *,
        durability: str = "normal",
        pool_size: int = 4,
        timeout: float = 10.0,
    ) -> None:
        """Connect (PLAIT-E020 at once for a bad URL or an unreachable server) and migrate.

        ``pool_size`` bounds the connections held (threads beyond it wait up to
        ``timeout`` seconds for one to come back, then PLAIT-E020). A URL without
        ``connect_timeout`` waits CONNECT_TIMEOUT_S seconds for the server.
        """
        self.where, self._secret = _describe(url)
        if durability not in DURABILITIES:
            raise PlaitError(
                "E020", f"unknown durability {durability!r} (expected 'normal' or 'strict')"
            )
        if pool_size < 1:
            raise PlaitError("E020", f"pool_size must be at least 1, not {pool_size}")
        self.durability = durability
        self._known: set[str] = set()
        self._memo = HashMemo()
        # records_after between waves: the kinds each run's driver polls for, and what the
        # run's last commit found of them (kinds, last seq or None); see records_after.
        self._watched: dict[str, tuple[str, ...]] = {}
        self._seen_at_commit: dict[str, tuple[tuple[str, ...], int | None]] = {}
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise self._storage_error(exc, "invalid connection string") from exc
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
        if "application_name" not in params:
            kwargs["application_name"] = "plait"
        try:
            conn = psycopg.connect(url, **kwargs)
        except psycopg.Error as exc:
            raise self._storage_error(exc, "cannot connect") from exc
        try:
            migrate(conn, self.where)
            _configure(conn)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, psycopg.Error):
                raise self._storage_error(exc, "cannot migrate the schema") from exc
            raise
        self._url, self._kwargs = url, kwargs
        self._pool = Pool(self._connect, pool_size, timeout)
        self._pool.adopt(conn)  # the first connection serves on

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r}, durability={self.durability!r})"

    # --- runs and manifests ---

    def create_run(self, info: RunInfo, manifest: JSON) -> None:
        nodes: dict[str, bytes] = {}
        payload = self._encoder(nodes)(manifest)
        what = f"creating run '{info.run_id}'"
        with self._connection(what) as conn, conn.pipeline() as pipe, conn.transaction():
            if conn.execute(_INSERT_RUN, run_row(info)).fetchone() is None:
                raise PlaitError("E016", f"run id '{info.run_id}' already exists")
            conn.execute(_INSERT_MANIFEST, (info.run_id, 0, payload))
            self._insert_nodes(conn, info.run_id, nodes)
            pipe.sync()
        self._remember(nodes)

    def get_run(self, run_id: str) -> RunInfo:
        with self._connection(f"reading run '{run_id}'") as conn:
            row = conn.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = %s", (run_id,)
            ).fetchone()
        if row is None:
            raise unknown_run(run_id)
        return run_from_row(row)

    def list_runs(self, status: str | None = None) -> list[RunInfo]:
        order = " ORDER BY created_ms DESC, row_order DESC"
        with self._connection("listing runs") as conn:
            if status is None:
                rows = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs{order}").fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {_RUN_COLUMNS} FROM runs WHERE status = %s{order}", (status,)
                ).fetchall()
        return [run_from_row(row) for row in rows]

    def manifests(self, run_id: str) -> list[JSON]:
        with self._connection(f"reading the manifest of run '{run_id}'") as conn:
            rows = conn.execute(
                "SELECT payload FROM manifests WHERE run_id = %s ORDER BY seq", (run_id,)
            ).fetchall()
            if not rows:
                self._require_run(conn, run_id)
            payloads = [row[0] for row in rows]
            reader = _NodeReader(conn)
            reader.prefetch(payloads)
            try:
                return [reader.decode(payload) for payload in payloads]
            except ValueError as exc:  # ChunkError, CanonicalJSONError, a malformed key
                raise PlaitError("E010", f"manifest of run '{run_id}' is corrupted: {exc}") from exc

    # --- leases ---

    def acquire_lease(
        self,
        run_id: str,
        owner: LeaseOwner,
        now_ms: int,
        ttl_ms: int,
        owner_alive: Callable[[LeaseOwner], bool],
    ) -> int:
        what = f"taking the lease of run '{run_id}'"
        with self._connection(what) as conn, conn.transaction():
            row = conn.execute(_LOCK_LEASE, (run_id,)).fetchone()
            if row is None:
                raise unknown_run(run_id)
            token = may_take_over(run_id, _lease_row(row[1:]), owner, now_ms, owner_alive)
            conn.execute(
                _UPSERT_LEASE,
                (run_id, owner.host, owner.pid, owner.started_ms, token, now_ms + ttl_ms),
            )
            return token

    def renew_lease(self, run_id: str, token: int, now_ms: int, ttl_ms: int) -> None:
        with self._connection(f"renewing the lease of run '{run_id}'") as conn:
            renewed = conn.execute(
                "UPDATE leases SET expires_ms = %s"
                " WHERE run_id = %s AND token = %s AND host IS NOT NULL RETURNING token",
                (now_ms + ttl_ms, run_id, token),
            ).fetchone()
            if renewed is None:
                row = conn.execute(
                    f"SELECT {_LEASE_COLUMNS} FROM leases WHERE run_id = %s", (run_id,)
                ).fetchone()
                raise stale_token(run_id, token, None if row is None else _lease_row(row))

    def release_lease(self, run_id: str, token: int) -> None:
        with self._connection(f"releasing the lease of run '{run_id}'") as conn:
            conn.execute(
                "UPDATE leases SET host = NULL, pid = NULL, started_ms = NULL, expires_ms = 0"
                " WHERE run_id = %s AND token = %s AND host IS NOT NULL",
                (run_id, token),
            )

    def claim_runnable(
        self,
        owner: LeaseOwner,
        now_ms: int,
        ttl_ms: int,
        statuses: Sequence[str] = ("queued",),
        limit: int = 1,
    ) -> list[str]:
        """Claim up to ``limit`` runs for ``owner``: their ids, oldest first.

        A run qualifies when its status is in ``statuses`` and its lease is free, released
        or expired (``expires_ms <= now_ms``); a live lease is never taken, whatever host
        holds it. The leases are taken in the same transaction as the choice, skipping
        (not waiting for) runs another transaction has locked, so concurrent workers never
        claim one run twice. ``claim_leases`` also returns the fencing tokens.
        """
        return [run_id for run_id, _ in self.claim_leases(owner, now_ms, ttl_ms, statuses, limit)]

    def claim_leases(
        self,
        owner: LeaseOwner,
        now_ms: int,
        ttl_ms: int,
        statuses: Sequence[str] = ("queued",),
        limit: int = 1,
    ) -> list[tuple[str, int]]:
        """``claim_runnable`` with the fencing token of each lease taken: (run id, token)."""
        if limit < 1:
            return []
        claimed: list[tuple[str, int]] = []
        with self._connection("claiming runs") as conn, conn.transaction():
            run_ids = [
                row[0]
                for row in conn.execute(_CLAIMABLE, (list(statuses), now_ms, limit)).fetchall()
            ]
            for run_id in run_ids:
                token = _take_lease(conn, run_id, owner, now_ms, ttl_ms, never_dead)
                if token is not None:
                    claimed.append((run_id, token))
        return claimed

    # --- workers: claiming, waking, notifications, retention (ARCHITECTURE.md §11) ---

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
        first, skipping rows another transaction holds (``FOR UPDATE SKIP LOCKED``); the
        leases are taken and the wake times cleared (queued and parked runs marked
        running) in the same transaction. ``exclude``: run ids not to claim.
        """
        if limit < 1:
            return []
        claimed: list[tuple[str, int]] = []
        with self._connection("claiming runs") as conn, conn.transaction():
            for orphans in (False, True) if owner_alive is not never_dead else (False,):
                if len(claimed) == limit:
                    break
                params = {
                    "now": now_ms,
                    "limit": limit - len(claimed),
                    "exclude": [*exclude, *(run_id for run_id, _ in claimed)],
                    "host": owner.host,
                }
                if orphans:
                    rows = conn.execute(_CLAIM_ORPHANS, params).fetchall()
                    gone = [r[0] for r in rows if not owner_alive(LeaseOwner(r[1], r[2], r[3]))]
                    run_ids = (
                        [row[0] for row in conn.execute(_LOCK_ORPHANS, (gone,))] if gone else []
                    )
                else:
                    run_ids = [row[0] for row in conn.execute(_CLAIM_WORK, params).fetchall()]
                alive = owner_alive if orphans else never_dead
                for run_id in run_ids:
                    if len(claimed) == limit:
                        break
                    token = _take_lease(conn, run_id, owner, now_ms, ttl_ms, alive)
                    if token is not None:
                        claimed.append((run_id, token))
            if claimed:
                conn.execute(_CLAIMED, (now_ms, [run_id for run_id, _ in claimed]))
        return claimed

    def set_wake(self, run_id: str, wake_ms: int | None, *, replace: bool = False) -> None:
        """Record when the run wants driving again; workers are notified.

        By default the earlier of the stored time and ``wake_ms`` is kept (None keeps the
        stored one); ``replace`` stores ``wake_ms`` as given (None clears it). A wake time
        is a hint for ``claim_work``, never a journal write: it takes no lease.
        """
        with self._connection(f"waking run '{run_id}'") as conn, conn.transaction():
            if replace:
                conn.execute("UPDATE runs SET wake_ms = %s WHERE run_id = %s", (wake_ms, run_id))
            elif wake_ms is not None:
                conn.execute(
                    "UPDATE runs SET wake_ms = %s WHERE run_id = %s"
                    " AND (wake_ms IS NULL OR wake_ms > %s)",
                    (wake_ms, run_id, wake_ms),
                )
            if wake_ms is not None:  # delivered when the transaction commits
                conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, run_id))

    def wake_of(self, run_id: str) -> int | None:
        """The run's recorded wake time (None when nothing is due); PLAIT-E017."""
        with self._connection(f"reading the wake time of run '{run_id}'") as conn:
            row = conn.execute("SELECT wake_ms FROM runs WHERE run_id = %s", (run_id,)).fetchone()
        if row is None:
            raise unknown_run(run_id)
        return None if row[0] is None else int(row[0])

    def notify_runnable(self, run_id: str) -> None:
        """Tell listening workers (``listen``) that ``run_id`` may be claimable now."""
        with self._connection(f"notifying workers of run '{run_id}'") as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, run_id))

    def listen(self) -> PostgresListener:
        """A connection of its own listening on NOTIFY_CHANNEL (close it when done)."""
        try:
            conn = psycopg.connect(self._url, **self._kwargs)
        except psycopg.Error as exc:
            raise self._storage_error(exc, "cannot listen") from exc
        return PostgresListener(conn, self._storage_error)

    def gc(self, before_ms: int, now_ms: int) -> list[str]:
        """Delete finished runs last updated before ``before_ms``: their ids, sorted.

        A top-level run qualifies when it is finished (completed, failed, stalled,
        canceled, budget_exhausted), nothing wants it driven (a budget-exhausted run with
        a wake time may go on: its budget was raised; no other finished run is driven
        again) and no live lease is held on it; it goes with its child runs, and only when
        every one of them qualifies too (a raised budget-exhausted child keeps the tree:
        ``raise_budget`` gives a child its own wake time). Parked, queued and running
        runs are never touched. Its
        journal, manifests, lease and run row are deleted in one transaction; the
        content-addressed nodes stay (see ``plait.driver.worker.collect_garbage``).
        """
        with self._connection("collecting garbage") as conn, conn.transaction():
            roots = [
                row[0]
                for row in conn.execute(
                    _GC_ROOTS, {"finished": list(FINISHED), "before": before_ms, "now": now_ms}
                ).fetchall()
            ]
            if not roots:
                return []
            tree = conn.execute(_GC_TREE, {"roots": roots, "now": now_ms}).fetchall()
            doomed = _gc_selection(roots, tree)
            if doomed:
                for table in ("journal", "manifests", "leases", "runs"):
                    conn.execute(f"DELETE FROM {table} WHERE run_id = ANY(%s)", (doomed,))
        return doomed

    # --- the journal ---

    def commit(self, run_id: str, token: int | None, writes: Sequence[Write]) -> None:
        """The batch in one statement (``_COMMIT``): one round trip, one transaction."""
        nodes: dict[str, bytes] = {}
        encode = self._encoder(nodes)
        ops = [write_row(write, encode) for write in writes]  # cut before any transaction
        watched = self._watched.get(run_id, ())
        params = _commit_params(run_id, token, ops, nodes)
        params["watched"] = list(watched)
        what = f"committing to the journal of run '{run_id}'"
        self._seen_at_commit.pop(run_id, None)
        try:
            with self._connection(what, if_lost=_COMMIT_UNKNOWN) as conn:
                row = conn.execute(_COMMIT, params).fetchone()
        except PlaitError as exc:
            cause = exc.__cause__
            if isinstance(cause, pg_errors.UniqueViolation) and cause.diag.constraint_name in (
                "journal_intent_keys",
                "journal_result_keys",
            ):
                raise self._duplicate(run_id, ops, exc) from cause
            raise
        if row is None or not row[0]:
            raise unknown_run(run_id)
        if row[1] is None:  # the token was not current: nothing was written
            assert token is not None
            raise stale_token(run_id, token, _lease_row(row[3:]))
        self._remember(nodes)
        # The statement does not see its own rows: a batch holding a watched record
        # leaves the next poll to read the journal.
        if watched and not any(op[0] == "record" and op[3] in watched for op in ops):
            self._seen_at_commit[run_id] = (watched, row[2])

    def load_journal(self, run_id: str, after_seq: int = 0) -> Journal:
        with self._connection(f"reading the journal of run '{run_id}'") as conn:
            rows = conn.execute(_SELECT_ROWS, (run_id, after_seq)).fetchall()
            if not rows:
                self._require_run(conn, run_id)
            journal = Journal(run_id)
            reader = _NodeReader(conn)
            reader.prefetch(row[-1] for row in rows if row[1] != "checkpoint")
            try:
                for row in rows:
                    add_row(journal, row[0], row[1:], reader.decode)
            except ValueError as exc:  # ChunkError, CanonicalJSONError, a malformed key
                raise PlaitError("E010", f"journal of run '{run_id}' is corrupted: {exc}") from exc
        return journal

    def settled(self, run_id: str, keys: Sequence[JournalKey]) -> set[JournalKey]:
        by_text = {key_text(key): key for key in keys}
        if not by_text:
            return set()
        with self._connection(f"reading the results of run '{run_id}'") as conn:
            rows = conn.execute(
                "SELECT journal_key FROM journal WHERE run_id = %s AND item = 'result'"
                " AND journal_key IS NOT NULL AND journal_key = ANY(%s)",
                (run_id, sorted(by_text)),
            ).fetchall()
        return {by_text[row[0]] for row in rows}

    def records_after(self, run_id: str, after_seq: int, kinds: Sequence[str]) -> list[Record]:
        """The records of ``kinds`` after ``after_seq``; a driver asks this between waves.

        The run's last commit through this store read the last seq of these kinds in the
        same statement: when that is at most ``after_seq``, the answer is known without a
        round trip. It is the journal as of that commit, a moment before this call; a
        record committed in between is found by the next poll, after the next commit.
        """
        watch = tuple(kinds)
        seen = self._seen_at_commit.pop(run_id, None)
        if self._watched.get(run_id) != watch:
            if len(self._watched) >= _WATCH_LIMIT:
                self._watched.clear()  # runs no longer driven here: nothing is held per run
                self._seen_at_commit.clear()
            self._watched[run_id] = watch
        if seen is not None and seen[0] == watch and (seen[1] is None or seen[1] <= after_seq):
            return []
        with self._connection(f"reading the records of run '{run_id}'") as conn:
            rows = conn.execute(
                "SELECT seq, record_kind, payload FROM journal WHERE run_id = %s AND seq > %s"
                " AND item = 'record' AND record_kind = ANY(%s) ORDER BY seq",
                (run_id, after_seq, list(kinds)),
            ).fetchall()
            reader = _NodeReader(conn)
            return [Record(seq, kind, reader.decode(payload)) for seq, kind, payload in rows]

    def read_checkpoint(self, run_id: str, seq: int) -> bytes:
        with self._connection(f"reading a checkpoint of run '{run_id}'") as conn:
            row = conn.execute(
                "SELECT sha256, size, payload FROM journal"
                " WHERE run_id = %s AND seq = %s AND item = 'checkpoint'",
                (run_id, seq),
            ).fetchone()
            if row is None:
                self._require_run(conn, run_id)
                raise PlaitError("E010", f"run '{run_id}' has no checkpoint at seq {seq}")
            sha, size, payload = row
            reader = _NodeReader(conn)
            try:
                reader.prefetch([payload])
                data = dumpb(reader.decode(payload))
            except ValueError as exc:  # ChunkError, CanonicalJSONError, a malformed key
                raise corrupted_checkpoint(run_id, seq, str(exc)) from exc
        if len(data) != size or sha256_hex(data) != sha:
            raise corrupted_checkpoint(run_id, seq, "sha256 mismatch")
        return data

    def latest_checkpoint(self, run_id: str) -> CheckpointMeta | None:
        with self._connection(f"reading a checkpoint of run '{run_id}'") as conn:
            row = conn.execute(
                "SELECT seq, superstep, sha256, size FROM journal"
                " WHERE run_id = %s AND item = 'checkpoint' ORDER BY seq DESC LIMIT 1",
                (run_id,),
            ).fetchone()
            if row is None:
                self._require_run(conn, run_id)
        return None if row is None else CheckpointMeta(*row)

    def stored_bytes(self, run_id: str | None = None) -> int:
        with self._connection("measuring stored bytes") as conn:
            if run_id is None:
                row = conn.execute(_STORED_BYTES_ALL).fetchone()
            else:
                row = conn.execute(_STORED_BYTES_RUN, {"run_id": run_id}).fetchone()
        return 0 if row is None else int(row[0])

    def close(self) -> None:
        self._pool.close()

    # --- internals ---

    def _encoder(self, nodes: dict[str, bytes]) -> RowEncoder:
        """value -> payload text; the nodes it needs (and the store lacks) go into ``nodes``."""
        return collecting_encoder(nodes, self._known, self._memo)

    def _insert_nodes(self, conn: Connection, run_id: str, nodes: dict[str, bytes]) -> None:
        if nodes:  # in hash order: two transactions storing the same nodes never deadlock
            conn.cursor().executemany(
                _INSERT_NODES, [(digest, nodes[digest], run_id) for digest in sorted(nodes)]
            )

    def _remember(self, nodes: dict[str, bytes]) -> None:
        """Only after a commit succeeded: these nodes are stored, never cut again."""
        if len(self._known) + len(nodes) > _KNOWN_LIMIT:
            self._known.clear()
        self._known.update(nodes)

    def _require_run(self, conn: Connection, run_id: str) -> None:
        if conn.execute("SELECT 1 FROM runs WHERE run_id = %s", (run_id,)).fetchone() is None:
            raise unknown_run(run_id)

    def _duplicate(self, run_id: str, ops: list[Row], exc: PlaitError) -> PlaitError:
        """The E020 naming the first intent or result of ``ops`` whose key is taken."""
        keyed = [(op[0], op[1]) for op in ops if op[0] in ("intent", "result")]
        with self._connection(f"committing to the journal of run '{run_id}'") as conn:
            stored = conn.execute(
                "SELECT item, journal_key FROM journal WHERE run_id = %s"
                " AND item IN ('intent', 'result') AND journal_key = ANY(%s)",
                (run_id, [key for _, key in keyed]),
            ).fetchall()
        seen = {(item, key) for item, key in stored}
        for item, key in keyed:
            if (item, key) in seen:
                article = "an" if item == "intent" else "a"
                return PlaitError(
                    "E020",
                    f"storage error on {self.where}: run '{run_id}' already has {article}"
                    f" {item} for journal key {key}",
                )
            seen.add((item, key))
        return exc

    def _storage_error(
        self,
        exc: psycopg.Error,
        context: str = "",
        conn: Connection | None = None,
        if_lost: str = "",
    ) -> PlaitError:
        """PLAIT-E020 naming the server, what was being done and what went wrong."""
        what = " ".join(str(exc).split()) or type(exc).__name__
        if self._secret and len(self._secret) >= 3:
            what = what.replace(self._secret, "***")
        if conn is not None and conn.broken:
            # The server went away mid-statement (or the network path to it did).
            what = f"connection lost{' (' + if_lost + ')' if if_lost else ''}: {what}"
        prefix = f"{context}: " if context else ""
        return PlaitError("E020", f"storage error on {self.where}: {prefix}{what}")

    def _connect(self) -> Connection:
        """A new connection, configured (the pool calls this)."""
        conn = psycopg.connect(self._url, **self._kwargs)
        try:
            _configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _connection(self, what: str = "", *, if_lost: str = "") -> Iterator[Connection]:
        """A pooled connection (autocommit); any psycopg error becomes PLAIT-E020.

        ``what`` names the operation for the message ("reading run 'r1'"); ``if_lost``
        is added when the connection broke under it. A pooled connection the server
        closed meanwhile is replaced before use; the server being down is "cannot
        connect" with libpq's reason, at once.
        """
        try:
            conn = self._pool.get()
        except psycopg.Error as exc:
            reason = "" if isinstance(exc, PoolError) else "cannot connect"
            context = ": ".join(part for part in (what, reason) if part)
            raise self._storage_error(exc, context) from exc
        try:
            yield conn
        except psycopg.Error as exc:
            raise self._storage_error(exc, what, conn, if_lost) from exc
        finally:
            self._pool.put(conn)


class _NodeReader:
    """Node bytes for ``decode``, fetched in batches: one round trip per tree level.

    Nodes name their children by hash, so fetching one node also fetches every node its
    bytes name, level after level. A 64-hex string in user data that happens to name a
    node costs a read, never a wrong value: ``decode`` interprets, this only prefetches,
    and every node's bytes are checked against their hash when ``decode`` asks for them.
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._bytes: dict[str, bytes] = {}
        self._absent: set[str] = set()
        self._parsed: dict[str, JSON] = {}

    def prefetch(self, payloads: Iterable[str]) -> None:
        """Fetch every node the encoded payloads need, and the nodes those need."""
        self._fetch({name for text in payloads for name in _ROOT_NAME.findall(text)})

    def decode(self, payload: str) -> JSON:
        return decode(loads(payload), self._node, cache=self._parsed)

    def _node(self, digest: str) -> bytes:
        data = self._bytes.get(digest)
        if data is None and digest not in self._absent:
            self._fetch({digest})
            data = self._bytes.get(digest)
        if data is None:
            raise ChunkError(f"node {digest} is missing")
        if sha256_hex(data) != digest:
            raise ChunkError(f"sha256 mismatch in node {digest}")
        return data

    def _fetch(self, wanted: set[str]) -> None:
        wanted -= self._bytes.keys() | self._absent
        while wanted:
            batch = sorted(wanted)
            found: dict[str, bytes] = {}
            for start in range(0, len(batch), _FETCH_BATCH):
                rows = self._conn.execute(
                    "SELECT hash, data FROM nodes WHERE hash = ANY(%s)",
                    (batch[start : start + _FETCH_BATCH],),
                ).fetchall()
                found.update((name, bytes(data)) for name, data in rows)
            self._bytes.update(found)
            self._absent |= wanted - found.keys()
            wanted = {
                name.decode("ascii") for data in found.values() for name in _NODE_NAME.findall(data)
            }
            wanted -= self._bytes.keys() | self._absent


def _commit_params(
    run_id: str, token: int | None, ops: Sequence[Row], nodes: dict[str, bytes]
) -> dict[str, Any]:
    """The parameters of ``_COMMIT`` for the rows ``write_row`` made, in write order.

    Journal rows and manifest supersessions take the batch's seqs in turn (``pos``
    1, 2, ... added to the reserved base); status writes take none, and the last one is
    the one that counts (each sets the whole status, outcome and update time). Journal
    rows and manifests go as one JSON array each (``json_to_recordset``), integers as
    text and node bytes as a binary array, so the parameters' types do not depend on
    the write mix and one prepared statement serves every commit.
    """
    journal: list[dict[str, Any]] = []
    manifests: list[dict[str, Any]] = []
    status: Row = (None, None, None)
    taken = 0
    for op in ops:
        if op[0] == "status":
            status = op[1:]
            continue
        taken += 1
        if op[0] == "manifest":
            manifests.append({"pos": taken, "payload": op[1]})
        else:
            journal.append(dict(zip(_JOURNAL_KEYS, (taken, *op), strict=True)))
    hashes = sorted(nodes)
    return {
        "run_id": run_id,
        "token": None if token is None else str(token),
        "n": str(taken),
        "status": status[0],
        "outcome": status[1],
        "updated_ms": None if status[2] is None else str(status[2]),
        "journal": dumps(journal),
        "manifests": dumps(manifests),
        "hash": hashes,
        "data": [nodes[digest] for digest in hashes],
    }


def _gc_selection(roots: Sequence[str], tree: Sequence[Sequence[Any]]) -> list[str]:
    """The runs of ``tree`` (run_id, root, deletable) whose whole tree is deletable."""
    blocked = {root for _, root, deletable in tree if not deletable}
    return sorted({run_id for run_id, root, _ in tree if root not in blocked})


def _configure(conn: Connection) -> None:
    """Every connection commits durably, whatever the server's or role's default."""
    conn.execute("SET synchronous_commit = on")


def _take_lease(
    conn: Connection,
    run_id: str,
    owner: LeaseOwner,
    now_ms: int,
    ttl_ms: int,
    owner_alive: Callable[[LeaseOwner], bool],
) -> int | None:
    """Take the run's lease for a claim: its new token, or None when the run is gone or a
    live holder keeps it (re-read under a row lock: it may have been taken meanwhile)."""
    row = conn.execute(_LOCK_LEASE, (run_id,)).fetchone()
    if row is None:
        return None
    try:
        token = may_take_over(run_id, _lease_row(row[1:]), owner, now_ms, owner_alive)
    except PlaitError:
        return None
    conn.execute(
        _UPSERT_LEASE, (run_id, owner.host, owner.pid, owner.started_ms, token, now_ms + ttl_ms)
    )
    return token


def _lease_row(values: Sequence[Any]) -> LeaseRow | None:
    """(host, pid, started_ms, token, expires_ms) -> LeaseRow; None when no lease row."""
    host, pid, started_ms, token, expires_ms = values
    if token is None:
        return None
    holder = None if host is None else LeaseOwner(host, pid, started_ms)
    return LeaseRow(holder, token, expires_ms)


def _describe(url: str) -> tuple[str, str]:
    """``postgresql://host[:port]/db`` for messages (never user or password), and the password.

    Falls back to a plain URL split when libpq cannot parse ``url``, so even a bad
    connection string gets a readable, password-free name.
    """
    try:
        params = conninfo_to_dict(url)
        host, port, db = (str(params.get(k) or "") for k in ("host", "port", "dbname"))
        secret = str(params.get("password") or "")
    except psycopg.Error:
        try:
            parts = urlsplit(url)
            host, db, secret = parts.hostname or "", parts.path.lstrip("/"), parts.password or ""
        except ValueError:
            return "postgresql://(unparsable URL)", ""
        try:
            port = str(parts.port or "")
        except ValueError:
            port = ""
    return f"postgresql://{host}{':' + port if port else ''}/{db}", secret


_CONFORMS: type[WorkStore] = PostgresStore  # mypy checks the whole contract here
