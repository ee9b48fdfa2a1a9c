"""The LLM loop of an abstract node (docs/architecture.md §6), run inside one superstep.

Rules of this file:
- A loop advances only through its ``need`` (what it wants to do next) and
  through resolutions of its own effects; the step function serves needs in
  flow-key order and routes resolutions here.
- Turns, tool calls and summaries share ``effect_seq``; results of one tool
  round enter the transcript in ``effect_seq`` order, whatever the completion
  order, so the transcript is the same on every replay.
- Unknown tools, invalid arguments and schema-failing answers make no effect:
  they become transcript entries and a corrective turn.
- A governed flow's state changes only when a round has settled, call by call in
  ``effect_seq`` order (``governed.settled``), never in completion order.

Theory of operation. Dispatch creates the flow with the instruction and the
context as its first entries (``opening.py``, per engine epoch) and a ``NextTurn``
need. Serving a turn first folds the transcript if it has outgrown
``llm_context_tokens`` (or the provider said so), then checks the effect bound and the
token/usd reservation, then emits an ``llm`` effect. An answer with tool calls becomes
a ``Tools`` need, served as one ``tool`` effect per call; when the round settles the
results are appended and the loop turns again. An answer without tool calls is the node's result.
"""

from __future__ import annotations

from typing import Any

from plait.core import agents, decide, governed
from plait.core.abstract import NEXT_TURN, AbstractFlow
from plait.core.conversation import take_history
from plait.core.env import CALL_PREFIX as CALL_PREFIX
from plait.core.env import LLM_EXECUTOR as LLM_EXECUTOR
from plait.core.env import BudgetAxis
from plait.core.keys import JournalKey
from plait.core.llm_answers import on_final_answer, on_summary, on_turn
from plait.core.llm_flow import effect_key, fail, fail_bound, flow_key, offered_tools
from plait.core.llm_tools import on_tool, reissue, serve_tools
from plait.core.machine import StepContext, emit_effect
from plait.core.node_states import Move, move
from plait.core.opening import continued_entries, opening_entries
from plait.core.outcomes import EffectOutcome
from plait.core.state import OpenPhase
from plait.core.transcript import Entry, fold_range


def start_flow(s: StepContext, phase: OpenPhase, node: int) -> None:
    """Dispatch an abstract node: a fresh loop whose first entry is the instruction."""
    state = s.state
    state.attempt[node] += 1
    _open_flow(s, node, state.attempt[node], "", state.context)
    move(state, node, Move.DISPATCHED)
    phase.record.dispatched.append([node, state.attempt[node]])


def start_task_flow(s: StepContext, node: int, path: str, attempt: int, context: Any) -> None:
    """A Send task of an abstract node (§3.8): a loop of its own over the task's input."""
    _open_flow(s, node, attempt, path, context if isinstance(context, dict) else {})


def _open_flow(s: StepContext, node: int, attempt: int, path: str, context: dict[str, Any]) -> None:
    spec = s.env.executors[node].spec
    instruction = spec.get("instruction", "")
    handed = context.get(agents.HANDOFF_KEY)
    history = None
    if isinstance(handed, dict):  # a handoff's receiving agent goes on with the transcript
        node_id = s.env.plan.nodes[node].id
        handed_over = agents.handed_messages(handed, instruction, node_id, s.env.engine_epoch)
        messages: list[dict[str, Any]] = [Entry(m) for m in handed_over]
    else:
        history = None if path else take_history(context)
        if history is not None:  # a conversation's next run (core/conversation.py)
            earlier, _, context = history
            s.state.context = context
            opening = continued_entries(earlier, instruction, context, s.env.engine_epoch)
        else:
            opening = opening_entries(instruction, context, s.env.engine_epoch)
        messages = [Entry(m) for m in opening]
    flow = AbstractFlow(node=node, attempt=attempt, task_path=path, messages=messages)
    if history is not None and history[1] and fold_range(messages) is not None:
        flow.last_prompt_tokens = history[1]  # a history too long folds before its first turn
    governed.begin(s, flow, context)
    s.state.abstract_flows[flow_key(node, path)] = flow


def serve_needs(s: StepContext, phase: OpenPhase) -> bool:
    """Serve every flow with a need, in key order; True if anything was emitted or changed."""
    changed = False
    if not s.state.abstract_flows:
        return changed
    for key in sorted(s.state.abstract_flows):
        flow = s.state.abstract_flows.get(key)
        if flow is None or flow.need is None:
            continue
        changed |= _serve(s, phase, key, flow)
    return changed


def has_needs(s: StepContext) -> bool:
    flows = s.state.abstract_flows
    return bool(flows) and any(f.need is not None for f in flows.values())


def _refused_by_budget(s: StepContext) -> BudgetAxis | None:
    """The token/usd reservation of one turn (§7): the axis that cannot fit, if any."""
    env, spent = s.env, s.state.spent
    budgets = env.budgets
    if budgets.max_tokens is not None:
        used = spent.input_tokens + spent.output_tokens
        if used + env.llm_reserve_tokens > budgets.max_tokens:
            return BudgetAxis.TOKENS
    if budgets.max_usd_micros is not None:
        reserve = env.llm_reserve_usd_micros or 0
        if spent.usd_micros + reserve > budgets.max_usd_micros:
            return BudgetAxis.USD
    return None


