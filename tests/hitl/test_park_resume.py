"""A parked run survives the exit of its process (docs/architecture.md §8, §5.4, §5.5).

`plait run` parks (exit 3) and exits; hours of fake clock later, new processes list
the ask, answer it and resume the run to completion, and verify passes across the park.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.support import HOUR, OWNER, T0, Plait

LATER = T0 + 3 * HOUR


@pytest.fixture
def processes(plait: Plait, tmp_path: Path) -> Plait:
    """Every call a new process: what the tests named so are about."""
    return Plait(tmp_path, processes=True)


def test_a_parked_run_is_answered_and_resumed_from_new_processes_hours_later(
    processes: Plait,
):
    plait = processes
    started = plait.run("approval", "r1")
    assert started.returncode == 3, started
    run = started.data
    assert run["status"] == "parked" and run["outcome"] is None
    [ask] = run["asks"]
    assert ask["node"] == "approve" and ask["approval"] is True and ask["prompt"] == "Ship it?"
    assert ask["input"] == {"started": True} and "expires_at" not in ask  # no ttl_s

    # Before any answer: verify replays up to the park.
    parked = plait.verify("r1")
    assert parked["up_to"] == "park"

    listed = plait("asks", now=LATER)
    assert listed.returncode == 0, listed
    assert [(a["run_id"], a["ask_id"]) for a in listed.data["asks"]] == [("r1", ask["ask_id"])]

    approved = plait("approve", "r1", ask["ask_id"], now=LATER, principal="bob")
    assert approved.returncode == 0, approved
    assert approved.data["accepted"] is True and approved.data["run_id"] == "r1"
    # `approve` only journals: the run is still parked until someone resumes it.
    assert plait("show", "r1", now=LATER).data["status"] == "parked"

    resumed = plait("resume", "r1", now=LATER)
    assert resumed.returncode == 0, resumed
    done = resumed.data
    assert done["status"] == "completed" and done["outcome"] == {"kind": "completed"}
    assert done["context"] == {
        "started": True,
        "approved": True,
        "by": "bob",
        "reason": None,
        "branch": "approved",
    }
    assert done["asks"] == []
    # The fixed clock never moves inside a process: every active segment is 0 ms, and the
    # three hours of waiting count as elapsed time only.
    assert done["spent"]["wall_ms"] == 0
    assert done["spent"]["elapsed_ms"] == 3 * HOUR

    report = plait.verify("r1")
    assert report["up_to"] == "terminal"
    assert plait("asks", now=LATER).data["asks"] == []


def test_asks_lists_the_pending_asks_of_every_parked_run(plait: Plait):
    assert plait.run("approval", "a").returncode == 3
    assert plait.run("question", "b").returncode == 3
    assert plait.run("timer", "c").returncode == 3  # a timer is no ask: nobody answers it
    listed = plait("asks", now=LATER)
    assert listed.returncode == 0, listed
    found = sorted((a["run_id"], a["node"], a["approval"]) for a in listed.data["asks"])
    assert found == [("a", "approve", True), ("b", "question", False)]
    assert plait("asks", "c").data["asks"] == []


def test_respond_from_a_new_process_completes_a_free_form_ask(processes: Plait):
    plait = processes
    assert plait.run("question", "q1").returncode == 3
    ask = plait.only_ask("q1")
    # The owner may answer an ask that is not an approval.
    answered = plait("respond", "q1", ask["ask_id"], "--result", '{"note": "hi"}', now=LATER)
    assert answered.returncode == 0, answered
    assert answered.data == {"run_id": "q1", "ask_id": ask["ask_id"], "accepted": True, "by": OWNER}
    resumed = plait("resume", "q1", now=LATER)
    assert resumed.returncode == 0, resumed
    assert resumed.data["context"] == {"started": True, "note": "hi", "finished": True}
    assert resumed.data["spent"]["elapsed_ms"] == 3 * HOUR
    assert plait.verify("q1")["up_to"] == "terminal"


def test_resume_of_a_parked_run_without_an_answer_stays_parked(plait: Plait):
    assert plait.run("approval", "r1").returncode == 3
    again = plait("resume", "r1", now=LATER)
    assert again.returncode == 3, again
    assert again.data["status"] == "parked" and len(again.data["asks"]) == 1
    # Polling a parked run announces nothing new.
    assert len(plait.records("r1", "envelope")) == 1
    assert plait.verify("r1")["up_to"] == "park"


def test_an_unknown_run_is_e017(plait: Plait):
    for args in (("asks", "nope"), ("respond", "nope", "x", "--result", "{}"), ("resume", "nope")):
        refused = plait(*args)
        assert refused.returncode == 2, refused
        assert refused.code == "PLAIT-E017"


def test_trace_names_asks_and_timers_by_their_own_kind(plait: Plait):
    assert plait.run("approval", "r1").returncode == 3
    ask = plait.only_ask("r1")
    assert plait("approve", "r1", ask["ask_id"], principal="bob").returncode == 0
    assert plait("resume", "r1").returncode == 0
    assert plait.run("timer", "t1").returncode == 3
    assert plait("resume", "t1", now=T0 + HOUR).returncode == 0
    asked = {e["node"]: e for e in plait.trace("r1")}["approve"]
    timed = {e["node"]: e for e in plait.trace("t1")}["cool_off"]
    assert (asked["kind"], asked["status"]) == ("ask", "answered")
    assert timed["kind"] == "timer"
