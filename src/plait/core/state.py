"""The scheduler state (seed ``SchedulerState``) and its canonical JSON form.

A checkpoint is this state, serialized canonically; verify compares those bytes,
so serialization is exact: integer-keyed maps use decimal string keys, tuples
are arrays, tagged variants are ``{"Variant": payload}``, and fields of optional
features are omitted while at their default so a run that does not use a
feature keeps the bytes it had before the feature existed (§3.1, §3.2).

From engine epoch 4 (``COMPACT_EPOCH``) a checkpoint holds the compact form
(``to_compact_json``): every field at a plain default (None, 0, an empty container) is
left out, so the step encodes, and hashes, only what a run has. ``to_json`` stays the
form of earlier epochs and of every reader's output; ``from_json`` reads both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plait.core.abstract import FLOW_CODEC, AbstractFlow
from plait.core.canonical import JSON
from plait.core.codec import (
    COPY_DICT,
    COPY_LIST,
    INT,
    PLAIN,
    SORTED_SET,
    RecordCodec,
    ValueCodec,
    Variant,
    dict_of,
    enum,
    int_keys,
    json_field,
    list_of,
    nested,
    optional,
    tagged,
    tuple_of,
)
from plait.core.keys import JournalKey, call_id
from plait.core.names import BudgetAxis
from plait.core.node_states import EdgeRes, NodeState, edge_res_of, node_state_of
from plait.core.outcomes import RunOutcome
from plait.core.pending import ASK_CODEC, TASK_CODEC, PendingAsk, SendTask

if TYPE_CHECKING:  # reading a checkpoint needs no plan (nor its conditions and reducers)
    from plait.core.plan import Plan

COMPACT_EPOCH = 4
"""The first engine epoch whose checkpoints leave out fields at a plain default."""


@dataclass(slots=True)
class Spent:
    """What the run has consumed so far; every figure is a pure function of the journal."""

    supersteps: int = json_field(INT, default=0)
    input_tokens: int = json_field(INT, default=0)
    output_tokens: int = json_field(INT, default=0)
    usd_micros: int = json_field(INT, default=0)
    wall_ms: int = json_field(INT, default=0)
    storage_bytes: int = json_field(INT, default=0)

    def to_json(self) -> dict[str, int]:
        return _SPENT.encode(self)

    def to_compact_json(self) -> dict[str, int]:
        """Only the figures that are not 0."""
        return _SPENT.encode_compact(self)

    @staticmethod
    def from_json(value: dict[str, Any]) -> Spent:
        return _SPENT.decode(value)


_SPENT: RecordCodec[Spent] = RecordCodec(Spent)


_PAIRS = list_of(COPY_LIST)
"""A list of small arrays (``[edge, generation, outcome]``, ...), each read fresh."""
_OBJECTS = list_of(COPY_DICT)


@dataclass(slots=True)
class DecisionRecord:
    """What one superstep decided: edges and their outcomes, dispatches, spawns, clocks."""

    superstep: int
    clock_open_ms: int
    clock_close_ms: int = 0
    edges: list[list[Any]] = json_field(_PAIRS, default_factory=list)
    dispatched: list[list[int]] = json_field(_PAIRS, default_factory=list)
    spawns: list[list[Any]] = json_field(_PAIRS, omit_default=True, default_factory=list)
    task_dispatched: list[list[Any]] = json_field(_PAIRS, omit_default=True, default_factory=list)
    violations: list[dict[str, Any]] = json_field(_OBJECTS, omit_default=True, default_factory=list)
    """Observe mode: final answers a ``require`` would have refused (§9), and the calls of
    a failing loop's last answer enforce mode would have refused. Kept here because the
    node's end takes its loop state with it."""
    refused: list[dict[str, Any]] = json_field(_OBJECTS, omit_default=True, default_factory=list)
    """Governance refusals of a failing loop's last answer, which no later turn carries."""

    def to_json(self) -> dict[str, Any]:
        return _RECORD.encode(self)

    def to_compact_json(self) -> dict[str, Any]:
        """Without the fields at their default (a checkpoint's form from epoch 4)."""
        return _RECORD.encode_compact(self)

    @staticmethod
    def from_json(value: dict[str, Any]) -> DecisionRecord:
        return _RECORD.decode(value)


_RECORD: RecordCodec[DecisionRecord] = RecordCodec(DecisionRecord)


_OUTSTANDING = ValueCodec(
    lambda keys: [k.to_json() for k in sorted(keys, key=JournalKey.sort_key)],
    lambda keys: {JournalKey.from_json(k) for k in keys},
)


@dataclass(slots=True)
class OpenPhase:
    """A superstep in progress: effects outstanding, results buffered until close."""

    outstanding: set[JournalKey] = json_field(_OUTSTANDING)
    results: dict[int, JSON] = json_field(int_keys())
    record: DecisionRecord = json_field(nested(_RECORD))
    send_results: dict[str, JSON] = json_field(COPY_DICT, omit_default=True, default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"Open": _OPEN.encode(self)}


_OPEN: RecordCodec[OpenPhase] = RecordCodec(OpenPhase)


@dataclass(frozen=True, slots=True)
class Idle:
    """Between supersteps: nothing outstanding, the next one not yet open."""


@dataclass(frozen=True, slots=True)
class Finished:
    """The run ended with ``outcome`` (a RunOutcome: ``"Completed"`` or ``{"Variant": ...}``)."""

    outcome: RunOutcome