def _serve(s: StepContext, phase: OpenPhase, key: str, flow: AbstractFlow) -> bool:
    env, state = s.env, s.state
    if flow.need != NEXT_TURN:
        return serve_tools(s, phase, key, flow)
    if flow.next_effect_seq >= env.max_effects_per_attempt:
        return fail_bound(s, key, flow)
    axis = _refused_by_budget(s)
    if axis is not None:
        state.exhausted = axis  # the turn stays as a need; the superstep drains
        return False
    if decide.offer_due(env, flow):  # C1: narrow the offer before the first turn (§6.6)
        keep = governed.needed_tools(s, flow)
        question = decide.offer_question(flow, flow.next_effect_seq, offered_tools(s, flow), keep)
        return _emit_decision(s, phase, flow, question)
    ceiling = env.llm_context_tokens
    if flow.fold_forced or (ceiling is not None and flow.last_prompt_tokens >= ceiling):
        span = fold_range(flow.messages)
        if span is None:
            node_id = env.plan.nodes[flow.node].id
            if flow.fold_forced:
                why = "the model refused its transcript as too long"
            else:
                why = (
                    f"its last turn had {flow.last_prompt_tokens} prompt tokens (ceiling {ceiling})"
                )
            return fail(
                s,
                key,
                flow,
                f"PLAIT-E024 context exceeded: node '{node_id}': {why}, and nothing can be folded",
            )
        omit = (
            decide.fold_question(flow, flow.next_effect_seq, span)
            if decide.fold_due(env, flow)
            else None
        )
        if omit is not None:  # C2: omit what is no longer needed, before summarizing
            return _emit_decision(s, phase, flow, omit)
        flow.folding = {"seq": flow.next_effect_seq, "range": [span[0], span[1]]}
        value: dict[str, Any] = {
            "fold": [span[0], span[1]],
            "messages": flow.messages[span[0] : span[1]],
        }
    else:
        tools, guidance = governed.offer(s, flow, offered_tools(s, flow))
        value = {"messages": list(flow.messages), "tools": tools}
        if flow.offer is not None:
            value["tools"] = decide.narrowed(flow, tools, governed.needed_tools(s, flow))
            value["offer"] = decide.turn_offer(flow)
        if guidance:
            value["instructions"] = " ".join(guidance)
        schema = env.executors[flow.node].spec.get("response_schema")
        if schema is not None:
            value["response_schema"] = schema
    effect = effect_key(s, flow, "llm")
    flow.next_effect_seq += 1
    flow.need = None
    emit_effect(s, phase, effect, LLM_EXECUTOR, value)
    return True


def _emit_decision(
    s: StepContext, phase: OpenPhase, flow: AbstractFlow, question: dict[str, Any]
) -> bool:
    effect = effect_key(s, flow, "decide")
    flow.next_effect_seq += 1
    flow.need = None
    emit_effect(s, phase, effect, decide.DECIDE_EXECUTOR, question)
    return True


def on_resolved(s: StepContext, key: JournalKey, outcome: EffectOutcome) -> bool:
    """Route a resolution to its flow; False if no flow owns the key."""
    node = s.env.plan.index.get(key.node)
    if node is None:
        return False
    fkey = flow_key(node, key.task_path)
    flow = s.state.abstract_flows.get(fkey)
    if flow is None or flow.attempt != key.attempt or key.task_path != flow.task_path:
        return False
    if key.kind == "llm":
        if flow.folding is not None and flow.folding["seq"] == key.effect_seq:
            on_summary(s, fkey, flow, outcome)
        else:
            on_turn(s, fkey, flow, key.effect_seq, outcome)
        return True
    if key.kind == "decide" and flow.deciding is not None:
        if flow.deciding["seq"] != key.effect_seq:
            return False
        decide.on_decided(s.env, flow, key.effect_seq, outcome)
        return True
    if key.kind == "tool" and key.effect_seq in flow.pending_tools:
        on_tool(s, flow, key.effect_seq, outcome, key)
        return True
    first = flow.retry_of.get(key.effect_seq) if key.kind == "tool" else None
    if first is not None and first in flow.pending_tools:
        on_tool(s, flow, first, outcome, key)  # a retried call answers in its first place
        return True
    return False


def backoff_elapsed(s: StepContext, phase: OpenPhase, timer: JournalKey) -> bool:
    """A retry wait of a loop elapsed: turn again, or try its tool call again; False if
    no loop owns ``timer``."""
    node = s.env.plan.index.get(timer.node)
    flow = None if node is None else s.state.abstract_flows.get(flow_key(node, timer.task_path))
    if flow is None or flow.attempt != timer.attempt or flow.task_path != timer.task_path:
        return False
    seq = flow.retry_of.pop(timer.effect_seq, None)
    if seq is None:
        flow.need = NEXT_TURN
    elif seq in flow.pending_tools:
        reissue(s, phase, flow, seq)
    return True


def settle_idle_answers(s: StepContext) -> None:
    """Final answers that found steering messages waiting, in node order: the first loop
    takes every message as user entries and goes on (§6.7); the others finish."""
    if not s.idle_answers:
        return

    def order(answer: tuple[str, int]) -> tuple[int, str]:
        flow = s.state.abstract_flows[answer[0]]
        return (flow.node, flow.task_path)

    for fkey, turn in sorted(s.idle_answers, key=order):
        flow = s.state.abstract_flows[fkey]
        if s.state.inbox:
            for message in s.state.inbox:
                flow.messages.append(Entry(role="user", content=message))
            s.state.inbox = []
            flow.need = NEXT_TURN
        else:
            on_final_answer(s, fkey, flow, turn, flow.messages[-1].get("text"))
    s.idle_answers.clear()
