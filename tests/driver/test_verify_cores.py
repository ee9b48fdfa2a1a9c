"""Verify one long run on every core (``driver/verify_cores.py``, issue #22 target 3).

A plain run is replayed in segments at once, cut at stored checkpoints; only "all is
well" is decided so. Checked on real SQLite files (and one PostgreSQL database): the
report is the one a replay in one process gives, for a clean run and for a corrupted
checkpoint, intent, result or feed in the first, a middle or the last segment; a run that
forked, migrated, raised a budget or resumed (the recorded journals) verifies as it did;
a segment may start at every feed where one can; no child process outlives the call. On
SQLite each process reads its own rows: what the parent reads (its connection's
statements), a corrupt row only a child reads, the cut rule where checkpoints are few, a
segment whose rows are not plain, a WAL checkpointer alive at the fork.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from inprocess import run_cli
from plait import Runtime, Workflow
from plait.core.errors import PlaitError
from plait.driver import verify_cores
from plait.driver.verify import _pinned_env
from plait.driver.verify_cores import (
    FIRST_SHARE,
    Outline,
    Segment,
    Verdict,
    plain,
    plan_segments,
    read_segment,
    reads_apart,
    segments_from,
    start_positions,
    verify_apart,
    verify_on_cores,
    verify_segments,
)
from plait.store import wal
from plait.store.base import JournalMarks
from plait.store.rows import ITEM, KIND, SEQ
from plait.store.wal import THREAD_NAME

JOURNALS = Path(__file__).resolve().parents[1] / "fixtures" / "journals"
RECORDED: list[str] = json.loads((JOURNALS / "meta.json").read_text())["runs"]
STEPS = 60


def counting_loop(n: int) -> Workflow:
    """``step -> step (i < n) -> done``, each step adding a line to a growing log."""

    def step(i: int, log: list[str]) -> dict[str, Any]:
        return {"i": i + 1, "log": [*log, f"line {i}"]}

    def done() -> dict[str, Any]:
        return {}

    return (
        Workflow.new("loop")
        .node("step", tool=step)
        .node("done", tool=done)
        .edge("step", "step", when=f"i < {n}", max_cycles=n)
        .edge("step", "done", when=f"i >= {n}")
        .budget(max_supersteps=n + 10)
    )


@pytest.fixture
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments of a few feeds: a short run is split as a long one is."""
    monkeypatch.setattr(verify_cores, "MIN_SEGMENT_FEEDS", 5)


@pytest.fixture
def loop_db(tmp_path: Path) -> str:
    db = f"sqlite:///{tmp_path / 'loop.db'}"
    with Runtime(db) as rt:
        assert rt.run_sync(counting_loop(STEPS), {"i": 0, "log": []}, run_id="r").status == (
            "completed"
        )
    return db


def outcome(rt: Runtime, run_id: str, workers: int) -> Any:
    """The report of verifying ``run_id``, or the error it raised (code and message)."""
    try:
        return rt.verify(run_id, workers=workers).to_json()
    except PlaitError as exc:
        return ("raised", exc.code, str(exc))


def split_report(rt: Runtime, run_id: str, workers: int) -> Any:
    """What verifying on ``workers`` cores decides by itself (None: it left it to one
    process)."""
    manifest = dict(rt.store.manifests(run_id)[0])
    env = _pinned_env(rt.host, run_id, manifest, None, {})
    if reads_apart(rt.store):  # SQLite: each process reads its own rows
        return verify_apart(rt.store, run_id, env, workers)
    return verify_on_cores(rt.store, rt.store.journal_rows(run_id), env, workers)


@pytest.fixture
def no_child_left() -> Iterator[None]:
    """Fails the test if a child process of this one is left (running or a zombie)."""
    before = children()
    yield
    assert children() == before


def children() -> set[int]:
    """This process's child processes, zombies included."""
    task = Path(f"/proc/self/task/{threading.get_native_id()}/children")
    if not task.exists():
        pytest.skip("no /proc children list here")
    return {int(pid) for pid in task.read_text().split()}


# --- a clean run --------------------------------------------------------------------------


@pytest.mark.usefixtures("small_segments", "no_child_left")
@pytest.mark.parametrize("workers", [2, 3, 5])
def test_a_long_run_verified_on_every_core_reports_as_in_one_process(loop_db, workers):
    with Runtime(loop_db) as rt:
        alone = rt.verify("r", workers=1)
        assert alone.verified and alone.up_to == "terminal"
        journal = rt.store.journal_rows("r")
        assert plain(journal) and len(plan_segments(journal, workers)) == workers

        assert split_report(rt, "r", workers) == alone  # decided on the cores
        assert rt.verify("r", workers=workers) == alone


