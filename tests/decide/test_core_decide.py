"""The pure parts of core/decide.py: which transcript pairs are whole, what an offer keeps."""

from __future__ import annotations

from plait.core.abstract import AbstractFlow
from plait.core.decide import MORE_TOOLS, narrowed, take_more_tools, tool_pairs

USER = {"role": "user", "content": "go"}


def call(i: int) -> dict:
    return {"role": "assistant", "text": None, "tool_calls": [{"id": f"c{i}", "name": "t"}]}


def result(i: int) -> dict:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": "ok", "is_error": False}


def test_only_whole_tool_pairs_inside_the_range_are_asked_about():
    messages = [USER, call(1), result(1), {"role": "assistant", "text": "hm"}, call(2),
                result(2), result(2), call(3), result(3)]  # fmt: skip
    assert tool_pairs(messages, 1, 9) == [[1, 3], [4, 7], [7, 9]]
    # a range ending inside a pair's results leaves that pair alone
    assert tool_pairs(messages, 1, 6) == [[1, 3]]
    assert tool_pairs(messages, 0, 1) == []


def test_narrowed_keeps_the_offer_and_the_needed_tools_in_the_given_order():
    flow = AbstractFlow(node=0, attempt=1, offer={"tools": ["b"], "seq": 0})
    assert narrowed(flow, ["a", "b", "c"], needed=["c"]) == ["b", "c", MORE_TOOLS]
    assert narrowed(flow, ["b"], needed=[]) == ["b"]  # nothing left out: no more_tools
    flow.offer = {"tools": ["b"], "seq": 0, "widened": True}
    assert narrowed(flow, ["a", "b", "c"], needed=[]) == ["a", "b", "c"]


def test_more_tools_is_answered_at_once_and_widens_the_offer():
    flow = AbstractFlow(node=0, attempt=1, offer={"tools": ["b"], "seq": 0})
    calls = [{"id": "x", "name": MORE_TOOLS, "arguments": {}}, {"id": "y", "name": "b"}]
    rest, entries = take_more_tools(flow, calls)
    assert rest == [calls[1]]
    assert [e["tool_call_id"] for e in entries] == ["x"]
    assert flow.offer["widened"] is True
    # without an offer, more_tools is no tool at all (the loop reports it as unknown)
    bare = AbstractFlow(node=0, attempt=1)
    assert take_more_tools(bare, calls[:1]) == (calls[:1], [])
