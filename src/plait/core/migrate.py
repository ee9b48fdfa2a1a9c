"""Migration as a core transition (docs/architecture.md §5.6a): a run moved onto a new plan.

``plait migrate`` moves a run that is not being driven (parked, or finished other than
completed) from the plan it pinned onto another version. Nodes match by id (a mapping
renames), edges by their matched ends in declaration order; every per-node and per-edge
field of the state is carried to its new place. ``migration_problems`` lists every reason
a migration cannot be done, before anything is written; ``migrate_state`` is the move
itself. Both are pure, so verify re-drives a journaled migration exactly.

Two rules keep the journal sound. A node's attempt counter never goes back for an id
(journal keys are ``(run, task, node id, attempt, ...)``: a reset would answer new work
from old results). And work keyed under a node's id (a pending ask, an LLM loop, Send
tasks, an effect in flight) stays with that id: such a node can be neither removed nor
renamed nor change kind until that work has settled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from plait.core.errors import Problem
from plait.core.node_states import Move, NodeState, move
from plait.core.plan import Plan
from plait.core.state import IDLE, DecisionRecord, Finished, OpenPhase, SchedulerState

REFUSED = "E030"
"""The code of every reason a migration cannot be done."""

_KEYED = frozenset((NodeState.DISPATCHED, NodeState.AWAITING_CLIENT))
_RESET = frozenset((NodeState.DISPATCHED, NodeState.AWAITING_CLIENT, NodeState.DONE_FAILED))


@dataclass(frozen=True, slots=True)
class Matching:
    """Where each old node and edge goes in the new plan (None: it has no place there)."""

    nodes: tuple[int | None, ...]
    edges: tuple[int | None, ...]

    def is_identity(self, new: Plan) -> bool:
        """Every node and edge keeps its place and nothing is added: the same shape."""
        same_nodes = self.nodes == tuple(range(len(new.nodes)))
        return same_nodes and self.edges == tuple(range(len(new.edges)))

    @staticmethod
    def of(old: Plan, new: Plan, mapping: Mapping[str, str]) -> Matching:
        """Nodes by id, or by ``mapping`` (old id -> new id); edges by their matched ends,
        the k-th old edge between two nodes matching the k-th new one."""
        nodes = tuple(new.index.get(mapping.get(n.id, n.id)) for n in old.nodes)
        slots: dict[tuple[int, int], list[int]] = {}
        for edge in new.edges:
            slots.setdefault((edge.src, edge.dst), []).append(edge.index)
        taken: dict[tuple[int, int], int] = {}
        edges: list[int | None] = []
        for edge in old.edges:
            src, dst = nodes[edge.src], nodes[edge.dst]
            if src is None or dst is None:
                edges.append(None)
                continue
            ends = (src, dst)
            k = taken.get(ends, 0)
            taken[ends] = k + 1
            candidates = slots.get(ends, [])
            edges.append(candidates[k] if k < len(candidates) else None)
        return Matching(nodes, tuple(edges))


def migration_problems(
    state: SchedulerState,
    old: Plan,
    new: Plan,
    mapping: Mapping[str, str],
    *,
    restart_at_entry: bool = False,
) -> list[Problem]:
    """Every reason ``state`` cannot move from ``old`` onto ``new``, in a stable order;
    empty when it can."""
    problems = _mapping_problems(old, new, mapping)
    if problems:
        return problems
    matching = Matching.of(old, new, mapping)
    work = _pending_work(state)
    for index in sorted(work):
        if restart_at_entry and work[index] != "a child run":
            continue  # the plan starts again: what the node waited on is left behind
        node_id = old.nodes[index].id
        target = matching.nodes[index]
        what = work[index]
        if restart_at_entry:
            problems.append(_at(node_id, f"node '{node_id}' waits on {what}; cancel it first"))
        elif target is None:
            problems.append(
                _at(
                    node_id,
                    f"node '{node_id}' has {what} and the new version has no node"
                    f" '{mapping.get(node_id, node_id)}' (map it with --map {node_id}=NEW)",
                )
            )
        elif what == "to run next":
            continue  # nothing keyed yet: it may be renamed or change kind
        elif new.nodes[target].id != node_id:
            problems.append(
                _at(
                    node_id,
                    f"node '{node_id}' has {what} journaled under its id: it cannot be"
                    f" renamed to '{new.nodes[target].id}' until that settles",
                )
            )
        elif new.nodes[target].kind != old.nodes[index].kind:
            problems.append(
                _at(
                    node_id,
                    f"node '{node_id}' has {what} as a {old.nodes[index].kind} node; the new"
                    f" version makes it a {new.nodes[target].kind} node",
                )
            )
    for key in sorted(state.context):
        was, now = old.reducers.get(key, "lww"), new.reducers.get(key, "lww")
        if was != now:
            problems.append(
                Problem(
                    REFUSED,
                    f"context key '{key}' holds a value and its reducer changed from"
                    f" {was} to {now}",
                )
            )
    return problems


def migrate_state(
    state: SchedulerState,
    old: Plan,
    new: Plan,
    mapping: Mapping[str, str],
    *,
    restart_at_entry: bool = False,
) -> SchedulerState:
    """``state`` moved onto ``new`` (``migration_problems`` found nothing): a new state,
    ``state`` itself unchanged. A finished run is reopened where it stopped: its finish,
    cancel, failure and exhausted axis are cleared, and nodes that failed or whose work
    was abandoned run again (fresh retries). ``restart_at_entry`` keeps the context and
    what was spent and starts the new plan at its entry."""
    matching = Matching.of(old, new, mapping)
    moved = _new_plan_state(state, old, new, matching)
    if restart_at_entry:
        moved.attempt_base = list(moved.attempt)
        move(moved, 0, Move.START)
        return moved
    _carry_in_place(moved, state, matching)
    if isinstance(state.phase, Finished):
        _reopen(moved)
    return moved


def reshaped(
    state: SchedulerState, record: DecisionRecord, old: Plan, new: Plan, matching: Matching
) -> tuple[SchedulerState, DecisionRecord] | None:
    """A checkpoint of ``old`` in the shape of ``new`` (same ids, nothing reopened), for
    ``verify --workflow`` to compare a replay under ``new`` with; None when work pending
    in it has no place in ``new``."""
    if any(matching.nodes[index] is None for index in _pending_work(state)):
        return None
    moved = _new_plan_state(state, old, new, matching)
    _carry_in_place(moved, state, matching)
    return moved, _record_in_place(record, matching)


def empty_record(state: SchedulerState) -> DecisionRecord:
    """The decision record a migration's checkpoint carries: nothing was decided."""
    return DecisionRecord(state.superstep, state.clock_ms, state.clock_ms)


