"""``PostgresStore``: the shared store for many processes and workers (docs/architecture.md §11).

The same contract as ``SqliteStore`` over PostgreSQL (psycopg 3, through a small
connection pool of its own), storing exactly the same rows (``rows.py``), payload encoding
(``chunks.py``) and lease rule (``lease.py``).

Theory of operation:

- Every write is one transaction. ``commit`` is ONE statement (``pg_commit.py``), sent
  in one round trip: the fencing token is checked in the same transaction as the writes,
  on the run row (``runs.lease_token``, a copy of the held lease's token that every lease
  write below keeps in its own transaction), and a stale token (PLAIT-E021, naming the
  holder) or an unknown run (PLAIT-E017) writes nothing; neither does a key already
  journaled.
- Locks are always taken in the order run row -> lease row (``renew`` takes only the
  lease row, and changes neither its token nor its holder), so no two plait transactions
  wait on each other in a cycle, and every change of a lease's token or holder holds the
  run row's lock: a commit checking the token waits for it, then checks the row as it
  was left.
- ``claim_work`` picks runnable runs whose lease is free or expired with
  ``FOR UPDATE SKIP LOCKED`` and takes their leases in the same transaction: concurrent
  workers never claim a run twice and never wait on each other.
- ``synchronous_commit`` is forced ``on`` for every connection whatever the ``durability``:
  a journal must not lose a committed wave when the server crashes. ``durability`` only
  changes something on SQLite; it is accepted (and validated) here for symmetry.
- Node reads are batched (``node_reads.NodeBatcher``): one round trip per tree level.
- Connections come from a small pool of its own (``pg_pool.py``); a server that is down
  is an error at once, and a statement is never retried: after a lost connection nobody
  can tell whether a commit was applied, and the journal (read again by resume) knows.

Rules: parameterized SQL only; JSON only, never pickle; every ``psycopg`` error leaves this
module as PLAIT-E020 ``storage error on postgresql://<host>/<db>: <what it was doing>: ...``
(never the password) with its transaction rolled back; it never reads the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from plait.core.canonical import JSON
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import claims, run_pages, schedules, sql, tokens
from plait.store.base import (
    POLLED_KINDS,
    ScheduleStore,
    TokenStore,
    WorkStore,
    never_dead,
    unknown_run,
)
from plait.store.lease import LeaseClaim, may_take_over, stale_token
from plait.store.node_reads import NodeBatcher, NodeCache
from plait.store.pg_commit import commit_query
from plait.store.pg_listen import NOTIFY_CHANNEL, PostgresListener
from plait.store.pg_pool import Connection, Pool, PoolError
from plait.store.pg_prepared import PreparedStatements
from plait.store.postgres_schema import migrate
from plait.store.records import (
    FIRED,
    OVERLAPPED,
    TAKEN,
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
from plait.store.rows import (
    JOURNAL_COLUMNS,
    RUN_COLUMNS,
    JournalRows,
    Row,
    key_text,
    run_row,
    write_row,
)
from plait.store.run_pages import RunPage, RunQuery
from plait.store.sql import POSTGRES

DURABILITIES = ("normal", "strict")
"""Accepted for symmetry with SQLite; PostgreSQL always commits with synchronous_commit on."""

CONNECT_TIMEOUT_S = 5
"""Seconds to wait for the server when the URL does not say (``connect_timeout``)."""


_INSERT_RUN = (
    f"INSERT INTO runs ({sql.RUN_LIST}) VALUES ({', '.join('%s' for _ in RUN_COLUMNS)})"
    " ON CONFLICT (run_id) DO NOTHING RETURNING run_id"
)
# A new run outside a conversation in one statement (``create_run``): its row (nothing
# when the id is taken: the other inserts select from it), its manifest, the manifest's
# nodes (in hash order, as ``pg_commit.COMMITS`` insert them) and, asked for, its lease
# with token 1. A lease row already there fails the statement (``leases_pkey``).
_CREATE_RUN = (
    "WITH new_run AS ("
    f" INSERT INTO runs ({sql.RUN_LIST}, lease_token)"
    f" VALUES ({', '.join(f'%({c})s' for c in RUN_COLUMNS)},"
    "  CASE WHEN %(leased)s::boolean THEN 1 END)"
    "  ON CONFLICT (run_id) DO NOTHING RETURNING run_id),"
    " manifest_row AS (INSERT INTO manifests (run_id, seq, payload)"
    "  SELECT run_id, 0, %(payload)s FROM new_run),"
    " node_rows AS (INSERT INTO nodes (hash, data, run_id)"
    "  SELECT n.hash, n.data, new_run.run_id FROM new_run"
    "  CROSS JOIN unnest(%(hash)s::text[], %(data)b::bytea[]) AS n (hash, data)"
    "  ORDER BY n.hash ON CONFLICT (hash) DO NOTHING),"
    " lease_row AS (INSERT INTO leases (run_id, host, pid, started_ms, token, expires_ms)"
    "  SELECT run_id, %(host)s::text, %(pid)s::bigint, %(started_ms)s::bigint, 1,"
    "  %(expires_ms)s::bigint FROM new_run WHERE %(leased)s::boolean)"
    " SELECT run_id FROM new_run"
)
_LEASE_ROW_LEFT = -1
"""``_create_at_once`` wrote nothing: a lease row names the new run's id already."""
_INSERT_NODES = (
    "INSERT INTO nodes (hash, data, run_id) VALUES (%s, %s, %s) ON CONFLICT (hash) DO NOTHING"
)
_LEASE_COLUMNS = sql.LEASE_LIST
# ``sql.UPSERT_LEASE`` and the run row's copy of the held token (``runs.lease_token``, which
# the commit checks), in one statement; the caller holds the run row's lock already.
_UPSERT_LEASE = (
    f"WITH lease AS ({POSTGRES.q(sql.UPSERT_LEASE)} RETURNING token)"
    " UPDATE runs SET lease_token = (SELECT token FROM lease) WHERE run_id = %s"
)
# Give the lease up: the run row's copy of the token first (locks are taken run row ->
# lease row), then the lease row, both only when ``token`` is the held one.
_RELEASE_LEASE = (
    "WITH run AS (UPDATE runs SET lease_token = NULL"
    "  WHERE run_id = %(run_id)s AND lease_token = %(token)s RETURNING run_id)"
    " UPDATE leases SET host = NULL, pid = NULL, started_ms = NULL, expires_ms = 0"
    " WHERE run_id = (SELECT run_id FROM run) AND token = %(token)s AND host IS NOT NULL"
)
# What a commit that wrote nothing found: whether the run exists, and its lease.
_RUN_AND_LEASE = (
    f"SELECT r.run_id, {_LEASE_COLUMNS} FROM (SELECT %s::text AS run_id) AS asked"
    " LEFT JOIN runs r ON r.run_id = asked.run_id"
    " LEFT JOIN leases l ON l.run_id = asked.run_id"
)
_INSERT_MANIFEST = POSTGRES.q(sql.INSERT_MANIFEST)

