"""Verify reads its journal lazily (``Store.journal_rows``): what it reports must be what
it reported when it read the whole journal first.

A corrupt row still ends a verify with PLAIT-E010, the message ``load_journal`` gives,
wherever the row is and whatever the replay met first; an intent, a result or a wave's
feed read from its text (not parsed) is what the parsed value would be."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait import PlaitError, Runtime, Workflow
from plait.core.canonical import loads
from plait.core.keys import JournalKey
from plait.core.outcomes import Completed, outcome_from_json
from plait.driver.feeds import (
    COMPLETED_SHAPE,
    WAVE_SHAPE,
    completed_of_part,
    completed_of_text,
    decode_events,
    wave_of_part,
    wave_of_text,
)
from plait.store.chunks import keeps_whole, kept_whole, kept_whole_part, whole_text
from plait.store.rows import key_text


def count(n: int = 0) -> dict:
    return {"n": n + 1, "log": [n]}


def finish(n: int) -> dict:
    return {"done": n}


def loop() -> Workflow:
    return (
        Workflow.new("counter")
        .node("count", tool=count)
        .node("finish", tool=finish)
        .edge("count", "count", when="n < 3", max_cycles=5)
        .edge("count", "finish", when="n >= 3")
        .reducer("log", "extend")
    )


@pytest.fixture
def run(tmp_path: Path) -> Iterator[tuple[Runtime, str, Path]]:
    ticks = iter(range(1_000_000, 2_000_000, 7))
    db = tmp_path / "plait.db"
    with Runtime(f"sqlite:///{db}", clock=lambda: next(ticks), principal="alice") as rt:
        result = rt.run_sync(loop(), {"n": 0})
        assert rt.verify(result.run_id).verified
        yield rt, result.run_id, db


def _rows(db: Path, run_id: str, item: str, kind: str | None = None) -> list[tuple[int, str]]:
    """(seq, payload) of the run's rows of ``item`` (and record ``kind``), in seq order."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT seq, payload FROM journal WHERE run_id = ? AND item = ?"
            " AND (? IS NULL OR record_kind = ?) ORDER BY seq",
            (run_id, item, kind, kind),
        ).fetchall()


