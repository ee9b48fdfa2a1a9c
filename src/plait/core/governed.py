"""Where the LLM loop consults a governed flow (ARCHITECTURE.md §9).

The flow's runtime (state and marking) lives in the node's ``AbstractFlow`` as
``governance["rt"]`` and is journaled with it, so replay reproduces every
admission and refusal. A loop without a flow never calls into this module
beyond ``flow_of`` returning None, and keeps the bytes it always had.
"""

from __future__ import annotations

from typing import Any

from plait.core.abstract import AbstractFlow
from plait.core.machine import StepContext
from plait.governance import (
    Flow,
    FlowRuntime,
    admit_answer,
    latch,
    missing_required,
    offered_tools,
    postures,
    record_answer,
    record_success,
    refusal_message,
    start,
)


def flow_of(s: StepContext, flow: AbstractFlow) -> Flow | None:
    node_id = s.env.plan.nodes[flow.node].id
    governed = s.env.flows.get(node_id)
    return governed if isinstance(governed, Flow) else None


def begin(s: StepContext, flow: AbstractFlow, context: dict[str, Any]) -> None:
    governed = flow_of(s, flow)
    if governed is not None:
        flow.governance = {"rt": start(governed, context).to_json()}


def _rt(flow: AbstractFlow) -> FlowRuntime:
    assert flow.governance is not None
    return FlowRuntime.from_json(flow.governance["rt"])


def _save(flow: AbstractFlow, rt: FlowRuntime) -> None:
    assert flow.governance is not None
    flow.governance["rt"] = rt.to_json()


def offer(s: StepContext, flow: AbstractFlow, tools: list[str]) -> tuple[list[str], list[str]]:
    """The tools offered this turn and the active postures (for the turn's instructions)."""
    governed = flow_of(s, flow)
    if governed is None or flow.governance is None:
        return tools, []
    rt = latch(governed, _rt(flow))
    _save(flow, rt)
    return offered_tools(governed, rt, tools), postures(governed, rt)


def admit_calls(
    s: StepContext, flow: AbstractFlow, calls: list[dict[str, Any]], tools: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split one answer's calls into (admitted, refused tool entries), admitted one at a time."""
    governed = flow_of(s, flow)
    if governed is None or flow.governance is None:
        return calls, []
    rt = _rt(flow)
    admissions = admit_answer(governed, rt, [str(c["name"]) for c in calls])
    admitted: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for call, admission in zip(calls, admissions, strict=True):
        if admission.violation is not None:
            violations = flow.governance.setdefault("violations", [])
            violations.append(
                {"tool": call["name"], "rule": admission.rule, "why": admission.violation}
            )
        if admission.ok:
            admitted.append(call)
            continue
        message = refusal_message(governed, rt, str(call["name"]), admission, tools)
        refused.append(
            {
                "role": "tool",
                "tool_call_id": call.get("id"),
                "content": message,
                "is_error": True,
                "refused": True,
            }
        )
        flow.refused.append(
            {"tool": call["name"], "tool_call_id": call.get("id"), "rule": admission.rule}
        )
    return admitted, refused


def succeeded(s: StepContext, flow: AbstractFlow, tool: str, result: Any) -> None:
    governed = flow_of(s, flow)
    if governed is not None and flow.governance is not None:
        _save(flow, record_success(governed, _rt(flow), tool, result))


def answered(s: StepContext, flow: AbstractFlow, answer: dict[str, Any]) -> None:
    """An answered ask updates the flow state (a human confirmation a guard may read)."""
    governed = flow_of(s, flow)
    if governed is not None and flow.governance is not None:
        _save(flow, record_answer(governed, _rt(flow), answer))


def unmet_requirements(s: StepContext, flow: AbstractFlow) -> list[str]:
    """Steps a ``require`` constraint still waits for before a final answer."""
    governed = flow_of(s, flow)
    if governed is None or flow.governance is None:
        return []
    rt = latch(governed, _rt(flow))
    _save(flow, rt)
    return missing_required(governed, rt)
