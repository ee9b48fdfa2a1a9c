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

from plait.core import agents, asks, decide, governed, retry
from plait.core.abstract import NEXT_TURN, AbstractFlow
from plait.core.canonical import CanonicalJSONError, loads
from plait.core.conversation import take_history
from plait.core.env import CALL_PREFIX as CALL_PREFIX
from plait.core.env import LLM_EXECUTOR as LLM_EXECUTOR
from plait.core.env import BudgetAxis
from plait.core.keys import JournalKey
from plait.core.machine import StepContext, emit_effect, fail_node, fail_task, finish_task
from plait.core.node_states import Move, move
from plait.core.opening import SYSTEM_ENTRIES_EPOCH, continued_entries, opening_entries
from plait.core.outcomes import Completed, EffectOutcome, Failed, retryable
from plait.core.parts import result_parts
from plait.core.pending import TaskState
from plait.core.state import OpenPhase
from plait.core.transcript import Entry, bound_tool_content, fold_range, summary_entry


def flow_key(node: int, task_path: str = "") -> str:
    """A loop's key: its node index, and for a Send task (§3.8) the task's path."""
    return str(node) + task_path


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


def _key(s: StepContext, flow: AbstractFlow, kind: str) -> JournalKey:
    node_id = s.env.plan.nodes[flow.node].id
    return JournalKey(
        s.state.run_id, flow.task_path, node_id, flow.attempt, flow.next_effect_seq, kind
    )