Phase = Idle | OpenPhase | Finished
IDLE = Idle()

_PHASE = tagged(
    Variant(Idle, "Idle"),
    Variant(OpenPhase, "Open", nested(_OPEN)),
    Variant(Finished, "Finished", ValueCodec(lambda f: f.outcome, Finished)),
)
_NODE_STATES = ValueCodec(None, lambda v: [node_state_of(x) for x in v])


_EDGE_TEXTS = tuple(str(e) for e in range(1024))
"""The decimal text of the first edge indexes: looked up, not made by a ``str`` call."""
_EDGE_TEXT_COUNT = len(_EDGE_TEXTS)


def _in_res_json(in_res: list[dict[int, EdgeRes]]) -> list[dict[str, EdgeRes]]:
    """Each node's edge resolutions with decimal string keys. Plain loops: encoded at
    every checkpoint, and a comprehension in a comprehension costs a frame per node."""
    texts, count = _EDGE_TEXTS, _EDGE_TEXT_COUNT
    out = []
    for res in in_res:
        by_text = {}
        for e, r in res.items():
            by_text[texts[e] if 0 <= e < count else str(e)] = r
        out.append(by_text)
    return out


_IN_RES = ValueCodec(
    _in_res_json,
    lambda v: [{int(e): edge_res_of(r) for e, r in res.items()} for res in v],
)


@dataclass(slots=True)
class SchedulerState:
    """The complete scheduler state: exactly the fields of the seed, with their meanings.

    ``node_state`` changes only through ``node_states.move`` (the one transition table).
    """

    run_id: str
    superstep: int
    phase: Phase = json_field(_PHASE)
    node_gen: list[int] = json_field(COPY_LIST)
    node_state: list[NodeState] = json_field(_NODE_STATES)
    in_res: list[dict[int, EdgeRes]] = json_field(_IN_RES)
    edge_fired: list[int] = json_field(COPY_LIST)
    attempt: list[int] = json_field(COPY_LIST)
    attempt_base: list[int] = json_field(COPY_LIST)
    context: dict[str, Any] = json_field()
    spent: Spent = json_field(nested(_SPENT), default_factory=Spent)
    elapsed_ms: int = 0
    clock_ms: int = 0
    wall_open: int | None = None
    paused_at: int | None = None
    pending_asks: dict[str, PendingAsk] = json_field(
        dict_of(nested(ASK_CODEC)), default_factory=dict
    )
    abstract_flows: dict[str, AbstractFlow] = json_field(
        dict_of(nested(FLOW_CODEC)), default_factory=dict
    )
    send_tasks: dict[str, SendTask] = json_field(
        dict_of(nested(TASK_CODEC)), omit_default=True, default_factory=dict
    )
    spawn_counter: dict[str, int] = json_field(COPY_DICT, omit_default=True, default_factory=dict)
    announced_asks: set[str] = json_field(SORTED_SET, default_factory=set)
    inbox: list[JSON] = json_field(COPY_LIST, omit_default=True, default_factory=list)
    inputs_seen: int = json_field(omit_default=True, default=0)
    cancel: tuple[str, str] | None = json_field(optional(tuple_of(PLAIN, PLAIN)), default=None)
    exhausted: BudgetAxis | None = json_field(optional(enum(BudgetAxis)), default=None)
    failed: tuple[int, str] | None = json_field(optional(tuple_of(PLAIN, PLAIN)), default=None)
    folds: int = json_field(omit_default=True, default=0)

    @staticmethod
    def new(run_id: str, plan: Plan) -> SchedulerState:
        """Fresh state for a validated plan: every node Waiting, nothing spent."""
        node_count, edge_count = len(plan.nodes), len(plan.edges)
        return SchedulerState(
            run_id=run_id,
            superstep=0,
            phase=IDLE,
            node_gen=[0] * node_count,
            node_state=[NodeState.WAITING] * node_count,
            in_res=[{} for _ in range(node_count)],
            edge_fired=[0] * edge_count,
            attempt=[0] * node_count,
            attempt_base=[0] * node_count,
            context={},
        )

    def is_terminal(self) -> bool:
        return isinstance(self.phase, Finished)

    def outcome(self) -> RunOutcome | None:
        """The run outcome once finished, else None."""
        phase = self.phase
        return phase.outcome if isinstance(phase, Finished) else None

    def is_parked(self) -> bool:
        """An open superstep whose outstanding effects are all asks or timers."""
        phase = self.phase
        if not isinstance(phase, OpenPhase) or not phase.outstanding or not self.pending_asks:
            return False
        return all(_waits_for_outside(self, key) for key in phase.outstanding)

    def to_json(self) -> dict[str, Any]:
        return _STATE.encode(self)

    def to_compact_json(self) -> dict[str, Any]:
        """Without the fields at a plain default, in nested records too (a checkpoint's
        form from epoch 4)."""
        return _STATE.encode_compact(self)

    @staticmethod
    def from_json(value: dict[str, Any]) -> SchedulerState:
        """Inverse of ``to_json`` and of ``to_compact_json``:
        ``from_json(s.to_json()).to_json() == s.to_json()``, and so for the compact form."""
        return _STATE.decode(value)


def _waits_for_outside(state: SchedulerState, key: JournalKey) -> bool:
    """Asks (and timers, which are registered alongside them) wait on the world, not on us."""
    return call_id(key) in state.pending_asks


_STATE: RecordCodec[SchedulerState] = RecordCodec(SchedulerState)
