"""What only the PostgreSQL back end promises: its URLs, its errors, its migrations, its workers.

The Store contract itself is the conformance suite (test_store_conformance.py), which runs
against PostgreSQL too; these tests need the server from tests/conftest.py.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from plait import Runtime, Workflow
from plait.core.canonical import dumpb
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import (
    CheckpointWrite,
    IntentWrite,
    LeaseOwner,
    ManifestWrite,
    Record,
    RecordWrite,
    ResultWrite,
    RunInfo,
    SqliteStore,
    StatusWrite,
    Store,
    Write,
    open_store,
)
from plait.store.base import POLLED_KINDS
from plait.store.lease import LeaseClaim
from plait.store.pg_prepared import PreparedStatements, Statement

try:
    import psycopg
    from psycopg import pq

    from plait.store import claims
    from plait.store.postgres import PostgresStore
    from plait.store.postgres_schema import SCHEMA_VERSION
    from support.pg_locks import wait_until_blocked
except ImportError as missing:  # the optional extra plait[postgres] is not installed
    if os.environ.get("PLAIT_REQUIRE_POSTGRES") == "1":
        raise
    pytest.skip(f"PostgreSQL tests need psycopg: {missing}", allow_module_level=True)

WORKER_A = LeaseOwner("host-a", 1, 1)
WORKER_B = LeaseOwner("host-b", 2, 2)
TTL = 30_000


def error_of(action: Callable[[], object]) -> PlaitError:
    with pytest.raises(PlaitError) as caught:
        action()
    return caught.value


def queued(store: Store, run_id: str, created_ms: int = 1, status: str = "queued") -> None:
    store.create_run(RunInfo(run_id, "wf", status, "alice", None, created_ms, created_ms), {"m": 1})


@pytest.fixture
def pg(postgres_url: str) -> Iterator[PostgresStore]:
    store = PostgresStore(postgres_url)
    yield store
    store.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- opening ---


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://127.0.0.1/db?no_such_option=1",
        "postgresql://127.0.0.1:notaport/db",
        "postgresql://[::1/db",
    ],
)
def test_a_bad_connection_string_is_e020_at_open(url: str) -> None:
    error = error_of(lambda: PostgresStore(url))
    assert error.code == "E020"
    assert str(error).startswith("PLAIT-E020 storage error on postgresql://")


def test_an_unreachable_port_is_e020_at_once_and_never_shows_the_password() -> None:
    port = free_port()
    url = f"postgresql://plait:Sekr3t-pw@127.0.0.1:{port}/plait"
    started = time.monotonic()
    error = error_of(lambda: open_store(url))
    assert time.monotonic() - started < 5
    assert error.code == "E020"
    message = str(error)
    assert message.startswith(f"PLAIT-E020 storage error on postgresql://127.0.0.1:{port}/plait: ")
    assert "cannot connect" in message and "Sekr3t" not in message


def test_a_server_that_does_not_answer_gives_up_after_connect_timeout() -> None:
    started = time.monotonic()
    error = error_of(lambda: PostgresStore("postgresql://10.255.255.1/plait?connect_timeout=1"))
    assert error.code == "E020"
    assert time.monotonic() - started < 4


def with_login(url: str, user: str, password: str) -> str:
    parts = urlsplit(url)
    netloc = f"{user}:{password}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def test_a_refused_login_is_e020_without_the_password(postgres_url: str) -> None:
    error = error_of(lambda: PostgresStore(with_login(postgres_url, "no_such_role", "Hunter22")))
    assert error.code == "E020"
    assert "no_such_role" in str(error) and "Hunter22" not in str(error)


def test_repr_and_messages_name_host_and_database_only(postgres_url: str) -> None:
    parts = urlsplit(postgres_url)
    user = parts.username or "postgres"
    store = PostgresStore(with_login(postgres_url, user, "whatever-pw"))  # trust: ignored
    try:
        port = f":{parts.port}" if parts.port else ""
        assert store.where == f"postgresql://{parts.hostname}{port}{parts.path}"
        assert "whatever-pw" not in repr(store) and f"{user}@" not in repr(store)
    finally:
        store.close()


def test_open_store_routes_both_schemes(postgres_url: str) -> None:
    for url in (postgres_url, "postgres://" + postgres_url.split("://", 1)[1]):
        store = open_store(url, durability="strict")
        assert isinstance(store, PostgresStore) and store.durability == "strict"
        store.close()


def test_an_unknown_durability_or_pool_size_is_e020(postgres_url: str) -> None:
    assert error_of(lambda: PostgresStore(postgres_url, durability="paranoid")).code == "E020"
    assert error_of(lambda: PostgresStore(postgres_url, pool_size=0)).code == "E020"


@pytest.mark.parametrize("durability", ["normal", "strict"])
def test_commits_are_synchronous_in_every_durability(
    postgres: Any, postgres_url: str, durability: str
) -> None:
    """Even when the URL (or the role, or the server) turns synchronous_commit off."""
    url = postgres.with_options(postgres_url, "synchronous_commit=off")
    store = PostgresStore(url, durability=durability)
    try:
        with store._connection() as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
    finally:
        store.close()


def test_a_closed_store_is_e020(pg: PostgresStore) -> None:
    pg.close()
    assert error_of(lambda: pg.list_runs()).code == "E020"


# --- schema ---


def test_an_empty_database_is_migrated(postgres: Any) -> None:
    with postgres.new_database() as url:
        PostgresStore(url).close()
        again = PostgresStore(url)  # a migrated database opens unchanged
        try:
            queued(again, "r1")
            assert again.get_run("r1").status == "queued"
        finally:
            again.close()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT version FROM schema_version").fetchall() == [
                (SCHEMA_VERSION,)
            ]
            tables = {
                row[0]
                for row in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                ).fetchall()
            }
        assert tables == {
            "schema_version", "runs", "manifests", "journal", "nodes", "leases",
            "schedules", "schedule_slots", "tokens",
            "conversation_runs", "row_forms",
        }  # fmt: skip


def test_a_schema_newer_than_the_code_is_e020_worded_like_sqlite(postgres_url: str) -> None:
    PostgresStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 3,))
    error = error_of(lambda: PostgresStore(postgres_url))
    assert error.code == "E020"
    assert str(error).endswith(
        f": database schema version {SCHEMA_VERSION + 3} is newer than this plait"
        f" ({SCHEMA_VERSION}); upgrade plait"
    )


def test_processes_opening_an_empty_database_at_once_migrate_it_once(postgres_url: str) -> None:
    barrier = threading.Barrier(6)
    failures: list[BaseException] = []

    def open_one() -> None:
        barrier.wait()
        try:
            PostgresStore(postgres_url, pool_size=1).close()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]


# --- the journal commit: one statement ---

TRICKY = 'quote " backslash \\ tab \t \\u0000 žluťoučký 🐎 {"x": [1]}'
VALUE = {"t": TRICKY, "nul": "\u0000", "float": 1.0, "big": 2**70}  # JSON values only


def commit_batches(run_id: str, token: int | None) -> list[list[Write]]:
    """Every kind of write, interleaved, with text that array literals must quote or escape."""

    def k(node: str) -> JournalKey:
        return JournalKey(run_id, "", node + TRICKY, 1, 0, "tool")

    big = {"doc": [f"{i:04}" * 40 for i in range(400)], "v": VALUE}  # cut into nodes
    return [
        [RecordWrite("clock", {"ms": 1}), IntentWrite(k("a"), TRICKY, VALUE, 1, 2, TRICKY)],
        [
            StatusWrite("parked", VALUE, 5),
            ResultWrite(k("a"), {"Completed": {"result": big, "usage": {}}}, 7, 2**40),
            ManifestWrite({"budgets": {"max_supersteps": 2}, "v": VALUE}),
            RecordWrite(TRICKY, VALUE),
            StatusWrite("running", None, 6),  # the last status write is the one that counts
            CheckpointWrite(1, dumpb({"scheduler": big, "decisions": {"superstep": 1}})),
            ManifestWrite({"budgets": {"max_supersteps": 3}}),
            IntentWrite(k("b"), "tool:t", big, 2, 2**41, None),
        ],
        [StatusWrite("completed", {"Completed": {}}, 9)],  # takes no seq
        [],
        [
            RecordWrite("inbox", {"message": "hi"}),
            RecordWrite("cancel", VALUE),
            RecordWrite("NULL", {"a,b": "{c}", "": ""}),  # a text an array literal must quote
        ],
        [CheckpointWrite(2, dumpb({"scheduler": {"small": 1}, "decisions": {"superstep": 2}}))],
    ]


def test_commits_store_exactly_what_sqlite_stores(pg: PostgresStore, tmp_path: Path) -> None:
    sqlite = SqliteStore(tmp_path / "plait.db")
    try:
        stores: list[Store] = [sqlite, pg]
        for store in stores:
            queued(store, "r1", status="running")
            token = store.acquire_lease("r1", WORKER_A, 0, TTL, lambda o: True)
            for number, batch in enumerate(commit_batches("r1", token)):
                store.commit("r1", token if number % 2 else None, batch)

        def seen(store: Store) -> list[object]:
            journal = store.load_journal("r1")
            checkpoints = [store.read_checkpoint("r1", c.seq) for c in journal.checkpoints]
            return [
                journal,
                checkpoints,
                store.manifests("r1"),
                store.get_run("r1"),
                store.latest_checkpoint("r1"),
                store.records_after("r1", 0, ("cancel", "inbox", TRICKY)),
            ]

        assert seen(pg) == seen(sqlite)
        journal = pg.load_journal("r1")
        assert [item.seq for item in journal.items()] == [1, 2, 3, 5, 6, 8, 9, 10, 11, 12]
        assert pg.get_run("r1").status == "completed"
    finally:
        sqlite.close()


def node_count(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM nodes").fetchone()
    assert row is not None
    return int(row[0])


def test_a_stale_token_writes_nothing_at_all_and_names_the_holder(
    pg: PostgresStore, postgres_url: str
) -> None:
    queued(pg, "r1", status="running")
    stale = pg.acquire_lease("r1", WORKER_A, 0, TTL, lambda o: True)
    fresh = pg.acquire_lease("r1", WORKER_B, TTL, TTL, lambda o: True)  # A's lease expired
    before = (pg.get_run("r1"), pg.manifests("r1"), node_count(postgres_url))
    for batch in commit_batches("r1", stale):
        with pytest.raises(PlaitError) as caught:
            pg.commit("r1", stale, batch)
        assert str(caught.value) == (
            f"PLAIT-E021 lease lost on run 'r1': token {stale} is not current"
            f" (token {fresh} is held by pid 2 on 'host-b')"
        )
    assert (pg.get_run("r1"), pg.manifests("r1"), node_count(postgres_url)) == before
    assert pg.load_journal("r1").items() == []
    pg.commit("r1", fresh, [RecordWrite("clock", {"ms": 1})])
    assert [r.seq for r in pg.load_journal("r1").records] == [1]  # the refused used no seq
    pg.release_lease("r1", fresh)
    error = error_of(lambda: pg.commit("r1", fresh, []))
    assert str(error).endswith(f"token {fresh} is not current (the lease is not held)")
    assert str(error_of(lambda: pg.commit("nope", fresh, []))) == "PLAIT-E017 unknown run id 'nope'"


def test_a_commit_is_one_prepared_statement_without_an_explicit_transaction(
    pg: PostgresStore, tmp_path: Path
) -> None:
    """What a commit sends, read from libpq's trace of the pool's one connection: one
    execution, in one round trip, of a statement the connection prepared (in a round trip
    of its own, the first time it used it); no BEGIN, and nothing through psycopg's
    cursor (which sends a statement unprepared, its text parsed, its first five times)."""
    queued(pg, "r1", status="running")
    token = pg.acquire_lease("r1", WORKER_A, 0, TTL, lambda o: True)
    sent: list[list[str]] = []
    with pg._connection() as conn:
        traced = conn.pgconn
    for batch in commit_batches("r1", token):
        trace = tmp_path / f"trace{len(sent)}.txt"
        with trace.open("wb") as out:
            traced.trace(out.fileno())
            traced.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
            pg.commit("r1", token, batch)
            traced.untrace()
        lines = trace.read_text("utf-8", "replace").splitlines()
        sent.append([line.split("\t")[2] for line in lines if line.startswith("F\t")])
    execution = ["Bind", "Describe", "Execute", "Sync"]  # libpq's PQsendQueryPrepared
    for messages in sent:
        assert messages in (execution, ["Parse", "Sync", *execution])
    assert sent[1][0] == "Parse" and sent[-1][0] == "Bind"  # a new statement, one used before


def backend_pid(pg: PostgresStore) -> int:
    """The server process of the connection the store's next call will use."""
    with pg._connection() as conn:
        return conn.info.backend_pid


