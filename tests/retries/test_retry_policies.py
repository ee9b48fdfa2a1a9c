"""Retry policies (issue #17 part 4): waits between attempts are durable timers whose wake
times follow the policy, replay exactly under verify, park the run when long and are slept
in-process when short; non_retryable stops at once; ``retries: k`` keeps its meaning."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from contract.support import T0, Cli
from plait.core.keys import JournalKey, call_id
from plait.store import open_store

PARK_ALL = {"PLAIT_RETRY_SLEEP_MAX_MS": "0"}
"""No wait is slept in-process: every one parks the run."""
LIVE_CLOCK: dict[str, str | None] = {"PLAIT_NOW_MS": None}
"""The system clock: a wait slept in-process is over when the drive looks again (a pinned
clock never moves, so the run would park)."""


def expected_delay(base_ms: int, jitter_ppm: int, failed: JournalKey) -> int:
    """The policy's wait, worked out independently: the base less its SHA-256 jitter."""
    draw = int.from_bytes(
        hashlib.sha256(b"plait-retry-jitter\x00" + call_id(failed).encode()).digest()[:8]
    )
    return base_ms - base_ms * jitter_ppm * draw // (10**6 * 2**64)


def entries(cli: Cli, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
    found = cli("trace", run_id).data["entries"]
    return [e for e in found if kind is None or e["kind"] == kind]


def calls(cli: Cli) -> dict[str, int]:
    path = cli.folder / "calls.json"
    return json.loads(path.read_text()) if path.exists() else {}


def test_backoff_wake_times_follow_the_policy_and_replay_under_verify(cli: Cli):
    # backoff.yaml: initial_s 10, multiplier 3, max_s 20, jitter 0.5; flaky fails twice.
    assert cli.run("backoff.yaml", "b1", env=PARK_ALL).exit_code == 3
    first = JournalKey("b1", "", "flaky", 1, 0, "tool")
    wake1 = T0 + expected_delay(10_000, 500_000, first)
    assert cli("worker", "--once", now=wake1, env=PARK_ALL).data["statuses"] == {"parked": 1}
    second = JournalKey("b1", "", "flaky", 2, 0, "tool")
    wake2 = wake1 + expected_delay(20_000, 500_000, second)  # 10 s x 3 = 30 s, capped at 20 s
    assert cli("worker", "--once", now=wake2, env=PARK_ALL).data["statuses"] == {"completed": 1}

    timers = entries(cli, "b1", "timer")
    assert [t["input"]["wake_ms"] for t in timers] == [wake1, wake2]
    assert [t["input"]["retry_of"] for t in timers] == [first._asdict(), second._asdict()]
    assert [t["input"]["failed_attempts"] for t in timers] == [1, 2]
    assert [(t["attempt"], t["effect_seq"]) for t in timers] == [(1, 1), (2, 1)]
    assert calls(cli) == {"flaky": 3}
    verified = cli("verify", "b1").data
    assert (verified["verified"], verified["up_to"]) == (True, "terminal")


def test_a_long_backoff_parks_the_run_until_a_worker_finds_it_due(cli: Cli):
    parked = cli.run("backoff.yaml", "b2")  # 10 s x up to 0.5 jitter: past the 5 s sleep limit
    assert parked.exit_code == 3 and parked.data["status"] == "parked"
    assert parked.data["asks"] == []
    wake = entries(cli, "b2", "timer")[0]["input"]["wake_ms"]
    assert T0 + 5_000 <= wake <= T0 + 10_000

    early = cli("worker", "--once", now=wake - 1)

    assert early.data["driven"] == 0
    assert cli("show", "b2").data["status"] == "parked"
    assert calls(cli) == {"flaky": 1}
    on_time = cli("worker", "--once", now=wake)
    assert on_time.data["driven"] == 1
    assert calls(cli) == {"flaky": 2}
    assert cli("verify", "b2").data["verified"] is True


def test_short_waits_are_slept_in_process_and_the_run_completes_in_one_call(cli: Cli):
    done = cli.run("short.yaml", "s1", env=LIVE_CLOCK)  # the workflow-wide retry: 10 ms, 20 ms

    assert done.exit_code == 0, done
    assert done.data["context"] == {"flaky_ok": 3}
    timers = entries(cli, "s1", "timer")
    assert [t["status"] for t in timers] == ["completed", "completed"]
    base = [10, 20]
    for timer, ms, attempt in zip(timers, base, (1, 2), strict=True):
        failed = JournalKey("s1", "", "flaky", attempt, 0, "tool")
        assert timer["input"]["backoff_ms"] == expected_delay(ms, 200_000, failed)
    assert cli("verify", "s1").data["verified"] is True


def test_non_retryable_exception_fails_the_node_at_once(cli: Cli):
    done = cli.run("refuses.yaml", "n1", env=PARK_ALL)

    assert done.exit_code == 1
    assert done.data["outcome"]["detail"] == "ExecutorError: BadRequest: the request is malformed"
    assert calls(cli) == {"refuses": 1}
    assert entries(cli, "n1", "timer") == []
    (result,) = open_store(cli.db).load_journal("n1").results.values()
    assert result.outcome["Failed"]["error"] == "BadRequest"  # what non_retryable named


def test_retries_shorthand_still_retries_at_once_without_the_workflow_policy(cli: Cli):
    # retries: 2 beside a workflow-wide retry: with one-hour waits: three attempts, no wait.
    done = cli.run("shorthand.yaml", "k1", env=PARK_ALL)

    assert done.exit_code == 0, done
    assert calls(cli) == {"flaky": 3}
    assert entries(cli, "k1", "timer") == []
    assert [e["attempt"] for e in entries(cli, "k1", "tool")] == [1, 2, 3]


def test_a_send_task_waits_and_retries_on_its_own(cli: Cli):
    done = cli.run("fanout.yaml", "f1", env=LIVE_CLOCK)

    assert done.exit_code == 0, done
    assert done.data["context"]["results"] == [0, 1, 2]
    timers = entries(cli, "f1", "timer")
    assert [(t["task_path"], t["attempt"]) for t in timers] == [("/000001", 1), ("/000001", 2)]
    assert calls(cli) == {"task0": 1, "task1": 3, "task2": 1}
    assert cli("verify", "f1").data["verified"] is True


def test_an_llm_nodes_failed_turn_and_tool_call_are_retried_before_the_model_sees_them(cli: Cli):
    # agent.json: a timed-out turn, a call to lookup (which fails twice), a final answer.
    done = cli.run("agent.yaml", "a1", env=LIVE_CLOCK)

    assert done.exit_code == 0, done
    assert done.data["context"] == {"ask": "found it"}
    trace = entries(cli, "a1")
    kinds = [(e["kind"], e["status"]) for e in trace]
    assert kinds == [
        ("llm", "failed"),
        ("timer", "completed"),
        ("llm", "completed"),
        ("tool", "failed"),
        ("timer", "completed"),
        ("tool", "failed"),
        ("timer", "completed"),
        ("tool", "completed"),
        ("llm", "completed"),
    ]
    last_turn = trace[-1]["input"]["messages"]
    tool_entries = [m for m in last_turn if m["role"] == "tool"]
    assert tool_entries == [
        {"role": "tool", "tool_call_id": tool_entries[0]["tool_call_id"],
         "content": {"answer": "plait!"}, "is_error": False}
    ]  # fmt: skip
    assert cli("verify", "a1").data["verified"] is True


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"initial_s": 10, "max_s": 5}, "max_s"),
        ({"initial_s": -1}, "initial_s"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"jitter": 1.5}, "jitter"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"backoff": 2}, "backoff"),
        ({"non_retryable": "ValueError"}, "non_retryable"),
    ],
)
def test_a_bad_retry_policy_is_refused_at_check_naming_the_field(
    cli: Cli, policy: dict[str, Any], field: str
):
    for where in ("node", "top"):
        doc: dict[str, Any] = {
            "name": "bad",
            "nodes": [{"id": "flaky", "tool": "flaky"}],
            "tools": {"flaky": {"python": "retry_tools:flaky"}},
        }
        if where == "node":
            doc["nodes"][0]["retry"] = policy
        else:
            doc["retry"] = policy
        path = cli.folder / f"bad_{where}.json"
        path.write_text(json.dumps(doc))

        done = cli.raw("check", str(path), "--json")

        assert (done.exit_code, done.code) == (2, "PLAIT-E019"), done
        assert field in done.data["error"]["message"] and "retry" in done.data["error"]["message"]


