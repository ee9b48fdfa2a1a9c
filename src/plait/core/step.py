"""The step function: ``step(env, state, events) -> StepOutcome(state, commands)``.

Rules of this file:
- Everything that decides what a run does next lives here or in the sibling
  modules it calls (walk, budgets); the driver only performs commands.
- It never reads a clock, randomness, the environment or any IO. Time enters
  only as ``ClockReading`` events; results only as ``EffectResolved``.
- It never iterates an unordered collection without sorting it first.
- It may mutate the state it is handed: the caller gives up ownership.

Theory of operation. Events are applied in order; then ``_progress`` advances
the bulk-synchronous machine as far as pure reasoning allows, in one loop
until nothing changes (a fixpoint). A superstep *opens* when the run is Idle
and something is Ready: every Ready node is dispatched (index order). While
*open*, results arrive and are buffered; retryable failures are re-dispatched
inside the same superstep. When nothing is outstanding the superstep *closes*:
results merge into the context through reducers in canonical order, each
finished node's out-edges are evaluated in declaration order, dead paths are
propagated, and a checkpoint is emitted. When nothing is Ready at Idle the run
finishes: Completed if a final node (no out-edges) is DoneOk, else Stalled.
A permanent failure, a cancel or an exhausted budget drains the open superstep
(no new dispatches) and then finishes the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from plait.core import asks, llm_loop, retry, send
from plait.core.budgets import exhausted_at_dispatch, exhausted_at_open
from plait.core.canonical import JSON, dumpb
from plait.core.env import MISSING, StepEnv
from plait.core.events import (
    WHOLE_CHECKPOINT_LIMIT,
    BudgetRaised,
    CancelSeen,
    ClockReading,
    Command,
    EffectResolved,
    EmitEnvelope,
    Event,
    Finish,
    InputReceived,
    ResponseSettled,
    Start,
    WriteCheckpoint,
)
from plait.core.keys import JournalKey, call_id
from plait.core.machine import StepContext, emit_effect, fail_node
from plait.core.merkle import MERKLE_EPOCH, cut_checkpoint
from plait.core.node_states import Move, NodeState, move
from plait.core.outcomes import (
    Completed,
    EffectOutcome,
    RunOutcome,
    journal_bytes,
    run_budget_exhausted,
    run_canceled,
    run_completed,
    run_failed,
    run_stalled,
)
from plait.core.reducers import ReducerError
from plait.core.state import (
    COMPACT_EPOCH,
    IDLE,
    DecisionRecord,
    Finished,
    Idle,
    OpenPhase,
    SchedulerState,
)
from plait.core.transcript import Entry
from plait.core.walk import deliver, propagate_death, stalled_culprit

WAITING, READY, DONE_OK = NodeState.WAITING, NodeState.READY, NodeState.DONE_OK
DISPATCHED, AWAITING_CLIENT = NodeState.DISPATCHED, NodeState.AWAITING_CLIENT
SEND_KEY = send.SEND_KEY
INBOX_KEY = "$inbox"
_new_tuple = tuple.__new__


@dataclass(frozen=True)
class StepOutcome:
    state: SchedulerState
    commands: list[Command]

    def __init__(self, state: SchedulerState, commands: list[Command]) -> None:
        # One call, as core.events' commands (built at every step).
        self.__dict__.update(state=state, commands=commands)


def step(env: StepEnv, state: SchedulerState, events: Iterable[Event]) -> StepOutcome:
    """Apply ``events`` in order, then advance the run as far as pure reasoning allows."""
    s = StepContext(env, state, env.reducer(), [])
    for event in _answers_in_ask_order(state, events):
        _apply(s, event)
    if s.idle_answers:  # only loops' final answers note any
        llm_loop.settle_idle_answers(s)
    _progress(s)
    return StepOutcome(state, s.commands)


def _answers_in_ask_order(state: SchedulerState, events: Iterable[Event]) -> list[Event]:
    """``events`` with each run of consecutive answers sorted in the order their asks were
    made: answers fed together (approvals of one model answer, say) must settle the same
    way whatever order they were given in, and approved calls then run in the order the
    model called them (``_ask_position``)."""
    events = events if isinstance(events, list) else list(events)
    for event in events:
        if isinstance(event, ResponseSettled):
            break
    else:
        return events  # a wave's results: the common case, taken as it is
    out: list[Event] = []
    answers: list[ResponseSettled] = []
    for event in events:
        if isinstance(event, ResponseSettled):
            answers.append(event)
            continue
        out.extend(_in_ask_order(state, answers))
        answers = []
        out.append(event)
    out.extend(_in_ask_order(state, answers))
    return out


def _in_ask_order(state: SchedulerState, answers: list[ResponseSettled]) -> list[ResponseSettled]:
    return sorted(answers, key=lambda answer: _ask_position(state, answer.ask_id))


def _ask_position(state: SchedulerState, ask_id: str) -> tuple[int, str, int, str]:
    """Where an ask was made: its node's index, task path and effect_seq (a model's calls
    in the order it made them), then its id; an ask no longer pending sorts first (its
    answer is refused or ignored, whatever its place)."""
    entry = state.pending_asks.get(ask_id)
    if entry is None:
        return (-1, "", -1, ask_id)
    return (entry.node, entry.key.task_path, entry.key.effect_seq, ask_id)


# --- events -----------------------------------------------------------------


def _apply(s: StepContext, event: Event) -> None:
    state = s.state
    if isinstance(event, EffectResolved):
        _resolve(s, event.key, event.outcome)
    elif isinstance(event, ClockReading):
        if event.unix_ms > state.clock_ms:
            state.clock_ms = event.unix_ms
    elif isinstance(event, Start):
        if (
            state.superstep == 0
            and isinstance(state.phase, Idle)
            and state.node_state[0] == WAITING
        ):
            value = event.input
            if value is None:
                value = {}
            state.context = value if isinstance(value, dict) else {"input": value}
            move(state, 0, Move.START)
    elif isinstance(event, CancelSeen):
        if state.cancel is None and not state.is_terminal():
            state.cancel = (event.by, event.reason)
    elif isinstance(event, InputReceived):
        state.inbox.append(event.message)
        state.inputs_seen += 1
        s.inputs = True
    elif isinstance(event, BudgetRaised):
        # The driver hands the raised ceilings in the env; the core only re-arms the run.
        state.exhausted = None
        outcome = state.outcome()
        if isinstance(outcome, dict) and "BudgetExhausted" in outcome:
            state.phase = IDLE
    elif isinstance(event, ResponseSettled):
        ask = state.pending_asks.pop(event.ask_id, None)
        if ask is not None:
            state.announced_asks.discard(event.ask_id)
            if state.paused_at is not None and isinstance(state.phase, OpenPhase):
                # Unparked: the wait was elapsed time; from here wall time is charged again.
                state.elapsed_ms += state.clock_ms - state.paused_at
                state.paused_at = None
                state.wall_open = state.clock_ms
            if ask.backoff:
                _backoff_elapsed(s, ask.key, event.outcome)
                return
            key = ask.key
            move(state, s.env.plan.index[key.node], Move.ANSWERED)
            _resolve(s, key, event.outcome)


def _resolve(s: StepContext, key: JournalKey, outcome: EffectOutcome) -> None:
    """Settle one effect; late or duplicate results (key not outstanding) are ignored."""
    state, plan = s.state, s.env.plan
    phase = state.phase
    if not isinstance(phase, OpenPhase) or key not in phase.outstanding:
        return
    node = plan.index.get(key.node)
    if node is None:
        return
    phase.outstanding.discard(key)
    spent = state.spent
    if isinstance(outcome, Completed):
        size = outcome.size  # (journal_bytes' answer when the driver knows it: no call)
        spent.storage_bytes += journal_bytes(outcome) if size is None else size
        usage = outcome.usage
        spent.input_tokens += usage.input_tokens
        spent.output_tokens += usage.output_tokens
        spent.usd_micros += usage.usd_micros
    else:
        spent.storage_bytes += journal_bytes(outcome)
    entry = state.pending_asks.get(call_id(key)) if state.pending_asks else None
    if entry is not None and entry.child is not None:
        del state.pending_asks[call_id(key)]  # the child finished within the wave
        if state.paused_at is not None:
            # No park after all: the child ran to its end inside the wave, on the parent's
            # active time (a child that parks is waited for, as elapsed time only).
            state.wall_open = state.paused_at
            state.paused_at = None
    if state.abstract_flows and llm_loop.on_resolved(s, key, outcome):
        return
    if key.task_path:
        send.resolve_task(s, phase, key, outcome)
        return
    if state.node_state[node] not in (DISPATCHED, AWAITING_CLIENT):
        return  # a straggler must never flip a settled node
    if isinstance(outcome, Completed):
        move(state, node, Move.COMPLETED)
        phase.results[node] = outcome.result
        return
    settled_by_world = s.env.executors[node].kind in ("ask", "timer", "subgraph")
    policy = retry.policy_of(s, node)
    failed_attempts = state.attempt[node] - state.attempt_base[node]
    if (
        not settled_by_world
        and state.cancel is None
        and policy.allows(failed_attempts, outcome, key.kind)
    ):
        delay = retry.delay_ms(policy, failed_attempts, key)
        if delay:
            timer = key._replace(effect_seq=key.effect_seq + 1)  # a tool node's keys use 0
            retry.wait(s, phase, timer, node, delay, failed=key, failed_attempts=failed_attempts)
        else:
            move(state, node, Move.RETRIED)
        return
    fail_node(state, node, f"{outcome.cause}: {outcome.detail}")


def _backoff_elapsed(s: StepContext, key: JournalKey, outcome: EffectOutcome) -> None:
    """A retry policy's wait is over (§3.5b): the effect it waited for is tried again."""
    state = s.state
    phase = state.phase
    if not isinstance(phase, OpenPhase) or key not in phase.outstanding:
        return
    phase.outstanding.discard(key)
    state.spent.storage_bytes += journal_bytes(outcome)
    if state.cancel is not None:
        return  # canceled meanwhile: nothing more is tried
    if state.abstract_flows and llm_loop.backoff_elapsed(s, phase, key):
        return
    if key.task_path:
        send.retry_task(s, key)
    else:
        node = s.env.plan.index[key.node]
        if state.node_state[node] == DISPATCHED:
            move(state, node, Move.RETRIED)