@pytest.mark.usefixtures("no_child_left")
def test_a_short_run_stays_in_one_process(loop_db):
    with Runtime(loop_db) as rt:
        journal = rt.store.journal_rows("r")
        assert len(plan_segments(journal, 4)) == 1  # under MIN_SEGMENT_FEEDS a segment
        assert split_report(rt, "r", 4) is None
        assert rt.verify("r", workers=4).verified


@pytest.mark.usefixtures("no_child_left")
def test_a_segment_may_start_at_every_feed_where_one_can(loop_db):
    with Runtime(loop_db) as rt:
        alone = rt.verify("r", workers=1)
        journal = rt.store.journal_rows("r")
        env = _pinned_env(rt.host, "r", dict(rt.store.manifests("r")[0]), None, {})
        positions = start_positions(journal)
        assert len(positions) == STEPS  # every feed of a result but the first's
        for at in positions:
            segments = segments_from(journal, [at])
            journal = rt.store.journal_rows("r")
            assert verify_segments(rt.store, journal, env, segments) == alone, at
        every = segments_from(journal, positions)  # one segment per feed: STEPS children
        assert verify_segments(rt.store, journal, env, every[:3]) is None  # not the whole run
        assert verify_segments(rt.store, rt.store.journal_rows("r"), env, every) == alone


# --- a corrupted run: exactly the report of one process ---------------------------------


def corrupt_payload(old: str, new: str) -> Callable[[str], str]:
    def change(payload: str) -> str:
        assert old in payload, payload
        return payload.replace(old, new, 1)

    return change


CORRUPTIONS: dict[str, tuple[str, str, Callable[[str], str]]] = {
    # what, (item, column, change): the row's column as text, changed
    "intent": ("intent", "payload", corrupt_payload('{"j":{"i":', '{"j":{"i":1000')),
    "intent-value": ("intent", "payload", corrupt_payload('{"i":', '{"j":0,"i":')),
    "result": ("result", "payload", corrupt_payload('"result":{', '"result":{"extra":1,')),
    "feed": ("feed", "payload", corrupt_payload('"clock":', '"clock":1')),
    "feed-undecodable": ("feed", "payload", corrupt_payload('"events"', '"events')),
    "checkpoint-digest": ("checkpoint", "sha256", lambda sha: "0" * 64),
    "checkpoint-size": ("checkpoint", "size", lambda size: str(int(size) + 1)),
}


def corrupt(db: str, seq: int, column: str, change: Callable[[str], str]) -> None:
    path = db.removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    try:
        (value,) = conn.execute(
            f"SELECT {column} FROM journal WHERE run_id = 'r' AND seq = ?", (seq,)
        ).fetchone()
        changed = change(str(value))
        conn.execute(
            f"UPDATE journal SET {column} = ? WHERE run_id = 'r' AND seq = ?", (changed, seq)
        )
        conn.commit()
    finally:
        conn.close()


