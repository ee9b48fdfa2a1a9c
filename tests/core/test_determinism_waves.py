"""Determinism of mixed waves: any completion order within a wave gives the same checkpoints.

``test_determinism.py`` permutes waves of tool nodes; here each wave mixes what a real run
mixes: LLM loops with parallel tool calls (some failing, some refused by a governed flow,
some waiting for approvals answered in any order), Send fan-out with every reducer and
task retries, permanent failures (fail-fast), observe-mode violations, steering messages,
and budgets that run out mid-run. Each property drives the core through the wave harness
(``drive_waves``) with the results of every wave, and every batch of answers, shuffled;
the checkpoint chain and the dispatches must match the unshuffled run byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import permutations
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from plait.core.env import Budgets, NodeExecutor, StepEnv
from plait.core.events import Dispatch, Event, InputReceived
from plait.core.outcomes import Completed, EffectOutcome, Failed, Usage
from plait.core.pending import PendingAsk
from plait.governance import Flow, called_ok, is_true
from support.core_harness import Trace, drive_waves, make_plan

USAGE = Usage(40, 10, 0)


def call(cid: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": cid, "name": name, "arguments": arguments}


def turns(*answers: dict[str, Any] | EffectOutcome) -> list[dict[str, Any] | EffectOutcome]:
    return list(answers)


def model(scripts: dict[str, list[Any]]) -> Callable[[Dispatch], EffectOutcome]:
    """The n-th turn a node sends (re-sent ones too) answers ``scripts[node][n]``."""
    sent: dict[str, int] = {}

    def answer(d: Dispatch) -> EffectOutcome:
        n = sent[d.key.node] = sent.get(d.key.node, -1) + 1
        reply = scripts[d.key.node][n]
        if isinstance(reply, Failed):
            return reply
        return Completed({**reply, "usage": {"input_tokens": 40}}, USAGE)

    return answer


def tools_and_model(
    scripts: dict[str, list[Any]], nodes: Callable[[Dispatch], EffectOutcome]
) -> Callable[[Dispatch], EffectOutcome]:
    """Model turns, model-issued tool calls (``call:<name>``) and tool nodes."""
    turn = model(scripts)

    def effect(d: Dispatch) -> EffectOutcome:
        if d.executor == "llm":
            return turn(d)
        if d.executor.startswith("call:"):
            name, args = d.executor[len("call:") :], d.input
            if name == "write" and args.get("q") == "bad":
                return Failed("ExecutorError", "disk full")
            return Completed({f"{name}_{args.get('q', 'x')}": True, "seen": [name]})
        return nodes(d)

    return effect


def approvals(entry: PendingAsk) -> EffectOutcome:
    """Approve calls one and three, deny the others; an ask node's answer names it."""
    ask = entry.ask
    assert ask is not None
    if ask["tool_name"] is None:
        return Completed({"answer": ask["node"]})
    if ask["input"].get("q") in ("one", "three"):
        return Completed({"approved": True, "by": "bob", "reason": None})
    return Completed({"approved": False, "by": "bob", "reason": "not that one"})


def shuffled(rnd: Any) -> Callable[[list[Event]], list[Event]]:
    def permute(batch: list[Event]) -> list[Event]:
        batch = list(batch)
        rnd.shuffle(batch)
        return batch

    return permute


def same_run(baseline: Trace, other: Trace) -> None:
    assert other.outcome == baseline.outcome
    assert [(d.key, d.input) for d in other.dispatches] == [
        (d.key, d.input) for d in baseline.dispatches
    ]
    assert other.checkpoints == baseline.checkpoints


def decisions(trace: Trace) -> list[dict[str, Any]]:
    return [json.loads(c)["decisions"] for c in trace.checkpoints]


# --- parallel LLM loops, a governed one, approvals, tool nodes with retries -----------------

GOVERNED = Flow.new().step("work", allow=["lookup", "write"], done=is_true("never")).build()

