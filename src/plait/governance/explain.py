"""What a flow's decisions look like to a reader: the refused model and ``plait show``.

Decides nothing: every verdict comes from ``monitor.py``; this module only words it.
A refusal tells the model three things (docs/architecture.md §9): why the call was refused,
what is available now, and the active posture(s), and it says plainly that the call did
not run, so the model does not report it as done.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plait.governance.flow import Flow
from plait.governance.guards import describe
from plait.governance.monitor import (
    Admission,
    active_steps,
    admit,
    admitted_tools,
    missing_required,
    offered_tools,
    postures,
)
from plait.governance.runtime import FlowRuntime

__all__ = ["explain", "refusal_message"]


def _ticked(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def refusal_message(
    flow: Flow, rt: FlowRuntime, tool: str, admission: Admission, tools: Sequence[str]
) -> str:
    """The tool error the model reads for a refused call to ``tool``."""
    reason = admission.reason or admission.violation or "it is not admitted now"
    parts = [f"`{tool}` was refused and did not run: {reason}."]
    if admission.rule == "once":
        parts.append("Do not call it again.")
    parts.append("Do not tell the user it was done.")
    available = [t for t in admitted_tools(flow, rt, tools) if t != tool]
    if available:
        parts.append(f"Available now: {_ticked(available)}.")
    else:
        parts.append("No tool is available right now; continue without one.")
    guidance = postures(flow, rt)
    if guidance:
        label = "Current step" if len(guidance) == 1 else "Current steps"
        parts.append(f"{label}: {' '.join(guidance)}")
    return " ".join(parts)


def explain(flow: Flow, rt: FlowRuntime, tools: Sequence[str]) -> dict[str, Any]:
    """Where the flow stands and why each blocked tool is blocked (for ``plait show``).

    ``blocked`` maps each of ``tools`` that a call would not run cleanly for to the reason
    (in observe mode: the violation it would be recorded as).
    """
    active = active_steps(flow, rt)
    steps = {s.id: s for s in reversed(flow.steps)}
    blocked: dict[str, str] = {}
    for tool in dict.fromkeys(tools):
        admission = admit(flow, rt, tool)
        reason = admission.reason or admission.violation
        if reason is not None:
            blocked[tool] = reason
    waiting = {sid: describe(guard) for sid in active if (guard := steps[sid].done) is not None}
    return {
        "mode": flow.mode,
        "active": active,
        "done": [s.id for s in flow.steps if s.id in rt.done],
        "waiting_for": waiting,
        "allowed": admitted_tools(flow, rt, tools),
        "offered": offered_tools(flow, rt, tools),
        "blocked": blocked,
        "missing_required": missing_required(flow, rt),
        "postures": postures(flow, rt),
    }
