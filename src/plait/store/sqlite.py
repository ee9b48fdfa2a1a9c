"""``SqliteStore``: the default, embedded store: one SQLite file in WAL mode (§11).

One connection per store, guarded by a lock; every write is one ``BEGIN IMMEDIATE``
transaction, so a wave's results, its checkpoint and the next wave's intents land
together or not at all. JSON payloads go through ``chunks.py``: a journal row keeps a
small encoded root and the nodes it needs are inserted once (``INSERT OR IGNORE``),
shared by every checkpoint, intent, result and run that holds the same value.

Rules: parameterized SQL only; JSON only, never pickle; every ``sqlite3.Error`` leaves
this module as PLAIT-E020 and rolls its transaction back; it never reads the clock
(callers pass times in) and never decides a lease on its own (``lease.py`` does).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from plait.core.canonical import JSON
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import claims, run_pages, schedules, sql, tokens
from plait.store.base import (
    JournalMarks,
    Listener,
    RangeReads,
    ScheduleStore,
    TokenStore,
    WorkStore,
    never_dead,
    unknown_run,
)
from plait.store.lease import LeaseClaim, may_take_over
from plait.store.node_reads import NodeFetcher
from plait.store.read_only import read_only_message, read_only_query, read_only_reason
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
from plait.store.rows import RUN_COLUMNS, JournalRows, Row, key_text, run_row, write_row
from plait.store.run_pages import RunPage, RunQuery
from plait.store.sql import SQLITE
from plait.store.sqlite_inserts import ROWS_PER_INSERT, first_duplicate, insert_fenced, insert_rows
from plait.store.sqlite_schema import migrate
from plait.store.wal import BACKSTOP_PAGES, WalCheckpointer
from plait.store.wal_index import CommitWatch

DURABILITY = {"normal": "NORMAL", "strict": "FULL"}
"""``durability`` -> ``PRAGMA synchronous``: NORMAL survives a process crash, FULL power loss."""

_RUN_COLUMNS = ", ".join(RUN_COLUMNS)
_KEYS_PER_QUERY = 500
"""Keys looked up per statement (SQLite caps the parameters of one)."""

_RUN_AND_LEASE = (
    "SELECT (SELECT MAX(seq) FROM journal WHERE run_id = :run),"
    " (SELECT MAX(seq) FROM manifests WHERE run_id = :run), l.token, l.host"
    " FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id WHERE r.run_id = :run"
)
_PAYLOAD_COLUMNS = (("journal", "payload"), ("manifests", "payload"), ("nodes", "data"))
_RAW_ROWS = sql.RAW_ROWS + " ORDER BY seq"


_TURNS = "conversation_runs"


class SqliteStore:
    """The ``Store`` protocol over one SQLite file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        durability: str = "normal",
        *,
        busy_timeout_ms: int = 5000,
        read_only: bool = False,
    ) -> None:
        if durability not in DURABILITY:
            raise PlaitError(
                "E020", f"unknown durability {durability!r} (expected 'normal' or 'strict')"
            )
        self.path = os.fspath(path)
        self.durability = durability
        self._lock = threading.RLock()
        self._nodes = sql.KnownNodes()
        # records_after between waves: (run, kinds) -> (version, seq) after which nothing
        # of those kinds existed when the database was at that version (see records_after).
        self._nothing_after: dict[tuple[str, tuple[str, ...]], tuple[tuple[int, int], int]] = {}
        self._records_written = 0
        """Records this connection committed of any kind but feed (what a poll may ask for;
        a feed, one per wave, never is)."""
        # The last seq this store committed for a run under a lease: a wave's commit then
        # needs no read of the journal (``_commit_fenced``).
        self._last_seq: dict[str, int] = {}
        memory = self.path == ":memory:"
        self._file = None if memory else os.path.abspath(self.path)
        """The database file, absolute: ``reopen`` finds it whatever folder the process
        moved to since."""
        try:
            if read_only:
                uri = f"file:{quote(os.path.abspath(self.path))}?{read_only_query(self.path)}"
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            else:
                if not memory:
                    Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            reason = None if memory else read_only_reason(self.path)
            if reason is not None and not read_only:
                raise PlaitError("E020", read_only_message(self.path, reason)) from exc
            raise PlaitError("E020", f"storage error on {self.path}: {exc}") from exc
        self.read_only = read_only
        self._conn = conn
        self._pragmas = conn.cursor()  # kept for the poll's PRAGMA data_version
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if not read_only and not memory:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")
            conn.execute(f"PRAGMA synchronous = {DURABILITY[durability]}")
            migrate(conn, self.path)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, sqlite3.Error):
                raise self._storage_error(exc) from exc
            raise
        # Checkpoints off the committing thread (wal.py); SQLite's own is the backstop.
        self._checkpointer = None if read_only or memory else WalCheckpointer(self.path)
        # Whether anybody committed since the last poll, without a read transaction.
        self._commits = CommitWatch()
        if not (read_only or memory):
            self._commits.open(self.path)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r}, durability={self.durability!r})"

    # --- runs and manifests ---

    def create_run(
        self,
        info: RunInfo,
        manifest: JSON,
        conversation: str | None = None,
        *,
        lease: LeaseClaim | None = None,
    ) -> int | None:
        with self._lock:
            nodes: dict[str, bytes] = {}
            payload = self._nodes.manifest(manifest, nodes)
            token = None
            with self._write() as conn:
                self._insert_run(conn, info, payload, nodes)
                if conversation is not None:
                    sql.join_conversation(conn, SQLITE, conversation, info.run_id)
                if lease is not None:
                    token = self._take_lease(conn, info.run_id, lease)
            self._nodes.remember(nodes)
            return token

    def conversation_runs(self, conversation: str | None = None) -> list[tuple[str, RunInfo]]:
        with self._lock, self._read() as conn:
            return sql.conversation_runs(conn, SQLITE, conversation)

    def _insert_run(
        self, conn: sqlite3.Connection, info: RunInfo, payload: str, nodes: dict[str, bytes]
    ) -> None:
        """A new run's row, original manifest and nodes; PLAIT-E016 if the id is taken."""
        if sql.run_exists(conn, SQLITE, info.run_id):
            raise PlaitError("E016", f"run id '{info.run_id}' already exists")
        conn.execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}, last_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0)",
            run_row(info),
        )
        conn.execute(sql.INSERT_MANIFEST, (info.run_id, 0, payload))
        self._insert_nodes(conn, info.run_id, nodes)

    def get_run(self, run_id: str) -> RunInfo:
        with self._lock, self._read() as conn:
            return sql.get_run(conn, SQLITE, run_id)

    def list_runs(self, status: str | None = None) -> list[RunInfo]:
        with self._lock, self._read() as conn:
            return sql.list_runs(conn, SQLITE, status)

    def page_runs(self, query: RunQuery) -> RunPage:
        with self._lock, self._read() as conn:
            return run_pages.page_runs(conn, SQLITE, query)

    def journal_page(self, run_id: str, before_seq: int | None, limit: int) -> list[JournalItem]:
        with self._lock, self._read() as conn:
            return run_pages.journal_page(
                conn, SQLITE, run_id, before_seq, limit, NodeFetcher(conn)
            )

    def manifests(self, run_id: str) -> list[JSON]:
        with self._lock, self._read() as conn:
            return sql.manifests(conn, SQLITE, run_id, NodeFetcher(conn))

    # --- leases ---

    def acquire_lease(
        self,
        run_id: str,
        owner: LeaseOwner,
        now_ms: int,
        ttl_ms: int,
        owner_alive: Callable[[LeaseOwner], bool],
    ) -> int:
        with self._lock, self._write() as conn:
            sql.require_run(conn, SQLITE, run_id)
            return self._take_lease(conn, run_id, LeaseClaim(owner, now_ms, ttl_ms, owner_alive))

    def _take_lease(self, conn: sqlite3.Connection, run_id: str, claim: LeaseClaim) -> int:
        """The lease rule (``lease.may_take_over``) applied and written; the new token."""
        current = sql.lease_row(conn, SQLITE, run_id)
        token = may_take_over(run_id, current, claim.owner, claim.now_ms, claim.owner_alive)
        sql.upsert_lease(conn, SQLITE, run_id, claim.owner, token, claim.now_ms + claim.ttl_ms)
        return token

    def renew_lease(self, run_id: str, token: int, now_ms: int, ttl_ms: int) -> None:
        with self._lock, self._write() as conn:
            sql.check_token(conn, SQLITE, run_id, token)
            conn.execute(
                "UPDATE leases SET expires_ms = ? WHERE run_id = ?", (now_ms + ttl_ms, run_id)
            )

    def release_lease(self, run_id: str, token: int) -> None:
        with self._lock, self._write() as conn:
            sql.release_lease(conn, SQLITE, run_id, token)

    # --- workers: claiming, waking, retention (docs/architecture.md §11) ---

    def claim_work(
        self,
        owner: LeaseOwner,
        now_ms: int,
        ttl_ms: int,
        limit: int = 1,
        exclude: Sequence[str] = (),
        owner_alive: Callable[[LeaseOwner], bool] = never_dead,
    ) -> list[tuple[str, int]]:
        """``WorkStore.claim_work`` in one ``BEGIN IMMEDIATE`` transaction: processes
        sharing the file never claim a run twice, they take turns."""
        if limit < 1:
            return []
        skip = set(exclude)
        claimed: list[tuple[str, int]] = []
        with self._lock, self._write() as conn:
            queries: list[tuple[str, dict[str, Any], Callable[[LeaseOwner], bool]]] = [
                (claims.SQLITE_CLAIM_WORK, {"now": now_ms}, never_dead)
            ]
            if owner_alive is not never_dead:
                queries.append(
                    (claims.SQLITE_CLAIM_ORPHANS, {"now": now_ms, "host": owner.host}, owner_alive)
                )
            for statement, params, alive in queries:
                for (run_id,) in conn.execute(statement, params).fetchall():
                    if len(claimed) == limit:
                        return claimed
                    if run_id in skip:
                        continue
                    try:
                        current = sql.lease_row(conn, SQLITE, run_id)
                        token = may_take_over(run_id, current, owner, now_ms, alive)
                    except PlaitError:
                        continue  # a live holder keeps it
                    sql.upsert_lease(conn, SQLITE, run_id, owner, token, now_ms + ttl_ms)
                    conn.execute(claims.SQLITE_CLAIMED, (now_ms, run_id))
                    claimed.append((run_id, token))
                    skip.add(run_id)
        return claimed

    def set_wake(self, run_id: str, wake_ms: int | None, *, replace: bool = False) -> None:
        """``Store.set_wake``; there is nobody to notify (workers on a file poll)."""
        with self._lock, self._write() as conn:
            sql.set_wake(conn, SQLITE, run_id, wake_ms, replace)

    def wake_of(self, run_id: str) -> int | None:
        with self._lock, self._read() as conn:
            return sql.wake_of(conn, SQLITE, run_id)

    def notify_runnable(self, run_id: str) -> None:
        """Nothing to notify on SQLite: workers on a file poll (``plait worker --poll-ms``)."""

    def open_connections(self, count: int) -> None:
        """Nothing to open: the file's one connection is open from the start."""

    def listen(self) -> Listener | None:
        """None: SQLite has no notifications; workers on a file poll (``--poll-ms``)."""
        return None

    def gc(self, before_ms: int, now_ms: int) -> list[str]:
        """``WorkStore.gc`` in one ``BEGIN IMMEDIATE`` transaction."""
        params = {"before": before_ms, "now": now_ms}
        with self._lock, self._write() as conn:
            roots = [row[0] for row in conn.execute(claims.SQLITE_GC_ROOTS, params).fetchall()]
            if not roots:
                return []
            tree = conn.execute(
                claims.SQLITE_GC_TREE, {"roots": json.dumps(roots), "now": now_ms}
            ).fetchall()
            doomed = sql.gc_selection(tree)
            for table in ("journal", "manifests", "leases", "schedule_slots", "runs", _TURNS):
                conn.executemany(
                    f"DELETE FROM {table} WHERE run_id = ?", [(run_id,) for run_id in doomed]
                )
        return doomed

    # --- API tokens (store/tokens.py) ---

    def put_token(self, row: TokenRow) -> bool:
        with self._lock, self._write() as conn:
            return tokens.put(conn, SQLITE, row)

    def token_by_digest(self, digest: str) -> TokenRow | None:
        with self._lock, self._read() as conn:
            return tokens.by_digest(conn, SQLITE, digest)

    def list_tokens(self) -> list[TokenRow]:
        with self._lock, self._read() as conn:
            return tokens.all_rows(conn)

    def revoke_token(self, principal: str) -> bool:
        with self._lock, self._write() as conn:
            return tokens.delete(conn, SQLITE, principal)

    # --- schedules (store/schedules.py) ---

    def put_schedule(self, row: ScheduleRow, *, replace: bool = False) -> bool:
        with self._lock, self._write() as conn:
            if schedules.get(conn, SQLITE, row.name) is None:
                schedules.insert(conn, SQLITE, row)
                return True
            if not replace:
                raise PlaitError("E016", f"schedule '{row.name}' already exists")
            schedules.replace_spec(conn, SQLITE, row)
            return False

    def get_schedule(self, name: str) -> ScheduleRow:
        with self._lock, self._read() as conn:
            row = schedules.get(conn, SQLITE, name)
        if row is None:
            raise schedules.unknown_schedule(name)
        return row

    def list_schedules(self) -> list[ScheduleRow]:
        with self._lock, self._read() as conn:
            return schedules.all_rows(conn)

    def pause_schedule(self, name: str, paused: bool, next_ms: int | None, now_ms: int) -> None:
        with self._lock, self._write() as conn:
            if schedules.get(conn, SQLITE, name) is None:
                raise schedules.unknown_schedule(name)
            schedules.set_paused(conn, SQLITE, name, paused, next_ms, now_ms)

    def delete_schedule(self, name: str) -> None:
        with self._lock, self._write() as conn:
            if schedules.get(conn, SQLITE, name) is None:
                raise schedules.unknown_schedule(name)
            schedules.delete(conn, SQLITE, name)

    def due_schedules(self, now_ms: int) -> tuple[list[ScheduleRow], int | None]:
        with self._lock, self._read() as conn:
            return schedules.due(conn, SQLITE, now_ms)

    def advance_schedule(
        self, name: str, cursor_ms: int, next_ms: int, error: str | None, now_ms: int
    ) -> bool:
        with self._lock, self._write() as conn:
            return schedules.advance(conn, SQLITE, name, cursor_ms, next_ms, error, now_ms)

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
        """``ScheduleStore.fire_slot`` in one ``BEGIN IMMEDIATE`` transaction."""
        with self._lock:
            nodes: dict[str, bytes] = {}
            payload = self._nodes.manifest(manifest, nodes)
            with self._write() as conn:
                row = schedules.get(conn, SQLITE, name)
                if row is None or row.paused or row.next_ms > slot_ms:
                    return TAKEN
                if overlap_skip and schedules.previous_unfinished(conn, SQLITE, row.last_run_id):
                    schedules.fired(conn, SQLITE, name, slot_ms, next_ms, None, now_ms)
                    return OVERLAPPED
                if not schedules.insert_slot(conn, SQLITE, name, slot_ms, info.run_id):
                    return TAKEN
                self._insert_run(conn, info, payload, nodes)
                schedules.fired(conn, SQLITE, name, slot_ms, next_ms, info.run_id, now_ms)
            self._nodes.remember(nodes)
            return FIRED

    def schedule_slots(self, name: str | None = None) -> list[tuple[str, int, str]]:
        with self._lock, self._read() as conn:
            return schedules.slots(conn, SQLITE, name)

    # --- the journal ---

    def commit(
        self, run_id: str, token: int | None, writes: Sequence[Write], *, release: bool = False
    ) -> None:
        with self._lock:
            nodes: dict[str, bytes] = {}
            encode = self._nodes.encoder(nodes)
            ops = [write_row(write, encode) for write in writes]  # cut before BEGIN IMMEDIATE
            last = self._last_seq.get(run_id) if not (nodes or release) else None
            if (
                last is not None
                and token is not None
                and self._commit_fenced(run_id, token, last, ops)
            ):
                return
            self._last_seq.pop(run_id, None)
            with self._write() as conn:
                # One statement for the run's last seq and its lease token.
                row = conn.execute(_RUN_AND_LEASE, {"run": run_id}).fetchone()
                if row is None:
                    raise unknown_run(run_id)
                seq = max(row[0] or 0, row[1] or 0)
                if token is not None and (row[2] != token or row[3] is None):
                    sql.check_token(conn, SQLITE, run_id, token)  # E021 naming the holder
                rows = []
                for op in ops:
                    if op[0] == "status":
                        conn.execute(
                            "UPDATE runs SET status = ?, outcome = ?, updated_ms = ?"
                            " WHERE run_id = ?",
                            (*op[1:], run_id),
                        )
                        continue
                    seq += 1
                    if op[0] == "record" and op[3] != "feed":
                        self._records_written += 1
                    if op[0] == "manifest":
                        conn.execute(sql.INSERT_MANIFEST, (run_id, seq, op[1]))
                        continue
                    rows.append((run_id, seq, *op))
                try:
                    insert_rows(conn, rows)
                except sqlite3.IntegrityError as exc:
                    raise self._duplicate(run_id, first_duplicate(conn, run_id, rows), exc) from exc
                self._insert_nodes(conn, run_id, nodes)
                if release and token is not None:
                    sql.release_lease(conn, SQLITE, run_id, token)
            self._commits.committed()
            self._nodes.remember(nodes)
            if token is not None and not release:  # a lease given up commits no more
                if len(self._last_seq) >= sql.WATCH_LIMIT:
                    self._last_seq.clear()  # runs no longer driven here
                self._last_seq[run_id] = seq

    def _commit_fenced(self, run_id: str, token: int, last: int, ops: list[Row]) -> bool:
        """A wave's journal rows in one statement, its own transaction: inserted only while
        ``token`` holds the run's lease (§5.7), at the seqs after ``last``, the last seq this
        store committed for the run under that lease. False when it inserted nothing: a
        write that is not a journal row, a lease lost, or a seq taken meanwhile (a cancel
        or a steering message another process journaled, which the primary key refuses);
        the caller then commits in a transaction that reads the last seq and the lease."""
        if not ops or len(ops) > ROWS_PER_INSERT or self._conn.in_transaction:
            return False  # (a statement inside an open transaction would not commit alone)
        try:
            inserted = insert_fenced(self._conn, run_id, last, ops, token)
        except sqlite3.IntegrityError:
            return False
        except sqlite3.Error as exc:
            self._rollback()
            raise self._storage_error(exc) from exc
        if inserted != len(ops):  # not journal rows only, or the lease is not ours (any more)
            return False
        for op in ops:
            if op[0] == "record" and op[3] != "feed":
                self._records_written += 1
        self._last_seq[run_id] = last + inserted
        self._commits.committed()
        if self._checkpointer is not None:
            self._checkpointer.committed()
        return True

    def load_journal(self, run_id: str, after_seq: int = 0) -> Journal:
        with self._lock, self._read() as conn:
            return sql.load_journal(conn, SQLITE, run_id, after_seq, NodeFetcher(conn))

    def claimed_run(self, run_id: str) -> tuple[list[JSON], Journal]:
        """``WorkStore.claimed_run``: two local reads (nothing to gain in one)."""
        return self.manifests(run_id), self.load_journal(run_id)

    def journal_rows(self, run_id: str) -> JournalRows:
        with self._lock, self._read() as conn:
            rows = conn.execute(_RAW_ROWS, (run_id,)).fetchall()
            return sql.journal_rows_of(conn, SQLITE, run_id, rows, NodeFetcher(conn))

    def reopens(self) -> bool:
        return self._file is not None

    def reopen(self) -> SqliteStore:
        if self._file is None:
            raise PlaitError("E020", "an in-memory database cannot be opened again")
        return SqliteStore(self._file, self.durability, read_only=True)

    def journal_marks(self, run_id: str) -> JournalMarks:
        with self._lock, self._read() as conn:
            return sql.marks_of(conn.execute(sql.JOURNAL_MARKS, (run_id,)).fetchone())

    def journal_range(self, run_id: str, first_seq: int, last_seq: int | None) -> JournalRows:
        last = sql.LAST_SEQ if last_seq is None else last_seq
        with self._lock, self._read() as conn:
            rows = conn.execute(sql.RAW_RANGE, (run_id, first_seq, last)).fetchall()
            return sql.journal_rows_of(conn, SQLITE, run_id, rows, NodeFetcher(conn))

    def settled(self, run_id: str, keys: Sequence[JournalKey]) -> set[JournalKey]:
        by_text = {key_text(key): key for key in keys}
        texts = sorted(by_text)
        found: set[JournalKey] = set()
        with self._lock, self._read() as conn:
            for start in range(0, len(texts), _KEYS_PER_QUERY):
                chunk = texts[start : start + _KEYS_PER_QUERY]
                marks = ", ".join("?" for _ in chunk)
                rows = conn.execute(
                    "SELECT journal_key FROM journal WHERE run_id = ? AND item = 'result'"
                    f" AND journal_key IS NOT NULL AND journal_key IN ({marks})",
                    (run_id, *chunk),
                ).fetchall()
                found.update(by_text[row[0]] for row in rows)
        return found

    def records_after(self, run_id: str, after_seq: int, kinds: Sequence[str]) -> list[Record]:
        """The records of ``kinds`` after ``after_seq``; a driver asks this between waves.

        Usually nothing came: when no other connection committed (SQLite's
        ``data_version``, asked on a kept cursor only when the WAL index's header shows a
        commit other than this store's own since it was last asked: ``CommitWatch``) and
        this one wrote no record but feeds (``_records_written``: one count, not one per
        kind) since a query found none past ``after_seq``, the answer is known without
        reading the journal.
        """
        watch = (run_id, kinds if type(kinds) is tuple else tuple(kinds))
        with self._lock:
            header = self._commits.header()
            data_version = self._commits.version(header)  # nobody committed since it was asked
            if data_version is None:
                try:
                    (data_version,) = self._pragmas.execute("PRAGMA data_version").fetchone()
                except sqlite3.Error as exc:
                    raise self._storage_error(exc) from exc
                self._commits.asked(header, data_version)
            version = (data_version, self._records_written)
            known = self._nothing_after.get(watch)
            if known is not None and known[0] == version and after_seq >= known[1]:
                return []  # (never a watch of feeds: those raise below and are not kept)
            if "feed" in kinds:
                raise ValueError("records_after does not look up feed records (see Store)")
            marks = ", ".join("?" for _ in kinds)
            with self._read() as conn:
                rows = conn.execute(
                    "SELECT seq, record_kind, payload FROM journal INDEXED BY journal_records"
                    " WHERE run_id = ? AND seq > ?"
                    f" AND item = 'record' AND record_kind <> 'feed'"
                    f" AND record_kind IN ({marks}) ORDER BY seq",
                    (run_id, after_seq, *kinds),
                ).fetchall()
                reader = NodeFetcher(conn)
                found = [Record(seq, kind, reader.decode(payload)) for seq, kind, payload in rows]
            last = max([after_seq, *(record.seq for record in found)])
            if len(self._nothing_after) >= sql.WATCH_LIMIT:
                self._nothing_after.clear()  # runs no longer driven here: nothing is held per run
            self._nothing_after[watch] = (version, last)
            return found

    def read_checkpoint(self, run_id: str, seq: int) -> bytes:
        with self._lock, self._read() as conn:
            return sql.read_checkpoint(conn, SQLITE, run_id, seq, NodeFetcher(conn))

    def read_checkpoints(self, run_id: str, first: int, last: int) -> dict[int, bytes]:
        with self._lock, self._read() as conn:
            return sql.read_checkpoints(conn, SQLITE, run_id, first, last, NodeFetcher(conn))

    def latest_checkpoint(self, run_id: str) -> CheckpointMeta | None:
        with self._lock, self._read() as conn:
            return sql.latest_checkpoint(conn, SQLITE, run_id)

    def checkpoint_beside(self, run_id: str, seq: int, *, later: bool) -> CheckpointMeta | None:
        with self._lock, self._read() as conn:
            return sql.checkpoint_beside(conn, SQLITE, run_id, seq, later=later)

    def stored_bytes(self, run_id: str | None = None) -> int:
        where, params = ("", ()) if run_id is None else (" WHERE run_id = ?", (run_id,))
        with self._lock, self._read() as conn:
            total = 0
            for table, column in _PAYLOAD_COLUMNS:
                row = conn.execute(
                    f"SELECT COALESCE(SUM(LENGTH(CAST({column} AS BLOB))), 0) FROM {table}{where}",
                    params,
                ).fetchone()
                total += int(row[0])
        return total

    def close(self) -> None:
        with self._lock:
            if self._checkpointer is not None:
                self._checkpointer.close()
            self._commits.close()  # before the connection: SQLite's descriptor stays open
            self._conn.close()

    # --- internals ---

    def _insert_nodes(self, conn: sqlite3.Connection, run_id: str, nodes: dict[str, bytes]) -> None:
        if nodes:
            conn.executemany(
                "INSERT OR IGNORE INTO nodes (hash, data, run_id) VALUES (?, ?, ?)",
                [(digest, data, run_id) for digest, data in nodes.items()],
            )

    def _duplicate(self, run_id: str, op: Row, exc: sqlite3.Error) -> PlaitError:
        item, key = op[0], op[1]
        if item in ("intent", "result") and "UNIQUE" in str(exc):
            return sql.duplicate_key(self.path, run_id, item, key)
        return self._storage_error(exc)

    def _storage_error(self, exc: sqlite3.Error) -> PlaitError:
        code = int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN) and self.path != ":memory:":
            reason = "it was opened read-only" if self.read_only else read_only_reason(self.path)
            if reason is not None:
                return PlaitError("E020", read_only_message(self.path, reason))
        return PlaitError("E020", f"storage error on {self.path}: {exc}")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed, or rolled back and re-raised."""
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._storage_error(exc) from exc
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, sqlite3.Error):
                raise self._storage_error(exc) from exc
            raise
        if self._checkpointer is not None:
            self._checkpointer.committed()

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction, so a multi-statement read sees one snapshot."""
        conn = self._conn
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            raise self._storage_error(exc) from exc

    def _rollback(self) -> None:
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite already rolled back (e.g. after SQLITE_FULL); nothing is committed


_CONFORMS: type[WorkStore] = SqliteStore  # mypy checks the whole contract here
_SCHEDULES: type[ScheduleStore] = SqliteStore
_TOKENS: type[TokenStore] = SqliteStore
_RANGES: type[RangeReads] = SqliteStore
