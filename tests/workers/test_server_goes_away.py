"""The PostgreSQL server goes away mid-run, for real, through a TCP proxy (workers/proxy.py).

A run's connection string points at a proxy in front of the test server; the test drops
every connection and refuses new ones (or cuts one commit short) while the run is in the
middle of a wave, then brings the proxy back. The shared server itself is never touched.

What must hold: the driver (``Runtime`` in this process, ``plait run`` and ``plait worker``
in others) fails at once with PLAIT-E020 naming the server and what it was doing (never
the password); the journal holds whole waves only; once the server is back the run
resumes, every completed effect having run exactly once and the one in flight at most
twice, with one idempotency key; ``verify`` passes. Connections that die between two runs
are replaced, not surfaced as a failure of the next run.

The tools count their own executions; synchronization is on events and files, with
bounded waits, never a sleep.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from plait import PlaitError, Runtime, Workflow, current_call
from workers.proxy import Proxy
from workers.support import (
    FLOW,
    PLAIT,
    T0,
    enqueue,
    executions,
    plait,
    spawn_worker,
    started,
    summary,
    wait_for,
)

try:
    import psycopg

    from plait.store.postgres import PostgresStore
except ImportError as missing:  # the optional extra plait[postgres] is not installed
    if os.environ.get("PLAIT_REQUIRE_POSTGRES") == "1":
        raise
    pytest.skip(f"PostgreSQL tests need psycopg: {missing}", allow_module_level=True)

PASSWORD = "Sekr3t-pw"  # the test server trusts local connections: it is never checked


@pytest.fixture
def proxy(postgres: Any) -> Iterator[Proxy]:
    target = urlsplit(postgres.admin_url)
    relay = Proxy((target.hostname or "127.0.0.1", target.port or 5432))
    yield relay
    relay.close()


def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    user = parts.username or "postgres"
    netloc = f"{user}:{password}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def where(proxy: Proxy, url: str) -> str:
    """How messages name the proxied server: ``postgresql://127.0.0.1:PORT/DB``."""
    return f"postgresql://127.0.0.1:{proxy.port}{urlsplit(url).path}"


class Counted:
    """``first -> second -> third``; each tool records (node, idempotency key) per execution.

    ``hold_second()`` makes ``second`` set ``entered`` and wait for ``leave`` (bounded);
    ``on_second`` runs inside ``second`` before it returns.
    """

    def __init__(self) -> None:
        self.ran: list[tuple[str, str]] = []
        self.entered = threading.Event()
        self.leave = threading.Event()
        self.holding = False
        self.on_second: Callable[[], None] | None = None
        self._lock = threading.Lock()

    def hold_second(self) -> None:
        self.holding = True

    def _record(self) -> None:
        call = current_call()
        assert call is not None
        with self._lock:
            self.ran.append((call.node, call.idempotency_key))

    def workflow(self) -> Workflow:
        def first(n: int) -> dict:
            self._record()
            return {"a": n + 1}

        def second(a: int) -> dict:
            self._record()
            if self.holding:
                self.holding = False
                self.entered.set()
                assert self.leave.wait(60), "the test never let the tool go"
            if self.on_second is not None:
                hook, self.on_second = self.on_second, None
                hook()
            return {"b": a * 2}

        def third(b: int) -> dict:
            self._record()
            return {"c": b + 1}

        return (
            Workflow.new("gone")
            .node("first", tool=first)
            .node("second", tool=second)
            .node("third", tool=third)
            .edge("first", "second")
            .edge("second", "third")
        )

    def by_node(self) -> dict[str, list[str]]:
        """Each node's executions: the idempotency key of each, in order."""
        runs: dict[str, list[str]] = {}
        for node, key in self.ran:
            runs.setdefault(node, []).append(key)
        return runs


def journal_of(url: str, run_id: str) -> tuple[list[str], list[str], str]:
    """(nodes with an intent, nodes with a result, run status), read past the proxy."""
    store = PostgresStore(url)
    try:
        journal = store.load_journal(run_id)
        status = store.get_run(run_id).status
    finally:
        store.close()
    return [i.key.node for i in journal.intents], [k.node for k in journal.results], status


def lease_holder(url: str, run_id: str) -> tuple[str | None, int | None]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT host, pid FROM leases WHERE run_id = %s", (run_id,)).fetchone()
    return (None, None) if row is None else (row[0], row[1])


# --- the server goes away mid-wave ---


