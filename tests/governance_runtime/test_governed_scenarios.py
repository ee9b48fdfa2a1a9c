"""Governed scenarios through the LLM loop, end to end on SQLite (§8, §9, §10).

``require`` gives one corrective re-prompt, then fails the node; ``reset`` reopens a step
and lets its ``once`` tool run again; a human confirmation (a deferred tool) and an
approval-required commit tool park the run, are answered through the Runtime and land in
the flow state; a flow reaches a node through ``Agent(flow=...)`` and through
``Workflow.node(..., flow="file.yaml")``. Every run verifies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from plait import Agent, RunStatus, Runtime, Workflow
from plait.governance import Flow, all_of, called_ok, is_true
from plait.workflow.checks import flow_warnings

NOW_MS = 1_767_225_600_000


def runtime(tmp_path: Path) -> Runtime:
    return Runtime(f"sqlite:///{tmp_path / 'plait.db'}", clock=lambda: NOW_MS, principal="alice")


def script(tmp_path: Path, *turns: dict[str, Any]) -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(list(turns)))
    return f"scripted:{path}"


def calls(*names: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": {}} for n in names]}


def answer(text: str) -> dict[str, Any]:
    return {"text": text}


def llm_inputs(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["input"] for e in entries if e["kind"] == "llm"]


# --- require ------------------------------------------------------------------------------

WORKED: list[str] = []


def work() -> dict:
    """Do the required work."""
    WORKED.append("work")
    return {"worked": True}


def required_work(model: str) -> Workflow:
    """One agent node whose flow requires a successful ``work`` call before finishing."""
    flow = Flow.new().step("work", allow=["work"], done=called_ok("work")).require("work").build()
    return (
        Workflow.new("req")
        .tool(work)
        .node("agent", instruction="Work.", tools=["work"], flow=flow)
        .model(model)
    )


def test_require_reprompts_once_then_fails_the_node(tmp_path):
    model = script(tmp_path, answer("done already"), answer("still done"))
    wf = required_work(model)

    with runtime(tmp_path) as rt:
        result = rt.run_sync(wf, run_id="req")
        turns = llm_inputs(rt.trace("req"))
        report = rt.verify("req", workflow=wf)

    assert result.status == "failed"
    assert result.to_json()["outcome"] == {
        "kind": "failed",
        "node": "agent",
        "detail": "ExecutorError: final answer given before required steps were done: work",
    }
    assert len(turns) == 2
    assert turns[1]["messages"][-1] == {
        "role": "user",
        "content": "You cannot finish yet: these steps must be done first: work."
        " Continue the task.",
    }
    assert report.verified


def test_after_the_reprompt_the_model_may_do_the_required_step_and_finish(tmp_path):
    WORKED.clear()
    model = script(tmp_path, answer("done already"), calls("work"), answer("worked"))
    wf = required_work(model)

    with runtime(tmp_path) as rt:
        result = rt.run_sync(wf, run_id="req")
        report = rt.verify("req", workflow=wf)

    assert result.status == "completed" and result.context["agent"] == "worked"
    assert WORKED == ["work"]
    assert report.verified


# --- reset --------------------------------------------------------------------------------

DRAFTS: list[str] = []


def write_draft() -> dict:
    """Write the draft."""
    DRAFTS.append("draft")
    return {"drafted": len(DRAFTS)}


def review() -> dict:
    """Review the draft (it is always rejected)."""
    return {"rejected": True}


def test_reset_reopens_a_step_and_lets_its_once_tool_run_again(tmp_path):
    DRAFTS.clear()
    flow = (
        Flow.new()
        .step("draft", allow=["write_draft"], done=called_ok("write_draft"))
        .once("write_draft")
        .reset("draft")
        .when(is_true("rejected"))
        .ambient(["review"])
        .build()
    )
    model = script(
        tmp_path,
        calls("write_draft"),
        calls("write_draft"),  # refused: it already succeeded once
        calls("review"),  # rejected: the reset fires, write_draft's count is cleared
        calls("write_draft"),  # runs again
        answer("redrafted"),
    )
    wf = (
        Workflow.new("drafts")
        .tool(write_draft)
        .tool(review)
        .node("agent", instruction="Draft.", tools=["write_draft", "review"], flow=flow)
        .model(model)
    )

    with runtime(tmp_path) as rt:
        result = rt.run_sync(wf, run_id="drafts")
        entries = rt.trace("drafts")
        report = rt.verify("drafts", workflow=wf)

    assert result.status == "completed"
    assert DRAFTS == ["draft", "draft"]
    assert [e["input"]["tool"] for e in entries if e["kind"] == "refused"] == ["write_draft"]
    offered = [t["tools"] for t in llm_inputs(entries)]
    assert offered == [
        ["write_draft", "review"],  # draft active: its allow list, plus the ambient tool
        ["review"],  # draft done; write_draft is used up (once)
        ["review"],
        ["write_draft", "review"],  # the reset reopened draft
        ["review"],
    ]
    assert report.verified


# --- a human confirmation and an approval-required commit tool ----------------------------

REFUNDS: list[int] = []


def lookup(customer: str) -> dict:
    """Look the customer up."""
    return {"verified": customer == "C-1"}


def confirm(question: str) -> dict:
    """Ask the customer to confirm (deferred: the customer answers)."""
    raise AssertionError("a deferred tool never runs")


def refund(amount: int) -> dict:
    """Issue the refund (approval required)."""
    REFUNDS.append(amount)
    return {"refund_id": f"R-{amount}"}


def refund_flow() -> Flow:
    return (
        Flow.new()
        .step("verify", allow=["lookup"], done=is_true("verified"))
        .step(
            "pay",
            after="verify",
            allow=["confirm", "refund"],
            # The approval's answer lands in the flow state: `approved` completes the step.
            done=all_of(called_ok("refund"), is_true("approved")),
        )
        .commit("refund", until=is_true("customer_confirmed"))
        .require("pay")
        .build()
    )


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def test_a_deferred_confirmation_and_an_approved_commit_park_resume_and_verify(tmp_path):
    REFUNDS.clear()
    model = script(
        tmp_path,
        {"tool_calls": [call("lookup", customer="C-1")]},
        # refund is refused (not confirmed yet); confirm parks for the customer's answer
        {"tool_calls": [call("confirm", question="Refund 50?"), call("refund", amount=50)]},
        {"tool_calls": [call("refund", amount=50)]},  # parks for an approval
        answer("refunded"),
    )
    wf = (
        Workflow.new("refunds")
        .tool(lookup, writes=["verified"])
        .tool(confirm, deferred=True, writes=["customer_confirmed"])
        .tool(refund, approval=True, writes=["refund_id"])
        .node(
            "agent",
            instruction="Refund C-1.",
            tools=["lookup", "confirm", "refund"],
            flow=refund_flow(),
        )
        .model(model)
    )

    with runtime(tmp_path) as rt:
        first = rt.run_sync(wf, run_id="refund")
        (confirmation,) = rt.asks("refund")
        rt.respond("refund", confirmation["ask_id"], {"customer_confirmed": True}, by="carol")
        second = rt.resume_sync("refund", workflow=wf)
        (approval,) = rt.asks("refund")
        rt.respond("refund", approval["ask_id"], approve=True, reason="ok", by="bob")
        done = rt.resume_sync("refund", workflow=wf)
        entries = rt.trace("refund")
        report = rt.verify("refund", workflow=wf)

    assert first.status == "parked" and confirmation["approval"] is False
    assert confirmation["tool_name"] == "confirm"
    assert second.status == "parked" and approval["approval"] is True
    assert approval["tool_name"] == "refund"
    assert done.status == "completed" and done.context["agent"] == "refunded"
    assert REFUNDS == [50]
    assert [e["input"]["tool"] for e in entries if e["kind"] == "refused"] == ["refund"]
    assert [(e["kind"], e["status"]) for e in entries if e["kind"] in ("ask", "tool")] == [
        ("tool", "completed"),  # lookup
        ("ask", "answered"),  # confirm: the customer's answer is its result
        ("ask", "answered"),  # refund's approval
        ("tool", "completed"),  # refund, run once approved
    ]
    assert report.verified and report.up_to == "terminal", report.to_json()
    assert flow_warnings(wf) == []  # `approved` is declared: an approval-required tool writes it


# --- how a flow reaches a node ------------------------------------------------------------

SUPPORT_FLOW = """\
steps:
  - id: verify
    allow: [lookup]
    done: {is_true: verified}
  - id: done
    after: [verify]
    terminal: true
