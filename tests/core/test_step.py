"""The step function's graph walk, retries, failures, cancel and termination (§3.5)."""

from __future__ import annotations

import json

from plait.core.env import Budgets
from support.core_harness import drive, fail, make_env, make_plan, ok


def last_state(trace):
    return json.loads(trace.checkpoints[-1])["scheduler"]


def test_linear_workflow_completes_and_merges_results():
    plan = make_plan(["a", "b"], [("a", "b")])
    trace = drive(make_env(plan), lambda node, attempt, ctx: ok({node: attempt}), {"x": 1})
    assert trace.outcome == "Completed"
    assert last_state(trace)["context"] == {"a": 1, "b": 1, "x": 1}


def test_non_object_input_is_wrapped_and_absent_input_is_empty():
    plan = make_plan(["a"], [])
    trace = drive(make_env(plan), lambda *_: ok(None), 42)
    assert last_state(trace)["context"] == {"input": 42}
    trace = drive(make_env(plan), lambda *_: ok(None), None)
    assert last_state(trace)["context"] == {}


def test_non_object_result_merges_under_node_id_and_null_contributes_nothing():
    plan = make_plan(["a", "b"], [("a", "b")])
    results = {"a": 7, "b": None}
    trace = drive(make_env(plan), lambda node, *_: ok(results[node]))
    assert last_state(trace)["context"] == {"a": 7}


def test_diamond_untaken_arm_completes_the_join_through_dead_paths():
    plan = make_plan(
        ["start", "left", "right", "join"],
        [
            ("start", "left", 'go == "left"'),
            ("start", "right", 'go == "right"'),
            ("left", "join"),
            ("right", "join"),
        ],
    )
    trace = drive(make_env(plan), lambda node, *_: ok({"go": "left"} if node == "start" else None))
    assert trace.outcome == "Completed"
    assert trace.runs("left") == 1 and trace.runs("right") == 0 and trace.runs("join") == 1
    state = last_state(trace)
    assert state["node_state"] == ["DoneOk", "DoneOk", "Dead", "DoneOk"]
    first_close = json.loads(trace.checkpoints[0])["decisions"]
    assert [1, 0, "CondFalse"] in first_close["edges"]
    assert [3, 0, "DeadPath"] in first_close["edges"]


def test_self_loop_reruns_downstream_once_per_generation():
    plan = make_plan(["work", "done"], [("work", "work", None, 2), ("work", "done")])
    trace = drive(make_env(plan), lambda *_: ok(None))
    assert trace.outcome == "Completed"
    assert trace.runs("work") == 3
    assert trace.runs("done") == 3
    state = last_state(trace)
    assert state["attempt"] == [3, 3]
    assert state["node_gen"] == [2, 2]
    assert state["edge_fired"] == [2, 3]


def test_attempts_are_monotone_across_generations():
    plan = make_plan(["work", "done"], [("work", "work", "again", 3), ("work", "done", "!again")])
    seen = []

    def effect(node, attempt, ctx):
        seen.append((node, attempt))
        return ok({"again": node == "work" and attempt < 3})

    trace = drive(make_env(plan), effect)
    assert trace.outcome == "Completed"
    assert seen == [("work", 1), ("work", 2), ("work", 3), ("done", 1)]
    keys = [d.key for d in trace.dispatches]
    assert len(set(keys)) == len(keys)


def test_cycle_exhausted_edge_is_recorded_and_not_fired():
    plan = make_plan(["work", "done"], [("work", "work", None, 1), ("work", "done", "!more")])
    trace = drive(make_env(plan), lambda *_: ok({"more": True}))
    # work ran twice (one re-entry), then the loop edge is exhausted and done's condition is false.
    assert trace.runs("work") == 2
    assert trace.outcome == {"Stalled": {"node": "work"}}
    decisions = [json.loads(c)["decisions"] for c in trace.checkpoints]
    assert [0, 1, "CycleExhausted"] in decisions[1]["edges"]


