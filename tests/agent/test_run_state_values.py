"""AgentRunState as a value (seed ``AgentRunState``): a model response applied and replaced,
and a JSON round trip that gives back an equal state."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from pydantic import BaseModel

from plait.agent import AgentRunState, RunStatus, RunUsage, ToolCallPart, ToolReturnPart
from plait.models import ModelResponse

CALLS = (
    {"id": "c1", "name": "lookup", "arguments": {"q": "x"}},
    {"id": "c2", "name": "charge", "arguments": {"amount": 3}},
)


def answer(text: str | None = None, calls=(), tokens: tuple[int, int] = (10, 5)) -> ModelResponse:
    return ModelResponse(
        text=text,
        tool_calls=tuple(calls),
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        stop_reason="end_turn",
        model="scripted:r.json",
    )


def through_json(state: AgentRunState, output_type=None) -> AgentRunState:
    return AgentRunState.from_json(json.loads(json.dumps(state.to_json())), output_type)


def test_a_response_joins_the_history_and_its_calls_become_pending():
    start = AgentRunState.new("run-1")
    response = answer(calls=CALLS)

    state = start.apply_model_response(response)

    assert state.latest_response == response
    assert state.message_history == (
        {"role": "assistant", "text": None, "tool_calls": [dict(c) for c in CALLS]},
    )
    assert state.pending_tool_calls == (
        ToolCallPart("lookup", {"q": "x"}, "c1"),
        ToolCallPart("charge", {"amount": 3}, "c2"),
    )
    assert (state.run_step, state.status) == (1, RunStatus.RUNNING)
    assert state.usage == RunUsage(input_tokens=10, output_tokens=5, requests=1)
    assert start == AgentRunState.new("run-1")  # a value: the original is untouched


def test_a_second_response_counts_again_and_consumes_the_returns_it_was_sent_with():
    state = AgentRunState.new("r").apply_model_response(answer(calls=CALLS[:1]))
    state = replace(state, pending_tool_returns=(ToolReturnPart("lookup", "c1", {"a": 1}),))

    state = state.apply_model_response(answer("done", tokens=(30, 7)))

    assert state.run_step == 2
    assert state.usage == RunUsage(input_tokens=40, output_tokens=12, requests=2)
    assert state.pending_tool_calls == () and state.pending_tool_returns == ()
    assert state.message_history[-1] == {"role": "assistant", "text": "done", "tool_calls": []}
    assert len(state.message_history) == 2


def test_a_finished_or_waiting_run_keeps_its_status():
    waiting = AgentRunState("r", "r", status=RunStatus.WAITING)
    assert waiting.apply_model_response(answer("x")).status is RunStatus.WAITING


def test_replacing_the_latest_response_swaps_it_everywhere_and_counts_the_turn_once():
    applied = AgentRunState.new("r").apply_model_response(answer(calls=CALLS, tokens=(10, 5)))
    hooked = answer("no tools after all", tokens=(10, 9))

    state = applied.replace_latest_response(hooked)

    assert state.latest_response == hooked
    assert state.message_history == (
        {"role": "assistant", "text": "no tools after all", "tool_calls": []},
    )
    assert state.pending_tool_calls == ()
    assert state.run_step == 1
    assert state.usage == RunUsage(input_tokens=10, output_tokens=9, requests=1)


def test_replacing_keeps_the_history_before_the_latest_answer():
    first = AgentRunState("r", "r", message_history=({"role": "user", "content": "hi"},))
    state = first.apply_model_response(answer("a")).replace_latest_response(answer("b"))

    assert [m.get("text", m.get("content")) for m in state.message_history] == ["hi", "b"]


def test_there_is_nothing_to_replace_before_a_response():
    with pytest.raises(ValueError, match="no model response to replace"):
        AgentRunState.new("r").replace_latest_response(answer("x"))


def test_an_empty_state_round_trips_through_json():
    state = AgentRunState.new("run-1", "conv-9")
    assert through_json(state) == state


def test_a_full_state_round_trips_through_json():
    approval = ToolReturnPart("charge", "c2", None, ask_id="ask-1", args={"amount": 3})
    deferred = ToolReturnPart("ship", "c3", None, ask_id="ask-2", args={"to": "x"})
    state = AgentRunState(
        run_id="run-1",
        conversation_id="conv-1",
        message_history=(
            {"role": "user", "content": "refund me"},
            {"role": "assistant", "text": None, "tool_calls": [dict(CALLS[0])]},
            {"role": "tool", "tool_call_id": "c1", "content": {"ok": True}, "is_error": False},
        ),
        usage=RunUsage(100, 20, 2, 1, 345),
        run_step=2,
        status=RunStatus.COMPLETED,
        output='{"refunded": true}',
        structured_output={"refunded": True},
        latest_response=answer('{"refunded": true}'),
        pending_tool_calls=(ToolCallPart("lookup", {"q": [1, 2]}, "c1"),),
        pending_tool_returns=(ToolReturnPart("lookup", "c1", "oops", is_error=True),),
        pending_approval_tool_returns=(approval,),
        deferred_tool_returns=(deferred,),
        idle_messages=("also: hurry",),
        metadata={"workflow": "agent", "outcome": {"kind": "completed"}, "created_ms": 1},
    )

    assert through_json(state) == state
    assert through_json(through_json(state)).to_json() == state.to_json()


def test_a_structured_output_model_round_trips_given_its_type():
    class Refund(BaseModel):
        refunded: bool
        amount: int

    state = AgentRunState("r", "r", structured_output=Refund(refunded=True, amount=3))

    assert state.to_json()["structured_output"] == {"refunded": True, "amount": 3}
    assert through_json(state, Refund) == state
    assert through_json(state).structured_output == {"refunded": True, "amount": 3}