def test_retry_on_an_ask_node_or_beside_retries_is_refused(cli: Cli):
    doc = {
        "name": "bad",
        "nodes": [
            {"id": "q", "ask": {"prompt": "?"}, "retry": {"max_attempts": 2}},
            {"id": "flaky", "tool": "flaky", "retries": 1, "retry": {"max_attempts": 2}},
        ],
        "edges": [{"from": "q", "to": "flaky"}],
        "tools": {"flaky": {"python": "retry_tools:flaky"}},
    }
    path = cli.folder / "bad.json"
    path.write_text(json.dumps(doc))

    done = cli.raw("check", str(path), "--json")

    assert done.exit_code == 2
    text = done.stdout + done.stderr
    assert "retry is only for tool and abstract (LLM) nodes" in text
    assert "sets retries and retry" in text


def test_on_postgresql_a_long_backoff_parks_and_a_worker_drives_it_on_when_due(
    cli: Cli, postgres_url: str
):
    cli.db = postgres_url
    assert cli.run("backoff.yaml", "p1", env=PARK_ALL).exit_code == 3
    wake1 = entries(cli, "p1", "timer")[0]["input"]["wake_ms"]
    assert cli("worker", "--once", now=wake1 - 1, env=PARK_ALL).data["driven"] == 0

    assert cli("worker", "--once", now=wake1, env=PARK_ALL).data["statuses"] == {"parked": 1}
    wake2 = entries(cli, "p1", "timer")[1]["input"]["wake_ms"]
    assert cli("worker", "--once", now=wake2, env=PARK_ALL).data["statuses"] == {"completed": 1}

    assert calls(cli) == {"flaky": 3}
    assert cli("verify", "p1").data["verified"] is True