def test_retries_succeed_on_the_last_allowed_attempt():
    plan = make_plan([("flaky", 2)], [])
    trace = drive(make_env(plan), lambda node, attempt, _: ok(1) if attempt == 3 else fail())
    assert trace.outcome == "Completed"
    assert trace.runs("flaky") == 3
    # Retries run inside the same open superstep.
    assert last_state(trace)["superstep"] == 1


def test_retries_fail_one_attempt_later():
    plan = make_plan([("flaky", 2)], [])
    trace = drive(make_env(plan), lambda node, attempt, _: ok(1) if attempt == 4 else fail())
    assert trace.outcome == {"Failed": {"node": "flaky", "detail": "ExecutorError: boom"}}
    assert trace.runs("flaky") == 3


def test_non_retryable_causes_are_never_retried():
    plan = make_plan([("n", 5)], [])
    trace = drive(make_env(plan), lambda *_: fail("UserAborted", "no"))
    assert trace.runs("n") == 1
    assert trace.outcome["Failed"]["detail"] == "UserAborted: no"


def test_parallel_permanent_failures_always_name_the_lower_node():
    plan = make_plan(["s", "a", "b", "c"], [("s", "a"), ("s", "b"), ("s", "c")])
    effect = lambda node, *_: fail("ExecutorError", node) if node in "bc" else ok(None)  # noqa: E731
    for order in (lambda w: w, lambda w: list(reversed(w))):
        trace = drive(make_env(plan), effect, permute=order)
        assert trace.outcome == {"Failed": {"node": "b", "detail": "ExecutorError: b"}}


def test_fail_fast_drains_without_evaluating_edges():
    plan = make_plan(["s", "a", "b", "after_a"], [("s", "a"), ("s", "b"), ("a", "after_a")])
    trace = drive(make_env(plan), lambda node, *_: fail() if node == "b" else ok(None))
    assert trace.runs("after_a") == 0
    assert trace.outcome["Failed"]["node"] == "b"


def test_cancel_drains_outstanding_effects_without_new_dispatches():
    plan = make_plan(["a", ("b", 3), "c"], [("a", "b"), ("b", "c")])
    trace = drive(
        make_env(plan),
        lambda node, *_: fail() if node == "b" else ok(None),
        cancel_after_wave=1,
    )
    assert trace.outcome == {"Canceled": {"by": "alice", "reason": "enough"}}
    assert trace.runs("b") == 1  # its retries are not dispatched while canceling
    assert trace.runs("c") == 0


def test_stalled_run_names_the_node_whose_edges_never_fired():
    plan = make_plan(["a", "b", "c"], [("a", "b"), ("b", "c", "ready")])
    trace = drive(make_env(plan), lambda *_: ok(None))
    assert trace.outcome == {"Stalled": {"node": "b"}}


def test_superstep_budget_ends_the_run_budget_exhausted():
    plan = make_plan(["work", "done"], [("work", "work", None, 50), ("work", "done", "stop")])
    trace = drive(make_env(plan, Budgets(max_supersteps=5)), lambda *_: ok(None))
    assert trace.outcome == {"BudgetExhausted": {"axis": "supersteps"}}
    assert trace.runs("work") == 5


def test_terminal_checkpoint_is_emitted_by_the_core():
    plan = make_plan(["a"], [])
    trace = drive(make_env(plan), lambda *_: ok(None))
    final = json.loads(trace.checkpoints[-1])
    assert final["scheduler"]["phase"] == {"Finished": "Completed"}
    assert final["decisions"]["edges"] == []


def test_wall_time_charges_open_to_close():
    plan = make_plan(["a", "b"], [("a", "b")])
    trace = drive(make_env(plan), lambda *_: ok(None), clock_step=25)
    assert last_state(trace)["spent"]["wall_ms"] == 50
