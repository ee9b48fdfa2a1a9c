"""Reading an agent run back as an ``AgentRunState``, from a ``RunView`` of its journal.

Every field is derived from what the store holds — the run row, the journal's
intents, results and records, and the latest checkpoint — never from memory of
a live drive, so the same run reads the same from any process, during the run,
after a crash or years later. This module only reads; it never drives or writes.

Reading rules (what "pending" means here):
- the transcript (``message_history``) is the input of the last model turn plus
  that turn's answer, exactly as journaled;
- tool calls are *pending* when their effect has an intent but no result, and
  their returns are *pending* when they arrived after the last model turn began
  and no later turn has been sent with them;
- approvals and deferred tool returns are *pending* while their ask is pending in
  the latest checkpoint and no answer to it is journaled (an answer journaled by
  ``plait respond`` but not yet driven on no longer waits for anyone);
- idle messages are steering messages not yet taken into the transcript: those
  the core holds in its inbox (as of the latest checkpoint), then those journaled
  but not yet fed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from plait.agent.run_state import (
    AGENT_RECORD,
    INBOX,
    AgentRunState,
    RunStatus,
    RunUsage,
    ToolCallPart,
    ToolReturnPart,
)
from plait.core.llm_loop import CALL_PREFIX
from plait.core.state import SchedulerState
from plait.driver.feeds import FEED
from plait.driver.run_result import contract_outcome
from plait.driver.run_view import RunView
from plait.models.base import ModelResponse
from plait.store.base import Store
from plait.store.records import IntentRecord, Journal

_STATUS = {
    "queued": RunStatus.STARTING,
    "running": RunStatus.RUNNING,
    "parked": RunStatus.WAITING,
    "completed": RunStatus.COMPLETED,
    "failed": RunStatus.FAILED,
    "stalled": RunStatus.FAILED,
    "budget_exhausted": RunStatus.FAILED,
    "canceled": RunStatus.CANCELLED,
}


def read_run_state(
    store: Store | RunView,
    run_id: str,
    output_type: type[BaseModel] | None = None,
) -> AgentRunState[Any]:
    """The agent run ``run_id`` as its journal stands now (raises PLAIT-E017 if unknown);
    from ``store``, or from a ``RunView`` of the run a caller reads more of."""
    view = store if isinstance(store, RunView) else RunView(store, run_id)
    info = view.info
    journal = view.journal
    state = view.state
    turns = [i for i in journal.intents if i.key.kind == "llm" and "fold" not in _dict(i.input)]
    last_turn = turns[-1] if turns else None
    answer = _answer(journal, last_turn)
    latest = ModelResponse.from_json(answer) if answer is not None else None

    history: list[Mapping[str, Any]] = []
    if last_turn is not None:
        history.extend(_dict(last_turn.input).get("messages", ()))
        if answer is not None:
            asked = list(answer.get("tool_calls") or [])
            history.append({"role": "assistant", "text": answer.get("text"), "tool_calls": asked})

    status = _STATUS.get(info.status, RunStatus.RUNNING)
    output = latest.text if status is RunStatus.COMPLETED and latest is not None else None
    calls, returns = _pending_tools(journal, last_turn, answer)
    approvals, deferred = _hitl(state, journal, calls)
    extra = _agent_record(journal)
    pinned = _dict(view.manifest.get("workflow"))
    return AgentRunState(
        run_id=run_id,
        conversation_id=str(extra.get("conversation_id") or run_id),
        message_history=tuple(history),
        usage=_usage(journal),
        run_step=sum(1 for i in journal.intents if i.key.kind == "llm" and _completed(journal, i)),
        status=status,
        output=output,
        structured_output=_structured(output, output_type),
        latest_response=latest,
        pending_tool_calls=calls,
        pending_tool_returns=returns,
        pending_approval_tool_returns=approvals,
        deferred_tool_returns=deferred,
        idle_messages=_idle_messages(journal, state),
        metadata={
            **dict(extra.get("metadata") or {}),
            "workflow": info.workflow,
            "model": _dict(pinned.get("llm")).get("model"),
            "principal": info.principal,
            "run_status": info.status,
            "outcome": contract_outcome(info.outcome),
            "created_ms": info.created_ms,
            "updated_ms": info.updated_ms,
        },
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _completed(journal: Journal, intent: IntentRecord) -> bool:
    result = journal.results.get(intent.key)
    return result is not None and "Completed" in result.outcome


def _answer(journal: Journal, turn: IntentRecord | None) -> dict[str, Any] | None:
    """The journaled model answer of ``turn`` (None while in flight or when it failed)."""
    if turn is None or not _completed(journal, turn):
        return None
    return _dict(journal.results[turn.key].outcome["Completed"].get("result"))


def _usage(journal: Journal) -> RunUsage:
    input_tokens = output_tokens = usd = requests = tool_calls = 0
    for intent in journal.intents:
        if intent.key.kind == "llm":
            requests += 1
        elif intent.executor.startswith(CALL_PREFIX):
            tool_calls += 1
        result = journal.results.get(intent.key)
        if intent.key.kind == "llm" and result is not None and "Completed" in result.outcome:
            usage = _dict(result.outcome["Completed"].get("usage"))
            input_tokens += int(usage.get("input_tokens", 0))
            output_tokens += int(usage.get("output_tokens", 0))
            usd += int(usage.get("usd_micros", 0))
    return RunUsage(input_tokens, output_tokens, requests, tool_calls, usd)


def _pending_tools(
    journal: Journal, turn: IntentRecord | None, answer: Mapping[str, Any] | None
) -> tuple[tuple[ToolCallPart, ...], tuple[ToolReturnPart, ...]]:
    """Tool effects of the last answer: those still running, and those back but not yet sent."""
    if turn is None or answer is None:
        return (), ()
    unmatched = [dict(c) for c in answer.get("tool_calls") or []]
    calls: list[ToolCallPart] = []
    returns: list[ToolReturnPart] = []
    for intent in journal.intents:
        key = intent.key
        if key.attempt != turn.key.attempt or key.effect_seq <= turn.key.effect_seq:
            continue
        if key.node != turn.key.node or not intent.executor.startswith(CALL_PREFIX):
            continue
        name = intent.executor[len(CALL_PREFIX) :]
        # Calls are matched by name and arguments, in order: a call refused by governance
        # makes no effect, so effect_seq alone cannot say which call an effect is.
        match = next(
            (c for c in unmatched if c.get("name") == name and c.get("arguments") == intent.input),
            None,
        )
        if match is not None:
            unmatched.remove(match)
        call_id = str(match.get("id")) if match is not None else intent.idempotency_key
        result = journal.results.get(key)
        if result is None:
            calls.append(ToolCallPart(name, _dict(intent.input), call_id))
        elif "Completed" in result.outcome:
            returns.append(ToolReturnPart(name, call_id, result.outcome["Completed"]["result"]))
        else:
            failure = result.outcome["Failed"]
            content = f"{failure.get('cause')}: {failure.get('detail')}"
            returns.append(ToolReturnPart(name, call_id, content, is_error=True))
    return tuple(calls), tuple(returns)


def _hitl(
    state: SchedulerState | None, journal: Journal, calls: Sequence[ToolCallPart]
) -> tuple[tuple[ToolReturnPart, ...], tuple[ToolReturnPart, ...]]:
    """Tool calls parked on a human (§8): approval-required first list, deferred second."""
    if state is None or state.is_terminal():
        return (), ()
    approvals: list[ToolReturnPart] = []
    deferred: list[ToolReturnPart] = []
    for ask_id in sorted(state.pending_asks, key=lambda a: _ask_order(state, a)):
        entry = state.pending_asks[ask_id]
        ask = _dict(entry.ask)
        name = ask.get("tool_name")
        if not name:
            continue  # an ask node (or a timer, a child run), not a tool call
        if entry.key in journal.results:
            continue  # answered; the next drive settles it
        # The loop keeps the model's call id with the ask; older checkpoints may lack it.
        call_id = entry.model_call_id or next(
            (c.tool_call_id for c in calls if c.tool_name == name and c.args == ask.get("input")),
            ask_id,
        )
        args = _dict(ask.get("input"))
        part = ToolReturnPart(str(name), str(call_id), None, ask_id=ask_id, args=args)
        (approvals if ask.get("approval") else deferred).append(part)
    return tuple(approvals), tuple(deferred)


def _ask_order(state: SchedulerState, ask_id: str) -> tuple[int, str]:
    """Tool asks in the order the model called them (their effect_seq), then by id."""
    return (state.pending_asks[ask_id].key.effect_seq, ask_id)


def _idle_messages(journal: Journal, state: SchedulerState | None) -> tuple[str, ...]:
    # Counted as the Runtime counts them: the first n inbox records are the n inputs fed.
    fed = sum(
        1
        for r in journal.records
        if r.kind == FEED
        for item in _dict(r.body).get("events", ())
        if "input" in item
    )
    sent = [_dict(r.body).get("message") for r in journal.records if r.kind == INBOX]
    queued = list(state.inbox) if state is not None else []
    return tuple(_text(m) for m in (*queued, *sent[fed:]))


def _text(message: Any) -> str:
    return message if isinstance(message, str) else json.dumps(message, sort_keys=True)


def _agent_record(journal: Journal) -> dict[str, Any]:
    for record in journal.records:
        if record.kind == AGENT_RECORD:
            return _dict(record.body)
    return {}


def _structured(text: str | None, output_type: type[BaseModel] | None) -> Any:
    """The final answer as ``output_type`` (pydantic validates it), else its JSON object."""
    if text is None:
        return None
    if output_type is not None:
        try:
            return output_type.model_validate_json(text)
        except ValidationError:
            return None  # recorded before the loop checked output_type: the text stays
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