def _fail(s: StepContext, key: str, flow: AbstractFlow, detail: str) -> bool:
    governed.ended(s, flow)
    del s.state.abstract_flows[key]
    if flow.task_path:
        s.state.send_tasks[flow.task_path].state = TaskState.DONE
        fail_task(s, flow.node, flow.task_path, f"{detail} (task {flow.task_path})")
    else:
        fail_node(s.state, flow.node, detail)
    return True


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
        return _serve_tools(s, phase, key, flow)
    if flow.next_effect_seq >= env.max_effects_per_attempt:
        return _fail_bound(s, key, flow)
    axis = _refused_by_budget(s)
    if axis is not None:
        state.exhausted = axis  # the turn stays as a need; the superstep drains
        return False
    if decide.offer_due(env, flow):  # C1: narrow the offer before the first turn (§6.6)
        keep = governed.needed_tools(s, flow)
        question = decide.offer_question(flow, flow.next_effect_seq, _offered(s, flow), keep)
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
            return _fail(
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
        tools, guidance = governed.offer(s, flow, _offered(s, flow))
        value = {"messages": list(flow.messages), "tools": tools}
        if flow.offer is not None:
            value["tools"] = decide.narrowed(flow, tools, governed.needed_tools(s, flow))
            value["offer"] = decide.turn_offer(flow)
        if guidance:
            value["instructions"] = " ".join(guidance)
        schema = env.executors[flow.node].spec.get("response_schema")
        if schema is not None:
            value["response_schema"] = schema
    effect = _key(s, flow, "llm")
    flow.next_effect_seq += 1
    flow.need = None
    emit_effect(s, phase, effect, LLM_EXECUTOR, value)
    return True


def _emit_decision(
    s: StepContext, phase: OpenPhase, flow: AbstractFlow, question: dict[str, Any]
) -> bool:
    effect = _key(s, flow, "decide")
    flow.next_effect_seq += 1
    flow.need = None
    emit_effect(s, phase, effect, decide.DECIDE_EXECUTOR, question)
    return True


def _offered(s: StepContext, flow: AbstractFlow) -> list[str]:
    spec = s.env.executors[flow.node].spec
    tools: list[str] = list(spec.get("tools", ()))
    if "agents" in spec or "handoffs" in spec:
        tools += [n for n in agents.agent_tools(spec) if n not in tools]
    return tools


def _fail_bound(s: StepContext, key: str, flow: AbstractFlow) -> bool:
    bound = s.env.max_effects_per_attempt
    detail = f"the loop reached max_effects_per_attempt ({bound}) without a final answer"
    last = s.turn_failures.get(key)
    if last is not None:
        detail += f"; its last turn failed with {last}"
    return _fail(s, key, flow, f"ExecutorError: {detail}")


def _serve_tools(s: StepContext, phase: OpenPhase, key: str, flow: AbstractFlow) -> bool:
    calls: list[dict[str, Any]] = list(flow.need["Tools"]) if isinstance(flow.need, dict) else []
    if flow.next_effect_seq + len(calls) > s.env.max_effects_per_attempt:
        # A hard bound: a round that would overshoot it never runs (its results could
        # never reach the model, the next turn would fail on the bound anyway).
        return _fail_bound(s, key, flow)
    flow.need = None
    env = s.env
    for call in calls:
        seq = flow.next_effect_seq
        effect = _key(s, flow, "tool")
        flow.next_effect_seq += 1
        name = str(call["name"])
        gate = None
        if not call.get("approved"):
            if name in env.approval_tools:
                gate = "approval"
            elif name in env.deferred_tools:
                gate = "deferred"
        spec = env.executors[flow.node].spec
        target = agents.target_of(spec, name) if "agents" in spec or "handoffs" in spec else None
        if target is not None:
            flow.pending_tools[seq] = (
                {**call, "agent": target[0]} if not target[1] else {**call, "handoff": target[0]}
            )
            node_id = env.plan.nodes[flow.node].id
            value = agents.child_input(call, target[1], node_id, list(flow.messages))
            agents.dispatch_call(s, phase, effect, flow.node, target[0], value)
            continue
        if gate is None:
            flow.pending_tools[seq] = call
            emit_effect(s, phase, effect, CALL_PREFIX + name, call["arguments"])
            continue
        # Parks for a human (§8): an approval before it runs, or a deferred result.
        flow.pending_tools[seq] = {**call, "gate": gate}
        prompt = (
            f"Approve the call to {name}?"
            if gate == "approval"
            else f"Provide the result of {name}."
        )
        asks.register_ask(
            s,
            phase,
            effect,
            flow.node,
            tool_name=name,
            prompt=prompt,
            value=call["arguments"],
            approval=gate == "approval",
            tool_call_id=call.get("id"),
        )
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
            _on_summary(s, fkey, flow, outcome)
        else:
            _on_turn(s, fkey, flow, key.effect_seq, outcome)
        return True
    if key.kind == "decide" and flow.deciding is not None:
        if flow.deciding["seq"] != key.effect_seq:
            return False
        decide.on_decided(s.env, flow, key.effect_seq, outcome)
        return True
    if key.kind == "tool" and key.effect_seq in flow.pending_tools:
        _on_tool(s, flow, key.effect_seq, outcome, key)
        return True
    first = flow.retry_of.get(key.effect_seq) if key.kind == "tool" else None
    if first is not None and first in flow.pending_tools:
        _on_tool(s, flow, first, outcome, key)  # a retried call answers in its first place
        return True
    return False


def _on_summary(s: StepContext, fkey: str, flow: AbstractFlow, outcome: EffectOutcome) -> None:
    folding = flow.folding
    assert folding is not None
    flow.folding = None
    if not isinstance(outcome, Completed):
        if retryable(outcome.cause, "llm"):
            flow.need = NEXT_TURN  # the fold is tried again on the next turn
            return
        _fail(s, fkey, flow, f"{outcome.cause}: summarizer failed: {outcome.detail}")
        return
    start, end = folding["range"]
    text = str(outcome.result.get("text") or "") if isinstance(outcome.result, dict) else ""
    flow.folds += 1
    s.state.folds += 1
    flow.messages[start:end] = [summary_entry(text, end - start, flow.folds)]
    flow.last_prompt_tokens = 0
    flow.fold_forced = False
    flow.need = NEXT_TURN


def _on_turn(
    s: StepContext, fkey: str, flow: AbstractFlow, turn: int, outcome: EffectOutcome
) -> None:
    if not isinstance(outcome, Completed):
        if outcome.cause == "ContextTooLong":
            flow.fold_forced = True
            flow.need = NEXT_TURN
        elif outcome.cause == "SchemaValidationFailed":
            _schema_strike(s, fkey, flow, outcome.detail)  # the provider refused the shape
        elif _retry_turn(s, fkey, flow, turn, outcome):
            s.turn_failures[fkey] = f"{outcome.cause}: {outcome.detail}"
        else:
            _fail(s, fkey, flow, f"{outcome.cause}: {outcome.detail}")
        return
    if flow.turn_tries:
        flow.turn_tries = 0  # a turn came back: the policy counts failures in a row
    answer = outcome.result if isinstance(outcome.result, dict) else {}
    usage = answer.get("usage") or {}
    flow.last_prompt_tokens = int(usage.get("input_tokens", 0))
    ceiling = s.env.llm_context_tokens
    if flow.decide_fold_tried and ceiling is not None and flow.last_prompt_tokens < ceiling:
        flow.decide_fold_tried = False  # measured under its ceiling: C2 may be asked again
    calls = list(answer.get("tool_calls") or [])
    text = answer.get("text")
    entry = Entry(role="assistant", text=text, tool_calls=calls)
    if "spec" in answer:  # answered under llm.fallback: the checkpoint says which model
        entry = Entry(entry, spec=answer["spec"])
    flow.messages.append(entry)
    if calls:
        _on_tool_calls(s, fkey, flow, turn, calls)
        return
    if s.state.inbox:
        # Idle messages (§6.7) go to one loop: which, is decided once the batch is in.
        s.idle_answers.append((fkey, turn))
        return
    _on_final_answer(s, fkey, flow, turn, text)


def _retry_turn(s: StepContext, fkey: str, flow: AbstractFlow, turn: int, outcome: Failed) -> bool:
    """Whether a failed turn is sent again (the same transcript); False fails the node.

    Without a ``retry:`` policy a Timeout or ExecutorError is re-sent at once, bounded
    only by ``max_effects_per_attempt``; under one, after its wait and at most
    ``max_attempts`` times in a row (§3.5b)."""
    policy = s.env.retry_policies.get(flow.node)
    if policy is None:
        if not retryable(outcome.cause, "llm"):
            return False
        flow.need = NEXT_TURN
        return True
    flow.turn_tries += 1
    if not policy.allows(flow.turn_tries, outcome, "llm"):
        return False
    failed = _key(s, flow, "llm")._replace(effect_seq=turn)
    delay = retry.delay_ms(policy, flow.turn_tries, failed)
    if delay and flow.next_effect_seq < s.env.max_effects_per_attempt:
        phase = s.state.phase
        assert isinstance(phase, OpenPhase)
        timer = _key(s, flow, "tool")
        flow.next_effect_seq += 1
        retry.wait(
            s, phase, timer, flow.node, delay, failed=failed, failed_attempts=flow.turn_tries
        )
    else:
        flow.need = NEXT_TURN  # no wait, or none left under the bound: the bound decides
    return True


def _retry_call(
    s: StepContext, flow: AbstractFlow, seq: int, failed: JournalKey, outcome: Failed
) -> bool:
    """Under a ``retry:`` policy, whether a failed tool call is tried again (after its
    wait) before the model sees its failure; the call keeps its place in the round."""
    policy = s.env.retry_policies.get(flow.node)
    if policy is None or s.state.cancel is not None:
        return False
    call = flow.pending_tools[seq]
    tries = int(call.get("tries", 1))
    delay = retry.delay_ms(policy, tries, failed)
    room = s.env.max_effects_per_attempt - flow.next_effect_seq
    if not policy.allows(tries, outcome, "tool") or room < (2 if delay else 1):
        return False  # the effect bound stays the backstop: the model sees the failure
    flow.pending_tools[seq] = {**call, "tries": tries + 1}
    phase = s.state.phase
    assert isinstance(phase, OpenPhase)
    if delay:
        timer = _key(s, flow, "tool")
        flow.retry_of[timer.effect_seq] = seq
        flow.next_effect_seq += 1
        retry.wait(s, phase, timer, flow.node, delay, failed=failed, failed_attempts=tries)
    else:
        _reissue(s, phase, flow, seq)
    return True


def _reissue(s: StepContext, phase: OpenPhase, flow: AbstractFlow, seq: int) -> None:
    call = flow.pending_tools[seq]
    effect = _key(s, flow, "tool")
    flow.retry_of[effect.effect_seq] = seq
    flow.next_effect_seq += 1
    emit_effect(s, phase, effect, CALL_PREFIX + str(call["name"]), call["arguments"])


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
        _reissue(s, phase, flow, seq)
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
            _on_final_answer(s, fkey, flow, turn, flow.messages[-1].get("text"))
    s.idle_answers.clear()


def _on_final_answer(s: StepContext, fkey: str, flow: AbstractFlow, turn: int, text: Any) -> None:
    env = s.env
    spec = env.executors[flow.node].spec
    node_id = env.plan.nodes[flow.node].id
    missing = governed.unmet_requirements(s, flow, turn)
    if missing:
        assert flow.governance is not None
        strikes = int(flow.governance.get("require_strikes", 0)) + 1
        flow.governance["require_strikes"] = strikes
        if strikes > 1:
            _fail(
                s,
                fkey,
                flow,
                f"ExecutorError: final answer given before required steps were done:"
                f" {', '.join(missing)}",
            )
            return
        flow.messages.append(
            Entry(
                role="user",
                content="You cannot finish yet: these steps must be done first: "
                f"{', '.join(missing)}. Continue the task.",
            )
        )
        flow.need = NEXT_TURN
        return
    result: Any
    parsed = _parse_json(text)
    if spec.get("response_schema") is not None:
        problem = env.validate_response(node_id, parsed if parsed is not None else text)
        if problem is not None:
            _schema_strike(s, fkey, flow, problem)
            return
    result = parsed if isinstance(parsed, dict) else {node_id: text}
    into = spec.get("tool_results_into")
    if into:
        result = {**result, into: list(flow.tool_log)}
    _finish(s, fkey, flow, result)


def _parse_json(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return loads(text)
    except CanonicalJSONError:
        return None


def _finish(s: StepContext, fkey: str, flow: AbstractFlow, result: Any) -> None:
    del s.state.abstract_flows[fkey]
    phase = s.state.phase
    assert isinstance(phase, OpenPhase)
    if flow.task_path:
        finish_task(s, phase, flow.task_path, result)
        return
    move(s.state, flow.node, Move.COMPLETED)
    phase.results[flow.node] = result


def _schema_strike(s: StepContext, fkey: str, flow: AbstractFlow, problem: str) -> None:
    """An answer that does not match the response schema (§6.2): ONE corrective user
    message, then the node fails with SchemaValidationFailed."""
    flow.response_strikes += 1
    if flow.response_strikes > 1:
        _fail(s, fkey, flow, f"SchemaValidationFailed: {problem}")
        return
    flow.messages.append(
        Entry(
            role="user",
            content="Your answer does not match the required response schema: "
            f"{problem}. Answer again with JSON that matches it.",
        )
    )
    flow.need = NEXT_TURN


def _on_tool_calls(
    s: StepContext, fkey: str, flow: AbstractFlow, turn: int, calls: list[dict[str, Any]]
) -> None:
    env = s.env
    calls, widened = decide.take_more_tools(flow, calls)
    flow.messages.extend(widened)
    if not calls:
        flow.need = NEXT_TURN
        return
    offered = _offered(s, flow)
    unknown = sorted({str(c.get("name")) for c in calls if c.get("name") not in offered})
    if unknown:
        flow.unknown_strikes += 1
        if flow.unknown_strikes > 1:
            _fail(
                s,
                fkey,
                flow,
                f"ExecutorError: the model called unknown tool(s) {', '.join(unknown)}"
                " again after being told which tools exist",
            )
            return
        listing = ", ".join(offered) if offered else "(none)"
        for call in calls:
            name = call.get("name")
            why = (
                f"unknown tool '{name}'. Available tools: {listing}"
                if name not in offered
                else "not run: the same answer called an unknown tool"
            )
            flow.messages.append(_tool_entry(call, why, True))
        flow.need = NEXT_TURN
        return
    problems = []
    spec = env.executors[flow.node].spec
    several = "agents" in spec or "handoffs" in spec
    for call in calls:
        name = str(call["name"])
        if several and agents.target_of(spec, name) is not None:
            problem = agents.problem(spec, s.state.run_id, name, call.get("arguments"))
            if problem is None and name.startswith(agents.HANDOFF_PREFIX) and len(calls) > 1:
                problem = "a transfer must be the only call of its answer"
        else:
            problem = env.validate_args(name, call.get("arguments"))
        if problem is not None:
            problems.append((call, problem))
    if problems:
        bad = {id(c) for c, _ in problems}
        reasons = {id(c): p for c, p in problems}
        for call in calls:
            why = (
                f"invalid arguments for '{call['name']}': {reasons[id(call)]}"
                if id(call) in bad
                else "not run: another call in the same answer had invalid arguments"
            )
            flow.messages.append(_tool_entry(call, why, True))
        flow.need = NEXT_TURN
        return
    admitted, refused = governed.admit_calls(s, flow, turn, calls, offered)
    flow.messages.extend(Entry(r) for r in refused)
    flow.need = {"Tools": admitted} if admitted else NEXT_TURN


def _tool_entry(call: dict[str, Any], content: Any, is_error: bool) -> Entry:
    # Observe mode: a call enforce mode would have refused carries why (§9).
    noted = {"violation": call["violation"]} if "violation" in call else {}
    return Entry(
        role="tool", tool_call_id=call.get("id"), content=content, is_error=is_error, **noted
    )


def _on_approval(s: StepContext, flow: AbstractFlow, seq: int, outcome: EffectOutcome) -> bool:
    """Settle an approval ask; True when approved (the call now runs as its own effect)."""
    call = flow.pending_tools[seq]
    answer = outcome.result if isinstance(outcome, Completed) else None
    # A governed loop keeps the answer for the flow state until the round settles.
    kept = {"answer": answer} if isinstance(answer, dict) and governed.keeps_answer(flow) else {}
    if isinstance(answer, dict) and answer.get("approved") is True:
        del flow.pending_tools[seq]
        approved = {k: v for k, v in call.items() if k != "gate"}
        approved["approved"] = True
        approved.update(kept)
        if isinstance(flow.need, dict):
            flow.need["Tools"].append(approved)
        else:
            flow.need = {"Tools": [approved]}
        return True
    if isinstance(answer, dict):
        reason = answer.get("reason")
        content = f"denied by {answer.get('by')}" + (f": {reason}" if reason else "")
    else:
        assert not isinstance(outcome, Completed)
        content = f"not approved: {outcome.cause}: {outcome.detail}"
    flow.round_results[seq] = {"content": content, "is_error": True, **kept}
    return False


def _on_tool(
    s: StepContext, flow: AbstractFlow, seq: int, outcome: EffectOutcome, key: JournalKey
) -> None:
    call = flow.pending_tools[seq]
    if "handoff" in call and isinstance(outcome, Completed):
        # The receiving agent had the last word: its answer is this node's result.
        fkey = flow_key(flow.node, flow.task_path)
        flow.pending_tools = {}
        _finish(s, fkey, flow, outcome.result)
        return
    if call.get("gate") == "approval":
        if _on_approval(s, flow, seq, outcome):
            return
    elif isinstance(outcome, Completed):
        flow.round_results[seq] = {"content": outcome.result, "is_error": False}
    elif (
        call.get("gate") is None and "agent" not in call and _retry_call(s, flow, seq, key, outcome)
    ):
        return
    else:
        flow.round_results[seq] = {
            "content": f"{outcome.cause}: {outcome.detail}",
            "is_error": True,
        }
    if len(flow.round_results) < len(flow.pending_tools) or isinstance(flow.need, dict):
        return  # the round is still settling (or an approved call has yet to run)
    limit = s.env.llm_tool_result_chars
    log_results = bool(s.env.executors[flow.node].spec.get("tool_results_into"))
    for done_seq in sorted(flow.pending_tools):
        call = flow.pending_tools[done_seq]
        settled = flow.round_results[done_seq]
        governed.settled(s, flow, call, settled)
        content = settled["content"]
        if s.env.engine_epoch < SYSTEM_ENTRIES_EPOCH or not result_parts(content):
            content = bound_tool_content(content, limit)  # images are never cut as text
        flow.messages.append(_tool_entry(call, content, settled["is_error"]))
        if log_results:
            flow.tool_log.append(
                {
                    "name": call["name"],
                    "tool_call_id": call.get("id"),
                    "input": call.get("arguments"),
                    "result": settled["content"],
                    "is_error": settled["is_error"],
                    "effect_seq": done_seq,
                }
            )
    flow.pending_tools = {}
    flow.round_results = {}
    if flow.retry_of:
        flow.retry_of = {}
    flow.need = NEXT_TURN
