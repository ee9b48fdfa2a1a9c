"""Re-driving a run's journal through the core and comparing what it produces: the
replay ``plait verify`` runs (``verify.py`` picks the environment; ``verify_cores.py``
runs stretches of one replay at once).

No tool, no model, no write: every batch of events the live driver fed the core
is journaled (see ``feeds``); the replay rebuilds each batch, answering results from
the journal by key, calls ``step`` and compares each checkpoint it produces with
the stored one, byte for byte (docs/architecture.md §5.5). It also compares the input of
every intent the replay emits with the journaled one (the tools a turn offered and the
refusals it carried live only there), canonically: the first emission of a key is the
one the journal holds (a re-emission after a resume was adopted, not journaled).

A fork's first checkpoint (its seed) is produced by no ``step``: the replay rebuilds it
from the base run's checkpoint through the core's fork transition, with the edits its
``fork`` record journaled, and compares the bytes (``_check_seed``). A base run that is
gone (gc) leaves the seed unchecked, said in the report's ``note``; the fork's own replay
is checked as ever.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from plait.core.canonical import dumps
from plait.core.env import Budgets, StepEnv
from plait.core.errors import PlaitError
from plait.core.events import Event, WriteCheckpoint, WriteIntent
from plait.core.keys import JournalKey, call_id
from plait.core.merkle import ChunkMemo
from plait.core.migrate import empty_record, migrate_state
from plait.core.outcomes import EffectOutcome, outcome_from_json
from plait.core.state import SchedulerState
from plait.core.step import step
from plait.driver.checkpoints import (
    decode_checkpoint,
    differing_fields,
    encode_checkpoint,
    first_node_differing,
)
from plait.driver.feeds import (
    COMPLETED_SHAPE,
    FEED,
    WAVE_SHAPE,
    completed_of_part,
    decode_events,
    wave_of_part,
)
from plait.driver.forking import seed_checkpoint
from plait.driver.migrating import MIGRATE, migration_of
from plait.driver.reshape import Reshape
from plait.store.records import CheckpointMeta
from plait.store.rows import EXECUTOR, KIND, SEQ, SHA256, SIZE, SUPERSTEP, JournalRows


@dataclass
class VerifyReport:
    run_id: str
    verified: bool
    checkpoints: int
    up_to: str
    error: str | None = None
    diverged_at: dict[str, Any] | None = None
    """Where the replay first left the journal: ``{"superstep", "node", "what"}``."""
    note: str | None = None
    """What verify could not check (a fork whose base run is gone: its seed)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "verified": self.verified,
            "checkpoints": self.checkpoints,
            "up_to": self.up_to,
        }
        if self.error is not None:
            out["error"] = self.error
        if self.diverged_at is not None:
            out["diverged_at"] = self.diverged_at
        if self.note is not None:
            out["note"] = self.note
        return out


