"""The state of one abstract node's LLM loop (seed ``AbstractFlow``, ARCHITECTURE.md §6).

Every transcript entry is built from journaled outcomes, so the transcript is
replay-stable by construction. Fields of optional features (folding, decisions,
response schemas, tool logs, governance) are omitted from the serialized form
while at their default, so runs that do not use them keep their bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plait.core.canonical import JSON
from plait.core.transcript import Entry

NEXT_TURN = "NextTurn"


@dataclass(slots=True)
class AbstractFlow:
    """In-flight LLM loop state for one abstract node at its current attempt."""

    node: int
    attempt: int
    task_path: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    next_effect_seq: int = 0
    pending_tools: dict[int, dict[str, Any]] = field(default_factory=dict)
    round_results: dict[int, dict[str, Any]] = field(default_factory=dict)
    need: str | dict[str, Any] | None = NEXT_TURN
    """``"NextTurn"``, ``{"Tools": [calls]}``, or None while waiting on effects."""
    unknown_strikes: int = 0
    last_prompt_tokens: int = 0
    folding: dict[str, Any] | None = None
    fold_forced: bool = False
    folds: int = 0
    deciding: dict[str, Any] | None = None
    decide_fold_tried: bool = False
    offer: JSON | None = None
    response_strikes: int = 0
    tool_log: list[dict[str, Any]] = field(default_factory=list)
    governance: dict[str, Any] | None = None
    """plait's own: the governed flow's state and marking (§9), absent without a flow."""
    refused: list[dict[str, Any]] = field(default_factory=list)
    """plait's own: governance refusals of this attempt (shown by trace), absent when none."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node": self.node,
            "attempt": self.attempt,
            "messages": self.messages,
            "next_effect_seq": self.next_effect_seq,
            "pending_tools": {str(k): v for k, v in self.pending_tools.items()},
            "round_results": {str(k): v for k, v in self.round_results.items()},
            "need": self.need,
            "unknown_strikes": self.unknown_strikes,
            "last_prompt_tokens": self.last_prompt_tokens,
        }
        if self.task_path:
            out["task_path"] = self.task_path
        if self.folding is not None:
            out["folding"] = self.folding
        if self.fold_forced:
            out["fold_forced"] = True
        if self.folds:
            out["folds"] = self.folds
        if self.deciding is not None:
            out["deciding"] = self.deciding
        if self.decide_fold_tried:
            out["decide_fold_tried"] = True
        if self.offer is not None:
            out["offer"] = self.offer
        if self.response_strikes:
            out["response_strikes"] = self.response_strikes
        if self.tool_log:
            out["tool_log"] = self.tool_log
        if self.governance is not None:
            out["governance"] = self.governance
        if self.refused:
            out["refused"] = self.refused
        return out

    @staticmethod
    def from_json(value: dict[str, Any]) -> AbstractFlow:
        return AbstractFlow(
            node=value["node"],
            attempt=value["attempt"],
            task_path=value.get("task_path", ""),
            messages=[Entry(m) for m in value["messages"]],
            next_effect_seq=value["next_effect_seq"],
            pending_tools={int(k): v for k, v in value["pending_tools"].items()},
            round_results={int(k): v for k, v in value["round_results"].items()},
            need=value["need"],
            unknown_strikes=value["unknown_strikes"],
            last_prompt_tokens=value["last_prompt_tokens"],
            folding=value.get("folding"),
            fold_forced=value.get("fold_forced", False),
            folds=value.get("folds", 0),
            deciding=value.get("deciding"),
            decide_fold_tried=value.get("decide_fold_tried", False),
            offer=value.get("offer"),
            response_strikes=value.get("response_strikes", 0),
            tool_log=list(value.get("tool_log", [])),
            governance=value.get("governance"),
            refused=list(value.get("refused", [])),
        )