def _set(db: Path, run_id: str, seq: int, column: str, value: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(
            f"UPDATE journal SET {column} = ? WHERE run_id = ? AND seq = ?", (value, run_id, seq)
        )


def _error(action: object) -> BaseException:
    with pytest.raises(Exception) as caught:
        action()  # type: ignore[operator]
    return caught.value


ROWS = {  # which row, and how its payload is broken
    "the first feed": ("record", "feed", 0, lambda p: p.replace('"events":', '"events":]')),
    "the last feed": ("record", "feed", -1, lambda p: p[:-2]),
    "an intent": ("intent", None, 1, lambda p: p.replace("}", "", 1)),
    "the last intent": ("intent", None, -1, lambda p: '{"j":"x"}'),
    "a result": ("result", None, 1, lambda p: p.replace('"usage"', '"usage')),
    "a result's text": ("result", None, 2, lambda p: p.replace('"result":', '"result":1,')),
}


@pytest.mark.parametrize("where", sorted(ROWS))
def test_a_corrupt_row_is_the_e010_reading_the_journal_gives(
    run: tuple[Runtime, str, Path], where: str
) -> None:
    rt, run_id, db = run
    item, kind, nth, corrupt = ROWS[where]
    seq, payload = _rows(db, run_id, item, kind)[nth]
    _set(db, run_id, seq, "payload", corrupt(payload))
    expected = _error(lambda: rt.store.load_journal(run_id))
    assert isinstance(expected, PlaitError) and expected.code == "E010"
    got = _error(lambda: rt.verify(run_id))
    assert type(got) is PlaitError and str(got) == str(expected)


def test_a_malformed_key_is_the_error_reading_the_journal_gives(
    run: tuple[Runtime, str, Path],
) -> None:
    rt, run_id, db = run
    with sqlite3.connect(db) as conn:
        seq, text = conn.execute(
            "SELECT seq, journal_key FROM journal WHERE run_id = ? AND item = 'result'"
            " ORDER BY seq DESC",
            (run_id,),
        ).fetchone()
    for broken in (text[:-1], text.replace('"attempt":', '"tries":')):
        _set(db, run_id, seq, "journal_key", broken)
        expected = _error(lambda: rt.store.load_journal(run_id))
        got = _error(lambda: rt.verify(run_id))
        assert type(got) is type(expected) and str(got) == str(expected)


def test_a_corrupt_row_after_a_divergence_is_still_the_e010(
    run: tuple[Runtime, str, Path],
) -> None:
    """The replay reports the first intent differing before it reaches the corrupt last
    feed; verify still decodes every row before it reports, as reading it all first did."""
    rt, run_id, db = run
    seq, payload = _rows(db, run_id, "intent")[0]
    _set(db, run_id, seq, "payload", payload.replace('"n":0', '"n":5'))
    diverged = rt.verify(run_id)
    assert not diverged.verified and "differs from the replay in input.n" in str(diverged.error)
    last, feed = _rows(db, run_id, "record", "feed")[-1]
    _set(db, run_id, last, "payload", feed[:-2])
    expected = _error(lambda: rt.store.load_journal(run_id))
    assert str(_error(lambda: rt.verify(run_id))) == str(expected)


def test_an_intent_kept_in_other_text_is_compared_as_its_value(
    run: tuple[Runtime, str, Path],
) -> None:
    """Text unequal to the replay's canonical text is parsed and compared as a value: the
    same input written with spaces verifies; another value is the divergence it was."""
    rt, run_id, db = run
    seq, payload = _rows(db, run_id, "intent")[1]
    assert payload == '{"j":{"log":[0],"n":1}}'
    _set(db, run_id, seq, "payload", '{"j":{ "log" : [ 0 ], "n":1 }}')
    assert rt.verify(run_id).verified
    _set(db, run_id, seq, "payload", '{"j":{"log":[0],"n":1.0}}')
    report = rt.verify(run_id)
    assert not report.verified
    assert report.diverged_at == {
        "superstep": 2,
        "node": "count",
        "what": "the tool intent of node 'count' (attempt 2, effect 0) differs from the"
        " replay in input.n",
    }


NONE = '"usage":{"input_tokens":0,"output_tokens":0,"usd_micros":0}}}'
TEXTS = [  # the first three are read from their text; the others are parsed
    '{"Completed":{"result":{"n":1},' + NONE,
    '{"Completed":{"result":[1,"x",null],' + NONE,
    '{"Completed":{"result": {"n" : 1} ,' + NONE,
    '{"Completed":{"result":"a","usage":{"input_tokens":3,"output_tokens":0,"usd_micros":0}}}',
    '{"Completed":{"result":1,"x":2,' + NONE,
    '{"Completed":{"result":{"n":1},"usage":{}}}',
    '{"Failed":{"cause":"Timeout","detail":"slow"}}',
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_result_read_from_its_text_is_the_outcome_parsing_gives(text: str) -> None:
    fast = completed_of_text(text)
    if fast is not None:
        assert fast == outcome_from_json(loads(text))
        assert fast.usage is outcome_from_json(loads(text)).usage
    assert (fast is None) == (TEXTS.index(text) >= 3)


KEY_A = JournalKey("r", "", "a", 1, 0, "tool")
KEY_B = JournalKey("r", "", 'b},{"resolved":x', 1, 0, "tool")  # a split-looking node id
KEYS = {key_text(KEY_A): KEY_A, key_text(KEY_B): KEY_B}
OUTCOMES = {KEY_A: Completed({"n": 1}), KEY_B: Completed([2])}
A, B = key_text(KEY_A), key_text(KEY_B)
FEEDS = [  # the first four are read from their text; the others are parsed
    '{"events":[{"clock":5},{"resolved":' + A + "}]}",
    '{"events":[{"clock":0},{"resolved":' + A + '},{"resolved":' + B + "}]}",
    '{"events":[{"clock":17}]}',
    '{"events":[{"clock":9},{"resolved":' + B + "}]}",
    '{"events":[{"clock":05},{"resolved":' + A + "}]}",
    '{"events":[{"clock":-5},{"resolved":' + A + "}]}",
    '{"events":[{"clock":5.0},{"resolved":' + A + "}]}",
    '{"events":[{"clock":5},{"resolved":' + A.replace('"a"', '"c"') + "}]}",
    '{"events":[{"clock":5},{"start":{"i":0}}]}',
    '{"events":[{"clock":5},{"resolved":' + A + '}],"resume_from":3}',
    '{"events":[{"clock":5}, {"resolved":' + A + "}]}",
]


@pytest.mark.parametrize("text", FEEDS)
def test_a_wave_read_from_its_text_is_the_events_parsing_gives(text: str) -> None:
    fast = wave_of_text(text, KEYS, OUTCOMES.get)
    if fast is not None:
        assert fast == decode_events(loads(text)["events"], OUTCOMES.get, lambda ask: None)
    assert (fast is None) == (FEEDS.index(text) >= 4)


NOT_WHOLE = ['{"n":"ab12"}', '{"j":{"n":1}', '{"j":}', "{}"]


@pytest.mark.parametrize("text", TEXTS)
def test_a_result_row_read_in_one_slice_is_its_text_read(text: str) -> None:
    part = kept_whole_part(whole_text(text), COMPLETED_SHAPE)
    fast = None if part is None else completed_of_part(part)
    assert fast == completed_of_text(text)
    assert (fast is None) == (TEXTS.index(text) >= 3)
    for payload in NOT_WHOLE:
        assert kept_whole_part(payload, COMPLETED_SHAPE) is None


@pytest.mark.parametrize("text", FEEDS)
def test_a_feed_row_read_in_one_slice_is_its_text_read(text: str) -> None:
    part = kept_whole_part(whole_text(text), WAVE_SHAPE)
    fast = None if part is None else wave_of_part(part, KEYS, OUTCOMES.get)
    assert fast == wave_of_text(text, KEYS, OUTCOMES.get)
    assert (fast is None) == (FEEDS.index(text) >= 4)
    for payload in NOT_WHOLE:
        assert kept_whole_part(payload, WAVE_SHAPE) is None


@pytest.mark.parametrize("payload", [whole_text(t) for t in TEXTS + FEEDS] + NOT_WHOLE)
def test_whether_a_payload_keeps_its_text_whole_is_what_taking_it_out_says(
    payload: str,
) -> None:
    assert keeps_whole(payload) == (kept_whole(payload) is not None)
