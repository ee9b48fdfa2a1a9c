"""Answers to an agent run's approval-required and deferred tool calls (§8, §10).

``Agent.resume(run_id, approvals=..., deferred=...)`` addresses answers by the
model's tool call id, as ``AgentRunState`` lists them; they are journaled by
the ids of the calls' asks through ``Runtime.respond_all``, with the checks of
``plait respond`` / ``approve`` / ``deny``, in one commit. The whole batch is
checked here first too, so that its errors name tool calls, not asks.
This module decides nothing the core decides; it only reads and checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from plait.agent.run_state import AgentRunState, ToolReturnPart
from plait.core.canonical import CanonicalJSONError, dumps, loads
from plait.core.errors import PlaitError
from plait.core.state import SchedulerState
from plait.driver.answers import Answer


@dataclass(frozen=True)
class Approval:
    """The answer to an approval-required tool call.

    ``Approval(True)`` lets the call run; ``Approval(False, "reason")`` denies it:
    the tool never runs and the model reads the tool error ``denied by WHO: reason``.
    ``True`` and ``False`` are short for ``Approval(True)`` and ``Approval(False)``.
    """

    approved: bool
    reason: str | None = None


@dataclass(frozen=True)
class DeferredError:
    """A deferred tool call that failed: the model reads a tool error instead of a result.

    Journaled as ``plait respond --deny MESSAGE`` is: the call's result is the
    failure ``UserAborted: denied by WHO: MESSAGE``.
    """

    message: str


def plan_answers(
    state: AgentRunState[Any],
    scheduler: SchedulerState | None,
    run_principal: str | None,
    approvals: Mapping[str, bool | Approval],
    deferred: Mapping[str, Any],
    *,
    by: str,
    now_ms: int,
) -> list[Answer]:
    """Check a whole batch of answers; raise on the first problem, before anything is journaled.

    The checks, in order (those of ``plait respond``, then the batch's own):
    PLAIT-E011 a tool call id that is not pending (unknown, already answered) or
    whose ask expired; PLAIT-E012 an approval given by the run's principal;
    PLAIT-E028 an answer in the wrong mapping, an approval that is not a bool or
    an ``Approval``, a deferred result that is not JSON, or a pending call left
    unanswered (every pending, unexpired call is answered at once, §10).
    """
    waiting = {p.tool_call_id: p for p in state.pending_hitl_tool_returns()}
    approval_ids = {p.tool_call_id for p in state.pending_approvals()}
    for call_id in [*approvals, *deferred]:
        if call_id in approvals and call_id in deferred:
            raise PlaitError(
                "E028", f"tool call '{call_id}' is answered in both approvals= and deferred="
            )
        part = waiting.get(call_id)
        if part is None:
            raise PlaitError(
                "E011",
                f"run '{state.run_id}' has no pending tool call '{call_id}';"
                f" {_describe(state, waiting.values())}",
            )
        expires_at = _expires_at(scheduler, part)
        if expires_at is not None and now_ms // 1000 > expires_at:
            raise PlaitError(
                "E011",
                f"the ask for tool call '{call_id}' ({part.tool_name}) expired at {expires_at}",
            )
        if call_id in approvals and call_id not in approval_ids:
            raise PlaitError(
                "E028",
                f"tool call '{call_id}' ({part.tool_name}) is deferred, not approval-required:"
                " give its result in deferred=",
            )
        if call_id in deferred and call_id in approval_ids:
            raise PlaitError(
                "E028",
                f"tool call '{call_id}' ({part.tool_name}) waits for an approval:"
                " answer it in approvals=",
            )
    if approvals and by == run_principal:
        raise PlaitError(
            "E012",
            f"'{by}' started run '{state.run_id}' and cannot approve its own request"
            " (pass by= another principal)",
        )
    planned: list[Answer] = []
    for call_id, value in approvals.items():
        planned.append(_approval(call_id, waiting[call_id], value))
    for call_id, value in deferred.items():
        planned.append(_deferred(call_id, waiting[call_id], value))
    missing = [
        p
        for p in waiting.values()
        if p.tool_call_id not in approvals
        and p.tool_call_id not in deferred
        and not _expired(scheduler, p, now_ms)
    ]
    if missing:
        raise PlaitError(
            "E028",
            f"run '{state.run_id}': resume answers every pending tool call at once;"
            f" unanswered: {_list(missing, approval_ids)}"
            " (Runtime.respond answers one ask at a time)",
        )
    return planned


def _approval(call_id: str, part: ToolReturnPart, value: Any) -> Answer:
    assert part.ask_id is not None
    if isinstance(value, bool):
        value = Approval(value)
    if not isinstance(value, Approval) or not isinstance(value.approved, bool):
        raise PlaitError(
            "E028",
            f"the approval of tool call '{call_id}' ({part.tool_name}) must be True, False"
            f" or Approval(approved, reason), got {value!r}",
        )
    if value.reason is not None and not isinstance(value.reason, str):
        raise PlaitError("E028", f"the reason of tool call '{call_id}' must be a string")
    return Answer(part.ask_id, approve=value.approved, reason=value.reason)


def _deferred(call_id: str, part: ToolReturnPart, value: Any) -> Answer:
    assert part.ask_id is not None
    if isinstance(value, DeferredError):
        if not isinstance(value.message, str):
            raise PlaitError("E028", f"the error of tool call '{call_id}' must be a string")
        return Answer(part.ask_id, deny=value.message)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        value = loads(dumps(value))  # journaled as JSON: what the model will read
    except CanonicalJSONError as exc:
        raise PlaitError(
            "E028",
            f"the result of tool call '{call_id}' ({part.tool_name}) is not JSON: {exc}",
        ) from exc
    return Answer(part.ask_id, result=value)


def _expires_at(scheduler: SchedulerState | None, part: ToolReturnPart) -> int | None:
    if scheduler is None or part.ask_id is None:
        return None
    entry = scheduler.pending_asks.get(part.ask_id)
    expires_at = None if entry is None else entry.expires_at
    return int(expires_at) if expires_at is not None else None


def _expired(scheduler: SchedulerState | None, part: ToolReturnPart, now_ms: int) -> bool:
    expires_at = _expires_at(scheduler, part)
    return expires_at is not None and now_ms // 1000 > expires_at


def _describe(state: AgentRunState[Any], waiting: Iterable[ToolReturnPart]) -> str:
    parts = list(waiting)
    if not parts:
        return "it has no pending approval or deferred tool call"
    approval_ids = {p.tool_call_id for p in state.pending_approvals()}
    return f"pending: {_list(parts, approval_ids)}"


def _list(parts: list[ToolReturnPart], approval_ids: set[str]) -> str:
    return ", ".join(
        f"'{p.tool_call_id}' ({p.tool_name}, "
        f"{'approval' if p.tool_call_id in approval_ids else 'deferred'})"
        for p in parts
    )
