"""``Store.journal_rows``: a run's journal read in one query and parsed lazily (verify).

Its rows must hold what ``load_journal`` reads, and reading lazily must not change what a
corrupt row does: ``check`` raises what ``load_journal`` raises, for the first row in seq
order that does not decode, whichever row the reader touched first. Every test runs on
SQLite and PostgreSQL (``backend``)."""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING, Any

import pytest

from plait.core.canonical import dumpb, loads
from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import (
    CheckpointWrite,
    IntentWrite,
    RecordWrite,
    ResultWrite,
    RunInfo,
    Store,
)
from plait.store.base import JournalMarks, RangeReads
from plait.store.chunks import keeps_whole
from plait.store.rows import (
    EXECUTOR,
    KEY,
    KIND,
    PAYLOAD,
    SEQ,
    SHA256,
    SIZE,
    SUPERSTEP,
    JournalRows,
    key_text,
)
from plait.store.sql import all_kept_whole
from plait.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from conftest import Backend

BIG = {"docs": [random.Random(5).randbytes(512).hex() + str(n) for n in range(20)]}
"""An input cut into nodes: its row's payload names them (not kept whole)."""


def new_run(store: Store) -> None:
    store.create_run(RunInfo("r1", "wf", "running", "alice", None, 1, 1, None), {"plan": {}})


def key(node: str) -> JournalKey:
    return JournalKey("r1", "", node, 1, 0, "tool")


def intent(k: JournalKey, value: Any = None) -> IntentWrite:
    return IntentWrite(k, "tool:t", {"x": 1} if value is None else value, 1, 5, "idem")


def result(k: JournalKey, value: Any = "ok") -> ResultWrite:
    return ResultWrite(k, {"Completed": {"result": value, "usage": {}}}, 7, 42)


def checkpoint(superstep: int, state: Any) -> CheckpointWrite:
    return CheckpointWrite(superstep, dumpb({"scheduler": state, "decisions": {}}))


def _journal(store: Store) -> dict[str, int]:
    """A run with a row of every kind, small and large: the seq of each, by name."""
    new_run(store)
    a, b = key(node="a"), key(node="b")
    store.commit("r1", None, [RecordWrite("feed", {"events": [{"clock": 1}]}), intent(a)])
    store.commit("r1", None, [result(a), checkpoint(1, {"n": 1}), intent(b, BIG)])
    store.commit("r1", None, [result(b, BIG), RecordWrite("cancel", {"by": "x", "reason": ""})])
    return {"feed": 1, "intent": 2, "result": 3, "checkpoint": 4, "big intent": 5,
            "big result": 6, "cancel": 7}  # fmt: skip


def _values(rows: JournalRows) -> list[Any]:
    return [None if row[-1] is None else rows.value(i) for i, row in enumerate(rows.rows)]


def test_rows_hold_what_load_journal_reads(store: Store) -> None:
    _journal(store)
    journal, rows = store.load_journal("r1"), store.journal_rows("r1")

    assert [row[SEQ] for row in rows.rows] == [1, 2, 3, 4, 5, 6, 7]
    assert [rows.rows[i][KIND] for i in rows.records] == ["feed", "cancel"]
    assert [rows.rows[i][SEQ] for i in rows.checkpoints] == [4]
    assert {k: rows.rows[i][SEQ] for k, i in rows.intents.items()} == {
        i.key: i.seq for i in journal.intents
    }
    assert {k: rows.rows[i][SEQ] for k, i in rows.results.items()} == {
        k: r.seq for k, r in journal.results.items()
    }
    by_seq = {i.seq: i.input for i in journal.intents}
    by_seq |= {r.seq: r.outcome for r in journal.results.values()}
    by_seq |= {r.seq: r.body for r in journal.records}
    assert _values(rows) == [by_seq.get(row[SEQ]) for row in rows.rows]
    assert rows.whole_text(1) == '{"x":1}' and rows.whole_text(4) is None  # BIG: cut
    rows.check()