def test_a_runtime_fails_with_e020_at_once_and_resumes_the_run_once_the_server_is_back(
    postgres_url: str, proxy: Proxy
) -> None:
    tools = Counted()
    wf = tools.workflow()
    tools.hold_second()
    url = proxy.url(with_password(postgres_url, PASSWORD))
    rt = Runtime(url, principal="tester")
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(rt.run_sync, wf, {"n": 1}, run_id="gone")
            assert tools.entered.wait(60), running.exception(timeout=0)
            proxy.go_away()  # mid-wave: `first` is committed, `second` is in flight
            left = time.monotonic()
            tools.leave.set()
            with pytest.raises(PlaitError) as caught:
                running.result(timeout=60)
        failed_after = time.monotonic() - left
        error = caught.value
        assert error.code == "E020"
        message = str(error)
        assert message.startswith(f"PLAIT-E020 storage error on {where(proxy, url)}: "), message
        assert "run 'gone'" in message and "cannot connect" in message, message
        assert "Connection refused" in message, message
        assert PASSWORD not in message and "postgres@" not in message
        assert failed_after < 5  # at once, not after a pool's timeout (10 s)

        # Nothing half-written: whole waves, the in-flight effect has an intent only.
        intents, results, status = journal_of(postgres_url, "gone")
        assert (intents, results, status) == (["first", "second"], ["first"], "running")
        # The lease could not be released either: this process still holds it.
        assert lease_holder(postgres_url, "gone") == (socket.gethostname(), os.getpid())
        with Runtime(postgres_url, principal="tester") as reader:
            report = reader.verify("gone", workflow=wf)
            assert report.verified and report.up_to.startswith("superstep"), report

        proxy.come_back()
        result = rt.resume_sync("gone", workflow=wf)  # releases its old lease first: no E021
        assert result.status == "completed" and result.context["c"] == 5
        assert result.redelivered == 1
        ran = tools.by_node()
        assert len(ran["first"]) == 1 and len(ran["third"]) == 1  # completed: exactly once
        assert len(ran["second"]) == 2 and len(set(ran["second"])) == 1  # redelivered, same key
        assert rt.verify("gone", workflow=wf).verified
        assert lease_holder(postgres_url, "gone")[0] is None  # released at the end
    finally:
        rt.close()


