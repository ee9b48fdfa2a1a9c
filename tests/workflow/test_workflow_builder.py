"""Building workflows in Python: the same definition and the same checks as a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.core.canonical import dumps
from plait.core.errors import PlaitError
from plait.workflow import NodeDef, ToolDef, Workflow, WorkflowError


def load_order(order_id: str) -> dict:
    """Load one order."""
    return {"order": order_id}


def close_ticket(context: dict) -> dict:
    return {"closed": True}


def test_builder_chain_returns_new_workflows_and_leaves_the_old_alone():
    empty = Workflow.new("demo")

    wf = empty.tool(load_order).node("load", tool="load_order", retries=2)

    assert empty.nodes == () and dict(empty.tools) == {}
    assert wf.nodes == (NodeDef("load", "tool", tool="load_order", retries=2),)


def test_builder_example_plans():
    wf = (
        Workflow.new("demo")
        .tool(load_order)
        .node("load", tool="load_order", retries=2)
        .node("done", tool=close_ticket)
        .edge("load", "done", when="x == 1")
        .reducer("log", "append")
    )

    plan = wf.plan()

    assert [(n.id, n.kind, n.retries) for n in plan.nodes] == [
        ("load", "tool", 2),
        ("done", "tool", 0),
    ]
    assert plan.reducers == {"log": "append"}
    assert wf.base_dir == Path.cwd()


def test_a_function_given_as_tool_is_registered_once_under_its_name():
    wf = Workflow.new("x").node("a", tool=load_order).node("b", tool=load_order)

    assert list(wf.tools) == ["load_order"]
    tool = wf.tools["load_order"]
    assert tool.callable is load_order
    assert tool.python == f"{__name__}:load_order"
    assert tool.description == "Load one order."
    assert tool.input_schema is not None and tool.input_schema["required"] == ["order_id"]


def test_two_tools_with_one_name_are_refused():
    def load_order(order_id: str) -> dict:  # a different function, same name
        return {}

    wf = Workflow.new("x").tool(globals()["load_order"])

    with pytest.raises(WorkflowError) as caught:
        wf.tool(load_order)
    assert caught.value.code == "E019" and "defined twice" in str(caught.value)


def test_kinds_are_derived_from_settings():
    wf = (
        Workflow.new("x")
        .model("openai:gpt-4o-mini")
        .node("think", instruction="hi", tools=[load_order])
        .node("ask", ask="Approve?")
        .node("nap", sleep_s=1.5)
        .node("child", workflow="child.yaml")
    )

    assert [n.kind for n in wf.nodes] == ["abstract", "ask", "timer", "subgraph"]
    assert wf.nodes[1].ask == {"prompt": "Approve?"}
    assert wf.executors()[2].spec == {"sleep_ms": 1500}
    assert wf.executors()[0].spec["tools"] == ["load_order"]


def test_builder_problems_match_the_file_rules_without_lines():
    wf = Workflow.new("x").node("a", tool="nope").node("b").edge("a", "zz")

    with pytest.raises(WorkflowError) as caught:
        wf.plan()

    assert caught.value.source is None
    assert caught.value.lines() == [
        "PLAIT-E004 node 'a': unknown tool 'nope' (no tools are defined)",
        "PLAIT-E006 node 'b': abstract (LLM) node without a model: set llm.model or pass --model",
        "PLAIT-E019 edge 'a -> zz': unknown node 'zz' in 'to'",
    ]
    assert caught.value.problems[0].node == "a"
    assert caught.value.problems[2].edge == 0


def test_problems_lists_without_raising_and_can_skip_the_model_check():
    wf = Workflow.new("x").node("think")

    assert [p.code for p in wf.problems()] == ["E006"]
    assert wf.problems(require_model=False) == ()


def test_builder_budget_and_model_use_file_units():
    wf = Workflow.new("x").tool(load_order).node("a", tool=load_order).budget(max_usd=0.25)

    manifest = wf.model("openai:gpt-4o-mini", max_tokens=256).to_manifest()

    assert manifest["budgets"]["max_usd_micros"] == 250_000
    assert manifest["llm"] == {"model": "openai:gpt-4o-mini", "max_tokens": 256}


def test_builder_settings_are_checked_like_a_file():
    wf = Workflow.new("x").node("a", tool=load_order, retries=-1).budget(max_dollars=3)

    assert [p.message for p in wf.problems()] == [
        "budgets: unknown key 'max_dollars' (expected one of: max_supersteps, max_tokens,"
        " max_usd, max_wall_s, max_storage_bytes)",
        "node 'a': retries must be an integer >= 0, got -1",
    ]


def test_manifest_of_a_builder_workflow_is_canonical_json():
    wf = Workflow.new("x").node("a", tool=load_order).node("b", tool=close_ticket).edge("a", "b")

    text = dumps(wf.to_manifest())

    assert '"kind":"python"' in text and "function" not in text


def test_tool_by_name_with_a_command_and_a_tooldef():
    wf = (
        Workflow.new("x")
        .tool("send", command=["python3", "send.py"], timeout_s=5)
        .tool(ToolDef("clock", mcp={"command": ["srv"], "tool": "now"}))
        .node("a", tool="send")
        .node("b", tool="clock")
        .edge("a", "b")
    )

    assert wf.problems() == ()
    assert wf.tools["send"].command == ("python3", "send.py")
    assert wf.to_manifest()["tools"]["clock"]["kind"] == "mcp"


def test_tool_by_name_with_a_python_spec_is_imported_now():
    with pytest.raises(PlaitError) as caught:
        Workflow.new("x").tool("t", python="no_such_module_for_plait:f")

    assert caught.value.code == "E004"
