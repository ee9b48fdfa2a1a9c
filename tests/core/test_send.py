"""Send fan-out (§3.8): spawn, task-scoped attempts and retries, join, canonical merge order."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from support.core_harness import drive, fail, make_env, make_plan, ok


def fanout_plan():
    return make_plan(
        ["seed", ("worker", 1), "collect"],
        [("seed", "worker"), ("worker", "collect")],
        {"squares": "append", "total": "sum"},
    )


def fanout_effect(n: int, flaky: bool = False):
    def effect(node, attempt, value):
        if node == "seed":
            return ok({"$send": [{"node": "worker", "input": {"x": i}} for i in range(n)]})
        if node == "worker":
            if flaky and value["x"] % 3 == 0 and attempt == 1:
                return fail("Timeout", "slow")
            return ok({"squares": value["x"] ** 2, "total": value["x"]})
        return ok({"collected": True})

    return effect


def final_state(trace):
    return json.loads(trace.checkpoints[-1])["scheduler"]


def test_four_spawned_tasks_join_before_the_next_node_runs_once():
    trace = drive(make_env(fanout_plan()), fanout_effect(4))
    assert trace.outcome == "Completed"
    assert len(trace.dispatches) == 6  # seed, four tasks, collect once (not also statically)
    assert trace.runs("collect") == 1
    context = final_state(trace)["context"]
    assert context["squares"] == [0, 1, 4, 9]  # task results merge in path order
    assert context["total"] == 6
    paths = [d.key.task_path for d in trace.dispatches if d.key.node == "worker"]
    assert paths == ["/000000", "/000001", "/000002", "/000003"]
    assert [d.input for d in trace.dispatches if d.key.node == "worker"][2] == {"x": 2}


def test_a_thousand_spawned_tasks_join():
    trace = drive(make_env(fanout_plan()), fanout_effect(1000))
    assert trace.outcome == "Completed"
    context = final_state(trace)["context"]
    assert context["total"] == sum(range(1000))
    assert context["squares"][999] == 999**2
    assert final_state(trace).get("send_tasks") is None  # settled tasks are not kept


def test_task_retries_use_task_scoped_attempts():
    trace = drive(make_env(fanout_plan()), fanout_effect(6, flaky=True))
    assert trace.outcome == "Completed"
    retried = [d.key for d in trace.dispatches if d.key.node == "worker" and d.key.attempt == 2]
    assert sorted(k.task_path for k in retried) == ["/000000", "/000003"]
    decisions = [json.loads(c)["decisions"] for c in trace.checkpoints]
    assert ["/000000", 2] in decisions[1]["task_dispatched"]


def test_spawn_paths_are_monotone_across_generations():
    plan = make_plan(
        ["seed", "worker", "join"],
        [("seed", "worker"), ("worker", "join"), ("join", "seed", "again", 1)],
        {"seen": "append"},
    )

    def effect(node, attempt, value):
        if node == "seed":
            return ok({"$send": [{"node": "worker", "input": {"i": attempt}}]})
        if node == "join":
            return ok({"again": attempt == 1})
        return ok({"seen": value["i"]})

    trace = drive(make_env(plan), effect)
    paths = [d.key.task_path for d in trace.dispatches if d.key.node == "worker"]
    assert paths == ["/000000", "/000001"]
    assert len({d.key for d in trace.dispatches}) == len(trace.dispatches)


def test_a_malformed_send_fails_the_spawner_naming_it():
    plan = fanout_plan()
    for bad, why in [
        ([{"node": "nowhere"}], "unknown node 'nowhere'"),
        ([{"node": "seed"}], "cannot send to itself"),
        ("worker", "must be a list"),
        ([{"input": {}}], "string 'node'"),
    ]:
        trace = drive(make_env(plan), lambda node, *_, bad=bad: ok({"$send": bad}))
        assert trace.outcome["Failed"]["node"] == "seed"
        assert why in trace.outcome["Failed"]["detail"]
        assert trace.runs("worker") == 0


def test_a_refused_send_merges_none_of_its_results_keys():
    """All or nothing: the spawner failed, so no part of its result reaches the context,
    whether it was a node's or a task's."""
    plan = fanout_plan()

    def node_refused(node, *_):
        return ok({"total": 7, "squares": 1, "$send": [{"node": "nowhere"}]})

    def task_refused(node, attempt, value):
        if node == "seed":
            return ok({"$send": [{"node": "worker", "input": {"x": 1}}]})
        return ok({"total": 7, "squares": 1, "$send": [{"node": "worker"}]})  # to itself

    for effect, spawner in ((node_refused, "seed"), (task_refused, "worker")):
        trace = drive(make_env(plan), effect)
        assert trace.outcome["Failed"]["node"] == spawner
        assert final_state(trace)["context"] == {}, spawner


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False))
def test_any_task_completion_order_gives_identical_checkpoints(rnd):
    baseline = drive(make_env(fanout_plan()), fanout_effect(12, flaky=True)).checkpoints

    def permute(wave):
        wave = list(wave)
        rnd.shuffle(wave)
        return wave

    trace = drive(make_env(fanout_plan()), fanout_effect(12, flaky=True), permute=permute)
    assert trace.checkpoints == baseline