def terminate(postgres_url: str, pid: int, *, wait: bool = False) -> None:
    """End the server process ``pid``; ``wait``: until it is gone (bounded)."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        alive = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"
        for _ in range(1000 if wait else 0):
            if admin.execute(alive, (pid,)).fetchone() == (0,):
                return
            time.sleep(0.01)
        assert not wait, f"backend {pid} did not exit"


def test_a_connection_the_server_ended_between_commits_is_replaced_and_prepares_again(
    pg: PostgresStore, postgres_url: str
) -> None:
    """Each connection prepares the commit statement for itself: the one replacing a
    connection the server ended has not prepared it yet, whatever the store ran before."""
    queued(pg, "r1", status="running")
    pg.commit("r1", None, [RecordWrite("clock", {"ms": 1})])  # prepared on this connection
    first = backend_pid(pg)
    terminate(postgres_url, first, wait=True)
    pg.commit("r1", None, [RecordWrite("clock", {"ms": 2})])
    assert backend_pid(pg) != first
    assert [r.body for r in pg.load_journal("r1").records] == [{"ms": 1}, {"ms": 2}]


def test_a_commit_whose_connection_the_server_ends_mid_statement_may_have_been_applied(
    pg: PostgresStore, postgres_url: str
) -> None:
    """The commit's backend is ended while its statement waits for the run row's lock:
    the commit is E020 "connection lost" saying it may or may not have been applied, and
    the store goes on with a new connection."""
    queued(pg, "r1", status="running")
    pg.commit("r1", None, [RecordWrite("clock", {"ms": 1})])
    pid = backend_pid(pg)
    failed: list[PlaitError] = []

    def commit() -> None:
        with pytest.raises(PlaitError) as caught:
            pg.commit("r1", None, [RecordWrite("clock", {"ms": 2})])
        failed.append(caught.value)

    with psycopg.connect(postgres_url) as holder:
        holder.execute("SELECT 1 FROM runs WHERE run_id = 'r1' FOR UPDATE")
        thread = threading.Thread(target=commit)
        thread.start()
        waiting = (
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'"
        )
        for _ in range(1000):  # bounded: until the commit waits for the lock
            if holder.execute(waiting, (pid,)).fetchone() == (1,):
                break
            time.sleep(0.01)
        terminate(postgres_url, pid)
        thread.join(10)
    [error] = failed
    assert error.code == "E020"
    assert "committing to the journal of run 'r1': connection lost (the commit may or may not" in (
        str(error)
    )
    pg.commit("r1", None, [RecordWrite("clock", {"ms": 3})])
    assert [r.body for r in pg.load_journal("r1").records] == [{"ms": 1}, {"ms": 3}]


def test_a_text_holding_a_nul_is_refused_as_psycopg_refuses_it_and_nothing_is_written(
    pg: PostgresStore,
) -> None:
    """libpq would cut a text parameter short at its NUL, and the server names it
    otherwise: the commit refuses it first, with psycopg's own words."""
    queued(pg, "r1", status="running")
    error = error_of(lambda: pg.commit("r1", None, [RecordWrite("a\x00b", {"ms": 1})]))
    assert str(error) == (
        f"PLAIT-E020 storage error on {pg.where}: committing to the journal of run 'r1':"
        " PostgreSQL text fields cannot contain NUL (0x00) bytes"
    )
    assert pg.load_journal("r1").items() == []


