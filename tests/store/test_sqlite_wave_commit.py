"""A wave's commit on SQLite while its driver holds the lease: one fenced statement.

After a first commit under a lease, the store knows the run's last seq, so a wave's rows
go in as one autocommitted INSERT whose WHERE reads the lease token (§5.7): no BEGIN,
no read of the journal, no COMMIT. What another process did meanwhile (a record that
took the next seq, a lease taken over) is caught by the primary key or by the fence, and
the wave is committed (or refused) as a transaction that reads both, as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.core.errors import PlaitError
from plait.core.keys import JournalKey
from plait.store import (
    CheckpointWrite,
    LeaseOwner,
    RecordWrite,
    ResultWrite,
    SqliteStore,
    Write,
)
from support.leased_waves import RUN, leased, wave


def _seqs(store: SqliteStore) -> list[tuple[int, str]]:
    rows = store._conn.execute(
        "SELECT seq, item FROM journal WHERE run_id = ? ORDER BY seq", (RUN,)
    ).fetchall()
    return [(int(seq), str(item)) for seq, item in rows]


def test_a_wave_under_a_held_lease_is_one_statement(tmp_path: Path) -> None:
    store, token = leased(tmp_path / "a.db")
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        store.commit(RUN, token, wave(2))
    finally:
        store._conn.set_trace_callback(None)
        store.close()
    assert len(statements) == 1, statements
    assert statements[0].startswith("INSERT INTO journal")
    assert "leases" in statements[0]  # fenced by the lease token in the same statement


def test_a_record_another_store_wrote_between_waves_takes_its_seq(tmp_path: Path) -> None:
    store, token = leased(tmp_path / "a.db")
    other = SqliteStore(tmp_path / "a.db")
    try:
        other.commit(RUN, None, [RecordWrite("cancel", {"by": "bob", "reason": "stop"})])
        store.commit(RUN, token, wave(2))
        store.commit(RUN, token, wave(3))
        seqs = _seqs(store)
        assert [seq for seq, _ in seqs] == list(range(1, 14))
        assert seqs[4] == (5, "record")  # the cancel, between the two waves
        journal = store.load_journal(RUN)
        assert [r.kind for r in journal.records] == ["feed", "cancel", "feed", "feed"]
        assert len(journal.intents) == 3 and len(journal.results) == 3
    finally:
        other.close()
        store.close()


def test_a_lease_taken_over_between_waves_refuses_the_nextwave(tmp_path: Path) -> None:
    store, token = leased(tmp_path / "a.db")
    other = SqliteStore(tmp_path / "a.db")
    try:
        # The first holder's lease lapsed: another driver takes the run over.
        taken = other.acquire_lease(RUN, LeaseOwner("host-b", 2, 0), 120_000, 60_000, bool)
        assert taken == token + 1
        with pytest.raises(PlaitError) as caught:
            store.commit(RUN, token, wave(2))
        assert caught.value.code == "E021"
        assert len(_seqs(store)) == 4  # nothing of the refused wave
        other.commit(RUN, taken, wave(2))  # the new holder goes on where the run was
        assert [seq for seq, _ in _seqs(other)] == list(range(1, 9))
    finally:
        other.close()
        store.close()


def test_a_released_lease_refuses_the_nextwave(tmp_path: Path) -> None:
    store, token = leased(tmp_path / "a.db")
    try:
        store.release_lease(RUN, token)
        with pytest.raises(PlaitError) as caught:
            store.commit(RUN, token, wave(2))
        assert caught.value.code == "E021"
    finally:
        store.close()


def test_a_wave_that_gives_the_lease_up_releases_it_after_a_fencedwave(tmp_path: Path) -> None:
    # A drive's last commit gives its lease up (release=True): the one-statement path,
    # which only inserts rows, must not take it, or the lease would stay held.
    store, token = leased(tmp_path / "a.db")
    try:
        store.commit(RUN, token, wave(2))  # fenced: the store knows the last seq
        store.commit(RUN, token, wave(3), release=True)
        assert [item for _, item in _seqs(store)].count("checkpoint") == 3
        with pytest.raises(PlaitError) as caught:
            store.commit(RUN, token, wave(4))
        assert caught.value.code == "E021"
        assert store.acquire_lease(RUN, LeaseOwner("host-b", 2, 0), 1, 60_000, lambda _: True)
    finally:
        store.close()


def test_an_intent_journaled_twice_is_still_refused_by_its_key(tmp_path: Path) -> None:
    store, token = leased(tmp_path / "a.db")
    try:
        store.commit(RUN, token, wave(2))
        with pytest.raises(PlaitError) as caught:
            store.commit(RUN, token, wave(2)[3:])  # wave 2's intent again
        assert caught.value.code == "E020"
        assert "already has an intent" in caught.value.detail
        store.commit(RUN, token, wave(3))  # the store goes on at the right seq
        assert [seq for seq, _ in _seqs(store)] == list(range(1, 13))
    finally:
        store.close()


_EVERY_COLUMN = (
    "SELECT *, typeof(seq), typeof(item), typeof(payload) FROM journal ORDER BY run_id, seq"
)


def test_a_fenced_wave_stores_the_rows_a_transaction_stores(tmp_path: Path) -> None:
    """The fenced INSERT writes the run id, the seqs and the items once (its own form of
    the statement): every column of every row is what the transaction's INSERT writes."""
    from plait.core.merkle import CheckpointCut

    key = JournalKey(RUN, "", "step", 9, 0, "tool")
    waves: list[list[Write]] = [
        wave(2),
        [
            RecordWrite("feed", {"events": []}, '{"events":[]}'),
            CheckpointWrite(4, b'{"i":4}', at_rest=True),
            CheckpointWrite(5, None, cut=CheckpointCut('{"j":{"i":5}}', {}, "d" * 64, 7)),
            ResultWrite(key, {"Failed": {"cause": "Timeout", "detail": "late"}}, 9, 4),
            RecordWrite("envelope", {"asks": []}),
        ],
        wave(3),
    ]
    journals = []
    for name, fenced in (("fenced.db", True), ("transaction.db", False)):
        store, token = leased(tmp_path / name)
        try:
            statements: list[str] = []
            store._conn.set_trace_callback(statements.append)
            for writes in waves:
                if not fenced:
                    store._last_seq.clear()  # the commit reads the last seq: a transaction
                store.commit(RUN, token, writes)
            store._conn.set_trace_callback(None)
            assert ("BEGIN IMMEDIATE" in statements) is not fenced
            journals.append(store._conn.execute(_EVERY_COLUMN).fetchall())
        finally:
            store.close()
    assert journals[0] == journals[1]
    assert len(journals[0]) == 4 + 4 + 5 + 4