def row_in(rt: Runtime, segment: Segment, item: str) -> int:
    """The seq of the middle row of ``item`` (a feed: a record of that kind) in ``segment``."""
    stop = segment.stop
    rows = [r for r in rt.store.journal_rows("r").rows if r[SEQ] >= segment.first]
    rows = [r for r in rows if stop is None or r[SEQ] < stop]
    if item == "feed":
        found = [r[SEQ] for r in rows if r[ITEM] == "record" and r[KIND] == "feed"]
    else:
        found = [r[SEQ] for r in rows if r[ITEM] == item]
    return found[len(found) // 2]


@pytest.mark.usefixtures("small_segments", "no_child_left")
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("what", sorted(CORRUPTIONS))
def test_a_corrupted_run_gets_exactly_the_report_of_one_process(loop_db, where, what):
    item, column, change = CORRUPTIONS[what]
    with Runtime(loop_db) as rt:
        segments = plan_segments(rt.store.journal_rows("r"), 3)
        assert len(segments) == 3 and split_report(rt, "r", 3) is not None
        segment = segments[{"first": 0, "middle": 1, "last": 2}[where]]
        corrupt(loop_db, row_in(rt, segment, item), column, change)

    with Runtime(loop_db) as rt:
        alone = outcome(rt, "r", 1)
        assert isinstance(alone, tuple) or alone["verified"] is False, alone
        assert split_report(rt, "r", 3) is None  # a segment did not pass: one process
        assert outcome(rt, "r", 3) == alone


@pytest.mark.usefixtures("small_segments", "no_child_left")
def test_a_checkpoint_a_segment_starts_from_that_fails_its_hash_is_left_to_one_process(loop_db):
    with Runtime(loop_db) as rt:
        start = plan_segments(rt.store.journal_rows("r"), 3)[1].start
        assert start is not None
    corrupt(loop_db, start, "payload", corrupt_payload('"i":', '"i":7'))  # sha256 kept
    with Runtime(loop_db) as rt:
        alone = outcome(rt, "r", 1)
        assert alone["verified"] is True  # the digests compared: the bytes never read
        assert split_report(rt, "r", 3) is None
        assert outcome(rt, "r", 3) == alone


# --- runs that fork, migrate, raise a budget, resume ------------------------------------


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Runtime]:
    """The recorded journals (tests/fixtures/journals), on a copy, read from its folder."""
    shutil.copyfile(JOURNALS / "runs.db", tmp_path / "runs.db")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with Runtime(f"sqlite:///{tmp_path / 'runs.db'}") as rt:
            yield rt
    finally:
        os.chdir(cwd)


@pytest.mark.usefixtures("no_child_left")
def test_every_recorded_run_verifies_on_every_core_as_it_did(recorded, monkeypatch):
    monkeypatch.setattr(verify_cores, "MIN_SEGMENT_FEEDS", 1)  # split wherever it can
    split = set()
    for run_id in RECORDED:
        want = json.loads((JOURNALS / "expected" / f"{run_id}.json").read_text())["verify"]
        assert outcome(recorded, run_id, 3) == want, run_id
        if split_report(recorded, run_id, 3) is not None:
            split.add(run_id)
    # engine epoch 1: whole-bytes checkpoints, compared by their bytes: one process, always
    assert split == set()


@pytest.mark.usefixtures("no_child_left")
def test_the_runs_a_segment_does_not_follow_are_not_plain(recorded):
    for run_id, why in [
        ("orders-chain-fork-f0000001", "a fork's seed"),
        ("budget-raised", "a budget raised"),
        ("approval-yes", "resumed after an answer"),
        ("tokens-raised", "a budget raised"),
    ]:
        assert not plain(recorded.store.journal_rows(run_id)), why
    assert plain(recorded.store.journal_rows("orders-chain"))


# --- PostgreSQL ---------------------------------------------------------------------------


@pytest.mark.usefixtures("small_segments", "no_child_left")
def test_a_long_run_on_postgres_verifies_on_every_core_as_in_one_process(postgres_url):
    with Runtime(postgres_url) as rt:
        rt.run_sync(counting_loop(STEPS), {"i": 0, "log": []}, run_id="r")
        alone = rt.verify("r", workers=1)
        assert alone.verified
        assert split_report(rt, "r", 3) == alone
        assert rt.verify("r", workers=3) == alone
        assert rt.verify("r", workers=1) == alone  # the pool's connections serve on


# --- plait verify --workers N -------------------------------------------------------------


@pytest.mark.usefixtures("small_segments", "no_child_left")
def test_plait_verify_workers_prints_what_one_process_prints(loop_db, tmp_path):
    def verify(*args: str) -> subprocess.CompletedProcess[str]:
        argv = ["plait", "verify", "r", *args, "--db", loop_db, "--json"]
        return run_cli(argv, env={}, cwd=tmp_path)

    alone = verify("--workers", "1")
    assert alone.returncode == 0 and json.loads(alone.stdout)["verified"] is True
    assert verify("--workers", "3").stdout == alone.stdout
    assert verify().stdout == alone.stdout  # every core
    assert verify("--workers", "0").returncode == 2  # at least one


# --- runs of engine epochs 1 and 2: whole-bytes checkpoints ------------------------------

EPOCH2 = Path(__file__).resolve().parents[1] / "fixtures" / "epoch2"


