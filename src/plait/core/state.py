"""The scheduler state (seed ``SchedulerState``) and its canonical JSON form.

A checkpoint is this state, serialized canonically; verify compares those bytes,
so serialization is exact: integer-keyed maps use decimal string keys, tuples
are arrays, tagged variants are ``{"Variant": payload}``, and fields of optional
features are omitted while at their default so a run that does not use a
feature keeps the bytes it had before the feature existed (§3.1, §3.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plait.core.abstract import AbstractFlow
from plait.core.canonical import JSON
from plait.core.keys import JournalKey, call_id

WAITING = "Waiting"
READY = "Ready"
DISPATCHED = "Dispatched"
AWAITING_CLIENT = "AwaitingClient"
DONE_OK = "DoneOk"
DONE_FAILED = "DoneFailed"
DEAD = "Dead"
NODE_STATES = (WAITING, READY, DISPATCHED, AWAITING_CLIENT, DONE_OK, DONE_FAILED, DEAD)
UNRESOLVED = frozenset((WAITING, READY, DISPATCHED, AWAITING_CLIENT))
"""Node states whose source has not settled at its current generation."""

FIRED = "Fired"
EDGE_DEAD = "Dead"


@dataclass(slots=True)
class Spent:
    """What the run has consumed so far; every figure is a pure function of the journal."""

    supersteps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usd_micros: int = 0
    wall_ms: int = 0
    storage_bytes: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "supersteps": self.supersteps,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "usd_micros": self.usd_micros,
            "wall_ms": self.wall_ms,
            "storage_bytes": self.storage_bytes,
        }

    @staticmethod
    def from_json(value: dict[str, Any]) -> Spent:
        return Spent(**{k: int(v) for k, v in value.items()})


@dataclass(slots=True)
class DecisionRecord:
    """What one superstep decided: edges and their outcomes, dispatches, spawns, clocks."""

    superstep: int
    clock_open_ms: int
    clock_close_ms: int = 0
    edges: list[list[Any]] = field(default_factory=list)
    dispatched: list[list[int]] = field(default_factory=list)
    spawns: list[list[Any]] = field(default_factory=list)
    task_dispatched: list[list[Any]] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    """Observe mode: final answers a ``require`` would have refused (§9), and the calls of
    a failing loop's last answer enforce mode would have refused. Kept here because the
    node's end takes its loop state with it."""
    refused: list[dict[str, Any]] = field(default_factory=list)
    """Governance refusals of a failing loop's last answer, which no later turn carries."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "superstep": self.superstep,
            "clock_open_ms": self.clock_open_ms,
            "clock_close_ms": self.clock_close_ms,
            "edges": self.edges,
            "dispatched": self.dispatched,
        }
        if self.spawns:
            out["spawns"] = self.spawns
        if self.task_dispatched:
            out["task_dispatched"] = self.task_dispatched
        if self.violations:
            out["violations"] = self.violations
        if self.refused:
            out["refused"] = self.refused
        return out

    @staticmethod
    def from_json(value: dict[str, Any]) -> DecisionRecord:
        return DecisionRecord(
            superstep=value["superstep"],
            clock_open_ms=value["clock_open_ms"],
            clock_close_ms=value["clock_close_ms"],
            edges=[list(x) for x in value["edges"]],
            dispatched=[list(x) for x in value["dispatched"]],
            spawns=[list(x) for x in value.get("spawns", [])],
            task_dispatched=[list(x) for x in value.get("task_dispatched", [])],
            violations=[dict(x) for x in value.get("violations", [])],
            refused=[dict(x) for x in value.get("refused", [])],
        )


@dataclass(slots=True)
class OpenPhase:
    """A superstep in progress: effects outstanding, results buffered until close."""

    outstanding: set[JournalKey]
    results: dict[int, JSON]
    send_results: dict[str, JSON]
    record: DecisionRecord

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "outstanding": [k.to_json() for k in sorted(self.outstanding, key=JournalKey.sort_key)],
            "results": {str(i): v for i, v in self.results.items()},
            "record": self.record.to_json(),
        }
        if self.send_results:
            body["send_results"] = self.send_results
        return {"Open": body}


Phase = str | OpenPhase | dict[str, Any]
"""``"Idle"``, an OpenPhase, or ``{"Finished": <RunOutcome>}``."""

IDLE = "Idle"


@dataclass(slots=True)
class SchedulerState:
    """The complete scheduler state: exactly the fields of the seed, with their meanings."""

    run_id: str
    superstep: int
    phase: Phase
    node_gen: list[int]
    node_state: list[str]
    in_res: list[dict[int, str]]
    edge_fired: list[int]
    attempt: list[int]
    attempt_base: list[int]
    context: dict[str, Any]
    spent: Spent = field(default_factory=Spent)
    elapsed_ms: int = 0
    clock_ms: int = 0
    wall_open: int | None = None
    paused_at: int | None = None
    pending_asks: dict[str, dict[str, Any]] = field(default_factory=dict)
    abstract_flows: dict[str, AbstractFlow] = field(default_factory=dict)
    send_tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    spawn_counter: dict[str, int] = field(default_factory=dict)
    announced_asks: set[str] = field(default_factory=set)
    inbox: list[JSON] = field(default_factory=list)
    inputs_seen: int = 0
    cancel: tuple[str, str] | None = None
    exhausted: str | None = None
    failed: tuple[int, str] | None = None
    folds: int = 0

    @staticmethod
    def new(run_id: str, node_count: int, edge_count: int) -> SchedulerState:
        """Fresh state for a validated plan: every node Waiting, nothing spent."""
        return SchedulerState(
            run_id=run_id,
            superstep=0,
            phase=IDLE,
            node_gen=[0] * node_count,
            node_state=[WAITING] * node_count,
            in_res=[{} for _ in range(node_count)],
            edge_fired=[0] * edge_count,
            attempt=[0] * node_count,
            attempt_base=[0] * node_count,
            context={},
        )

    def is_terminal(self) -> bool:
        return isinstance(self.phase, dict) and "Finished" in self.phase

    def outcome(self) -> JSON | None:
        """The run outcome once finished, else None."""
        if isinstance(self.phase, dict):
            return self.phase.get("Finished")
        return None

    def is_parked(self) -> bool:
        """An open superstep whose outstanding effects are all asks or timers."""
        phase = self.phase
        if not isinstance(phase, OpenPhase) or not phase.outstanding or not self.pending_asks:
            return False
        return all(_waits_for_outside(self, key) for key in phase.outstanding)

    def to_json(self) -> dict[str, Any]:
        phase = self.phase
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "superstep": self.superstep,
            "phase": phase.to_json() if isinstance(phase, OpenPhase) else phase,
            "node_gen": self.node_gen,
            "node_state": self.node_state,
            "in_res": [{str(e): r for e, r in res.items()} for res in self.in_res],
            "edge_fired": self.edge_fired,
            "attempt": self.attempt,
            "attempt_base": self.attempt_base,
            "context": self.context,
            "spent": self.spent.to_json(),
            "elapsed_ms": self.elapsed_ms,
            "clock_ms": self.clock_ms,
            "wall_open": self.wall_open,
            "paused_at": self.paused_at,
            "pending_asks": self.pending_asks,
            "abstract_flows": {k: f.to_json() for k, f in self.abstract_flows.items()},
            "announced_asks": sorted(self.announced_asks),
            "cancel": list(self.cancel) if self.cancel is not None else None,
            "exhausted": self.exhausted,
            "failed": list(self.failed) if self.failed is not None else None,
        }
        # Optional features: omitted while at their default (§3.2).
        if self.send_tasks:
            out["send_tasks"] = self.send_tasks
        if self.spawn_counter:
            out["spawn_counter"] = self.spawn_counter
        if self.inbox:
            out["inbox"] = self.inbox
        if self.inputs_seen:
            out["inputs_seen"] = self.inputs_seen
        if self.folds:
            out["folds"] = self.folds
        return out

    @staticmethod
    def from_json(value: dict[str, Any]) -> SchedulerState:
        """Inverse of ``to_json``: ``from_json(s.to_json()).to_json() == s.to_json()``."""
        raw_phase = value["phase"]
        phase: Phase
        if isinstance(raw_phase, dict) and "Open" in raw_phase:
            body = raw_phase["Open"]
            phase = OpenPhase(
                outstanding={JournalKey.from_json(k) for k in body["outstanding"]},
                results={int(i): v for i, v in body["results"].items()},
                send_results=dict(body.get("send_results", {})),
                record=DecisionRecord.from_json(body["record"]),
            )
        else:
            phase = raw_phase
        cancel = value.get("cancel")
        failed = value.get("failed")
        return SchedulerState(
            run_id=value["run_id"],
            superstep=value["superstep"],
            phase=phase,
            node_gen=list(value["node_gen"]),
            node_state=list(value["node_state"]),
            in_res=[{int(e): r for e, r in res.items()} for res in value["in_res"]],
            edge_fired=list(value["edge_fired"]),
            attempt=list(value["attempt"]),
            attempt_base=list(value["attempt_base"]),
            context=value["context"],
            spent=Spent.from_json(value["spent"]),
            elapsed_ms=value["elapsed_ms"],
            clock_ms=value["clock_ms"],
            wall_open=value["wall_open"],
            paused_at=value["paused_at"],
            pending_asks=dict(value["pending_asks"]),
            abstract_flows={
                k: AbstractFlow.from_json(f) for k, f in value["abstract_flows"].items()
            },
            send_tasks=dict(value.get("send_tasks", {})),
            spawn_counter=dict(value.get("spawn_counter", {})),
            announced_asks=set(value["announced_asks"]),
            inbox=list(value.get("inbox", [])),
            inputs_seen=value.get("inputs_seen", 0),
            cancel=(cancel[0], cancel[1]) if cancel is not None else None,
            exhausted=value.get("exhausted"),
            failed=(failed[0], failed[1]) if failed is not None else None,
            folds=value.get("folds", 0),
        )


def _waits_for_outside(state: SchedulerState, key: JournalKey) -> bool:
    """Asks (and timers, which are registered alongside them) wait on the world, not on us."""
    return call_id(key) in state.pending_asks
