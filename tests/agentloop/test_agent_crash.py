"""Kill `plait run` in the middle of an agent's conversation, resume, verify (§1.2, §3.2, §14).

The agent (agentflow/) answers with one tool call, then a parallel round of two, then a
final answer: six effects, in dispatch order

    1 llm (seq 0)   2 tool a (seq 1)   3 llm (seq 2)   4 tool b (seq 3)   5 tool c (seq 4)
    6 llm (seq 5)

Each test runs the agent in a real subprocess that dies at one journal boundary
(PLAIT_CRASH_AT=intent:N|result:N, or a real SIGKILL while a tool is mid-call), then
`plait resume` and `plait verify`. What must hold:

- the final context (tool log included) and the journal equal an uninterrupted run's;
- the model is called for no turn twice: answers.json holds EXACTLY the three responses an
  uninterrupted run needs (an extra model call would fail the run with "no response
  left"), the trace has three llm entries, and a crash at a tool boundary redelivers no
  turn;
- the tool counts its executions by idempotency key: every tool effect whose result was
  committed ran once; the ones in flight at the crash (the whole wave: both calls of a
  parallel round) ran once more, with the same key;
- `plait verify` passes without the model (it never calls one).
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

FLOW = Path(__file__).parent / "agentflow"
PLAIT = str(Path(sys.executable).parent / "plait")
RUN_ID = "agent"  # the same id everywhere: tool-call ids derive from it
EFFECTS = 6
LLM_EFFECTS = 3
WAVES = [{1}, {2}, {3}, {4, 5}, {6}]
"""Effects dispatched together (by their ordinal in dispatch order): one commit journals
a wave's intents, the wave's results are committed together after all of them finished."""
TOOL_EFFECTS = {2, 4, 5}


def wave_of(n: int) -> set[int]:
    return next(wave for wave in WAVES if n in wave)


class Agent:
    """One copy of agentflow/ in a temporary folder, with its own database and count file."""

    def __init__(self, folder: Path) -> None:
        shutil.copytree(FLOW, folder)
        self.folder = folder
        self.db = f"sqlite:///{folder}/plait.db"
        self.count_file = folder / "count.txt"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAIT_", "AGENT_"))}
        self.env["AGENT_COUNT_FILE"] = str(self.count_file)

    def plait(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return run_plait(  # a process of its own when it is to crash
            [PLAIT, *args],
            cwd=self.folder,
            capture_output=True,
            text=True,
            env={**self.env, **env},
            timeout=120,
        )

    def run_args(self) -> list[str]:
        return ["run", str(self.folder / "workflow.yaml"), "--db", self.db]

    def start(self, **env: str) -> subprocess.CompletedProcess[str]:
        return self.plait(*self.run_args(), "--run-id", RUN_ID, "--json", **env)

    def executions(self) -> Counter[tuple[int, str]]:
        """(effect_seq, idempotency key) -> how many times the tool ran for it."""
        lines = self.count_file.read_text().splitlines() if self.count_file.exists() else []
        return Counter((int(line.split()[1]), line.split()[2]) for line in lines)

    def trace(self) -> list[dict[str, Any]]:
        traced = self.plait("trace", RUN_ID, "--db", self.db, "--json")
        assert traced.returncode == 0, traced.stdout + traced.stderr
        return list(json.loads(traced.stdout)["entries"])

    def verify(self) -> dict[str, Any]:
        verified = self.plait("verify", RUN_ID, "--db", self.db, "--json")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        report: dict[str, Any] = json.loads(verified.stdout)
        assert report["verified"] is True and report["up_to"] == "terminal", report
        return report


def without_redeliveries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "redeliveries"} for e in entries]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uninterrupted run: its output, trace and tool executions."""
    agent = Agent(tmp_path_factory.mktemp("clean") / "agent")
    done = agent.start()
    assert done.returncode == 0, done.stdout + done.stderr
    output = json.loads(done.stdout)
    entries = agent.trace()
    assert [(e["kind"], e["effect_seq"]) for e in entries] == [
        ("llm", 0),
        ("tool", 1),
        ("llm", 2),
        ("tool", 3),
        ("tool", 4),
        ("llm", 5),
    ]
    assert all(e["status"] == "completed" and e["redeliveries"] == 0 for e in entries)
    executions = agent.executions()
    assert sorted(seq for seq, _ in executions) == [1, 3, 4]
    assert set(executions.values()) == {1}
    assert output["context"]["done"] is True
    assert [t["result"] for t in output["context"]["tool_log"]] == [
        {"recorded": "a"},
        {"recorded": "b"},
        {"recorded": "c"},
    ]
    agent.verify()
    return {"context": output["context"], "spent": output["spent"], "entries": entries}


