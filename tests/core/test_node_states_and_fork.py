"""The node-state transition table is the only writer of ``node_state``; fork is a core
transition with exactly the effect a fork's seed state has always had."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from plait.core.env import BudgetAxis
from plait.core.errors import PlaitError
from plait.core.fork import fork_state
from plait.core.node_states import TRANSITIONS, InvalidMove, Move, NodeState, move
from plait.core.plan import EdgeSpec, NodeSpec, build_plan
from plait.core.state import IDLE, Finished, SchedulerState

CORE = Path(__file__).resolve().parents[2] / "src" / "plait" / "core"
PLAN = build_plan([NodeSpec("a"), NodeSpec("b")], [EdgeSpec("a", "b")])


def fresh() -> SchedulerState:
    return SchedulerState.new("run-1", PLAN)


def test_new_takes_the_plan_and_sizes_every_list_from_it():
    state = fresh()
    assert state.node_state == [NodeState.WAITING, NodeState.WAITING]
    assert state.edge_fired == [0] and state.in_res == [{}, {}]
    assert state.to_json()["node_state"] == ["Waiting", "Waiting"]


@pytest.mark.parametrize(
    ("start", "why", "to"),
    [(s, why, to) for s, moves in TRANSITIONS.items() for why, to in moves.items()],
)
def test_every_listed_move_lands_where_the_table_says(start, why, to):
    state = fresh()
    state.node_state[1] = start
    assert move(state, 1, why) is to
    assert state.node_state == [NodeState.WAITING, to]


def test_a_move_the_table_does_not_list_is_refused_and_changes_nothing():
    state = fresh()
    with pytest.raises(InvalidMove, match="Waiting cannot move on completed"):
        move(state, 0, Move.COMPLETED)
    assert state.node_state[0] is NodeState.WAITING


def test_every_state_is_in_the_table_and_every_move_is_used():
    assert set(TRANSITIONS) == set(NodeState)
    assert {why for moves in TRANSITIONS.values() for why in moves} == set(Move)


def test_nothing_in_the_core_but_the_table_assigns_a_node_state():
    assign = re.compile(r"\.node_state\[[^\]]+\]\s*=[^=]")
    writers = [
        f"{path.name}:{n}"
        for path in sorted(CORE.glob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if assign.search(line)
    ]
    assert writers == [f"node_states.py:{_line_of_the_write()}"]


def _line_of_the_write() -> int:
    lines = (CORE / "node_states.py").read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if "state.node_state[node] = to" in line)


def test_fork_renames_the_run_reopens_a_finished_one_and_forgets_an_exhausted_axis():
    base = fresh()
    base.phase = Finished({"BudgetExhausted": {"axis": "tokens"}})
    base.exhausted = BudgetAxis.TOKENS
    base.superstep = 7
    before = base.to_json()

    forked = fork_state(base, "run-2")

    assert forked.run_id == "run-2" and forked.phase == IDLE and forked.exhausted is None
    assert base.to_json() == before  # the base state is left as it was
    after = forked.to_json()
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"run_id", "phase", "exhausted"}


def test_fork_keeps_an_open_or_idle_phase():
    state = fresh()
    assert fork_state(state, "run-2").phase == IDLE


def test_fork_edits_replace_context_keys_whole_and_leave_the_base_alone():
    base = fresh()
    base.context = {"log": ["a"], "n": 1}
    before = base.to_json()
    value = {"deep": [1]}

    forked = fork_state(base, "run-2", {"log": ["edited"], "new": value})
    value["deep"].append(2)  # the caller's object is not the state's

    assert forked.context == {"log": ["edited"], "n": 1, "new": {"deep": [1]}}
    assert base.to_json() == before
    after = forked.to_json()
    assert {k for k in before if before[k] != after[k]} == {"run_id", "context"}


@pytest.mark.parametrize(
    ("edits", "problem"),
    [
        ({"$inbox": []}, "reserved"),
        ({"$send": []}, "reserved"),
        ({" ": 1}, "non-blank"),
        ({"x": float("nan")}, "not JSON"),
        ({"x": {1, 2}}, "not JSON"),
    ],
)
def test_fork_edits_refuse_reserved_or_blank_keys_and_values_that_are_not_json(edits, problem):
    with pytest.raises(PlaitError) as refused:
        fork_state(fresh(), "run-2", edits)
    assert refused.value.code == "E019" and problem in str(refused.value)
