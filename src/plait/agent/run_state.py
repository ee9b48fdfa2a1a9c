"""``AgentRunState``: where an agent run stands, as a value (seed ``AgentRunState``).

The state and its parts (``RunStatus``, ``RunUsage``, ``ToolCallPart``,
``ToolReturnPart``) are plain values: a state applies a model response or replaces the
latest one by returning the next state, and round-trips through JSON on its own.
``agent.run_reader`` reads one back from a run's journal.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Generic

from pydantic import BaseModel
from typing_extensions import TypeVar

from plait.models.base import ModelResponse

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

    def all_messages(self) -> list[dict[str, Any]]:
        """The transcript as a list (pydantic-ai's name): what ``message_history=`` takes."""
        return [dict(m) for m in self.message_history]

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