def test_taking_a_lease_while_a_commit_holds_the_run_waits_and_never_deadlocks(
    pg: PostgresStore, postgres_url: str
) -> None:
    """Both lock the run row first, then the lease row (the other order deadlocked)."""
    queued(pg, "r1", status="running")
    first = pg.acquire_lease("r1", WORKER_A, 0, TTL, lambda o: True)
    taken: list[object] = []
    with psycopg.connect(postgres_url) as commit:  # a commit, between its two locks
        commit.execute("UPDATE runs SET last_seq = last_seq WHERE run_id = 'r1'")
        thread = threading.Thread(
            target=lambda: taken.append(pg.acquire_lease("r1", WORKER_B, TTL, TTL, lambda o: True))
        )
        thread.start()
        time.sleep(0.3)  # the takeover now waits for the run row
        row = commit.execute("SELECT token FROM leases WHERE run_id = 'r1' FOR UPDATE").fetchone()
        assert row == (first,)
        commit.commit()
    thread.join()
    assert taken == [first + 1]


def test_gc_locks_a_childs_run_row_before_its_lease_row(
    pg: PostgresStore, postgres_url: str
) -> None:
    """gc takes locks in the order every other writer does, run row then lease row: while
    another transaction holds a doomed child's run row, gc has not touched the child's
    lease row yet, so a late ``release_lease`` (run row first) cannot deadlock with it."""
    pg.create_run(RunInfo("p", "wf", "completed", "a", None, 1, 1), {})
    claim = LeaseClaim(WORKER_A, 0, TTL, lambda o: True)
    pg.create_run(RunInfo("p~c", "wf", "completed", "a", "p", 1, 1), {}, lease=claim)
    pg.release_lease("p~c", 1)
    deleted: list[list[str]] = []
    with psycopg.connect(postgres_url) as holder:
        holder.execute("SELECT 1 FROM runs WHERE run_id = 'p~c' FOR UPDATE")
        collector = threading.Thread(target=lambda: deleted.append(pg.gc(10, 10)))
        collector.start()
        wait_until_blocked(postgres_url, collector)  # until gc waits for a lock
        row = holder.execute("SELECT token FROM leases WHERE run_id = 'p~c' FOR UPDATE NOWAIT")
        assert row.fetchone() == (1,)  # not locked, not deleted: gc waits for the run row
        holder.commit()
    collector.join()
    assert deleted == [["p", "p~c"]]


