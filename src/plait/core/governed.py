"""Where the LLM loop consults a governed flow (docs/architecture.md §9).

The flow's runtime (state and marking) lives in the node's ``AbstractFlow`` as
``governance["rt"]`` and is journaled with it, so replay reproduces every
admission and refusal. A loop without a flow never calls into this module
beyond ``flow_of`` returning None, and keeps the bytes it always had.

Observe mode refuses nothing; what enforce mode would have refused is a
*violation*, kept in ``governance["violations"]`` (while the node is in flight) and
on the transcript entry of the call's result (``violation``), so every later
turn's journaled request carries it, as it carries a refusal.

The flow state changes only when a tool round has settled: its answers and
successes are applied in ``effect_seq`` order (``settled``), so it never depends on
which call of a round completed first.
"""

from __future__ import annotations

from typing import Any

from plait.core.abstract import AbstractFlow
from plait.core.machine import StepContext, note_ended
from plait.core.state import OpenPhase
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
    step_tools,
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


def _violation(flow: AbstractFlow, found: dict[str, Any]) -> None:
    assert flow.governance is not None
    flow.governance.setdefault("violations", []).append(found)


def offer(s: StepContext, flow: AbstractFlow, tools: list[str]) -> tuple[list[str], list[str]]:
    """The tools offered this turn and the active postures (for the turn's instructions)."""
    governed = flow_of(s, flow)
    if governed is None or flow.governance is None:
        return tools, []
    rt = latch(governed, _rt(flow))
    _save(flow, rt)
    return offered_tools(governed, rt, tools), postures(governed, rt)


def needed_tools(s: StepContext, flow: AbstractFlow) -> list[str]:
    """The tools the governed flow needs at its current step (none without a flow)."""
    governed = flow_of(s, flow)
    if governed is None or flow.governance is None:
        return []
    return step_tools(governed, latch(governed, _rt(flow)))


def admit_calls(
    s: StepContext, flow: AbstractFlow, turn: int, calls: list[dict[str, Any]], tools: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split the calls of the answer to turn ``turn`` (its effect_seq) into (admitted,
    refused tool entries), admitted one at a time. An admitted call enforce mode would have
    refused (observe mode) carries ``violation`` ({rule, why}) for its result's entry."""
    governed = flow_of(s, flow)
    if governed is None or flow.governance is None:
        return calls, []
    rt = _rt(flow)
    admissions = admit_answer(governed, rt, [str(c["name"]) for c in calls])
    admitted: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for call, admission in zip(calls, admissions, strict=True):
        if admission.ok:
            if admission.violation is not None:
                why = {"rule": admission.rule, "why": admission.violation}
                made = {"turn": turn, "tool": call["name"], "tool_call_id": call.get("id")}
                _violation(flow, {**made, **why})
                call = {**call, "violation": why}  # a new dict: the answer's own stays as it came
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


def ended(s: StepContext, flow: AbstractFlow) -> None:
    """A governed loop is failing: its state goes, so what governance decided about its
    last answer's calls, which no later turn's request carries, moves to the superstep's
    decision record (``refused``, and ``violations`` with their call), where ``trace``
    finds it. A loop without such decisions leaves the record as it was."""
    phase = s.state.phase
    if flow.governance is None or not isinstance(phase, OpenPhase):
        return
    answers = [i for i, m in enumerate(flow.messages) if m.get("role") == "assistant"]
    if not answers:
        return
    last = flow.messages[answers[-1]]
    calls = {str(c.get("id")): c for c in last.get("tool_calls") or () if isinstance(c, dict)}
    node = s.env.plan.nodes[flow.node].id
    where = {"node": node, "task_path": flow.task_path, "attempt": flow.attempt}
    for entry in flow.messages[answers[-1] + 1 :]:
        call = calls.get(str(entry.get("tool_call_id")))
        if entry.get("refused") and call is not None:
            made = {"tool": call.get("name"), "tool_call_id": call.get("id")}
            refused = {**where, **made, "why": entry.get("content")}
            note_ended(s, "refused", phase.record.refused, refused)
    for found in flow.governance.get("violations", ()):
        if "tool_call_id" in found and str(found["tool_call_id"]) in calls:
            note_ended(s, "violations", phase.record.violations, {**where, **found})


def keeps_answer(flow: AbstractFlow) -> bool:
    """Whether an ask's answer must be kept until its round settles (a governed loop)."""
    return flow.governance is not None


def settled(
    s: StepContext, flow: AbstractFlow, call: dict[str, Any], result: dict[str, Any]
) -> None:
    """Apply one settled call of a round to the flow state: its ask's answer (a human
    confirmation a guard may read), then its success. Called in effect_seq order."""
    governed = flow_of(s, flow)
    if governed is None or flow.governance is None:
        return
    rt = _rt(flow)
    answer = call.get("answer", result.get("answer"))
    if isinstance(answer, dict):
        rt = record_answer(governed, rt, answer)
    if not result["is_error"]:
        rt = record_success(governed, rt, str(call["name"]), result["content"])
    _save(flow, rt)


def unmet_requirements(s: StepContext, flow: AbstractFlow, turn: int) -> list[str]:
    """Steps a ``require`` constraint still waits for before the final answer of turn
    ``turn``. In observe mode the answer stands: the unmet steps are a violation."""
    governed = flow_of(s, flow)
    if governed is None or flow.governance is None:
        return []
    rt = latch(governed, _rt(flow))
    _save(flow, rt)
    missing = missing_required(governed, rt)
    if missing and governed.mode == "observe":
        steps = ", ".join(f"`{step}`" for step in missing)
        why = f"a final answer was given before the required steps were done: {steps}"
        found = {"turn": turn, "rule": "require", "steps": missing, "why": why}
        _violation(flow, found)
        phase = s.state.phase
        if isinstance(phase, OpenPhase):  # outlives the node: the answer ends it
            node = s.env.plan.nodes[flow.node].id
            where = {"node": node, "task_path": flow.task_path, "attempt": flow.attempt}
            note_ended(s, "violations", phase.record.violations, {**where, **found})
        return []
    return missing