# --- progress -----------------------------------------------------------------


def _progress(s: StepContext) -> None:
    while True:
        phase = s.state.phase
        if isinstance(phase, OpenPhase):
            if not _progress_open(s, phase):
                return
        elif isinstance(phase, Idle):
            if not _progress_idle(s):
                return
        else:
            return


def _draining(state: SchedulerState) -> bool:
    return state.cancel is not None or state.exhausted is not None


def _ending(state: SchedulerState) -> bool:
    """Draining, or a node failed for good: loops take no further turn."""
    return _draining(state) or state.failed is not None


def _progress_open(s: StepContext, phase: OpenPhase) -> bool:
    state = s.state
    # After a permanent failure the superstep drains with no new dispatches but retries
    # (§3.5): a loop does not take its next turn, and nobody is asked to answer.
    if state.abstract_flows and not _ending(state) and llm_loop.serve_needs(s, phase):
        return True  # (serve_needs serves nothing without flows)
    if state.cancel is None and state.exhausted is None:  # not draining (inline: a frame)
        if READY in state.node_state:
            dispatched = False
            for node in [i for i, ns in enumerate(state.node_state) if ns == READY]:
                dispatched |= _dispatch_node(s, phase, node)
            if dispatched:
                return True
        if state.send_tasks and _dispatch_tasks(s, phase):
            return True
    # (is_parked needs pending asks, _ending flows: neither is called for a run without)
    only_asks = bool(phase.outstanding and state.pending_asks) and state.is_parked()
    settled = not phase.outstanding and (
        not state.abstract_flows or _ending(state) or not llm_loop.has_needs(s)
    )
    # A cancel or a failure abandons whatever waits on the world: asks, timers and parked
    # child runs (the cancel verb, or the driver once the run has failed, cancels those).
    abandon = state.cancel is not None or state.failed is not None
    if settled or (abandon and only_asks):
        if abandon:
            phase.outstanding.clear()
            state.pending_asks.clear()
            state.announced_asks.clear()
        _close_superstep(s, phase)
        return True
    if only_asks:
        _park(s, phase)
    return False