def resume_and_check(agent: Agent, clean: dict[str, Any], in_flight: set[int]) -> None:
    """Resume the crashed run and check it against the uninterrupted one.

    ``in_flight``: ordinals (dispatch order) of the effects journaled as intents without a
    committed result at the crash; each is redelivered exactly once, nothing else is."""
    resumed = agent.plait("resume", RUN_ID, "--db", agent.db, "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    output = json.loads(resumed.stdout)
    assert output["status"] == "completed"
    assert output["context"] == clean["context"]
    for axis in ("input_tokens", "output_tokens"):
        assert output["spent"][axis] == clean["spent"][axis]

    entries = agent.trace()
    assert without_redeliveries(entries) == without_redeliveries(clean["entries"])
    assert sum(e["kind"] == "llm" for e in entries) == LLM_EFFECTS
    redelivered = {n for n, e in enumerate(entries, start=1) if e["redeliveries"]}
    assert redelivered == in_flight
    assert all(e["redeliveries"] <= 1 for e in entries)
    if not in_flight & {1, 3, 6}:
        # The crash was at a tool boundary: no turn was sent to the model again.
        assert all(e["redeliveries"] == 0 for e in entries if e["kind"] == "llm")

    # Verify never calls the model: with no response left, any model call would fail.
    (agent.folder / "answers.json").write_text("[]")
    agent.verify()


def check_tool_executions(agent: Agent, ran_twice: set[int]) -> None:
    """Every tool effect ran once, those of ``ran_twice`` (ordinals) once more, same key."""
    executions = agent.executions()
    seq_of = {2: 1, 4: 3, 5: 4}  # ordinal -> effect_seq of the tool effects
    assert sorted(seq for seq, _ in executions) == [1, 3, 4], executions  # one key per effect
    expected = {seq_of[n]: 2 if n in ran_twice else 1 for n in TOOL_EFFECTS}
    assert {seq: times for (seq, _), times in executions.items()} == expected


@pytest.mark.parametrize("n", range(1, EFFECTS + 1))
def test_crash_after_intent_n_resumes_without_calling_the_model_again(
    tmp_path: Path, clean: dict[str, Any], n: int
) -> None:
    agent = Agent(tmp_path / "agent")
    crashed = agent.start(PLAIT_CRASH_AT=f"intent:{n}")
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    before = agent.executions()
    assert sum(before.values()) == len([t for t in TOOL_EFFECTS if t < min(wave_of(n))])
    resume_and_check(agent, clean, in_flight=wave_of(n))
    check_tool_executions(agent, ran_twice=set())  # journaled, never dispatched: runs once


@pytest.mark.parametrize("n", range(1, EFFECTS + 1))
def test_crash_before_result_n_redelivers_its_wave_once_with_the_same_key(
    tmp_path: Path, clean: dict[str, Any], n: int
) -> None:
    agent = Agent(tmp_path / "agent")
    crashed = agent.start(PLAIT_CRASH_AT=f"result:{n}")
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    wave = wave_of(n)
    before = agent.executions()
    assert sum(before.values()) == len([t for t in TOOL_EFFECTS if t <= max(wave)])
    resume_and_check(agent, clean, in_flight=wave)
    check_tool_executions(agent, ran_twice=wave & TOOL_EFFECTS)


@pytest.mark.parametrize(
    ("tag", "after", "in_flight"),
    [
        pytest.param("a", "", {2}, id="kill-9-mid-tool-call-after-the-model-answered"),
        pytest.param("b", "c", {4, 5}, id="kill-9-mid-parallel-round-after-its-other-call-ran"),
    ],
)
def test_kill_9_while_a_tool_is_mid_call_redelivers_its_round_once(
    tmp_path: Path, clean: dict[str, Any], tag: str, after: str, in_flight: set[int]
) -> None:
    agent = Agent(tmp_path / "agent")
    env = {**agent.env, "AGENT_BLOCK_AT": tag, "AGENT_BLOCK_AFTER": after}
    proc = subprocess.Popen(
        [PLAIT, *agent.run_args(), "--run-id", RUN_ID, "--json"],
        cwd=agent.folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    marker = Path(str(agent.count_file) + ".blocked")
    while not marker.exists():  # synchronization, not timing: wait until the tool is mid-call
        assert proc.poll() is None, "the run ended before reaching the blocking tool"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    resume_and_check(agent, clean, in_flight=in_flight)
    check_tool_executions(agent, ran_twice=in_flight)


def test_an_extra_model_call_would_fail_the_run(tmp_path: Path) -> None:
    # What makes "the model is called for no turn twice" observable: answers.json holds
    # exactly the responses an uninterrupted run needs; a call beyond them fails its turn
    # ("no response left"), and the run fails. (The loop re-sends a turn that failed
    # ExecutorError, so the run fails on the effect bound after futile re-sends.)
    agent = Agent(tmp_path / "agent")
    answers = json.loads((agent.folder / "answers.json").read_text())
    (agent.folder / "answers.json").write_text(json.dumps(answers[:-1]))
    done = agent.start()
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["status"] == "failed"
    turns = [e for e in agent.trace() if e["kind"] == "llm"]
    assert [t["status"] for t in turns[:LLM_EFFECTS]] == ["completed", "completed", "failed"]
    assert "no response left" in turns[LLM_EFFECTS - 1]["failure"]["detail"]
    # The run's own outcome names the file too (CONTRACT.md: "with a message naming the file").
    detail = json.loads(done.stdout)["outcome"]["detail"]
    assert "max_effects_per_attempt" in detail
    assert "scripted model answers.json: no response left" in detail


def test_verify_passes_after_the_scripted_file_is_removed(tmp_path: Path) -> None:
    agent = Agent(tmp_path / "agent")
    done = agent.start()
    assert done.returncode == 0, done.stdout + done.stderr
    (agent.folder / "answers.json").rename(agent.folder / "answers.json.gone")
    agent.verify()
