"""Load-time checks: every kind of problem, its message, and every problem at once."""

from __future__ import annotations

import pytest

from plait.core.errors import PlaitError
from plait.governance import (
    After,
    Before,
    Findings,
    Flow,
    NeverUntil,
    Once,
    Require,
    Reset,
    Step,
    always,
    any_of,
    called_ok,
    captured,
    check,
    compile,
    compile_with_tools,
    done,
    edge,
    eq,
    is_set,
    is_true,
    not_,
    state_keys_read,
    unwritten_keys,
    validate,
)


def messages(problems) -> list[str]:
    assert all(p.code == "E027" for p in problems)
    return [p.message for p in problems]


def ok(sid: str, **kw) -> Step:
    return Step(sid, done=kw.pop("done", always()), **kw)


# --- validate ------------------------------------------------------------------------------


def test_a_well_formed_flow_has_no_problems(refund_flow, refund_tools):
    assert validate(refund_flow) == []
    assert compile(refund_flow) == []
    assert compile_with_tools(refund_flow, refund_tools) == []


def test_duplicate_step_ids_are_named_with_their_positions():
    flow = Flow((ok("a"), ok("b"), ok("a")))
    assert messages(validate(flow)) == ["duplicate step id 'a' (steps[0] and steps[2])"]


def test_a_blank_step_id_is_refused():
    assert messages(validate(Flow((ok(" "),)))) == ["steps[0] has an empty id"]


def test_an_edge_from_an_unknown_step_is_named_with_a_suggestion():
    flow = Flow((ok("verify"), ok("offer", after=(After("verfy"),))))
    assert messages(validate(flow)) == [
        "step 'offer' comes after unknown step 'verfy' (did you mean 'verify'?)"
    ]


def test_guards_reading_unknown_steps_are_named_where_they_sit():
    flow = Flow(
        (
            ok("a"),
            Step(
                "b",
                after=(After("a", when=done("ghost")),),
                gate=done("wrap"),
                done=done("nowhere"),
            ),
        )
    )
    assert messages(validate(flow)) == [
        "step 'b' edge from 'a' reads unknown step 'ghost'",
        "step 'b' gate reads unknown step 'wrap'",
        "step 'b' done reads unknown step 'nowhere'",
    ]


def test_a_non_terminal_step_without_done_can_never_complete():
    flow = Flow((Step("limbo"), Step("end", terminal=True)))
    assert messages(validate(flow)) == [
        "step 'limbo' has no 'done' guard and is not terminal, so it can never complete"
    ]


def test_constraints_naming_unknown_steps_are_named():
    flow = Flow(
        (ok("offer"),),
        (Before("offer", "ofer"), Require(("ofer",)), Reset(("x",), done("zzz"))),
    )
    assert messages(validate(flow)) == [
        "reset('x').when reads unknown step 'zzz'",
        "before('offer', 'ofer') names unknown step 'ofer' (did you mean 'offer'?)",
        "require('ofer') names unknown step 'ofer' (did you mean 'offer'?)",
        "reset('x') names unknown step 'x'",
    ]


def test_a_cycle_of_after_edges_is_named_as_a_path():
    flow = Flow(
        (ok("a", after=(After("c"),)), ok("b", after=(After("a"),)), ok("c", after=(After("b"),)))
    )
    assert messages(validate(flow)) == [
        "'after' edges form a cycle: a -> b -> c -> a (no step on it can start)"
    ]


def test_a_step_after_itself_is_a_cycle():
    flow = Flow((ok("a", after=(After("a"),)),))
    assert messages(validate(flow)) == [
        "'after' edges form a cycle: a -> a (no step on it can start)"
    ]


def test_validate_reports_every_problem_at_once():
    flow = Flow((Step("a"), ok("a"), ok("b", after=(After("c"),))), (Require(("d",)),))
    assert messages(validate(flow)) == [
        "duplicate step id 'a' (steps[0] and steps[1])",
        "step 'a' has no 'done' guard and is not terminal, so it can never complete",
        "step 'b' comes after unknown step 'c'",
        "require('d') names unknown step 'd'",
    ]


def test_build_refuses_an_invalid_flow_with_every_problem():
    with pytest.raises(PlaitError) as caught:
        Flow.new().step("a").step("a", after="zz", done=always()).build()
    assert caught.value.code == "E027"
    assert str(caught.value) == "PLAIT-E027 duplicate step id 'a' (steps[0] and steps[1])"
    assert [p.message for p in caught.value.problems][1:] == [
        "step 'a' has no 'done' guard and is not terminal, so it can never complete",
        "step 'a' comes after unknown step 'zz'",
    ]


# --- compile -------------------------------------------------------------------------------


def test_a_step_after_a_terminal_step_is_unreachable_and_so_is_what_follows_it():
    flow = Flow(
        (
            ok("a"),
            Step("end", after=(After("a"),), terminal=True),
            ok("more", after=(After("end"),)),
            ok("after_more", after=(After("more"),)),
        )
    )
    assert validate(flow) == []
    assert messages(compile(flow)) == [
        "step 'more' is unreachable: it comes after terminal step 'end', and a terminal step "
        "ends the flow",
        "step 'after_more' is unreachable: it comes after 'more', which is itself unreachable",
    ]