def _progress_idle(s: StepContext) -> bool:
    state, env = s.state, s.env
    if state.cancel is not None:
        return _finish(s, run_canceled(*state.cancel))
    if state.exhausted is not None:
        return _finish(s, run_budget_exhausted(state.exhausted))
    if state.failed is not None:
        node, detail = state.failed
        return _finish(s, run_failed(env.plan.nodes[node].id, detail))
    if READY not in state.node_state and not llm_loop.has_needs(s) and not send.queued(s):
        if state.superstep == 0 and state.node_state[0] == WAITING:
            return False  # not started yet: not a stall
        if DISPATCHED in state.node_state or AWAITING_CLIENT in state.node_state:
            return False
        plan = env.plan
        if any(ns == DONE_OK and plan.is_terminal(i) for i, ns in enumerate(state.node_state)):
            return _finish(s, run_completed())
        return _finish(s, run_stalled(plan.nodes[stalled_culprit(plan, state)].id))
    axis = exhausted_at_open(env.budgets, state.spent)
    if axis is not None:
        state.exhausted = axis
        return _finish(s, run_budget_exhausted(axis))
    _open_superstep(s)
    return True


def _dispatch_tasks(s: StepContext, phase: OpenPhase) -> bool:
    """Dispatch the queued Send tasks unless a budget is spent; whether any went out.
    (Callers skip the call for a run with no Send task at all: most supersteps.)"""
    tasks = send.queued(s)
    if not tasks:
        return False
    state = s.state
    spent_axis = exhausted_at_dispatch(s.env.budgets, state.spent, state.clock_ms, state.wall_open)
    if spent_axis is not None:
        return False
    for path in tasks:
        send.dispatch_task(s, phase, path)
    return True


