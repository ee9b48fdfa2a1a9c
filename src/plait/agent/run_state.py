"""``AgentRunState``: an agent run read back from its journal (seed ``AgentRunState``).

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Generic

from pydantic import BaseModel, ValidationError
from typing_extensions import TypeVar

from plait.core.llm_loop import CALL_PREFIX
from plait.core.state import SchedulerState
from plait.driver.feeds import FEED
from plait.driver.run_view import RunView
from plait.driver.wave import contract_outcome
from plait.models.base import ModelResponse
from plait.store.base import Store
from plait.store.records import IntentRecord, Journal

OutputT = TypeVar("OutputT", default=dict[str, Any])
"""The type of ``structured_output``: the agent's ``output_type``, else a JSON object."""

INBOX = "inbox"
"""The record kind of a steering message sent to a run (``Agent.send``)."""

AGENT_RECORD = "agent"
"""The record kind holding what the caller said about a run (conversation id, metadata)."""


class RunStatus(StrEnum):
    """Where an agent run stands; the store's finer statuses are in ``metadata['run_status']``."""

    STARTING = "Starting"
    RUNNING = "Running"
    WAITING = "Waiting"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


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


@dataclass(frozen=True)
class RunUsage:
    """Accumulated usage of a run, counted from its journal.

    Tokens and micro-dollars are summed over answered model turns; ``requests``
    counts the model turns journaled (summaries and a turn still in flight
    included), ``tool_calls`` the tool effects the model's calls made.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    tool_calls: int = 0
    usd_micros: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def with_turn(self, response: ModelResponse, *, sign: int = 1) -> RunUsage:
        """This usage with one answered turn counted (``sign=-1``: taken back out)."""
        return replace(
            self,
            input_tokens=self.input_tokens + sign * response.input_tokens,
            output_tokens=self.output_tokens + sign * response.output_tokens,
            requests=self.requests + sign,
        )

    def to_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "requests": self.requests,
            "tool_calls": self.tool_calls,
            "usd_micros": self.usd_micros,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> RunUsage:
        return RunUsage(**{name: int(data.get(name, 0)) for name in _USAGE_FIELDS})


_USAGE_FIELDS = ("input_tokens", "output_tokens", "requests", "tool_calls", "usd_micros")


@dataclass(frozen=True)
class ToolCallPart:
    """A tool call the model made: ``{id, name, arguments}`` of the journaled answer."""

    tool_name: str
    args: Mapping[str, Any]
    tool_call_id: str

    def to_json(self) -> dict[str, Any]:
        return {
            "tool_name": self.tool_name,
            "args": dict(self.args),
            "tool_call_id": self.tool_call_id,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ToolCallPart:
        return ToolCallPart(str(data["tool_name"]), dict(data["args"]), str(data["tool_call_id"]))


@dataclass(frozen=True)
class ToolReturnPart:
    """What a tool call returned (``content``); None while it waits for a human.

    A call waiting for a human (an approval or a deferred result) has the id of
    its ask (``ask_id``, what ``plait respond`` answers) and the arguments the
    model called it with (``args``, the ask's input).
    """

    tool_name: str
    tool_call_id: str
    content: Any = None
    is_error: bool = False
    ask_id: str | None = None
    args: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "content": self.content,
            "is_error": self.is_error,
            "ask_id": self.ask_id,
            "args": None if self.args is None else dict(self.args),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ToolReturnPart:
        args = data.get("args")
        return ToolReturnPart(
            tool_name=str(data["tool_name"]),
            tool_call_id=str(data["tool_call_id"]),
            content=data.get("content"),
            is_error=bool(data.get("is_error", False)),
            ask_id=data.get("ask_id"),
            args=None if args is None else dict(args),
        )


@dataclass(frozen=True)
class AgentRunState(Generic[OutputT]):
    """Checkpointable state of one agent run, as its journal tells it (seed ``AgentRunState``).

    ``output`` is the final answer's text; ``structured_output`` the same answer
    validated as the agent's ``output_type`` (without one: the answer's JSON
    object, if it is one); both are None until the run completes.
    ``message_history`` holds journal-shaped transcript entries (docs/architecture.md
    §6); ``run_step`` counts answered model turns; ``metadata`` holds what the
    caller gave ``run`` plus the run's workflow, model, principal, store status
    (``run_status``: tells failed, stalled and budget_exhausted apart), outcome
    and times.
    """

    run_id: str
    conversation_id: str
    message_history: tuple[Mapping[str, Any], ...] = ()
    usage: RunUsage = field(default_factory=RunUsage)
    run_step: int = 0
    status: RunStatus = RunStatus.STARTING
    output: str | None = None
    structured_output: OutputT | None = None
    latest_response: ModelResponse | None = None
    pending_tool_calls: tuple[ToolCallPart, ...] = ()
    pending_tool_returns: tuple[ToolReturnPart, ...] = ()
    pending_approval_tool_returns: tuple[ToolReturnPart, ...] = ()
    deferred_tool_returns: tuple[ToolReturnPart, ...] = ()
    idle_messages: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, run_id: str, conversation_id: str | None = None) -> AgentRunState[OutputT]:
        """An empty state for a run about to start."""
        return cls(run_id, conversation_id or run_id)

    def has_pending_hitl(self) -> bool:
        """True when the run waits for an approval or for a deferred tool's result."""
        return bool(self.pending_approval_tool_returns or self.deferred_tool_returns)

    def pending_approvals(self) -> tuple[ToolReturnPart, ...]:
        return self.pending_approval_tool_returns

    def pending_deferred_tools(self) -> tuple[ToolReturnPart, ...]:
        return self.deferred_tool_returns

    def pending_hitl_tool_returns(self) -> Iterator[ToolReturnPart]:
        """Every pending human-in-the-loop tool return: approvals first, then deferred."""
        yield from self.pending_approval_tool_returns
        yield from self.deferred_tool_returns

    # -- a model turn ---------------------------------------------------------------------

    def apply_model_response(self, response: ModelResponse) -> AgentRunState[OutputT]:
        """The state once the model answered a turn with ``response``.

        The answer joins ``message_history`` as the journal shapes it, is the
        ``latest_response`` until the loop classifies it, and its calls are the
        ``pending_tool_calls``; the returns the turn was sent with are no longer pending.
        The turn counts in ``usage`` (its tokens, one request) and in ``run_step``; a
        run that was starting is running. The answer's cost (``usd_micros``) needs the
        run's prices, so it is not counted here.
        """
        return replace(
            self,
            message_history=(*self.message_history, _assistant_entry(response)),
            usage=self.usage.with_turn(response),
            run_step=self.run_step + 1,
            status=RunStatus.RUNNING if self.status is RunStatus.STARTING else self.status,
            latest_response=response,
            pending_tool_calls=_tool_calls(response),
            pending_tool_returns=(),
        )

    def replace_latest_response(self, response: ModelResponse) -> AgentRunState[OutputT]:
        """The state with ``response`` in place of the latest one, as after a lifecycle hook
        replaced the answer (§10: the replacement is what the journal holds).

        The history's last entry, the pending tool calls and the token counts follow the
        replacement; the turn still counts once (``run_step`` and ``requests`` stay).
        Raises ValueError when there is no latest response to replace.
        """
        latest = self.latest_response
        if latest is None:
            raise ValueError("no model response to replace: apply one first")
        history = self.message_history
        if history and history[-1] == _assistant_entry(latest):
            history = history[:-1]
        usage = self.usage.with_turn(latest, sign=-1).with_turn(response)
        return replace(
            self,
            message_history=(*history, _assistant_entry(response)),
            usage=usage,
            latest_response=response,
            pending_tool_calls=_tool_calls(response),
        )

    # -- JSON -----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The state as JSON values (``from_json`` reads it back equal).

        A ``structured_output`` that is a pydantic model is written as its JSON form;
        pass its type to ``from_json`` to read it back as that model.
        """
        structured: Any = self.structured_output
        if isinstance(structured, BaseModel):
            structured = structured.model_dump(mode="json")
        latest = self.latest_response
        return {
            "run_id": self.run_id,
            "conversation_id": self.conversation_id,
            "message_history": [dict(m) for m in self.message_history],
            "usage": self.usage.to_json(),
            "run_step": self.run_step,
            "status": self.status.value,
            "output": self.output,
            "structured_output": structured,
            "latest_response": None if latest is None else latest.to_json(),
            "pending_tool_calls": [c.to_json() for c in self.pending_tool_calls],
            "pending_tool_returns": [r.to_json() for r in self.pending_tool_returns],
            "pending_approval_tool_returns": [
                r.to_json() for r in self.pending_approval_tool_returns
            ],
            "deferred_tool_returns": [r.to_json() for r in self.deferred_tool_returns],
            "idle_messages": list(self.idle_messages),
            "metadata": dict(self.metadata),
        }

    @staticmethod
    def from_json(
        data: Mapping[str, Any], output_type: type[BaseModel] | None = None
    ) -> AgentRunState[Any]:
        """The state ``to_json`` wrote; ``output_type`` reads ``structured_output`` back
        as that pydantic model (the agent's ``output_type``)."""
        structured = data.get("structured_output")
        if structured is not None and output_type is not None:
            structured = output_type.model_validate(structured)
        latest = data.get("latest_response")

        def returns(key: str) -> tuple[ToolReturnPart, ...]:
            return tuple(ToolReturnPart.from_json(r) for r in data.get(key) or ())

        return AgentRunState(
            run_id=str(data["run_id"]),
            conversation_id=str(data["conversation_id"]),
            message_history=tuple(dict(m) for m in data.get("message_history") or ()),
            usage=RunUsage.from_json(data.get("usage") or {}),
            run_step=int(data.get("run_step", 0)),
            status=RunStatus(data.get("status", RunStatus.STARTING.value)),
            output=data.get("output"),
            structured_output=structured,
            latest_response=None if latest is None else ModelResponse.from_json(latest),
            pending_tool_calls=tuple(
                ToolCallPart.from_json(c) for c in data.get("pending_tool_calls") or ()
            ),
            pending_tool_returns=returns("pending_tool_returns"),
            pending_approval_tool_returns=returns("pending_approval_tool_returns"),
            deferred_tool_returns=returns("deferred_tool_returns"),
            idle_messages=tuple(str(m) for m in data.get("idle_messages") or ()),
            metadata=dict(data.get("metadata") or {}),
        )


def _assistant_entry(response: ModelResponse) -> dict[str, Any]:
    """A model answer as a transcript entry, shaped as the journal holds it."""
    return {
        "role": "assistant",
        "text": response.text,
        "tool_calls": response.to_json()["tool_calls"],
    }


def _tool_calls(response: ModelResponse) -> tuple[ToolCallPart, ...]:
    return tuple(
        ToolCallPart(str(c["name"]), dict(c["arguments"]), str(c["id"]))
        for c in response.tool_calls
    )


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