AGENTS = make_plan(
    ["start", "a1", "a2", ("t1", 1), "ask", "join", "end"],
    [
        ("start", "a1"),
        ("start", "a2"),
        ("start", "t1"),
        ("start", "ask"),
        ("a1", "join"),
        ("a2", "join"),
        ("t1", "join"),
        ("ask", "join"),
        ("join", "end"),
    ],
    {"log": "append", "seen": "extend", "meta": "merge", "n": "sum"},
)


def agents_env(budgets: Budgets | None = None) -> StepEnv:
    tools = ["lookup", "write", "approve_me", "forbidden"]
    executors = tuple(
        NodeExecutor("abstract", n.id, {"instruction": f"be {n.id}", "tools": tools})
        if n.id in ("a1", "a2")
        else NodeExecutor("ask", n.id, {"prompt": "Which?"})
        if n.id == "ask"
        else NodeExecutor("tool", n.id)
        for n in AGENTS.nodes
    )
    return StepEnv(
        plan=AGENTS,
        executors=executors,
        budgets=budgets or Budgets(),
        flows={"a2": GOVERNED},
        approval_tools=frozenset({"approve_me"}),
    )


AGENT_SCRIPTS = {
    "a1": turns(
        {"tool_calls": [call("c1", "lookup", q="x"), call("c2", "write", q="bad")]},
        {
            "tool_calls": [
                call("p1", "approve_me", q="one"),
                call("p2", "approve_me", q="two"),
                call("p3", "approve_me", q="three"),
                call("c3", "lookup", q="y"),
            ]
        },
        Failed("Timeout", "slow model"),  # re-sent: the same transcript, the next reply
        {"text": '{"log": "a1", "meta": {"a1": 1}, "n": 3}'},
    ),
    "a2": turns(
        {
            "tool_calls": [
                call("d1", "lookup", q="u"),
                call("d2", "forbidden", q="v"),
                call("d3", "write", q="w"),
                call("d4", "lookup", q="z"),
            ]
        },
        {"text": '{"log": "a2", "seen": ["a2"], "meta": {"a2": 2}}'},
    ),
}


def agent_nodes(d: Dispatch) -> EffectOutcome:
    node = d.key.node
    if node == "t1" and d.key.attempt == 1:
        return Failed("Timeout", "slow tool")
    return Completed({"log": node, "n": 1, "meta": {node: d.key.attempt}})


def agent_effect() -> Callable[[Dispatch], EffectOutcome]:
    return tools_and_model(AGENT_SCRIPTS, agent_nodes)


AGENTS_BASELINE = drive_waves(agents_env(), agent_effect(), answer=approvals)


def test_the_agents_baseline_exercises_what_the_property_shuffles():
    trace = AGENTS_BASELINE
    assert trace.outcome == "Completed"
    kinds = {(d.key.node, d.executor) for d in trace.dispatches}
    assert ("a1", "call:approve_me") in kinds  # the approved call ran
    assert ("a2", "call:forbidden") not in kinds  # refused by the flow
    context = json.loads(trace.checkpoints[-1])["scheduler"]["context"]
    assert context["log"] == ["start", "a1", "a2", "t1", "join", "end"]
    assert context["answer"] == "ask"


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False))
def test_parallel_loops_tool_rounds_and_answers_in_any_order_give_identical_checkpoints(rnd):
    trace = drive_waves(agents_env(), agent_effect(), answer=approvals, permute=shuffled(rnd))
    same_run(AGENTS_BASELINE, trace)


