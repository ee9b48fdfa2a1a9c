"""Verify one long run on every core: its replay cut into segments at stored checkpoints
(issue #22, target 3; docs/architecture.md §5.5).

Re-driving a run is pure CPU in one Python thread. A long run is cut at ``count - 1``
feeds into ``count`` segments (the first a little longer, ``FIRST_SHARE``): the first is
replayed here, each other one in a child process forked for it, all at once. A segment
starting mid-run starts from the stored checkpoint just before its first feed, driven on
by one step with no event (what a resume from that checkpoint does first: the superstep
the checkpoint closed opens the next one).
Each segment compares every checkpoint and every intent's first emission it produces,
as the whole replay does, and ends with the fingerprint of its state (the canonical JSON
of the scheduler state); it begins with the fingerprint of the state it started from.
The segments join when each one's end is the next one's beginning: then every step was
re-driven from exactly the state the whole replay would have reached, and the report is
the one the whole replay gives (verified, every checkpoint, the last segment's ``up_to``).

Only "all is well" is decided on several cores. A segment that fails, raises, or meets
anything it does not handle, fingerprints that do not join, a child that dies: any of
these and the caller replays the whole run in one process, whose report is the
authoritative one (``verify_run``). So reports are the same by construction; a segment
is at least as strict as the whole replay (its first emission of an intent may be a
re-emission there: compared all the same).

Which runs are split (``plain``): engine epoch 3 or later, no reshape (``verify
--workflow``), no fork or migration record, no feed that resumes from a checkpoint or
raises a budget (told before the fork from the rows' kinds and the feeds' stored texts,
and checked again by each segment over its own rows: a name held in a feed's nodes is
seen only there, and fails its segment). Everything else is replayed in one process, as
before. A segment compares each checkpoint as the whole replay does from epoch 3 on, by the Merkle
digest and size the step computed against the journal row's: it needs no stored bytes. Runs of
epochs 1 and 2 stay in one process: their checkpoints are compared by their bytes, which
the store checks against the row's digest as it reads them, and a segment reads none (a
payload changed under an intact digest is PLAIT-E010 there, and must not pass here).

Processes: ``os.fork``, only on Linux and only from a process with no other
thread than SQLite WAL checkpointers (``can_fork``: a forked child inherits any lock
another thread holds; the fork waits until each checkpointer is between two SQLite calls,
``wal.idle``). Each process reads its own rows when the store can hand a child a
connection of its own (``RangeReads``: SQLite, on a file; ``verify_apart``): before the
fork the parent reads only the seqs of the checkpoints and feeds, the other records'
kinds and the feeds' stored texts, in one row (``journal_marks``: what the plan and the
plain check need); after it, it reads its own segment's rows, and each child opens a new
read-only store on the file (never a connection, cursor or lock inherited from the
parent: SQLite forbids carrying a connection across a fork, not opening one after it),
reads its starting
checkpoint and the rows from it to its segment's end (what the resuming step emits again
and the results its feeds name are journaled after that checkpoint; a result it does not
hold fails it), replays, checks its rows decode and its feeds are plain. A store without
``RangeReads`` (PostgreSQL: a child would open a server connection of its own, and a pool
thread alive already keeps verify in one process) or a database in memory: the parent
reads everything first (``verify_on_cores``: the journal's rows, each segment's starting
checkpoint) and a child touches no store. Either way a child leaves by ``os._exit`` (no
``atexit``, no buffered output flushed twice, no connection closed under the parent),
writes its verdict to a pipe, and collects no garbage (``gc.disable``): no finalizer of an
object the parent had let go of runs in it, and the collector copies none of the parent's
pages (what a segment leaves in cycles lives until the child exits). Children never
outlive the call: every one is reaped, killed first on any error.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import os
import signal
import sys
import threading
import warnings
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from operator import itemgetter
from typing import TypeGuard

from plait.core.canonical import digest, dumps
from plait.core.env import StepEnv
from plait.core.events import WriteCheckpoint, WriteIntent
from plait.core.keys import JournalKey
from plait.core.merkle import MERKLE_EPOCH, ChunkMemo
from plait.core.state import SchedulerState
from plait.core.step import step
from plait.driver.checkpoints import decode_checkpoint
from plait.driver.feeds import FEED
from plait.driver.migrating import MIGRATE
from plait.driver.replay import (
    CheckpointSource,
    Span,
    VerifyReport,
    intent_divergence,
    replay,
)
from plait.store import wal
from plait.store.base import JournalMarks, RangeReads, Store
from plait.store.rows import KIND, SEQ, JournalRows
from plait.store.wal import THREAD_NAME as WAL_THREAD

MIN_SEGMENT_FEEDS = 200
"""Fewest feeds (supersteps) a segment replays: below it, forking a child and starting a
segment from its checkpoint cost more than the segment saves (docs/benchmarks.md,
"Seventh round")."""

FIRST_SHARE = 1.15
"""The first segment's share of a run's feeds, against 1 for each other segment. The
parent replays it after reading what the plan needs (~2 ms of CPU at 1,000 steps), but a
child spends more before its first step and more on its way (a store opened afresh, its
rows read, copy-on-write faults on the parent's pages that no instruction count shows):
the parent's longer share ends both together. 1.1 was chosen in wall time when the plan's
read cost the parent ~1 ms of CPU more (docs/benchmarks.md, "Eighth round"); 1.15 keeps
the parent's CPU as far ahead of a child's as 1.1 did then (``verifyfixed``)."""


def _names_a_change(text: str) -> bool:
    """Whether a feed's text names a resume or a budget raise (``_plain_feed``)."""
    return '"resume_from"' in text or '"budget_raised"' in text


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Whether this process may fork children: Linux (macOS has fork, but its system
    libraries are not safe to use in a forked child without exec, which is why Python
    itself stopped forking there by default), and no other thread but SQLite stores' WAL
    checkpointers (the fork waits until each is between two calls into SQLite,
    ``wal.idle``, so a child opening the database inherits no SQLite mutex one held). Any
    other thread (a worker's drivers, a server's, the caller's own) may hold a lock the
    child's code takes, Python's or a library's: then verify stays in one process."""
    this = threading.current_thread()
    return sys.platform == "linux" and all(
        thread is this or thread.name.startswith(WAL_THREAD) for thread in threading.enumerate()
    )


@dataclass(frozen=True)
class Outline:
    """The seqs of a run's feeds and of its checkpoints, in order, and whether the run
    looks plain from its rows' kinds and texts: all a plan needs (``plan_segments``)."""

    feeds: list[int]
    checkpoints: list[int]
    plain: bool

    @staticmethod
    def of_marks(marks: JournalMarks) -> Outline:
        """The outline of ``RangeReads.journal_marks``: a fork or a migration record, or a
        feed whose stored payload names a resume or a budget raise, and the run is not
        plain. The names are searched for in every feed's payload as stored, at once: a
        feed cut into nodes whose head names one is seen here too, one whose nodes name it
        only by its segment, which checks its own feeds all the same."""
        plain = "fork" not in marks.kinds and MIGRATE not in marks.kinds
        return Outline(
            marks.feeds, marks.checkpoints, plain and not _names_a_change(marks.feed_texts)
        )

    @staticmethod
    def of_rows(journal: JournalRows) -> Outline:
        """The outline of a journal read whole (``plain`` checks every feed's value)."""
        rows = journal.rows
        feeds = [rows[i][SEQ] for i in _feeds(journal, range(len(rows)))]
        checkpoints = [rows[i][SEQ] for i in journal.checkpoints]
        return Outline(feeds, checkpoints, plain(journal))


@dataclass(frozen=True)
class Segment:
    """The rows of a run's journal from seq ``first`` to before seq ``stop`` (None: to its
    end), replayed on their own; ``compared``: the checkpoints journaled before ``first``;
    ``start``: the stored checkpoint it starts from (its seq; None for the first segment,
    which starts at the run's start, ``first`` 0)."""

    first: int
    stop: int | None
    compared: int
    start: int | None


@dataclass(frozen=True)
class Verdict:
    """What a segment that passed says: the fingerprints of the state it started from and
    ended in, how many checkpoints the replay has compared at its end, and ``up_to``."""

    began: str
    ended: str
    checkpoints: int
    up_to: str

    def to_text(self) -> str:
        return f"{self.began}\n{self.ended}\n{self.checkpoints}\n{self.up_to}"

    @staticmethod
    def of_text(text: str) -> Verdict | None:
        """The verdict a child wrote; None for anything else (a child that failed wrote
        nothing, or died)."""
        lines = text.split("\n")
        if len(lines) != 4 or not lines[2].isdigit():
            return None
        return Verdict(lines[0], lines[1], int(lines[2]), lines[3])


Job = Callable[[], "Verdict | None"]
"""A segment's work in the process that runs it: its verdict, None when it does not pass."""


def reads_apart(store: Store) -> TypeGuard[RangeReads]:
    """Whether each process verifying on every core reads its own rows from ``store``
    (``verify_apart``); else the parent reads them all (``verify_on_cores``)."""
    return isinstance(store, RangeReads) and store.reopens()


def verify_apart(store: RangeReads, run_id: str, env: StepEnv, workers: int) -> VerifyReport | None:
    """The report of replaying plain run ``run_id`` in up to ``workers`` segments at once,
    each process reading its own rows: the parent only the rows' seqs and kinds before
    it forks (``journal_marks``), then its segment's rows; each child, on a connection it
    opens itself, its starting checkpoint and the rows from it to its segment's end.
    None when it is not split or any segment does not pass: the caller then replays it
    whole, reading the journal again."""
    if workers < 2 or env.engine_epoch < MERKLE_EPOCH or not can_fork():
        return None
    try:
        outline = Outline.of_marks(store.journal_marks(run_id))
        segments = plan_segments(outline, workers) if outline.plain else []
        if len(segments) < 2:
            return None
        last = segments[-1]
        mine = partial(read_segment, store, run_id, env, segments[0], last=False, reopen=False)
        theirs: list[Job] = [
            partial(read_segment, store, run_id, env, s, last=s is last, reopen=True)
            for s in segments[1:]
        ]
        verdicts = _verdicts(mine, theirs)
    except Exception:  # what is wrong, the whole replay says
        return None
    return _joined_report(run_id, verdicts)


def read_segment(
    store: RangeReads, run_id: str, env: StepEnv, segment: Segment, *, last: bool, reopen: bool
) -> Verdict | None:
    """Read ``segment``'s rows (from its starting checkpoint on: what the step resuming
    from it emits again and the results its feeds name are journaled after it) and its
    starting checkpoint, and replay it (``segment_verdict``); with ``reopen`` (a forked
    child), on a new connection of its own."""
    try:
        if reopen:
            store = store.reopen()
        first = 0 if segment.start is None else segment.start
        stop = None if segment.stop is None else segment.stop - 1
        journal = store.journal_range(run_id, first, stop)
        start = None if segment.start is None else store.read_checkpoint(run_id, segment.start)
    except Exception:
        return None
    return segment_verdict(_NO_STORE, journal, env, segment, start, last=last)


def verify_on_cores(
    store: Store, journal: JournalRows, env: StepEnv, workers: int
) -> VerifyReport | None:
    """The report of replaying a plain run whose journal the parent read whole in up to
    ``workers`` segments at once (a store without ``RangeReads``); None when it is not
    split (not plain, too short, one worker, no fork) or any segment does not pass: the
    caller then replays it whole."""
    if workers < 2 or env.engine_epoch < MERKLE_EPOCH or not can_fork() or not plain(journal):
        return None
    return verify_segments(store, journal, env, plan_segments(journal, workers))


def verify_segments(
    store: Store, journal: JournalRows, env: StepEnv, segments: list[Segment]
) -> VerifyReport | None:
    """The report of replaying a plain run read whole in ``segments`` at once (the first
    here, one child each for the others, on this process's rows); None when there are
    fewer than two, or any does not pass, or they do not join."""
    if len(segments) < 2:
        return None
    run_id = journal.run_id
    try:
        starts = [store.read_checkpoint(run_id, s.start) for s in segments if s.start is not None]
    except Exception:  # the whole replay says what is wrong, if it reads them at all
        return None
    last = segments[-1]
    mine = partial(segment_verdict, store, journal, env, segments[0], None, last=False)
    theirs: list[Job] = [
        partial(segment_verdict, _NO_STORE, journal, env, s, start, last=s is last)
        for s, start in zip(segments[1:], starts, strict=True)
    ]
    try:
        verdicts = _verdicts(mine, theirs)
    except OSError:  # no pipe or no fork to be had: one process it is
        return None
    report = _joined_report(run_id, verdicts)
    if report is not None:
        for segment in segments[1:]:
            journal.checked_elsewhere(_rows_of(journal, segment))
    return report


def _joined_report(run_id: str, verdicts: list[Verdict] | None) -> VerifyReport | None:
    """The whole replay's report when every segment passed and each one started from the
    state the one before it ended in; else None."""
    if verdicts is None or not _joined(verdicts):
        return None
    return VerifyReport(run_id, True, verdicts[-1].checkpoints, verdicts[-1].up_to)


def plain(journal: JournalRows, rows: range | None = None) -> bool:
    """Whether the run's replay (of ``rows`` only, when given) is the same steps all
    through: no fork seed, no migration, no resume from a checkpoint, no budget raised
    (each changes the state or the environment between two steps in a way a segment
    does not follow)."""
    held = journal.rows
    for index in journal.records if rows is None else _records_in(journal, rows):
        kind = held[index][KIND]
        if kind == "fork" or kind == MIGRATE:
            return False
        if kind == FEED and not _plain_feed(journal, index):
            return False
    return True


def _records_in(journal: JournalRows, rows: range) -> list[int]:
    """The records among ``rows``."""
    records = journal.records
    return records[bisect_left(records, rows.start) : bisect_left(records, rows.stop)]


def _plain_feed(journal: JournalRows, index: int) -> bool:
    """Whether feed ``index`` neither resumes nor raises a budget (a feed kept whole is
    told by its text: a name found elsewhere in it only costs a split)."""
    text = journal.whole_text(index)
    if text is not None:
        return not _names_a_change(text)
    try:
        body = journal.value(index)
        if not isinstance(body, dict) or "resume_from" in body:
            return False
        return not any(
            isinstance(item, dict) and "budget_raised" in item for item in body["events"]
        )
    except Exception:  # a row that does not decode: the whole replay reports it
        return False


def plan_segments(
    run: Outline | JournalRows, workers: int, min_feeds: int | None = None
) -> list[Segment]:
    """Up to ``workers`` segments of about as many feeds each (the first ``FIRST_SHARE``
    of one), at least ``min_feeds`` (default ``MIN_SEGMENT_FEEDS``), each but the first
    starting at the first feed from its share on where one may (``start_positions``)."""
    outline = _outline(run)
    feeds = len(outline.feeds)
    count = min(workers, feeds // max(MIN_SEGMENT_FEEDS if min_feeds is None else min_feeds, 1))
    shares = count - 1 + FIRST_SHARE
    starts: list[int] = []
    for part in range(1, count):
        at = _start_from(outline, math.ceil((part - 1 + FIRST_SHARE) * feeds / shares))
        if at is not None and (not starts or at > starts[-1]):
            starts.append(at)
    return segments_from(outline, starts)


def _start_from(outline: Outline, at: int) -> int | None:
    """The first of ``start_positions`` from position ``at`` on (None: there is none),
    found by looking at the feeds from there on only: a plan cuts a run in a few places,
    and nearly every feed of a run has a checkpoint since the feed before it."""
    feeds, checkpoints = outline.feeds, outline.checkpoints
    at = max(at, 1)
    if at >= len(feeds):
        return None
    before = bisect_left(checkpoints, feeds[at - 1])
    for position in range(at, len(feeds)):
        since = bisect_left(checkpoints, feeds[position])
        if since > before:
            return position
        before = since
    return None


def _outline(run: Outline | JournalRows) -> Outline:
    return run if isinstance(run, Outline) else Outline.of_rows(run)


def _feeds(journal: JournalRows, rows: range) -> list[int]:
    """The feeds among ``rows``, in order."""
    held = journal.rows
    return [i for i in _records_in(journal, rows) if held[i][KIND] == FEED]


def start_positions(run: Outline | JournalRows) -> list[int]:
    """The positions among the run's feeds where a segment may start: every feed but the
    first with a checkpoint journaled since the feed before it (the state it starts from)."""
    outline = _outline(run)
    feeds, checkpoints = outline.feeds, outline.checkpoints
    before = [bisect_left(checkpoints, seq) for seq in feeds]
    return [at for at in range(1, len(feeds)) if before[at] > before[at - 1]]


def segments_from(run: Outline | JournalRows, starts: list[int]) -> list[Segment]:
    """The segments that start at the run's feeds of positions ``starts`` (ascending, each
    one of ``start_positions``), and the first, from the run's start."""
    outline = _outline(run)
    checkpoints = outline.checkpoints
    firsts = [0, *(outline.feeds[at] for at in starts)]
    stops: list[int | None] = [*firsts[1:], None]
    segments = []
    for first, stop in zip(firsts, stops, strict=True):
        before = bisect_left(checkpoints, first)
        start = None if first == 0 else checkpoints[before - 1]
        segments.append(Segment(first, stop, before, start))
    return segments


def _verdicts(mine: Job, theirs: list[Job]) -> list[Verdict] | None:
    """Each segment's verdict, the first (``mine``) from this process, the others each
    from a child forked for it; None as soon as one does not pass."""
    with _children(theirs) as children:
        verdict = mine()
        if verdict is None:
            return None
        verdicts = [verdict]
        for _pid, read_end in children:
            verdict = Verdict.of_text(_read_all(read_end))
            if verdict is None:
                return None
            verdicts.append(verdict)
        return verdicts


@contextlib.contextmanager
def _children(jobs: list[Job]) -> Iterator[list[tuple[int, int]]]:
    """One forked child per job, each writing its verdict to the pipe whose read end is
    given with its pid; every child killed (if still running) and reaped on leaving."""
    children: list[tuple[int, int]] = []
    try:
        for job in jobs:
            children.append(_fork(job))
        yield children
    finally:
        for pid, read_end in children:
            os.close(read_end)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # done by now, unless this call failed
            os.waitpid(pid, 0)


def _fork(job: Job) -> tuple[int, int]:
    """Fork a child that runs ``job`` and writes its verdict (nothing if it does not
    pass) to a pipe; its pid and the pipe's read end."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings(), wal.idle():  # Python 3.12+ warns of fork beside any
        # thread; can_fork allowed only WAL checkpointers, held between two SQLite calls
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork")
        pid = os.fork()
    if pid == 0:  # the child: compute, write, leave; never return into the caller
        try:
            gc.disable()  # no finalizer of the parent's objects runs here, no page copied
            os.close(read_end)
            verdict = job()
            if verdict is not None:
                _write_all(write_end, verdict.to_text().encode("utf-8"))
        finally:
            os._exit(0)
    os.close(write_end)
    return pid, read_end


def _rows_of(journal: JournalRows, segment: Segment) -> range:
    """The indexes in ``journal.rows`` of ``segment``'s rows."""
    rows = journal.rows
    stop = len(rows) if segment.stop is None else bisect_left(rows, segment.stop, key=_seq)
    return range(bisect_left(rows, segment.first, key=_seq), stop)


_seq = itemgetter(SEQ)


def segment_verdict(
    store: CheckpointSource,
    journal: JournalRows,
    env: StepEnv,
    segment: Segment,
    start: bytes | None,
    *,
    last: bool,
) -> Verdict | None:
    """Replay ``segment`` (from the checkpoint ``start``, driven on by one step with no
    event) on ``journal``, the run's rows or those from ``start`` on; its verdict, None
    when its rows are not plain or it does not pass or raises. Its rows are checked as a
    whole replay checks them (``JournalRows.check``)."""
    try:
        rows = _rows_of(journal, segment)
        if not plain(journal, rows):
            return None
        replayed: set[JournalKey] = set()
        state = None if start is None else _resumed(journal, env, start, replayed)
        if start is not None and state is None:
            return None
        began = "" if state is None else fingerprint(state)
        compared = _checkpoints_before(journal, rows.start)
        limit = None if last else _checkpoints_before(journal, rows.stop)
        span = Span(rows.start, rows.stop, compared, limit, state, replayed)
        report, ended = replay(store, journal, env, None, None, span)
        if not report.verified or ended is None:
            return None
        journal.check(rows)
        held_before = segment.compared - compared  # checkpoints before the rows held
        return Verdict(began, fingerprint(ended), held_before + report.checkpoints, report.up_to)
    except Exception:
        return None


def _resumed(
    journal: JournalRows, env: StepEnv, start: bytes, replayed: set[JournalKey]
) -> SchedulerState | None:
    """The state of checkpoint ``start`` driven on as a resume drives it first (one step,
    no event): the superstep it closed opens the next; None when that step checkpoints or
    emits an intent that differs from the journal's."""
    state = decode_checkpoint(start, journal.run_id).scheduler
    out = step(replace(env, checkpoint_memo=ChunkMemo()), state, [])
    for command in out.commands:
        if isinstance(command, WriteCheckpoint):
            return None
        if isinstance(command, WriteIntent) and intent_divergence(command, journal, replayed):
            return None
    return state


def _checkpoints_before(journal: JournalRows, row: int) -> int:
    """How many checkpoints are journaled before row ``row``."""
    return bisect_left(journal.checkpoints, row)


def fingerprint(state: SchedulerState) -> str:
    """The SHA-256 of the state's canonical JSON: two states with the same fingerprint
    drive every later step the same way."""
    return digest(dumps(state.to_json()))


def _joined(verdicts: list[Verdict]) -> bool:
    """Whether each segment started from the state the one before it ended in."""
    return all(a.ended == b.began for a, b in itertools.pairwise(verdicts))


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


class _NoStore:
    """The store a child sees: any read raises, so a segment that would need one (to say
    what differs) fails, and the whole replay in the parent reads it."""

    def read_checkpoint(self, run_id: str, seq: int) -> bytes:
        raise RuntimeError("a verify segment reads no store")

    def read_checkpoints(self, run_id: str, first: int, last: int) -> dict[int, bytes]:
        raise RuntimeError("a verify segment reads no store")


_NO_STORE = _NoStore()