def test_every_lease_write_keeps_the_run_rows_copy_of_the_held_token(
    pg: PostgresStore, postgres_url: str
) -> None:
    """A commit checks its token on ``runs.lease_token`` alone: after every way a lease
    is taken or given up, the copy is the held lease's token (NULL when none is held),
    and a commit under the token it names passes while the previous one is refused."""

    def disagreeing() -> list[tuple[str, object, object]]:
        with psycopg.connect(postgres_url) as conn:
            return conn.execute(
                "SELECT r.run_id, r.lease_token, l.token FROM runs r"
                " LEFT JOIN leases l ON l.run_id = r.run_id"
                " WHERE r.lease_token IS DISTINCT FROM"
                " CASE WHEN l.host IS NOT NULL THEN l.token END"
            ).fetchall()

    def fenced(run_id: str, current: int | None, spent: int) -> None:
        assert disagreeing() == []
        assert error_of(lambda: pg.commit(run_id, spent, [RecordWrite("clock", {})])).code == (
            "E021"
        )
        if current is not None:
            pg.commit(run_id, current, [RecordWrite("clock", {})])

    claim = LeaseClaim(WORKER_A, 0, TTL, lambda o: True)
    assert pg.create_run(RunInfo("made", "wf", "running", "a", None, 1, 1), {}, lease=claim) == 1
    fenced("made", 1, 2)
    pg.create_run(RunInfo("turn", "wf", "running", "a", None, 1, 1), {}, "chat", lease=claim)
    fenced("turn", 1, 2)
    queued(pg, "r1", status="running")
    token = pg.acquire_lease("r1", WORKER_A, 0, TTL, lambda o: True)
    fenced("r1", token, token + 1)
    taken = pg.acquire_lease("r1", WORKER_B, TTL, TTL, lambda o: True)  # expired: taken over
    fenced("r1", taken, token)
    pg.release_lease("r1", taken)
    fenced("r1", None, taken)
    queued(pg, "q1")
    assert ("q1", 1) in pg.claim_work(WORKER_A, 0, TTL, limit=9)  # r1 too: released
    fenced("q1", 1, 2)
    queued(pg, "q2")
    assert pg.claim_leases(WORKER_B, 0, TTL, limit=1) == [("q2", 1)]
    fenced("q2", 1, 2)
    pg.commit("q2", 1, [RecordWrite("clock", {})], release=True)
    fenced("q2", None, 1)
    orphan = pg.acquire_lease("r1", WORKER_A, 2 * TTL, TTL, lambda o: True)
    gone = LeaseOwner(WORKER_A.host, WORKER_A.pid + 1, 1)  # another process of this host
    claimed_all = pg.claim_work(gone, 2 * TTL, TTL, limit=9, owner_alive=lambda o: o != WORKER_A)
    assert ("r1", orphan + 1) in claimed_all  # its holder's process is gone: taken at once
    fenced("r1", orphan + 1, orphan)