def test_approvals_of_one_round_answered_in_any_order_settle_the_same_way():
    """Three approvals of one model answer (and the ask node) settle in one batch: whatever
    the batch order, the approved calls get the same effect_seqs, the transcript the same
    entries."""
    runs = []
    for order in permutations(range(4)):

        def permute(batch: list[Event], order: tuple[int, ...] = order) -> list[Event]:
            return [batch[i] for i in order] if len(batch) == 4 else batch

        runs.append(drive_waves(agents_env(), agent_effect(), answer=approvals, permute=permute))
    for trace in runs[1:]:
        same_run(runs[0], trace)


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(200, 900))
def test_a_token_budget_running_out_mid_run_gives_identical_checkpoints(rnd, ceiling):
    env = agents_env(Budgets(max_tokens=ceiling))
    baseline = drive_waves(env, agent_effect(), answer=approvals)
    trace = drive_waves(env, agent_effect(), answer=approvals, permute=shuffled(rnd))
    assert baseline.outcome == {"BudgetExhausted": {"axis": "tokens"}}
    same_run(baseline, trace)


@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 6), st.integers(400, 3000))
def test_wall_and_storage_budgets_running_out_mid_run_give_identical_checkpoints(
    rnd, wall_waves, storage
):
    env = agents_env(Budgets(max_wall_ms=10 * wall_waves, max_storage_bytes=storage))
    baseline = drive_waves(env, agent_effect(), answer=approvals)
    trace = drive_waves(env, agent_effect(), answer=approvals, permute=shuffled(rnd))
    assert isinstance(baseline.outcome, dict) and "BudgetExhausted" in baseline.outcome
    same_run(baseline, trace)


# --- failures: fail-fast, governed loops failing after refusals, failing Send tasks ---------


def failing_env(mode: str = "enforce") -> StepEnv:
    plan = make_plan(
        ["start", "g1", "g2", "g3", "end"],
        [("start", g) for g in ("g1", "g2", "g3")] + [(g, "end") for g in ("g1", "g2", "g3")],
    )
    flow = (
        Flow.new(mode)  # type: ignore[arg-type]
        .step("work", allow=["lookup"], done=called_ok("write"))
        .require("work")
        .build()
    )
    tools = ["lookup", "write", "forbidden"]
    executors = tuple(
        NodeExecutor("abstract", n.id, {"instruction": "go", "tools": tools})
        if n.id.startswith("g")
        else NodeExecutor("tool", n.id)
        for n in plan.nodes
    )
    return StepEnv(plan=plan, executors=executors, flows={g: flow for g in ("g1", "g2", "g3")})


REFUSED_THEN_FAILING = turns(
    {"tool_calls": [call("r1", "lookup", q="a"), call("r2", "forbidden", q="b")]},
    Failed("UserAborted", "the user stopped it"),
)


def failing_effect() -> Callable[[Dispatch], EffectOutcome]:
    scripts = {g: REFUSED_THEN_FAILING for g in ("g1", "g2", "g3")}
    return tools_and_model(scripts, lambda d: Completed({"ok": True}))


@settings(max_examples=30, deadline=None)
@given(st.randoms(use_true_random=False))
def test_governed_loops_failing_in_one_wave_record_their_refusals_in_node_order(rnd):
    baseline = drive_waves(failing_env(), failing_effect())
    trace = drive_waves(failing_env(), failing_effect(), permute=shuffled(rnd))
    assert baseline.outcome["Failed"]["node"] == "g1"  # fail-fast: the lowest node index
    refused = decisions(baseline)[-2]["refused"]
    assert [r["node"] for r in refused] == ["g1", "g2", "g3"]
    same_run(baseline, trace)


OBSERVED_FINAL = turns(
    {"tool_calls": [call("o1", "forbidden", q="a")]},
    {"text": "finished without working"},
)


def observed_effect() -> Callable[[Dispatch], EffectOutcome]:
    scripts = {g: OBSERVED_FINAL for g in ("g1", "g2", "g3")}
    return tools_and_model(scripts, lambda d: Completed({"ok": True}))


@settings(max_examples=30, deadline=None)
@given(st.randoms(use_true_random=False))
def test_observe_mode_violations_of_one_wave_are_recorded_in_node_order(rnd):
    baseline = drive_waves(failing_env("observe"), observed_effect())
    trace = drive_waves(failing_env("observe"), observed_effect(), permute=shuffled(rnd))
    assert baseline.outcome == "Completed"
    violations = [v for d in decisions(baseline) for v in d.get("violations", ())]
    assert [v["node"] for v in violations] == ["g1", "g2", "g3"]
    same_run(baseline, trace)


