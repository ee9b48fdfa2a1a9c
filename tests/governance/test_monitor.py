"""The flow monitor: eligibility, latching, resets, and the admission order."""

from __future__ import annotations

from plait.core.canonical import dumps, loads
from plait.governance import (
    Flow,
    FlowRuntime,
    active_steps,
    admit,
    admit_answer,
    called_ok,
    done,
    edge,
    eq,
    is_set,
    is_true,
    latch,
    missing_required,
    offered_tools,
    postures,
    record_answer,
    record_success,
    start,
)


def chain() -> Flow:
    return (
        Flow.new()
        .step("a", done=called_ok("ta"), allow=["ta"])
        .step("b", after="a", done=called_ok("tb"), allow=["tb"])
        .step("c", after="b", done=is_true("c_done"))
        .build()
    )


# --- eligibility ---------------------------------------------------------------------------


def test_a_step_without_after_edges_is_active_at_start():
    assert active_steps(chain(), start(chain(), {})) == ["a"]


def test_a_step_after_another_waits_until_that_step_is_done():
    flow = chain()
    rt = record_success(flow, start(flow, {}), "ta", None)
    assert rt.done == {"a"}
    assert active_steps(flow, rt) == ["b"]


def test_join_all_needs_every_edge_and_join_any_needs_one():
    flow = (
        Flow.new()
        .step("x", done=is_true("x"))
        .step("y", done=is_true("y"))
        .step("both", after=["x", "y"], done=is_true("never"))
        .step("either", after=["x", "y"], join="any", done=is_true("never"))
        .build()
    )
    rt = start(flow, {"x": True})
    assert active_steps(flow, rt) == ["y", "either"]
    rt = record_answer(flow, rt, {"y": True})
    assert active_steps(flow, rt) == ["both", "either"]


def test_a_guarded_edge_is_satisfied_only_while_its_guard_holds():
    flow = (
        Flow.new()
        .step("triage", done=is_set("severity"))
        .step("schedule", after=[edge("triage", when=eq("severity", "routine"))], done=is_true("z"))
        .step("escalate", after=[edge("triage", when=eq("severity", "urgent"))], done=is_true("z"))
        .build()
    )
    rt = start(flow, {"severity": "routine"})
    assert active_steps(flow, rt) == ["schedule"]
    rt = record_answer(flow, rt, {"severity": "urgent"})
    assert active_steps(flow, rt) == ["escalate"]


def test_a_gate_is_evaluated_every_time_and_does_not_latch():
    flow = Flow.new().step("s", gate=is_true("open"), done=is_true("finished")).build()
    rt = start(flow, {"open": True})
    assert active_steps(flow, rt) == ["s"]
    rt = record_answer(flow, rt, {"open": False})
    assert active_steps(flow, rt) == []
    assert rt.done == frozenset()


def test_a_before_constraint_holds_a_step_back_until_the_first_is_done():
    flow = (
        Flow.new()
        .step("a", done=is_true("a"))
        .step("b", done=is_true("b"))
        .before("a", "b")
        .build()
    )
    rt = start(flow, {"b": True})
    assert active_steps(flow, rt) == ["a"]
    assert rt.done == frozenset()
    rt = record_answer(flow, rt, {"a": True})
    assert rt.done == {"a", "b"}


# --- latching ------------------------------------------------------------------------------


def test_done_latches_and_stays_after_its_guard_stops_holding():
    flow = Flow.new().step("s", done=is_true("ok")).build()
    rt = start(flow, {"ok": True})
    rt = record_answer(flow, rt, {"ok": False})
    assert rt.done == {"s"}


def test_a_step_latches_only_while_eligible():
    flow = chain()
    rt = start(flow, {"c_done": True})
    assert "c" not in rt.done


def test_one_event_cascades_through_a_chain_of_steps():
    flow = chain()
    rt = start(flow, {"c_done": True})
    rt = record_success(flow, rt, "tb", None)
    assert rt.done == frozenset()
    rt = record_success(flow, rt, "ta", None)
    assert rt.done == {"a", "b", "c"}


def test_a_terminal_step_completes_when_eligible_and_is_never_active():
    flow = Flow.new().step("a", done=is_true("a")).step("end", after="a", terminal=True).build()
    rt = start(flow, {})
    assert "end" not in rt.done
    rt = record_answer(flow, rt, {"a": True})
    assert rt.done == {"a", "end"}
    assert active_steps(flow, rt) == []


def test_start_latches_what_the_context_already_satisfies():
    flow = chain()
    rt = start(flow, {})
    assert rt.done == frozenset()
    flow = Flow.new().step("s", done=is_set("account")).build()
    assert start(flow, {"account": 7}).done == {"s"}