def test_steps_behind_a_cycle_are_unreachable_but_the_cycle_is_reported_once():
    flow = Flow(
        (ok("a", after=(After("b"),)), ok("b", after=(After("a"),)), ok("c", after=(After("b"),)))
    )
    assert messages(compile(flow)) == [
        "'after' edges form a cycle: a -> b -> a (no step on it can start)",
        "step 'c' is unreachable: it comes after 'b', which is on a cycle",
    ]


def test_guards_that_can_never_hold_make_steps_unreachable():
    flow = Flow(
        (
            ok("a"),
            ok("shut", gate=not_(always())),
            ok("dead_edge", after=(After("a", when=any_of()),)),
            ok("w"),
        ),
        (Before("shut", "w"),),
    )
    assert messages(compile(flow)) == [
        "step 'shut' is unreachable: its gate can never hold",
        "step 'dead_edge' is unreachable: its edge from 'a' has a guard that can never hold",
        "step 'w' is unreachable: it must wait for 'shut' (before), which is itself unreachable",
    ]


def test_a_join_any_step_is_reachable_through_one_live_edge():
    flow = Flow(
        (
            ok("a"),
            Step("end", terminal=True),
            ok("either", after=(After("a"), After("end")), join="any"),
        )
    )
    assert compile(flow) == []


def test_an_ordering_cycle_across_after_and_before_is_named():
    flow = Flow((ok("p"), ok("q", after=(After("p"),))), (Before("q", "p"),))
    assert validate(flow) == []
    assert messages(compile(flow)) == [
        "ordering cycle across 'after' and 'before': p -> q -> p (no step on it can start)"
    ]


def test_a_commit_tool_guarded_by_an_always_true_guard_is_refused():
    flow = Flow.new().step("s", done=called_ok("pay")).commit("pay", until=any_of(always()))
    assert messages(compile(flow.build())) == [
        "commit tool 'pay' is guarded by a guard that always holds, so nothing holds it back"
    ]


def test_a_confirm_tool_without_a_never_until_is_refused():
    flow = Flow((ok("s"),), (Once("pay"),), confirm_tools=("pay",))
    assert messages(compile(flow)) == ["commit tool 'pay' has no never('pay').until(...) guard"]


def test_a_never_until_reading_an_unknown_step_would_refuse_forever():
    flow = Flow((ok("verify"),), (NeverUntil("pay", done("verfy")),))
    assert validate(flow) == []
    assert messages(compile(flow)) == [
        "never('pay').until reads unknown step 'verfy' (did you mean 'verify'?), so 'pay' "
        "would be refused forever"
    ]


# --- tools and keys ------------------------------------------------------------------------


def test_compile_with_tools_names_every_unknown_tool_where_it_is_used():
    flow = Flow(
        (Step("s", allow=("lookup_acount",), deny=("close",), done=called_ok("isue")),),
        (Once("pai"), NeverUntil("pai", is_true("ok"))),
        confirm_tools=("pai",),
        ambient=("escalte",),
    )
    tools = ["lookup_account", "issue", "pay", "escalate"]
    assert compile(flow) == []
    assert messages(compile_with_tools(flow, tools)) == [
        "step 's' allow names unknown tool 'lookup_acount' (did you mean 'lookup_account'?)",
        "step 's' deny names unknown tool 'close'",
        "step 's' done called_ok names unknown tool 'isue' (did you mean 'issue'?)",
        "once names unknown tool 'pai' (did you mean 'pay'?)",
        "never names unknown tool 'pai' (did you mean 'pay'?)",
        "confirm_tools names unknown tool 'pai' (did you mean 'pay'?)",
        "ambient names unknown tool 'escalte' (did you mean 'escalate'?)",
    ]


def test_state_keys_read_covers_every_guard_and_no_tool_or_step():
    flow = (
        Flow.new()
        .step("s", gate=is_true("b"), done=captured("a", "c"))
        .step("u", after=[edge("s", when=is_true("e"))], done=called_ok("tool"))
        .never("tool")
        .until(is_set("y"))
        .reset("s")
        .when(eq("z", 1))
        .require("u")
        .build()
    )
    assert state_keys_read(flow) == ["a", "b", "c", "e", "y", "z"]


def test_state_keys_read_of_the_contract_example(refund_flow):
    assert state_keys_read(refund_flow) == ["account", "confirmed", "customer_changed_mind"]


def test_unwritten_keys_are_warnings_with_a_suggestion():
    flow = Flow.new().step("s", gate=is_true("acount"), done=captured("acount", "c")).build()
    assert messages(unwritten_keys(flow, ["account", "c"])) == [
        "step 's' gate reads key 'acount', which no node, tool or ask declares it writes "
        "(did you mean 'account'?)"
    ]


def test_check_separates_errors_from_warnings(refund_flow, refund_tools):
    findings = check(refund_flow, refund_tools, writes=["account", "confirmed"])
    assert findings.errors == ()
    assert messages(findings.warnings) == [
        "reset('offer').when reads key 'customer_changed_mind', which no node, tool or ask "
        "declares it writes"
    ]
    broken = Flow((Step("s", allow=("nope",), done=is_true("k")),))
    found = check(broken, tools=[], writes=[])
    assert isinstance(found, Findings)
    assert messages(found.errors) == ["step 's' allow names unknown tool 'nope'"]
    assert len(found.warnings) == 1
    assert check(broken) == Findings()
