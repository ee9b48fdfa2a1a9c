"""A round of tool calls in an abstract node's LLM loop (§6): the calls an answer makes
checked (unknown tools, invalid arguments, governance), served as one effect each (or an
ask, for an approval or a deferred result), retried under a ``retry:`` policy, and their
results entered in ``effect_seq`` order once the whole round has settled, whatever the
completion order, so the transcript is the same on every replay.
"""

from __future__ import annotations

from typing import Any

from plait.core import agents, asks, decide, governed, retry
from plait.core.abstract import NEXT_TURN, AbstractFlow
from plait.core.env import CALL_PREFIX
from plait.core.keys import JournalKey
from plait.core.llm_flow import effect_key, fail, fail_bound, finish, flow_key, offered_tools
from plait.core.machine import StepContext, emit_effect
from plait.core.opening import SYSTEM_ENTRIES_EPOCH
from plait.core.outcomes import Completed, EffectOutcome, Failed
from plait.core.parts import result_parts
from plait.core.state import OpenPhase
from plait.core.transcript import Entry, bound_tool_content


def serve_tools(s: StepContext, phase: OpenPhase, key: str, flow: AbstractFlow) -> bool:
    """Serve a ``Tools`` need: one effect per call, in order (a call to an agent is a child
    run, one gated by approval or deferral an ask); a round past the effect bound fails."""
    calls: list[dict[str, Any]] = list(flow.need["Tools"]) if isinstance(flow.need, dict) else []
    if flow.next_effect_seq + len(calls) > s.env.max_effects_per_attempt:
        # A hard bound: a round that would overshoot it never runs (its results could
        # never reach the model, the next turn would fail on the bound anyway).
        return fail_bound(s, key, flow)
    flow.need = None
    env = s.env
    for call in calls:
        seq = flow.next_effect_seq
        effect = effect_key(s, flow, "tool")
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


def on_tool_calls(
    s: StepContext, fkey: str, flow: AbstractFlow, turn: int, calls: list[dict[str, Any]]
) -> None:
    """An answer's tool calls: a ``Tools`` need of those admitted, or, for an unknown tool
    or invalid arguments, no call run and an error entry for each (a corrective turn)."""
    env = s.env
    calls, widened = decide.take_more_tools(flow, calls)
    flow.messages.extend(widened)
    if not calls:
        flow.need = NEXT_TURN
        return
    offered = offered_tools(s, flow)
    unknown = sorted({str(c.get("name")) for c in calls if c.get("name") not in offered})
    if unknown:
        flow.unknown_strikes += 1
        if flow.unknown_strikes > 1:
            fail(
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
            flow.messages.append(tool_entry(call, why, True))
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
            flow.messages.append(tool_entry(call, why, True))
        flow.need = NEXT_TURN
        return
    admitted, refused = governed.admit_calls(s, flow, turn, calls, offered)
    flow.messages.extend(Entry(r) for r in refused)
    flow.need = {"Tools": admitted} if admitted else NEXT_TURN


def tool_entry(call: dict[str, Any], content: Any, is_error: bool) -> Entry:
    """The transcript entry answering ``call``."""
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


def on_tool(
    s: StepContext, flow: AbstractFlow, seq: int, outcome: EffectOutcome, key: JournalKey
) -> None:
    """Call ``seq`` of the round resolved; once the whole round has, its results enter the
    transcript in ``effect_seq`` order and the loop turns again."""
    call = flow.pending_tools[seq]
    if "handoff" in call and isinstance(outcome, Completed):
        # The receiving agent had the last word: its answer is this node's result.
        fkey = flow_key(flow.node, flow.task_path)
        flow.pending_tools = {}
        finish(s, fkey, flow, outcome.result)
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
        flow.messages.append(tool_entry(call, content, settled["is_error"]))
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
        timer = effect_key(s, flow, "tool")
        flow.retry_of[timer.effect_seq] = seq
        flow.next_effect_seq += 1
        retry.wait(s, phase, timer, flow.node, delay, failed=failed, failed_attempts=tries)
    else:
        reissue(s, phase, flow, seq)
    return True


def reissue(s: StepContext, phase: OpenPhase, flow: AbstractFlow, seq: int) -> None:
    """Emit call ``seq`` again as a new effect that answers in its first place."""
    call = flow.pending_tools[seq]
    effect = effect_key(s, flow, "tool")
    flow.retry_of[effect.effect_seq] = seq
    flow.next_effect_seq += 1
    emit_effect(s, phase, effect, CALL_PREFIX + str(call["name"]), call["arguments"])