def test_a_success_counts_the_call_and_merges_an_object_result_by_top_level_key():
    flow = chain()
    rt = start(flow, {"keep": 1, "over": {"a": 1}})
    rt = record_success(flow, rt, "ta", {"over": {"b": 2}, "new": True})
    assert rt.state == {"keep": 1, "over": {"b": 2}, "new": True}
    rt = record_success(flow, rt, "ta", ["not", "an", "object"])
    assert rt.state == {"keep": 1, "over": {"b": 2}, "new": True}
    assert rt.calls == {"ta": 2}


def test_an_answer_merges_its_keys_and_latches():
    flow = Flow.new().step("s", done=is_true("confirmed")).build()
    rt = record_answer(flow, start(flow, {}), {"confirmed": True})
    assert rt.state == {"confirmed": True}
    assert rt.done == {"s"}


def test_latch_changes_nothing_on_a_runtime_at_rest():
    flow = chain()
    rt = record_success(flow, start(flow, {}), "ta", {})
    assert latch(flow, rt) == rt


def test_recording_never_mutates_the_runtime_it_is_handed():
    flow = chain()
    rt = start(flow, {"x": 1})
    before = dumps(rt.to_json())
    record_success(flow, rt, "ta", {"x": 2})
    record_answer(flow, rt, {"y": 3})
    assert dumps(rt.to_json()) == before


# --- resets --------------------------------------------------------------------------------


def paying() -> Flow:
    return (
        Flow.new()
        .step("pay", allow=["charge"], done=called_ok("charge"))
        .once("charge")
        .reset("pay")
        .when(is_true("declined"))
        .build()
    )


def test_a_reset_reopens_its_steps_and_clears_once_counts_on_the_rising_edge():
    flow = paying()
    rt = record_success(flow, start(flow, {}), "charge", {})
    assert rt.done == {"pay"}
    assert admit(flow, rt, "charge").rule == "once"
    rt = record_answer(flow, rt, {"declined": True})
    assert rt.done == frozenset()
    assert rt.calls == {}
    assert admit(flow, rt, "charge").ok
    rt = record_success(flow, rt, "charge", {})
    assert rt.done == {"pay"}


def test_a_reset_does_not_fire_again_while_its_guard_stays_true():
    flow = paying()
    rt = record_answer(flow, start(flow, {}), {"declined": True})
    rt = record_success(flow, rt, "charge", {})
    rt = latch(flow, record_answer(flow, rt, {"declined": True}))
    assert rt.done == {"pay"}
    assert rt.resets == (True,)


def test_a_reset_fires_again_when_its_guard_falls_and_rises():
    flow = paying()
    rt = record_answer(flow, start(flow, {}), {"declined": True})
    rt = record_success(flow, rt, "charge", {})
    rt = record_answer(flow, rt, {"declined": False})
    assert rt.done == {"pay"}
    rt = record_answer(flow, rt, {"declined": True})
    assert rt.done == frozenset()


def test_a_reset_whose_guard_it_undoes_still_settles():
    flow = Flow.new().step("a", done=is_true("a")).reset("a").when(done("a")).build()
    rt = start(flow, {"a": True})
    assert rt.done == {"a"}
    assert latch(flow, rt) == rt


def test_the_last_reset_guard_value_survives_a_json_round_trip():
    flow = paying()
    rt = record_answer(flow, start(flow, {}), {"declined": True})
    rt = record_success(flow, rt, "charge", {})
    again = FlowRuntime.from_json(loads(dumps(rt.to_json())))
    assert again == rt
    assert record_answer(flow, again, {"declined": True}).done == {"pay"}


# --- requirements and postures -----------------------------------------------------------


def test_missing_required_lists_required_steps_not_done(refund_flow):
    rt = start(refund_flow, {"account": 1})
    assert missing_required(refund_flow, rt) == ["offer"]
    rt = record_success(refund_flow, rt, "lookup_account", {"confirmed": True})
    rt = record_success(refund_flow, rt, "issue_refund", {})
    assert missing_required(refund_flow, rt) == []


def test_postures_are_those_of_the_active_steps(refund_flow):
    rt = start(refund_flow, {})
    assert postures(refund_flow, rt) == ["Verify the customer's identity before anything else."]
    rt = record_success(refund_flow, rt, "lookup_account", {"account": 1})
    assert postures(refund_flow, rt) == []


# --- admission: once -> never-until -> deny -> ambient -> allow union ---------------------


def gatekeeper() -> Flow:
    """One active step restricting to [a, b] and denying [d]; x is ambient."""
    return (
        Flow.new()
        .step("work", allow=["a", "b", "n"], deny=["d", "x"], done=is_true("finished"))
        .step("other", allow=["c"], gate=is_true("other_open"), done=is_true("finished"))
        .ambient("x", "y", "z")
        .build()
    )