def test_rows_hold_each_items_columns_where_a_replay_reads_them(store: Store) -> None:
    """A record's kind and a checkpoint's digest share columns with an intent's key and
    executor (``RAW_SELECT``): each item reads its own."""
    _journal(store)
    journal, rows = store.load_journal("r1"), store.journal_rows("r1")
    (meta,) = journal.checkpoints
    (index,) = rows.checkpoints
    row = rows.rows[index]
    assert (row[SEQ], row[SUPERSTEP], row[SHA256], row[SIZE]) == (
        meta.seq, meta.superstep, meta.sha256, meta.size)  # fmt: skip
    assert [rows.rows[i][KIND] for i in rows.records] == [r.kind for r in journal.records]
    for i in journal.intents:
        held = rows.rows[rows.intents[i.key]]
        assert (held[EXECUTOR], held[KEY]) == (i.executor, key_text(i.key))
    assert rows.rows[index][PAYLOAD] is None  # a checkpoint's bytes are read on demand


def test_an_empty_journal_and_an_unknown_run(store: Store) -> None:
    new_run(store)
    assert store.journal_rows("r1").rows == []
    unknown = _raised(lambda: store.load_journal("nope"))
    assert str(_raised(lambda: store.journal_rows("nope"))) == str(unknown)
    assert getattr(unknown, "code", None) == "E017"


CORRUPTIONS = {
    "a feed's text": ("feed", '"events":', '"events":]'),
    "an intent's text": ("intent", '{"x":1}', '{"x":1'),
    "a result's text": ("result", '"usage"', '"usage'),
    "another record's text": ("cancel", '"reason":""', '"reason":'),
    "an intent's key": ("intent", '"attempt":1', '"attempt":1,'),
    "a key missing a field": ("result", '"attempt":1,', ""),
    "a whole payload of no container": ("intent", '{"j":{"x":1}}', '{"j":"x"}'),
    "a cut payload naming no node": ("intent", '{"j":{"x":1}}', '{"r":"' + "0" * 64 + '"}'),
}


@pytest.mark.parametrize("where", sorted(CORRUPTIONS))
def test_a_corrupt_row_raises_what_load_journal_raises(backend: Backend, where: str) -> None:
    store = backend.open()
    try:
        seqs = _journal(store)
        name, old, new = CORRUPTIONS[where]
        _tamper(backend, seqs[name], old, new)
        with pytest.raises(Exception) as whole:
            store.load_journal("r1")
        with pytest.raises(Exception) as lazy:
            rows = store.journal_rows("r1")  # a malformed key raises here already
            for index in reversed(range(len(rows.rows))):  # the last row read first
                try:
                    rows.value(index)
                except Exception:
                    rows.check()
                    raise
            rows.check()
        assert type(lazy.value) is type(whole.value)
        assert str(lazy.value) == str(whole.value)
    finally:
        store.close()


def test_the_first_corrupt_row_in_seq_order_is_the_one_reported(backend: Backend) -> None:
    store = backend.open()
    try:
        seqs = _journal(store)
        _tamper(backend, seqs["feed"], '"events":', '"events":]')
        _tamper(backend, seqs["result"], '"usage"', '"usage')
        expected = str(_raised(lambda: store.load_journal("r1")))
        rows = store.journal_rows("r1")
        _raised(lambda: rows.value(2))  # the result: read first, it raises itself
        assert str(_raised(rows.check)) == expected  # but the feed before it is reported
    finally:
        store.close()


def test_a_cut_payload_whose_node_is_gone_raises_when_read(backend: Backend) -> None:
    """Nodes are read in the rows' own transaction; a bad one raises only when read."""
    store = backend.open()
    try:
        _journal(store)
        assert backend.corrupt_nodes(BIG["docs"][3][:16].encode()) > 0
        expected = str(_raised(lambda: store.load_journal("r1")))
        rows = store.journal_rows("r1")  # no error yet: nothing was read
        rows.value(0)
        assert str(_raised(lambda: rows.value(4))).endswith(expected.split(": ", 1)[1])
        assert str(_raised(rows.check)) == expected
    finally:
        store.close()


