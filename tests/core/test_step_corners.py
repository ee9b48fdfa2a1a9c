"""Corners of the step function that decide compatibility (docs/architecture.md §3.2-§3.5a).

Each test pins one rule an audit found no test guarding: joins over arms of different
length, fail-fast's silence at close, cancel while parked, events the core must ignore,
reducer failures, stall culprits, the retry table, loops away from the entry, the byte
round trip of a parked state, and the seed fields of SchedulerState and StepEnv.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plait.core.canonical import dumpb, dumps, loads
from plait.core.env import NodeExecutor, StepEnv
from plait.core.events import (
    CancelSeen,
    ClockReading,
    Command,
    Dispatch,
    EffectResolved,
    EmitEnvelope,
    Event,
    Finish,
    InputReceived,
    Start,
    WriteCheckpoint,
)
from plait.core.keys import JournalKey
from plait.core.outcomes import FAIL_CAUSES, retryable
from plait.core.plan import EdgeSpec, NodeSpec, Plan, build_plan
from plait.core.state import SchedulerState
from plait.core.step import step
from plait.core.walk import stalled_culprit
from support.core_harness import drive, fail, make_env, make_plan, ok

RUN = "run-test"
T0 = 1_000


def decisions(trace) -> list[dict[str, Any]]:
    return [json.loads(c)["decisions"] for c in trace.checkpoints]


def final_state(trace) -> dict[str, Any]:
    return json.loads(trace.checkpoints[-1])["scheduler"]


def state_bytes(state: SchedulerState) -> bytes:
    return dumpb(state.to_json())


def fresh(env: StepEnv) -> SchedulerState:
    return SchedulerState.new(RUN, env.plan)


Inject = Callable[[int, list[Event]], list[Event]]


def stepwise(
    env: StepEnv,
    effect: Callable[[str, int, Any], Any],
    input: Any = None,
    inject: Inject | None = None,
) -> list[tuple[bytes, list[Command]]]:
    """Drive like the wave cadence of §5.2, letting ``inject`` rewrite each step's events.

    Returns the state bytes and the commands after every step, so two drives can be
    compared step by step (the harness's ``drive`` keeps only checkpoints).
    """
    state = fresh(env)
    events: list[Event] = [ClockReading(T0), Start(input)]
    steps: list[tuple[bytes, list[Command]]] = []
    for wave_no in range(1000):
        if inject is not None:
            events = inject(wave_no, events)
        commands = step(env, state, events).commands
        steps.append((state_bytes(state), commands))
        wave = [c for c in commands if isinstance(c, Dispatch)]
        if any(isinstance(c, Finish) for c in commands) or not wave:
            return steps
        clock = T0 + 10 * (wave_no + 1)
        events = [ClockReading(clock)]
        events += [EffectResolved(d.key, effect(d.key.node, d.key.attempt, d.input)) for d in wave]
    raise AssertionError("run did not finish")


def dispatched_keys(steps: list[tuple[bytes, list[Command]]]) -> list[JournalKey]:
    return [c.key for _, commands in steps for c in commands if isinstance(c, Dispatch)]


def ask_env(plan: Plan, **kinds: str) -> StepEnv:
    """Tool executors, except nodes named in ``kinds`` (node id -> executor kind)."""
    executors = []
    for node in plan.nodes:
        kind = kinds.get(node.id, "tool")
        spec = {"prompt": f"{node.id}?"} if kind == "ask" else {}
        executors.append(NodeExecutor(kind, node.id, spec))
    return StepEnv(plan=plan, executors=tuple(executors), ask_ttl_sec=3_600)


# --- 1. AND-join over arms of different length ------------------------------------


def test_and_join_waits_for_the_longer_arm_and_runs_once():
    # a -> b -> j and a -> j: the short arm fires first, the join must wait for b.
    plan = make_plan(["a", "b", "j"], [("a", "b"), ("a", "j"), ("b", "j")])
    trace = drive(make_env(plan), lambda node, *_: ok({node: True}))

    assert trace.outcome == "Completed"
    assert trace.runs("j") == 1
    per_superstep = [d["dispatched"] for d in decisions(trace)[:3]]
    assert per_superstep == [[[0, 1]], [[1, 1]], [[2, 1]]]  # j only after b closed
    [j_dispatch] = [d for d in trace.dispatches if d.key.node == "j"]
    assert j_dispatch.input == {"a": True, "b": True}
    first_close = decisions(trace)[0]
    assert first_close["edges"] == [[0, 0, "Fired"], [1, 0, "Fired"]]
    assert json.loads(trace.checkpoints[0])["scheduler"]["node_state"][2] == "Waiting"


# --- 2. fail-fast evaluates no edges at the failing close ------------------------


@pytest.mark.parametrize("order", ["dispatch", "reversed"])
def test_fail_fast_close_fires_nothing_from_the_completed_sibling(order):
    plan = make_plan(
        ["s", "ok_sib", "bad", "after"], [("s", "ok_sib"), ("s", "bad"), ("ok_sib", "after")]
    )
    permute = (lambda w: w) if order == "dispatch" else (lambda w: list(reversed(w)))
    trace = drive(
        make_env(plan), lambda node, *_: fail() if node == "bad" else ok({node: 1}), permute=permute
    )

    assert trace.outcome == {"Failed": {"node": "bad", "detail": "ExecutorError: boom"}}
    failing_close = decisions(trace)[1]
    assert failing_close["superstep"] == 2
    assert failing_close["dispatched"] == [[1, 1], [2, 1]]
    assert failing_close["edges"] == []
    assert trace.runs("after") == 0
    for data in trace.checkpoints[1:]:
        scheduler = json.loads(data)["scheduler"]
        assert scheduler["node_state"][3] == "Waiting"
        assert scheduler["in_res"][3] == {}
        assert scheduler["edge_fired"][2] == 0


def test_a_failure_abandons_the_ask_of_its_superstep_instead_of_parking():
    # s -> bad and s -> q (an ask): nobody is asked to answer for a run that has failed.
    plan = build_plan(
        [NodeSpec("s"), NodeSpec("bad"), NodeSpec("q", kind="ask")],
        [EdgeSpec("s", "bad"), EdgeSpec("s", "q")],
    )
    env = ask_env(plan, q="ask")
    state = fresh(env)
    [first] = [
        c
        for c in step(env, state, [ClockReading(T0), Start({})]).commands
        if isinstance(c, Dispatch)
    ]
    second = step(env, state, [ClockReading(T0 + 10), EffectResolved(first.key, ok(None))])
    [bad] = [c for c in second.commands if isinstance(c, Dispatch) and c.key.node == "bad"]

    commands = step(env, state, [ClockReading(T0 + 20), EffectResolved(bad.key, fail())]).commands

    assert [c for c in commands if isinstance(c, Finish)] == [
        Finish({"Failed": {"node": "bad", "detail": "ExecutorError: boom"}})
    ]
    assert not any(isinstance(c, EmitEnvelope) for c in commands)
    terminal = json.loads([c for c in commands if isinstance(c, WriteCheckpoint)][-1].data)
    assert terminal["scheduler"]["pending_asks"] == {}
    assert terminal["scheduler"]["announced_asks"] == []


# --- 3. cancel while parked on an ask -----------------------------------------------


def test_cancel_while_parked_on_an_ask_abandons_it_and_finishes_canceled():
    plan = build_plan(
        [NodeSpec("a"), NodeSpec("q", kind="ask"), NodeSpec("c")],
        [EdgeSpec("a", "q"), EdgeSpec("q", "c")],
    )
    env = ask_env(plan, q="ask")
    state = fresh(env)
    [first] = [
        c
        for c in step(env, state, [ClockReading(T0), Start({})]).commands
        if isinstance(c, Dispatch)
    ]
    parked = step(env, state, [ClockReading(T0 + 10), EffectResolved(first.key, ok(None))]).commands
    assert any(isinstance(c, EmitEnvelope) for c in parked)
    assert state.is_parked() and len(state.pending_asks) == 1

    commands = step(env, state, [ClockReading(T0 + 20), CancelSeen("alice", "stop")]).commands

    finish = [c for c in commands if isinstance(c, Finish)]
    assert finish == [Finish({"Canceled": {"by": "alice", "reason": "stop"}})]
    terminal = json.loads([c for c in commands if isinstance(c, WriteCheckpoint)][-1].data)
    assert terminal["scheduler"]["pending_asks"] == {}
    assert terminal["scheduler"]["announced_asks"] == []
    assert terminal["scheduler"]["phase"] == {
        "Finished": {"Canceled": {"by": "alice", "reason": "stop"}}
    }
    assert not any(isinstance(c, Dispatch) for c in commands)


# --- 4-6. events the core ignores ---------------------------------------------------

LINE = make_plan(["a", "b", "c"], [("a", "b"), ("b", "c")], {"total": "sum"})


def line_effect(node: str, attempt: int, value: Any) -> Any:
    return ok({"total": attempt, node: value.get("x", 0)})


def test_a_second_start_is_ignored_in_the_same_batch_and_mid_run():
    baseline = stepwise(make_env(LINE), line_effect, {"x": 1})

    def inject(wave_no: int, events: list[Event]) -> list[Event]:
        if wave_no in (0, 1):
            return [*events, Start({"x": 2})]
        return events

    assert stepwise(make_env(LINE), line_effect, {"x": 1}, inject) == baseline
    assert json.loads(baseline[-1][0])["context"]["x"] == 1


def test_a_duplicate_late_or_unknown_result_changes_no_byte():
    baseline = stepwise(make_env(LINE), line_effect, {"x": 1})
    first_key = dispatched_keys(baseline)[0]
    ghost = JournalKey(RUN, "", "ghost", 1, 0, "tool")

    def inject(wave_no: int, events: list[Event]) -> list[Event]:
        if wave_no == 1:  # a's result, then the same key again in the same batch
            return [*events, EffectResolved(first_key, ok({"total": 99, "a": "dup"}))]
        if wave_no == 2:  # a's key again, a superstep later, and a key nobody dispatched
            return [
                EffectResolved(first_key, fail("ExecutorError", "late")),
                EffectResolved(ghost, ok({"total": 5})),
                *events,
            ]
        return events

    assert stepwise(make_env(LINE), line_effect, {"x": 1}, inject) == baseline
    assert json.loads(baseline[-1][0])["context"]["total"] == 3


def test_a_clock_reading_that_goes_backwards_is_ignored():
    baseline = stepwise(make_env(LINE), line_effect, {"x": 1})

    def inject(wave_no: int, events: list[Event]) -> list[Event]:
        return [*events, ClockReading(T0 - 500)] if wave_no >= 1 else events

    assert stepwise(make_env(LINE), line_effect, {"x": 1}, inject) == baseline

    state = fresh(make_env(LINE))
    step(make_env(LINE), state, [ClockReading(5_000), ClockReading(3_000), Start({})])
    assert state.clock_ms == 5_000


# --- 7. reducer type errors fail the node at close -----------------------------------

FORK = make_plan(
    ["s", "a", "b", "after"],
    [("s", "a"), ("s", "b"), ("a", "after"), ("b", "after")],
    {"total": "sum"},
)
REVERSE = [lambda w: w, lambda w: list(reversed(w))]


def test_a_reducer_type_error_fails_the_producing_node_at_close():
    values = {"s": 1, "a": 2, "b": "three"}
    trace = drive(make_env(FORK), lambda node, *_: ok({"total": values.get(node, 0)}))

    assert trace.outcome == {
        "Failed": {
            "node": "b",
            "detail": "ExecutorError: reducer 'sum' on key 'total': expected a number, got string",
        }
    }
    close = json.loads(trace.checkpoints[1])
    assert close["decisions"]["edges"] == []
    assert close["scheduler"]["node_state"] == ["DoneOk", "DoneOk", "DoneFailed", "Waiting"]
    assert close["scheduler"]["context"]["total"] == 3  # a's value merged, b's refused
    assert trace.runs("after") == 0


@pytest.mark.parametrize("permute", REVERSE, ids=["dispatch", "reversed"])
def test_two_reducer_errors_in_one_superstep_name_the_lower_node(permute):
    values = {"s": 1, "a": "two", "b": True}  # booleans are not numbers either
    trace = drive(
        make_env(FORK), lambda node, *_: ok({"total": values.get(node, 0)}), permute=permute
    )

    assert trace.outcome["Failed"]["node"] == "a"
    assert "got string" in trace.outcome["Failed"]["detail"]
    assert final_state(trace)["node_state"][1:3] == ["DoneFailed", "DoneFailed"]


@pytest.mark.parametrize("permute", REVERSE, ids=["dispatch", "reversed"])
def test_a_reducer_error_at_close_outranks_a_higher_node_that_failed_on_arrival(permute):
    def effect(node, *_):
        return (
            fail("UserAborted", "no") if node == "b" else ok({"total": "x" if node == "a" else 1})
        )

    trace = drive(make_env(FORK), effect, permute=permute)
    assert trace.outcome["Failed"]["node"] == "a"


# --- 8. stall culprits -----------------------------------------------------------------


def idle_state(plan: Plan, node_state: list[str], edge_fired: list[int]) -> SchedulerState:
    state = SchedulerState.new(RUN, plan)
    state.superstep = 4
    state.node_state = node_state
    state.edge_fired = edge_fired
    state.clock_ms = T0
    return state


STALL_PLAN = make_plan(
    ["a", "b", "c", "d", "e"],
    [("a", "b"), ("b", "c"), ("b", "d"), ("c", "e"), ("d", "e"), ("e", "c", None, 1)],
)


def test_a_stall_with_every_finished_node_having_fired_names_the_lowest_waiting_node():
    # a and b both fired; c, d and e wait. No DoneOk node is to blame, so the culprit is
    # the lowest Waiting node, not the entry. The state is built by hand: the walk only
    # reaches this shape through the self-loop re-entry defect pinned further down.
    state = idle_state(
        STALL_PLAN, ["DoneOk", "DoneOk", "Waiting", "Waiting", "Waiting"], [1, 1, 1, 0, 0, 0]
    )
    assert stalled_culprit(STALL_PLAN, state) == 2

    commands = step(make_env(STALL_PLAN), state, []).commands
    assert commands[-1] == Finish({"Stalled": {"node": "c"}})
    assert state.outcome() == {"Stalled": {"node": "c"}}


def test_a_stall_culprit_prefers_a_finished_node_whose_edges_never_fired():
    state = idle_state(
        STALL_PLAN, ["DoneOk", "DoneOk", "Dead", "DoneOk", "Waiting"], [1, 1, 0, 0, 0, 0]
    )
    assert stalled_culprit(STALL_PLAN, state) == 3  # d's only out-edge never fired
    state = idle_state(STALL_PLAN, ["DoneOk", "DoneOk", "Dead", "Dead", "Dead"], [1, 1, 0, 0, 0, 0])
    assert stalled_culprit(STALL_PLAN, state) == 0  # nothing to blame: the entry


def test_a_node_with_a_self_loop_reruns_when_another_edge_re_enters_it():
    # outer -> inner, inner -> inner (inner loop), inner -> outer (outer loop). When the
    # outer loop fires into inner, inner's self-loop comes from a finished source (inner
    # itself, DoneOk when the edge fires): Dead for the new generation, so inner is Ready.
    plan = make_plan(
        ["outer", "inner", "end"],
        [
            ("outer", "inner"),
            ("inner", "inner", "again", 3),
            ("inner", "outer", "pass == 1", 1),
            ("inner", "end", "pass == 2"),
        ],
    )

    def effect(node, attempt, _):
        return ok({"pass": attempt}) if node == "outer" else ok({"again": False})

    trace = drive(make_env(plan), effect)
    assert trace.outcome == "Completed"
    assert [trace.runs(n) for n in ("outer", "inner", "end")] == [2, 2, 1]


def test_a_node_re_entered_in_the_superstep_it_finished_still_routes_its_result():
    # a -> c, b -> c (max 1), c -> b (max 1), b -> a. Superstep 4 runs a and c together;
    # closing it, a's edge re-enters c before c's own edges are read. c finished in that
    # superstep, so its out-edge is still evaluated (§3.5: each finished node's out-edges):
    # c -> b has fired once already, so it is CycleExhausted, and the record says so.
    plan = make_plan(["a", "b", "c"], [("a", "c"), ("b", "c", None, 1), ("c", "b", None, 1),
                                       ("b", "a")])  # fmt: skip

    trace = drive(make_env(plan), lambda node, attempt, _: ok({}))

    fourth = loads(trace.checkpoints[3])["decisions"]
    assert fourth["superstep"] == 4
    assert sorted(node for node, _ in fourth["dispatched"]) == [0, 2]  # a and c
    c_to_b = 2
    assert [e for e in fourth["edges"] if e[0] == c_to_b] == [[c_to_b, 0, "CycleExhausted"]]


# --- 9. the retry table (§3.3) -----------------------------------------------------------

# Written from the spec text: "Retryable ...: Timeout and ExecutorError of tool-node effects
# and of LLM turns; SchemaValidationFailed only for LLM turns; the others never."
RETRY_TABLE = {
    ("Timeout", "tool"): True,
    ("Timeout", "llm"): True,
    ("ExecutorError", "tool"): True,
    ("ExecutorError", "llm"): True,
    ("SchemaValidationFailed", "tool"): False,
    ("SchemaValidationFailed", "llm"): True,
    ("ContextTooLong", "tool"): False,
    ("ContextTooLong", "llm"): False,
    ("UserAborted", "tool"): False,
    ("UserAborted", "llm"): False,
    ("Unknown", "tool"): False,
    ("Unknown", "llm"): False,
    ("ProviderError", "tool"): False,
    ("ProviderError", "llm"): False,  # the SDK's retries are spent: fail, or fall back
}


def test_the_retry_table_covers_every_failure_cause():
    assert {cause for cause, _ in RETRY_TABLE} == set(FAIL_CAUSES)


@pytest.mark.parametrize(("cause", "kind"), sorted(RETRY_TABLE))
def test_retryable_follows_the_spec_table(cause, kind):
    assert retryable(cause, kind) is RETRY_TABLE[cause, kind]


# --- 10. a loop whose head is not the entry -------------------------------------------------


def test_a_loop_away_from_the_entry_runs_max_cycles_plus_one_times():
    plan = make_plan(
        ["entry", "a", "b", "end"],
        [("entry", "a"), ("a", "b"), ("b", "a", None, 2), ("b", "end", "n >= 3")],
    )
    trace = drive(
        make_env(plan), lambda node, attempt, _: ok({"n": attempt} if node == "b" else None)
    )

    assert trace.outcome == "Completed"
    assert [trace.runs(n) for n in ("entry", "a", "b", "end")] == [1, 3, 3, 1]
    state = final_state(trace)
    assert state["node_gen"][1] == 2 and state["edge_fired"][2] == 2
    assert [2, 2, "CycleExhausted"] in decisions(trace)[6]["edges"]  # b's third close


def test_a_loop_away_from_the_entry_exits_on_its_condition_before_max_cycles():
    plan = make_plan(
        ["entry", "a", "b", "end"],
        [("entry", "a"), ("a", "b"), ("b", "a", "n < 2", 5), ("b", "end", "n >= 2")],
    )
    trace = drive(
        make_env(plan), lambda node, attempt, _: ok({"n": attempt} if node == "b" else None)
    )

    assert trace.outcome == "Completed"
    assert [trace.runs(n) for n in ("entry", "a", "b", "end")] == [1, 2, 2, 1]
    assert [d.key.attempt for d in trace.dispatches if d.key.node == "a"] == [1, 2]


# --- 11-12. serialization ------------------------------------------------------------------


def parked_with_everything() -> SchedulerState:
    """An Open superstep parked on an ask, with finished Send tasks and a steering message."""
    plan = build_plan(
        [NodeSpec("s"), NodeSpec("t"), NodeSpec("q", kind="ask")],
        [EdgeSpec("s", "t"), EdgeSpec("s", "q")],
    )
    env = ask_env(plan, q="ask")
    state = fresh(env)
    commands = step(env, state, [ClockReading(T0), Start({"k": "v"})]).commands
    [spawner] = [c for c in commands if isinstance(c, Dispatch)]
    send = [{"node": "t", "input": {"i": i}} for i in range(2)]
    commands = step(
        env, state, [ClockReading(T0 + 10), EffectResolved(spawner.key, ok({"$send": send}))]
    ).commands
    tasks = [c for c in commands if isinstance(c, Dispatch)]
    assert [t.key.task_path for t in tasks] == ["/000000", "/000001"]
    resolved = [EffectResolved(t.key, ok({"got": t.input["i"]})) for t in tasks]
    step(env, state, [ClockReading(T0 + 20), *resolved])
    commands = step(env, state, [ClockReading(T0 + 30), InputReceived({"say": "hurry"})]).commands
    assert any(isinstance(c, WriteCheckpoint) for c in commands)
    return state


def test_a_parked_state_with_asks_inbox_and_send_tasks_round_trips_byte_identically():
    state = parked_with_everything()
    value = state.to_json()
    assert state.is_parked()
    assert value["phase"]["Open"]["send_results"]
    assert len(value["pending_asks"]) == 1 and value["announced_asks"]
    assert value["inbox"] == [{"say": "hurry"}] and value["inputs_seen"] == 1
    assert sorted(value["send_tasks"]) == ["/000000", "/000001"]
    assert value["spawn_counter"] == {"": 2}
    assert value["paused_at"] is not None

    again = SchedulerState.from_json(loads(dumps(value)))
    assert dumpb(again.to_json()) == dumpb(value)
    assert again == state


# The design folder sits beside the checkout (../shared/seeds), as the brief lays it out.
SEEDS = Path(
    os.environ.get("PLAIT_SEEDS_DIR", Path(__file__).resolve().parents[3] / "shared" / "seeds")
)


def seed_fields(name: str) -> list[str]:
    path = SEEDS / f"{name}.txt"
    if not path.is_file():
        pytest.skip(f"seed {path} not available")
    text = path.read_text(encoding="utf-8")
    body = re.search(r"pub struct " + name + r"\b[^{]*\{(.*?)\n\}", text, re.S)
    assert body is not None, f"no struct {name} in {path}"
    fields = re.findall(r"^\s*pub (\w+):", body.group(1), re.M)
    assert fields, f"no fields parsed from {path}"
    return fields


def test_scheduler_state_serializes_every_seed_field():
    state = parked_with_everything()
    state.folds = 1  # the one optional field a run without an LLM leaves at its default
    keys = set(state.to_json())
    assert set(seed_fields("SchedulerState")) <= keys
    assert {f.name for f in dataclasses.fields(SchedulerState)} >= set(
        seed_fields("SchedulerState")
    )


def test_step_env_has_every_seed_field():
    names = {f.name for f in dataclasses.fields(StepEnv)}
    missing = [f for f in seed_fields("StepEnv") if f not in names]
    assert missing == []
