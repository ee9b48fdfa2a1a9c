"""Effect outcomes, failure causes and run outcomes (docs/architecture.md §3.3, §3.5).

The retry table lives here and nowhere else: which causes a node's ``retries``
(or an LLM loop re-sending a turn) may retry, by effect kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plait.core.canonical import JSON, dumpb
from plait.core.codec import INT, RecordCodec, json_field

FAIL_CAUSES: tuple[str, ...] = (
    "Timeout",
    "ExecutorError",
    "SchemaValidationFailed",
    "ContextTooLong",
    "UserAborted",
    "Unknown",
    "ProviderError",
)
"""``ProviderError``: a model provider could not answer a turn and its SDK's own retries
are spent (or sending again cannot help: a refused connection, a 4xx); never re-sent."""


def retryable(cause: str, kind: str) -> bool:
    """Timeout and ExecutorError retry for tool and llm effects; schema failures only for llm."""
    if cause in ("Timeout", "ExecutorError"):
        return kind in ("tool", "llm")
    if cause == "SchemaValidationFailed":
        return kind == "llm"
    return False


@dataclass(frozen=True, slots=True)
class Usage:
    """What one effect consumed; tokens and integer micro-dollars (never floats)."""

    input_tokens: int = json_field(INT, default=0)
    output_tokens: int = json_field(INT, default=0)
    usd_micros: int = json_field(INT, default=0)

    def to_json(self) -> dict[str, int]:
        return _USAGE.encode(self)

    @staticmethod
    def from_json(value: dict[str, Any] | None) -> Usage:
        if not value or value == _NO_USAGE_JSON:
            return NO_USAGE  # a tool's result: the same value, without a decode
        return _USAGE.decode(value)


_USAGE: RecordCodec[Usage] = RecordCodec(Usage)


NO_USAGE = Usage()
_NO_USAGE_JSON = NO_USAGE.to_json()


@dataclass(frozen=True)
class Completed:
    """An effect that produced a JSON result.

    ``size``, when the producer already encoded ``result``, is its canonical byte length
    (what ``journal_bytes`` would compute again), and ``text`` its canonical text (what the
    journal stores); neither is part of the value.
    """

    result: JSON
    usage: Usage = NO_USAGE
    size: int | None = field(default=None, compare=False, repr=False)
    text: str | None = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        result: JSON,
        usage: Usage = NO_USAGE,
        size: int | None = None,
        text: str | None = None,
    ) -> None:
        # One call, not one object.__setattr__ a field: one is built per effect (as
        # core.events' commands and events).
        self.__dict__.update(result=result, usage=usage, size=size, text=text)

    def to_json(self) -> dict[str, Any]:
        return {"Completed": {"result": self.result, "usage": self.usage.to_json()}}


@dataclass(frozen=True, slots=True)
class Failed:
    """An effect that failed; ``cause`` is one of FAIL_CAUSES.

    ``error``, when an exception caused it, is the exception's class name (what a retry
    policy's ``non_retryable`` names); journaled only when known, so older results and
    failures without an exception keep their bytes. It is not part of the value."""

    cause: str
    detail: str
    error: str | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        body = {"cause": self.cause, "detail": self.detail}
        if self.error is not None:
            body["error"] = self.error
        return {"Failed": body}


EffectOutcome = Completed | Failed


def outcome_from_json(value: dict[str, Any]) -> EffectOutcome:
    """Inverse of ``to_json`` for journaled outcomes."""
    if "Completed" in value:
        body = value["Completed"]
        return Completed(body.get("result"), Usage.from_json(body.get("usage")))
    body = value["Failed"]
    cause = str(body["cause"])
    if cause not in FAIL_CAUSES:
        raise ValueError(f"unknown failure cause {cause!r}")
    error = body.get("error")
    return Failed(cause, str(body.get("detail", "")), None if error is None else str(error))


def journal_bytes(outcome: EffectOutcome) -> int:
    """Canonical byte length of a journaled result (what the storage budget charges)."""
    if isinstance(outcome, Completed):
        return len(dumpb(outcome.result)) if outcome.size is None else outcome.size
    return len(outcome.detail.encode("utf-8"))


# Run outcomes serialize as tagged variants: "Completed" or {"Variant": {...}}.
RunOutcome = JSON


def run_completed() -> RunOutcome:
    return "Completed"


def run_stalled(node: str) -> RunOutcome:
    return {"Stalled": {"node": node}}


def run_failed(node: str, detail: str) -> RunOutcome:
    return {"Failed": {"node": node, "detail": detail}}


def run_canceled(by: str, reason: str) -> RunOutcome:
    return {"Canceled": {"by": by, "reason": reason}}


def run_budget_exhausted(axis: str) -> RunOutcome:
    return {"BudgetExhausted": {"axis": axis}}


def outcome_kind(outcome: RunOutcome) -> str:
    """The lowercase label of a run outcome (completed, failed, stalled, ...)."""
    tag = outcome if isinstance(outcome, str) else next(iter(outcome))
    return {
        "Completed": "completed",
        "Stalled": "stalled",
        "Failed": "failed",
        "Canceled": "canceled",
        "BudgetExhausted": "budget_exhausted",
    }[tag]