def test_the_python_builder_pins_the_same_policy_as_a_file(cli: Cli):
    from plait.workflow import Workflow, load_workflow

    built = (
        Workflow.new("short")
        .retry_policy(max_attempts=3, initial_s=0.01, multiplier=2, jitter=0.2)
        .node("flaky", tool="flaky")
        .tool("flaky", python="retry_tools:flaky")
    )

    node = built.to_manifest()["nodes"][0]
    assert node["retry"] == {
        "max_attempts": 3, "initial_s": 0.01, "multiplier": 2, "jitter": 0.2,
        "non_retryable": [],
    }  # fmt: skip
    assert node == load_workflow(cli.folder / "short.yaml").to_manifest()["nodes"][0]


def test_a_wait_that_comes_due_while_other_effects_run_is_settled_between_their_waves(
    cli: Cli,
):
    done = cli.run("beside.yaml", "w1", env={**LIVE_CLOCK, **PARK_ALL})

    assert done.exit_code == 0, done
    trace = entries(cli, "w1")
    a_attempts = [i for i, e in enumerate(trace) if e["node"] == "a" and e["kind"] == "tool"]
    b_turns = [i for i, e in enumerate(trace) if e["node"] == "b" and e["kind"] == "llm"]
    assert len(a_attempts) == 3 and len(b_turns) == 21
    assert a_attempts[-1] < b_turns[-1]  # not held back until b's loop is done
    assert cli("verify", "w1").data["verified"] is True
