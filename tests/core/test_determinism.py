"""Determinism: completion order never changes a checkpoint; states round-trip byte for byte."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from plait.core.canonical import dumpb
from plait.core.state import SchedulerState
from support.core_harness import drive, fail, make_env, make_plan, ok

# A fan-out of parallel workers joining into an accumulator, inside a bounded loop,
# with reducers that are order-sensitive if merged in arrival order (append, lww).
PLAN = make_plan(
    ["start", ("w1", 1), "w2", "w3", "w4", "join", "end"],
    [
        ("start", "w1"),
        ("start", "w2"),
        ("start", "w3"),
        ("start", "w4"),
        ("w1", "join"),
        ("w2", "join"),
        ("w3", "join"),
        ("w4", "join"),
        ("join", "start", "again", 2),
        ("join", "end", "!again"),
    ],
    {"log": "append", "total": "sum"},
)


def effect(node, attempt, ctx):
    if node == "w1" and attempt % 2 == 1:
        return fail("Timeout", "slow")  # retried inside the superstep
    if node == "join":
        return ok({"again": len(ctx.get("log", [])) < 12})
    return ok({"log": [f"{node}#{attempt}"], "total": attempt, "last": node})


BASELINE = drive(make_env(PLAN), effect)


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False))
def test_any_completion_order_within_a_wave_gives_identical_checkpoints(rnd):
    def permute(wave):
        wave = list(wave)
        rnd.shuffle(wave)
        return wave

    trace = drive(make_env(PLAN), effect, permute=permute)
    assert trace.checkpoints == BASELINE.checkpoints
    assert BASELINE.outcome == "Completed"


def test_every_order_of_a_four_way_wave_gives_identical_checkpoints():
    from itertools import permutations

    plan = make_plan(
        ["s", "a", "b", "c", "d", "j"],
        [("s", x) for x in "abcd"] + [(x, "j") for x in "abcd"],
        {"log": "append"},
    )
    eff = lambda node, *_: ok({"log": node, "last": node})  # noqa: E731
    expected = drive(make_env(plan), eff).checkpoints
    for order in permutations(range(4)):

        def permute(wave, order=order):
            return [wave[i] for i in order] if len(wave) == 4 else wave

        assert drive(make_env(plan), eff, permute=permute).checkpoints == expected


def test_mid_run_states_round_trip_byte_identically():
    for data in BASELINE.checkpoints:
        checkpoint = json.loads(data)
        state = SchedulerState.from_json(checkpoint["scheduler"])
        again = dumpb({"scheduler": state.to_json(), "decisions": checkpoint["decisions"]})
        assert again == data


def test_two_identical_runs_produce_identical_checkpoint_chains():
    assert drive(make_env(PLAN), effect).checkpoints == BASELINE.checkpoints
