"""The state of one abstract node's LLM loop (seed ``AbstractFlow``, docs/architecture.md §6).

Every transcript entry is built from journaled outcomes, so the transcript is
replay-stable by construction. Fields of optional features (folding, decisions,
response schemas, tool logs, governance) are omitted from the serialized form
while at their default, so runs that do not use them keep their bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plait.core.canonical import JSON
from plait.core.codec import COPY_LIST, RecordCodec, ValueCodec, int_keys, json_field
from plait.core.transcript import Entry

NEXT_TURN = "NextTurn"

_MESSAGES = ValueCodec(None, lambda v: [Entry(m) for m in v])


@dataclass(slots=True)
class AbstractFlow:
    """In-flight LLM loop state for one abstract node at its current attempt."""

    node: int
    attempt: int
    task_path: str = json_field(omit_default=True, default="")
    messages: list[dict[str, Any]] = json_field(_MESSAGES, default_factory=list)
    next_effect_seq: int = 0
    pending_tools: dict[int, dict[str, Any]] = json_field(int_keys(), default_factory=dict)
    round_results: dict[int, dict[str, Any]] = json_field(int_keys(), default_factory=dict)
    need: str | dict[str, Any] | None = NEXT_TURN
    """``"NextTurn"``, ``{"Tools": [calls]}``, or None while waiting on effects."""
    unknown_strikes: int = 0
    last_prompt_tokens: int = 0
    folding: dict[str, Any] | None = json_field(omit_default=True, default=None)
    fold_forced: bool = json_field(omit_default=True, default=False)
    folds: int = json_field(omit_default=True, default=0)
    deciding: dict[str, Any] | None = json_field(omit_default=True, default=None)
    decide_fold_tried: bool = json_field(omit_default=True, default=False)
    offer: JSON | None = json_field(omit_default=True, default=None)
    response_strikes: int = json_field(omit_default=True, default=0)
    tool_log: list[dict[str, Any]] = json_field(COPY_LIST, omit_default=True, default_factory=list)
    governance: dict[str, Any] | None = json_field(omit_default=True, default=None)
    """plait's own: the governed flow's state and marking (§9), absent without a flow."""
    refused: list[dict[str, Any]] = json_field(COPY_LIST, omit_default=True, default_factory=list)
    """plait's own: governance refusals of this attempt (shown by trace), absent when none."""
    turn_tries: int = json_field(omit_default=True, default=0)
    """Under a ``retry:`` policy: turns failed in a row (a completed turn resets it)."""
    retry_of: dict[int, int] = json_field(int_keys(), omit_default=True, default_factory=dict)
    """Under a ``retry:`` policy: a retried tool call's effect_seq (or its backoff's) ->
    the effect_seq of the call's first attempt, whose place in the round it keeps."""

    def to_json(self) -> dict[str, Any]:
        return FLOW_CODEC.encode(self)

    @staticmethod
    def from_json(value: dict[str, Any]) -> AbstractFlow:
        return FLOW_CODEC.decode(value)


FLOW_CODEC: RecordCodec[AbstractFlow] = RecordCodec(AbstractFlow)
