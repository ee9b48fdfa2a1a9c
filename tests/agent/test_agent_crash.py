"""Agent runs survive a crash: resumed from a new process, no model turn is asked twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "crash_agent.py"
EXAMPLE = HERE.parents[1] / "examples" / "agent" / "agent.py"
EFFECTS = 6  # turn, lookup_order, turn, unit_price x2 (one wave), final turn
EXPECTED = {"order_id": "A-1", "total_cents": 7499}


def agent_process(tmp_path: Path, mode: str, run_id: str, env: dict[str, str] | None = None):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    return subprocess.run(
        [sys.executable, str(SCRIPT), db, str(tmp_path), mode, run_id],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def resume_and_verify(tmp_path: Path, run_id: str) -> dict:
    resumed = agent_process(tmp_path, "resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    state = json.loads(resumed.stdout)
    verified = agent_process(tmp_path, "verify", run_id)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["up_to"] == "terminal"
    return state


def test_an_uninterrupted_run_asks_each_turn_once(tmp_path):
    done = agent_process(tmp_path, "start", "clean")

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "status": "Completed",
        "structured_output": EXPECTED,
        "run_step": 3,
        "requests": 3,
    }
    assert lines(tmp_path / "turns.log") == ["0", "1", "2"]
    assert len(lines(tmp_path / "tools.log")) == 3


@pytest.mark.parametrize("n", range(1, EFFECTS + 1))
def test_crash_after_intent_n_then_resume_asks_no_turn_twice(tmp_path, n):
    run_id = f"intent-{n}"

    crashed = agent_process(tmp_path, "start", run_id, env={"PLAIT_CRASH_AT": f"intent:{n}"})
    assert crashed.returncode == -signal.SIGKILL
    state = resume_and_verify(tmp_path, run_id)

    assert state["status"] == "Completed" and state["structured_output"] == EXPECTED
    assert sorted(lines(tmp_path / "turns.log")) == ["0", "1", "2"]  # each turn exactly once
    assert Counter(lines(tmp_path / "tools.log")) == Counter(
        ["lookup_order A-1", "unit_price widget", "unit_price gadget"]
    )


def test_crash_before_a_tool_result_is_committed_reruns_that_tool_but_no_turn(tmp_path):
    # result:2 is the lookup_order call: it ran, its result was never committed.
    crashed = agent_process(tmp_path, "start", "result-2", env={"PLAIT_CRASH_AT": "result:2"})
    assert crashed.returncode == -signal.SIGKILL

    state = resume_and_verify(tmp_path, "result-2")

    assert state["structured_output"] == EXPECTED
    assert sorted(lines(tmp_path / "turns.log")) == ["0", "1", "2"]
    assert lines(tmp_path / "tools.log").count("lookup_order A-1") == 2  # redelivered once


def test_an_interrupted_run_reads_back_with_its_pending_tool_call(tmp_path):
    from plait import Agent, RunStatus

    crashed = agent_process(tmp_path, "start", "mid", env={"PLAIT_CRASH_AT": "intent:2"})
    assert crashed.returncode == -signal.SIGKILL

    with Agent("scripted:unused.json", db=f"sqlite:///{tmp_path / 'runs.db'}") as reader:
        state = reader.state("mid")

    assert state.status is RunStatus.RUNNING
    assert state.run_step == 1 and state.usage.requests == 1 and state.usage.tool_calls == 1
    assert state.output is None and state.structured_output is None
    (pending,) = state.pending_tool_calls
    assert (pending.tool_name, pending.args) == ("lookup_order", {"order_id": "A-1"})
    assert state.latest_response is not None
    assert state.latest_response.tool_calls[0]["id"] == pending.tool_call_id
    assert state.message_history[-1]["tool_calls"][0]["id"] == pending.tool_call_id
    assert state.pending_tool_returns == ()


def test_the_example_runs_offline_and_verifies(tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PLAIT_DB": f"sqlite:///{tmp_path / 'example.db'}"},
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "structured output: OrderTotal(order_id='A-1', total_cents=7499, lines=3)" in done.stdout
    assert "verify: verified" in done.stdout
    assert "#5 llm  completed answers" in done.stdout