# Lock the run row, then its lease row (always in that order), without writing either.
# The run row is locked in a CTE of its own: in one join, the lease subquery's lock would
# come first.
_LOCK_LEASE = (
    "WITH r AS MATERIALIZED (SELECT run_id FROM runs WHERE run_id = %s FOR UPDATE)"
    f" SELECT r.run_id, {_LEASE_COLUMNS} FROM r LEFT JOIN LATERAL"
    f" (SELECT {_LEASE_COLUMNS} FROM leases WHERE leases.run_id = r.run_id FOR UPDATE) l"
    " ON true"
)
# ``sql.JOURNAL_ROWS`` joined to the run row: (NULL, ...) for a run with no rows past the
# seq, nothing for no run.
_JOURNAL_OF_RUN = (
    f"SELECT j.* FROM (SELECT 1 FROM runs WHERE run_id = %s) AS r LEFT JOIN LATERAL"
    f" ({POSTGRES.q(sql.JOURNAL_ROWS)}) AS j ON true"
    " ORDER BY j.seq"
)
_CLAIMED_RUN = (
    # The run's manifests (part 0: seq, no journal columns, payload) and its journal as
    # _JOURNAL_OF_RUN reads it (part 1; one row of NULLs when the run has none).
    f"SELECT 0, seq, {', '.join(['NULL'] * (len(JOURNAL_COLUMNS) - 1))}, payload"
    " FROM manifests WHERE run_id = %s"
    f" UNION ALL SELECT 1, j.* FROM (SELECT 1 FROM runs WHERE run_id = %s) AS r"
    f" LEFT JOIN LATERAL ({POSTGRES.q(sql.JOURNAL_ROWS)}) AS j ON true"
    " ORDER BY 1, 2"
)
_RAW_ROWS_OF_RUN = (
    f"SELECT j.* FROM (SELECT 1 FROM runs WHERE run_id = %s) AS r LEFT JOIN LATERAL"
    f" ({POSTGRES.q(sql.RAW_ROWS)}) AS j ON true"
    " ORDER BY j.seq"
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
        self._nodes = sql.KnownNodes()
        self._manifest_nodes = NodeCache()
        # records_after between waves: the run's polled_seq as its last commit through
        # this store left it (the seq of its last record of a POLLED_KINDS kind).
        self._polled_at_commit: dict[str, int] = {}
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
        self._prepared = PreparedStatements()
        self._pool.adopt(conn)  # the first connection serves on

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r}, durability={self.durability!r})"

    # --- runs and manifests ---

    def create_run(
        self,
        info: RunInfo,
        manifest: JSON,
        conversation: str | None = None,
        *,
        lease: LeaseClaim | None = None,
    ) -> int | None:
        nodes: dict[str, bytes] = {}
        token = None
        payload = self._nodes.manifest(manifest, nodes)
        what = f"creating run '{info.run_id}'"
        if conversation is None:
            token = self._create_at_once(info, payload, nodes, lease, what)
            if token != _LEASE_ROW_LEFT:
                self._nodes.remember(nodes)
                return token
            token = None
        try:
            with self._connection(what) as conn, conn.pipeline() as pipe, conn.transaction():
                if conn.execute(_INSERT_RUN, run_row(info)).fetchone() is None:
                    raise PlaitError("E016", f"run id '{info.run_id}' already exists")
                conn.execute(_INSERT_MANIFEST, (info.run_id, 0, payload))
                self._insert_nodes(conn, info.run_id, nodes)
                if conversation is not None:
                    sql.join_conversation(conn, POSTGRES, conversation, info.run_id)
                if lease is not None:
                    token = _lease_for(conn, info.run_id, lease)
                pipe.sync()
        except PlaitError as exc:
            cause = exc.__cause__
            if isinstance(cause, pg_errors.UniqueViolation) and _is_turn_race(cause):
                # Two turns of one conversation created at once: both read the same last
                # position. The loser wrote nothing (its transaction rolled back).
                raise PlaitError(
                    "E031",
                    f"conversation '{conversation}': another turn started at the same"
                    f" moment; run '{info.run_id}' was not created (start it again)",
                ) from None
            raise
        self._nodes.remember(nodes)
        return token

    def _create_at_once(
        self,
        info: RunInfo,
        payload: str,
        nodes: dict[str, bytes],
        lease: LeaseClaim | None,
        what: str,
    ) -> int | None:
        """``create_run`` of a run outside a conversation in ONE statement (``_CREATE_RUN``):
        its token (or None without ``lease``), PLAIT-E016 when the id is taken, or
        ``_LEASE_ROW_LEFT`` (nothing written) when a lease row already names the run id, for
        ``create_run`` to apply the lease rule to it in a transaction of its own. A new run
        has no lease row, so the rule (``lease.may_take_over``) gives it token 1."""
        params: dict[str, Any] = dict(zip(RUN_COLUMNS, run_row(info), strict=True))
        hashes = sorted(nodes)
        params.update(
            payload=payload,
            hash=hashes,
            data=[nodes[digest] for digest in hashes],
            leased="false" if lease is None else "true",
            host=None if lease is None else lease.owner.host,
            pid=None if lease is None else str(lease.owner.pid),
            started_ms=None if lease is None else str(lease.owner.started_ms),
            expires_ms=None if lease is None else str(lease.now_ms + lease.ttl_ms),
        )
        try:
            with self._connection(what) as conn:
                row = conn.execute(_CREATE_RUN, params).fetchone()
        except PlaitError as exc:
            cause = exc.__cause__
            if isinstance(cause, pg_errors.UniqueViolation) and (
                cause.diag.constraint_name == "leases_pkey"
            ):
                return _LEASE_ROW_LEFT
            raise
        if row is None:
            raise PlaitError("E016", f"run id '{info.run_id}' already exists")
        return None if lease is None else 1

    def conversation_runs(self, conversation: str | None = None) -> list[tuple[str, RunInfo]]:
        with self._connection("listing conversations") as conn:
            return sql.conversation_runs(conn, POSTGRES, conversation)

    def get_run(self, run_id: str) -> RunInfo:
        with self._connection(f"reading run '{run_id}'") as conn:
            return sql.get_run(conn, POSTGRES, run_id)

    def list_runs(self, status: str | None = None) -> list[RunInfo]:
        with self._connection("listing runs") as conn:
            return sql.list_runs(conn, POSTGRES, status)

    def page_runs(self, query: RunQuery) -> RunPage:
        with self._connection("listing runs") as conn:
            return run_pages.page_runs(conn, POSTGRES, query)

    def journal_page(self, run_id: str, before_seq: int | None, limit: int) -> list[JournalItem]:
        with self._connection(f"reading the journal of run '{run_id}'") as conn:
            return run_pages.journal_page(
                conn, POSTGRES, run_id, before_seq, limit, NodeBatcher(conn)
            )

    def manifests(self, run_id: str) -> list[JSON]:
        """The run's manifests; the nodes runs of one workflow share are read once."""
        with self._connection(f"reading the manifest of run '{run_id}'") as conn:
            return sql.manifests(conn, POSTGRES, run_id, NodeBatcher(conn, self._manifest_nodes))

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
            return _lease_for(conn, run_id, LeaseClaim(owner, now_ms, ttl_ms, owner_alive))

    def renew_lease(self, run_id: str, token: int, now_ms: int, ttl_ms: int) -> None:
        with self._connection(f"renewing the lease of run '{run_id}'") as conn:
            renewed = conn.execute(
                "UPDATE leases SET expires_ms = %s"
                " WHERE run_id = %s AND token = %s AND host IS NOT NULL RETURNING token",
                (now_ms + ttl_ms, run_id, token),
            ).fetchone()
            if renewed is None:
                raise stale_token(run_id, token, sql.lease_row(conn, POSTGRES, run_id))

    def release_lease(self, run_id: str, token: int) -> None:
        with self._connection(f"releasing the lease of run '{run_id}'") as conn:
            conn.execute(_RELEASE_LEASE, {"run_id": run_id, "token": token})

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
            # Planned as claim_work's claim is (claims.PG_CLAIM_PLAN: the settings hold
            # until this transaction ends), not from the table's statistics of the moment.
            with conn.pipeline():
                conn.execute(claims.PG_CLAIM_PLAN)
                cursor = conn.execute(claims.PG_CLAIMABLE, (list(statuses), now_ms, limit))
            run_ids = [row[0] for row in cursor.fetchall()]
            for run_id in run_ids:
                token = _take_lease(conn, run_id, owner, now_ms, ttl_ms, never_dead)
                if token is not None:
                    claimed.append((run_id, token))
        return claimed

    # --- workers: claiming, waking, notifications, retention (docs/architecture.md §11) ---

    def claim_work(
        self,
        owner: LeaseOwner,
        now_ms: int,
        ttl_ms: int,
        limit: int = 1,
        exclude: Sequence[str] = (),
        owner_alive: Callable[[LeaseOwner], bool] = never_dead,
    ) -> list[tuple[str, int]]:
        """``WorkStore.claim_work``: oldest first, skipping rows another transaction holds
        (``FOR UPDATE SKIP LOCKED``), so concurrent workers never wait on each other. The
        runs and their leases are claimed in one statement (``claims.PG_CLAIM_AND_LEASE``,
        planned under ``claims.PG_CLAIM_PLAN``, both in one round trip); then, when
        ``owner_alive`` can tell and the limit is not reached, this host's runs whose
        holder is gone (``_claim_orphans``)."""
        if limit < 1:
            return []
        params: dict[str, Any] = {
            "now": now_ms,
            "limit": limit,
            "exclude": list(exclude),
            "host": owner.host,
            "pid": owner.pid,
            "started_ms": owner.started_ms,
            "expires_ms": now_ms + ttl_ms,
        }
        with self._connection("claiming runs") as conn:
            # One round trip, one implicit transaction (the pipeline's one sync): the
            # settings hold for the claim and end with it.
            with conn.pipeline():
                conn.execute(claims.PG_CLAIM_PLAN)
                cursor = conn.execute(claims.PG_CLAIM_AND_LEASE, params)
            claimed = [(row[0], row[1]) for row in cursor.fetchall()]
            if owner_alive is not never_dead and len(claimed) < limit:
                params["limit"] = limit - len(claimed)
                params["exclude"] = [*exclude, *(run_id for run_id, _ in claimed)]
                claimed += self._claim_orphans(conn, owner, now_ms, ttl_ms, params, owner_alive)
        return claimed

    def _claim_orphans(
        self,
        conn: Connection,
        owner: LeaseOwner,
        now_ms: int,
        ttl_ms: int,
        params: dict[str, Any],
        owner_alive: Callable[[LeaseOwner], bool],
    ) -> list[tuple[str, int]]:
        """This host's runs whose unexpired lease a process that is gone holds, claimed as
        ``claim_work`` claims (``claims.PG_CLAIM_ORPHANS``): read without a lock, then those
        whose holder is gone locked and taken in one transaction, the rule applied again
        to their lease rows as they are under the lock."""
        rows = conn.execute(claims.PG_CLAIM_ORPHANS, params).fetchall()
        gone = [r[0] for r in rows if not owner_alive(LeaseOwner(r[1], r[2], r[3]))]
        if not gone:
            return []
        claimed: list[tuple[str, int]] = []
        with conn.transaction():
            for (run_id,) in conn.execute(claims.PG_LOCK_ORPHANS, (gone,)).fetchall():
                if len(claimed) == params["limit"]:
                    break
                token = _take_lease(conn, run_id, owner, now_ms, ttl_ms, owner_alive)
                if token is not None:
                    claimed.append((run_id, token))
            if claimed:
                conn.execute(claims.PG_CLAIMED, (now_ms, [run_id for run_id, _ in claimed]))
        return claimed

    def set_wake(self, run_id: str, wake_ms: int | None, *, replace: bool = False) -> None:
        """``Store.set_wake``; listening workers are notified when ``wake_ms`` is set."""
        with self._connection(f"waking run '{run_id}'") as conn, conn.transaction():
            sql.set_wake(conn, POSTGRES, run_id, wake_ms, replace)
            if wake_ms is not None:  # delivered when the transaction commits
                conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, run_id))

    def wake_of(self, run_id: str) -> int | None:
        with self._connection(f"reading the wake time of run '{run_id}'") as conn:
            return sql.wake_of(conn, POSTGRES, run_id)

    def notify_runnable(self, run_id: str) -> None:
        """Tell listening workers (``listen``) that ``run_id`` may be claimable now."""
        with self._connection(f"notifying workers of run '{run_id}'") as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, run_id))

    def open_connections(self, count: int) -> None:
        """``WorkStore.open_connections``: the pool filled up to ``count`` (at most its
        ``pool_size``), each connection configured; PLAIT-E020 if one cannot connect."""
        try:
            self._pool.fill(count)
        except psycopg.Error as exc:
            raise self._storage_error(exc, "cannot connect") from exc

    def listen(self) -> PostgresListener:
        """A connection of its own listening on NOTIFY_CHANNEL (close it when done)."""
        try:
            conn = psycopg.connect(self._url, **self._kwargs)
        except psycopg.Error as exc:
            raise self._storage_error(exc, "cannot listen") from exc
        return PostgresListener(conn, self._storage_error)

    def gc(self, before_ms: int, now_ms: int) -> list[str]:
        """``WorkStore.gc``, skipping runs another transaction holds (``SKIP LOCKED``)."""
        with self._connection("collecting garbage") as conn, conn.transaction():
            roots = [
                row[0]
                for row in conn.execute(
                    claims.PG_GC_ROOTS,
                    {"finished": list(sql.FINISHED), "before": before_ms, "now": now_ms},
                ).fetchall()
            ]
            if not roots:
                return []
            tree = conn.execute(claims.PG_GC_TREE, {"roots": roots, "now": now_ms}).fetchall()
            doomed = sql.gc_selection(tree)
            if doomed:
                # Locks are taken run row -> lease row everywhere (a late release_lease of
                # a child included): the children's run rows first, then the deletes.
                conn.execute(
                    "SELECT run_id FROM runs WHERE run_id = ANY(%s) ORDER BY run_id FOR UPDATE",
                    (doomed,),
                )
                tables = ("journal", "manifests", "leases", "schedule_slots", "runs")
                for table in (*tables, "conversation_runs"):
                    conn.execute(f"DELETE FROM {table} WHERE run_id = ANY(%s)", (doomed,))
        return doomed

    # --- API tokens (store/tokens.py) ---

    def put_token(self, row: TokenRow) -> bool:
        where = f"writing the token of '{row.principal}'"
        with self._connection(where) as conn, conn.transaction():
            return tokens.put(conn, POSTGRES, row)

    def token_by_digest(self, digest: str) -> TokenRow | None:
        with self._connection("reading API tokens") as conn:
            return tokens.by_digest(conn, POSTGRES, digest)

    def list_tokens(self) -> list[TokenRow]:
        with self._connection("listing API tokens") as conn:
            return tokens.all_rows(conn)

    def revoke_token(self, principal: str) -> bool:
        where = f"revoking the token of '{principal}'"
        with self._connection(where) as conn, conn.transaction():
            return tokens.delete(conn, POSTGRES, principal)

    # --- schedules (store/schedules.py) ---

    def put_schedule(self, row: ScheduleRow, *, replace: bool = False) -> bool:
        with self._connection(f"writing schedule '{row.name}'") as conn, conn.transaction():
            if schedules.get(conn, POSTGRES, row.name, lock=True) is None:
                schedules.insert(conn, POSTGRES, row)
                return True
            if not replace:
                raise PlaitError("E016", f"schedule '{row.name}' already exists")
            schedules.replace_spec(conn, POSTGRES, row)
            return False

    def get_schedule(self, name: str) -> ScheduleRow:
        with self._connection(f"reading schedule '{name}'") as conn:
            row = schedules.get(conn, POSTGRES, name)
        if row is None:
            raise schedules.unknown_schedule(name)
        return row

    def list_schedules(self) -> list[ScheduleRow]:
        with self._connection("listing schedules") as conn:
            return schedules.all_rows(conn)

    def pause_schedule(self, name: str, paused: bool, next_ms: int | None, now_ms: int) -> None:
        with self._connection(f"writing schedule '{name}'") as conn, conn.transaction():
            if schedules.get(conn, POSTGRES, name, lock=True) is None:
                raise schedules.unknown_schedule(name)
            schedules.set_paused(conn, POSTGRES, name, paused, next_ms, now_ms)

    def delete_schedule(self, name: str) -> None:
        with self._connection(f"deleting schedule '{name}'") as conn, conn.transaction():
            if schedules.get(conn, POSTGRES, name, lock=True) is None:
                raise schedules.unknown_schedule(name)
            schedules.delete(conn, POSTGRES, name)

    def due_schedules(self, now_ms: int) -> tuple[list[ScheduleRow], int | None]:
        with self._connection("reading due schedules") as conn:
            return schedules.due(conn, POSTGRES, now_ms)

    def advance_schedule(
        self, name: str, cursor_ms: int, next_ms: int, error: str | None, now_ms: int
    ) -> bool:
        with self._connection(f"writing schedule '{name}'") as conn:
            return schedules.advance(conn, POSTGRES, name, cursor_ms, next_ms, error, now_ms)

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
        """``ScheduleStore.fire_slot`` in one transaction holding the schedule row's lock:
        concurrent workers firing the same slot wait for each other, and the later one
        finds the cursor moved on."""
        nodes: dict[str, bytes] = {}
        payload = self._nodes.manifest(manifest, nodes)
        what = f"firing schedule '{name}'"
        with self._connection(what) as conn, conn.transaction():
            row = schedules.get(conn, POSTGRES, name, lock=True)
            if row is None or row.paused or row.next_ms > slot_ms:
                return TAKEN
            if overlap_skip and schedules.previous_unfinished(conn, POSTGRES, row.last_run_id):
                schedules.fired(conn, POSTGRES, name, slot_ms, next_ms, None, now_ms)
                return OVERLAPPED
            if not schedules.insert_slot(conn, POSTGRES, name, slot_ms, info.run_id):
                return TAKEN
            if conn.execute(_INSERT_RUN, run_row(info)).fetchone() is None:
                raise PlaitError("E016", f"run id '{info.run_id}' already exists")
            conn.execute(_INSERT_MANIFEST, (info.run_id, 0, payload))
            self._insert_nodes(conn, info.run_id, nodes)
            schedules.fired(conn, POSTGRES, name, slot_ms, next_ms, info.run_id, now_ms)
        self._nodes.remember(nodes)
        return FIRED

    def schedule_slots(self, name: str | None = None) -> list[tuple[str, int, str]]:
        with self._connection("reading schedule slots") as conn:
            return schedules.slots(conn, POSTGRES, name)

    # --- the journal ---

    def commit(
        self, run_id: str, token: int | None, writes: Sequence[Write], *, release: bool = False
    ) -> None:
        """The batch in one statement (``pg_commit.commit_query``): one round trip, one
        transaction (with ``release``, the lease is given up in it too)."""
        nodes: dict[str, bytes] = {}
        encode = self._nodes.encoder(nodes)
        ops = [write_row(write, encode) for write in writes]  # cut before any transaction
        what = f"committing to the journal of run '{run_id}'"
        self._polled_at_commit.pop(run_id, None)
        try:
            with self._connection(what, if_lost=_COMMIT_UNKNOWN) as conn:
                encoding = self._prepared.encoding(conn)
                statement, params = commit_query(run_id, token, ops, nodes, encoding, release)
                polled = self._prepared.run(conn, statement, params).get_value(0, 0)
                if polled is None:  # nothing was written: which of E017, E021
                    found = conn.execute(_RUN_AND_LEASE, (run_id,)).fetchone()
        except PlaitError as exc:
            cause = exc.__cause__
            if isinstance(cause, pg_errors.UniqueViolation) and cause.diag.constraint_name in (
                "journal_intent_keys",
                "journal_result_keys",
            ):
                raise self._duplicate(run_id, ops, exc) from cause
            raise
        if polled is None:
            if found is None or found[0] is None or token is None:
                raise unknown_run(run_id)
            raise stale_token(run_id, token, sql.lease_from(found[1:]))
        self._nodes.remember(nodes)
        if len(self._polled_at_commit) >= sql.WATCH_LIMIT:
            self._polled_at_commit.clear()  # runs committed to here but never polled
        self._polled_at_commit[run_id] = int(polled)

    def load_journal(self, run_id: str, after_seq: int = 0) -> Journal:
        """``Store.load_journal`` in one round trip, also when there is nothing to read (a
        queued run a worker claimed): the run row is joined, so no row at all means no run."""
        with self._connection(f"reading the journal of run '{run_id}'") as conn:
            rows = conn.execute(_JOURNAL_OF_RUN, (run_id, run_id, after_seq)).fetchall()
            if not rows:
                raise unknown_run(run_id)
            if rows[0][0] is None:  # the run, without journal rows past after_seq
                return Journal(run_id)
            return sql.journal_of(conn, POSTGRES, run_id, rows, NodeBatcher(conn))

    def claimed_run(self, run_id: str) -> tuple[list[JSON], Journal]:
        """``WorkStore.claimed_run`` in one statement: ``manifests`` and ``load_journal``."""
        with self._connection(f"reading the manifest of run '{run_id}'") as conn:
            rows = conn.execute(_CLAIMED_RUN, (run_id, run_id, run_id, 0)).fetchall()
            if not rows or rows[-1][0] != 1:
                raise unknown_run(run_id)
            payloads = [row[-1] for row in rows if row[0] == 0]
            manifests = sql.decoded_manifests(
                run_id, payloads, NodeBatcher(conn, self._manifest_nodes)
            )
            journal = [row[1:] for row in rows if row[0] == 1]
            if journal[0][0] is None:  # the run, without journal rows
                return manifests, Journal(run_id)
            return manifests, sql.journal_of(conn, POSTGRES, run_id, journal, NodeBatcher(conn))

    def journal_rows(self, run_id: str) -> JournalRows:
        """``Store.journal_rows`` in one round trip, the run row joined as ``load_journal``."""
        with self._connection(f"reading the journal of run '{run_id}'") as conn:
            rows = conn.execute(_RAW_ROWS_OF_RUN, (run_id, run_id)).fetchall()
            if not rows:
                raise unknown_run(run_id)
            if rows[0][0] is None:  # the run, without journal rows
                rows = []
            return sql.journal_rows_of(conn, POSTGRES, run_id, rows, NodeBatcher(conn))

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

        The run's last commit through this store returned the run's ``polled_seq``, the
        seq of its last record of a ``POLLED_KINDS`` kind (kept by every commit, so also
        by other connections' and processes'; schema.py, migration 13): when ``kinds``
        are among those and it is at most ``after_seq``, the answer is known without a
        round trip. It is the journal as of that commit, a moment before this call; a
        record committed in between is found by the next poll, after the next commit.
        """
        if "feed" in kinds:  # never in the records index (schema.py, migration 12)
            raise ValueError("records_after does not look up feed records (see Store)")
        polled = self._polled_at_commit.pop(run_id, None)
        if polled is not None and polled <= after_seq and _among_polled(kinds):
            return []
        with self._connection(f"reading the records of run '{run_id}'") as conn:
            rows = conn.execute(
                "SELECT seq, record_kind, payload FROM journal WHERE run_id = %s AND seq > %s"
                " AND item = 'record' AND record_kind <> 'feed' AND record_kind = ANY(%s)"
                " ORDER BY seq",
                (run_id, after_seq, list(kinds)),
            ).fetchall()
            reader = NodeBatcher(conn)
            return [Record(seq, kind, reader.decode(payload)) for seq, kind, payload in rows]

    def read_checkpoint(self, run_id: str, seq: int) -> bytes:
        with self._connection(f"reading a checkpoint of run '{run_id}'") as conn:
            return sql.read_checkpoint(conn, POSTGRES, run_id, seq, NodeBatcher(conn))

    def read_checkpoints(self, run_id: str, first: int, last: int) -> dict[int, bytes]:
        with self._connection(f"reading the checkpoints of run '{run_id}'") as conn:
            return sql.read_checkpoints(conn, POSTGRES, run_id, first, last, NodeBatcher(conn))

    def latest_checkpoint(self, run_id: str) -> CheckpointMeta | None:
        with self._connection(f"reading a checkpoint of run '{run_id}'") as conn:
            return sql.latest_checkpoint(conn, POSTGRES, run_id)

    def checkpoint_beside(self, run_id: str, seq: int, *, later: bool) -> CheckpointMeta | None:
        with self._connection(f"reading a checkpoint of run '{run_id}'") as conn:
            return sql.checkpoint_beside(conn, POSTGRES, run_id, seq, later=later)

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

    def _insert_nodes(self, conn: Connection, run_id: str, nodes: dict[str, bytes]) -> None:
        if nodes:  # in hash order: two transactions storing the same nodes never deadlock
            conn.cursor().executemany(
                _INSERT_NODES, [(digest, nodes[digest], run_id) for digest in sorted(nodes)]
            )

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
                return sql.duplicate_key(self.where, run_id, item, key)
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

    def _connection(self, what: str = "", *, if_lost: str = "") -> _Borrowed:
        """A pooled connection (autocommit) for one ``with`` block; any psycopg error
        becomes PLAIT-E020.

        ``what`` names the operation for the message ("reading run 'r1'"); ``if_lost``
        is added when the connection broke under it. A pooled connection the server
        closed meanwhile is replaced before use; the server being down is "cannot
        connect" with libpq's reason, at once.
        """
        return _Borrowed(self, what, if_lost)


class _Borrowed:
    """``PostgresStore._connection``'s block: the connection taken from the pool on entry
    and given back on exit. A class rather than a generator: every commit enters one,
    and a generator's context manager costs several times the calls."""

    __slots__ = ("_conn", "_if_lost", "_store", "_what")

    def __init__(self, store: PostgresStore, what: str, if_lost: str) -> None:
        self._store, self._what, self._if_lost = store, what, if_lost

    def __enter__(self) -> Connection:
        try:
            self._conn = self._store._pool.get()
        except psycopg.Error as exc:
            reason = "" if isinstance(exc, PoolError) else "cannot connect"
            context = ": ".join(part for part in (self._what, reason) if part)
            raise self._store._storage_error(exc, context) from exc
        return self._conn

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        conn = self._conn
        error = None
        if isinstance(exc, psycopg.Error):  # told before the pool closes a broken one
            error = self._store._storage_error(exc, self._what, conn, self._if_lost)
        self._store._pool.put(conn)
        if error is not None:
            raise error from exc


