"""The crash matrix beyond plain tool nodes (docs/architecture.md §1.2, §5, §14).

Each case is a real `plait run` (or `resume`, `fork`) process that dies at one journal
boundary (PLAIT_CRASH_AT=intent:N|result:N, counted per process) or by a real SIGKILL
while a tool is mid-call, then `plait resume` in a new process, then verify of every
journal the run made. The workflows of crashmatrix/ cover an abstract node (a parallel
round, an unknown-tool and an invalid-arguments re-prompt, a fold), a governed abstract
node (refused calls, an approval-required tool and a deferred tool), a wave of parallel
branches (a command tool beside a subgraph whose child runs tool nodes), a durable timer,
and a fork. The tools count their executions by idempotency key (counted.py).

What every case asserts against the same run left uninterrupted:
- the final context and each run's trace are the same (redelivery counts aside);
- every effect ran exactly once, except those named ``twice``: the effects that had run
  when the process died without their result being committed, run again under the same
  idempotency key;
- a redelivery note names exactly the effects in flight at the crash (``again``);
- verify passes on every journal (the parent's and the child's), to the terminal state.

Boundaries that fall in the same commit (the intents of one wave, the results of one
wave) stop at the same point: each wave is crashed once per boundary kind. The LLM node
gets the whole matrix (on PostgreSQL too, for one wave of each kind); the other
scenarios the boundaries that differ from a plain tool node's (test_crash.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from inprocess import run_plait
from plait import Runtime
from plait.store import open_store

FLOWS = Path(__file__).parent / "crashmatrix"
PLAIT = str(Path(sys.executable).parent / "plait")
KILLED = -signal.SIGKILL
T0 = 1_767_225_600_000
LATER = T0 + 120_000  # past the 60 s timer of branches.yaml


class Case:
    """A copy of crashmatrix/ with its own store and count file; `plait` in a subprocess
    for the call that crashes, in this process for the others (tests/inprocess.py)."""

    def __init__(self, folder: Path, db: str | None = None) -> None:
        shutil.copytree(FLOWS, folder)
        self.folder = folder
        self.db = db or f"sqlite:///{folder}/plait.db"
        self.count_file = folder / "count.txt"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
        self.env.update(
            CRASHMATRIX_COUNT=str(self.count_file), PLAIT_NOW_MS=str(T0), PLAIT_PRINCIPAL="alice"
        )

    def __call__(self, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
        done = run_plait(  # a process of its own when it is to crash
            [PLAIT, *args, "--db", self.db, "--json"],
            cwd=self.folder,
            capture_output=True,
            text=True,
            env={**self.env, **env},
            timeout=120,
        )
        if done.returncode == KILLED:
            assert not done.stdout, done.stdout  # a crash prints nothing
            return done.returncode, {}
        assert not done.stderr.strip(), done.stderr  # no traceback, whatever happened
        return done.returncode, json.loads(done.stdout)

    def run(self, flow: str, run_id: str, **env: str) -> tuple[int, dict[str, Any]]:
        return self("run", str(self.folder / flow), "--run-id", run_id, **env)

    def run_ids(self, root: str) -> list[str]:
        with Runtime(self.db) as rt:
            runs = [i.run_id for i in rt.store.list_runs()]
        return sorted(r for r in runs if r == root or r.startswith(root + "~"))

    def labels(self, run_ids: list[str]) -> dict[str, str]:
        """idempotency key -> the effect it belongs to (``run-suffix:node[/task]#seq``)."""
        found = {}
        store = open_store(self.db)
        try:
            for run_id in run_ids:
                for intent in store.load_journal(run_id).intents:
                    found[intent.idempotency_key] = label(intent.key.to_json())
        finally:
            store.close()
        return found

    def executions(self, run_ids: list[str]) -> Counter[str]:
        labels = self.labels(run_ids)
        lines = self.count_file.read_text().splitlines() if self.count_file.exists() else []
        return Counter(labels[line.split()[0]] for line in lines)

    def redelivered(self, run_ids: list[str]) -> list[str]:
        store = open_store(self.db)
        try:
            notes = [
                r.body
                for run_id in run_ids
                for r in store.load_journal(run_id).records
                if r.kind == "redelivery"
            ]
        finally:
            store.close()
        labels = self.labels(run_ids)
        for note in notes:  # the note names the key its first execution saw
            assert labels[note["idempotency_key"]] == label(note["key"]), note
        return sorted(label(note["key"]) for note in notes)

    def outcome(self, run_ids: list[str]) -> dict[str, Any]:
        """Per run: its trace (redelivery counts aside) and its verify report."""
        with Runtime(self.db) as rt:
            traces = {
                run_suffix(r): [
                    {k: v for k, v in e.items() if k != "redeliveries"} for e in rt.trace(r)
                ]
                for r in run_ids
            }
            reports = [rt.verify(r) for r in run_ids]
        assert [(r.verified, r.up_to) for r in reports] == [(True, "terminal")] * len(run_ids), (
            reports
        )
        return traces


def run_suffix(run_id: str) -> str:
    """``~child`` part of a run id (child ids derive from the parent's, which differ by
    fork), so a child run is named the same in every case."""
    return "~" if "~" in run_id else ""


def label(key: dict[str, Any]) -> str:
    run = "~" if "~" in key["run_id"] else ""
    return f"{run}{key['node']}{key['task_path']}#{key['effect_seq']}"


def finished(code_and_data: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    code, data = code_and_data
    assert code == 0, data
    assert data["status"] == "completed", data
    return data


def expect(
    case: Case,
    root: str,
    clean: dict[str, Any],
    context: dict[str, Any],
    again: set[str],
    twice: set[str],
    maybe: frozenset[str] | set[str] = frozenset(),
) -> None:
    """``case``'s run ``root`` ended exactly as ``clean`` did; see the module docstring.

    ``maybe``: effects in flight at the crash that may or may not have run before it (a
    command tool's process racing the kill): once or twice, never more."""
    assert context == clean["context"]
    run_ids = case.run_ids(root)
    assert case.outcome(run_ids) == clean["traces"]
    executions = case.executions(run_ids)
    for effect in maybe:
        assert executions[effect] in (1, 2), (effect, executions)
        executions[effect] = 1
    assert executions == clean["executions"] + Counter(twice)
    assert case.redelivered(run_ids) == sorted(again)


def snapshot(case: Case, root: str, context: dict[str, Any]) -> dict[str, Any]:
    run_ids = case.run_ids(root)
    executions = case.executions(run_ids)
    assert set(executions.values()) == {1}
    assert case.redelivered(run_ids) == []
    return {"context": context, "traces": case.outcome(run_ids), "executions": executions}


# --- 1. an abstract node: parallel round, re-prompts, a fold ------------------------------

LLM_WAVES = [[0], [1], [2], [3, 4], [5], [6], [7], [8], [9], [10]]
"""effect_seq of the node's effects, wave by wave: llm 0, tool a 1, llm 2, tools b c 3 4,
llm 5 (unknown tool: re-prompt), llm 6 (invalid arguments: re-prompt), llm 7, tool d 8,
llm 9 (the summarizer of the fold), llm 10 (the final answer)."""
LLM_TOOLS = {1, 3, 4, 8}


def llm_clean(case: Case) -> dict[str, Any]:
    data = finished(case.run("llm.yaml", "agent"))
    assert data["folds"] == 1
    clean = snapshot(case, "agent", data["context"])
    [trace] = clean["traces"].values()
    assert [(e["kind"], e["effect_seq"]) for e in trace] == [
        ("tool" if seq in LLM_TOOLS else "llm", seq) for wave in LLM_WAVES for seq in wave
    ]
    assert "fold" in trace[9]["input"]
    return clean


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return llm_clean(Case(tmp_path_factory.mktemp("llm") / "clean"))


def llm_boundaries() -> list[Any]:
    cases = []
    ordinal = 0
    for wave in LLM_WAVES:
        first = ordinal + 1
        ordinal += len(wave)
        again = {f"agent#{seq}" for seq in wave}
        ran = {f"agent#{seq}" for seq in wave if seq in LLM_TOOLS}
        cases.append(pytest.param(f"intent:{first}", again, set(), id=f"intent:{first}"))
        cases.append(pytest.param(f"result:{first}", again, ran, id=f"result:{first}"))
    return cases


def crash_llm(case: Case, clean: dict[str, Any], at: str, again: set[str], twice: set[str]):
    code, _ = case.run("llm.yaml", "agent", PLAIT_CRASH_AT=at)
    assert code == KILLED
    data = finished(case("resume", "agent"))
    assert data["folds"] == 1
    for axis in ("input_tokens", "output_tokens"):
        assert data["spent"][axis] == clean_spent(clean, axis)
    # Verify never calls the model: with no response left, a model call would fail.
    (case.folder / "llm_answers.json").write_text("[]")
    expect(case, "agent", clean, data["context"], again, twice)


def clean_spent(clean: dict[str, Any], axis: str) -> int:
    [trace] = clean["traces"].values()
    usage = [e["usage"] for e in trace if e["kind"] == "llm"]
    return sum(u[axis] for u in usage)


@pytest.mark.parametrize(("at", "again", "twice"), llm_boundaries())
def test_a_crash_in_an_llm_loop_resumes_it_exactly_once(
    tmp_path: Path, llm: dict[str, Any], at: str, again: set[str], twice: set[str]
) -> None:
    crash_llm(Case(tmp_path / "case"), llm, at, again, twice)


@pytest.mark.parametrize(
    ("at", "again", "twice"),
    [
        pytest.param("intent:4", {"agent#3", "agent#4"}, set(), id="intent:4-parallel-round"),
        pytest.param("result:4", {"agent#3", "agent#4"}, {"agent#3", "agent#4"}, id="result:4"),
        pytest.param("intent:6", {"agent#5"}, set(), id="intent:6-unknown-tool-turn"),
        pytest.param("intent:10", {"agent#9"}, set(), id="intent:10-summarizer"),
        pytest.param("result:10", {"agent#9"}, set(), id="result:10-summarizer"),
        pytest.param("result:9", {"agent#8"}, {"agent#8"}, id="result:9-tool-after-fold-turn"),
    ],
)
def test_a_crash_in_an_llm_loop_on_postgresql(
    tmp_path: Path, postgres: Any, at: str, again: set[str], twice: set[str]
) -> None:
    # Two schemas: the uninterrupted run and the crashed one have the same run id.
    clean = llm_clean(Case(tmp_path / "clean", postgres.new_schema()))
    crash_llm(Case(tmp_path / "case", postgres.new_schema()), clean, at, again, twice)


# --- 2. a governed abstract node with an approval and a deferred tool ---------------------

APPROVER = "bob"  # an approval's responder must differ from the run's principal (alice)


def answer_asks(case: Case, run_id: str, parked: dict[str, Any], only: str | None = None) -> None:
    """Approve the refund (as bob) and answer the invoice (the deferred tool)."""
    asks = {a["tool_name"]: a for a in parked["asks"]}
    assert sorted(asks) == (["invoice", "refund"] if only is None else sorted(asks)), parked
    if only in (None, "refund"):
        code, data = case("approve", run_id, asks["refund"]["ask_id"], PLAIT_PRINCIPAL=APPROVER)
        assert code == 0 and data["accepted"] is True, data
    if only in (None, "invoice"):
        code, data = case("respond", run_id, asks["invoice"]["ask_id"], "--result", '{"inv": 7}')
        assert code == 0 and data["accepted"] is True, data


def parked(code_and_data: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    code, data = code_and_data
    assert code == 3, data
    assert data["status"] == "parked", data
    return data


@pytest.fixture(scope="module")
def governed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    case = Case(tmp_path_factory.mktemp("governed") / "clean")
    answer_asks(case, "g", parked(case.run("governed.yaml", "g")))
    data = finished(case("resume", "g"))
    clean = snapshot(case, "g", data["context"])
    assert [(e["node"], e["kind"], e["effect_seq"]) for e in clean["traces"][""]] == [
        ("before", "tool", 0),
        ("agent", "llm", 0),
        ("agent", "refused", 0),  # refund before verify
        ("agent", "llm", 1),
        ("agent", "refused", 1),  # a second lookup in one answer (once)
        ("agent", "tool", 2),
        ("agent", "llm", 3),
        ("agent", "ask", 4),  # refund: approval
        ("agent", "ask", 5),  # invoice: deferred
        ("agent", "tool", 6),  # refund, once approved
        ("agent", "llm", 7),
        ("after", "tool", 0),
    ]
    return clean


@pytest.mark.parametrize(
    ("at", "again", "twice"),
    [
        # (The plain tool node `before` is test_crash.py's matrix.)
        ("intent:2", {"agent#0"}, set()),
        ("result:2", {"agent#0"}, set()),  # the turn whose call the flow refuses
        ("intent:4", {"agent#2"}, set()),
        ("result:4", {"agent#2"}, {"agent#2"}),
        ("intent:5", {"agent#3"}, set()),
        ("result:5", {"agent#3"}, set()),
        ("intent:6", set(), set()),  # the asks' intents and the park are one commit
    ],
)
def test_a_crash_before_a_governed_node_parks_resumes_and_parks_once(
    tmp_path: Path, governed: dict[str, Any], at: str, again: set[str], twice: set[str]
) -> None:
    case = Case(tmp_path / "case")
    code, _ = case.run("governed.yaml", "g", PLAIT_CRASH_AT=at)
    assert code == KILLED
    answer_asks(case, "g", parked(case("resume", "g")))
    data = finished(case("resume", "g"))
    expect(case, "g", governed, data["context"], again, twice)


@pytest.mark.parametrize(
    ("at", "again", "twice"),
    [
        # The answers are results already (respond/approve journal them): the resume's
        # first effect is the approved refund.
        ("intent:1", {"agent#6"}, set()),
        ("result:1", {"agent#6"}, {"agent#6"}),
        ("intent:2", {"agent#7"}, set()),
        ("result:2", {"agent#7"}, set()),
        ("intent:3", {"after#0"}, set()),
        ("result:3", {"after#0"}, {"after#0"}),
    ],
)
def test_a_crash_in_the_resume_that_settles_the_answers_redelivers_once(
    tmp_path: Path, governed: dict[str, Any], at: str, again: set[str], twice: set[str]
) -> None:
    case = Case(tmp_path / "case")
    answer_asks(case, "g", parked(case.run("governed.yaml", "g")))
    code, _ = case("resume", "g", PLAIT_CRASH_AT=at)
    assert code == KILLED
    data = finished(case("resume", "g"))
    expect(case, "g", governed, data["context"], again, twice)


@pytest.mark.parametrize("at", ["intent:1", "result:1"])
def test_a_crash_resuming_with_one_answer_of_two_keeps_the_other_ask(
    tmp_path: Path, governed: dict[str, Any], at: str
) -> None:
    """Approved, not yet answered: the resume runs the refund and parks on the invoice."""
    case = Case(tmp_path / "case")
    first = parked(case.run("governed.yaml", "g"))
    answer_asks(case, "g", first, only="refund")
    code, _ = case("resume", "g", PLAIT_CRASH_AT=at)
    assert code == KILLED
    still = parked(case("resume", "g"))
    assert [a["tool_name"] for a in still["asks"]] == ["invoice"]
    answer_asks(case, "g", still, only="invoice")
    data = finished(case("resume", "g"))
    twice = {"agent#6"} if at.startswith("result") else set()
    expect(case, "g", governed, data["context"], {"agent#6"}, twice)


# --- 3. parallel branches: a command tool beside a subgraph, then a timer -------------------


def branches_to_the_end(case: Case, run_id: str) -> dict[str, Any]:
    """Resume at T0 (the timer is not due: parked), then past it (completed)."""
    nap = parked(case("resume", run_id))
    assert nap["asks"] == []
    return finished(case("resume", run_id, PLAIT_NOW_MS=str(LATER)))


@pytest.fixture(scope="module")
def branches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    case = Case(tmp_path_factory.mktemp("branches") / "clean")
    parked(case.run("branches.yaml", "b"))
    data = finished(case("resume", "b", PLAIT_NOW_MS=str(LATER)))
    clean = snapshot(case, "b", data["context"])
    assert [(e["superstep"], e["node"], e["kind"]) for e in clean["traces"][""]] == [
        (1, "start", "tool"),
        (2, "left", "tool"),
        (2, "right", "tool"),
        (3, "join", "tool"),
        (4, "nap", "timer"),
        (5, "finish", "tool"),
    ]
    assert [e["node"] for e in clean["traces"]["~"]] == ["c1", "c2"]
    return clean


WAVE = {"left#0", "right#0"}  # the parallel branches: the command tool and the subgraph

BRANCH_BOUNDARIES = [
    # Intents, counted across the process: start 1, left and right 2-3 (one commit), the
    # child's c1 4 and c2 5, join 6, the timer 7. Results: start 1, the child's c1 2 and c2
    # 3, then the parent's wave (left, right) 4-5, join 6. While the child runs, the
    # command tool is in flight beside it: a crash then may find it run or not.
    pytest.param("intent:2", WAVE, set(), set(), id="intent:2-the-wave"),
    pytest.param("intent:4", WAVE | {"~c1#0"}, set(), {"left#0"}, id="intent:4-child-c1"),
    pytest.param("result:2", WAVE | {"~c1#0"}, {"~c1#0"}, {"left#0"}, id="result:2-child-c1"),
    pytest.param("result:3", WAVE | {"~c2#0"}, {"~c2#0"}, {"left#0"}, id="result:3-child-c2"),
    pytest.param("result:4", WAVE, {"left#0"}, set(), id="result:4-the-wave"),
    pytest.param("intent:6", {"join#0"}, set(), set(), id="intent:6"),
    pytest.param("result:6", {"join#0"}, {"join#0"}, set(), id="result:6"),
    pytest.param("intent:7", set(), set(), set(), id="intent:7-the-timer-parks"),
]


@pytest.mark.parametrize(("at", "again", "twice", "maybe"), BRANCH_BOUNDARIES)
def test_a_crash_around_parallel_branches_and_a_child_resumes_each_effect_once(
    tmp_path: Path,
    branches: dict[str, Any],
    at: str,
    again: set[str],
    twice: set[str],
    maybe: set[str],
) -> None:
    case = Case(tmp_path / "case")
    code, _ = case.run("branches.yaml", "b", PLAIT_CRASH_AT=at)
    assert code == KILLED
    data = branches_to_the_end(case, "b")
    expect(case, "b", branches, data["context"], again, twice, maybe)


@pytest.mark.parametrize(
    ("at", "again", "twice"),
    [
        # The resume past the wake time: the timer's result 1, finish's intent 1, result 2.
        ("result:1", set(), set()),
        ("intent:1", {"finish#0"}, set()),
        ("result:2", {"finish#0"}, {"finish#0"}),
    ],
)
def test_a_crash_in_the_resume_that_settles_a_due_timer(
    tmp_path: Path, branches: dict[str, Any], at: str, again: set[str], twice: set[str]
) -> None:
    case = Case(tmp_path / "case")
    parked(case.run("branches.yaml", "b"))
    code, _ = case("resume", "b", PLAIT_NOW_MS=str(LATER), PLAIT_CRASH_AT=at)
    assert code == KILLED
    data = finished(case("resume", "b", PLAIT_NOW_MS=str(LATER)))
    expect(case, "b", branches, data["context"], again, twice)


def test_kill_9_inside_the_child_mid_wave_redelivers_the_wave_once(
    tmp_path: Path, branches: dict[str, Any]
) -> None:
    case = Case(tmp_path / "case")
    env = {**case.env, "CRASHMATRIX_BLOCK": "c2", "CRASHMATRIX_BLOCK_AFTER": "shell"}
    args = ["run", str(case.folder / "branches.yaml"), "--run-id", "b", "--db", case.db]
    proc = subprocess.Popen([PLAIT, *args], cwd=case.folder, stdout=subprocess.DEVNULL, env=env)
    marker = Path(f"{case.count_file}.blocked")
    deadline = time.monotonic() + 60
    while not marker.exists():  # synchronization, not timing: c2 is mid-call
        assert proc.poll() is None, "the run ended before reaching the blocking tool"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == KILLED
    data = branches_to_the_end(case, "b")
    # The command tool had finished, its result waiting for the wave: it runs again.
    expect(case, "b", branches, data["context"], WAVE | {"~c2#0"}, {"left#0", "~c2#0"})


# --- 4. a fork that continues a run -----------------------------------------------------------


def fork_of_branches(case: Case, **env: str) -> tuple[int, str]:
    """Park run ``b`` on its timer, then fork it from superstep 1 (``start`` done): the
    fork runs the branches, the child and join again, then parks on its own timer.
    Returns the fork's exit code and run id; the count file then holds the fork's only."""
    parked(case.run("branches.yaml", "b"))
    case.count_file.rename(case.folder / "base-count.txt")
    code, _ = case("fork", "b", "--at", "1", **env)
    with Runtime(case.db) as rt:
        [fork_id] = [
            i.run_id
            for i in rt.store.list_runs()
            if i.run_id.startswith("b-fork-") and "~" not in i.run_id
        ]
    return code, fork_id


@pytest.fixture(scope="module")
def forked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    case = Case(tmp_path_factory.mktemp("fork") / "clean")
    code, fork_id = fork_of_branches(case)
    assert code == 3
    data = finished(case("resume", fork_id, PLAIT_NOW_MS=str(LATER)))
    clean = snapshot(case, fork_id, data["context"])
    assert [e["node"] for e in clean["traces"][""]] == ["left", "right", "join", "nap", "finish"]
    return clean


@pytest.mark.parametrize(
    ("at", "again", "twice", "maybe"),
    [
        # In the fork's process: intents left and right 1-2, the child's c1 3 and c2 4,
        # join 5, the timer 6; results: the child's c1 1 and c2 2, the wave 3-4, join 5.
        pytest.param("intent:1", WAVE, set(), set(), id="intent:1-the-wave"),
        pytest.param("result:2", WAVE | {"~c2#0"}, {"~c2#0"}, {"left#0"}, id="result:2-child"),
        pytest.param("result:3", WAVE, {"left#0"}, set(), id="result:3-the-wave"),
        pytest.param("result:5", {"join#0"}, {"join#0"}, set(), id="result:5"),
        pytest.param("intent:6", set(), set(), set(), id="intent:6-the-timer-parks"),
    ],
)
def test_a_crash_while_a_fork_continues_resumes_the_fork_exactly_once(
    tmp_path: Path,
    forked: dict[str, Any],
    at: str,
    again: set[str],
    twice: set[str],
    maybe: set[str],
) -> None:
    case = Case(tmp_path / "case")
    code, fork_id = fork_of_branches(case, PLAIT_CRASH_AT=at)
    assert code == KILLED
    data = branches_to_the_end(case, fork_id)
    expect(case, fork_id, forked, data["context"], again, twice, maybe)
    # The base run is never touched: still parked on its timer, and it verifies.
    with Runtime(case.db) as rt:
        assert rt.store.get_run("b").status == "parked"
        assert rt.verify("b").up_to == "park"