@pytest.mark.usefixtures("no_child_left")
def test_an_epoch_2_run_whose_checkpoint_bytes_are_corrupt_fails_on_every_core_too(
    tmp_path, monkeypatch
):
    # A whole-bytes checkpoint is compared by its bytes, which the store checks against the
    # row's digest when it reads them: a payload changed under an intact digest is E010 in
    # one process, and a segment (which reads no stored bytes) must not pass it.
    shutil.copyfile(EPOCH2 / "runs.db", tmp_path / "runs.db")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with Runtime(db) as rt:
        journal = rt.store.journal_rows("count-done")
        checkpoints = [journal.rows[i][SEQ] for i in journal.checkpoints]
    corrupt_epoch2 = sqlite3.connect(tmp_path / "runs.db")
    try:
        corrupt_epoch2.execute(
            "UPDATE journal SET payload = replace(payload, '\"clock_ms\":', '\"clock_ms\":1')"
            " WHERE run_id = 'count-done' AND seq = ? AND instr(payload, '\"clock_ms\":') > 0",
            (checkpoints[len(checkpoints) // 2],),
        )
        assert corrupt_epoch2.total_changes == 1
        corrupt_epoch2.commit()
    finally:
        corrupt_epoch2.close()
    with Runtime(db) as rt:
        alone = outcome(rt, "count-done", 1)
        assert alone[:2] == ("raised", "E010"), alone
        monkeypatch.setattr(verify_cores, "MIN_SEGMENT_FEEDS", 1)  # split wherever it can
        assert split_report(rt, "count-done", 3) is None
        assert outcome(rt, "count-done", 3) == alone


EPOCH3 = Path(__file__).resolve().parents[1] / "fixtures" / "epoch3"


@pytest.mark.usefixtures("no_child_left")
@pytest.mark.parametrize(
    ("run_id", "splits"), [("grow-done", True), ("count-done", True), ("pay-done", False)]
)
def test_an_epoch_3_run_verifies_on_every_core_as_in_one_process(
    tmp_path, monkeypatch, run_id, splits
):
    # grow-done's checkpoints are cut into nodes, its log paged; pay-done was resumed after
    # an approval: left to one process
    shutil.copyfile(EPOCH3 / "runs.db", tmp_path / "runs.db")
    monkeypatch.syspath_prepend(str(EPOCH3))  # its workflows' tools, as verify loads them
    monkeypatch.chdir(EPOCH3)
    monkeypatch.setattr(verify_cores, "MIN_SEGMENT_FEEDS", 1)  # split wherever it can
    with Runtime(f"sqlite:///{tmp_path / 'runs.db'}") as rt:
        alone = outcome(rt, run_id, 1)
        assert alone["verified"], alone
        report = split_report(rt, run_id, 3)
        assert (report is not None) == splits
        assert report is None or report.to_json() == alone
        assert outcome(rt, run_id, 3) == alone


# --- each process reads its own rows (SQLite: verify_apart) -------------------------------

_RANGE = re.compile(r"FROM journal WHERE run_id = 'r' AND seq >= (\d+) AND seq <= (\d+)")


def journal_reads(rt: Runtime, run: str, workers: int) -> tuple[object, list[str]]:
    """``outcome`` of verifying ``run`` and the statements reading its journal that ran on
    this process's store connection meanwhile (SQLite's trace: each with its values)."""
    statements: list[str] = []
    conn = rt.store._conn  # type: ignore[attr-defined]
    conn.set_trace_callback(statements.append)
    try:
        found = outcome(rt, run, workers)
    finally:
        conn.set_trace_callback(None)
    return found, [s for s in statements if "FROM journal" in s]


@pytest.mark.usefixtures("small_segments", "no_child_left")
def test_the_parent_reads_only_the_rows_of_its_own_segment(loop_db):
    with Runtime(loop_db) as rt:
        alone = outcome(rt, "r", 1)
        segments = plan_segments(Outline.of_marks(rt.store.journal_marks("r")), 3)
        assert len(segments) == 3
        found, reads = journal_reads(rt, "r", 3)
        assert found == alone
        ranges = [tuple(map(int, m.groups())) for s in reads if (m := _RANGE.search(s))]
        assert ranges == [(0, segments[1].first - 1)]  # its rows, not a child's
        assert len(reads) == 2  # and the marks: no payload but feeds', read once
        assert "group_concat(payload) FILTER (WHERE record_kind = 'feed')" in reads[0]


@pytest.mark.usefixtures("small_segments", "no_child_left")
@pytest.mark.parametrize("where", [1, 2])
def test_a_corrupt_row_only_a_child_reads_is_its_e010_as_in_one_process(loop_db, where):
    with Runtime(loop_db) as rt:
        segments = plan_segments(Outline.of_marks(rt.store.journal_marks("r")), 3)
        rows = rt.store.journal_rows("r").rows
        stop = segments[where].stop
        feeds = [
            r[SEQ]
            for r in rows
            if r[ITEM] == "record"
            and r[KIND] == "feed"
            and r[SEQ] >= segments[where].first
            and (stop is None or r[SEQ] < stop)
        ]
    bad = feeds[len(feeds) // 2]
    corrupt(loop_db, bad, "payload", corrupt_payload('"events"', '"events'))
    with Runtime(loop_db) as rt:
        alone = outcome(rt, "r", 1)
        assert alone[:2] == ("raised", "E010"), alone
        assert split_report(rt, "r", 3) is None  # the child that read it did not pass
        found, reads = journal_reads(rt, "r", 3)
        assert found == alone  # the whole replay's error, word for word
        parent = [tuple(map(int, m.groups())) for s in reads if (m := _RANGE.search(s))]
        assert parent[0][1] < bad  # the split's parent never read it: a child did


@pytest.mark.usefixtures("small_segments", "no_child_left")
def test_a_corrupt_row_in_the_parents_range_is_its_e010_as_in_one_process(loop_db):
    with Runtime(loop_db) as rt:
        first = plan_segments(Outline.of_marks(rt.store.journal_marks("r")), 3)[1].first
        rows = rt.store.journal_rows("r").rows
        bad = [r[SEQ] for r in rows if r[KIND] == "feed" and r[SEQ] < first][-2]
    corrupt(loop_db, bad, "payload", corrupt_payload('"events"', '"events'))
    with Runtime(loop_db) as rt:
        alone = outcome(rt, "r", 1)
        assert alone[:2] == ("raised", "E010"), alone
        assert split_report(rt, "r", 3) is None
        assert outcome(rt, "r", 3) == alone


# --- the plan: from the rows' seqs and kinds alone -----------------------------------------


def test_the_marks_outline_the_run_as_its_whole_journal_does(loop_db):
    with Runtime(loop_db) as rt:
        marked = Outline.of_marks(rt.store.journal_marks("r"))
        assert marked == Outline.of_rows(rt.store.journal_rows("r"))
        assert len(marked.feeds) == STEPS + 2 and marked.plain
        assert rt.store.journal_marks("nobody") == JournalMarks([], [], frozenset(), "")


def test_the_marks_tell_a_run_not_plain_by_a_record_kind_or_a_name_in_any_feed_text():
    feed = '{"j":{"events":[{"clock":1}]}}'
    cut = '{"c":"ab12","events":"n:cd34","resume_from":3}'  # a head of nodes naming one
    assert Outline.of_marks(JournalMarks([2], [1, 3], frozenset(), f"{feed},{feed}")).plain
    assert Outline.of_marks(JournalMarks([2], [1], frozenset({"outcome"}), feed)).plain
    for kind in ("fork", "migrate"):
        assert not Outline.of_marks(JournalMarks([2], [1], frozenset({kind}), feed)).plain
    assert not Outline.of_marks(JournalMarks([2], [1, 3], frozenset(), f"{feed},{cut}")).plain
    raised = '{"j":{"events":[{"budget_raised":{"max_supersteps":9}}]}}'
    assert not Outline.of_marks(JournalMarks([2], [1, 3], frozenset(), f"{raised},{feed}")).plain


def test_the_cut_rule_where_checkpoints_are_few():
    # feeds every 4 seqs; a segment starts only at a feed with a checkpoint since the last
    feeds = list(range(1, 400, 4))
    none = Outline(feeds, [], True)
    assert start_positions(none) == [] and len(plan_segments(none, 4, min_feeds=5)) == 1
    one = Outline(feeds, [250], True)  # between feeds 62 (seq 249) and 63 (seq 253)
    assert start_positions(one) == [63]
    segments = plan_segments(one, 4, min_feeds=5)
    assert [(s.first, s.stop, s.compared, s.start) for s in segments] == [
        (0, 253, 0, None),
        (253, None, 1, 250),
    ]
    early = Outline(feeds, [2, 3], True)  # only before every share's first feed: no split
    assert start_positions(early) == [1]
    assert [s.first for s in plan_segments(early, 3, min_feeds=5)] == [0]
    assert segments_from(early, []) == [Segment(0, None, 0, None)]


def _plan_by_every_start(outline: Outline, workers: int, min_feeds: int) -> list[Segment]:
    """The plan as the eighth round made it: every start position listed, then bisected."""
    feeds = len(outline.feeds)
    count = min(workers, feeds // min_feeds)
    positions = start_positions(outline)
    shares = count - 1 + FIRST_SHARE
    starts: list[int] = []
    for part in range(1, count):
        index = bisect_left(positions, (part - 1 + FIRST_SHARE) * feeds / shares)
        if index < len(positions) and (not starts or positions[index] > starts[-1]):
            starts.append(positions[index])
    return segments_from(outline, starts)


def test_the_plan_looks_for_each_start_from_its_share_as_a_list_of_every_start_does():
    chance = random.Random(22)
    for _ in range(300):
        seqs = sorted(chance.sample(range(1, 2000), chance.randrange(2, 400)))
        feeds = [seq for seq in seqs if chance.random() < 0.5]
        checkpoints = [seq for seq in seqs if seq not in feeds and chance.random() < 0.3]
        outline = Outline(feeds, checkpoints, True)
        for workers, min_feeds in [(2, 1), (3, 5), (4, 20), (8, 3)]:
            want = _plan_by_every_start(outline, workers, min_feeds)
            assert plan_segments(outline, workers, min_feeds) == want


# --- a segment whose rows are not plain -------------------------------------------------------


@pytest.mark.usefixtures("small_segments", "no_child_left")
def test_a_segment_whose_rows_resume_or_raise_a_budget_does_not_pass(tmp_path):
    db = f"sqlite:///{tmp_path / 'raised.db'}"
    with Runtime(db) as rt:
        wf = counting_loop(STEPS).budget(max_supersteps=40)
        assert rt.run_sync(wf, {"i": 0, "log": []}, run_id="r").status == "budget_exhausted"
        rt.raise_budget("r", {"max_supersteps": STEPS + 10})
        assert rt.resume_sync("r", workflow=wf).status == "completed"

        alone = outcome(rt, "r", 1)
        assert alone["verified"], alone
        outline = Outline.of_marks(rt.store.journal_marks("r"))
        assert not outline.plain  # its feed's text names both: no child is forked
        assert split_report(rt, "r", 3) is None and outcome(rt, "r", 3) == alone

        # each segment checks its own rows too (a feed cut into nodes is not in the marks)
        env = _pinned_env(rt.host, "r", dict(rt.store.manifests("r")[0]), None, {})
        plan = Outline(outline.feeds, outline.checkpoints, True)
        rows = rt.store.journal_rows("r").rows
        resumed = next(r[SEQ] for r in rows if r[KIND] == "feed" and '"resume_from"' in r[-1])
        segments = segments_from(plan, start_positions(plan)[::10])
        holding = [s for s in segments if s.first <= resumed and (s.stop or resumed + 1) > resumed]
        assert len(holding) == 1 and holding[0] is not segments[0]
        for segment in segments[: segments.index(holding[0]) + 1]:
            verdict = read_segment(rt.store, "r", env, segment, last=False, reopen=True)
            assert isinstance(verdict, Verdict) == (segment is not holding[0]), segment
        journal = rt.store.journal_rows("r")
        seqs = [row[SEQ] for row in journal.rows]
        for segment in segments:  # what each checks of its own rows: only the one holding it
            stop = len(seqs) if segment.stop is None else seqs.index(segment.stop)
            rows = range(seqs.index(segment.first) if segment.first else 0, stop)
            assert plain(journal, rows) == (segment is not holding[0]), segment


# --- a WAL checkpointer alive at the fork ------------------------------------------------------


@pytest.mark.usefixtures("small_segments", "no_child_left")
def test_a_store_whose_wal_checkpointer_runs_verifies_on_every_core(tmp_path):
    with Runtime(f"sqlite:///{tmp_path / 'wal.db'}") as rt:
        rt.run_sync(counting_loop(300), {"i": 0, "log": []}, run_id="r")
        assert any(t.name.startswith(THREAD_NAME) for t in threading.enumerate())
        alone = rt.verify("r", workers=1)
        assert split_report(rt, "r", 2) == alone  # the children opened the file themselves
        assert rt.verify("r", workers=2) == alone
        checkpointer = rt.store._checkpointer  # type: ignore[attr-defined]
        with wal.idle():  # held between two SQLite calls while a fork would happen
            assert checkpointer.in_sqlite.locked()
        assert not checkpointer.in_sqlite.locked()
