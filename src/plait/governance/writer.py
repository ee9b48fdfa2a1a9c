"""The normal dict form of a flow and its guards: what ``Flow.to_json`` and the documents
written by plait hold (CONTRACT.md "Governance flow files").

Defaults are omitted, unguarded edges are bare step ids, and constraints are written as
they are (a ``commit`` was expanded into ``once`` + ``never``/``until`` and
``confirm_tools`` when it was read). Reading is ``document.py``; so
``flow_from_dict(flow_to_dict(f)) == f`` for every flow. Reads only its argument.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plait.core.canonical import dumps, loads
from plait.governance.guards import (
    AllOf,
    Always,
    AnyOf,
    CalledOk,
    Captured,
    Done,
    Eq,
    Guard,
    IsSet,
    IsTrue,
    Not,
)
from plait.governance.parts import After, Before, Constraint, NeverUntil, Once, Require, Reset, Step

if TYPE_CHECKING:
    from plait.governance.flow import Flow

__all__ = ["flow_to_dict", "guard_to_dict"]


def guard_to_dict(guard: Guard) -> Any:
    """The dict form of a guard (``"always"`` or a one-key mapping)."""
    match guard:
        case Always():
            return "always"
        case IsTrue(key):
            return {"is_true": key}
        case IsSet(key):
            return {"is_set": key}
        case Eq(key=key, value=value):
            return {"eq": [key, loads(dumps(value))]}
        case Captured(keys):
            return {"captured": list(keys)}
        case CalledOk(tool):
            return {"called_ok": tool}
        case Done(step):
            return {"done": step}
        case AllOf(guards):
            return {"all": [guard_to_dict(g) for g in guards]}
        case AnyOf(guards):
            return {"any": [guard_to_dict(g) for g in guards]}
        case Not(inner):
            return {"not": guard_to_dict(inner)}


def _edge_to_dict(edge: After) -> Any:
    if edge.when is None:
        return edge.step
    return {"step": edge.step, "when": guard_to_dict(edge.when)}


def _step_to_dict(step: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"id": step.id}
    if step.after:
        out["after"] = [_edge_to_dict(e) for e in step.after]
    if step.join != "all":
        out["join"] = step.join
    if step.gate is not None:
        out["gate"] = guard_to_dict(step.gate)
    if step.allow is not None:
        out["allow"] = list(step.allow)
    if step.deny:
        out["deny"] = list(step.deny)
    if step.done is not None:
        out["done"] = guard_to_dict(step.done)
    if step.posture is not None:
        out["posture"] = step.posture
    if step.terminal:
        out["terminal"] = True
    return out


def _constraint_to_dict(constraint: Constraint) -> dict[str, Any]:
    match constraint:
        case Once(tool):
            return {"once": tool}
        case Before(first, then):
            return {"before": [first, then]}
        case NeverUntil(tool, until):
            return {"never": tool, "until": guard_to_dict(until)}
        case Require(steps):
            return {"require": list(steps)}
        case Reset(steps, when):
            return {"reset": list(steps), "when": guard_to_dict(when)}


def flow_to_dict(flow: Flow) -> dict[str, Any]:
    """The normal dict form of ``flow`` (defaults omitted); JSON- and YAML-ready."""
    out: dict[str, Any] = {"steps": [_step_to_dict(s) for s in flow.steps]}
    if flow.mode != "enforce":
        out["mode"] = flow.mode
    if flow.constraints:
        out["constraints"] = [_constraint_to_dict(c) for c in flow.constraints]
    if flow.confirm_tools:
        out["confirm_tools"] = list(flow.confirm_tools)
    if flow.ambient:
        out["ambient"] = list(flow.ambient)
    return out