def test_commits_racing_a_takeover_never_land_after_it(postgres_url: str) -> None:
    setup = PostgresStore(postgres_url)
    queued(setup, "r1", status="running")
    token = setup.acquire_lease("r1", WORKER_A, 0, TTL, lambda o: True)
    setup.close()
    ended: list[PlaitError] = []

    def drive() -> None:  # the old holder commits until it is fenced out
        store = PostgresStore(postgres_url, pool_size=1)
        try:
            for i in range(100_000):
                store.commit("r1", token, [RecordWrite("a", {"i": i})])
        except PlaitError as exc:
            ended.append(exc)
        finally:
            store.close()

    thread = threading.Thread(target=drive)
    thread.start()
    time.sleep(0.2)
    store = PostgresStore(postgres_url)
    try:
        fresh = store.acquire_lease("r1", WORKER_B, TTL, TTL, lambda o: True)
        store.commit("r1", fresh, [RecordWrite("b", {})])
        thread.join()
        assert [error.code for error in ended] == ["E021"]
        records = store.load_journal("r1").records
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        assert [r.kind for r in records][-1] == "b" and len(records) > 1
    finally:
        store.close()


# --- concurrency ---


def test_concurrent_commits_to_one_run_take_consecutive_seqs(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, pool_size=4)
    try:
        queued(store, "r1", status="running")

        def write(n: int) -> None:
            for i in range(25):
                store.commit("r1", None, [RecordWrite("clock", {"t": n, "i": i})])

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        records = store.load_journal("r1").records
        assert [r.seq for r in records] == list(range(1, 101))
        for n in range(4):  # each writer's records in its own order
            assert [r.body["i"] for r in records if r.body["t"] == n] == list(range(25))
    finally:
        store.close()


def test_the_poll_after_a_commit_is_answered_by_that_commit(
    pg: PostgresStore, postgres_url: str
) -> None:
    """A driver polls for cancels after each wave's commit. The commit read the run's last
    cancel in its own statement, so the poll costs no round trip: it answers as of that
    commit, and what another connection journals after it is found after the next one."""
    queued(pg, "r1", status="running")
    kinds = ("cancel", "inbox")
    feed = RecordWrite("feed", {"events": []})
    assert pg.records_after("r1", 0, kinds) == []  # the driver's first poll reads
    other = PostgresStore(postgres_url)
    try:
        other.commit("r1", None, [RecordWrite("cancel", {"by": "bob", "reason": "a"})])
        pg.commit("r1", None, [feed])
        first = Record(1, "cancel", {"by": "bob", "reason": "a"})
        assert pg.records_after("r1", 0, kinds) == [first]
        pg.commit("r1", None, [feed])
        other.commit("r1", None, [RecordWrite("cancel", {"by": "bob", "reason": "b"})])
        assert pg.records_after("r1", 1, kinds) == []  # the journal as of the commit
        assert pg.records_after("r1", 1, kinds) == [
            Record(4, "cancel", {"by": "bob", "reason": "b"})
        ]
        pg.commit("r1", None, [feed])
        other.commit("r1", None, [RecordWrite("inbox", {"message": "hi"})])
        pg.commit("r1", None, [feed])  # after the inbox: its poll finds it
        assert pg.records_after("r1", 4, kinds) == [Record(6, "inbox", {"message": "hi"})]
        pg.commit("r1", None, [RecordWrite("cancel", {"by": "carol", "reason": "c"})])
        found = pg.records_after("r1", 6, kinds)  # its own cancel: its commit's answer has it
        assert found == [Record(8, "cancel", {"by": "carol", "reason": "c"})]
    finally:
        other.close()