constraints:
  - {once: lookup}
"""


def test_an_agent_with_a_flow_refuses_what_the_flow_does_not_admit(tmp_path):
    refunds: list[int] = []
    model = script(
        tmp_path,
        {"tool_calls": [call("pay", amount=5)]},  # refused: verify first
        {"tool_calls": [call("lookup", customer="C-1")]},
        {"tool_calls": [call("pay", amount=5)]},
        answer("paid"),
    )
    agent: Agent[Any] = Agent(
        model,
        instructions="Pay C-1.",
        flow=yaml.safe_load(SUPPORT_FLOW),
        db=f"sqlite:///{tmp_path / 'agent.db'}",
        principal="alice",
        clock=lambda: NOW_MS,
    )
    agent.tool(lookup)

    @agent.tool
    def pay(amount: int) -> dict:
        """Pay."""
        refunds.append(amount)
        return {"paid": amount}

    state = agent.run_sync("Pay C-1.", run_id="agent-run")

    assert state.status is RunStatus.COMPLETED and state.output == "paid"
    assert refunds == [5]
    refused = [e for e in agent.trace("agent-run") if e["kind"] == "refused"]
    assert [e["input"]["tool"] for e in refused] == ["pay"]
    reason = refused[0]["result"]["reason"]
    assert "it is not one of the tools of the current step (`verify`)" in reason
    assert agent.verify("agent-run").verified


def test_a_builder_node_reads_its_flow_from_a_file_relative_to_the_current_folder(
    tmp_path, monkeypatch
):
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "support.yaml").write_text(SUPPORT_FLOW)
    monkeypatch.chdir(tmp_path)
    model = script(
        tmp_path,
        {"tool_calls": [call("lookup", customer="C-1"), call("lookup", customer="C-1")]},
        answer("verified"),
    )
    wf = (
        Workflow.new("files")
        .tool(lookup)
        .node("agent", instruction="Verify C-1.", tools=["lookup"], flow="flows/support.yaml")
        .model(model)
    )

    with runtime(tmp_path) as rt:
        result = rt.run_sync(wf, run_id="files")
        (tmp_path / "flows" / "support.yaml").unlink()  # pinned in the manifest: never reread
        entries = rt.trace("files")
        report = rt.verify("files", workflow=wf)

    assert result.status == "completed"
    refused = [e for e in entries if e["kind"] == "refused"]
    assert len(refused) == 1 and "may run only once" in refused[0]["result"]["reason"]
    assert report.verified