def _rows_of_every_form() -> list[tuple[str, tuple[object, ...]]]:
    """``write_row`` of each journal write, in each form it takes."""
    from plait.core.merkle import CheckpointCut
    from plait.store.chunks import collecting_encoder

    encode = collecting_encoder({}, set(), None)
    key = JournalKey(RUN, "", "step", 1, 0, "tool")
    writes: list[Write] = [
        *wave(3),
        RecordWrite("feed", {"events": []}, '{"events":[]}'),
        CheckpointWrite(4, b'{"i":4}', at_rest=True),
        CheckpointWrite(5, None, cut=CheckpointCut('{"j":{"i":5}}', {}, "d" * 64, 7)),
        CheckpointWrite(6, None, cut=CheckpointCut('{"j":{"i":6}}', {}, "d" * 64, 7), at_rest=True),
        ResultWrite(key, {"Failed": {"cause": "Timeout", "detail": "late"}}, 9, 4),
    ]
    from plait.store.rows import write_row

    rows = [write_row(write, encode) for write in writes]
    return [(str(row[0]), row) for row in rows]


def test_a_row_leaves_unset_every_column_its_item_never_sets() -> None:
    """The INSERT writes the columns ``MAY_BE_SET`` leaves out as NULL literals, without
    looking at the row: ``write_row`` must leave them None, in every form of every write."""
    from plait.store.rows import MAY_BE_SET

    for item, row in _rows_of_every_form():
        assert len(row) == len(MAY_BE_SET[item])
        unset = [i for i, may in enumerate(MAY_BE_SET[item]) if not may and row[i] is not None]
        assert unset == [], (item, row)