def test_a_connection_plans_each_commit_statement_once_not_every_commit(
    pg: PostgresStore,
) -> None:
    """psycopg prepares a statement run often on a connection; the server then plans it
    for the values at hand five times and keeps its generic plan unless those plans cost
    less. A commit's plan costs the server more than running it, so the statements are
    written for their generic plans to win: every commit after those first ones runs on
    a generic plan, whatever the batch, and so does the last commit of a drive, which
    gives the lease up."""
    queued(pg, "r1", status="running")
    token = pg.acquire_lease("r1", WORKER_A, 0, TTL, lambda o: True)
    for number in range(20):  # batches of one row and of three, with and without a token
        batch: list[Write] = [RecordWrite("feed", {"n": number})]
        if number % 2:
            batch += [RecordWrite("clock", {"ms": number}), StatusWrite("running", None, 2)]
        pg.commit("r1", token if number % 3 else None, batch)
    for number in range(20):  # drives' last commits
        run_id = f"released-{number}"
        queued(pg, run_id, status="running")
        token = pg.acquire_lease(run_id, WORKER_A, 0, TTL, lambda o: True)
        pg.commit(run_id, token, [StatusWrite("completed", None, 3)], release=True)
    with pg._connection() as conn:  # the one connection every call above used
        plans = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE 'WITH reserved AS%'"
        ).fetchall()
    assert len(plans) == 2  # a wave's commit, a drive's last commit
    assert all(custom <= 5 and generic >= 5 for generic, custom in plans), plans


def test_looking_for_orphans_does_not_hide_a_live_run_from_other_claimants(
    pg: PostgresStore, postgres_url: str
) -> None:
    """A worker checks this host's running runs for a dead holder at every claim. The
    runs it finds alive must not be locked meanwhile: another claimant (here one whose
    clock finds the lease lapsed) would SKIP LOCKED past them and find nothing to do."""
    queued(pg, "r1", status="running")
    pg.acquire_lease("r1", WORKER_A, 0, TTL, lambda _: True)
    other = PostgresStore(postgres_url)
    seen: list[list[tuple[str, int]]] = []

    def alive(holder: LeaseOwner) -> bool:  # asked while A's claim transaction is open
        seen.append(other.claim_work(WORKER_B, TTL + 1, TTL, limit=1))
        return True

    try:
        assert pg.claim_work(WORKER_A, 1, TTL, limit=1, owner_alive=alive) == []
    finally:
        other.close()
    assert seen == [[("r1", 2)]]


def test_claim_takes_free_and_expired_leases_oldest_first(pg: PostgresStore) -> None:
    queued(pg, "new", created_ms=3)
    queued(pg, "old", created_ms=1)
    queued(pg, "parked", created_ms=0, status="parked")
    queued(pg, "held", created_ms=2)
    held = pg.acquire_lease("held", WORKER_B, 0, TTL, lambda owner: True)
    assert pg.claim_leases(WORKER_A, 10, TTL, limit=5) == [("old", 1), ("new", 1)]
    assert pg.claim_runnable(WORKER_A, 10, TTL, limit=5) == []  # all leased now
    assert pg.claim_runnable(WORKER_A, TTL, TTL, statuses=("parked",)) == ["parked"]
    # at TTL the first claims and "held" expire; the claimant gets newer tokens
    assert pg.claim_leases(WORKER_B, TTL + 10, TTL, limit=5) == [
        ("old", 2),
        ("held", held + 1),
        ("new", 2),
    ]


def test_a_claimed_lease_fences_writes_like_an_acquired_one(pg: PostgresStore) -> None:
    queued(pg, "r1")
    [(run_id, token)] = pg.claim_leases(WORKER_A, 0, TTL)
    pg.commit(run_id, token, [StatusWrite("running", None, 1), RecordWrite("clock", {"ms": 1})])
    assert error_of(lambda: pg.acquire_lease("r1", WORKER_B, 1, TTL, lambda o: True)).code == "E021"
    pg.release_lease(run_id, token)
    assert error_of(lambda: pg.commit(run_id, token, [RecordWrite("c", {})])).code == "E021"
    assert pg.claim_runnable(WORKER_B, 2, TTL, statuses=("running",)) == ["r1"]


def test_claim_skips_a_run_another_transaction_holds_instead_of_waiting(
    pg: PostgresStore, postgres_url: str
) -> None:
    queued(pg, "busy", created_ms=1)
    queued(pg, "idle", created_ms=2)
    with psycopg.connect(postgres_url) as other:  # a transaction holding the run row
        other.execute("SELECT 1 FROM runs WHERE run_id = 'busy' FOR UPDATE")
        started = time.monotonic()
        assert pg.claim_runnable(WORKER_A, 0, TTL, limit=2) == ["idle"]
        assert pg.claim_runnable(WORKER_A, 0, TTL) == []
        assert time.monotonic() - started < 2
        other.rollback()
    assert pg.claim_runnable(WORKER_A, 0, TTL) == ["busy"]