def _among_polled(kinds: Sequence[str]) -> bool:
    """Every kind in ``kinds`` is one a run's ``polled_seq`` follows (the driver's
    ``POLLED_KINDS`` themselves, most often)."""
    return kinds is POLLED_KINDS or all(kind in POLLED_KINDS for kind in kinds)


def _is_turn_race(exc: pg_errors.UniqueViolation) -> bool:
    """The violation is of ``conversation_runs``' (conversation, position) key."""
    return exc.diag.table_name == "conversation_runs"


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
        token = may_take_over(run_id, sql.lease_from(row[1:]), owner, now_ms, owner_alive)
    except PlaitError:
        return None
    _upsert_lease(conn, run_id, owner, token, now_ms + ttl_ms)
    return token


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
_SCHEDULES: type[ScheduleStore] = PostgresStore
_TOKENS: type[TokenStore] = PostgresStore


def _lease_for(conn: Connection, run_id: str, claim: LeaseClaim) -> int:
    """The lease rule (``lease.may_take_over``) applied to the locked run and lease rows,
    and written, inside the caller's transaction; the new token. PLAIT-E017, E021."""
    row = conn.execute(_LOCK_LEASE, (run_id,)).fetchone()
    if row is None:
        raise unknown_run(run_id)
    current = sql.lease_from(row[1:])
    token = may_take_over(run_id, current, claim.owner, claim.now_ms, claim.owner_alive)
    _upsert_lease(conn, run_id, claim.owner, token, claim.now_ms + claim.ttl_ms)
    return token


def _upsert_lease(
    conn: Connection, run_id: str, owner: LeaseOwner, token: int, expires_ms: int
) -> None:
    """``sql.upsert_lease``, and the run row's ``lease_token`` with it (the run row locked
    by the caller)."""
    conn.execute(
        _UPSERT_LEASE,
        (run_id, owner.host, owner.pid, owner.started_ms, token, expires_ms, run_id),
    )