def test_plait_run_exits_2_with_e020_json_and_plait_resume_finishes_the_run(
    postgres_url: str, proxy: Proxy, tmp_path: Path
) -> None:
    count_file = tmp_path / "executions.count"
    url = proxy.url(with_password(postgres_url, PASSWORD))
    data = json.dumps({"count_file": str(count_file), "n": 1})
    argv = [PLAIT, "run", str(FLOW), "--run-id", "cli", "--input", data, "--db", url, "--json"]
    env = {**os.environ, "WORKERTOOLS_BLOCK": "second"}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        blocked = Path(f"{count_file}.blocked")
        wait_for(lambda: blocked.exists() or proc.poll() is not None, "`second` to block")
        assert proc.poll() is None, proc.communicate()
        proxy.go_away()
        Path(f"{count_file}.release").write_text("go")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, out + err  # CONTRACT.md: storage errors exit 2
    error = json.loads(out)["error"]  # exactly one JSON object on stdout
    assert error["code"] == "PLAIT-E020"
    assert error["message"].startswith(f"storage error on {where(proxy, url)}: "), error
    assert "run 'cli'" in error["message"] and "cannot connect" in error["message"], error
    assert PASSWORD not in out + err

    intents, results, status = journal_of(postgres_url, "cli")
    assert (intents, results, status) == (["first", "second"], ["first"], "running")

    proxy.come_back()
    # `plait run` died holding the lease: a process on the same host takes it over at once.
    resumed = plait("resume", "cli", "--db", url, "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    count = executions(count_file)
    assert sorted(count.values()) == [1, 1, 2]  # completed once each; the in-flight one twice
    lines = [line.split() for line in count_file.read_text().splitlines()]
    [twice] = [key for key, n in count.items() if n == 2]
    assert {node for _, node, _, key in lines if key == twice} == {"second"}
    trace = json.loads(plait("trace", "cli", "--db", url, "--json").stdout)["entries"]
    assert [(e["node"], e["redeliveries"]) for e in trace] == [
        ("first", 0),
        ("second", 1),
        ("third", 0),
    ]
    verified = plait("verify", "cli", "--db", url, "--json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["verified"] is True


@pytest.mark.parametrize("applied", [False, True], ids=["commit-dropped", "commit-applied"])
def test_a_commit_cut_short_is_e020_and_resume_learns_from_the_journal_what_happened(
    postgres_url: str, proxy: Proxy, applied: bool
) -> None:
    """The connection breaks around a wave's commit: the driver cannot know if it landed.

    A wave commits as one statement (its own transaction), cut here on the wire as it
    carries the wave's result. Dropped: the server never sees it. Applied: the server
    runs and commits it; only its answer is lost. Either way resume reads the journal
    and does the rest.
    """
    tools = Counted()
    wf = tools.workflow()
    cuts = []
    # A result's item, quoted as an element of the commit's ``item`` column (texts inside
    # other elements have their quotes escaped).
    tools.on_second = lambda: cuts.append(proxy.cut_at(b'"result"', forward=applied))
    rt = Runtime(proxy.url(postgres_url), principal="tester")
    try:
        with pytest.raises(PlaitError) as caught:
            rt.run_sync(wf, {"n": 1}, run_id="cut")
        [cut] = cuts
        assert cut.done.is_set()
        message = str(caught.value)
        assert caught.value.code == "E020"
        assert "committing to the journal of run 'cut': connection lost" in message, message
        assert "may or may not have been applied" in message, message

        if applied:  # the server runs the statement it was sent, after the client gave up
            wait_for(lambda: "second" in journal_of(postgres_url, "cut")[1], "the commit")
        intents, results, status = journal_of(postgres_url, "cut")
        if applied:
            assert (intents, results) == (["first", "second", "third"], ["first", "second"])
        else:
            assert (intents, results) == (["first", "second"], ["first"])
        assert status == "running"

        result = rt.resume_sync("cut", workflow=wf)  # the proxy stayed up
        assert result.status == "completed" and result.context["c"] == 5
        assert result.redelivered == 1  # third's intent (applied) or second's (dropped)
        ran = tools.by_node()
        assert len(ran["first"]) == 1 and len(ran["third"]) == 1
        assert len(ran["second"]) == (1 if applied else 2) and len(set(ran["second"])) == 1
        assert rt.verify("cut", workflow=wf).verified
    finally:
        rt.close()


def test_a_worker_outlives_the_outage_and_drives_the_run_again_once_the_server_is_back(
    postgres_url: str, proxy: Proxy, tmp_path: Path
) -> None:
    count_file = tmp_path / "executions.count"
    enqueue(postgres_url, FLOW, {"w1": {"count_file": str(count_file), "n": 1}})
    log = tmp_path / "worker.log"
    # Leases of ten minutes: the run comes back only if the worker gives up the lease of
    # its failed drive once the server is back, not when the lease lapses.
    env = {"WORKERTOOLS_BLOCK": "second", "PLAIT_LEASE_TTL_MS": "600000"}
    worker = spawn_worker(proxy.url(postgres_url), log, "--poll-ms", "100", env=env)
    try:
        blocked = Path(f"{count_file}.blocked")
        wait_for(lambda: blocked.exists() or worker.poll() is not None, "`second` to block")
        assert worker.poll() is None, log.read_text()
        proxy.go_away()
        Path(f"{count_file}.release").write_text("go")
        wait_for(lambda: "run w1: PLAIT-E020" in log.read_text(), "the drive to fail")
        assert worker.poll() is None, log.read_text()  # the worker itself carries on
        proxy.come_back()
        wait_for(lambda: journal_of(postgres_url, "w1")[2] == "completed", "w1 to complete", 120)
    finally:
        worker.send_signal(signal.SIGTERM)
    report = summary(worker)
    assert report["statuses"] == {"completed": 1} and report["redelivered"] == 1, report
    [error] = report["errors"]
    assert error["run_id"] == "w1" and error["code"] == "PLAIT-E020", error
    assert error["message"].startswith(f"storage error on {where(proxy, postgres_url)}: ")
    count = executions(count_file)
    assert sorted(count.values()) == [1, 1, 2]
    verified = plait("verify", "w1", "--db", postgres_url, "--json")
    assert json.loads(verified.stdout)["verified"] is True, verified.stdout


# --- connections that die between two runs ---


def terminate_backends(admin_url: str, application_name: str) -> int:
    """Have the server terminate every backend of ``application_name``; wait until gone."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
        pids = [row[0] for row in admin.execute(query, (application_name,)).fetchall()]
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_for(
            lambda: not admin.execute(query, (application_name,)).fetchall(),
            "the backends to exit",
            timeout=30,
        )
    return len(pids)


@pytest.mark.parametrize("how", ["network-cut", "backend-terminated"])
def test_connections_that_died_between_two_runs_are_replaced_not_failed(
    postgres: Any, postgres_url: str, proxy: Proxy, how: str
) -> None:
    tools = Counted()
    wf = tools.workflow()
    name = f"plait_test_{secrets.token_hex(4)}"
    url = f"{postgres_url}&application_name={name}"
    rt = Runtime(proxy.url(url) if how == "network-cut" else url, principal="tester")
    try:
        assert rt.run_sync(wf, {"n": 1}, run_id="before").status == "completed"
        if how == "network-cut":
            accepted = proxy.accepted
            assert proxy.drop_connections() >= 1
        else:
            assert terminate_backends(postgres.admin_url, name) >= 1
        after = rt.run_sync(wf, {"n": 2}, run_id="after")  # no E020: new connections
        assert after.status == "completed" and after.context["c"] == 7
        if how == "network-cut":
            assert proxy.accepted > accepted
        assert Counter(node for node, _ in tools.ran) == {"first": 2, "second": 2, "third": 2}
    finally:
        rt.close()


def test_an_idle_worker_whose_connections_were_cut_is_still_woken_by_the_next_enqueue(
    postgres_url: str, proxy: Proxy, tmp_path: Path
) -> None:
    """The listening connection is opened again: a notification, not a poll, wakes it."""
    count_file = tmp_path / "executions.count"
    log = tmp_path / "worker.log"
    slow = {"PLAIT_LEASE_TTL_MS": "600000"}  # no lease renewal wakes it for 200 s either
    worker = spawn_worker(proxy.url(postgres_url), log, "--poll-ms", "600000", env=slow)
    try:
        wait_for(lambda: started(log) or worker.poll() is not None, "the worker to start")
        enqueue(postgres_url, FLOW, {"a": {"count_file": str(count_file), "n": 1}})
        # Idle: the worker itself has seen run a end. (Its status in the database is not
        # enough: the last commit's answer may still be on its way to the worker, and a
        # connection cut then loses it, a PLAIT-E020 this test is not about.)
        wait_for(lambda: "run a: completed" in log.read_text(), "run a", 60)
        assert proxy.drop_connections() >= 2  # the pool's and the listener's
        wait_for(lambda: "listening for notifications again" in log.read_text(), "re-LISTEN")
        began = time.monotonic()
        enqueue(postgres_url, FLOW, {"b": {"count_file": str(count_file), "n": 2}})
        wait_for(lambda: journal_of(postgres_url, "b")[2] == "completed", "run b", 60)
        assert time.monotonic() - began < 60  # well before any poll (600 s)
    finally:
        worker.send_signal(signal.SIGTERM)
    report = summary(worker)
    assert report["statuses"] == {"completed": 2} and report["errors"] == [], report


# --- the store's own messages and pool ---


def test_each_store_error_names_the_server_and_the_operation_and_the_store_recovers(
    postgres_url: str, proxy: Proxy
) -> None:
    from plait.store.records import LeaseOwner, RecordWrite, RunInfo

    url = proxy.url(with_password(postgres_url, PASSWORD))
    store = PostgresStore(url)
    try:
        store.create_run(RunInfo("r1", "wf", "running", "p", None, T0, T0), {"m": 1})
        proxy.go_away()
        owner = LeaseOwner("h", 1, 1)
        operations: dict[str, Callable[[], object]] = {
            "reading run 'r1'": lambda: store.get_run("r1"),
            "reading the manifest of run 'r1'": lambda: store.manifests("r1"),
            "reading the journal of run 'r1'": lambda: store.load_journal("r1"),
            "committing to the journal of run 'r1'": lambda: store.commit(
                "r1", None, [RecordWrite("clock", {"ms": 1})]
            ),
            "taking the lease of run 'r1'": lambda: store.acquire_lease(
                "r1", owner, T0, 1000, lambda o: True
            ),
            "releasing the lease of run 'r1'": lambda: store.release_lease("r1", 1),
            "claiming runs": lambda: store.claim_work(owner, T0, 1000),
            "listing runs": store.list_runs,
        }
        for what, operation in operations.items():
            with pytest.raises(PlaitError) as caught:
                operation()
            message = str(caught.value)
            assert caught.value.code == "E020"
            assert message.startswith(
                f"PLAIT-E020 storage error on {where(proxy, url)}: {what}: cannot connect: "
            ), message
            assert PASSWORD not in message
        proxy.come_back()
        store.commit("r1", None, [RecordWrite("clock", {"ms": 2})])  # the same store object
        assert [r.body for r in store.load_journal("r1").records] == [{"ms": 2}]
    finally:
        store.close()


def test_a_pool_whose_connections_all_stay_busy_is_e020_after_its_timeout(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url, pool_size=1, timeout=0.2)
    try:
        with store._connection("holding the only connection"), pytest.raises(PlaitError) as caught:
            store.list_runs()
        assert str(caught.value).endswith(
            ": listing runs: all 1 connections stayed busy for 0.2 s"
        ), caught.value
        assert store.list_runs() == []  # the connection came back
    finally:
        store.close()


@pytest.fixture(autouse=True)
def _no_stray_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subprocesses take their clock and blocking only from what a test passes."""
    for name in ("PLAIT_NOW_MS", "PLAIT_LEASE_TTL_MS", "WORKERTOOLS_BLOCK", "PLAIT_DB"):
        monkeypatch.delenv(name, raising=False)
