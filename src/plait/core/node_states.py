"""Node states, edge resolutions, and the one table of how a node's state may move.

Rules of this file:
- Every change of a node's state goes through ``move``; nothing else assigns
  ``SchedulerState.node_state[i]``. So this table is the whole truth about which
  state may follow which, and a move it does not list is a bug in the core, raised
  as ``InvalidMove`` (never a user error: no workflow can provoke one).
- It knows nothing about effects, budgets or time: the step and its siblings decide
  *that* a node moves and *why*; this file only says *where to*.

Theory of operation. A node starts Waiting. The run's start (the entry) or its
in-edges resolving (``READIED``) make it Ready; in-edges resolving with none fired make
it Dead. Ready is dispatched: to Dispatched (a tool, an abstract node's LLM loop, a
child run) or to AwaitingClient (an ask or a timer, which the world settles). An answer
from the world puts it back to Dispatched for its resolution. A resolution leaves it
DoneOk, DoneFailed, or Ready again (a retry inside the superstep). A Send spawn makes its
target Dispatched from wherever it was; the target is DoneOk when its tasks drain.
An edge firing into a settled node re-enters it: Waiting, at the next generation.
Fail-fast may strike any node that produced or awaited a result (§3.5).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plait.core.state import SchedulerState


class NodeState(StrEnum):
    """A node's state at its current generation; the value is its JSON name."""

    WAITING = "Waiting"
    READY = "Ready"
    DISPATCHED = "Dispatched"
    AWAITING_CLIENT = "AwaitingClient"
    DONE_OK = "DoneOk"
    DONE_FAILED = "DoneFailed"
    DEAD = "Dead"


class EdgeRes(StrEnum):
    """An in-edge's resolution at its destination's current generation (absent = Pending)."""

    FIRED = "Fired"
    DEAD = "Dead"


class Move(StrEnum):
    """Why a node's state changes: the events of the table below."""

    START = "start"  # the run's Start readies the entry
    READIED = "readied"  # its gating in-edges resolved, one fired
    DIED = "died"  # its gating in-edges resolved, none fired
    DISPATCHED = "dispatched"  # a tool effect, an LLM loop or a child run began
    AWAITED = "awaited"  # an ask or a timer began: the world settles it
    ANSWERED = "answered"  # the world settled an ask, a timer or a parked child
    COMPLETED = "completed"  # its effect (or LLM loop) produced the node's result
    RETRIED = "retried"  # a retryable failure: dispatched again in this superstep
    FAILED = "failed"  # fail-fast
    SPAWNED = "spawned"  # a Send spawned tasks of it
    DRAINED = "drained"  # every Send task of it is done
    REENTERED = "reentered"  # an edge fired into it after it settled
    RESET = "reset"  # a migration reopened its run: failed or abandoned work runs again


W, R, D, A = NodeState.WAITING, NodeState.READY, NodeState.DISPATCHED, NodeState.AWAITING_CLIENT
OK, FAILED, DEAD = NodeState.DONE_OK, NodeState.DONE_FAILED, NodeState.DEAD

TRANSITIONS: dict[NodeState, dict[Move, NodeState]] = {
    W: {Move.START: R, Move.READIED: R, Move.DIED: DEAD, Move.SPAWNED: D},
    R: {Move.DISPATCHED: D, Move.AWAITED: A, Move.SPAWNED: D, Move.FAILED: FAILED},
    D: {
        Move.ANSWERED: D,
        Move.COMPLETED: OK,
        Move.RETRIED: R,
        Move.FAILED: FAILED,
        Move.SPAWNED: D,
        Move.DRAINED: OK,
        Move.RESET: R,
    },
    A: {Move.ANSWERED: D, Move.COMPLETED: OK, Move.RETRIED: R, Move.FAILED: FAILED, Move.RESET: R},
    OK: {Move.REENTERED: W, Move.FAILED: FAILED, Move.SPAWNED: D},
    FAILED: {Move.REENTERED: W, Move.FAILED: FAILED, Move.SPAWNED: D, Move.RESET: R},
    DEAD: {Move.REENTERED: W, Move.SPAWNED: D},
}
"""state -> {why -> next state}: every move a node may make, and no other."""

UNRESOLVED = frozenset((W, R, D, A))
"""Node states whose source has not settled at its current generation."""

_BY_VALUE: dict[str, NodeState] = {s.value: s for s in NodeState}
_EDGE_BY_VALUE: dict[str, EdgeRes] = {r.value: r for r in EdgeRes}


class InvalidMove(Exception):
    """A move the table does not list: a bug in the core, not in a workflow."""


def move(state: SchedulerState, node: int, why: Move) -> NodeState:
    """Move ``node`` as ``why`` says, checked against the table; returns its new state."""
    current = state.node_state[node]
    try:
        to = TRANSITIONS[current][why]
    except KeyError:
        raise InvalidMove(f"node {node}: {current} cannot move on {why}") from None
    state.node_state[node] = to
    return to


def node_state_of(value: str) -> NodeState:
    """The NodeState a JSON name names (KeyError for any other text)."""
    return _BY_VALUE[value]


def edge_res_of(value: str) -> EdgeRes:
    """The EdgeRes a JSON name names (KeyError for any other text)."""
    return _EDGE_BY_VALUE[value]