def _mapping_problems(old: Plan, new: Plan, mapping: Mapping[str, str]) -> list[Problem]:
    problems: list[Problem] = []
    for was, now in sorted(mapping.items()):
        if was not in old.index:
            problems.append(_at(was, f"--map {was}={now}: the run's version has no node '{was}'"))
        if now not in new.index:
            problems.append(_at(now, f"--map {was}={now}: the new version has no node '{now}'"))
    if problems:
        return problems
    claimed: dict[str, list[str]] = {}
    for node in old.nodes:
        target = mapping.get(node.id, node.id)
        if target in new.index:
            claimed.setdefault(target, []).append(node.id)
    for target, sources in sorted(claimed.items()):
        if len(sources) > 1:
            names = ", ".join(f"'{s}'" for s in sources)
            problems.append(_at(target, f"nodes {names} would all become '{target}'"))
    return problems


def _pending_work(state: SchedulerState) -> dict[int, str]:
    """Old node index -> what it has that a migration must not lose, worded for a reason."""
    work: dict[int, str] = {}
    for index, node_state in enumerate(state.node_state):
        if node_state == NodeState.READY and not isinstance(state.phase, Finished):
            work[index] = "to run next"
        elif node_state in _KEYED and not isinstance(state.phase, Finished):
            work[index] = "an effect in flight"
    if isinstance(state.phase, OpenPhase):
        for index in sorted(state.phase.results):
            work[index] = "a result not yet merged"
    for task in state.send_tasks.values():
        work[task.node] = "Send tasks"
    for flow in state.abstract_flows.values():
        work[flow.node] = "an LLM loop in flight"
    for ask in state.pending_asks.values():
        kinds = {"ask": "a pending ask", "timer": "a timer", "child": "a child run"}
        work[ask.node] = kinds[ask.kind]
    return work


def _new_plan_state(
    state: SchedulerState, old: Plan, new: Plan, matching: Matching
) -> SchedulerState:
    """A fresh state of ``new`` with what belongs to the whole run carried over: superstep,
    context, spent, clocks, inbox, Send counters, folds, and attempt counters by id."""
    moved = SchedulerState.new(state.run_id, new)
    _carry_attempts(moved, state, old, new, matching)
    moved.superstep = state.superstep
    moved.context = dict(state.context)
    moved.spent = replace(state.spent)
    moved.elapsed_ms = state.elapsed_ms
    moved.clock_ms = state.clock_ms
    moved.inbox = list(state.inbox)
    moved.inputs_seen = state.inputs_seen
    moved.spawn_counter = dict(state.spawn_counter)  # Send task paths are never reused
    moved.folds = state.folds
    return moved