def test_once_is_decided_before_never_until():
    flow = Flow.new().step("s", done=is_true("f")).once("t").never("t").until(is_true("ok"))
    flow = flow.build()
    rt = record_success(flow, start(flow, {"ok": True}), "t", {"ok": False})
    assert admit(flow, rt, "t").rule == "once"


def test_never_until_is_decided_before_a_step_deny():
    flow = Flow.new().step("s", deny=["t"], done=is_true("f")).never("t").until(is_true("ok"))
    assert admit(flow.build(), start(flow.build(), {}), "t").rule == "never"


def test_a_step_deny_is_decided_before_ambient():
    flow = gatekeeper()
    admission = admit(flow, start(flow, {}), "x")
    assert (admission.ok, admission.rule) == (False, "deny")
    assert admission.reason == "step `work` does not allow it"


def test_ambient_tools_are_exempt_from_allow_lists():
    flow = gatekeeper()
    assert admit(flow, start(flow, {}), "y").ok


def test_ambient_tools_still_obey_once_and_never_until():
    flow = (
        Flow.new()
        .step("s", allow=["a"], done=is_true("f"))
        .ambient("memo", "escalate")
        .once("memo")
        .never("escalate")
        .until(is_true("verified"))
        .build()
    )
    rt = start(flow, {})
    assert admit(flow, rt, "escalate").rule == "never"
    rt = record_success(flow, rt, "memo", {})
    assert admit(flow, rt, "memo").rule == "once"


def test_the_allow_lists_of_all_active_steps_form_a_union():
    flow = gatekeeper()
    rt = start(flow, {"other_open": True})
    assert admit(flow, rt, "a").ok
    assert admit(flow, rt, "c").ok


def test_a_tool_outside_every_active_allow_list_is_refused():
    flow = gatekeeper()
    admission = admit(flow, start(flow, {"other_open": True}), "elsewhere")
    assert (admission.ok, admission.rule) == (False, "allow")
    assert admission.reason == "it is not one of the tools of the current steps (`work`, `other`)"


def test_with_no_restricting_step_active_every_tool_is_admitted():
    flow = (
        Flow.new()
        .step("free", done=is_true("f"))
        .step("later", after="free", allow=["a"], done=is_true("g"))
        .build()
    )
    assert admit(flow, start(flow, {}), "anything").ok
    finished = chain()
    rt = record_success(finished, start(finished, {"c_done": True}), "ta", {})
    rt = record_success(finished, rt, "tb", {})
    assert active_steps(finished, rt) == []
    assert admit(finished, rt, "anything").ok


def test_an_empty_allow_list_admits_only_ambient_tools():
    flow = Flow.new().step("talk", allow=[], done=is_true("f")).ambient("escalate").build()
    rt = start(flow, {})
    assert admit(flow, rt, "escalate").ok
    assert admit(flow, rt, "lookup").rule == "allow"


def test_a_deny_binds_only_while_its_step_is_active():
    flow = (
        Flow.new()
        .step("quiet", deny=["shout"], done=is_true("spoken"))
        .step("loud", after="quiet", done=is_true("f"))
        .build()
    )
    rt = start(flow, {})
    assert admit(flow, rt, "shout").rule == "deny"
    assert admit(flow, record_answer(flow, rt, {"spoken": True}), "shout").ok


def test_a_once_tool_admitted_earlier_in_the_same_answer_is_refused():
    flow = Flow.new().step("s", done=is_true("f")).once("pay").build()
    rt = start(flow, {})
    assert admit(flow, rt, "pay", pending_once={"pay"}).rule == "once"
    assert [a.ok for a in admit_answer(flow, rt, ["pay", "other", "pay"])] == [True, True, False]


def test_offered_tools_skip_never_until_but_not_once(refund_flow, refund_tools):
    rt = start(refund_flow, {"account": 1})
    rt = record_success(refund_flow, rt, "lookup_account", {})
    offered = offered_tools(refund_flow, rt, refund_tools)
    assert "issue_refund" in offered
    assert admit(refund_flow, rt, "issue_refund").rule == "never"
    rt = record_answer(refund_flow, rt, {"confirmed": True})
    rt = record_success(refund_flow, rt, "issue_refund", {})
    assert "issue_refund" not in offered_tools(refund_flow, rt, refund_tools)


def test_observe_mode_admits_everything_and_carries_the_violation():
    flow = Flow.new(mode="observe").step("s", allow=["a"], done=is_true("f")).once("a").build()
    rt = start(flow, {})
    admission = admit(flow, rt, "b")
    assert admission.ok
    assert admission.rule == "allow"
    assert admission.violation == "it is not one of the tools of the current step (`s`)"
    assert admit(flow, rt, "a").violation is None
    assert offered_tools(flow, rt, ["a", "b"]) == ["a", "b"]
    assert [a.rule for a in admit_answer(flow, rt, ["a", "a"])] == [None, "once"]
