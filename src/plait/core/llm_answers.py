"""A turn's answer in an abstract node's LLM loop (§6): a summary that folds the
transcript, a failed turn retried or failing the node, tool calls (``llm_tools.py``), or
the final answer, checked against the node's required steps and response schema.
"""

from __future__ import annotations

from typing import Any

from plait.core import governed, retry
from plait.core.abstract import NEXT_TURN, AbstractFlow
from plait.core.canonical import CanonicalJSONError, loads
from plait.core.llm_flow import effect_key, fail, finish
from plait.core.llm_tools import on_tool_calls
from plait.core.machine import StepContext
from plait.core.outcomes import Completed, EffectOutcome, Failed, retryable
from plait.core.state import OpenPhase
from plait.core.transcript import Entry, summary_entry


def on_summary(s: StepContext, fkey: str, flow: AbstractFlow, outcome: EffectOutcome) -> None:
    """A fold's summary came back: it replaces the range it folds, and the loop turns."""
    folding = flow.folding
    assert folding is not None
    flow.folding = None
    if not isinstance(outcome, Completed):
        if retryable(outcome.cause, "llm"):
            flow.need = NEXT_TURN  # the fold is tried again on the next turn
            return
        fail(s, fkey, flow, f"{outcome.cause}: summarizer failed: {outcome.detail}")
        return
    start, end = folding["range"]
    text = str(outcome.result.get("text") or "") if isinstance(outcome.result, dict) else ""
    flow.folds += 1
    s.state.folds += 1
    flow.messages[start:end] = [summary_entry(text, end - start, flow.folds)]
    flow.last_prompt_tokens = 0
    flow.fold_forced = False
    flow.need = NEXT_TURN


def on_turn(
    s: StepContext, fkey: str, flow: AbstractFlow, turn: int, outcome: EffectOutcome
) -> None:
    """A turn came back: a failure is retried, folded or fails the node; an answer with
    tool calls starts a round; one without is the final answer (or waits for steering)."""
    if not isinstance(outcome, Completed):
        if outcome.cause == "ContextTooLong":
            flow.fold_forced = True
            flow.need = NEXT_TURN
        elif outcome.cause == "SchemaValidationFailed":
            _schema_strike(s, fkey, flow, outcome.detail)  # the provider refused the shape
        elif _retry_turn(s, fkey, flow, turn, outcome):
            s.turn_failures[fkey] = f"{outcome.cause}: {outcome.detail}"
        else:
            fail(s, fkey, flow, f"{outcome.cause}: {outcome.detail}")
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
        on_tool_calls(s, fkey, flow, turn, calls)
        return
    if s.state.inbox:
        # Idle messages (§6.7) go to one loop: which, is decided once the batch is in.
        s.idle_answers.append((fkey, turn))
        return
    on_final_answer(s, fkey, flow, turn, text)


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
    failed = effect_key(s, flow, "llm")._replace(effect_seq=turn)
    delay = retry.delay_ms(policy, flow.turn_tries, failed)
    if delay and flow.next_effect_seq < s.env.max_effects_per_attempt:
        phase = s.state.phase
        assert isinstance(phase, OpenPhase)
        timer = effect_key(s, flow, "tool")
        flow.next_effect_seq += 1
        retry.wait(
            s, phase, timer, flow.node, delay, failed=failed, failed_attempts=flow.turn_tries
        )
    else:
        flow.need = NEXT_TURN  # no wait, or none left under the bound: the bound decides
    return True


def on_final_answer(s: StepContext, fkey: str, flow: AbstractFlow, turn: int, text: Any) -> None:
    """A final answer: refused once while required steps are not done, checked against the
    response schema, then the node's result."""
    env = s.env
    spec = env.executors[flow.node].spec
    node_id = env.plan.nodes[flow.node].id
    missing = governed.unmet_requirements(s, flow, turn)
    if missing:
        assert flow.governance is not None
        strikes = int(flow.governance.get("require_strikes", 0)) + 1
        flow.governance["require_strikes"] = strikes
        if strikes > 1:
            fail(
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
    finish(s, fkey, flow, result)


def _parse_json(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return loads(text)
    except CanonicalJSONError:
        return None


def _schema_strike(s: StepContext, fkey: str, flow: AbstractFlow, problem: str) -> None:
    """An answer that does not match the response schema (§6.2): ONE corrective user
    message, then the node fails with SchemaValidationFailed."""
    flow.response_strikes += 1
    if flow.response_strikes > 1:
        fail(s, fkey, flow, f"SchemaValidationFailed: {problem}")
        return
    flow.messages.append(
        Entry(
            role="user",
            content="Your answer does not match the required response schema: "
            f"{problem}. Answer again with JSON that matches it.",
        )
    )
    flow.need = NEXT_TURN
