"""Workers on PostgreSQL (docs/architecture.md §11, §5.7): real `plait worker` processes.

Several workers share hundreds of queued runs; a worker is killed mid-wave and another
on the same host takes its lease over at once; a worker whose lease was taken (after
expiry) is fenced out; SIGTERM
lets the run in flight finish; NOTIFY wakes an idle worker; `plait run --detach` queues.
The tools count their own executions in a side file, keyed by idempotency key.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from plait.store.postgres import PostgresStore
from workers.support import (
    FLOW,
    T0,
    enqueue,
    executions,
    plait,
    spawn_worker,
    started,
    summary,
    wait_for,
)


def statuses(url: str) -> dict[str, str]:
    store = PostgresStore(url)
    try:
        return {info.run_id: info.status for info in store.list_runs()}
    finally:
        store.close()


def verify_all(url: str) -> dict:
    verified = plait("verify", "--all", "--db", url, "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    return json.loads(verified.stdout)


def test_detach_queues_the_run_and_exits_3(postgres_url: str, tmp_path: Path) -> None:
    data = json.dumps({"count_file": str(tmp_path / "c"), "n": 1})
    queued = plait(
        "run",
        str(FLOW),
        "--detach",
        "--run-id",
        "q1",
        "--input",
        data,
        "--db",
        postgres_url,
        "--json",
    )
    assert queued.returncode == 3, queued.stdout + queued.stderr
    result = json.loads(queued.stdout)
    assert result["status"] == "queued" and result["outcome"] is None
    assert result["run_id"] == "q1" and result["context"]["n"] == 1
    assert statuses(postgres_url) == {"q1": "queued"}
    assert not (tmp_path / "c").exists()  # nothing was driven
    listed = json.loads(plait("runs", "--status", "queued", "--db", postgres_url, "--json").stdout)
    assert [r["run_id"] for r in listed["runs"]] == ["q1"]


@pytest.mark.parametrize("workers", [2, 4])
def test_workers_share_200_runs_and_never_run_a_completed_effect_twice(
    postgres_url: str, tmp_path: Path, workers: int
) -> None:
    count_file = tmp_path / "executions.count"
    logs = [tmp_path / f"worker{i}.log" for i in range(workers)]
    procs = [spawn_worker(postgres_url, log, "--concurrency", "4") for log in logs]
    try:
        for log, proc in zip(logs, procs, strict=True):
            wait_for(lambda log=log, proc=proc: started(log) or proc.poll() is not None, "start")
            assert proc.poll() is None, log.read_text()
        runs = {f"r{i:03}": {"count_file": str(count_file), "n": i} for i in range(200)}
        enqueue(postgres_url, FLOW, runs)  # each notifies: idle workers wake at once
        wait_for(
            lambda: set(statuses(postgres_url).values()) == {"completed"},
            "every run to complete",
            timeout=600,
        )
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
    reports = [summary(proc) for proc in procs]
    assert sum(r["driven"] for r in reports) == 200
    assert sum(r["statuses"].get("completed", 0) for r in reports) == 200
    assert all(r["errors"] == [] and r["stopped"] == "signal" for r in reports)
    assert sum(1 for r in reports if r["driven"] > 0) >= 2, reports  # the work was shared
    count = executions(count_file)
    assert len(count) == 600 and set(count.values()) == {1}  # 3 effects a run, each once
    report = verify_all(postgres_url)
    assert report["verified"] == 200 and report["failed"] == 0


def kill_mid_wave(postgres_url: str, tmp_path: Path, run_id: str) -> tuple[Path, dict]:
    """Queue one run and start a worker (clock T0, 1 s leases) that blocks in ``second``."""
    count_file = tmp_path / "executions.count"
    enqueue(postgres_url, FLOW, {run_id: {"count_file": str(count_file), "n": 1}}, clock=T0)
    env = {"PLAIT_NOW_MS": str(T0), "PLAIT_LEASE_TTL_MS": "1000", "WORKERTOOLS_BLOCK": "second"}
    return count_file, env


def test_kill_9_mid_wave_a_worker_on_the_same_host_takes_over_at_once(
    postgres_url: str, tmp_path: Path
) -> None:
    count_file, env = kill_mid_wave(postgres_url, tmp_path, "k1")
    victim = spawn_worker(postgres_url, tmp_path / "victim.log", "--once", env=env)
    marker = Path(str(count_file) + ".blocked")
    wait_for(lambda: marker.exists() or victim.poll() is not None, "the tool to block")
    assert victim.poll() is None, (tmp_path / "victim.log").read_text()
    victim.send_signal(signal.SIGKILL)
    assert victim.wait() == -signal.SIGKILL
    assert statuses(postgres_url) == {"k1": "running"}
    # The lease runs until T0 + 1 s, but its holder is gone and this is its host (§5.7):
    # the next worker here takes the run over at once (on another host: once it lapses,
    # see test_claims.py).
    late = plait(
        "worker",
        "--once",
        "--db",
        postgres_url,
        "--json",
        env={"PLAIT_NOW_MS": str(T0 + 500), "PLAIT_LEASE_TTL_MS": "1000"},
    )
    assert late.returncode == 0, late.stdout + late.stderr
    report = json.loads(late.stdout)
    assert report["statuses"] == {"completed": 1} and report["redelivered"] == 1
    assert statuses(postgres_url) == {"k1": "completed"}
    count = executions(count_file)
    assert sum(count.values()) == 4 and sorted(count.values()) == [1, 1, 2]
    entries = json.loads(plait("trace", "k1", "--db", postgres_url, "--json").stdout)["entries"]
    assert [e["redeliveries"] for e in entries] == [0, 1, 0]
    assert [e["node"] for e in entries] == ["first", "second", "third"]
    assert verify_all(postgres_url)["verified"] == 1


def test_a_stale_worker_whose_lease_was_taken_cannot_write(
    postgres_url: str, tmp_path: Path
) -> None:
    count_file, env = kill_mid_wave(postgres_url, tmp_path, "f1")
    stale = spawn_worker(postgres_url, tmp_path / "stale.log", "--once", env=env)
    marker = Path(str(count_file) + ".blocked")
    wait_for(lambda: marker.exists() or stale.poll() is not None, "the tool to block")
    assert stale.poll() is None, (tmp_path / "stale.log").read_text()
    # Its lease lapses (by the second worker's clock); the second worker finishes the run.
    taker = plait(
        "worker",
        "--once",
        "--db",
        postgres_url,
        "--json",
        env={"PLAIT_NOW_MS": str(T0 + 5000), "PLAIT_LEASE_TTL_MS": "1000"},
    )
    assert json.loads(taker.stdout)["statuses"] == {"completed": 1}, taker.stdout
    store = PostgresStore(postgres_url)
    try:
        journal_before = [r.seq for r in store.load_journal("f1").records]
    finally:
        store.close()
    # The stale worker wakes up: its in-flight effect finishes, its commit is fenced out.
    Path(str(count_file) + ".release").write_text("go")
    report = summary(stale)
    assert report["statuses"] == {} and len(report["errors"]) == 1
    assert report["errors"][0]["code"] == "PLAIT-E021", report
    store = PostgresStore(postgres_url)
    try:
        assert [r.seq for r in store.load_journal("f1").records] == journal_before
        assert store.get_run("f1").status == "completed"
    finally:
        store.close()
    assert verify_all(postgres_url)["verified"] == 1


def test_sigterm_stops_claiming_and_lets_the_run_in_flight_finish(
    postgres_url: str, tmp_path: Path
) -> None:
    count_file = tmp_path / "executions.count"
    enqueue(postgres_url, FLOW, {"s1": {"count_file": str(count_file), "n": 1}})
    log = tmp_path / "worker.log"
    proc = spawn_worker(postgres_url, log, env={"WORKERTOOLS_BLOCK": "second"})
    marker = Path(str(count_file) + ".blocked")
    wait_for(lambda: marker.exists() or proc.poll() is not None, "the tool to block")
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "stopping" in log.read_text(), "the worker to see SIGTERM")
    enqueue(postgres_url, FLOW, {"s2": {"count_file": str(count_file), "n": 2}})
    assert proc.poll() is None  # still finishing s1
    Path(str(count_file) + ".release").write_text("go")
    report = summary(proc)
    assert report["stopped"] == "signal" and report["statuses"] == {"completed": 1}
    assert statuses(postgres_url) == {"s1": "completed", "s2": "queued"}  # s2 never claimed


def test_a_notification_wakes_an_idle_worker_before_its_next_poll(
    postgres_url: str, tmp_path: Path
) -> None:
    count_file = tmp_path / "executions.count"
    log = tmp_path / "worker.log"
    proc = spawn_worker(postgres_url, log, "--poll-ms", "600000")  # polls every 10 minutes
    try:
        wait_for(lambda: started(log) or proc.poll() is not None, "start")
        time.sleep(1.0)  # let the listener connect (a lost NOTIFY would fail the test, not hang)
        began = time.monotonic()
        enqueue(postgres_url, FLOW, {"n1": {"count_file": str(count_file), "n": 1}})
        wait_for(lambda: statuses(postgres_url)["n1"] == "completed", "the run", timeout=60)
        assert time.monotonic() - began < 60
    finally:
        proc.send_signal(signal.SIGTERM)
    assert summary(proc)["statuses"] == {"completed": 1}


def test_gc_deletes_old_finished_runs_and_never_parked_queued_or_new_ones(
    postgres_url: str, tmp_path: Path
) -> None:
    from plait import Runtime, load_workflow
    from workers.support import ASK_FLOW

    count_file = str(tmp_path / "c")
    day = 86_400_000
    with Runtime(postgres_url, principal="tester", clock=lambda: T0) as rt:
        rt.run_sync(load_workflow(FLOW), {"count_file": count_file, "n": 1}, run_id="done-old")
        parked = rt.run_sync(
            load_workflow(ASK_FLOW), {"count_file": count_file, "n": 1}, run_id="parked-old"
        )
        assert parked.status == "parked"
    enqueue(postgres_url, FLOW, {"queued-old": {"count_file": count_file, "n": 1}}, clock=T0)
    with Runtime(postgres_url, principal="tester", clock=lambda: T0 + 2 * day) as rt:
        rt.run_sync(load_workflow(FLOW), {"count_file": count_file, "n": 1}, run_id="done-new")
    now = {"PLAIT_NOW_MS": str(T0 + 2 * day + 1)}
    bad = plait("gc", "--older-than", "soon", "--db", postgres_url, "--json", env=now)
    assert bad.returncode == 2 and "PLAIT-E019" in bad.stdout
    collected = plait("gc", "--older-than", "1d", "--db", postgres_url, "--json", env=now)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert json.loads(collected.stdout) == {"deleted": 1, "runs": ["done-old"]}
    assert statuses(postgres_url) == {
        "parked-old": "parked",
        "queued-old": "queued",
        "done-new": "completed",
    }
    shown = plait("show", "done-old", "--db", postgres_url, "--json")
    assert json.loads(shown.stdout)["error"]["code"] == "PLAIT-E017"
    # The parked run is intact: answered, a worker drives it to the end.
    with Runtime(postgres_url, principal="other", clock=lambda: T0 + 2 * day) as rt:
        [ask] = rt.asks("parked-old")
        rt.respond("parked-old", ask["ask_id"], {"b": 7})
    done = plait("worker", "--once", "--db", postgres_url, "--json", env=now)
    assert json.loads(done.stdout)["statuses"] == {"completed": 2}  # parked-old, queued-old
    assert statuses(postgres_url)["parked-old"] == "completed"
    assert verify_all(postgres_url)["failed"] == 0


def test_gc_deletes_a_finished_run_that_a_cancel_or_message_reached_after_it_ended(
    postgres_url: str, tmp_path: Path
) -> None:
    from plait import Runtime, load_workflow

    count_file = str(tmp_path / "c")
    with Runtime(postgres_url, principal="tester", clock=lambda: T0) as rt:
        for run_id in ("canceled-late", "messaged-late"):
            rt.run_sync(load_workflow(FLOW), {"count_file": count_file, "n": 1}, run_id=run_id)
        rt.cancel("canceled-late", "too late")
        rt.send("messaged-late", "too late")
    later = {"PLAIT_NOW_MS": str(T0 + 2 * 3_600_000)}

    collected = plait("gc", "--older-than", "1h", "--db", postgres_url, "--json", env=later)

    assert json.loads(collected.stdout) == {
        "deleted": 2,
        "runs": ["canceled-late", "messaged-late"],
    }


def test_a_worker_with_a_huge_concurrency_claims_in_batches(
    postgres_url: str, tmp_path: Path
) -> None:
    enqueue(postgres_url, FLOW, {"h1": {"count_file": str(tmp_path / "c"), "n": 1}})

    done = plait("worker", "--concurrency", str(10**20), "--once", "--db", postgres_url, "--json")

    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["statuses"] == {"completed": 1}


def test_worker_refuses_a_bad_concurrency(postgres_url: str) -> None:
    bad = plait("worker", "--concurrency", "0", "--once", "--db", postgres_url, "--json")
    assert bad.returncode == 2 and "PLAIT-E019" in bad.stdout


@pytest.fixture(autouse=True)
def _no_stray_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subprocesses take their clock and blocking only from what a test passes."""
    for name in ("PLAIT_NOW_MS", "PLAIT_LEASE_TTL_MS", "WORKERTOOLS_BLOCK", "PLAIT_DB"):
        monkeypatch.delenv(name, raising=False)