def _carry_attempts(
    moved: SchedulerState, state: SchedulerState, old: Plan, new: Plan, matching: Matching
) -> None:
    """Attempt counters never go back for a node id: a new node takes the count of the old
    node that had its id, and of the node mapped onto it, whichever is higher."""
    by_id = {node.id: index for index, node in enumerate(old.nodes)}
    for index, target in enumerate(matching.nodes):
        if target is not None:
            moved.attempt[target] = state.attempt[index]
            moved.attempt_base[target] = state.attempt_base[index]
    for target, node in enumerate(new.nodes):
        same_id = by_id.get(node.id)
        if same_id is not None and state.attempt[same_id] > moved.attempt[target]:
            moved.attempt[target] = state.attempt[same_id]
            moved.attempt_base[target] = state.attempt[same_id]


def _carry_in_place(moved: SchedulerState, state: SchedulerState, matching: Matching) -> None:
    """Every per-node and per-edge field to its new index; what has no place is dropped
    (``migration_problems`` made sure nothing pending is)."""
    nodes, edges = matching.nodes, matching.edges
    carried = list(moved.node_state)  # a copy to new places, as a fork copies: no move
    for index, target in enumerate(nodes):
        if target is None:
            continue
        moved.node_gen[target] = state.node_gen[index]
        carried[target] = state.node_state[index]
        resolved = moved.in_res[target]
        for e, res in sorted(state.in_res[index].items()):
            placed = edges[e]
            if placed is not None:
                resolved[placed] = res
    moved.node_state = carried
    for index, target in enumerate(edges):
        if target is not None:
            moved.edge_fired[target] = state.edge_fired[index]
    moved.pending_asks = {
        ask_id: replace(ask, node=_placed(nodes, ask.node))
        for ask_id, ask in state.pending_asks.items()
    }
    moved.announced_asks = set(state.announced_asks)
    moved.abstract_flows = {
        (
            str(_placed(nodes, flow.node)) + flow.task_path
            if key == str(flow.node) + flow.task_path
            else key
        ): replace(flow, node=_placed(nodes, flow.node))
        for key, flow in state.abstract_flows.items()
    }
    moved.send_tasks = {
        path: replace(task, node=_placed(nodes, task.node))
        for path, task in state.send_tasks.items()
    }
    moved.wall_open, moved.paused_at = state.wall_open, state.paused_at
    moved.cancel, moved.exhausted = state.cancel, state.exhausted
    if state.failed is not None:
        failed_at = nodes[state.failed[0]]
        moved.failed = None if failed_at is None else (failed_at, state.failed[1])
    phase = state.phase
    if isinstance(phase, OpenPhase):
        moved.phase = OpenPhase(
            set(phase.outstanding),
            {_placed(nodes, n): r for n, r in sorted(phase.results.items())},
            _record_in_place(phase.record, matching),
            dict(phase.send_results),
        )
    else:
        moved.phase = phase


def _record_in_place(record: DecisionRecord, matching: Matching) -> DecisionRecord:
    """A superstep's record so far, its node and edge indices moved (dropped edges too)."""
    nodes, edges = matching.nodes, matching.edges
    return replace(
        record,
        edges=[[edges[e], *rest] for e, *rest in record.edges if edges[e] is not None],
        dispatched=[
            [_placed(nodes, n), *rest] for n, *rest in record.dispatched if nodes[n] is not None
        ],
        spawns=[[path, nodes[n]] for path, n in record.spawns if nodes[n] is not None],
        task_dispatched=[list(item) for item in record.task_dispatched],
        violations=[dict(item) for item in record.violations],
        refused=[dict(item) for item in record.refused],
    )


def _reopen(moved: SchedulerState) -> None:
    """A finished run goes on: work that failed or that its end abandoned runs again."""
    moved.phase = IDLE
    moved.cancel = moved.exhausted = moved.failed = None
    moved.pending_asks, moved.announced_asks = {}, set()
    moved.wall_open = moved.paused_at = None
    for index, node_state in enumerate(moved.node_state):
        if node_state in _RESET:
            move(moved, index, Move.RESET)
            moved.attempt_base[index] = moved.attempt[index]


def _placed(nodes: Sequence[int | None], index: int) -> int:
    target = nodes[index]
    assert target is not None, "migration_problems keeps pending work in place"
    return target


def _at(node: str, message: str) -> Problem:
    return Problem(REFUSED, message, node=node)