# --- steering: messages waiting when several loops answer in one wave -----------------------


def test_waiting_messages_go_to_the_same_loop_whatever_order_its_answers_arrive_in():
    plan = make_plan(
        ["start", "b1", "b2", "b3", "end"],
        [("start", b) for b in ("b1", "b2", "b3")] + [(b, "end") for b in ("b1", "b2", "b3")],
    )
    executors = tuple(
        NodeExecutor("abstract", n.id, {"instruction": "go", "tools": []})
        if n.id.startswith("b")
        else NodeExecutor("tool", n.id)
        for n in plan.nodes
    )
    env = StepEnv(plan=plan, executors=executors)
    script = turns({"text": "first"}, {"text": "second"})
    scripts = {b: script for b in ("b1", "b2", "b3")}
    steer = {1: [InputReceived("also check the fridge")]}
    runs = []
    for order in permutations(range(3)):

        def permute(batch: list[Event], order: tuple[int, ...] = order) -> list[Event]:
            return [batch[i] for i in order] if len(batch) == 3 else batch

        effect = tools_and_model(scripts, lambda d: Completed(None))
        runs.append(drive_waves(env, effect, permute=permute, before=steer))
    assert runs[0].outcome == "Completed"
    for trace in runs[1:]:
        same_run(runs[0], trace)


# --- Send fan-out: every reducer, task retries, nested spawns, failing tasks ----------------

FANOUT = make_plan(
    ["seed", ("worker", 1), "leaf", "collect"],
    [("seed", "worker"), ("worker", "leaf"), ("worker", "collect"), ("leaf", "collect")],
    {"items": "extend", "log": "append", "meta": "merge", "total": "sum", "top": "max"},
)


def fanout_env() -> StepEnv:
    return StepEnv(plan=FANOUT, executors=tuple(NodeExecutor("tool", n.id) for n in FANOUT.nodes))


def fanout_effect(fail_from: int | None = None) -> Callable[[Dispatch], EffectOutcome]:
    def effect(d: Dispatch) -> EffectOutcome:
        node, value = d.key.node, d.input
        if node == "seed":
            return Completed({"$send": [{"node": "worker", "input": {"x": i}} for i in range(9)]})
        if node == "worker":
            x = value["x"]
            if fail_from is not None and x >= fail_from:
                return Failed("UserAborted", f"worker {x} gave up")
            if x % 3 == 1 and d.key.attempt == 1:
                return Failed("ExecutorError", "flaky")
            result: dict[str, Any] = {
                "items": [x, -x],
                "log": x,
                "meta": {f"k{x % 4}": x},
                "last": x,
                "total": x * 0.5 if x % 2 else x,
                "top": x,
            }
            if x == 4:
                result["$send"] = [{"node": "leaf", "input": {"y": y}} for y in range(3)]
            return Completed(result)
        if node == "leaf":
            return Completed({"log": f"leaf{value['y']}", "last": f"leaf{value['y']}"})
        return Completed({"collected": True})

    return effect


FANOUT_BASELINE = drive_waves(fanout_env(), fanout_effect())


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False))
def test_send_tasks_with_every_reducer_in_any_order_give_identical_checkpoints(rnd):
    assert FANOUT_BASELINE.outcome == "Completed"
    trace = drive_waves(fanout_env(), fanout_effect(), permute=shuffled(rnd))
    same_run(FANOUT_BASELINE, trace)


@settings(max_examples=30, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(0, 8))
def test_several_send_tasks_failing_in_one_wave_give_identical_checkpoints(rnd, fail_from):
    baseline = drive_waves(fanout_env(), fanout_effect(fail_from))
    trace = drive_waves(fanout_env(), fanout_effect(fail_from), permute=shuffled(rnd))
    assert baseline.outcome["Failed"]["node"] == "worker"
    same_run(baseline, trace)
