"""What a run waits on besides its dispatched effects: pending asks and Send tasks.

``PendingAsk`` is one entry of ``SchedulerState.pending_asks``, keyed by ask id (the
call id of its key, §3.4). It is one of three things the world settles: an ask (of an
ask node, or of an approval-required or deferred tool call inside an abstract node),
a durable timer (``wake_ms``), or a child run that may park (``child``, §3.9).
``SendTask`` is one entry of ``SchedulerState.send_tasks``, keyed by task path (§3.8).

Both keep the JSON shape checkpoints have always had: absent fields stay absent.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from plait.core.canonical import JSON
from plait.core.codec import (
    ABSENT,
    PLAIN,
    Absent,
    RecordCodec,
    ValueCodec,
    enum,
    json_field,
    optional,
)
from plait.core.keys import JournalKey

KEY = ValueCodec(JournalKey.to_json, JournalKey.from_json)


@dataclass(frozen=True, slots=True)
class PendingAsk:
    """An effect the world settles: an ask, a timer or a child run, by its key."""

    key: JournalKey = json_field(KEY)
    node: int = json_field()
    """The node's index in the plan."""
    ask: dict[str, Any] | None = json_field(optional(PLAIN), omit_default=True, default=None)
    """An ask as announced (``ask_id``, ``node`` id, ``tool_name``, ``prompt``, ``input``,
    ``expires_at``, ``approval``); None for a timer or a child run."""
    wake_ms: int | None = json_field(omit_default=True, default=None)
    """A timer's wake time (Unix ms)."""
    child: str | None = json_field(omit_default=True, default=None)
    """A child run's id."""
    agent: str | None = json_field(omit_default=True, default=None)
    """For an agent call or handoff (``core/agents.py``): the node the child runs."""
    tool_call_id: JSON | Absent = json_field(omit_default=True, default=ABSENT)
    """The model's id of the tool call an ask gates (absent for an ask node's ask)."""
    backoff: bool = json_field(omit_default=True, default=False)
    """A timer that is a retry policy's wait before the next attempt (``core/retry.py``)."""

    @property
    def kind(self) -> Literal["ask", "timer", "child"]:
        if self.ask is not None:
            return "ask"
        return "timer" if self.wake_ms is not None else "child"

    @property
    def is_ask(self) -> bool:
        """An ask someone answers (announced in envelopes); timers and children are not."""
        return self.ask is not None

    @property
    def expires_at(self) -> int | None:
        """When an ask expires (Unix seconds); None if it never does (or is no ask)."""
        if self.ask is None:
            return None
        expires: int | None = self.ask.get("expires_at")
        return expires

    @property
    def tool_name(self) -> str | None:
        """The tool an ask gates; None for an ask node's ask, a timer or a child."""
        if self.ask is None:
            return None
        name: str | None = self.ask.get("tool_name")
        return name

    @property
    def model_call_id(self) -> JSON:
        """The gated tool call's id as the model gave it; None when the entry has none
        (an ask node's ask, or a checkpoint older than the field)."""
        return None if self.tool_call_id is ABSENT else self.tool_call_id

    def to_json(self) -> dict[str, JSON]:
        return ASK_CODEC.encode(self)

    @staticmethod
    def from_json(value: dict[str, JSON]) -> PendingAsk:
        return ASK_CODEC.decode(value)


ASK_CODEC: RecordCodec[PendingAsk] = RecordCodec(PendingAsk)


class TaskState(StrEnum):
    QUEUED = "Queued"
    RUNNING = "Running"
    DONE = "Done"


@dataclass(slots=True)
class SendTask:
    """One Send-spawned task of a tool node: its own input, attempts and state."""

    node: int
    input: JSON
    attempt: int = 0
    state: TaskState = json_field(enum(TaskState), default=TaskState.QUEUED)

    def to_json(self) -> dict[str, JSON]:
        return TASK_CODEC.encode(self)

    @staticmethod
    def from_json(value: dict[str, JSON]) -> SendTask:
        return TASK_CODEC.decode(value)


TASK_CODEC: RecordCodec[SendTask] = RecordCodec(SendTask)


NOT_APPLYING = ("tool_name", "expires_at")
"""Ask fields that are null where they do not apply: an ask node names no tool, and an ask
expires only with ``asks.ttl_s``."""


def announced(ask: dict[str, Any]) -> dict[str, Any]:
    """An ask as an envelope or a listing shows it: without the fields that do not apply
    (CONTRACT.md). The state keeps them as null, so checkpoints keep their bytes."""
    return {k: v for k, v in ask.items() if v is not None or k not in NOT_APPLYING}