def _open_superstep(s: StepContext) -> None:
    state = s.state
    state.superstep += 1
    state.spent.supersteps += 1
    state.wall_open = state.clock_ms
    if state.inbox:
        state.context = dict(state.context)
        state.context[INBOX_KEY] = s.reduce(
            INBOX_KEY, state.context.get(INBOX_KEY, MISSING), state.inbox
        )
        state.inbox = []
    # Every field given, its empty lists as literals: a default factory is a call each.
    record = DecisionRecord(state.superstep, state.clock_ms, 0, [], [], [], [], [], [])
    phase = OpenPhase(set(), {}, record, {})
    state.phase = phase
    for node, ns in enumerate(state.node_state):
        if ns == READY:
            _dispatch_node(s, phase, node)
    if state.send_tasks:
        _dispatch_tasks(s, phase)


def _dispatch_node(s: StepContext, phase: OpenPhase, node: int) -> bool:
    """Dispatch one Ready node's first effect; False when a budget refuses it."""
    state, env = s.state, s.env
    axis = exhausted_at_dispatch(env.budgets, state.spent, state.clock_ms, state.wall_open)
    if axis is not None:
        state.exhausted = axis
        return False
    executor = env.executors[node]
    if executor.kind == "abstract":
        llm_loop.start_flow(s, phase, node)
        return True
    if executor.kind == "ask":
        asks.dispatch_ask_node(s, phase, node)
        return True
    if executor.kind == "timer":
        asks.dispatch_timer_node(s, phase, node)
        return True
    if executor.kind == "subgraph":
        asks.dispatch_subgraph_node(s, phase, node)
        return True
    state.attempt[node] += 1
    attempt = state.attempt[node]
    # JournalKey(...) without its Python __new__ (a frame that does only this)
    key = _new_tuple(JournalKey, (state.run_id, "", env.plan.nodes[node].id, attempt, 0, "tool"))
    phase.record.dispatched.append([node, attempt])
    move(state, node, Move.DISPATCHED)
    emit_effect(s, phase, key, executor.name, state.context)
    return True


