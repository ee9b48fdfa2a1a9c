"""Approvals that a workflow branches on, denials, and durable timers (docs/architecture.md §8).

An approval completes with {approved, by, reason}; edges `when: approved` and
`'!approved'` pick the branch. `respond --deny` on a free-form ask fails the run
(UserAborted). A `sleep_s` node parks the run until a resume whose clock has passed
its wake time.
"""

from __future__ import annotations

import pytest

from hitl.support import HOUR, OWNER, T0, Plait


def branch_taken(plait: Plait, run_id: str) -> list[str]:
    return [e["node"] for e in plait.trace(run_id) if e["node"] in ("shipped", "held")]


def test_approve_takes_the_approved_branch(plait: Plait):
    assert plait.run("approval", "r").returncode == 3
    ask = plait.only_ask("r")
    ok = plait("approve", "r", ask["ask_id"], "--reason", "looks good", principal="bob")
    assert ok.returncode == 0, ok
    done = plait("resume", "r")
    assert done.returncode == 0, done
    context = done.data["context"]
    assert {k: context[k] for k in ("approved", "by", "reason")} == {
        "approved": True,
        "by": "bob",
        "reason": "looks good",
    }
    assert context["branch"] == "approved"
    assert branch_taken(plait, "r") == ["shipped"]
    [answered] = [e for e in plait.trace("r") if e["node"] == "approve"]
    assert answered["result"] == {"approved": True, "by": "bob", "reason": "looks good"}
    assert plait.verify("r")["up_to"] == "terminal"


def test_deny_with_a_reason_takes_the_other_branch(plait: Plait):
    assert plait.run("approval", "r").returncode == 3
    ask = plait.only_ask("r")
    no = plait("deny", "r", ask["ask_id"], "--reason", "too risky", principal="carol")
    assert no.returncode == 0, no
    assert no.data["accepted"] is True and no.data["by"] == "carol"
    done = plait("resume", "r")
    assert done.returncode == 0, done
    context = done.data["context"]
    assert (context["approved"], context["by"], context["reason"]) == (False, "carol", "too risky")
    assert context["branch"] == "denied"
    assert branch_taken(plait, "r") == ["held"]
    assert plait.verify("r")["up_to"] == "terminal"


@pytest.mark.parametrize(
    ("answer", "approved", "reason"),
    [
        (("--result", '{"approved": true}'), True, None),
        (("--result", '{"approved": false, "reason": "no budget"}'), False, "no budget"),
        (("--deny", "not now"), False, "not now"),
    ],
)
def test_respond_answers_an_approval_too(plait: Plait, answer, approved, reason):
    assert plait.run("approval", "r").returncode == 3
    ask = plait.only_ask("r")
    assert plait("respond", "r", ask["ask_id"], *answer, principal="bob").returncode == 0
    done = plait("resume", "r")
    assert done.returncode == 0, done
    context = done.data["context"]
    assert (context["approved"], context["by"], context["reason"]) == (approved, "bob", reason)
    assert context["branch"] == ("approved" if approved else "denied")


def test_respond_deny_on_a_free_form_ask_fails_the_run_user_aborted(plait: Plait):
    assert plait.run("question", "q").returncode == 3
    ask = plait.only_ask("q")
    denied = plait("respond", "q", ask["ask_id"], "--deny", "wrong customer")
    assert denied.returncode == 0, denied
    ended = plait("resume", "q")
    assert ended.returncode == 1, ended
    run = ended.data
    assert run["status"] == "failed"
    assert run["outcome"]["node"] == "question"
    assert run["outcome"]["detail"] == f"UserAborted: denied by {OWNER}: wrong customer"
    [entry] = [e for e in plait.trace("q") if e["node"] == "question"]
    assert entry["failure"]["cause"] == "UserAborted"
    assert plait.verify("q")["up_to"] == "terminal"


def test_respond_needs_exactly_one_of_result_and_deny(plait: Plait):
    assert plait.run("question", "q").returncode == 3
    ask = plait.only_ask("q")
    both = plait("respond", "q", ask["ask_id"], "--result", "{}", "--deny", "x")
    neither = plait("respond", "q", ask["ask_id"])
    assert both.returncode == neither.returncode == 2
    assert plait.only_ask("q")["ask_id"] == ask["ask_id"]


def test_approve_or_deny_on_a_free_form_ask_is_e028_and_it_stays_pending(plait: Plait):
    assert plait.run("question", "q").returncode == 3
    ask = plait.only_ask("q")
    denied = plait("deny", "q", ask["ask_id"], "--reason", "no way", principal="bob")
    approved = plait("approve", "q", ask["ask_id"], principal="bob")
    assert (denied.returncode, denied.code) == (2, "PLAIT-E028")
    assert (approved.returncode, approved.code) == (2, "PLAIT-E028")
    assert plait.only_ask("q")["ask_id"] == ask["ask_id"]
    assert plait("resume", "q").returncode == 3


# --- durable timers -------------------------------------------------------------


def test_a_timer_parks_the_run_until_its_wake_time(plait: Plait):
    parked = plait.run("timer", "t")
    assert parked.returncode == 3, parked
    assert parked.data["status"] == "parked" and parked.data["asks"] == []
    [timer] = [e for e in plait.trace("t") if e["node"] == "cool_off"]
    assert timer["kind"] == "timer" and timer["status"] == "pending"
    assert timer["input"] == {"wake_ms": T0 + HOUR}
    assert plait.verify("t")["up_to"] == "park"

    early = plait("resume", "t", now=T0 + HOUR - 1)
    assert early.returncode == 3, early
    assert early.data["status"] == "parked"
    shown = plait("show", "t")
    assert (shown.returncode, shown.data["status"], shown.data["asks"]) == (3, "parked", [])

    due = plait("resume", "t", now=T0 + HOUR)
    assert due.returncode == 0, due
    assert due.data["status"] == "completed"
    assert due.data["context"] == {"started": True, "finished": True}
    assert due.data["spent"]["elapsed_ms"] == HOUR
    [timer] = [e for e in plait.trace("t") if e["node"] == "cool_off"]
    assert timer["status"] == "completed" and timer["result"] is None
    assert plait.verify("t")["up_to"] == "terminal"


def test_show_of_a_run_parked_on_a_timer(plait: Plait):
    assert plait.run("timer", "t").returncode == 3
    shown = plait("show", "t")
    assert shown.returncode == 3, shown
    assert shown.data["status"] == "parked" and shown.data["asks"] == []


def test_a_timer_cannot_be_answered(plait: Plait):
    assert plait.run("timer", "t").returncode == 3
    from plait.core.keys import JournalKey, call_id

    timer_id = call_id(JournalKey("t", "", "cool_off", 1, 0, "tool"))
    refused = plait("respond", "t", timer_id, "--result", "null")
    assert (refused.returncode, refused.code) == (2, "PLAIT-E011")
    assert plait("resume", "t", now=T0 + HOUR - 1).returncode == 3
