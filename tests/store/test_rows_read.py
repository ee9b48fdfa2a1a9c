"""The journal's records, read and written, have hand-written ``__init__``s that fill their
``__dict__`` in one call (issue #22: a superstep builds four, verify reads four): they
must stay the frozen dataclasses they declare."""

from __future__ import annotations

import dataclasses

import pytest

from plait.core.keys import JournalKey
from plait.store.chunks import decode_row
from plait.store.records import (
    CheckpointMeta,
    IntentRecord,
    Journal,
    Record,
    ResultRecord,
)
from plait.store.rows import add_row, key_text

KEY = JournalKey("r", "", "step", 1, 0, "tool")


def _decode(payload: str) -> object:
    return decode_row(payload, lambda digest: b"")


def test_rows_read_as_the_constructors_make_them() -> None:
    journal = Journal("r")
    k = key_text(KEY)
    add_row(journal, 1, ("record", None, None, "feed", None, None, None, None, None, None,
                         '{"j":{"events":[]}}'), _decode)  # fmt: skip
    add_row(journal, 2, ("intent", k, "step", None, 1, 5, "idem", None, None, None,
                         '{"j":{"i":0}}'), _decode)  # fmt: skip
    add_row(journal, 3, ("result", k, None, None, None, 6, None, 7, None, None,
                         '{"j":{"Completed":{"result":{"i":1}}}}'), _decode)  # fmt: skip
    add_row(journal, 4, ("checkpoint", None, None, None, 1, None, None, None, "ab", 9, None),
            _decode)  # fmt: skip
    assert journal.records == [Record(1, "feed", {"events": []})]
    assert journal.intents == [IntentRecord(2, KEY, "step", {"i": 0}, 1, 5, "idem")]
    assert journal.results == {KEY: ResultRecord(3, KEY, {"Completed": {"result": {"i": 1}}}, 6, 7)}
    assert journal.checkpoints == [CheckpointMeta(4, 1, "ab", 9)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        journal.checkpoints[0].seq = 5  # type: ignore[misc]
