"""Texts the durable journal writes without encoding a value again: they must be exactly
the canonical text of the value they stand for, or the stored bytes would change.

A wave's feed is written piece by piece (``feeds.feed_text``) and a tool's result keeps
the canonical text it was encoded to when the tool returned (``Completed.text``), so the
outcome row is that text wrapped (``feeds.outcome_text``).
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plait import Runtime, Workflow
from plait.core.canonical import canonical_text, dumps, loads, strict_equal
from plait.core.events import (
    BudgetRaised,
    CancelSeen,
    ClockReading,
    EffectResolved,
    Event,
    InputReceived,
    ResponseSettled,
    Start,
)
from plait.core.keys import JournalKey
from plait.core.outcomes import Completed, Failed, Usage
from plait.driver.effects import as_json_result
from plait.driver.feeds import encode_events, feed_text, outcome_text, wave_feed
from plait.store.rows import key_text

KEY = JournalKey("run-1", "", "step", 3, 0, "tool")
TASK = JournalKey("run-1", "/000001", 'wr\u00efter "q"', 1, 2, "llm")
WAVES: list[list[Event]] = [
    [ClockReading(1_733_000_000_123), EffectResolved(KEY, Completed({"i": 1}))],
    [
        ClockReading(5),
        EffectResolved(KEY, Completed(1)),
        EffectResolved(TASK, Failed("Timeout", "x")),
    ],
]
"""Feeds of waves: a clock reading, then the results the wave's effects came back with."""


@pytest.mark.parametrize(
    "events",
    [
        *WAVES,
        [Start({"b": [1, 2.5, None], "a": "\u00e9"}), ClockReading(0)],
        [
            CancelSeen("bob", "stop"),
            InputReceived({"text": "hi"}),
            BudgetRaised({"max_supersteps": 9}),
        ],
        [ResponseSettled("ask-1", Completed(True)), ClockReading(7)],
        [],
    ],
)
def test_a_feed_written_piece_by_piece_is_its_canonical_text(events: list[Event]) -> None:
    encoded = encode_events(events)
    assert feed_text(events, encoded) == canonical_text({"events": encoded})


@pytest.mark.parametrize(
    "key",
    [
        KEY,
        TASK,
        JournalKey("r\u00e9\ud800\x1f", "/a\\b", "n\u2028\t", 2**70, 0, "decide"),
        JournalKey("run-1", "", "step", True, 0, "tool"),  # a bool is left to the encoder
        JournalKey("run-1", None, "step", 1, 0, "tool"),  # type: ignore[arg-type]
        JournalKey("run-1", "", "step", 1.5, 0, "tool"),  # type: ignore[arg-type]
    ],
)
def test_a_journal_key_written_field_by_field_is_its_canonical_text(key: JournalKey) -> None:
    key_text.cache_clear()
    assert key_text(key) == canonical_text(key.to_json())


@pytest.mark.parametrize(
    "events",
    [
        *WAVES,
        [ClockReading(0)],
    ],
)
def test_a_waves_feed_built_in_one_pass_is_the_body_and_text_of_its_events(
    events: list[Event],
) -> None:
    encoded = encode_events(events)
    assert wave_feed(events) == ({"events": encoded}, canonical_text({"events": encoded}))


@pytest.mark.parametrize(
    "events",
    [
        [],
        [Start({"a": 1}), ClockReading(0)],
        [ClockReading(0), CancelSeen("bob", "stop"), EffectResolved(KEY, Completed(1))],
        [ClockReading(True), EffectResolved(KEY, Completed(1))],  # a bool: not a wave's clock
        [ClockReading(1), EffectResolved(KEY, Completed(1)),
         EffectResolved(JournalKey("r", "", "n", float("nan"), 0, "tool"), Completed(1))],  # type: ignore[arg-type]
    ],
)  # fmt: skip
def test_any_other_batch_is_left_to_the_general_feed(events: list[Event]) -> None:
    assert wave_feed(events) is None


def test_a_feed_with_no_canonical_text_is_left_to_the_encoder() -> None:
    events: list[Event] = [Start({"x": float("nan")})]
    assert feed_text(events, encode_events(events)) is None


@pytest.mark.parametrize(
    "outcome",
    [
        as_json_result({"i": 2}),
        as_json_result([1, {"z": 0, "a": "\u2603"}]),
        Completed({"answer": "x"}, Usage(10, 20, 30), text=dumps({"answer": "x"})),
    ],
)
def test_an_outcome_with_its_result_text_is_its_canonical_text(outcome: Completed) -> None:
    assert outcome.text == dumps(outcome.result)
    assert outcome_text(outcome) == canonical_text(outcome.to_json())


def test_an_outcome_without_its_result_text_has_none() -> None:
    assert outcome_text(Completed({"i": 1})) is None
    assert outcome_text(Failed("Timeout", "late")) is None


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": True, "c": None, "d": "text"},
        {"n": Level.HIGH, "s": Name("x")},  # subclasses parse back as plain int and str
        {"f": 1.5, "g": -0.0},
        {"nested": {"k": [1, 2]}},
    ],
)
def test_a_tool_result_is_the_value_its_canonical_text_parses_to(value: dict[str, Any]) -> None:
    outcome = as_json_result(value)
    assert isinstance(outcome, Completed)
    expected = loads(dumps(value))
    assert strict_equal(outcome.result, expected)
    assert list(outcome.result) == list(expected)  # keys in canonical order
    assert [type(v) for v in outcome.result.values()] == [type(v) for v in expected.values()]
    assert outcome.result is not value


def _done() -> dict[str, Any]:
    return {}


def _loop(step: Callable[[int], dict[str, Any]], bound: int) -> Workflow:
    """``step -> step`` while ``i < bound``, then ``done``."""
    return (
        Workflow.new("loop")
        .node("step", tool=step)
        .node("done", tool=_done)
        .edge("step", "step", when=f"i < {bound}", max_cycles=bound)
        .edge("step", "done", when=f"i >= {bound}")
    )


def test_a_driven_run_stores_the_rows_the_encoder_would_write(tmp_path: Path) -> None:
    """The feed and result rows of a real run are the canonical texts of their values."""

    def step(i: int) -> dict[str, Any]:
        return {"i": i + 1, "tag": "n\u00e9"}

    flow = _loop(step, 3).budget(max_supersteps=10)
    with Runtime(f"sqlite:///{tmp_path / 'a.db'}") as rt:
        assert rt.run_sync(flow, {"i": 0}).status == "completed"
    with sqlite3.connect(tmp_path / "a.db") as conn:
        rows = conn.execute(
            "SELECT item, payload FROM journal WHERE item IN ('record', 'result')"
        ).fetchall()
    assert len(rows) >= 6
    for _, payload in rows:
        assert payload.startswith('{"j":')
        body = payload[5:-1]
        assert canonical_text(loads(body)) == body


def test_a_journaled_intent_keeps_its_canonical_text(tmp_path: Path) -> None:
    """What verify compares a replayed intent's text with, without parsing the row."""

    def step(i: int) -> dict[str, Any]:
        return {"i": i + 1, "z": [1, "\u00e9"]}

    flow = _loop(step, 2)
    with Runtime(f"sqlite:///{tmp_path / 'a.db'}") as rt:
        run = rt.run_sync(flow, {"i": 0, "b": {"y": 1, "x": None}})
        rows = rt.store.journal_rows(run.run_id)
        assert rt.verify(run.run_id).verified
    assert len(rows.intents) == 3  # step twice, then done
    for index in rows.intents.values():
        assert rows.whole_text(index) == dumps(rows.value(index))
