"""The graph walk: edge delivery, re-entry generations, AND-joins, dead paths.

These functions decide which nodes become Ready after a superstep closes
(docs/architecture.md §3.5). They mutate the state they are given and append to the
decision record; they never look at effects, budgets or time.
"""

from __future__ import annotations

from typing import Any

from plait.core.node_states import UNRESOLVED, EdgeRes, Move, NodeState, move
from plait.core.plan import Plan
from plait.core.state import SchedulerState

FIRED, EDGE_DEAD = EdgeRes.FIRED, EdgeRes.DEAD
DEAD, DONE_OK, WAITING = NodeState.DEAD, NodeState.DONE_OK, NodeState.WAITING


def deliver(plan: Plan, state: SchedulerState, e: int, fired: bool) -> int:
    """Deliver edge ``e``'s resolution to its destination; returns the destination generation.

    Firing into a settled node re-enters it: a new generation whose in-edges from
    settled sources are Dead (they will not fire again for it) and whose
    attempt counter keeps counting, so journal keys never repeat.
    """
    edge = plan.edges[e]
    dst = edge.dst
    if state.node_state[dst] not in UNRESOLVED:
        if not fired:
            return state.node_gen[dst]
        # Settled sources are judged before dst itself turns Waiting: its own self-loop
        # comes from a settled source too, and must not make it wait on itself.
        res: dict[int, EdgeRes] = {}
        for other in plan.in_edges[dst]:
            if other != e and state.node_state[plan.edges[other].src] not in UNRESOLVED:
                res[other] = EDGE_DEAD
        res[e] = FIRED
        state.node_gen[dst] += 1
        move(state, dst, Move.REENTERED)
        state.attempt_base[dst] = state.attempt[dst]
        state.in_res[dst] = res
    else:
        state.in_res[dst][e] = FIRED if fired else EDGE_DEAD
    refresh_readiness(plan, state, dst)
    return state.node_gen[dst]


def refresh_readiness(plan: Plan, state: SchedulerState, node: int) -> None:
    """A Waiting node whose gating in-edges all resolved is Ready if any fired, else Dead."""
    if state.node_state[node] != WAITING:
        return
    gating = plan.gating_gen0[node] if state.node_gen[node] == 0 else plan.in_edges[node]
    if not gating:
        return
    res = state.in_res[node]
    any_fired = False
    for e in gating:
        r = res.get(e)
        if r is None:
            return
        if r == FIRED:
            any_fired = True
    move(state, node, Move.READIED if any_fired else Move.DIED)


def propagate_death(plan: Plan, state: SchedulerState, edges_record: list[list[Any]]) -> None:
    """Dead nodes resolve their out-edges as Dead, to a fixpoint (a diamond's untaken arm)."""
    changed = True
    while changed:
        changed = False
        for node, node_state in enumerate(state.node_state):
            if node_state != DEAD:
                continue
            for e in plan.out_edges[node]:
                dst = plan.edges[e].dst
                if state.node_state[dst] != WAITING or e in state.in_res[dst]:
                    continue
                state.in_res[dst][e] = EDGE_DEAD
                edges_record.append([e, state.node_gen[dst], "DeadPath"])
                refresh_readiness(plan, state, dst)
                changed = True


def stalled_culprit(plan: Plan, state: SchedulerState) -> int:
    """Lowest DoneOk node with out-edges none of which ever fired; else lowest Waiting; else 0."""
    for node, node_state in enumerate(state.node_state):
        outs = plan.out_edges[node]
        if node_state == DONE_OK and outs and all(state.edge_fired[e] == 0 for e in outs):
            return node
    for node, node_state in enumerate(state.node_state):
        if node_state == WAITING:
            return node
    return 0
