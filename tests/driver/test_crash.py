"""Kill the driver at every intent and result boundary, resume, verify (docs/architecture.md §5).

Each test runs `plait run` in a real subprocess that dies at a chosen boundary
(PLAIT_CRASH_AT, or a real SIGKILL mid-wave), then `plait resume` and `plait verify`.
The tools count their own executions in a side file, keyed by idempotency key.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

FLOW = Path(__file__).parent / "crashflow" / "workflow.yaml"
PLAIT = str(Path(sys.executable).parent / "plait")
EFFECTS = 6  # prep x2 (one retry), work x3 (a loop), finish x1


def plait(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PLAIT, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def executions(count_file: Path) -> Counter[str]:
    lines = count_file.read_text().splitlines() if count_file.exists() else []
    return Counter(line.split()[2] for line in lines)


def start_args(tmp_path: Path, run_id: str) -> list[str]:
    db = f"sqlite:///{tmp_path}/plait.db"
    data = json.dumps({"count_file": str(tmp_path / f"{run_id}.count")})
    return ["run", str(FLOW), "--db", db, "--run-id", run_id, "--input", data, "--json"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clean")
    done = plait(*start_args(tmp, "clean"))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    count = executions(tmp / "clean.count")
    assert sum(count.values()) == EFFECTS and set(count.values()) == {1}
    result["context"].pop("count_file")
    return result["context"]


def resume_and_verify(tmp_path: Path, run_id: str, expected_context: dict) -> list[dict]:
    db = f"sqlite:///{tmp_path}/plait.db"
    resumed = plait("resume", run_id, "--db", db, "--json")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    context = json.loads(resumed.stdout)["context"]
    context.pop("count_file")
    assert context == expected_context
    verified = plait("verify", run_id, "--db", db, "--json")
    assert verified.returncode == 0, verified.stdout
    report = json.loads(verified.stdout)
    assert report["verified"] is True and report["up_to"] == "terminal"
    trace = plait("trace", run_id, "--db", db, "--json")
    return json.loads(trace.stdout)["entries"]


@pytest.mark.parametrize("n", range(1, EFFECTS + 1))
def test_crash_after_intent_n_runs_every_effect_exactly_once(tmp_path, uninterrupted, n):
    run_id = f"intent-{n}"
    crashed = plait(*start_args(tmp_path, run_id), env={"PLAIT_CRASH_AT": f"intent:{n}"})
    assert crashed.returncode == -signal.SIGKILL
    entries = resume_and_verify(tmp_path, run_id, uninterrupted)
    count = executions(tmp_path / f"{run_id}.count")
    assert sum(count.values()) == EFFECTS and set(count.values()) == {1}
    # The intent committed before the crash was adopted and redelivered once.
    assert [e["redeliveries"] for e in entries].count(1) == 1
    assert entries[n - 1]["redeliveries"] == 1


@pytest.mark.parametrize("n", range(1, EFFECTS + 1))
def test_crash_before_result_n_redelivers_that_effect_once_with_the_same_key(
    tmp_path, uninterrupted, n
):
    run_id = f"result-{n}"
    crashed = plait(*start_args(tmp_path, run_id), env={"PLAIT_CRASH_AT": f"result:{n}"})
    assert crashed.returncode == -signal.SIGKILL
    before = executions(tmp_path / f"{run_id}.count")
    assert sum(before.values()) == n  # the n-th effect ran, its result was never committed
    entries = resume_and_verify(tmp_path, run_id, uninterrupted)
    count = executions(tmp_path / f"{run_id}.count")
    assert sum(count.values()) == EFFECTS + 1
    twice = [key for key, times in count.items() if times == 2]
    assert len(twice) == 1 and set(count.values()) == {1, 2}
    assert entries[n - 1]["redeliveries"] == 1


def test_kill_9_mid_wave_then_resume_completes_with_one_redelivery(tmp_path, uninterrupted):
    run_id = "killed"
    proc = subprocess.Popen(
        [PLAIT, *start_args(tmp_path, run_id)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "CRASHFLOW_BLOCK_AT": "1"},
    )
    marker = tmp_path / f"{run_id}.count.blocked"
    while not marker.exists():  # synchronization, not timing: wait until the tool is mid-call
        assert proc.poll() is None, "the run ended before reaching the blocking tool"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    entries = resume_and_verify(tmp_path, run_id, uninterrupted)
    count = executions(tmp_path / f"{run_id}.count")
    assert sum(count.values()) == EFFECTS + 1
    assert sorted(count.values()).count(2) == 1
    assert sum(e["redeliveries"] for e in entries) == 1


def crashed_failing_on_dangling(tmp_path: Path, crash_at: str) -> str:
    """Run ``d`` under ``on_dangling: fail``, killed at ``crash_at``; returns the db URL."""
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW.read_text() + "on_dangling: fail\n")
    (tmp_path / "crashtools.py").write_text((FLOW.parent / "crashtools.py").read_text())
    db = f"sqlite:///{tmp_path}/plait.db"
    data = json.dumps({"count_file": str(tmp_path / "c.count")})
    args = ["run", str(flow), "--db", db, "--run-id", "d", "--input", data, "--json"]
    crashed = plait(*args, env={"PLAIT_CRASH_AT": crash_at})
    assert crashed.returncode == -signal.SIGKILL
    return db


def test_on_dangling_fail_refuses_to_resume_with_e008(tmp_path):
    db = crashed_failing_on_dangling(tmp_path, "intent:3")
    resumed = plait("resume", "d", "--db", db, "--json")
    assert resumed.returncode == 2
    assert json.loads(resumed.stdout)["error"]["code"] == "PLAIT-E008"
    # Nothing was lost: the journal still verifies up to where it stopped.
    verified = json.loads(plait("verify", "d", "--db", db, "--json").stdout)
    assert verified["verified"] is True


@pytest.mark.parametrize("crash_at", ["intent:1", "intent:3"])
def test_the_e008_remedy_forks_the_run_onto_a_redelivering_file(tmp_path, crash_at):
    """docs/errors.md: a run refused with E008 goes on as a fork under a file that
    redelivers; from superstep 1 (no checkpoint yet) the fork starts from the input."""
    db = crashed_failing_on_dangling(tmp_path, crash_at)
    assert plait("resume", "d", "--db", db, "--json").returncode == 2  # E008

    forked = plait("fork", "d", "--workflow", str(FLOW), "--db", db, "--json")

    assert forked.returncode == 0, forked.stdout + forked.stderr
    fork_id = json.loads(forked.stdout)["run_id"]
    verified = json.loads(plait("verify", fork_id, "--db", db, "--json").stdout)
    assert verified["verified"] is True
