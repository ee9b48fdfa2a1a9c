"""What the model reads when a call is refused, and what `plait show` explains."""

from __future__ import annotations

from plait.governance import (
    Flow,
    admit,
    explain,
    is_true,
    record_answer,
    record_success,
    refusal_message,
    start,
)


def test_a_refusal_says_why_what_is_available_and_the_active_posture(refund_flow, refund_tools):
    rt = start(refund_flow, {})
    admission = admit(refund_flow, rt, "issue_refund")
    assert refusal_message(refund_flow, rt, "issue_refund", admission, refund_tools) == (
        "`issue_refund` was refused and did not run: it is not allowed until `confirmed` is "
        "true. Do not tell the user it was done. Available now: `lookup_account`, "
        "`escalate_to_human`. Current step: Verify the customer's identity before anything else."
    )


def test_a_refusal_follows_the_conversation(refund_flow, refund_tools):
    rt = record_success(refund_flow, start(refund_flow, {}), "lookup_account", {"account": 7})
    message = refusal_message(
        refund_flow, rt, "close_account", admit(refund_flow, rt, "close_account"), refund_tools
    )
    assert "step `offer` does not allow it" in message
    assert (
        "Available now: `lookup_policy`, `confirm_with_customer`, `escalate_to_human`." in message
    )
    assert "Verify the customer's identity" not in message


def test_a_spent_once_tool_is_told_not_to_call_again(refund_flow, refund_tools):
    rt = record_success(refund_flow, start(refund_flow, {}), "lookup_account", {"account": 7})
    rt = record_answer(refund_flow, rt, {"confirmed": True})
    rt = record_success(refund_flow, rt, "issue_refund", {})
    message = refusal_message(
        refund_flow, rt, "issue_refund", admit(refund_flow, rt, "issue_refund"), refund_tools
    )
    assert message.startswith(
        "`issue_refund` was refused and did not run: it has already succeeded and may run "
        "only once. Do not call it again."
    )


def test_a_refusal_with_nothing_available_says_to_continue_without_tools():
    flow = Flow.new().step("talk", allow=[], done=is_true("f"), posture="Just talk.").build()
    rt = start(flow, {})
    message = refusal_message(flow, rt, "lookup", admit(flow, rt, "lookup"), ["lookup"])
    assert message == (
        "`lookup` was refused and did not run: it is not one of the tools of the current step "
        "(`talk`). Do not tell the user it was done. No tool is available right now; continue "
        "without one. Current step: Just talk."
    )


def test_explain_shows_active_steps_allowed_tools_and_why_each_blocked_tool_is_blocked(
    refund_flow, refund_tools
):
    rt = start(refund_flow, {})
    assert explain(refund_flow, rt, refund_tools) == {
        "mode": "enforce",
        "active": ["verify"],
        "done": [],
        "waiting_for": {"verify": "`lookup_account` has succeeded at least once"},
        "allowed": ["lookup_account", "escalate_to_human"],
        "offered": ["lookup_account", "escalate_to_human"],
        "blocked": {
            "lookup_policy": "it is not one of the tools of the current step (`verify`)",
            "confirm_with_customer": "it is not one of the tools of the current step (`verify`)",
            "issue_refund": "it is not allowed until `confirmed` is true",
            "close_account": "it is not one of the tools of the current step (`verify`)",
        },
        "missing_required": ["offer"],
        "postures": ["Verify the customer's identity before anything else."],
    }


def test_explain_in_observe_mode_lists_would_be_violations_as_blocked():
    flow = Flow.new(mode="observe").step("s", allow=["a"], done=is_true("f")).build()
    shown = explain(flow, start(flow, {}), ["a", "b"])
    assert shown["allowed"] == ["a"]
    assert shown["offered"] == ["a", "b"]
    assert shown["blocked"] == {"b": "it is not one of the tools of the current step (`s`)"}