def test_two_workers_claiming_at_once_never_claim_a_run_twice(postgres_url: str) -> None:
    setup = PostgresStore(postgres_url)
    for i in range(60):
        queued(setup, f"r{i:02}", created_ms=i)
    setup.close()
    barrier = threading.Barrier(2)
    claimed: dict[str, list[str]] = {"a": [], "b": []}
    failures: list[BaseException] = []

    def work(name: str, owner: LeaseOwner, limit: int) -> None:
        store = PostgresStore(postgres_url, pool_size=1)  # its own connections, like a process
        try:
            barrier.wait()
            while True:
                got = store.claim_runnable(owner, 0, TTL, limit=limit)
                if not got:
                    return
                claimed[name].extend(got)
        except BaseException as exc:
            failures.append(exc)
        finally:
            store.close()

    threads = [
        threading.Thread(target=work, args=("a", WORKER_A, 1)),
        threading.Thread(target=work, args=("b", WORKER_B, 3)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    both = claimed["a"] + claimed["b"]
    assert sorted(both) == [f"r{i:02}" for i in range(60)]  # every run, none twice
    assert len(set(claimed["a"]) & set(claimed["b"])) == 0


# --- round trips: what a worker's run and a started run cost the server ---


def count_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the store sends from now on (its text), and every transaction."""
    sent: list[str] = []
    execute, transaction = psycopg.Cursor.execute, psycopg.Connection.transaction

    def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    def counted_transaction(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append("BEGIN")
        return transaction(self, *args, **kwargs)

    def counted_run(self: Any, conn: Any, statement: Statement, params: Any) -> Any:
        sent.append(statement.name.decode())  # a commit, sent through libpq (pg_prepared)
        return run(self, conn, statement, params)

    run = PreparedStatements.run
    monkeypatch.setattr(psycopg.Cursor, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Connection, "transaction", counted_transaction)
    monkeypatch.setattr(PreparedStatements, "run", counted_run)
    return sent


def test_claim_runnable_is_planned_as_claim_work_is(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its choice of runs runs under ``claims.PG_CLAIM_PLAN`` in the claim's own
    transaction (test_postgres_claim_plan.py: what those settings do on a queue the server
    never analyzed), and the settings end with it."""
    queued(pg, "old", created_ms=1)
    queued(pg, "new", created_ms=2)
    sent = count_statements(monkeypatch)
    assert pg.claim_runnable(WORKER_A, 0, TTL, limit=1) == ["old"]
    assert sent[:3] == ["BEGIN", claims.PG_CLAIM_PLAN, claims.PG_CLAIMABLE]
    with pg._connection() as conn:
        assert conn.execute("SHOW enable_sort").fetchone() == ("on",)


def test_claiming_runs_and_their_leases_is_one_statement_after_its_plan_settings(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued(pg, "old", created_ms=1)
    queued(pg, "new", created_ms=2)
    queued(pg, "held", created_ms=0)
    pg.acquire_lease("held", WORKER_B, TTL, TTL, lambda o: True)  # live at TTL
    queued(pg, "lapsed", created_ms=3, status="running")
    lapsed = pg.acquire_lease("lapsed", WORKER_B, 0, TTL, lambda o: True)
    sent = count_statements(monkeypatch)
    assert pg.claim_work(WORKER_A, TTL, TTL, limit=5) == [
        ("old", 1),
        ("new", 1),
        ("lapsed", lapsed + 1),
    ]
    assert sent == [claims.PG_CLAIM_PLAN, claims.PG_CLAIM_AND_LEASE]  # one round trip
    assert [pg.get_run(r).status for r in ("old", "new", "lapsed")] == ["running"] * 3
    assert error_of(lambda: pg.acquire_lease("old", WORKER_B, TTL, TTL, lambda o: True)).code == (
        "E021"
    )


def test_a_claim_judges_a_lease_written_meanwhile_as_it_is_once_written(
    pg: PostgresStore, postgres_url: str
) -> None:
    """A lease row another transaction is writing when the claim reaches it is waited
    for, and the rule applied to it as committed: a live lease is not taken over."""
    queued(pg, "r1")
    with psycopg.connect(postgres_url) as other:
        other.execute(
            "INSERT INTO leases (run_id, host, pid, started_ms, token, expires_ms)"
            " VALUES ('r1', 'host-b', 2, 2, 7, %s)",
            (10 * TTL,),
        )
        timer = threading.Timer(0.2, other.commit)
        timer.start()
        try:
            assert pg.claim_work(WORKER_A, 0, TTL, limit=1) == []
        finally:
            timer.join()
    assert pg.claim_work(WORKER_A, 10 * TTL, TTL, limit=1) == [("r1", 8)]


def test_creating_a_leased_run_is_one_statement(
    pg: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    claim = LeaseClaim(WORKER_A, 0, TTL, lambda o: True)
    info = RunInfo("r1", "wf", "running", "alice", None, 1, 1)
    sent = count_statements(monkeypatch)
    assert pg.create_run(info, {"workflow": {"big": "x" * 200}, "input": 1}, lease=claim) == 1
    assert len(sent) == 1
    assert pg.get_run("r1") == info
    assert pg.manifests("r1") == [{"workflow": {"big": "x" * 200}, "input": 1}]
    assert error_of(lambda: pg.create_run(info, {}, lease=claim)).code == "E016"
    assert error_of(lambda: pg.acquire_lease("r1", WORKER_B, 1, TTL, lambda o: True)).code == (
        "E021"
    )

    # A lease row left under a new run's id (nothing plait does leaves one) is judged by
    # the lease rule, in a transaction of its own, as before: taken, or PLAIT-E021.
    with psycopg.connect(postgres_url, autocommit=True) as other:
        other.execute(
            "INSERT INTO leases (run_id, host, pid, started_ms, token, expires_ms)"
            " VALUES ('r8', NULL, NULL, NULL, 4, 0), ('r9', 'host-b', 2, 2, 4, %s)",
            (10 * TTL,),
        )
    assert pg.create_run(RunInfo("r8", "wf", "running", "a", None, 1, 1), {}, lease=claim) == 5
    new = RunInfo("r9", "wf", "running", "a", None, 1, 1)
    assert error_of(lambda: pg.create_run(new, {}, lease=claim)).code == "E021"
    assert error_of(lambda: pg.get_run("r9")).code == "E017"  # nothing was written


def test_loading_a_journal_is_one_statement_even_when_it_is_empty(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued(pg, "r1")
    sent = count_statements(monkeypatch)
    assert pg.load_journal("r1").items() == []
    assert len(sent) == 1
    pg.commit("r1", None, [RecordWrite("feed", {"events": []})])
    sent.clear()
    assert [item.seq for item in pg.load_journal("r1").items()] == [1]
    assert pg.load_journal("r1", after_seq=1).items() == []
    assert len(sent) == 2
    assert error_of(lambda: pg.load_journal("nope")).code == "E017"


def test_a_claimed_runs_manifests_and_journal_are_one_statement(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued(pg, "r1")
    sent = count_statements(monkeypatch)
    assert pg.claimed_run("r1")[0] == [{"m": 1}]
    pg.commit("r1", None, [RecordWrite("feed", {"events": []})])
    assert [item.seq for item in pg.claimed_run("r1")[1].items()] == [1]
    assert len(sent) == 3  # two reads and the commit between them


def test_a_drives_first_poll_is_answered_by_its_first_commit(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued(pg, "r1", status="running")
    pg.commit("r1", None, [RecordWrite("feed", {"events": []})])
    sent = count_statements(monkeypatch)
    assert pg.records_after("r1", 0, POLLED_KINDS) == []
    assert sent == []


def test_records_the_driver_does_not_poll_for_cost_its_poll_no_statement(
    pg: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit answers the poll from the run's ``polled_seq``, which only records of
    the polled kinds move: an answer, a clock or a feed journaled by anyone leaves the
    driver's poll without a round trip; an inbox message journaled by another store
    between two waves is found after the next one."""
    queued(pg, "r1", status="running")
    other = PostgresStore(postgres_url)
    try:
        other.commit("r1", None, [RecordWrite("answer", {"ask_id": "a1", "by": "bob"})])
        pg.commit("r1", None, [RecordWrite("feed", {"events": []}), RecordWrite("clock", {})])
        sent = count_statements(monkeypatch)
        assert pg.records_after("r1", 0, POLLED_KINDS) == []
        assert sent == []
        other.commit("r1", None, [RecordWrite("inbox", {"message": "hi"})])
        pg.commit("r1", None, [RecordWrite("feed", {"events": []})])
        assert pg.records_after("r1", 3, POLLED_KINDS) == [Record(4, "inbox", {"message": "hi"})]
        assert sent[:2] == ["plait_commit_000"] * 2 and len(sent) == 3  # two commits, a read
    finally:
        other.close()


def test_a_cancel_sent_through_another_store_mid_run_is_seen_by_the_driver(
    postgres_url: str,
) -> None:
    """The driver's poll after each wave trusts its commit's ``polled_seq``: a cancel
    another runtime (its own store and connections) journals while a tool runs moves it,
    and the run stops at the next wave."""
    steps: list[int] = []

    def step(n: int = 0) -> dict[str, Any]:
        steps.append(n)
        if n == 2:
            with Runtime(postgres_url, principal="ops") as elsewhere:
                elsewhere.cancel("r1", reason="stop", by="ops")
        return {"n": n + 1}

    loop = (
        Workflow.new("loop")
        .node("step", tool=step)
        .edge("step", "step", when="n < 10", max_cycles=20)
    )
    with Runtime(postgres_url, principal="p") as rt:
        assert rt.run_sync(loop, {"n": 0}, run_id="r1").status == "canceled"
    assert steps[:3] == [0, 1, 2] and len(steps) < 10


def test_manifests_of_one_workflow_read_their_shared_nodes_once(
    pg: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = "ab" * 32  # a tool file's digest: text that looks like a node's name
    shared = {"workflow": {"nodes": ["x" * 100]}, "tool_sources": {"t.py": digest}}
    for run_id in ("r1", "r2"):
        pg.create_run(RunInfo(run_id, "wf", "queued", "a", None, 1, 1), {**shared, "id": run_id})
    other = PostgresStore(postgres_url)  # nothing read yet
    try:
        sent = count_statements(monkeypatch)
        assert other.manifests("r1") == [{**shared, "id": "r1"}]
        first = len(sent)
        sent.clear()
        assert other.manifests("r2") == [{**shared, "id": "r2"}]
        assert (first, len(sent)) == (2, 1)
    finally:
        other.close()
