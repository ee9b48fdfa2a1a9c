"""Observe mode, ``trace`` and ``verify`` of governed runs, end to end on SQLite (§9, §5.5).

Observe mode runs every call and records each one enforce mode would have refused as a
violation: on the transcript entry of its result (so every later turn's journaled request
carries it) and in the node's state while it is in flight. ``trace`` lists it under
``violations`` on the entry of the turn that made the call (CONTRACT.md's entry kinds stay
as they are), ``show`` lists it under the node's governance, and both survive a resume.
``trace`` lists every refusal exactly once, also one no later turn carried (the run
stopped right after it). ``verify`` compares every replayed intent with the journaled
one, so a refusal worded differently is a divergence.

The example's misbehaving script calls offer_refund, lookup_account, disclose_policy,
offer_refund, offer_refund, issue_refund, confirm_with_customer, issue_refund twice, then
answers. With ``max_tokens: 1200`` (100 reserved per turn) it stops after the fifth turn;
raising the ceiling and resuming continues at the sixth. Entries are compared by the
effect_seq of the turn that made the call (a refused call takes none, a run one does).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from typer.testing import CliRunner

from governance_runtime.desk import (
    NOW_MS,
    Desk,
    follows_its_turn,
    kinds,
    notes,
    violations_on_their_turns,
)
from plait import Runtime, Workflow
from plait.cli import app
from plait.driver.verbs import show_object
from plait.governance import Flow, called_ok

ALL_CALLS = [
    "offer_refund",
    "lookup_account",
    "disclose_policy",
    "offer_refund",
    "offer_refund",
    "issue_refund",
    "confirm_with_customer",
    "issue_refund",
    "issue_refund",
]


# --- observe mode -----------------------------------------------------------------------


def test_observe_mode_runs_every_call_and_trace_and_show_list_each_violation(tmp_path, monkeypatch):
    desk = Desk(tmp_path, monkeypatch)
    wf = desk.workflow(mode="observe", tokens=1200)

    with desk.runtime() as rt:
        stopped = rt.run_sync(wf, run_id="obs")
        _, shown = show_object(rt, "obs")
        before = rt.trace("obs")
        rt.raise_budget("obs", {"max_tokens": 100_000})
        done = rt.resume_sync("obs", workflow=wf)
        after = rt.trace("obs")
        report = rt.verify("obs", workflow=wf)

    assert stopped.status == "budget_exhausted"
    where = shown["governance"]["agent"]
    assert where["mode"] == "observe" and "refused" not in where
    assert [(v["tool"], v["rule"]) for v in where["violations"]] == [
        ("offer_refund", "allow"),
        ("offer_refund", "once"),
        ("offer_refund", "once"),
    ]
    assert where["violations"][0]["why"] == (
        "it is not one of the tools of the current step (`verify`)"
    )
    # The fifth turn's violation is carried by no later turn yet: trace reads it from the
    # node's state in the checkpoint.
    assert notes(before, "violation") == [
        (0, "offer_refund", "allow"),
        (6, "offer_refund", "once"),
        (8, "offer_refund", "once"),
    ]
    assert done.status == "completed"
    assert desk.executed() == ALL_CALLS  # observe mode refuses nothing
    assert "refused" not in kinds(after)
    assert notes(after, "violation") == [
        (0, "offer_refund", "allow"),
        (6, "offer_refund", "once"),
        (8, "offer_refund", "once"),
        (10, "issue_refund", "never"),
        (14, "issue_refund", "once"),
        (14, "issue_refund", "once"),
    ]
    assert violations_on_their_turns(after)
    turn = next(e for e in after if e["kind"] == "llm" and e["effect_seq"] == 10)
    (violation,) = turn["violations"]
    assert violation["tool"] == "issue_refund" and violation["rule"] == "never"
    assert violation["reason"] == "it is not allowed until `customer_confirmed` is true"
    assert report.verified, report.to_json()


def test_a_violation_rides_on_the_tool_entry_the_model_reads_without_changing_it(
    tmp_path, monkeypatch
):
    desk = Desk(tmp_path, monkeypatch)
    wf = desk.workflow(mode="observe")

    with desk.runtime() as rt:
        rt.run_sync(wf, run_id="obs")
        last = [e for e in rt.trace("obs") if e["kind"] == "llm"][-1]

    tool_entries = [m for m in last["input"]["messages"] if m["role"] == "tool"]
    assert len(tool_entries) == len(ALL_CALLS)  # every call ran and returned a result
    first = tool_entries[0]
    assert first["is_error"] is False and first["content"] == {"offered_cents": 4999}
    assert first["violation"] == {
        "rule": "allow",
        "why": "it is not one of the tools of the current step (`verify`)",
    }
    assert "violation" not in tool_entries[1]  # lookup_account was admitted cleanly


def runtime(tmp_path: Any) -> Runtime:
    return Runtime(f"sqlite:///{tmp_path / 'plait.db'}", clock=lambda: NOW_MS, principal="alice")


def require_flow(mode: str) -> Flow:
    builder = Flow.new(mode).step("work", allow=["work"], done=called_ok("work")).require("work")
    return builder.build()


def work() -> dict:
    """Do the work."""
    return {"worked": True}


def test_observe_mode_lets_a_final_answer_before_required_steps_finish_the_node(tmp_path):
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([{"text": "finished early"}]))
    wf = (
        Workflow.new("early")
        .tool(work)
        .node("agent", instruction="Work.", tools=["work"], flow=require_flow("observe"))
        .model(f"scripted:{answers}")
    )

    with runtime(tmp_path) as rt:
        result = rt.run_sync(wf, run_id="early")
        report = rt.verify("early", workflow=wf)
        entries = rt.trace("early")

    assert result.status == "completed", result.to_json()
    assert result.context == {"agent": "finished early"}
    assert report.verified
    human = CliRunner().invoke(
        app, ["trace", "early", "--db", f"sqlite:///{tmp_path / 'plait.db'}"]
    )
    assert human.exit_code == 0, human.output
    assert (
        "violation at step 1, node agent, turn 0: final answer: require: a final answer was"
        " given before the required steps were done: `work`"
    ) in " ".join(human.output.split())
    # The answer ended the node and its loop state; the superstep's decision record kept it.
    (turn,) = entries
    assert turn["violations"] == [
        {
            "tool": None,
            "tool_call_id": None,
            "rule": "require",
            "reason": "a final answer was given before the required steps were done: `work`",
        }
    ]


def test_an_unmet_requirement_in_observe_mode_is_a_violation_in_show_and_trace(tmp_path):
    # The early final answer fails the response schema, so the loop goes on; the token
    # ceiling stops it before the next turn, with the violation in the node's state.
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps(
            [
                {"text": "finished early", "usage": {"input_tokens": 120, "output_tokens": 20}},
                {"text": json.dumps({"answer": "ok"})},
            ]
        )
    )
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    schema |= {"required": ["answer"]}
    wf = (
        Workflow.new("early")
        .tool(work)
        .node(
            "agent",
            instruction="Work.",
            tools=["work"],
            flow=require_flow("observe"),
            response_schema=schema,
        )
        .model(f"scripted:{answers}", max_tokens=100)
        .budget(max_tokens=200)
    )

    with runtime(tmp_path) as rt:
        stopped = rt.run_sync(wf, run_id="early")
        _, shown = show_object(rt, "early")
        entries = rt.trace("early")
        rt.raise_budget("early", {"max_tokens": 100_000})
        done = rt.resume_sync("early", workflow=wf)
        report = rt.verify("early", workflow=wf)

    assert stopped.status == "budget_exhausted"
    (violation,) = shown["governance"]["agent"]["violations"]
    assert violation["tool"] is None and violation["rule"] == "require"
    assert violation["why"] == (
        "a final answer was given before the required steps were done: `work`"
    )
    assert kinds(entries) == ["llm"]
    (noted,) = entries[0]["violations"]
    assert noted["tool"] is None and noted["rule"] == "require"
    assert done.status == "completed" and done.context == {"answer": "ok"}
    assert report.verified


# --- refusals in trace --------------------------------------------------------------------


def test_trace_lists_a_refusal_no_later_turn_carried_exactly_once(tmp_path, monkeypatch):
    desk = Desk(tmp_path, monkeypatch)
    wf = desk.workflow(tokens=1200)

    with desk.runtime() as rt:
        rt.run_sync(wf, run_id="enf")
        _, shown = show_object(rt, "enf")
        before = rt.trace("enf")
        rt.raise_budget("enf", {"max_tokens": 100_000})
        done = rt.resume_sync("enf", workflow=wf)
        after = rt.trace("enf")

    assert shown["governance"]["agent"]["refused"] == 2
    refused = [(seq, tool) for seq, tool, _ in notes(before, "refused")]
    assert refused == [(0, "offer_refund"), (7, "offer_refund")]
    assert notes(before, "refused")[1][2].startswith(
        "`offer_refund` was refused and did not run: it has already succeeded"
    )
    assert done.status == "completed"
    refused = [(seq, tool) for seq, tool, _ in notes(after, "refused")]
    assert refused == [
        (0, "offer_refund"),
        (7, "offer_refund"),
        (8, "issue_refund"),
        (11, "issue_refund"),
    ]
    assert follows_its_turn(after, "refused")


# --- verify compares intents --------------------------------------------------------------


def _tamper_intent(path: Any, run_id: str, old: str, new: str) -> None:
    db = sqlite3.connect(path)
    rows = db.execute(
        "SELECT seq, payload FROM journal WHERE run_id = ? AND item = 'intent'"
        " AND executor = 'llm' ORDER BY seq",
        (run_id,),
    ).fetchall()
    seq, payload = next((seq, payload) for seq, payload in rows if old in payload)
    db.execute(
        "UPDATE journal SET payload = ? WHERE run_id = ? AND seq = ?",
        (payload.replace(old, new), run_id, seq),
    )
    db.commit()
    db.close()


def test_verify_fails_when_a_journaled_refusal_is_worded_differently(tmp_path, monkeypatch):
    desk = Desk(tmp_path, monkeypatch)
    wf = desk.workflow()
    with desk.runtime() as rt:
        rt.run_sync(wf, run_id="enf")
        assert rt.verify("enf", workflow=wf).verified
    _tamper_intent(
        tmp_path / "plait.db",
        "enf",
        "it is not one of the tools of the current step",
        "it is not permitted right now",
    )

    with desk.runtime() as rt:
        report = rt.verify("enf", workflow=wf)

    assert not report.verified
    assert report.error == (
        "PLAIT-E009 superstep 1: the llm intent of node 'agent' (attempt 1, effect 1)"
        " differs from the replay in input.messages[3].content"
    )
    assert report.up_to == "superstep 1"


def test_verify_fails_when_a_journaled_offer_differs(tmp_path, monkeypatch):
    desk = Desk(tmp_path, monkeypatch)
    wf = desk.workflow()
    with desk.runtime() as rt:
        rt.run_sync(wf, run_id="enf")
    _tamper_intent(tmp_path / "plait.db", "enf", '"tools":["lookup_account"]', '"tools":[]')

    with desk.runtime() as rt:
        report = rt.verify("enf", workflow=wf)

    assert not report.verified
    assert report.error.startswith("PLAIT-E009 superstep 1: the llm intent of node 'agent'")
    assert report.error.endswith("differs from the replay in input.tools[0]")
