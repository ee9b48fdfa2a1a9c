"""Asks and durable timers: effects the world settles, not an executor (docs/architecture.md §8).

An ask node (or an approval-required / deferred tool call) journals an intent
and registers a pending ask keyed by its ask id (the call id of its key); a
timer node does the same with a wake time. Neither is dispatched: a run whose
outstanding effects are all asks or timers is parked. Answers arrive as
``ResponseSettled`` events, addressed by ask id, never by position.
"""

from __future__ import annotations

from typing import Any

from plait.core.canonical import JSON
from plait.core.codec import ABSENT
from plait.core.events import WriteIntent
from plait.core.keys import JournalKey, call_id, child_run_id
from plait.core.machine import StepContext, emit_effect
from plait.core.node_states import Move, move
from plait.core.pending import NOT_APPLYING as NOT_APPLYING
from plait.core.pending import PendingAsk
from plait.core.pending import announced as announced
from plait.core.state import OpenPhase

ASK_EXECUTOR = "ask"
TIMER_EXECUTOR = "timer"


def journal_only(
    s: StepContext, phase: OpenPhase, key: JournalKey, executor: str, value: JSON
) -> None:
    """Make ``key`` outstanding and journal its intent, without dispatching anything."""
    phase.outstanding.add(key)
    state = s.state
    s.commands.append(WriteIntent(key, executor, value, state.superstep, state.clock_ms))


def register_ask(
    s: StepContext,
    phase: OpenPhase,
    key: JournalKey,
    node: int,
    *,
    tool_name: str | None,
    prompt: str,
    value: JSON,
    approval: bool,
    tool_call_id: Any = ABSENT,
) -> str:
    """Journal an ask and remember it as pending; returns its ask id."""
    state, env = s.state, s.env
    ask_id = call_id(key)
    expires_at = None
    if env.ask_ttl_sec is not None:
        expires_at = state.clock_ms // 1000 + env.ask_ttl_sec
    ask: dict[str, Any] = {
        "ask_id": ask_id,
        "node": env.plan.nodes[node].id,
        "tool_name": tool_name,
        "prompt": prompt,
        "input": value,
        "expires_at": expires_at,
        "approval": approval,
    }
    state.pending_asks[ask_id] = PendingAsk(key, node, ask=ask, tool_call_id=tool_call_id)
    journal_only(s, phase, key, ASK_EXECUTOR, value)
    return ask_id


def dispatch_ask_node(s: StepContext, phase: OpenPhase, node: int) -> None:
    state = s.state
    state.attempt[node] += 1
    attempt = state.attempt[node]
    spec = s.env.executors[node].spec
    key = JournalKey(state.run_id, "", s.env.plan.nodes[node].id, attempt, 0, "tool")
    phase.record.dispatched.append([node, attempt])
    move(state, node, Move.AWAITED)
    register_ask(
        s,
        phase,
        key,
        node,
        tool_name=None,
        prompt=str(spec.get("prompt") or ""),
        value=state.context,
        approval=bool(spec.get("approval")),
    )


def dispatch_timer_node(s: StepContext, phase: OpenPhase, node: int) -> None:
    """A durable timer: an outstanding effect with a wake time, settled by the driver's clock."""
    state = s.state
    state.attempt[node] += 1
    attempt = state.attempt[node]
    key = JournalKey(state.run_id, "", s.env.plan.nodes[node].id, attempt, 0, "tool")
    wake_ms = state.clock_ms + int(s.env.executors[node].spec.get("sleep_ms", 0))
    phase.record.dispatched.append([node, attempt])
    move(state, node, Move.AWAITED)
    timer_id = call_id(key)
    state.pending_asks[timer_id] = PendingAsk(key, node, wake_ms=wake_ms)
    journal_only(s, phase, key, TIMER_EXECUTOR, {"wake_ms": wake_ms})


SUBGRAPH_PREFIX = "subgraph:"
"""Executor of a subgraph node: ``subgraph:<workflow path>``; its input is the context."""


def dispatch_subgraph_node(s: StepContext, phase: OpenPhase, node: int) -> None:
    """Run a child workflow (§3.9): dispatched now, and pending like an ask in case it parks.

    If the child finishes within the wave its result resolves the effect as usual; if it
    parks, the parent's only outstanding effects are world-settled, so the parent parks
    too, and the driver settles the entry when the child finishes.
    """
    state = s.state
    state.attempt[node] += 1
    attempt = state.attempt[node]
    key = JournalKey(state.run_id, "", s.env.plan.nodes[node].id, attempt, 0, "tool")
    phase.record.dispatched.append([node, attempt])
    move(state, node, Move.DISPATCHED)
    child = child_run_id(state.run_id, key)
    state.pending_asks[call_id(key)] = PendingAsk(key, node, child=child)
    emit_effect(s, phase, key, SUBGRAPH_PREFIX + s.env.executors[node].name, state.context)
