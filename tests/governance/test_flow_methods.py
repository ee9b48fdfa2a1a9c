"""The seed's surface on ``Flow``: validate, state_keys_read, compile, compile_with_tools and
to_mermaid as methods, each the same judgement as the module function it stands on."""

from __future__ import annotations

import pytest

from plait.core.errors import PlaitError
from plait.governance import (
    After,
    CompiledFlow,
    Flow,
    Step,
    always,
    called_ok,
    compile,
    compile_with_tools,
    is_true,
    state_keys_read,
    to_mermaid,
    validate,
)


def ok(sid: str, **kw) -> Step:
    return Step(sid, done=kw.pop("done", always()), **kw)


def refused(call) -> PlaitError:
    with pytest.raises(PlaitError) as caught:
        call()
    assert caught.value.code == "E027"
    return caught.value


def test_validate_passes_a_well_formed_flow_and_returns_nothing(refund_flow):
    assert refund_flow.validate() is None


def test_validate_raises_every_problem_the_module_function_lists():
    flow = Flow((ok("a"), ok("a"), Step("c")))
    error = refused(flow.validate)
    assert list(error.problems) == validate(flow)
    assert len(error.problems) == 2  # the duplicate id and the step that can never complete


def test_state_keys_read_is_the_sorted_keys_every_guard_reads(refund_flow):
    assert refund_flow.state_keys_read() == ["account", "confirmed", "customer_changed_mind"]
    assert refund_flow.state_keys_read() == state_keys_read(refund_flow)


def test_compile_returns_the_flow_with_its_tool_universe_in_declaration_order(refund_flow):
    compiled = refund_flow.compile()
    assert isinstance(compiled, CompiledFlow)
    assert compiled.flow is refund_flow
    assert compiled.tools == (
        "lookup_account",
        "lookup_policy",
        "confirm_with_customer",
        "issue_refund",
        "close_account",
        "escalate_to_human",
    )


def test_compile_refuses_what_only_compile_finds_with_every_problem():
    flow = Flow(
        (ok("a", terminal=True), ok("b", after=(After("a"),))),
        confirm_tools=("pay",),
    )
    assert validate(flow) == []
    error = refused(flow.compile)
    assert list(error.problems) == compile(flow)
    assert [p.message for p in error.problems] == [
        "step 'b' is unreachable: it comes after terminal step 'a', "
        "and a terminal step ends the flow",
        "commit tool 'pay' has no never('pay').until(...) guard",
    ]


def test_compile_with_tools_accepts_a_registry_that_covers_the_flow(refund_flow, refund_tools):
    compiled = refund_flow.compile_with_tools(refund_tools)
    assert compiled == refund_flow.compile()
    assert refund_flow.compile_with_tools(tuple(refund_tools)) == compiled


def test_compile_with_tools_names_each_unknown_tool_like_the_module_function(refund_flow):
    tools = ["lookup_acount", "lookup_policy", "issue_refund"]
    error = refused(lambda: refund_flow.compile_with_tools(tools))
    assert list(error.problems) == compile_with_tools(refund_flow, tools)
    assert error.problems[0].message == (
        "step 'verify' allow names unknown tool 'lookup_account' (did you mean 'lookup_acount'?)"
    )


def test_a_tool_named_twice_is_once_in_the_universe():
    flow = (
        Flow.new()
        .step("a", allow=["x", "y"], done=called_ok("x"))
        .commit("x", until=is_true("ok"))
        .ambient("y")
        .build()
    )
    assert flow.compile().tools == ("x", "y")


def test_to_mermaid_is_the_module_rendering(refund_flow):
    assert refund_flow.to_mermaid() == to_mermaid(refund_flow)
    assert refund_flow.to_mermaid().startswith("flowchart TD\n")
