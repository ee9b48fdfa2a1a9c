"""Retry waits in the core (§3.5b): the delay sequence, its deterministic jitter, and that
completion order still never changes a checkpoint when failures wait before retrying."""

from __future__ import annotations

import dataclasses
import json
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from plait.core.keys import JournalKey
from plait.core.outcomes import Failed
from plait.core.retry import RetryPolicy, delay_ms
from support.core_harness import drive_waves, make_env, make_plan, ok

KEY = JournalKey("run-1", "", "fetch", 1, 0, "tool")


def test_delays_grow_by_the_multiplier_and_stop_at_the_cap():
    policy = RetryPolicy(max_attempts=9, initial_ms=1_000, multiplier=Fraction(3), max_ms=20_000)

    delays = [delay_ms(policy, n, KEY) for n in range(1, 6)]

    assert delays == [1_000, 3_000, 9_000, 20_000, 20_000]


def test_jitter_takes_off_at_most_its_fraction_the_same_way_every_time():
    policy = RetryPolicy(max_attempts=9, initial_ms=10_000, jitter_ppm=250_000)
    keys = [KEY._replace(attempt=a) for a in range(1, 50)]

    drawn = [delay_ms(policy, 1, key) for key in keys]

    assert drawn == [delay_ms(policy, 1, key) for key in keys]
    assert all(7_500 < d <= 10_000 for d in drawn)
    assert len(set(drawn)) > 40  # the call id seeds it: each failed effect draws its own


def test_the_shorthand_never_waits_and_non_retryable_names_a_class_or_a_cause():
    assert delay_ms(RetryPolicy.shorthand(3), 1, KEY) == 0
    policy = RetryPolicy(max_attempts=3, non_retryable=frozenset({"KeyError", "Timeout"}))

    assert policy.allows(1, Failed("ExecutorError", "ValueError: x", "ValueError"), "tool")
    assert not policy.allows(1, Failed("ExecutorError", "KeyError: x", "KeyError"), "tool")
    assert not policy.allows(1, Failed("Timeout", "slow"), "tool")
    assert not policy.allows(3, Failed("ExecutorError", "ValueError: x", "ValueError"), "tool")


# Four parallel workers; w1 and w3 fail twice, each failure waiting (with jitter) first.
PLAN = make_plan(
    ["start", "w1", "w2", "w3", "w4", "join"],
    [("start", w) for w in ("w1", "w2", "w3", "w4")]
    + [(w, "join") for w in ("w1", "w2", "w3", "w4")],
    {"log": "append"},
)
POLICY = RetryPolicy(max_attempts=4, initial_ms=500, multiplier=Fraction(2), jitter_ppm=300_000)
ENV = dataclasses.replace(
    make_env(PLAN), retry_policies={PLAN.index["w1"]: POLICY, PLAN.index["w3"]: POLICY}
)


def effect(dispatch):
    key = dispatch.key
    if key.node in ("w1", "w3") and key.attempt <= 2:
        return Failed("ExecutorError", f"{key.node} down", "ConnectionError")
    return ok({"log": [f"{key.node}#{key.attempt}"]})


def waited(pending):
    assert pending.backoff and pending.wake_ms is not None
    return ok(None)


BASELINE = drive_waves(ENV, effect, answer=waited)


def test_failures_wait_as_timers_and_the_run_completes():
    assert BASELINE.outcome == "Completed"
    assert BASELINE.runs("w1") == 3 and BASELINE.runs("w3") == 3
    last = json.loads(BASELINE.checkpoints[-1])["scheduler"]
    assert last["context"]["log"] == ["start#1", "w1#3", "w2#1", "w3#3", "w4#1", "join#1"]


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False))
def test_any_completion_order_with_retry_waits_gives_identical_checkpoints(rnd):
    def permute(batch):
        batch = list(batch)
        rnd.shuffle(batch)
        return batch

    trace = drive_waves(ENV, effect, answer=waited, permute=permute)

    assert trace.checkpoints == BASELINE.checkpoints
