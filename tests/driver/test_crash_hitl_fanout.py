"""Crash tests across a park, a Send fan-out wave and a subgraph (docs/architecture.md §5, §8).

Like tests/driver/test_crash.py: every step is a real `plait` process on one SQLite
file; the process that crashes dies by SIGKILL at a chosen journal boundary
(PLAIT_CRASH_AT=intent:N|result:N, counted per process, so a child run driven inside its
parent's drive shares the parent's count) or by a real SIGKILL; a new process resumes.
The tools (crashflow_hitl/hitltools.py) count their own executions in a side file, keyed
by idempotency key. Each test asserts: the final context equals the uninterrupted run's;
every completed effect ran exactly once; the effects in flight at the crash were
redelivered once, under the idempotency key their first execution saw (run again when
they had run, run once when only their intent was durable); verify passes on every
journal (the parent's and the child's).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hitl.support import PLAIT, T0, Plait
from plait import Runtime

FLOWS = Path(__file__).parent / "crashflow_hitl"
KILLED = -signal.SIGKILL
APPROVER = "bob"  # an approval's responder must differ from the run's principal (alice)
SQUARES = [f"square/{i:06d}" for i in range(4)]  # the fan-out wave's four tasks


def effects(count_file: Path) -> list[tuple[str, str]]:
    """(effect label, idempotency key) of every execution; the label is node[/task path]."""
    lines = count_file.read_text().splitlines() if count_file.exists() else []
    found = []
    for line in lines:
        _run, node, path, _attempt, key = line.split()
        found.append((node if path == "-" else node + path, key))
    return found


def start(cli: Plait, flow: str, run_id: str, *extra: str, **kw: Any) -> Any:
    data = f'{{"count_file": "{cli.folder / "count"}", "n": 4}}'
    return cli("run", str(FLOWS / flow), "--run-id", run_id, "--input", data, *extra, **kw)


def crash(at: str) -> dict[str, str]:
    return {"PLAIT_CRASH_AT": at}


def context_of(call: Any) -> dict[str, Any]:
    assert call.returncode == 0, call
    assert call.data["status"] == "completed", call
    context = dict(call.data["context"])
    context.pop("count_file")
    return context


def child_of(cli: Plait, run_id: str) -> str:
    with cli.store() as store:
        [child] = [i.run_id for i in store.list_runs() if i.run_id.startswith(run_id + "~")]
    return child


def redelivered(cli: Plait, *run_ids: str) -> list[tuple[str, str]]:
    """(effect label, idempotency key) of every redelivery note of these runs."""
    notes = []
    for run_id in run_ids:
        for record in cli.records(run_id, "redelivery"):
            key = record.body["key"]
            notes.append((key["node"] + key["task_path"], record.body["idempotency_key"]))
    return notes


def ran(cli: Plait) -> set[str]:
    """The effects that have run so far (labels)."""
    return {label for label, _ in effects(cli.folder / "count")}


def check(
    cli: Plait,
    run_ids: tuple[str, ...],
    expected_effects: Counter[str],
    again: set[str],
    twice: set[str],
    before: set[str],
) -> None:
    """Exactly once, but for ``twice``; ``again``: the effects with a redelivery note.

    ``expected_effects``: the effects of an uninterrupted run; ``before``: those that had
    run when the process died. An effect in flight at the crash is redelivered (``again``);
    it runs twice when it had run without its result being committed, else once.
    """
    assert twice <= again
    assert twice <= before and not (again - twice) & before
    ran = effects(cli.folder / "count")
    by_key = Counter(key for _, key in ran)
    labels = {key: label for label, key in ran}
    # Every effect of the uninterrupted run ran, and nothing else ran.
    assert Counter(label for label, _ in set(ran)) == expected_effects
    assert {labels[k] for k, n in by_key.items() if n == 2} == twice
    assert set(by_key.values()) <= {1, 2}
    # Each redelivery note names an effect once, under the key its tool saw.
    notes = redelivered(cli, *run_ids)
    assert sorted(label for label, _ in notes) == sorted(again)
    for label, key in notes:
        assert labels.get(key) == label, (label, key)
    # Verify re-drives each journal (the parent's and the child's) and compares every
    # checkpoint. In-process, like `plait verify` runs it: it writes nothing and runs no
    # effect, and a process per test would add half of this module's time.
    with Runtime(cli.db) as rt:
        reports = [rt.verify(run_id) for run_id in run_ids]
    assert [(r.run_id, r.verified, r.up_to) for r in reports] == [
        (run_id, True, "terminal") for run_id in run_ids
    ], reports


# --- uninterrupted runs ---------------------------------------------------------------


def uninterrupted(tmp: Path, flow: str, answer: tuple[str, ...] = ()) -> dict[str, Any]:
    cli = Plait(tmp, processes=False)
    done = start(cli, flow, "clean")
    if answer:
        assert done.returncode == 3, done
        [ask] = done.data["asks"]
        verb, *args = answer
        principal = APPROVER if verb == "approve" else "alice"
        assert cli(verb, "clean", ask["ask_id"], *args, principal=principal).returncode == 0
        done = cli("resume", "clean")
    context = context_of(done)
    assert set(Counter(key for _, key in effects(tmp / "count")).values()) == {1}
    return context


@pytest.fixture(scope="module")
def park_context(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return uninterrupted(tmp_path_factory.mktemp("park"), "park.yaml", ("approve",))


@pytest.fixture(scope="module")
def fanout_context(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return uninterrupted(tmp_path_factory.mktemp("fanout"), "fanout.yaml")


@pytest.fixture(scope="module")
def subgraph_context(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return uninterrupted(tmp_path_factory.mktemp("subgraph"), "parent.yaml")


@pytest.fixture(scope="module")
def subgraph_ask_context(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    answer = ("respond", "--result", '{"note": "hi"}')
    return uninterrupted(tmp_path_factory.mktemp("subgraph_ask"), "parent_ask.yaml", answer)


@pytest.fixture
def cli(tmp_path: Path) -> Plait:
    return Plait(tmp_path, processes=False)


# --- 1. across a park -----------------------------------------------------------------

PARK_EFFECTS = Counter({"before": 1, "after": 1, "finish": 1})


def approve(cli: Plait, run_id: str) -> None:
    ask = cli.only_ask(run_id)
    approved = cli("approve", run_id, ask["ask_id"], principal=APPROVER)
    assert approved.returncode == 0, approved
    assert approved.data["accepted"] is True


@pytest.mark.parametrize(
    ("crash_at", "again", "twice"),
    [
        ("intent:1", {"before"}, set()),  # `before` journaled, never run
        ("result:1", {"before"}, {"before"}),  # `before` ran, its result never committed
        ("intent:2", set(), set()),  # the ask's intent (and the park) committed
    ],
)
def test_a_crash_before_the_park_parks_on_resume_then_completes_once_answered(
    cli: Plait, park_context: dict[str, Any], crash_at: str, again: set[str], twice: set[str]
):
    assert start(cli, "park.yaml", "p", env=crash(crash_at)).returncode == KILLED
    before = ran(cli)
    parked = cli("resume", "p")
    assert parked.returncode == 3, parked
    assert [a["node"] for a in parked.data["asks"]] == ["approve"]
    assert len(cli.records("p", "envelope")) == 1  # the ask is announced once
    approve(cli, "p")
    assert context_of(cli("resume", "p")) == park_context
    check(cli, ("p",), PARK_EFFECTS, again, twice, before)


@pytest.mark.parametrize(
    ("crash_at", "again", "twice"),
    [
        ("intent:1", {"after"}, set()),  # right after the answer: `after` journaled, not run
        ("result:1", {"after"}, {"after"}),
        ("intent:2", {"finish"}, set()),
        ("result:2", {"finish"}, {"finish"}),
    ],
)
def test_a_crash_in_the_process_resuming_an_answered_park_redelivers_once(
    cli: Plait, park_context: dict[str, Any], crash_at: str, again: set[str], twice: set[str]
):
    assert start(cli, "park.yaml", "p").returncode == 3
    approve(cli, "p")
    assert cli("resume", "p", env=crash(crash_at)).returncode == KILLED
    before = ran(cli)
    assert context_of(cli("resume", "p")) == park_context
    check(cli, ("p",), PARK_EFFECTS, again, twice, before)


def wait_for(
    condition: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log: Path
) -> None:
    """Synchronization on an observable fact, never a fixed sleep (bounded)."""
    deadline = time.monotonic() + 30
    while not condition():
        assert proc.poll() is None, f"the worker exited before {what}: {log.read_text()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {log.read_text()}"
        time.sleep(0.02)


def test_kill_9_of_the_worker_that_parked_the_run_loses_nothing(
    cli: Plait, park_context: dict[str, Any]
):
    queued = start(cli, "park.yaml", "p", "--detach")
    assert queued.returncode == 3, queued
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    log = cli.folder / "worker.log"
    with open(log, "w") as err:
        worker = subprocess.Popen(  # a long-lived driver: it stays up once the run has parked
            [PLAIT, "worker", "--db", cli.db, "--poll-ms", "20"],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**environ, "PLAIT_NOW_MS": str(T0), "PLAIT_PRINCIPAL": "alice"},
            cwd=cli.folder,
        )

    def parked() -> bool:
        with cli.store() as store:
            return store.get_run("p").status == "parked"

    try:
        wait_for(parked, "the run to park", worker, log)
    finally:
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=60) == KILLED
    # A new process answers; another resumes: the park was committed, nothing runs twice.
    before = ran(cli)
    assert before == {"before"}
    assert cli.verify("p")["up_to"] == "park"  # `plait verify`, in a process of its own
    approve(cli, "p")
    assert context_of(cli("resume", "p")) == park_context
    check(cli, ("p",), PARK_EFFECTS, set(), set(), before)
    assert cli.verify("p")["up_to"] == "terminal"


# --- 2. a fan-out wave ----------------------------------------------------------------

FANOUT_EFFECTS = Counter({"spawn": 1, **dict.fromkeys(SQUARES, 1), "join": 1, "finish": 1})


@pytest.mark.parametrize(
    ("crash_at", "again", "twice"),
    [
        ("intent:1", {"spawn"}, set()),
        ("result:1", {"spawn"}, {"spawn"}),  # the $send result is lost: spawn runs again
        # The four tasks' intents are one commit: intent:2 and intent:5 stop at the same one.
        ("intent:2", set(SQUARES), set()),
        ("intent:5", set(SQUARES), set()),
        # The wave waits for every task, then journals their results in one commit: a
        # crash before any of them is committed redelivers the whole wave.
        ("result:2", set(SQUARES), set(SQUARES)),
        ("result:3", set(SQUARES), set(SQUARES)),
        ("result:4", set(SQUARES), set(SQUARES)),
        ("result:5", set(SQUARES), set(SQUARES)),
        ("intent:6", {"join"}, set()),
        ("result:6", {"join"}, {"join"}),
    ],
)
def test_a_crash_around_a_fan_out_wave_resumes_every_task_exactly_once(
    cli: Plait, fanout_context: dict[str, Any], crash_at: str, again: set[str], twice: set[str]
):
    assert start(cli, "fanout.yaml", "f", env=crash(crash_at)).returncode == KILLED
    before = ran(cli)
    assert context_of(cli("resume", "f")) == fanout_context
    check(cli, ("f",), FANOUT_EFFECTS, again, twice, before)


# --- 3. a subgraph --------------------------------------------------------------------

SUBGRAPH_EFFECTS = Counter({"pre": 1, "c1": 1, "c2": 1, "post": 1})


@pytest.mark.parametrize(
    ("crash_at", "again", "twice"),
    [
        # Intents, counted across the process: pre 1, sub 2, then the child's c1 3, c2 4.
        ("intent:2", set(), set()),  # the child run was never created: it starts on resume
        ("intent:3", {"c1"}, set()),
        ("intent:4", {"c2"}, set()),
        # Results: pre 1, the child's c1 2, c2 3, then the parent's sub 4 (the child's context).
        ("result:2", {"c1"}, {"c1"}),
        ("result:3", {"c2"}, {"c2"}),
        ("result:4", set(), set()),  # the child had finished: resume reads its context back
    ],
)
def test_a_crash_inside_a_child_run_resumes_the_parent_and_the_child_once(
    cli: Plait, subgraph_context: dict[str, Any], crash_at: str, again: set[str], twice: set[str]
):
    assert start(cli, "parent.yaml", "s", env=crash(crash_at)).returncode == KILLED
    before = ran(cli)
    with cli.store() as store:
        children = [i.run_id for i in store.list_runs() if i.run_id != "s"]
    assert len(children) == (0 if crash_at == "intent:2" else 1)
    assert context_of(cli("resume", "s")) == subgraph_context
    check(cli, ("s", child_of(cli, "s")), SUBGRAPH_EFFECTS, again, twice, before)


@pytest.mark.parametrize(
    ("crash_at", "again", "twice"),
    [
        # Counted in the resuming process: the child's c2 is its intent 1 and result 1.
        ("intent:1", {"c2"}, set()),
        ("result:1", {"c2"}, {"c2"}),
        ("result:2", set(), set()),  # the child finished; the parent's settlement was lost
    ],
)
def test_a_crash_after_answering_a_parked_child_resumes_the_child_and_the_parent_once(
    cli: Plait,
    subgraph_ask_context: dict[str, Any],
    crash_at: str,
    again: set[str],
    twice: set[str],
):
    parked = start(cli, "parent_ask.yaml", "s")
    assert parked.returncode == 3, parked
    child = child_of(cli, "s")
    [ask] = parked.data["asks"]  # the child's ask, listed by the parent
    assert ask["run_id"] == child and ask["node"] == "question"
    answered = cli("respond", "s", ask["ask_id"], "--result", '{"note": "hi"}')
    assert answered.returncode == 0, answered
    assert cli("resume", "s", env=crash(crash_at)).returncode == KILLED
    before = ran(cli)
    assert context_of(cli("resume", "s")) == subgraph_ask_context
    check(cli, ("s", child), SUBGRAPH_EFFECTS, again, twice, before)