def _first_difference(want: Any, got: Any, path: str) -> str | None:
    """The dotted path of the first place two JSON values differ (keys in sorted order),
    None when they are canonically equal (``1`` and ``1.0`` differ, as in canonical JSON)."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            where = f"{path}.{key}"
            if key not in want or key not in got:
                return where
            found = _first_difference(want[key], got[key], where)
            if found is not None:
                return found
        return None
    if isinstance(want, list) and isinstance(got, list):
        for index, (a, b) in enumerate(zip(want, got, strict=False)):
            found = _first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
        return None if len(want) == len(got) else f"{path}[{min(len(want), len(got))}]"
    return None if type(want) is type(got) and want == got else path


def intent_divergence(
    command: WriteIntent, journal: JournalRows, seen: set[JournalKey]
) -> str | None:
    """PLAIT-E009 when the first emission of an intent differs from the journaled one.

    A journaled input kept whole whose text is the replayed dict's or list's canonical
    text is that input: the row is read from its text, never parsed (canonical text of a
    dict or a list always parses back to it, so skipping its parse cannot hide a corrupt
    row). Any other row is parsed and compared as a value, as ever."""
    key = command.key
    index = journal.intents.get(key)
    if index is None or key in seen:
        return None  # not journaled (the last wave of a crash), or a re-emission
    seen.add(key)
    executor = journal.rows[index][EXECUTOR]
    if executor == command.executor:
        replayed = dumps(command.input)
        same_text = journal.keeps_text(index, replayed)
        if same_text and type(command.input) in (dict, list):
            journal.read_as_text(index)
            return None
        # The row's text of a whole input is canonical: equal texts are equal inputs.
        if same_text or dumps(journal.value(index)) == replayed:
            return None
    if executor != command.executor:
        field = f"executor ({executor!r} journaled, {command.executor!r} replayed)"
    else:
        field = _first_difference(journal.value(index), command.input, "input") or "input"
    return (
        f"PLAIT-E009 superstep {command.superstep}: the {key.kind} intent of node '{key.node}'"
        f"{f' task {key.task_path}' if key.task_path else ''} (attempt {key.attempt},"
        f" effect {key.effect_seq}) differs from the replay in {field}"
    )


_READ_AHEAD = 256
"""Stored checkpoints read per query while comparing: few queries, bounded memory."""

EnvAt = Callable[[int, dict[str, Any]], StepEnv]
"""The environment of a run's ``k``-th manifest (a migration's) with the ceilings raised
so far: what verify switches to where the journal migrated the run."""


@dataclass(frozen=True)
class Span:
    """A stretch of a run's journal replayed on its own (verify on every core,
    ``verify_cores``): its records from row ``first_row`` to before ``stop_row``, from
    ``state`` (None: the run's start), the ``compared`` checkpoints before it taken as
    compared; at its end it must have compared ``limit`` of them (None: every one). Row
    and checkpoint numbers are of the rows held, which may be a seq range of the run's
    (``Store``'s ``journal_range``): so a feed whose result is not held fails a stretch,
    where the whole replay stops there verified."""

    first_row: int
    stop_row: int
    compared: int
    limit: int | None
    state: SchedulerState | None
    replayed: set[JournalKey]
    """Intents whose first emission this stretch compared already."""


class CheckpointSource(Protocol):
    """What a replay reads from a store besides the journal: stored checkpoints."""

    def read_checkpoint(self, run_id: str, seq: int) -> bytes: ...

    def read_checkpoints(self, run_id: str, first: int, last: int) -> dict[int, bytes]: ...


def replay(
    store: CheckpointSource,
    journal: JournalRows,
    env: StepEnv,
    env_at: EnvAt | None,
    reshape: Reshape | None,
    span: Span | None = None,
) -> tuple[VerifyReport, SchedulerState | None]:
    """The report of re-driving the run (of ``span`` only, when given) and the state the
    replay ended in."""
    run_id, rows = journal.run_id, journal.rows
    stored: list[tuple[int, int]] = [
        (rows[i][SEQ], rows[i][SUPERSTEP]) for i in journal.checkpoints
    ]
    records = [(rows[i][SEQ], rows[i][KIND], i) for i in journal.records]
    forks = {seq for seq, kind, _ in records if kind == "fork"}
    seeds = {seq for seq, _ in stored if seq + 1 in forks}
    note: str | None = None
    for seq, kind, index in records:
        if kind == "fork":
            seed = _checkpoint_meta(journal, seq - 1)
            failed, note = _check_seed(store, run_id, journal.value(index), seed)
            if failed is not None:
                return failed, None
    by_seq: dict[int, bytes] = {}
    expected = [seq for seq, _ in stored if seq not in seeds]
    metas = {rows[i][SEQ]: (rows[i][SHA256], rows[i][SIZE]) for i in journal.checkpoints}
    seen: dict[str, bytes] = {}  # every node the replay's epoch-3 checkpoints handed out
    env = replace(env, checkpoint_memo=ChunkMemo())
    results = journal.results
    asks: dict[str, JournalKey] = {}  # by call id, hashed on the first answer looked up
    replayed: set[JournalKey] = set() if span is None else span.replayed

    def result_of(key: JournalKey) -> EffectOutcome | None:
        index = results.get(key)
        if index is None:
            return None
        part = journal.whole_text_part(index, COMPLETED_SHAPE)
        outcome = None if part is None else completed_of_part(part)
        if outcome is None:
            return outcome_from_json(journal.value(index))
        journal.read_as_text(index)  # it parsed: see completed_of_text
        return outcome

    def answer_of(ask_id: str) -> EffectOutcome | None:
        if not asks:
            asks.update((call_id(key), key) for key in journal.intents)
        key = asks.get(ask_id)
        if key is None:  # an ask a fork inherited: its intent is in the base run's journal
            key = next((k for k in results if call_id(k) == ask_id), None)
        return None if key is None else result_of(key)

    position = {seq: index for index, seq in enumerate(expected)}
    window: dict[int, bytes] = {}

    def stored_bytes(seq: int) -> bytes:
        nonlocal window
        if seq not in by_seq:
            if seq not in window:  # read ahead: one query for the next _READ_AHEAD compared
                index = position.get(seq)
                last = (
                    seq if index is None else expected[min(index + _READ_AHEAD, len(expected)) - 1]
                )
                window = store.read_checkpoints(run_id, seq, last)
                if seq not in window:
                    window[seq] = store.read_checkpoint(run_id, seq)  # says what is wrong
            data = window.pop(seq)
            by_seq[seq] = data if reshape is None else reshape.stored(data)
        return by_seq[seq]

    state: SchedulerState | None = None if span is None else span.state
    compared = 0 if span is None else span.compared
    limit = len(expected) if span is None or span.limit is None else span.limit
    if span is not None:
        records = [r for r in records if span.first_row <= r[2] < span.stop_row]
    plan = env.plan
    raised: dict[str, Any] = {}
    for record_seq, kind, index in records:
        if kind == MIGRATE and env_at is not None:
            mapping, restart, moved = migration_of(journal.value(index))
            moved_env = env_at(moved, raised)
            if state is None:
                failed = _diverged(run_id, compared, 0, None, "a migration before any checkpoint")
                return failed, None
            state = migrate_state(state, plan, moved_env.plan, mapping, restart_at_entry=restart)
            data = encode_checkpoint(state, empty_record(state).to_json())
            if compared >= limit or stored_bytes(expected[compared]) != data:
                what = f"the migration at journal seq {record_seq} differs from the replay"
                return _diverged(run_id, compared, state.superstep, None, what), state
            compared += 1
            env, plan = moved_env, moved_env.plan
            reshape = None  # from here on the checkpoints are the migrated version's
            continue
        if kind != FEED:
            continue
        part = journal.whole_text_part(index, WAVE_SHAPE)
        wave = None if part is None else wave_of_part(part, journal.result_keys, result_of)
        if wave is not None:  # a wave's feed, read from its text (it parses: wave_of_text)
            journal.read_as_text(index)
            events: list[Event] | JournalKey | str = wave
        else:
            body = journal.value(index)
            if "resume_from" in body:
                seq = body["resume_from"]
                if seq is None:
                    state = None
                else:
                    state = decode_checkpoint(stored_bytes(seq), run_id, seq).scheduler
            for item in body["events"]:
                if "budget_raised" in item:  # the raise applies from here on, as it did live
                    raised.update(item["budget_raised"])
                    merged = {**env.budgets.to_json(), **item["budget_raised"]}
                    env = replace(env, budgets=Budgets.from_json(merged))
            events = decode_events(body["events"], result_of, answer_of)
        if state is None:
            state = SchedulerState.new(run_id, plan)
        if not isinstance(events, list):
            if span is not None:  # a stretch's rows may not hold every result: it fails
                return _diverged(run_id, compared, state.superstep, None, "feeds stop"), state
            break  # a result the journal does not hold: verifiable up to here
        superstep = state.superstep
        try:
            out = step(env, state, events)
        except Exception as exc:  # a plan the journal does not fit (verify --workflow)
            what = f"the replay cannot go on: {type(exc).__name__}: {exc}"
            return _diverged(run_id, compared, superstep, None, what), state
        for command in out.commands:
            if isinstance(command, WriteIntent):
                diverged = intent_divergence(command, journal, replayed)
                if diverged is not None:  # "PLAIT-E009 superstep N: <what>"
                    what = diverged.split(": ", 1)[-1]
                    node = command.key.node
                    return _diverged(run_id, compared, command.superstep, node, what), state
                continue
            if not isinstance(command, WriteCheckpoint):
                continue
            if compared >= limit:
                failed = VerifyReport(
                    run_id,
                    False,
                    compared,
                    f"superstep {command.superstep}",
                    f"PLAIT-E009 superstep {command.superstep}: replay produced a checkpoint"
                    " the journal does not have",
                )
                return failed, state
            seq = expected[compared]
            cut = command.cut
            if cut is not None:  # epoch 3: the digests and sizes first, bytes only to explain
                seen.update(cut.nodes)
                if reshape is None and metas[seq] == (cut.digest, cut.size):
                    compared += 1
                    continue
                got = cut.canonical(seen)
            else:
                got = command.canonical()
            want = stored_bytes(seq)
            if want != got and reshape is not None:  # what only the new shape adds aside
                want, got = reshape.masked(want), reshape.masked(got)
            if want != got:
                fields = ", ".join(differing_fields(want, got))
                report = _diverged(
                    run_id,
                    compared,
                    command.superstep,
                    first_node_differing(
                        want, got, [n.id for n in plan.nodes], [e.src for e in plan.edges]
                    ),
                    f"checkpoint {seq} differs from the replay in {fields}",
                )
                return report, state
            compared += 1
    if compared < limit:
        missing = expected[compared]
        superstep = dict(stored)[missing]
        failed = VerifyReport(
            run_id,
            False,
            compared,
            f"superstep {superstep}",
            f"PLAIT-E009 superstep {superstep}: the journal holds checkpoint {missing} that the"
            " replay never produced",
        )
        return failed, state
    if state is None:
        up_to = "superstep 0"  # nothing was ever fed (a queued run)
    elif state.is_terminal():
        up_to = "terminal"
    elif state.is_parked():
        up_to = "park"
    else:
        up_to = f"superstep {state.superstep}"
    return VerifyReport(run_id, True, compared, up_to, note=note), state


def _checkpoint_meta(journal: JournalRows, seq: int) -> CheckpointMeta | None:
    """The checkpoint journaled at ``seq``, if one is."""
    for index in journal.checkpoints:
        row = journal.rows[index]
        if row[SEQ] == seq:
            return CheckpointMeta(seq, row[SUPERSTEP], row[SHA256], row[SIZE])
    return None


def _check_seed(
    store: CheckpointSource, run_id: str, fork: dict[str, Any], seed: CheckpointMeta | None
) -> tuple[VerifyReport | None, str | None]:
    """A failed report when fork ``run_id``'s seed checkpoint is not the fork transition
    of the base checkpoint its ``fork`` record names, with the edits it journaled; else
    None and a note when the base run is gone, so the seed could not be checked."""
    from_run, from_seq, edits = fork.get("from_run"), fork.get("from_seq"), fork.get("set")
    superstep = 0 if seed is None else seed.superstep
    if from_seq is None and seed is None and edits is None:
        return None, None  # a fork from the base's input: its replay starts from Start
    if (
        not isinstance(from_seq, int)
        or not isinstance(from_run, str)
        or seed is None
        or not isinstance(edits, dict | None)
    ):
        what = f"the fork record (from {from_run!r} at {from_seq!r}) does not match its seed"
        return _diverged(run_id, 0, superstep, None, what), None
    try:
        base = decode_checkpoint(store.read_checkpoint(from_run, from_seq), from_run, from_seq)
        _, data = seed_checkpoint(base, run_id, edits)
    except PlaitError as exc:
        if exc.code == "E017":
            return None, (
                f"the fork's seed (superstep {superstep}) was not checked: its base run"
                f" '{from_run}' is no longer in the store"
            )
        what = f"the seed cannot be rebuilt from run '{from_run}': {exc}"
        return _diverged(run_id, 0, superstep, None, what), None
    want = store.read_checkpoint(run_id, seed.seq)
    if want == data:
        return None, None
    fields = ", ".join(differing_fields(want, data))
    what = (
        f"the seed checkpoint {seed.seq} is not checkpoint {from_seq} of run '{from_run}'"
        f" forked with the journaled edits; it differs in {fields}"
    )
    return _diverged(run_id, 0, superstep, None, what), None


def _diverged(
    run_id: str, compared: int, superstep: int, node: str | None, what: str
) -> VerifyReport:
    """A failed report that says where the replay first left the journal."""
    return VerifyReport(
        run_id,
        False,
        compared,
        f"superstep {superstep}",
        f"PLAIT-E009 superstep {superstep}: {what}",
        {"superstep": superstep, "node": node, "what": what},
    )