def _close_superstep(s: StepContext, phase: OpenPhase) -> None:
    state, env = s.state, s.env
    plan = env.plan
    state.phase = IDLE
    record = phase.record
    reduce = s.reduce
    # A fresh top-level dict: inputs handed out with earlier commands stay unchanged
    # (reducers never mutate values, they return new ones).
    context = dict(state.context)
    state.context = context
    if state.failed is None and state.cancel is None and (phase.results or phase.send_results):
        send.extract_spawns(s, phase)
    results = phase.results
    merges: list[tuple[int, JSON]]
    if len(results) > 1:
        merges = sorted(results.items())
        nodes_done = [node for node, _ in merges]  # in index order, before any task result
    else:  # one node's result, most supersteps: no sort, no comprehension (a frame on 3.11)
        merges, nodes_done = [*results.items()], [*results]
    if phase.send_results:
        merges.extend((state.send_tasks[p].node, r) for p, r in send.merge_order(phase))
    for node, result in merges:
        if result is None:
            continue
        output = s.env.executors[node].spec.get("output")
        if output is not None:  # a tool node's declared output key holds its whole result
            result = {output: result}
        try:
            if isinstance(result, dict):
                for k in sorted(result) if len(result) > 1 else result:  # (one key: no sort)
                    if k == SEND_KEY:
                        continue
                    context[k] = reduce(k, context.get(k, MISSING), result[k])
            else:
                name = plan.nodes[node].id
                context[name] = reduce(name, context.get(name, MISSING), result)
        except ReducerError as exc:
            fail_node(state, node, f"ExecutorError: {exc}")
    if state.send_tasks:
        send.forget_done(s)
    if state.failed is None and state.cancel is None:
        edges_record = record.edges
        # Every node that finished in this superstep routes its result, also one an edge
        # of a lower node re-enters meanwhile (it is Waiting again by the time it is read).
        if len(nodes_done) == 1:  # (no comprehension for one node: a frame on 3.11)
            finished = nodes_done if state.node_state[nodes_done[0]] == DONE_OK else []
        else:
            finished = [node for node in nodes_done if state.node_state[node] == DONE_OK]
        for node in finished:
            for e in plan.out_edges[node]:
                edge = plan.edges[e]
                if edge.max_cycles is not None and state.edge_fired[e] >= edge.max_cycles:
                    fired, outcome = False, "CycleExhausted"
                elif edge.condition is None or env.eval_cond(edge, context):
                    fired, outcome = True, "Fired"
                else:
                    fired, outcome = False, "CondFalse"
                if fired:
                    state.edge_fired[e] += 1
                gen = deliver(plan, state, e, fired)
                edges_record.append([e, gen, outcome])
        propagate_death(plan, state, edges_record)
    record.clock_close_ms = state.clock_ms
    if state.wall_open is not None:
        state.spent.wall_ms += state.clock_ms - state.wall_open
        state.wall_open = None
    if state.paused_at is not None:
        state.elapsed_ms += state.clock_ms - state.paused_at
        state.paused_at = None
    _checkpoint(s, record)


def _park(s: StepContext, phase: OpenPhase) -> None:
    """Only asks are outstanding: pause the wall clock, checkpoint and announce once."""
    state = s.state
    if state.wall_open is not None:
        state.spent.wall_ms += state.clock_ms - state.wall_open
        state.wall_open = None
        state.paused_at = state.clock_ms
    fresh = sorted(a for a in state.pending_asks if a not in state.announced_asks)
    if not fresh and not s.inputs:
        return  # polled again while parked: nothing new to checkpoint or announce
    state.announced_asks.update(fresh)
    record = DecisionRecord.from_json(phase.record.to_json())
    record.clock_close_ms = state.clock_ms
    _checkpoint(s, record)
    announced = [state.pending_asks[a] for a in fresh]
    envelope = tuple(asks.announced(entry.ask) for entry in announced if entry.ask is not None)
    if envelope:
        s.commands.append(EmitEnvelope(envelope))


def _finish(s: StepContext, outcome: RunOutcome) -> bool:
    state = s.state
    state.phase = Finished(outcome)
    clock = state.clock_ms
    _checkpoint(s, DecisionRecord(state.superstep, clock, clock))
    s.commands.append(Finish(outcome))
    return False


def _checkpoint(s: StepContext, record: DecisionRecord) -> None:
    state = s.state
    record_json: dict[str, Any]
    if s.env.engine_epoch >= COMPACT_EPOCH:  # no field at a plain default (state.py)
        record_json = record.to_compact_json()
        value = {"scheduler": state.to_compact_json(), "decisions": record_json}
    else:
        record_json = record.to_json()
        value = {"scheduler": state.to_json(), "decisions": record_json}
    if s.env.engine_epoch >= MERKLE_EPOCH:
        # Cut now, while the value is this superstep's: the step goes on changing the
        # state's lists. Unchanged subtrees come from the memo: no whole-state pass.
        cut = cut_checkpoint(value, s.env.checkpoint_memo)
        s.commands.append(WriteCheckpoint(record.superstep, record_json, None, cut=cut))
        return
    data = dumpb(value)
    # Only a checkpoint a store will cut into chunks needs its value (see WriteCheckpoint).
    copied = _containers_copied(value) if len(data) > WHOLE_CHECKPOINT_LIMIT else None
    s.commands.append(WriteCheckpoint(record.superstep, record_json, data, copied))


def _containers_copied(value: Any) -> Any:
    """``value`` with every dict and list copied; leaves and transcript entries (which
    never change) shared."""
    if isinstance(value, dict) and type(value) is not Entry:
        return {k: _containers_copied(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_containers_copied(v) for v in value]
    return value