def test_rows_read_as_text_are_not_parsed_again(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _journal(store)
    rows = store.journal_rows("r1")
    decoded: list[int] = []
    payload = JournalRows._payload
    monkeypatch.setattr(
        JournalRows, "_payload", lambda self, index: decoded.append(index) or payload(self, index)
    )
    for index in range(len(rows.rows)):
        if index != 1:
            rows.read_as_text(index)
    rows.check()
    assert decoded == [1]


def test_rows_of_one_cut_payload_read_as_values_of_their_own(store: Store) -> None:
    """Two intents of one large input share their payload's text (and nodes): each row
    still reads as a fresh value, as ``load_journal`` reads them (a replay may change one)."""
    _journal(store)
    store.commit("r1", None, [intent(key(node="c"), BIG)])
    rows = store.journal_rows("r1")
    first, second = rows.intents[key("b")], rows.intents[key("c")]
    assert rows.rows[first][-1] == rows.rows[second][-1]
    assert rows.value(first) == rows.value(second) == BIG
    assert rows.value(first) is not rows.value(second)


# --- the read's test of payloads kept whole (all_kept_whole), against each row's ---------

PIECES = ('{"j":', "}", "\0", "", "x", '"', "\\", "é☃", '}\0{"j":', '{"r":', "{", '"j":')
"""Pieces of payload texts, for ``all_kept_whole``: its prefix and end, its joint, NULs,
empty texts, quotes and backslashes, text beyond ASCII."""


def _texts(rng: random.Random) -> list[str]:
    return ["".join(rng.choices(PIECES, k=rng.randrange(5))) for _ in range(rng.randrange(5))]


WHOLE = ['{"j":1}', '{"j":{"x":"a\\"b\\\\c"}}', '{"j":"é☃\U0001f600"}', '{"j":}',
         '{"j":' + '"' + "y" * 5000 + '"}']  # fmt: skip
"""Texts that keep whole: quotes, backslashes, non-ASCII, a long one, an empty value."""


@pytest.mark.parametrize("seed", range(40))
def test_all_kept_whole_answers_as_each_payload_asked(seed: int) -> None:
    """Random texts from pieces that could mislead a test of the joined texts: a joint
    inside a text, a NUL, an empty or a short text, prefixes and ends apart. True must
    mean every text keeps whole; False sends the read to ask each row, so it may also
    mean a text holds a NUL (no JSON text does)."""
    rng = random.Random(seed)
    for _ in range(200):
        texts = _texts(rng)
        if rng.random() < 0.5:  # mostly whole: one odd text among them
            texts = [*rng.choices(WHOLE, k=rng.randrange(4)), *texts[:1]]
            rng.shuffle(texts)
        # a text holding a NUL is left to the rows' own test (False: not known)
        whole = all(keeps_whole(t) and "\0" not in t for t in texts)
        assert all_kept_whole(texts) == whole, texts


def test_all_kept_whole_of_texts_whole_and_not() -> None:
    assert all_kept_whole([]) and all_kept_whole(WHOLE) and all_kept_whole(WHOLE[:1])
    joint_inside = ['{"j":1}', "x", '{"j":1}\0{"j":2}']  # one joint short, one too many
    for odd in (["{\"j\":1", "}"], ["", *WHOLE], [*WHOLE, "{\"j\":"], joint_inside,
                ['{"r":"' + "0" * 64 + '"}', *WHOLE], [b'{"j":1}', *WHOLE]):  # fmt: skip
        assert not all_kept_whole(odd), odd


SMALL_ODD = {
    "a cut payload naming no node": ('{"j":{"x":1}}', '{"r":"' + "0" * 64 + '"}'),
    "an empty payload": ('{"j":{"x":1}}', ""),
    "a payload missing its end": ('{"j":{"x":1}}', '{"j":{"x":1}'),
}


@pytest.mark.parametrize("where", sorted(SMALL_ODD))
def test_one_row_not_kept_whole_among_whole_ones(backend: Backend, where: str) -> None:
    """Every other row keeps whole (no large value): the one that does not is still
    decoded in the read, and raises what ``load_journal`` raises."""
    store = backend.open()
    try:
        new_run(store)
        a, b = key(node="a"), key(node="b")
        store.commit("r1", None, [RecordWrite("feed", {"events": [1]}), intent(a)])
        store.commit("r1", None, [result(a), checkpoint(1, {"n": 1}), intent(b)])
        old, new = SMALL_ODD[where]
        _tamper(backend, 5, old, new)
        whole = _raised(lambda: store.load_journal("r1"))
        rows = store.journal_rows("r1")
        rows.value(0)
        assert type(_raised(rows.check)) is type(whole)
        assert str(_raised(rows.check)) == str(whole)
    finally:
        store.close()


@pytest.mark.parametrize(
    "text", [t[len('{"j":') : -1] for t in WHOLE[:3]] + ['"' + "y" * 3000 + '"']
)
def test_rows_of_every_kind_with_odd_texts_read_as_load_journal_reads(
    store: Store, text: str
) -> None:
    """Quotes, backslashes, non-ASCII, a long text: each row's value and columns as the
    whole journal gives them (NULL columns None, integers ints)."""
    value = loads(text)
    new_run(store)
    a = key(node="a")
    store.commit("r1", None, [RecordWrite("feed", {"v": value}), intent(a, {"v": value})])
    store.commit("r1", None, [result(a, value), checkpoint(1, {"v": value})])
    journal, rows = store.load_journal("r1"), store.journal_rows("r1")
    assert [type(row[SEQ]) for row in rows.rows] == [int] * 4
    assert _values(rows) == [{"v": value}, {"v": value}, journal.results[a].outcome, None]
    (i,) = journal.intents
    assert rows.rows[1][1:] == ("intent", key_text(a), i.executor, i.superstep, None,
                                rows.rows[1][PAYLOAD])  # fmt: skip
    assert rows.rows[2][3:6] == (None, None, None)
    (meta,) = journal.checkpoints
    assert rows.rows[3][2:] == (None, meta.sha256, 1, meta.size, None)
    rows.check()


def _tamper(backend: Backend, seq: int, old: str, new: str) -> None:
    """Replace ``old`` with ``new`` in journal row ``seq``'s payload, or its key column
    when the payload lacks it."""
    backend.tamper_checkpoint_payload("r1", seq, old, new)
    backend.tamper_journal_key("r1", seq, old, new)


def _raised(action: Any) -> BaseException:
    with pytest.raises(Exception) as caught:
        action()
    return caught.value


# --- RangeReads (SQLite): a seq range of the rows, the marks, a store reopened ------------


def test_a_range_of_the_rows_is_that_slice_of_them_and_the_marks_name_them(tmp_path):
    store = SqliteStore(tmp_path / "range.db")
    try:
        _journal(store)
        assert isinstance(store, RangeReads) and store.reopens()
        whole = store.journal_rows("r1")
        seqs = [row[SEQ] for row in whole.rows]
        for first in [0, *seqs]:
            for last in [*seqs, None]:
                part = store.journal_range("r1", first, last)
                want = [
                    r for r in whole.rows if r[SEQ] >= first and (last is None or r[SEQ] <= last)
                ]
                assert part.rows == want, (first, last)
                part.check()  # the cut rows of a range decode as the whole journal's
        marks = store.journal_marks("r1")
        feeds = [r for r in whole.rows if r[1] == "record" and r[KIND] == "feed"]
        assert marks.checkpoints == [r[SEQ] for r in whole.rows if r[1] == "checkpoint"]
        assert marks.feeds == [r[SEQ] for r in feeds] and feeds
        others = {r[KIND] for r in whole.rows if r[1] == "record" and r[KIND] != "feed"}
        assert marks.kinds == others
        with closing(sqlite3.connect(tmp_path / "range.db")) as conn:
            query = "SELECT payload FROM journal WHERE record_kind = 'feed'"
            stored = [row[0] for row in conn.execute(query)]
        assert len(marks.feed_texts) == len(",".join(stored))
        assert all(text in marks.feed_texts for text in stored)
        assert store.journal_marks("nobody") == JournalMarks([], [], frozenset(), "")
        with pytest.raises(PlaitError) as unknown:
            store.journal_range("nobody", 0, None)
        assert unknown.value.code == "E017"

        reopened = store.reopen()  # read-only, a connection of its own, the same rows
        try:
            assert reopened.journal_range("r1", 0, None).rows == whole.rows
            assert reopened.read_only
        finally:
            reopened.close()
    finally:
        store.close()
    memory = SqliteStore(":memory:")
    try:
        assert not memory.reopens()
    finally:
        memory.close()
